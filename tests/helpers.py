"""What several tests use: data checks on the target, batch edits, free ports, running the real
DAG, a private Airflow with a real scheduler, a headless browser, an independent reading of a
batch's CSV files.

The one module test files import helpers from (fixtures live in conftest.py); no test file
imports another.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, Iterator

import pytest

from switchyard.targets.postgres.types import column_type

if TYPE_CHECKING:
    from switchyard.core.spec import Table

ROOT = Path(__file__).resolve().parents[1]
# Tests get an Airflow home and scratch space of their own, so a running demo is never disturbed.
TEST_STATE = ROOT / ".switchyard" / "test"


# --- the target's data ------------------------------------------------------------------------
def line_count(path) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def fingerprint(uri: str, schema: str, tables=None) -> dict[str, tuple[int, str]]:
    """Row count and an order-independent checksum of each target table (default: the TPC-H spec's)."""
    import psycopg
    if tables is None:
        from switchyard.core.spec import load_spec
        tables = load_spec("tpch").table_names
    out = {}
    with psycopg.connect(uri) as conn:
        for table in tables:
            out[table] = conn.execute(
                f'SELECT count(*), md5(coalesce(string_agg(md5(t::text), \'\' ORDER BY md5(t::text)), \'\')) '
                f'FROM "{schema}"."{table}" t').fetchone()
    return out


def batch_fingerprint(uri: str, batch_dir: Path, tables=None) -> dict[str, tuple[int, str]]:
    """`fingerprint` of a TPC-H batch's files as they are, loaded apart from Switchyard (`files_fingerprint`)."""
    from switchyard.core.batch import read_manifest
    from switchyard.core.spec import load_spec
    spec = load_spec("tpch")
    manifest = read_manifest(batch_dir, spec)
    tables = tables or spec.table_names
    return files_fingerprint(uri, {name: [batch_dir / manifest.entry(name, k).file for k in manifest.streams_of(name)]
                                   for name in tables})


def files_fingerprint(uri: str, files: dict[str, list[Path]], spec=None) -> dict[str, tuple[int, str]]:
    """`fingerprint` of TPC-H-format files as they are, loaded apart from Switchyard: each table's
    files (table -> paths) copied by plain `COPY` (text format, '|', the trailing '|' into a spare
    column) into an unpartitioned table of the spec's PostgreSQL types (default: the TPC-H spec's)
    in a scratch schema, dropped after."""
    import psycopg
    from switchyard.core.spec import load_spec
    spec = spec or load_spec("tpch")
    scratch = f"ref_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{scratch}"')
        try:
            for name, paths in files.items():
                table = spec.table(name)
                cols = ", ".join(f'"{c.name}" {column_type(c)}' for c in table.columns)
                conn.execute(f'CREATE TABLE "{scratch}"."{name}" ({cols}, spare text)')
                for path in paths:
                    with conn.cursor().copy(f'COPY "{scratch}"."{name}" FROM STDIN (FORMAT text, DELIMITER \'|\')') as cp, \
                            open(path, "rb") as fh:
                        while chunk := fh.read(1 << 20):
                            cp.write(chunk)
                conn.execute(f'ALTER TABLE "{scratch}"."{name}" DROP COLUMN spare')
            return fingerprint(uri, scratch, list(files))
        finally:
            conn.execute(f'DROP SCHEMA "{scratch}" CASCADE')


def partitions(uri: str, schema: str, table: str) -> list[str]:
    return list(partition_oids(uri, schema, table))


def partition_oids(uri: str, schema: str, table: str) -> dict[str, int]:
    """Partition name -> table OID: a switched-in partition is a new table with a new OID."""
    import psycopg
    with psycopg.connect(uri) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.oid::bigint FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass ORDER BY 1", (f'"{schema}"."{table}"',)).fetchall()
    return dict(rows)


def run_lease(uri: str, schema: str):
    """The run lease on the schema, if a run holds one."""
    import psycopg
    with psycopg.connect(uri) as conn:
        return conn.execute("SELECT holder FROM switchyard.run_lease WHERE target_schema = %s",
                            (schema,)).fetchone()


def publish(adapter, plan) -> dict | None:
    """After a plan's switches, what the DAG's publish_batch task runs (the spec's `publish:
    batch`): every table of the plan in, in one transaction. None with `publish: table`, where
    each table's last switch moved it in."""
    if adapter.spec.publish != "batch":
        return None
    return adapter.publish_batch(list(plan.all_streams()))


# --- batches ----------------------------------------------------------------------------------
IDS_SPEC_YAML = """
name: ids
format: {{delimiter: "|", trailing_delimiter: false}}
files: "{{table}}/{{table}}.{{stream}}.txt"
tables:
  ids:
    key: id
    mode: append
    unique: true
    {retention}
    columns:
      - {{name: id, type: integer}}
      - {{name: v, type: text}}
"""


def ids_spec(folder: Path, retention: str = ""):
    """A one-table spec of its own: `ids`, an integer key, append mode, unique; `retention`
    e.g. "keep: 1\n    retire: archive"."""
    from switchyard.core.spec import load_spec
    path = folder / f"ids-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(IDS_SPEC_YAML.format(retention=retention))
    return load_spec(str(path))


def ids_batch(folder: Path, ids) -> Path:
    """A batch of one stream holding `ids` (ascending), its manifest written from the rows."""
    from switchyard.core.batch import MANIFEST_FORMAT
    ids = list(ids)
    path = folder / "ids" / "ids.1.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{i}|row {i}\n" for i in ids))
    manifest = {"format": MANIFEST_FORMAT, "spec": "ids", "streams": 1, "files": [
        {"table": "ids", "stream": 1, "file": "ids/ids.1.txt", "bytes": path.stat().st_size, "rows": len(ids),
         "key_min": ids[0], "key_max": ids[-1]}]}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def load_through_steps(uri: str, schema: str, spec, folder: Path, batch: str,
                       tables: list[str] | None = None) -> list[str]:
    """A batch (its `tables`, else all) through the adapter's steps as the DAG runs them (setup,
    then each stream's prepare, load, validate and switch, then the batch's publish), each
    checked; the setup's notes. A partition goes in by ATTACH without a scan of its rows."""
    from switchyard.core.batch import read_manifest
    from switchyard.core.planner import plan_batch
    from switchyard.observability.validation import describe_failures, validate_stream
    from switchyard.targets.postgres import PostgresAdapter
    plan = plan_batch(spec, read_manifest(folder, spec), tables)
    adapter = PostgresAdapter(spec, uri=uri, schema=schema, lease_batch=batch)
    notes = adapter.setup(plan)
    for s in plan.all_streams():
        adapter.prepare(s)
        assert adapter.load(s, folder / s.file).rows == s.rows
        outcome = validate_stream(adapter, spec, s)
        assert outcome.success, describe_failures(outcome, s.group_id)
        switched = adapter.switch(s)
        assert not s.partitioned or switched["attach_scan_skipped"] is True, switched
    published = publish(adapter, plan)
    assert not any(s.partitioned for s in plan.all_streams()) or published["attach_scan_skipped"] is True, published
    return notes


def copy_batch(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def resize_manifest(batch_dir: Path) -> None:
    """The manifest's byte sizes set to its files' as they are now: what a producer that wrote
    these (edited) files would have written (a file of another size than its entry refuses
    the whole batch before any load)."""
    path = batch_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    for e in manifest["files"]:
        if (batch_dir / e["file"]).exists():
            e["bytes"] = (batch_dir / e["file"]).stat().st_size
    path.write_text(json.dumps(manifest))


def edit_manifest(batch_dir: Path, table: str, stream: int, **changes) -> None:
    path = batch_dir / "manifest.json"
    raw = json.loads(path.read_text())
    for entry in raw["files"]:
        if entry["table"] == table and entry["stream"] == stream:
            entry.update(changes)
    path.write_text(json.dumps(raw, indent=2))


# --- ports ------------------------------------------------------------------------------------
def only_streams(plan, *streams):
    """The plan of a batch made of just these streams (StreamPlans): what a table's commit
    then takes as its whole batch (a table's switches go in together, when all are switched)."""
    from dataclasses import replace
    chosen = {(s.table, s.stream) for s in streams}
    tables = tuple(replace(t, streams=tuple(s for s in t.streams if (s.table, s.stream) in chosen))
                   for t in plan.tables)
    return replace(plan, tables=tuple(t for t in tables if t.streams))


def mode_spec(folder: Path, mode: str) -> str:
    """The TPC-H spec with every partitioned table in `mode` (replace or append), as a file."""
    import yaml
    from switchyard.core.spec import spec_file
    raw = yaml.safe_load(spec_file("tpch").read_text())
    raw["name"] = f"tpch_{mode}"
    for table in raw["tables"].values():
        if table.get("partitioned", True):
            table["mode"] = mode
    path = folder / f"tpch_{mode}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def free_port(candidates: range | None = None) -> int:
    """A free TCP port on 127.0.0.1: the first free one of `candidates`, else one the system picks."""
    if candidates is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    for port in candidates:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                return port
    raise RuntimeError(f"no free port in {candidates}")


# --- the real DAG, with `airflow dags test` -----------------------------------------------------
@dataclass
class DagRun:
    returncode: int
    output: str
    stats: dict | None


# The settings of a run whose bad input the later steps are to find (a load, a validation): its
# small batch is not read field by field in setup.plan first, as a batch bigger than
# SWITCHYARD_CHECK_FIELDS_MB is not, which would refuse it whole before any load.
LATER_STEPS_CHECK = {"SWITCHYARD_CHECK_FIELDS_MB": "0"}


def dag_env(pg_uri: str, data_root: Path, schema: str, streams: int, runs_dir: Path, extra_env: dict | None = None,
            spec: str = "tpch", dag_id: str = "switchyard_tpch") -> dict[str, str]:
    """The environment run_dag runs `airflow dags test` in: the suite's Airflow home, the DAG's settings."""
    from switchyard_dev.local import airflow_env
    return airflow_env(streams=streams, extra={
        "AIRFLOW_CONN_SWITCHYARD_TARGET": pg_uri,
        "SWITCHYARD_DATA_ROOT": str(data_root),
        "SWITCHYARD_SCHEMA": schema,
        "SWITCHYARD_RUNS_DIR": str(runs_dir),
        "SWITCHYARD_SPEC": spec,
        "SWITCHYARD_DAG_ID": dag_id,
        **(extra_env or {}),
    })


def metadata_connection():
    """A connection to the metadata database of the Airflow home in effect (the embedded
    server's), as every shell's `airflow` reads it; commits when its `with` block ends well."""
    import psycopg
    from switchyard_dev.local import metadata_uri
    return psycopg.connect(metadata_uri().replace("postgresql+psycopg://", "postgresql://", 1))


_LEFTOVERS_ENDED: set[str] = set()


def end_leftover_runs(metadata: str) -> None:
    """Marks failed, once a session, the runs an earlier session left running in this metadata
    database (the test home outlives a session stopped mid-run): each later run of their DAG
    would wait behind them as behind an earlier run, until its timeout."""
    if metadata in _LEFTOVERS_ENDED:
        return
    from sqlalchemy import create_engine, text
    engine = create_engine(metadata)
    try:
        with engine.begin() as conn:
            conn.execute(text("UPDATE dag_run SET state = 'failed', end_date = CURRENT_TIMESTAMP "
                              "WHERE state IN ('running', 'queued')"))
    finally:
        engine.dispose()
    _LEFTOVERS_ENDED.add(metadata)


def run_dag(pg_uri: str, data_root: Path, schema: str, streams: int, conf: dict,
            runs_dir: Path, extra_env: dict | None = None, logical_date: str | None = None,
            spec: str = "tpch", dag_id: str = "switchyard_tpch", args: tuple[str, ...] = ()) -> DagRun:
    """Runs the real DAG of `spec` (as `dag_id`) with `airflow dags test` against the embedded
    PostgreSQL, forked from the session's process that has Airflow imported (warm_airflow.py);
    `args`: more of `dags test`'s options (e.g. --mark-success-pattern)."""
    import warm_airflow
    from switchyard_dev.local import migrate
    env = dag_env(pg_uri, data_root, schema, streams, runs_dir, extra_env, spec, dag_id)
    migrate(env)
    end_leftover_runs(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    when = [logical_date] if logical_date else []
    result = warm_airflow.run(["dags", "test", dag_id, *when, "-c", json.dumps(conf), *args], env, timeout=900)
    output = result.stdout + result.stderr
    stats = None
    found = sorted(runs_dir.glob(f"{dag_id}/*/stats.json"), key=lambda p: p.stat().st_mtime)
    if found:
        stats = json.loads(found[-1].read_text())
    return DagRun(result.returncode, output, stats)


# --- a private Airflow with a real scheduler ----------------------------------------------------
def keep_service_logs(request, home: Path) -> Path | None:
    """When the test failed, copy its Airflow services' logs (the home is about to be deleted)
    to `.switchyard/test/failed/<test>/` and say where; None when it passed."""
    report = getattr(request.node, "report_call", None)
    if report is None or not report.failed:
        return None
    kept = TEST_STATE / "failed" / request.node.name
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir(parents=True)
    for log in (home / "logs").glob("*.out"):
        shutil.copy2(log, kept / log.name)
    print(f"the Airflow services' logs of this failed test: {kept}", file=sys.stderr)
    return kept


@contextmanager
def private_scheduler(request, monkeypatch, pg_uri: str, data_root: Path, schema: str,
                      runs_dir: Path, extra_env: dict | None = None) -> Iterator[tuple[dict, object]]:
    """A private Airflow (scheduler, dag-processor, api-server, triggerer) on the nightly
    schedule, its DAG parsed and unpaused: yields (its environment, its API client)."""
    from switchyard_dev import local
    home = TEST_STATE / f"airflow-backfill-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(home))
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_PORT", str(free_port(range(28112, 28120))))
    monkeypatch.setenv("SWITCHYARD_RUNS_DIR", str(runs_dir))
    # Log servers of its own: a running demo's (or another checkout's) keep theirs.
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_LOG_PORT", str(free_port()))
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_TRIGGER_LOG_PORT", str(free_port()))
    env = local.airflow_env(streams=3, extra={
        "AIRFLOW_CONN_SWITCHYARD_TARGET": pg_uri, "SWITCHYARD_DATA_ROOT": str(data_root),
        "SWITCHYARD_SCHEMA": schema, "SWITCHYARD_RUNS_DIR": str(runs_dir),
        "SWITCHYARD_SCHEDULE": "0 2 * * *", "SWITCHYARD_BATCH_WAIT_SECONDS": "20",
        "SWITCHYARD_BATCH_POKE_SECONDS": "2", "SWITCHYARD_LEASE_RETRY_SECONDS": "5",
        "SWITCHYARD_LEASE_RETRIES": "200", **(extra_env or {})})
    local.migrate(env)
    from switchyard_dev.demo import default_pool_size
    local.airflow("pools", "set", "switchyard_loads", str(default_pool_size()), "bulk loads", env=env)
    local.start_services(env, 3)
    try:
        api = local.Api()
        api.wait_ready()
        deadline = time.monotonic() + 240
        while not api.exists("/api/v2/dags/switchyard_tpch"):
            assert time.monotonic() < deadline, "the DAG was not parsed"
            time.sleep(2)
        local.airflow("dags", "unpause", "switchyard_tpch", env=env)
        yield env, api
    finally:
        local.stop_services(timeout=10)
        keep_service_logs(request, home)
        drop_metadata(home)
        shutil.rmtree(home, ignore_errors=True)


def drop_metadata(home: Path) -> None:
    """Drop a test Airflow home's metadata database from the embedded PostgreSQL (if it has one)."""
    from switchyard_dev import local
    from switchyard_dev.embedded import EmbeddedPostgres
    from switchyard_dev.scaleout import drop_metadata_database
    if local.airflow_home() == home.resolve() and EmbeddedPostgres().is_running():
        drop_metadata_database(EmbeddedPostgres())


# --- a headless browser -----------------------------------------------------------------------
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
APT = "apt-get update && apt-get install -y chromium chromium-driver"


def browser():
    """(a headless Chromium driver, its profile folder); the test skips, saying why, without one."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:
        pytest.skip(f"headless Chromium not installed ({', '.join(missing)} missing): {APT}")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed in this venv")
    from selenium.webdriver.chrome.service import Service
    os.environ["SE_OFFLINE"] = "true"  # the Debian driver is given; never download one
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="switchyard-chromium-")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", "--window-size=1200,900"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options), profile


# --- a run's results, shaped like the operators' XComs (for stats and report tests) --------------
T0 = datetime(2026, 11, 21, 2, 0, 0, tzinfo=timezone.utc)
KEYS = {"lineitem": "l_orderkey", "orders": "o_orderkey", "customer": "c_custkey"}


def iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="milliseconds")


def checks(table: str, rows: int, lo: int, hi: int, observed_rows: int | None = None) -> list[dict]:
    key = KEYS[table]
    observed_rows = rows if observed_rows is None else observed_rows
    return [
        {"expectation": "expect_table_row_count_to_equal", "column": None, "expected": rows,
         "observed": observed_rows, "success": observed_rows == rows},
        {"expectation": "expect_column_values_to_not_be_null", "column": key, "expected": "no nulls",
         "observed": {"null_count": 0}, "success": True},
        {"expectation": "expect_column_min_to_be_between", "column": key, "expected": [lo, hi],
         "observed": lo, "success": True},
        {"expectation": "expect_column_max_to_be_between", "column": key, "expected": [lo, hi],
         "observed": hi, "success": True},
    ]


def group(table: str, stream: int, start: float, seconds: float, nbytes: int, rows: int, *,
          observed_rows: int | None = None, load_failed: bool = False) -> dict:
    """One group's results as the stats task pulls them from XCom."""
    lo, hi = (stream - 1) * 1000 + 1, stream * 1000
    if load_failed:
        return {"table": table, "stream": stream, "load": None, "validate": None, "switch": None,
                "errors": {"load": f"TargetError: {table}.{stream}.tbl line 17, column 3: invalid integer"},
                "states": {"prepare": "success", "load": "failed", "validate": "upstream_failed",
                           "switch": "upstream_failed"}}
    load = {"rows": rows, "bytes": nbytes, "seconds": seconds, "started": iso(start),
            "ended": iso(start + seconds), "file": f"/data/batch/{table}/{table}.{stream}.tbl", "backend_pid": 4000}
    cks = checks(table, rows, lo, hi, observed_rows)
    valid = all(c["success"] for c in cks)
    validate = {"success": valid, "checks": cks, "seconds": 0.4, "import_seconds": 3.1}
    switch = ({"partition": f"tpch.{table}_p{stream}", "replaced": False, "switched": iso(start + seconds + 2)}
              if valid else None)
    states = {"prepare": "success", "load": "success", "validate": "success" if valid else "failed",
              "switch": "success" if valid else "upstream_failed"}
    return {"table": table, "stream": stream, "load": load, "validate": validate, "switch": switch,
            "states": states}


def context(run_id: str = "manual__2026-11-21T02:00:00+00:00"):
    return {"ti": SimpleNamespace(dag_id="switchyard_tpch", run_id=run_id)}


PLAN = {"batch": "2026-11-21", "batch_dir": "/data/batch", "target": "postgres", "schema": "tpch", "streams": 4}
LINEITEM_BYTES = 18_500_000


# --- an independent reading of a batch's CSV files ----------------------------------------------
# Python's csv and gzip modules only: it shares nothing with the loaders or the generators and
# knows a table's format from the spec alone. A field is NULL only where the file has the
# table's NULL marker in a column the spec declares nullable; everywhere else it is the text
# as the file holds it.
_LENGTH = re.compile(r"^(?:n?var)?n?char\((\d+)\)$")


def open_text(path: Path, encoding: str = "utf-8") -> io.TextIOBase:
    """The file's text, decompressed when its name ends in .gz; line ends left as they are."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return path.open("r", encoding=encoding, newline="")


def raw_text(path: Path, encoding: str = "utf-8") -> str:
    with open_text(path, encoding) as fh:
        return fh.read()


class Field(str):
    """A field's text, and whether the file quoted it: a quoted field is a value, never NULL."""
    quoted = False


def split_fields(record: str, delimiter: str) -> list[Field]:
    """One RFC 4180 record's fields, each with its quoting (Python 3.11's csv module does not
    say which fields were quoted)."""
    out: list[Field] = []
    i, n = 0, len(record)
    while True:
        if i < n and record[i] == '"':
            parts, j = [], i + 1
            while True:
                k = record.index('"', j)  # ValueError: a quoted field left open
                parts.append(record[j:k])
                if record.startswith('""', k):
                    parts.append('"')
                    j = k + 2
                    continue
                i = k + 1
                break
            field = Field("".join(parts))
            field.quoted = True
        else:
            k = record.find(delimiter, i)
            k = n if k < 0 else k
            field = Field(record[i:k])
            i = k
        out.append(field)
        if i >= n:
            return out
        assert record[i] == delimiter, f"text after a closing quote: {record!r}"
        i += 1


def read_records(path: Path, table: Table) -> tuple[list[list[str]], list[list[Field]]]:
    """(header lines, records) of a stream file, every field as the text it is, with its
    quoting. Read twice, by Python's csv module and by splitting at the line end and the
    delimiter outside quotes; the two readings must agree."""
    fmt = table.format
    assert fmt.quoting == "csv", "this reader reads CSV files"
    with open_text(path, fmt.encoding) as fh:
        reader = csv.reader(fh, delimiter=fmt.delimiter, quotechar='"', doublequote=True, strict=True)
        rows = list(reader)
    eol = "\r\n" if fmt.line_end == "crlf" else "\n"
    split = [split_fields(r, fmt.delimiter) for r in records_by_line_end(raw_text(path, fmt.encoding), eol)]
    assert split == rows, f"{path}: the two readings differ"
    return rows[:fmt.header_lines], split[fmt.header_lines:]


def with_nulls(table: Table, record: list[str]) -> list[str | None]:
    """NULL where an unquoted field is the table's NULL marker in a nullable column."""
    marker = table.format.null_marker
    return [None if (column.nullable and marker is not None and value == marker
                     and not getattr(value, "quoted", False)) else value
            for column, value in zip(table.columns, record)]


def typed(table: Table, values: list[str | None]) -> tuple:
    """The values as Python objects of the columns' PostgreSQL types (what psycopg returns)."""
    out: list[Any] = []
    for column, value in zip(table.columns, values):
        sql_type = column_type(column)
        if value is None:
            out.append(None)
        elif sql_type in ("bigint", "integer", "int", "smallint"):
            out.append(int(value))
        elif sql_type == "date":
            out.append(date.fromisoformat(value))
        elif sql_type.startswith("timestamp"):
            out.append(datetime.fromisoformat(value))
        elif sql_type.startswith("numeric"):
            out.append(Decimal(value))
        else:
            out.append(value)
    return tuple(out)


def canonical(values: tuple) -> tuple:
    """Equal values compare equal: numerics without trailing zeros, the rest as they are."""
    return tuple(v.normalize() if isinstance(v, Decimal) else v for v in values)


def row_hash(values: tuple) -> str:
    """A hash of every field of a row (type and value; NULL distinct from every text)."""
    return hashlib.sha256(repr(canonical(values)).encode("utf-8")).hexdigest()


def declared_length(sql_type: str) -> int | None:
    m = _LENGTH.match(sql_type)
    return int(m.group(1)) if m else None


def table_rows(batch_dir: Path, table: Table, files: list[str]) -> Iterator[tuple]:
    """Every row of a table's stream files, typed, in file order."""
    for rel in files:
        _, records = read_records(batch_dir / rel, table)
        for record in records:
            yield typed(table, with_nulls(table, record))


def records_by_line_end(text: str, line_end: str) -> list[str]:
    """The file's records, cut at the line end outside quotes (a quoted field may hold line
    breaks): a piece with an odd number of quotes continues into the next one."""
    pieces = text.split(line_end)
    if pieces and pieces[-1] == "":
        pieces.pop()
    records, pending = [], None
    for piece in pieces:
        pending = piece if pending is None else pending + line_end + piece
        if pending.count('"') % 2 == 0:
            records.append(pending)
            pending = None
    assert pending is None, "the file ends inside a quoted field"
    return records
