"""CLI test runs leave no trace, nothing waits in silence, and a backfill runs as the docs say.

`airflow dags test` parses the DAG file in the shell it is run from. With the local stack's
settings file in the Airflow home, that shell builds the same DAG as the scheduler: the test
run changes neither the DAG's schedule nor its paused state, so no scheduled run appears after
it. With the local scheduler running, `switchyard airflow dags test` pauses the DAG for the test
run (else the scheduler would run its tasks too) and unpauses it however the test run ends, and
refuses, naming it, while another run of the DAG runs. A run queued behind another run of its DAG is named within seconds, with what that run
waits for and the command that ends it (docs/cli-test-runs.md).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import psycopg
import pytest
import yaml

from helpers import drop_metadata, files_fingerprint, fingerprint, free_port, metadata_connection, run_lease

SWITCHYARD = str(Path(sys.executable).with_name("switchyard"))
DAG_ID = "switchyard_tpch"
# The settings that say which local stack a shell talks to (each process's own, not the DAG's).
OWN = ("SWITCHYARD_AIRFLOW_HOME", "SWITCHYARD_AIRFLOW_PORT", "SWITCHYARD_PG_PORT", "SWITCHYARD_DATA_ROOT",
       "SWITCHYARD_RUNS_DIR", "SWITCHYARD_AIRFLOW_LOG_PORT", "SWITCHYARD_AIRFLOW_TRIGGER_LOG_PORT",
       "SWITCHYARD_STATE_DIR")


def plain_shell(**extra: str) -> dict[str, str]:
    """A new shell's environment: which local stack it talks to, none of the DAG's settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHYARD_", "AIRFLOW"))}
    env.update({k: os.environ[k] for k in OWN if k in os.environ})
    env.update(extra)
    return env


def switchyard(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([SWITCHYARD, *args], env=env, text=True, capture_output=True, timeout=timeout)


def metadata(query: str, *args) -> list[tuple]:
    """Rows of the local stack's metadata database (the embedded server's), as every shell's
    `airflow` reads them."""
    with metadata_connection() as conn:
        return conn.execute(query, args).fetchall()


def dag_state(dag_id: str = DAG_ID) -> dict:
    """What the metadata says of the DAG: paused, schedule, and when the scheduler would create a
    run (`airflow dags details` prints these columns of its row: next_dagrun_run_after is
    next_dagrun_create_after, next_dagrun_logical_date is next_dagrun). Read from the database:
    an `airflow` process per look cost the suite seconds each, and reads the same row."""
    keys = ("is_paused", "timetable_summary", "timetable_description", "next_dagrun_run_after",
            "next_dagrun_logical_date")
    rows = metadata("SELECT is_paused, timetable_summary, timetable_description, next_dagrun_create_after, "
                    "next_dagrun FROM dag WHERE dag_id = %s", dag_id)
    assert rows, f"the metadata database has no DAG {dag_id}"
    return dict(zip(keys, rows[0]))


def run_types(dag_id: str = DAG_ID) -> list[str]:
    """The kinds of the DAG's runs, newest first (`airflow dags list-runs`' order), by their ids."""
    return [r[0].split("__")[0] for r in metadata("SELECT run_id FROM dag_run WHERE dag_id = %s "
                                                  "ORDER BY logical_date DESC NULLS FIRST, id DESC", dag_id)]


@pytest.fixture
def stack_home(request, tmp_path, monkeypatch, pg_uri, data_root):
    """A local stack of its own (home, ports), its metadata database dropped afterwards. A test
    marked chaos (its services run minutes) runs in `make chaos` only, as the `scheduler` fixture's."""
    from switchyard_dev import local
    if request.node.get_closest_marker("chaos") and "chaos" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("several minutes with a real scheduler: runs in `make chaos` (pytest -m chaos)")
    home = tmp_path / "airflow"
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(home))
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_PORT", str(free_port()))
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_LOG_PORT", str(free_port()))
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_TRIGGER_LOG_PORT", str(free_port()))
    monkeypatch.setenv("SWITCHYARD_RUNS_DIR", str(tmp_path / "runs"))
    for variable in [v for v in os.environ if v.startswith("SWITCHYARD_")]:
        if variable not in OWN:
            monkeypatch.delenv(variable)
    yield home
    local.stop_services(timeout=10)
    drop_metadata(home)


def test_a_cli_test_run_from_another_shell_leaves_the_dag_as_it_was(stack_home, pg_uri, tpch_batch, schema,
                                                                    monkeypatch):
    from switchyard_dev import local
    name, _ = tpch_batch
    # The local stack as the demo leaves it: its DAG's settings in the home (no schedule), the DAG
    # parsed with them, unpaused, the target connection in the metadata.
    local.write_dag_settings({"SWITCHYARD_SCHEMA": schema, "SWITCHYARD_STREAMS": "3"})
    services = local.airflow_env(extra={"SWITCHYARD_SCHEMA": schema, "SWITCHYARD_STREAMS": "3",
                                        "SWITCHYARD_SCHEDULE": "none"})
    local.migrate(services)
    for command in (["dags", "reserialize"], ["dags", "unpause", DAG_ID],
                    ["connections", "add", "switchyard_target", "--conn-uri", pg_uri],
                    ["pools", "set", "switchyard_loads", "4", "loads"]):
        local.airflow(*command, env=services)
    before = dag_state()
    assert before["is_paused"] in (False, "False") and before["next_dagrun_run_after"] is None, before

    # The documented command, from a shell with none of the DAG's settings (its default schedule
    # would be nightly). One table: what it leaves of the DAG does not depend on how much it loads.
    done = switchyard("airflow", "dags", "test", DAG_ID, "-c", json.dumps({"batch": name, "tables": ["orders"]}),
                      env=plain_shell())
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert dag_state() == before
    assert run_types() == ["manual"]
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}"."orders"').fetchone()[0] > 0

    # A shell that says otherwise is stopped before Airflow parses anything, naming both values.
    done = switchyard("airflow", "dags", "test", DAG_ID, "-c", json.dumps({"batch": name}),
                      env=plain_shell(SWITCHYARD_SCHEDULE="0 2 * * *"))
    assert done.returncode == 2
    assert "SWITCHYARD_SCHEDULE='0 2 * * *' (the file: 'none')" in done.stderr, done.stderr[-2000:]
    assert dag_state() == before and run_types() == ["manual"]


@pytest.mark.chaos
def test_demo_then_a_cli_test_run_then_the_demo_again(stack_home, pg_uri, data_root, schema, monkeypatch, capsys):
    """The sequence a new user tries: `make demo`, `switchyard airflow dags test ...` from a plain
    shell, `make demo` again; then a run held behind one that waits for a batch nobody writes."""
    from switchyard_dev import demo, local, runs
    monkeypatch.setenv("SWITCHYARD_SCHEMA", schema)
    assert demo.run(0.01, 2, timeout=600) == 0
    batch = demo.batch_name(0.01, 2)
    state = dag_state()

    # The scheduler runs: the wrapper pauses the DAG for the test run and unpauses it after, so
    # every task of the test run is run by `airflow dags test` itself, once.
    done = switchyard("airflow", "dags", "test", DAG_ID, "-c", json.dumps({"batch": batch}), env=plain_shell())
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert f"{DAG_ID} is paused for this test run" in done.stderr, done.stderr[-3000:]
    assert f"{DAG_ID} is unpaused again" in done.stderr, done.stderr[-3000:]
    api = local.Api()
    test_run = next(r for r in api.get_all(f"/api/v2/dags/{DAG_ID}/dagRuns", "dag_runs")
                    if r["triggered_by"] == "test")
    assert test_run["state"] == "success"
    tis = api.get_all(f"/api/v2/dags/{DAG_ID}/dagRuns/{runs._q(test_run['dag_run_id'])}/taskInstances",
                      "task_instances")
    ran_here = re.findall(r"\[DAG TEST\] starting task_id=(\S+)", done.stdout + done.stderr)
    assert sorted(ran_here) == sorted(t["task_id"] for t in tis), "the scheduler ran tasks of the test run"
    assert {(t["state"], t["try_number"]) for t in tis} == {("success", 1)}
    time.sleep(15)  # scheduler loops: a nightly DAG unpaused would have had its run created by now
    assert dag_state() == state and "scheduled" not in run_types()
    capsys.readouterr()
    assert demo.run(0.01, 2, timeout=600) == 0
    assert "queued behind" not in capsys.readouterr().out

    # A test run stopped with Ctrl-C once its setup took the run lease: its run is marked failed (the
    # scheduler does not go on with it once the DAG is unpaused), its lease is given up (the next
    # run does not wait for it to lapse) and the DAG is unpaused.
    before = {r["dag_run_id"] for r in api.get_all(f"/api/v2/dags/{DAG_ID}/dagRuns", "dag_runs")}
    test = subprocess.Popen([SWITCHYARD, "airflow", "dags", "test", DAG_ID, "-c", json.dumps({"batch": batch})],
                            env=plain_shell(), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 180
    while True:
        assert time.monotonic() < deadline and test.poll() is None, "the test run did not start"
        new = [r for r in api.get_all(f"/api/v2/dags/{DAG_ID}/dagRuns", "dag_runs") if r["dag_run_id"] not in before]
        if new and any(t["task_id"] == "setup.plan" and t["state"] == "success" for t in api.get_all(
                f"/api/v2/dags/{DAG_ID}/dagRuns/{runs._q(new[0]['dag_run_id'])}/taskInstances", "task_instances")):
            break
        time.sleep(1)
    assert run_lease(pg_uri, schema) == (f"{DAG_ID}/{new[0]['dag_run_id']}",)
    test.send_signal(signal.SIGINT)
    out, err = test.communicate(timeout=120)
    assert test.returncode == 130, (out + err)[-3000:]
    assert (f"the test run {new[0]['dag_run_id']} did not finish: its run lease on the target schema {schema}"
            in err), err[-3000:]
    assert f"{DAG_ID} is unpaused again" in err
    assert run_lease(pg_uri, schema) is None, err[-3000:]
    time.sleep(10)
    run = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{runs._q(new[0]['dag_run_id'])}")
    assert run["state"] == "failed"
    tis = api.get_all(f"/api/v2/dags/{DAG_ID}/dagRuns/{runs._q(new[0]['dag_run_id'])}/taskInstances",
                      "task_instances")
    assert not [t["task_id"] for t in tis if t["state"] in ("queued", "running", "scheduled")]
    assert dag_state()["is_paused"] in (False, "False")

    # A run that waits for a batch nobody writes holds the DAG; the next run says so within 30 s.
    stuck = api.post(f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": {"batch": "never-written"}})
    deadline = time.monotonic() + 60
    # Waiting: its wait_for_batch names the manifest as the worker resolved it (the data root).
    manifest = data_root / "never-written" / "manifest.json"
    while runs.what_it_does(api, api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{runs._q(stuck['dag_run_id'])}"),
                            None) != f"is waiting for batch never-written ({manifest})":
        assert time.monotonic() < deadline
        time.sleep(1)
    # Followed as the demo follows its run, a run whose progress stands still says what it waits for.
    from switchyard_dev import LocalStackError
    monkeypatch.setattr(demo._Waits, "QUIET_SECONDS", 1.0)
    capsys.readouterr()
    with pytest.raises(LocalStackError, match="did not finish in 8s"):
        demo.follow(api, stuck["dag_run_id"], 8, dag_id=DAG_ID, say_waits=True)
    followed = capsys.readouterr().out
    assert f"    the run is waiting for batch never-written ({manifest}; up to 6 h" in followed, followed
    assert followed.count("the run is waiting") == 1, followed     # said once while it stays so
    held = api.post(f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": {"batch": batch}})
    said: list[str] = []
    watch = runs.QueuedWatch(api, DAG_ID, held["dag_run_id"], out=said.append)
    started = time.monotonic()
    while not said:
        assert time.monotonic() - started < 30, "nothing said within 30 s"
        watch.check(api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{runs._q(held['dag_run_id'])}"))
        time.sleep(1)
    command = f"switchyard runs fail {DAG_ID} {stuck['dag_run_id']}"
    # A test run is refused while that run holds the DAG, naming it, within 30 s; the DAG stays unpaused.
    started = time.monotonic()
    done = switchyard("airflow", "dags", "test", DAG_ID, "-c", json.dumps({"batch": batch}), env=plain_shell(),
                      timeout=30)
    assert done.returncode == 1 and time.monotonic() - started < 30, done.stderr[-3000:]
    assert f"run {stuck['dag_run_id']} of {DAG_ID} is waiting for batch never-written" in done.stderr, done.stderr
    assert command in done.stderr and "is paused for this test run" not in done.stderr
    assert not api.get(f"/api/v2/dags/{DAG_ID}")["is_paused"]
    assert (f"queued behind {stuck['dag_run_id']}, which is waiting for batch never-written ({manifest}; up to 6 h"
            in said[0]), said
    assert said[1].endswith(command)
    note = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{runs._q(held['dag_run_id'])}")["note"]
    assert f"queued behind {stuck['dag_run_id']}" in note and f"`{command}`" in note
    status = switchyard("services", "status", env=plain_shell())
    assert stuck["dag_run_id"] in status.stdout and held["dag_run_id"] in status.stdout, status.stdout
    # The services keep the data root of the shell that started them (the demo's here), and say it.
    assert local.running_data_root() == data_root.resolve()
    assert f"data root            {data_root.resolve()} (the scheduler's, kept until it stops)" in status.stdout
    listed = switchyard("runs", env=plain_shell())
    assert f"{held['dag_run_id']}" in listed.stdout and command in listed.stdout, listed.stdout

    # The documented command ends the stuck run; the held one then runs to its end.
    done = switchyard(*command.split()[1:], env=plain_shell())
    assert done.returncode == 0 and "failed" in done.stdout, done.stdout + done.stderr
    assert demo.follow(api, held["dag_run_id"], 600, dag_id=DAG_ID) == "success"
    note = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{runs._q(held['dag_run_id'])}")["note"]
    assert "run success." in note and "queued behind" not in note
    # A run that has ended is left as it is: marked failed, its record would no longer say what it did.
    again = switchyard("runs", "fail", DAG_ID, held["dag_run_id"], env=plain_shell())
    assert again.returncode == 1 and "is success, not running or queued: left as it is" in again.stdout, again.stdout
    assert api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{runs._q(held['dag_run_id'])}")["state"] == "success"


def when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# --- a monthly backfill, as docs/load-modes.md says ------------------------------------------------
MONTHS = [f"{2025 + (m > 12)}-{(m - 1) % 12 + 1:02d}-01" for m in range(12, 24)]  # 2025-12 .. 2026-11


def monthly_spec(folder: Path) -> Path:
    """orders alone, in append mode keeping the three newest batches."""
    from switchyard.core.spec import spec_file
    raw = yaml.safe_load(spec_file("tpch").read_text())
    raw["name"] = "monthly"
    raw["tables"] = {"orders": dict(raw["tables"]["orders"], mode="append", keep=3)}
    path = folder / "monthly.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.mark.chaos
def test_a_monthly_backfill_through_the_scheduler_keeps_the_last_three_batches(stack_home, pg_uri, data_root,
                                                                              schema, tmp_path):
    from switchyard.core.datagen import generate_tpch_day
    from switchyard.core.spec import load_spec
    from switchyard_dev import local
    spec_path = monthly_spec(tmp_path)
    spec = load_spec(str(spec_path))
    for i, month in enumerate(MONTHS):
        generate_tpch_day(data_root / month, spec, 0.01, 36, 3 * i + 1, 3)
    dag_id = "switchyard_monthly"
    # The how-to's commands, verbatim but for the names; the services run on demand first (as
    # `make demo` leaves them), then get the monthly schedule.
    shell = plain_shell(SWITCHYARD_SPEC=str(spec_path), SWITCHYARD_DAG_ID=dag_id, SWITCHYARD_SCHEMA=schema,
                        SWITCHYARD_STREAMS="3")
    started = switchyard("services", "start", env=shell, timeout=600)
    assert started.returncode == 0, (started.stdout + started.stderr)[-3000:]
    shell = plain_shell()  # from here on the settings file speaks for the DAG
    for command in (["connections", "add", "switchyard_target", "--conn-uri", pg_uri],
                    ["pools", "set", "switchyard_loads", "4", "loads"]):
        assert switchyard("airflow", *command, env=shell).returncode == 0
    api = local.Api()
    deadline = time.monotonic() + 240
    while not api.exists(f"/api/v2/dags/{dag_id}"):
        assert time.monotonic() < deadline, "the DAG was not parsed"
        time.sleep(2)
    # The schedule set while the services run is the DAG's when the command returns: a backfill
    # created right after it meets the schedule, not the on-demand DAG of the last parse.
    scheduled = switchyard("services", "start", env=plain_shell(SWITCHYARD_SCHEDULE="0 2 1 * *"), timeout=600)
    assert scheduled.returncode == 0, (scheduled.stdout + scheduled.stderr)[-3000:]
    assert "the DAG's settings changed" in scheduled.stdout
    created = switchyard("airflow", "backfill", "create", "--dag-id", dag_id, "--from-date", MONTHS[0],
                         "--to-date", f"{MONTHS[-1]}T02:00", "--max-active-runs", "1", env=shell)
    assert created.returncode == 0, (created.stdout + created.stderr)[-3000:]

    def backfill_runs() -> list[dict]:
        return api.get_all(f"/api/v2/dags/{dag_id}/dagRuns?run_type=backfill", "dag_runs")

    # A new DAG is paused: its backfill's runs wait, queued, until it is unpaused.
    time.sleep(10)
    assert len(backfill_runs()) == 12 and {r["state"] for r in backfill_runs()} == {"queued"}
    assert switchyard("airflow", "dags", "unpause", dag_id, env=shell).returncode == 0
    deadline = time.monotonic() + 1500
    while not all(r["state"] in ("success", "failed") for r in backfill_runs()):
        assert time.monotonic() < deadline, {r["logical_date"][:10]: r["state"] for r in backfill_runs()}
        time.sleep(5)
    assert {r["logical_date"][:10]: r["state"] for r in backfill_runs()} == dict.fromkeys(MONTHS, "success")
    # One at a time, in date order: each run started after the one before it ended.
    done = sorted(backfill_runs(), key=lambda r: r["logical_date"])
    for earlier, later in zip(done, done[1:]):
        assert when(earlier["end_date"]) <= when(later["start_date"]), (earlier, later)
    # Unpaused, the DAG made no run of its own: its start date is when the stack's settings were
    # written, so its first scheduled run is the next month's.
    time.sleep(10)
    every = api.get_all(f"/api/v2/dags/{dag_id}/dagRuns", "dag_runs")
    assert {r["run_type"] for r in every} == {"backfill"}, [r["dag_run_id"] for r in every]
    # The target is the last three batches, row for row: their files as they are on disk, loaded
    # apart from Switchyard (plain COPY), against the target table; and the batches on record.
    last = sorted(p for month in MONTHS[-3:] for p in (data_root / month).rglob("*.tbl"))
    assert [p.name for p in last] == [f"orders.{k}.tbl" for _ in range(3) for k in (1, 2, 3)], last
    assert fingerprint(pg_uri, schema, ["orders"]) == files_fingerprint(pg_uri, {"orders": last})
    with psycopg.connect(pg_uri) as conn:
        batches = {b for (b,) in conn.execute("SELECT DISTINCT batch FROM switchyard.partition_batches "
                                              "WHERE target_schema = %s", (schema,))}
    assert batches == set(MONTHS[-3:])

    # One group of the last run run again on its own (`switchyard runs clear`, the grid's Clear with
    # Downstream): its batch went in whole, so the group is refused at its prepare and the target
    # keeps it; the run's note says so. The whole run cleared loads the batch again, as it was.
    last_run = done[-1]["dag_run_id"]
    before = fingerprint(pg_uri, schema, ["orders"])

    def rerun(*groups: str) -> dict:
        cleared = switchyard("runs", "clear", dag_id, last_run, *groups, env=shell)
        assert cleared.returncode == 0 and "prepare" in cleared.stdout, (cleared.stdout + cleared.stderr)[-3000:]
        deadline = time.monotonic() + 600
        while (run := api.get(f"/api/v2/dags/{dag_id}/dagRuns/{last_run}"))["state"] not in ("success", "failed"):
            assert time.monotonic() < deadline, run
            time.sleep(3)
        return run

    run = rerun("orders_2")
    assert run["state"] == "failed", run
    states = {t["task_id"]: t["state"] for t in api.get_all(f"/api/v2/dags/{dag_id}/dagRuns/{last_run}/taskInstances",
                                                            "task_instances") if t["task_id"].startswith("orders_2.")}
    assert states == {"orders_2.prepare": "failed", "orders_2.load": "upstream_failed",
                      "orders_2.validate": "upstream_failed", "orders_2.switch": "upstream_failed"}, states
    assert ("This run's batch is in the target, whole, from its earlier tasks: orders; a group run again on its "
            "own cannot load") in run["note"] and "Kept their previous contents" not in run["note"], run["note"]
    assert fingerprint(pg_uri, schema, ["orders"]) == before
    run = rerun("setup")
    assert run["state"] == "success" and "3/3 groups switched" in run["note"], run["note"]
    assert fingerprint(pg_uri, schema, ["orders"]) == before
