"""`switchyard airflow dags test` while the local scheduler runs.

Whether or not the scheduler runs, a test with a logical date at which the DAG has a run is
refused, naming that run: `airflow dags test` deletes the run it finds at its logical date.
Without the scheduler, a test while a run of the DAG is running is refused too, naming it: the
test run would wait behind it, and nothing carries on a run whose process was stopped.

`airflow dags test` creates an ordinary running DAG run and runs its tasks in its own process.
A scheduler examines every running run of an unpaused DAG (`DagRun.get_running_dag_runs_to_examine`
selects by state and `DagModel.is_paused`, whoever created the run) and queues its scheduled
tasks to its own executor, so the two processes would run the same run at once. A paused
DAG's runs and task instances are left alone by the scheduler. So, while the local scheduler
runs, the wrapper:

- pauses the DAG for the test run (if it is not paused already) and says so;
- refuses, naming them, while other runs of the DAG run (a test run ignores `max_active_runs`,
  and a paused DAG's running runs would stall);
- when `airflow dags test` ends, however it ends (success, failure, Ctrl-C, SIGTERM), marks
  its run failed if it is still running (else the scheduler would pick it up once the DAG is
  unpaused) and gives up the run lease that run took on the target (its stats task, which
  does that, did not run: the DAG's next run would wait for the lease to lapse), then
  unpauses the DAG if it paused it, and says so.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error

from switchyard_dev import local, runs

# `airflow dags test`'s options that take a value (3.3); every other option is a flag.
_WITH_VALUE = {"-B", "--bundle-name", "-c", "--conf", "-f", "--dagfile-path", "--mark-success-pattern",
               "--save-dagrun"}
# How long `airflow dags test` gets to end after a Ctrl-C or SIGTERM before it is killed. Short:
# Airflow 3.3's task runner counts a KeyboardInterrupt inside a task as that task's failure, and
# `dags test` then goes on with its retry and the next tasks, so a Ctrl-C that lands in a task
# would not stop the run (a small batch's run could even finish and publish). Everything a step
# does on the target is transactional: a killed task's work is rolled back by the server, and the
# run is then marked failed and its lease given up (below).
STOP_GRACE_SECONDS = 2.0
PREFIX = "switchyard airflow dags test"


def _positional(rest: list[str]) -> list[str] | None:
    """The positional arguments of an `airflow dags test ...` command line (DAG_ID, LOGICAL_DATE);
    None for any other command and for `dags test --help`."""
    if rest[:2] != ["dags", "test"]:
        return None
    out = []
    args = iter(rest[2:])
    for arg in args:
        if arg in ("-h", "--help"):
            return None
        if arg in _WITH_VALUE:
            next(args, None)
        elif not arg.startswith("-"):
            out.append(arg)
    return out


def dag_of(rest: list[str]) -> str | None:
    """The DAG id of an `airflow dags test ...` command line; None for any other command (and
    for `dags test --help`)."""
    return (_positional(rest) or [None])[0]


def logical_date_of(rest: list[str]) -> str | None:
    """The logical date an `airflow dags test DAG_ID LOGICAL_DATE` command line gives, as written."""
    positional = _positional(rest) or []
    return positional[1] if len(positional) > 1 else None


def list_runs(dag_id: str, env: dict[str, str]) -> list[dict]:
    """`airflow dags list-runs` of the DAG, from the metadata database; [] for a DAG not in it yet.
    Read once per test run: each Airflow CLI command takes seconds to start."""
    import json
    out = subprocess.run([local.airflow_bin(), "dags", "list-runs", dag_id, "-o", "json"], env=env,
                         capture_output=True, text=True)
    listed = next((line for line in out.stdout.splitlines() if line.startswith("[")), None)
    if out.returncode != 0 or listed is None:
        return []
    return json.loads(listed)


def runs_at(listed: list[dict], logical_date: str) -> list[dict]:
    """The runs of `listed` at `logical_date` (read as Airflow's CLI reads it: pendulum, UTC
    unless it says otherwise)."""
    import pendulum
    when = pendulum.parse(logical_date, tz="UTC")
    return [r for r in listed if r.get("logical_date") and pendulum.parse(r["logical_date"]) == when]


def refused_behind_a_running_run(dag_id: str, listed: list[dict]) -> bool:
    """Without the local scheduler: say so, naming them, where the metadata database has runs of
    the DAG running (another shell's test run, or a run whose process was stopped, which nothing
    carries on now). The test run's plan would wait behind such a run as behind an earlier run
    (runs of a DAG load one at a time, in date order), for good where that run's process is gone."""
    running = [r for r in listed if r.get("state") == "running"]
    for r in running:
        say(f"run {r['run_id']} of {dag_id} is running (since {r.get('start_date') or 'its start'}) and the local "
            f"scheduler is not: another shell's test run, or a run whose process was stopped, which nothing carries "
            f"on. A test run now would wait behind it until it ends (runs of this DAG go one at a time), so none was "
            f"started. Wait for that shell's run; if its process is gone, start the services (`switchyard services "
            f"start`: the scheduler carries that run on) or, with them running, end it: "
            f"{runs.fail_command(dag_id, r['run_id'])}")
    return bool(running)


def refused_for_a_run_at_its_date(dag_id: str, rest: list[str], listed: list[dict]) -> bool:
    """Say so, naming it, where a run of the DAG has the test's logical date: `airflow dags test`
    deletes the run it finds at its logical date before it makes its own
    (airflow.models.dagrun.get_or_create_dagrun), so a backfill's or a schedule's successful run
    would go from the history, and its date would count as tested, not loaded."""
    logical_date = logical_date_of(rest)
    found = runs_at(listed, logical_date) if logical_date else []
    for r in found:
        say(f"run {r['run_id']} of {dag_id} ({r['state']}) has the logical date {r['logical_date']}, which "
            f"`airflow dags test` would delete before its own run at that date: none was started. Test without a "
            f"logical date (the test run then takes now) or with another one; to test that date, delete that run "
            f"first (the grid's Delete Dag Run) if you mean to lose it.")
    return bool(found)


def schedule_of(dag_id: str, env: dict[str, str]) -> str | None:
    """The DAG's schedule as the metadata database has it (its timetable's summary), None for a DAG
    run on demand or not in it yet."""
    import json
    out = subprocess.run([local.airflow_bin(), "dags", "details", dag_id, "-o", "json"], env=env,
                         capture_output=True, text=True)
    listed = next((line for line in out.stdout.splitlines() if line.startswith("[")), None)
    if out.returncode != 0 or listed is None:
        return None
    details = (json.loads(listed) or [{}])[0]
    if str(details.get("timetable_periodic")).lower() != "true":
        return None
    return str(details.get("timetable_summary") or details.get("timetable_description") or "a schedule")


def refused_for_a_future_date(dag_id: str, rest: list[str], env: dict[str, str]) -> bool:
    """Say so where the test's logical date is in the future and the DAG runs on a schedule: a run
    at a time of the schedule takes that time's run, which the scheduler then never makes (it makes
    no scheduled run at a logical date that has one, and goes on to the next time), so that time's
    batch would never be loaded by the schedule. A batch of the future is tested dated now, with
    the `batch` param."""
    import pendulum
    logical_date = logical_date_of(rest)
    if not logical_date:
        return False
    try:
        when = pendulum.parse(logical_date, tz="UTC")
    except (ValueError, pendulum.parsing.exceptions.ParserError):
        return False     # `airflow dags test` says what it cannot read
    if when <= pendulum.now("UTC"):
        return False
    schedule = schedule_of(dag_id, env)
    if schedule is None:
        return False
    say(f"the logical date {logical_date} is in the future, and {dag_id} runs on a schedule ({schedule}): a test run "
        f"dated at a time of the schedule takes that time's run, which the scheduler then never makes, and that "
        f"time's batch would not be loaded by the schedule. None was started. Test a batch of the future dated now, "
        f"with the batch param: switchyard airflow dags test {dag_id} -c '{{\"batch\": \"<its folder>\"}}'")
    return True


def say(text: str) -> None:
    print(f"{PREFIX}: {text}", file=sys.stderr, flush=True)


def run(dag_id: str, command: list[str], env: dict[str, str]) -> int:
    """Run `command` (an `airflow dags test` of `dag_id`) beside the local scheduler, if it runs."""
    scheduled = "scheduler" in local.running_services()
    # The runs are read where a refusal below needs them, once.
    listed = list_runs(dag_id, env) if logical_date_of(command[1:]) or not scheduled else []
    if (refused_for_a_run_at_its_date(dag_id, command[1:], listed)
            or refused_for_a_future_date(dag_id, command[1:], env)):
        return 1
    if not scheduled:
        if refused_behind_a_running_run(dag_id, listed):
            return 1
        return subprocess.call(command, env=env)
    api = local.Api()
    try:
        api.get("/api/v2/monitor/health")
        dag = api.get(f"/api/v2/dags/{runs._q(dag_id)}")
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
        dag = None  # not in the metadata yet: the test run writes it there, paused ([core] dags_are_paused_at_creation)
    except (urllib.error.URLError, OSError):
        say(f"the local scheduler runs, which would also schedule this test run's tasks, and its api-server "
            f"does not answer on {local.api_url()} to pause {dag_id} for it. Start it (`switchyard services "
            f"start`), or stop the services (`switchyard services stop`) and test again.")
        return 2
    if dag is None:
        return subprocess.call(command, env=env)

    if _refused(api, dag_id):
        return 1
    interrupted: list[int] = []
    child: list[subprocess.Popen] = []

    def forward(signum, _frame):
        interrupted.append(signum)
        if child and child[0].poll() is None:
            try:
                os.killpg(child[0].pid, signum)
            except OSError:
                pass

    handlers = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    paused_here = False
    before: set[str] = set()
    try:
        if not dag.get("is_paused"):
            api.patch(f"/api/v2/dags/{runs._q(dag_id)}", {"is_paused": True})
            paused_here = True
            say(f"the local scheduler runs: {dag_id} is paused for this test run (else the scheduler would "
                f"also run its tasks); it is unpaused when the test run ends.")
            if _refused(api, dag_id):  # a run the scheduler started before the pause took effect
                return 1
        # Every run of the DAG so far: the test run is the one not among them.
        before = {r["dag_run_id"] for r in runs.all_runs(api, dag_id)}
        if interrupted:
            return 128 + interrupted[0]
        # A process group of its own: a Ctrl-C reaches it once, through `forward`.
        child.append(subprocess.Popen(command, env=env, process_group=0))
        stopping_since = None
        while (code := child[0].poll()) is None:
            if interrupted and stopping_since is None:
                stopping_since = time.monotonic()
            if stopping_since is not None and time.monotonic() - stopping_since > STOP_GRACE_SECONDS:
                say(f"airflow dags test did not stop within {STOP_GRACE_SECONDS:g} s: killed")
                os.killpg(child[0].pid, signal.SIGKILL)
                stopping_since = float("inf")
            time.sleep(0.2)
        if interrupted:
            return 128 + interrupted[0]
        return 128 - code if code < 0 else code
    finally:
        try:
            if child:
                _end_test_runs(api, dag_id, before, env, dag.get("fileloc"))
        finally:
            if paused_here:
                api.patch(f"/api/v2/dags/{runs._q(dag_id)}", {"is_paused": False})
                say(f"{dag_id} is unpaused again.")
            for s, handler in handlers.items():
                signal.signal(s, handler)


def _end_test_runs(api: local.Api, dag_id: str, before: set[str], env: dict[str, str],
                   dag_file: str | None = None) -> None:
    """For the test run that did not succeed (it was stopped, or failed): mark it failed if
    `airflow dags test` left it running, and give up the run lease it took on its target."""
    for r in runs.all_runs(api, dag_id):
        if r.get("triggered_by") != "test" or r["dag_run_id"] in before or r["state"] == "success":
            continue
        stopped = r["state"] in runs.ACTIVE
        if stopped:
            runs.fail(api, dag_id, r["dag_run_id"])
            say(f"the test run {r['dag_run_id']} did not finish: marked failed, so the scheduler does not "
                f"go on with it.")
        _release_lease(dag_id, r, env, "did not finish" if stopped else r["state"], dag_file)


def _target_of(dag_id: str, dag_file: str | None) -> tuple[str, str, str]:
    """(spec, schema, default connection) of `dag_id` as its DAG file builds it (a DAG built from
    its own settings file, one of several, has its own), else as the local DAG's settings say."""
    if dag_file:
        import runpy
        from airflow.sdk import DAG
        for value in runpy.run_path(dag_file).values():
            if isinstance(value, DAG) and value.dag_id == dag_id and "setup.plan" in value.task_dict:
                plan = value.task_dict["setup.plan"]
                return plan.spec, plan.schema, str(value.params.get("conn_id") or "")
    from switchyard.airflow.dag_factory import DagConfig
    config = DagConfig.from_env()
    return config.spec, config.schema, config.conn_id


def _release_lease(dag_id: str, run: dict, env: dict[str, str], ended: str, dag_file: str | None = None) -> None:
    """A stopped test run never reaches its stats task, which gives up the run's lease on the
    target schema: without this, the DAG's next run would wait for the lease to lapse (30
    minutes by default). A failed run's stats task did, and this finds nothing to give up.
    Only this run's lease: the release names its holder. The test run's tasks ran in the
    process that has ended, so none of them still uses it."""
    holder = f"{dag_id}/{run['dag_run_id']}"
    # Airflow's connection lookup and the DAG's settings, as the test run had them (this
    # process ends after it).
    os.environ.update(env)
    try:
        from switchyard.airflow.connections import adapter_for, bridge_connection
        from switchyard.core.spec import load_spec
        spec, schema, default_conn = _target_of(dag_id, dag_file)
        conn_id = str((run.get("conf") or {}).get("conn_id") or default_conn)
        bridge_connection(conn_id)
        adapter_for(conn_id, load_spec(spec), schema=schema, lease_holder=holder).release_lease()
    except Exception as exc:  # noqa: BLE001 - said, not raised: the lease then lapses by itself
        say(f"could not give up the run lease of {holder} on the target ({type(exc).__name__}: {exc}); "
            f"it lapses by itself, and the next run's setup.plan names it until then.")
        return
    say(f"the test run {run['dag_run_id']} {ended}: its run lease on the target schema "
        f"{schema}, if it took one, is given up, so the next run does not wait for it to lapse.")



def _refused(api: local.Api, dag_id: str) -> bool:
    """Say so, naming them, if other runs of the DAG run (a test run now would run beside them)."""
    running = [r for r in runs.active_runs(api, dag_id) if r["state"] == "running"]
    wait = runs.batch_wait_seconds() if running else None
    for r in running:
        say(f"run {r['dag_run_id']} of {dag_id} {runs.what_it_does(api, r, wait)}. A test run beside it would "
            f"interleave with it (runs of this DAG go one at a time), so none was started. Wait for it "
            f"(`switchyard runs`), trigger this run instead (it then waits its turn: `switchyard airflow dags "
            f"trigger {dag_id} ...`), or end that run: {runs.fail_command(dag_id, r['dag_run_id'])}")
    return bool(running)
