"""`python -m switchyard`: the command line (run with plugins/ on PYTHONPATH; the Makefile does)."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys


def _tables(value: str | None) -> list[str] | None:
    return [t.strip() for t in value.split(",") if t.strip()] if value else None


def cmd_db(args) -> int:
    from .embedded import EmbeddedPostgres, psql_path
    pg = EmbeddedPostgres()
    if args.action == "start":
        print(pg.start())
    elif args.action == "uri":
        print(pg.start())
    elif args.action == "stop":
        pg.stop()
    elif args.action == "status":
        print("running" if pg.is_running() else "stopped")
    elif args.action == "psql":
        uri = pg.start()
        return subprocess.call([str(psql_path()), uri])
    return 0


def cmd_generate(args) -> int:
    from .batch import data_root
    from .datagen import generate_tpch
    from .spec import load_spec
    name = args.batch or f"tpch-sf{args.scale:g}-s{args.streams}"
    manifest = generate_tpch(data_root() / name, load_spec("tpch"), args.scale, args.streams, _tables(args.tables))
    print(f"{data_root() / name}: {len(manifest.entries)} files, {sum(e.bytes for e in manifest.entries):,} bytes")
    return 0


def cmd_plan(args) -> int:
    from .planner import plan_tpch
    from .spec import load_spec
    from .targets import adapter_class
    spec = load_spec(args.spec)
    plan = plan_tpch(spec, args.scale, args.streams, _tables(args.tables), producer=args.producer)
    if args.emit == "server-config":
        from .targets.mssql import server_config  # type: ignore[attr-defined]
        print(server_config(args.streams))
        return 0
    adapter = adapter_class(args.target)(spec, **({"uri": "postgresql://plan-only"} if args.target == "postgres"
                                                   else {}), schema=args.schema)
    print(adapter.script(plan))
    return 0


def cmd_demo(args) -> int:
    from .demo import run
    return run(args.scale, args.streams)


def cmd_services(args) -> int:
    from . import local
    if args.action == "stop":
        local.stop_services()
    else:
        for service in local.SERVICES:
            pid = local.service_pid(service)
            print(f"{service:<14} {'running (pid %d)' % pid if pid else 'stopped'}")
    return 0


def cmd_screenshots(args) -> int:
    from . import local
    from .embedded import state_dir
    from .screenshots import capture
    run_id = args.run_id
    if not run_id:
        runs = local.Api().get(f"/api/v2/dags/{args.dag_id}/dagRuns?order_by=-run_after&limit=1")["dag_runs"]
        if not runs:
            print(f"no run of {args.dag_id} yet: run the demo first")
            return 1
        run_id = runs[0]["dag_run_id"]
    capture(args.dag_id, run_id, state_dir() / "screenshots")
    return 0


def cmd_airflow(args) -> int:
    """Any airflow command with the project's local Airflow settings."""
    from . import local
    env = local.airflow_env()
    local.migrate(env)
    return subprocess.call([local.airflow_bin(), *args.rest], env=env)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m switchyard",
                                     description="Parallel, validated, partition-switched bulk loads.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("db", help="the embedded PostgreSQL target")
    p.add_argument("action", choices=["start", "stop", "status", "uri", "psql"])
    p.set_defaults(func=cmd_db)

    p = sub.add_parser("generate", help="generate a TPC-H batch with its manifest under the data root")
    p.add_argument("--scale", type=float, default=0.1)
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--batch", help="batch folder name (default tpch-sf<scale>-s<streams>)")
    p.add_argument("--tables", help="comma-separated subset")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("plan", help="print the SQL of a load, in execution order, without a server")
    p.add_argument("--target", choices=["postgres", "mssql"], default="postgres")
    p.add_argument("--scale", type=float, required=True)
    p.add_argument("--streams", type=int, required=True)
    p.add_argument("--tables", help="comma-separated subset")
    p.add_argument("--spec", default="tpch")
    p.add_argument("--schema", default=os.environ.get("SWITCHYARD_SCHEMA", "tpch"))
    p.add_argument("--producer", choices=["tpchgen-cli", "dbgen"], default="tpchgen-cli")
    p.add_argument("--emit", choices=["sql", "server-config"], default="sql")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("demo", help="run the main job end to end on this machine")
    p.add_argument("--scale", type=float, default=0.1)
    p.add_argument("--streams", type=int, default=4)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("services", help="the local Airflow services")
    p.add_argument("action", choices=["status", "stop"])
    p.set_defaults(func=cmd_services)

    p = sub.add_parser("screenshots", help="PNGs of the local Airflow UI and a run's report (headless Chromium)")
    p.add_argument("--dag-id", default="switchyard_tpch")
    p.add_argument("--run-id", help="default: the DAG's latest run")
    p.set_defaults(func=cmd_screenshots)

    p = sub.add_parser("airflow", help="run an airflow command with the local settings")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_airflow)

    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
