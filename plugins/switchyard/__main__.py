"""`python -m switchyard`: the command line (run with plugins/ on PYTHONPATH; the Makefile does)."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys


def _tables(value: str | None) -> list[str] | None:
    return [t.strip() for t in value.split(",") if t.strip()] if value else None


def cmd_db(args) -> int:
    from switchyard_dev.embedded import EmbeddedPostgres, psql_path
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
    from switchyard.core.batch import data_root
    from switchyard.core.datagen import generate
    from switchyard.core.spec import SpecError, load_spec
    try:
        spec = load_spec(args.spec)
        name = args.batch or f"{spec.name}-sf{args.scale:g}-s{args.streams}"
        manifest = generate(data_root() / name, spec, args.scale, args.streams, _tables(args.tables), seed=args.seed)
    except (SpecError, ValueError) as exc:
        sys.exit(f"generate: {exc}")
    print(f"{data_root() / name}: {len(manifest.entries)} files, {sum(e.bytes for e in manifest.entries):,} bytes, "
          f"{sum(e.rows for e in manifest.entries):,} rows")
    return 0


MAX_NODES = 64  # soft-NUMA nodes SQL Server addresses by port (a 64-bit affinity mask)


def plan_nodes(args) -> int:
    """Pinned ports / soft-NUMA nodes: one per stream, at most 64 (more streams share them)."""
    return args.nodes if args.nodes is not None else min(args.streams, MAX_NODES)


def cmd_plan(args) -> int:
    from switchyard.core.spec import load_spec
    from switchyard.targets import adapter_class
    nodes = plan_nodes(args)
    if args.emit == "server-config":
        if args.target != "mssql":
            sys.exit("--emit server-config is SQL Server's (--target mssql): PostgreSQL has no port-to-node mapping")
        from switchyard.mssql_server_config import server_config
        try:
            text = server_config(nodes, cpus_per_node=args.cpus_per_node, base_port=args.base_port,
                                 streams=args.streams)
        except ValueError as exc:
            sys.exit(f"plan --emit server-config: {exc}")
        print(text, end="")
        return 0
    from switchyard.core.planner import plan_tpch
    spec = load_spec(args.spec)
    plan = plan_tpch(spec, args.scale, args.streams, _tables(args.tables), producer=args.producer)
    if args.target == "postgres":
        adapter = adapter_class("postgres")(spec, uri="postgresql://plan-only", schema=args.schema)
    else:
        # Stream k's port in the script is the one the server config maps to its node.
        adapter = adapter_class("mssql")(spec, schema=args.schema, base_port=args.base_port, port_count=nodes)
    print(adapter.script(plan), end="")
    return 0


def _airflow_environment() -> dict[str, str]:
    """The Airflow this command speaks to: the environment's own when AIRFLOW_HOME is set
    (a container, a user's Airflow), else the project's local Airflow (as `airflow` here)."""
    if os.environ.get("AIRFLOW_HOME"):
        return dict(os.environ)
    from switchyard_dev import local
    env = local.airflow_env()
    local.migrate(env)
    return env


def _bridge_connection(conn_id: str) -> None:
    """Make the connection visible to the adapters, which look it up as tasks do.

    Outside a task, the Task SDK's lookup sees environment variables and secrets backends,
    not the metadata database that `airflow connections add/import` writes. This command
    runs where the airflow CLI would, so it resolves the connection the CLI's way (every
    backend, the metadata database included) and hands it on as AIRFLOW_CONN_<ID>.
    """
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    if variable in os.environ:
        return
    from airflow.exceptions import AirflowNotFoundException
    from airflow.models.connection import Connection
    try:
        conn = Connection.get_connection_from_secrets(conn_id)
    except AirflowNotFoundException:
        sys.exit(f"pool sync: no Airflow connection {conn_id!r} (create it first, see README)")
    os.environ[variable] = conn.as_json()


def cmd_pool(args) -> int:
    """Size the load pool from the target server: one slot per scheduler / core."""
    env = _airflow_environment()
    os.environ.update(env)
    _bridge_connection(args.conn_id)
    from switchyard.core.spec import load_spec
    from switchyard.targets import TargetError, adapter_for
    try:
        adapter = adapter_for(args.conn_id, load_spec(args.spec))
        slots = adapter.scheduler_count()
    except TargetError as exc:
        sys.exit(f"pool sync: {exc}")
    if slots < 1:
        sys.exit(f"pool sync: the server reports {slots} schedulers")
    description = f"Switchyard: one bulk load per {adapter.engine} scheduler / core of {args.conn_id}"
    print(f"{args.conn_id} ({adapter.engine}): {slots} schedulers -> pool {args.pool} = {slots} slots")
    if args.dry_run:
        return 0
    from switchyard_dev import local
    result = subprocess.run([local.airflow_bin(), "pools", "set", args.pool, str(slots), description],
                            env=env, text=True, capture_output=True)
    if result.returncode != 0:
        sys.exit(f"pool sync: `airflow pools set` failed:\n{result.stdout}{result.stderr}")
    return 0


def cmd_demo(args) -> int:
    from switchyard_dev.demo import run
    return run(args.scale, args.streams, spec=args.spec)


def cmd_services(args) -> int:
    from switchyard_dev import local
    if args.action == "stop":
        local.stop_services()
    else:
        for service in local.SERVICES:
            pid = local.service_pid(service)
            print(f"{service:<14} {'running (pid %d)' % pid if pid else 'stopped'}")
    return 0


def cmd_screenshots(args) -> int:
    from switchyard_dev import local
    from switchyard_dev.embedded import state_dir
    from switchyard_dev.screenshots import capture
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
    from switchyard_dev import local
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

    p = sub.add_parser("generate", help="generate a batch (TPC-H, or the shop example) with its manifest "
                                        "under the data root")
    p.add_argument("--spec", default="tpch", help="a built-in spec with a generator: tpch (default) or shop")
    p.add_argument("--scale", type=float, default=0.1)
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--batch", help="batch folder name (default <spec>-sf<scale>-s<streams>)")
    p.add_argument("--tables", help="comma-separated subset")
    p.add_argument("--seed", type=int, default=None, help="shop: the seed its rows follow from (default 1)")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("plan", help="print the SQL of a load, in execution order, without a server")
    p.add_argument("--target", choices=["postgres", "mssql"], default="postgres")
    p.add_argument("--scale", type=float, required=True)
    p.add_argument("--streams", type=int, required=True)
    p.add_argument("--tables", help="comma-separated subset")
    p.add_argument("--spec", default="tpch")
    p.add_argument("--schema", default=os.environ.get("SWITCHYARD_SCHEMA", "tpch"))
    p.add_argument("--producer", choices=["tpchgen-cli", "dbgen"], default="tpchgen-cli")
    p.add_argument("--emit", choices=["sql", "server-config"], default="sql",
                   help="sql: the load's statements in order; server-config (mssql): the instance's port, "
                        "soft-NUMA and affinity settings for pinned loads")
    p.add_argument("--nodes", type=int, default=None,
                   help=f"mssql: pinned ports = soft-NUMA nodes (default: the stream count, at most {MAX_NODES}; "
                        "stream k uses port base + (k - 1) mod nodes)")
    p.add_argument("--cpus-per-node", type=int, default=1, help="mssql: CPUs per soft-NUMA node (default 1)")
    p.add_argument("--base-port", type=int, default=2000, help="mssql: the first pinned port (default 2000)")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("pool", help="size the Airflow load pool from the target server's schedulers")
    p.add_argument("action", choices=["sync"])
    p.add_argument("--conn-id", default=os.environ.get("SWITCHYARD_CONN_ID", "switchyard_target"),
                   help="the target's Airflow connection (default: SWITCHYARD_CONN_ID or switchyard_target)")
    p.add_argument("--pool", default=os.environ.get("SWITCHYARD_POOL", "switchyard_loads"),
                   help="the pool the loads run in (default: SWITCHYARD_POOL or switchyard_loads)")
    p.add_argument("--spec", default="tpch")
    p.add_argument("--dry-run", action="store_true", help="print the size, leave the pool alone")
    p.set_defaults(func=cmd_pool)

    p = sub.add_parser("demo", help="run the main job end to end on this machine")
    p.add_argument("--spec", default="tpch", help="the built-in example to load: tpch (default) or shop")
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
