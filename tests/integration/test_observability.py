"""What a run shows people, on the real embedded PostgreSQL and the real DAG.

* progress lines of a long load carry the server's row count (pg_stat_progress_copy);
* after `airflow dags test`, the control schema's load_stats table holds one row per load
  that agrees with stats.json, the report sits next to stats.json and the stats task's
  log names it, and every loaded table's Asset got an event.
"""
from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import psycopg
import pytest

from helpers import browser, run_dag
from switchyard.core.batch import read_manifest
from switchyard_dev.local import airflow_env
from switchyard.core.planner import plan_batch
from switchyard.observability.progress import LoadProgress
from switchyard.core.spec import load_spec
from switchyard.targets.postgres import PostgresAdapter

SPEC = load_spec("tpch")
PROGRESS = re.compile(r"(\w+_\d+): progress (?:([\d,]+) rows, )?([\d.,]+) of ([\d.,]+) MB \((\d+)%\), "
                      r"([\d.,]+) MB/s(?:, ([\d,]+) rows/s)?")


@pytest.fixture(scope="module")
def lineitem_batch(tmp_path_factory) -> Path:
    """One lineitem stream big enough (scale 0.1: about 75 MB) for several progress lines."""
    from switchyard.core.datagen import generate_tpch
    folder = tmp_path_factory.mktemp("big") / "lineitem-sf0.1-s1"
    generate_tpch(folder, SPEC, 0.1, 1, ["lineitem"])
    return folder


def test_long_load_logs_progress_with_server_rows(pg_uri, schema, lineitem_batch, caplog):
    plan = plan_batch(SPEC, read_manifest(lineitem_batch, SPEC), ["lineitem"])
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema)
    adapter.setup(plan)
    stream = next(s for s in plan.all_streams() if s.table == "lineitem")
    adapter.prepare(stream)
    server = adapter.server_progress(adapter.staging_schema, stream.staging_table)
    assert server is not None, "PostgreSQL reports its COPY's progress"
    logger = logging.getLogger("switchyard.test_progress")
    progress = LoadProgress(stream.group_id, every=0.05, server=server, logger=logger)
    with caplog.at_level(logging.INFO, logger=logger.name):
        try:
            result = adapter.load(stream, lineitem_batch / stream.file, progress)
        finally:
            server.close()
    lines = [PROGRESS.search(r.getMessage()) for r in caplog.records if r.name == logger.name]
    lines = [m for m in lines if m]
    assert len(lines) >= 3, [r.getMessage() for r in caplog.records]
    rows = [int(m.group(2).replace(",", "")) for m in lines if m.group(2)]
    # The server's own count: present, growing, never above what the load ended with.
    assert rows and max(rows) > 0, [m.group(0) for m in lines]
    assert rows == sorted(rows) and max(rows) <= result.rows
    assert all(m.group(7) for m in lines if m.group(2))
    percents = [int(m.group(5)) for m in lines]
    assert percents == sorted(percents) and 0 < percents[-1] <= 100
    assert all(float(m.group(4).replace(",", "")) == pytest.approx(result.bytes / 1e6, abs=0.05) for m in lines)


def test_progress_without_a_server_sample_logs_bytes_only(caplog):
    ticks = iter([0.0, 1.0, 2.0, 6.0])
    logger = logging.getLogger("switchyard.test_progress_bytes")
    progress = LoadProgress("orders_2", every=5.0, clock=lambda: next(ticks), logger=logger)
    with caplog.at_level(logging.INFO, logger=logger.name):
        progress(10_000_000, 40_000_000)   # 1 s in: too soon
        progress(20_000_000, 40_000_000)   # 2 s in: too soon
        progress(30_000_000, 40_000_000)   # 6 s in: a line
    assert [r.getMessage() for r in caplog.records] == [
        "orders_2: progress 30.0 of 40.0 MB (75%), 5.0 MB/s after 6.0 s"]


def load_stats_rows(uri: str, run_id: str) -> dict[tuple[str, int], dict]:
    with psycopg.connect(uri) as conn, conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        cur.execute("SELECT * FROM switchyard.load_stats WHERE run_id = %s", (run_id,))
        return {(r["table_name"], r["stream"]): r for r in cur.fetchall()}


def asset_events(run_id: str) -> dict[str, dict]:
    """Asset URI -> extra of the events this run produced, read from Airflow's metadata DB."""
    script = (
        "import json, sys\n"
        "from airflow.models.asset import AssetEvent, AssetModel\n"
        "from airflow.utils.session import create_session\n"
        "with create_session() as s:\n"
        "    rows = s.query(AssetModel.uri, AssetEvent.extra).join(AssetEvent, AssetEvent.asset_id == AssetModel.id)"
        ".filter(AssetEvent.source_run_id == sys.argv[1]).all()\n"
        "    print(json.dumps({uri: extra for uri, extra in rows}))\n")
    env = airflow_env()
    out = subprocess.run([sys.executable, "-c", script, run_id], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_run_writes_load_stats_report_and_asset_events(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, folder = tpch_batch
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": ["orders", "lineitem", "nation"]},
                  tmp_path / "runs", extra_env={"SWITCHYARD_PROGRESS_SECONDS": "0"})
    assert run.returncode == 0, run.output[-4000:]
    stats = run.stats
    run_id = stats["run_id"]

    # One row per load in the control schema, agreeing with stats.json field by field.
    table = load_stats_rows(pg_uri, run_id)
    loaded = [g for g in stats["groups"] if g["outcome"] != "skipped"]
    assert {(g["table"], g["stream"]) for g in loaded} == set(table)
    assert len(table) == 3 + 3 + 1
    for g in loaded:
        row = table[(g["table"], g["stream"])]
        assert row["batch"] == name and row["dag_id"] == "switchyard_tpch"
        assert row["file"] == g["file"] and Path(row["file"]).is_file()
        assert row["rows_loaded"] == g["rows"] > 0 and row["bytes"] == g["bytes"] > 0
        assert row["started_at"] == datetime.fromisoformat(g["started"])
        assert row["ended_at"] == datetime.fromisoformat(g["ended"])
        assert row["seconds"] == pytest.approx(g["seconds"])
        assert row["mb_per_s"] == pytest.approx(g["mb_per_s"]) and row["rows_per_s"] == pytest.approx(g["rows_per_s"])
        assert row["validation"] == "passed" and row["outcome"] == "switched"
        assert row["backend_pid"] == g["backend_pid"] > 0
    assert stats["load_stats_table"] == {"table": "switchyard.load_stats", "rows": 7}

    # The report next to stats.json, named in the stats task's log, with the per-step Gantt.
    folder = tmp_path / "runs" / "switchyard_tpch"
    report = next(folder.glob("*/report.html"))
    assert (report.parent / "stats.json").is_file() and (report.parent / "report.md").is_file()
    assert f"run report: {report}" in run.output
    assert "/switchyard/reports/switchyard_tpch/" in run.output
    page = report.read_text()
    assert run_id in page and 'id="chart-gantt"' in page and 'data-step="validate"' in page
    assert all(set(g["steps"]) == {"prepare", "load", "validate", "switch"} for g in loaded)
    # Each step's task process reports its CPU seconds before the step and in it.
    cpu = [s["cpu"] for g in loaded for s in g["steps"].values()]
    assert all(c["task_start"] > 0 and c["step"] >= 0 for c in cpu) and any(c["step"] > 0 for c in cpu)

    # The real run's report renders with its charts: no console errors, no broken images.
    driver, profile = browser()
    try:
        driver.get(report.as_uri())
        assert not [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
        assert driver.execute_script("return Array.from(document.images).filter(i => !i.complete || "
                                     "i.naturalWidth === 0).length") == 0
        charts = driver.execute_script(
            "return Array.from(document.querySelectorAll('.chart svg')).map(s => {"
            " const r = s.getBoundingClientRect(); return [s.parentElement.id, r.width > 300 && r.height > 100]; })")
        assert dict(charts) == {"chart-streams": True, "chart-throughput": True, "chart-gantt": True}
    finally:
        driver.quit()
        __import__("shutil").rmtree(profile, ignore_errors=True)

    # Progress lines from the loads (interval 0 here: every chunk logs one).
    assert PROGRESS.search(run.output), "no progress line in the run's log"

    # One Asset event per loaded table; the tables not loaded get none.
    events = asset_events(run_id)
    assert set(events) == {f"switchyard://switchyard_target/{schema}/{t}" for t in ("orders", "lineitem", "nation")}
    orders = events[f"switchyard://switchyard_target/{schema}/orders"]
    assert orders["rows"] == stats["tables"]["orders"]["rows"] and orders["partitions"] == 3
    assert orders["batch"] == name

    # A second run of the stats task for the same run replaces its rows (upsert), never duplicates.
    from switchyard.observability.stats import write_load_stats
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema)
    changed = json.loads(json.dumps(stats))
    first = next(g for g in changed["groups"] if g["outcome"] == "switched")
    first["rows"] = 1
    assert write_load_stats(adapter, changed) == 7
    again = load_stats_rows(pg_uri, run_id)
    assert len(again) == 7
    assert again[(first["table"], first["stream"])]["rows_loaded"] == 1


def xcom_values(run_id: str) -> dict[str, object]:
    """task id -> return value of this run's tasks, read from Airflow's metadata DB."""
    script = (
        "import json, sys\n"
        "from airflow.models.xcom import XComModel\n"
        "from airflow.utils.session import create_session\n"
        "with create_session() as s:\n"
        "    rows = s.query(XComModel).filter(XComModel.run_id == sys.argv[1], XComModel.key == 'return_value').all()\n"
        "    print(json.dumps({r.task_id: XComModel.deserialize_value(r) for r in rows}))\n")
    out = subprocess.run([sys.executable, "-c", script, run_id], env=airflow_env(), capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_run_s_last_tasks_read_each_group_from_its_switch_as_its_steps_returned_it(
        pg_uri, data_root, tpch_batch, schema, tmp_path):
    """A group whose four steps succeeded is read by the stats and publish tasks from its
    switch's result alone, which carries the prepare's, load's and validate's results as their
    own tasks returned them: the statistics and Asset events are those of the four steps."""
    name, _ = tpch_batch
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": ["orders", "nation"]}, tmp_path / "runs")
    assert run.returncode == 0, run.output[-4000:]
    values = xcom_values(run.stats["run_id"])
    groups = {g["group"]: g for g in run.stats["groups"] if g["outcome"] != "skipped"}
    assert set(groups) == {"orders_1", "orders_2", "orders_3", "nation_1"}
    for gid, record in groups.items():
        mine = {step: values[f"{gid}.{step}"] for step in ("prepare", "load", "validate", "switch")}
        assert mine["switch"]["earlier_steps"] == {step: mine[step] for step in ("prepare", "load", "validate")}
        assert record["rows"] == mine["load"]["rows"] > 0 and record["bytes"] == mine["load"]["bytes"]
        assert record["backend_pid"] == mine["load"]["backend_pid"]
        assert record["validation"] == "passed" and record["validation_checks"] == mine["validate"]["checks"]
        assert record["partition"] == mine["switch"].get("partition")
        assert record["errors"] == {} and set(record["states"].values()) == {"success"}
        assert {step: span["started"] for step, span in record["steps"].items()} == {
            step: value["step_started"] for step, value in mine.items()}
    events = asset_events(run.stats["run_id"])
    orders = events[f"switchyard://switchyard_target/{schema}/orders"]
    assert orders["rows"] == sum(values[f"orders_{k}.load"]["rows"] for k in (1, 2, 3)) and orders["partitions"] == 3


def _load_stats_key(cur, table: str) -> list[str]:
    cur.execute("SELECT a.attname FROM pg_constraint AS c JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)"
                " ON true JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = k.attnum"
                " WHERE c.conrelid = %s::regclass AND c.contype = 'p' ORDER BY k.n", (table,))
    return [r[0] for r in cur.fetchall()]


def test_two_dags_runs_with_the_same_run_id_keep_their_own_load_stats_rows(pg_uri, schema):
    """A run id is unique only within its DAG (two DAGs on one schedule both get
    "scheduled__<time>"). A load_stats table of the earlier shape, keyed without the DAG, is
    re-keyed by setup, its rows kept; setup again changes nothing."""
    from switchyard.core.planner import plan_tpch
    from switchyard.observability.stats import write_load_stats
    control = f"{schema}_ctl"
    table = f'"{control}"."load_stats"'
    try:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{control}"')
            # The first version's table: no dag_id (nor the later columns), keyed by run.
            conn.execute(f"CREATE TABLE {table} (run_id text NOT NULL, batch text NOT NULL, table_name text NOT NULL,"
                         " stream integer NOT NULL, file text NOT NULL, bytes bigint, rows_loaded bigint,"
                         " started_at timestamptz, ended_at timestamptz, seconds double precision, validation text,"
                         " backend_pid integer, PRIMARY KEY (run_id, table_name, stream))")
            conn.execute(f"INSERT INTO {table} (run_id, batch, table_name, stream, file, rows_loaded)"
                         " VALUES ('manual__old', 'b0', 'orders', 1, '/old/orders.1.tbl', 5)")
        adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, control_schema=control)
        plan = plan_tpch(SPEC, 0.01, 2, tables=["orders"])
        adapter.setup(plan)
        with psycopg.connect(pg_uri) as conn, conn.cursor() as cur:
            assert _load_stats_key(cur, table) == ["dag_id", "run_id", "table_name", "stream"]
            cur.execute(f"SELECT dag_id, run_id, rows_loaded FROM {table}")
            assert cur.fetchall() == [("", "manual__old", 5)]

        def stats(dag_id: str, rows: int) -> dict:
            return {"dag_id": dag_id, "run_id": "scheduled__2026-11-23T02:00:00+00:00", "batch": "b1",
                    "groups": [{"table": "orders", "stream": 1, "file": "/b1/orders.1.tbl", "rows": rows,
                                "outcome": "switched"}]}
        assert write_load_stats(adapter, stats("nightly_sales", 100)) == 1
        assert write_load_stats(adapter, stats("nightly_tpch", 200)) == 1
        assert write_load_stats(adapter, stats("nightly_tpch", 201)) == 1  # a rerun of the stats task: an update
        adapter.setup(plan)  # nothing left to re-key
        with psycopg.connect(pg_uri) as conn, conn.cursor() as cur:
            assert _load_stats_key(cur, table) == ["dag_id", "run_id", "table_name", "stream"]
            cur.execute(f"SELECT dag_id, rows_loaded FROM {table} WHERE run_id LIKE 'scheduled%%' ORDER BY dag_id")
            assert cur.fetchall() == [("nightly_sales", 100), ("nightly_tpch", 201)]
    finally:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{control}" CASCADE')
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# --- SQL Server: waits, per-load details, the upsert's T-SQL ----------------------------------

def _group(table, stream, start, seconds, nbytes, rows, **load_details):
    t0 = datetime.fromisoformat("2026-11-21T02:00:00+00:00")
    from datetime import timedelta
    iso = lambda s: (t0 + timedelta(seconds=s)).isoformat(timespec="milliseconds")  # noqa: E731
    load = {"rows": rows, "bytes": nbytes, "seconds": seconds, "started": iso(start), "ended": iso(start + seconds),
            "file": f"/data/{table}.{stream}.tbl", **load_details}
    return {"table": table, "stream": stream, "load": load, "validate": {"success": True, "checks": []},
            "switch": {"partition": f"dbo.{table}", "switched": iso(start + seconds + 1)},
            "states": {"prepare": "success", "load": "success", "validate": "success", "switch": "success"}}


def _context():
    from types import SimpleNamespace
    return {"ti": SimpleNamespace(dag_id="switchyard_tpch", run_id="manual__1")}


def test_mssql_load_details_reach_the_group_records_and_the_table_rows():
    from switchyard.observability.stats import assemble, load_stats_columns, load_stats_rows
    details = dict(session_id=61, scheduler_id=3, cpu_id=3, node_id=0, local_tcp_port=2002, port=2002,
                   reads=12, writes=4_100, cpu_time_ms=900, mode="bulk_insert")
    stats = assemble({"batch": "b"}, {"orders_3": _group("orders", 3, 0, 1.0, 4_000_000, 37_500, **details)},
                     _context())
    record = stats["groups"][0]
    assert {k: record[k] for k in details} == details
    from switchyard.targets.mssql import MssqlAdapter
    mssql = MssqlAdapter(SPEC, base_port=2000, port_count=1)
    row = dict(zip(load_stats_columns(mssql), load_stats_rows(stats, mssql)[0]))
    assert {k: row[k] for k in ("session_id", "scheduler_id", "cpu_id", "node_id", "local_tcp_port", "port",
                                "reads", "writes", "cpu_time_ms")} == {k: v for k, v in details.items() if k != "mode"}
    assert row["mb_per_s"] == 4.0 and row["rows_per_s"] == 37_500 and row["outcome"] == "switched"


def test_server_waits_go_to_stats_and_into_the_stragglers_notes():
    from switchyard.observability.stats import assemble
    waits = [{"wait_type": "PAGEIOLATCH_EX", "wait_ms": 48_210, "signal_ms": 310, "waiting_tasks": 5_120},
             {"wait_type": "WRITELOG", "wait_ms": 9_000, "signal_ms": 80, "waiting_tasks": 700}]
    latches = [{"latch_class": "ALLOC_FREESPACE_CACHE", "wait_ms": 1_200, "waiting_requests": 40}]
    # Loads of 10 and 20 s: the slow one lost 6.7 s, a cost the run can measure.
    groups = {f"lineitem_{k}": _group("lineitem", k, 0, 20.0 if k == 2 else 10.0, 180_000_000, 1_500_000,
                                      cpu_time_ms=4_000 if k == 2 else 9_000)
              for k in (1, 2)}
    stats = assemble({"batch": "b"}, groups, _context(), server={"waits": waits, "latches": latches})
    assert stats["waits"] == waits and stats["latches"] == latches
    # Two streams: the slow one (half the rate of the other) is flagged against their median.
    [slow] = stats["stragglers"]
    assert slow["group"] == "lineitem_2" and slow["ratio"] == pytest.approx(0.67, abs=0.01)
    notes = " | ".join(slow["what_differs"])
    assert "read its file at 9.0 MB/s against the table's median 13.5 MB/s" in notes
    assert "on CPU 20% of the load (table median 55%)" in notes
    assert "PAGEIOLATCH_EX 48,210 ms" in notes and "WRITELOG 9,000 ms" in notes


def test_two_streams_close_together_are_not_stragglers():
    from switchyard.observability.stats import assemble
    groups = {f"orders_{k}": _group("orders", k, 0, 1.0 if k == 1 else 1.3, 4_000_000, 37_500) for k in (1, 2)}
    assert assemble({"batch": "b"}, groups, _context())["stragglers"] == []


def test_postgres_has_no_server_snapshot_and_stats_carry_no_waits(pg_uri):
    from switchyard.steps import server_delta, server_snapshot
    adapter = PostgresAdapter(SPEC, uri=pg_uri)
    assert server_snapshot(adapter) is None
    assert server_delta(adapter, None, None) == {}


def test_mssql_upsert_of_load_stats_is_one_parameterised_merge():
    sqlfluff = pytest.importorskip("sqlfluff")
    from switchyard.observability.stats import LOAD_STATS_KEYS, load_stats_columns
    from switchyard.targets.mssql import MssqlAdapter
    adapter = MssqlAdapter(SPEC, base_port=2000, port_count=1)
    statement, = adapter.render("record_load_stats.sql", columns=load_stats_columns(adapter), keys=LOAD_STATS_KEYS)
    columns = load_stats_columns(adapter)
    assert statement.count("?") == len(columns)
    assert "MERGE [switchyard].[load_stats] WITH (HOLDLOCK) AS t" in statement
    assert ("ON t.[dag_id] = s.[dag_id] AND t.[run_id] = s.[run_id] AND t.[table_name] = s.[table_name]"
            " AND t.[stream] = s.[stream]") in statement
    assert "[file]" in statement
    # MERGE is the one T-SQL statement that must end with a semicolon (error 10713).
    assert re.search(r"\);[^\n]*$", statement)
    # The grammar has no ODBC parameter markers: variables stand in for them.
    numbered = iter(range(1, len(columns) + 1))
    sqlfluff.parse(re.sub(r"\?", lambda _: f"@p{next(numbered)}", statement) + "\n", dialect="tsql")
