"""Two runs at once, backfills and clearing a failed group, on the embedded PostgreSQL.

Two runs of the same DAG must never interleave on one target: a backfill's runs are not
held back by max_active_runs, so the target's run lease does it (targets/postgres.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from helpers import copy_batch, dag_env, fingerprint, line_count, partition_oids, resize_manifest, run_lease
from switchyard.targets.postgres.slots import NAMESPACE as COPY_SLOT_NAMESPACE
from switchyard_dev.local import airflow_bin, airflow_env, airflow_home, migrate

TABLES = ["orders", "customer"]
# A nightly batch of `generate_tpch_day` after the first has no nation and region (empty streams),
# which a run refuses to load (it would empty them): the backfills load the partitioned tables.
PARTITIONED = ["supplier", "customer", "part", "partsupp", "orders", "lineitem"]
PARTITIONED_CONF = ("--dag-run-conf", json.dumps({"tables": PARTITIONED}))


def _restamp(batch: Path, marker: bytes) -> None:
    """Same keys, same rows, other contents: every comment (the last field) becomes `marker`."""
    for table in TABLES:
        for path in (batch / table).glob("*.tbl"):
            lines = path.read_bytes().split(b"\n")[:-1]
            out = []
            for line in lines:
                fields = line.split(b"|")
                fields[-2] = marker  # fields[-1] is the empty field after the trailing '|'
                out.append(b"|".join(fields))
            path.write_bytes(b"\n".join(out) + b"\n")
    resize_manifest(batch)  # the producer's manifest for these files


def _second_airflow_home(tmp_path: Path) -> dict[str, str]:
    """A second, independent Airflow (its own metadata DB, a SQLite file) against the same target."""
    home = tmp_path / "airflow-b"
    home.mkdir()
    settings = {"AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
                "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs")}
    subprocess.run([airflow_bin(), "db", "migrate"], env=airflow_env(extra=settings), check=True,
                   capture_output=True, timeout=600)
    return settings


def _start(pg_uri, data_root, schema, runs_dir: Path, conf: dict, extra: dict,
           log: Path) -> subprocess.Popen:
    env = airflow_env(streams=3, extra={
        "AIRFLOW_CONN_SWITCHYARD_TARGET": pg_uri, "SWITCHYARD_DATA_ROOT": str(data_root),
        "SWITCHYARD_SCHEMA": schema, "SWITCHYARD_RUNS_DIR": str(runs_dir), **extra})
    migrate(env)
    return subprocess.Popen([airflow_bin(), "dags", "test", "switchyard_tpch", "-c", json.dumps(conf)],
                            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)


def _stats(runs_dir: Path) -> dict:
    (found,) = runs_dir.glob("switchyard_tpch/*/stats.json")
    return json.loads(found.read_text())


@pytest.mark.chaos
def test_two_runs_at_once_are_serialized_by_the_run_lease(chaos_only, pg_uri, data_root, tpch_batch, schema,
                                                           tmp_path):
    name, folder = tpch_batch
    batch_a = copy_batch(folder, data_root / "conc-a")
    batch_b = copy_batch(folder, data_root / "conc-b")
    _restamp(batch_a, b"batch-a")
    _restamp(batch_b, b"batch-b")

    fast_retry = {"SWITCHYARD_LEASE_RETRY_SECONDS": "3", "SWITCHYARD_LEASE_RETRIES": "100"}
    migrate(airflow_env())
    home_b = _second_airflow_home(tmp_path)
    # Every COPY slot of the target taken here (as other loads into the same database would), so
    # that A's loads wait for one and A still holds its lease when B asks for it, however slowly
    # B's process starts: the connection names no `copy_slots`, so the loads have one per core.
    slots = psycopg.connect(pg_uri, autocommit=True)
    for slot in range(os.cpu_count() or 1):
        slots.execute("SELECT pg_advisory_lock(%s::int, %s::int)", (COPY_SLOT_NAMESPACE, slot))
    runs = []
    try:
        run_a = _start(pg_uri, data_root, schema, tmp_path / "runs-a",
                       {"batch": "conc-a"}, fast_retry, tmp_path / "a.log")
        runs.append(run_a)
        # B starts once A is loading (a backfill next to the nightly run, in another Airflow).
        deadline = time.monotonic() + 300
        while not _staging_tables(pg_uri, schema):
            assert run_a.poll() is None and time.monotonic() < deadline, (tmp_path / "a.log").read_text()[-3000:]
            time.sleep(0.2)
        run_b = _start(pg_uri, data_root, schema, tmp_path / "runs-b",
                       {"batch": "conc-b", "tables": TABLES}, {**fast_retry, **home_b},
                       tmp_path / "b.log")
        runs.append(run_b)
        # The slots go back once B has been refused the lease (its plan then retries every 3 s).
        deadline = time.monotonic() + 300
        while "is being loaded by run" not in (tmp_path / "b.log").read_text():
            assert run_b.poll() is None and time.monotonic() < deadline, (tmp_path / "b.log").read_text()[-3000:]
            time.sleep(0.5)
        slots.close()
        assert run_a.wait(600) == 0, (tmp_path / "a.log").read_text()[-4000:]
        assert run_b.wait(600) == 0, (tmp_path / "b.log").read_text()[-4000:]
    finally:
        slots.close()
        for run in runs:  # a failed check leaves no run loading beside the next test
            if run.poll() is None:
                run.kill()
                run.wait()
    a, b = _stats(tmp_path / "runs-a"), _stats(tmp_path / "runs-b")
    out_b = (tmp_path / "b.log").read_text()
    assert f"target schema {schema} is being loaded by run switchyard_tpch/{a['run_id']} (batch conc-a" in out_b

    # One after the other: B's first step started after A's last switch.
    assert a["failed_groups"] == [] and b["failed_groups"] == []
    a_last = max(g["switched"] for g in a["groups"] if g["switched"])
    b_first = min(g["started"] for g in b["groups"] if g["started"])
    assert b_first > a_last, (a_last, b_first)
    # Nothing doubled, nothing missing, nothing mixed: every row is B's, all of them are there.
    rows = {t: sum(line_count(p) for p in (folder / t).glob("*.tbl")) for t in TABLES}
    with psycopg.connect(pg_uri) as conn:
        for table, col in (("orders", "o_comment"), ("customer", "c_comment")):
            total, from_b = conn.execute(
                f'SELECT count(*), count(*) FILTER (WHERE {col} = %s) FROM "{schema}"."{table}"',
                ("batch-b",)).fetchone()
            assert total == from_b == rows[table], (table, total, from_b, rows[table])
    assert run_lease(pg_uri, schema) is None


def _staging_tables(uri: str, schema: str) -> list[str]:
    with psycopg.connect(uri) as conn:
        return [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                           (f"{schema}_staging",))]


# --- backfill and clearing a failed group, with a real scheduler ---------------------------
DAYS = ["2026-03-01", "2026-03-02", "2026-03-03"]


# `scheduler` (conftest.py): a private Airflow with a real scheduler, on the nightly schedule;
# an indirect parameter names the load mode of its partitioned tables.


def _backfill_runs(api) -> dict[str, dict]:
    runs = api.get_all("/api/v2/dags/switchyard_tpch/dagRuns?run_type=backfill", "dag_runs")
    return {r["logical_date"][:10]: r for r in runs}


def _wait_runs(api, days: list[str], states: dict[str, str] | None = None, timeout: float = 900) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        runs = _backfill_runs(api)
        if all(d in runs and runs[d]["state"] in ("success", "failed") for d in days):
            return runs
        assert time.monotonic() < deadline, {d: runs.get(d, {}).get("state") for d in days}
        time.sleep(3)


def _task_states(api, run_id: str) -> dict[str, str]:
    from urllib.parse import quote
    tis = api.get_all(f"/api/v2/dags/switchyard_tpch/dagRuns/{quote(run_id, safe='')}/taskInstances",
                      "task_instances")
    return {t["task_id"]: t["state"] for t in tis if t["task_id"].startswith(("lineitem_2", "stats"))}


def _all_oids(uri: str, schema: str) -> dict[str, int]:
    out = {}
    for table in ("supplier", "customer", "part", "partsupp", "orders", "lineitem"):
        out.update(partition_oids(uri, schema, table))
    return out


def _create_backfill(env: dict, api, first: str, last: str, *options: str) -> None:
    """`airflow backfill create`, once the scheduler has closed every earlier backfill of the DAG.

    Airflow refuses a second backfill while one is open, and the scheduler closes a finished
    one on its own next pass; on SQLite the CLI's write can also meet the scheduler's lock.
    Both are waited out here; any other refusal fails the test with Airflow's own words.
    """
    from switchyard_dev import local
    deadline = time.monotonic() + 180
    while any(b.get("completed_at") is None
              for b in api.get_all("/api/v2/backfills?dag_id=switchyard_tpch", "backfills")):
        assert time.monotonic() < deadline, "an earlier backfill stayed open"
        time.sleep(2)
    # An attempt refused after it wrote its backfill row (a SQLite lock) leaves that backfill open
    # until the scheduler closes it, up to two minutes later (Airflow's initializing cutoff).
    attempts = 36
    for attempt in range(attempts):
        done = local.airflow("backfill", "create", "--dag-id", "switchyard_tpch", "--from-date", first,
                             "--to-date", f"{last}T23:59:59", *options, env=env, check=False)
        if done.returncode == 0:
            return
        said = done.stdout + done.stderr
        # Airflow 3.3 words the open backfill "Another backfill is running for Dag ...".
        refused = ("already a running backfill" in said or "another backfill is running" in said.lower()
                   or "database is locked" in said.lower())
        assert refused and attempt < attempts - 1, said[-3000:]
        time.sleep(5)


@pytest.mark.chaos
# The broken day fails at its load, one group: its batch is not read field by field before the
# load (SWITCHYARD_CHECK_FIELDS_MB=0, as for a batch bigger than that), which would refuse it whole.
@pytest.mark.parametrize("scheduler", [{"mode": "append", "env": {"SWITCHYARD_CHECK_FIELDS_MB": "0"}}],
                         ids=["append"], indirect=True)
def test_backfill_loads_each_day_once_and_a_cleared_group_reruns_alone(pg_uri, data_root, schema, scheduler,
                                                                      tmp_path):
    from switchyard_dev import local
    from switchyard.core.datagen import generate_tpch_day
    from switchyard.core.spec import load_spec
    env, api = scheduler
    spec = load_spec("tpch")
    manifests = {day: generate_tpch_day(data_root / day, spec, 0.01, 9, 3 * i + 1, 3) for i, day in enumerate(DAYS)}
    # Day 3's lineitem stream 2 is broken (a non-numeric quantity on line 5).
    broken = data_root / DAYS[2] / "lineitem" / "lineitem.2.tbl"
    good_bytes = broken.read_bytes()
    lines = good_bytes.split(b"\n")
    fields = lines[4].split(b"|")
    fields[4] = b"many"
    lines[4] = b"|".join(fields)
    broken.write_bytes(b"\n".join(lines))
    resize_manifest(data_root / DAYS[2])  # its producer's manifest gives the file's size as it is

    # One run at a time, in date order: a later date's run would discard the held-back groups
    # of a failed date (the table's next version is one per table), and clearing them needs them.
    _create_backfill(env, api, DAYS[0], DAYS[2], "--max-active-runs", "1", *PARTITIONED_CONF)
    runs = _wait_runs(api, DAYS)
    assert {d: runs[d]["state"] for d in DAYS} == {DAYS[0]: "success", DAYS[1]: "success", DAYS[2]: "failed"}

    # Each day loaded once, its own batch, one run after another (the run lease).
    stats = {d: json.loads(local_stats(tmp_path, runs[d]["dag_run_id"]).read_text()) for d in DAYS}
    assert [stats[d]["batch"] for d in DAYS] == DAYS
    assert stats[DAYS[2]]["failed_groups"] == ["lineitem_2"]
    # The scheduler noted every backfill run when it ended (switchyard.airflow.run_notes).
    for day in DAYS:
        assert runs[day]["note"].startswith(f"**Switchyard: batch {day} into postgres {schema}, 3 streams**: "
                                            f"run {runs[day]['state']}."), runs[day]["note"]
        assert f"{stats[day]['totals']['rows']:,} rows" in runs[day]["note"]
    assert "Did not switch: lineitem_2." in runs[DAYS[2]]["note"]
    windows = sorted((min(g["started"] for g in s["groups"] if g["started"]),
                      max(g["switched"] or g["ended"] or "" for g in s["groups"])) for s in stats.values())
    assert all(a[1] < b[0] for a, b in zip(windows, windows[1:])), windows
    expected_parts = {e.table: 0 for m in manifests.values() for e in m.entries}
    for m in manifests.values():
        for e in m.entries:
            if e.rows and spec.table(e.table).partitioned:
                expected_parts[e.table] += 1
    oids = _all_oids(pg_uri, schema)
    # Append mode: every day's partitions, but day 3's: a batch goes in whole, so every group
    # of day 3 was held back with lineitem_2.
    day3 = {f"{e.table}_{e.key_min}_{e.key_max}" for e in manifests[DAYS[2]].entries
            if e.rows and spec.table(e.table).partitioned}
    assert len(day3) > 3
    assert len(oids) == sum(expected_parts.values()) - len(day3) and not day3 & set(oids)

    # The failed group's validate marked success by hand (the grid's Mark as success): Airflow runs
    # its switch, which finds no passing validation of this run and switches nothing in; the run
    # fails again, with every table as it was.
    from urllib.parse import quote
    run_id = runs[DAYS[2]]["dag_run_id"]
    api.patch(f"/api/v2/dags/switchyard_tpch/dagRuns/{quote(run_id, safe='')}/taskInstances/lineitem_2.validate",
              {"new_state": "success"})
    deadline = time.monotonic() + 600
    while _task_states(api, run_id).get("lineitem_2.switch") not in ("failed", "success") or \
            _backfill_runs(api)[DAYS[2]]["state"] not in ("failed", "success"):
        assert time.monotonic() < deadline, _task_states(api, run_id)
        time.sleep(3)
    assert _task_states(api, run_id)["lineitem_2.switch"] == "failed", _task_states(api, run_id)
    assert _backfill_runs(api)[DAYS[2]]["state"] == "failed"
    assert _all_oids(pg_uri, schema) == oids
    error = api.get(f"/api/v2/dags/switchyard_tpch/dagRuns/{quote(run_id, safe='')}/taskInstances/"
                    f"lineitem_2.switch/xcomEntries/error")["value"]
    assert "lineitem_2: its validation has no passing result in this run" in str(error), error

    # The whole run marked success by hand (the grid's Mark as success on the run): Airflow counts
    # its date as done; its note says first that the batch is not in, and `switchyard runs` says so.
    from switchyard_dev.runs import why_it_ended
    api.patch(f"/api/v2/dags/switchyard_tpch/dagRuns/{quote(run_id, safe='')}", {"state": "success"})
    marked = _backfill_runs(api)[DAYS[2]]
    assert marked["state"] == "success" and "**: run marked success." in marked["note"]
    assert why_it_ended(marked).startswith(
        "Marked success, not loaded: this run did not put its batch into the target whole"), marked["note"]
    assert _all_oids(pg_uri, schema) == oids

    # Fix the file, clear the failed group (and stats, downstream), and let the run finish.
    broken.write_bytes(good_bytes)
    resize_manifest(data_root / DAYS[2])
    cleared = local.airflow("tasks", "clear", "switchyard_tpch", "-s", DAYS[2], "-e", f"{DAYS[2]}T23:59:59",
                            # Airflow 3.3 matches -t as a substring of the task id here, not a regex.
                            "-t", "lineitem_2.", "-d", "-y", env=env)
    deadline = time.monotonic() + 600
    while (state := _backfill_runs(api)[DAYS[2]]["state"]) != "success":
        # `tasks clear` puts the run back in the queue at once: failed again means the rerun failed.
        assert state != "failed" and time.monotonic() < deadline, (
            state, cleared.stdout[-2000:], _task_states(api, run_id))
        time.sleep(3)
    # The rerun ended the run again: its note, which Switchyard wrote, now tells the new outcome.
    note = _backfill_runs(api)[DAYS[2]]["note"]
    assert "run success." in note and "Did not switch" not in note, note
    after = _all_oids(pg_uri, schema)
    assert {p: o for p, o in after.items() if p in oids} == oids, "the rerun touched other groups' partitions"
    assert set(after) - set(oids) == day3  # the cleared group, then publish_batch, moved day 3 in, whole
    rows = sum(e.rows for m in manifests.values() for e in m.entries if e.table == "lineitem")
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}"."lineitem"').fetchone()[0] == rows

    # Rerunning day 2 replaces day 2's partitions and nothing else.
    day2 = {f"{e.table}_{e.key_min}_{e.key_max}" for e in manifests[DAYS[1]].entries
            if e.rows and spec.table(e.table).partitioned}
    before = _all_oids(pg_uri, schema)
    before_rows = fingerprint(pg_uri, schema, PARTITIONED)
    _create_backfill(env, api, DAYS[1], DAYS[1], "--reprocess-behavior", "completed", *PARTITIONED_CONF)
    deadline = time.monotonic() + 600
    while True:
        reruns = [r for r in api.get_all("/api/v2/dags/switchyard_tpch/dagRuns?run_type=backfill", "dag_runs")
                  if r["logical_date"].startswith(DAYS[1])]
        if reruns and all(r["state"] in ("success", "failed") for r in reruns) and \
                _all_oids(pg_uri, schema) != before:
            break
        assert time.monotonic() < deadline, [r["state"] for r in reruns]
        time.sleep(3)
    now = _all_oids(pg_uri, schema)
    changed = {p for p in now if now[p] != before.get(p)}
    assert changed == day2, (sorted(changed ^ day2))
    assert fingerprint(pg_uri, schema, PARTITIONED) == before_rows


@pytest.mark.chaos
@pytest.mark.parametrize("scheduler", ["replace"], indirect=True)
def test_a_backfill_in_replace_mode_loads_the_dates_in_order_and_the_last_stands(pg_uri, data_root, schema,
                                                                                 scheduler, tmp_path):
    from switchyard.core.datagen import generate_tpch_day
    from switchyard.core.spec import load_spec
    from test_load_modes import assert_table_is, files_of
    env, api = scheduler
    spec = load_spec("tpch")
    days = ["2026-05-01", "2026-05-02", "2026-05-03"]
    # Successive key ranges (the later days' batches have no nation and region: empty streams).
    for i, day in enumerate(days):
        generate_tpch_day(data_root / day, spec, 0.01, 9, 3 * i + 1, 3)
    # Airflow's default backfill (up to 10 runs at once, as the UI's form proposes): the run lease
    # keeps the runs apart, and each plan waits while a run of an earlier date is running.
    _create_backfill(env, api, days[0], days[2], *PARTITIONED_CONF)
    runs = _wait_runs(api, days)
    assert {d: runs[d]["state"] for d in days} == dict.fromkeys(days, "success")
    stats = {d: json.loads(local_stats(tmp_path, runs[d]["dag_run_id"]).read_text()) for d in days}
    windows = [(min(g["started"] for g in stats[d]["groups"] if g["started"]),
                max(g["switched"] or g["ended"] or "" for g in stats[d]["groups"])) for d in days]
    assert all(a[1] < b[0] for a, b in zip(windows, windows[1:])), windows  # in date order
    # The last date stands: each partitioned table is its batch, row for row, nothing of the others.
    for table in PARTITIONED:
        assert_table_is(pg_uri, schema, table, files_of(data_root / days[2], table))


def local_stats(tmp_path: Path, run_id: str) -> Path:
    from switchyard.observability.stats import stats_path
    return stats_path("switchyard_tpch", run_id)


_WRITE_BEHIND_A_LOCK = """
import sqlite3, sys, threading, time
from pathlib import Path
from sqlalchemy import text
from airflow import settings
db = Path(sys.argv[1])
with settings.engine.begin() as conn:
    conn.execute(text("CREATE TABLE IF NOT EXISTS lock_probe (x INTEGER)"))
# Another process's write transaction, held for `hold` seconds: longer than pysqlite's default wait.
hold = float(sys.argv[2])
other = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
other.execute("BEGIN IMMEDIATE")
other.execute("INSERT INTO lock_probe VALUES (1)")
threading.Timer(hold, lambda: other.execute("COMMIT")).start()
started = time.monotonic()
with settings.engine.begin() as conn:  # the metadata engine, as every Airflow process makes it
    conn.execute(text("INSERT INTO lock_probe VALUES (2)"))
print(round(time.monotonic() - started, 2))
"""


def _xcom(env: dict[str, str], run_id: str, task_id: str, key: str):
    """An XCom value as the metadata database of the Airflow `env` names keeps it."""
    from sqlalchemy import create_engine, text
    engine = create_engine(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    try:
        with engine.connect() as conn:
            value = conn.execute(text("SELECT value FROM xcom WHERE run_id = :r AND task_id = :t AND key = :k"),
                                 {"r": run_id, "t": task_id, "k": key}).scalar_one()
    finally:
        engine.dispose()
    return json.loads(value) if isinstance(value, (str, bytes)) else value


def _set_lease(uri: str, schema: str, holder: str) -> tuple:
    """The schema's lease as a live run of `holder` leaves it (renewed now, 30 minutes to go)."""
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("DELETE FROM switchyard.run_lease WHERE target_schema = %s", (schema,))
        return conn.execute("INSERT INTO switchyard.run_lease (target_schema, holder, batch, acquired_at, expires_at) "
                            "VALUES (%s, %s, 'b', now(), now() + interval '30 minutes') RETURNING holder, expires_at",
                            (schema, holder)).fetchone()


def test_a_lease_left_by_a_run_that_ended_is_taken_over_without_waiting_for_its_ttl(pg_uri, data_root, tpch_batch,
                                                                                    schema, tmp_path):
    """A run marked failed while it loads (the UI's "mark failed") never reaches its stats task, and
    its lease stayed until the TTL (30 minutes). The next run's plan asks Airflow about the holder:
    an ended run's lease is taken over; one this Airflow does not know is still waited for."""
    from helpers import edit_manifest, run_dag
    name, folder = tpch_batch
    bad = copy_batch(folder, data_root / f"{name}-miscounted-{schema}")
    edit_manifest(bad, "orders", 1, rows=1)
    # No retry of the lease's wait (five minutes apart): a held lease fails the run at once.
    env = {"SWITCHYARD_LEASE_RETRIES": "0", "SWITCHYARD_LEASE_TAKEOVER_SECONDS": "1"}
    conf = {"tables": ["orders"]}
    # A run that ended failed, after its setup made the control tables: refused at the pre-flight.
    failed = run_dag(pg_uri, data_root, schema, 3, {**conf, "batch": bad.name}, tmp_path / "failed", extra_env=env)
    assert failed.returncode != 0 and failed.stats is not None, failed.output[-3000:]
    # Its end says why, naming no group: without a plan there are none of the batch's to name.
    assert "setup.plan did not finish: nothing was loaded and every table is as it was" in failed.output
    assert "groups did not switch" not in failed.output
    ended = f"switchyard_tpch/{failed.stats['run_id']}"

    # A holder this Airflow has no run of (another deployment's, a lease taken by hand): waited for.
    elsewhere = _set_lease(pg_uri, schema, "switchyard_tpch/manual__elsewhere")
    waits = run_dag(pg_uri, data_root, schema, 3, {**conf, "batch": name}, tmp_path / "waits", extra_env=env)
    assert waits.returncode != 0
    assert "is being loaded by run switchyard_tpch/manual__elsewhere" in waits.output, waits.output[-3000:]
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT holder, expires_at FROM switchyard.run_lease WHERE target_schema = %s",
                            (schema,)).fetchone() == elsewhere

    # The failed run's lease: taken over, the batch loaded, the lease given up at the end.
    _set_lease(pg_uri, schema, ended)
    loaded = run_dag(pg_uri, data_root, schema, 3, {**conf, "batch": name}, tmp_path / "loaded", extra_env=env)
    assert loaded.returncode == 0, loaded.output[-4000:]
    assert f"the run lease of the failed run {ended} was given up: this run takes it" in loaded.output
    # What the plan said while it waited, for `switchyard runs` (the api-server serves it from here).
    said = _xcom(dag_env(pg_uri, data_root, schema, 3, tmp_path / "loaded"), loaded.stats["run_id"],
                 "setup.plan", "lease_wait")
    assert said["holder"] == ended and said["state"] == "failed", said
    files = sorted((folder / "orders").glob("*.tbl"))
    assert fingerprint(pg_uri, schema, ["orders"])["orders"][0] == sum(line_count(f) for f in files)
    assert run_lease(pg_uri, schema) is None


def test_a_metadata_write_waits_out_another_process_lock_on_sqlite(tmp_path, monkeypatch):
    """The local Airflow's SQLite writers wait for another writer's lock (up to 30 s) instead
    of failing after pysqlite's 5 s with "database is locked"."""
    import sys
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_DATABASE", "sqlite")
    env = airflow_env()
    done = subprocess.run([sys.executable, "-c", _WRITE_BEHIND_A_LOCK, str(airflow_home() / "airflow.db"), "7"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    waited = float(done.stdout.strip().splitlines()[-1])
    assert 6.5 <= waited < 20, waited


@pytest.mark.chaos
@pytest.mark.parametrize("scheduler", ["replace"], indirect=True)
def test_a_run_of_a_dag_whose_file_does_not_parse_is_named_queued_with_the_error(scheduler, tmp_path, capsys):
    """A spec the DAG file refuses (a typo in a key, made after the DAG was parsed): Airflow keeps
    the DAG, calls it stale and schedules none of its runs, which stay queued with no task.
    `switchyard runs` names the file's error and says why the run waits, where it said
    `active and queued runs: none`."""
    import argparse
    from switchyard_dev.commands import cmd_runs
    env, api = scheduler
    spec = tmp_path / "tpch_replace.yaml"      # the scheduler fixture's spec
    spec.write_text(spec.read_text().replace("    key: o_orderkey\n", "    key: o_orderkey\n    kep: 2\n", 1))
    deadline = time.monotonic() + 180
    while not api.get("/api/v2/importErrors")["import_errors"]:
        assert time.monotonic() < deadline, "the dag-processor did not parse the DAG file again"
        time.sleep(2)
    # From the CLI, as a user does (the REST API answers 404 for a stale DAG; the CLI makes the run).
    from switchyard_dev import local
    local.airflow("dags", "trigger", "switchyard_tpch", "--conf", json.dumps({"batch": "never"}), env=env)
    time.sleep(5)
    assert cmd_runs(argparse.Namespace(action="list", dag_id=None, run_id=None, limit=10)) == 0
    out = capsys.readouterr().out
    assert "the DAG files below do not parse: their DAGs are not scheduled and their runs stay queued" in out, out
    assert "switchyard_tpch.py: switchyard.core.spec.SpecError: " in out and "unknown entries kep" in out, out
    assert "queued: its DAG's file does not parse (above); the run starts when it does" in out, out
