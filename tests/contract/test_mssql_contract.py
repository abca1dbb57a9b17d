"""Contract suite against a real SQL Server, through the adapter API the DAG uses.

Runs only when SWITCHYARD_MSSQL_URI names a server, e.g. the docker-compose stack's:

    SWITCHYARD_MSSQL_URI='mssql://sa:<MSSQL_SA_PASSWORD>@127.0.0.1:2000/switchyard?port_count=4&TrustServerCertificate=yes' \
        .venv/bin/python -m pytest -m mssql tests/contract/test_mssql_contract.py

URI: mssql://user:password@host:port/database?option=value&..., options as in
switchyard.targets.mssql.ADAPTER_OPTIONS (load_mode, server_data_root, ports or
base_port + port_count, ...) plus Encrypt / TrustServerCertificate. The database must
exist. With load_mode=bulk_insert the server must see the files: set
SWITCHYARD_MSSQL_SHARED_DIR to a folder of this machine that the server sees at
SWITCHYARD_MSSQL_SERVER_DATA_ROOT (a shared volume); the suite copies its batch there.
Without them it loads over TDS bulk copy (the worker sends the rows). With the
docker-compose stack, from the project folder:

    SWITCHYARD_MSSQL_SHARED_DIR=$PWD/.switchyard/data SWITCHYARD_MSSQL_SERVER_DATA_ROOT=/switchyard/data

(the folder must be writable by you; the server only reads it). The scheduler-guard test
needs bulk_insert; test_the_whole_dag runs the real DAG with `airflow dags test` and an
Airflow connection built from the URI (AIRFLOW_CONN_SWITCHYARD_TARGET), in the tests'
Airflow home. Every statement the suite sends is the adapter's, or one of the queries
below, which tests/unit/targets/mssql/test_mssql_tsql.py parses as T-SQL without a server.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from switchyard.core.batch import read_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec
from switchyard.observability.validation import validate_table

URI = os.environ.get("SWITCHYARD_MSSQL_URI")
pytestmark = [
    pytest.mark.mssql,
    pytest.mark.skipif(not URI, reason="set SWITCHYARD_MSSQL_URI=mssql://user:password@host:port/database?... "
                                       "to run the SQL Server contract suite (see the module docstring)"),
]
SPEC = load_spec("tpch")
TABLES = ["orders", "lineitem", "nation"]
SHARED_DIR = os.environ.get("SWITCHYARD_MSSQL_SHARED_DIR")
SERVER_DATA_ROOT = os.environ.get("SWITCHYARD_MSSQL_SERVER_DATA_ROOT")


# --- the suite's own queries (parsed as T-SQL by tests/unit/targets/mssql/test_mssql_tsql.py) ----------------------
def rows_in_partition_sql(a, table: str) -> str:
    """Rows of a table whose key the partition function puts in partition ? (by $PARTITION)."""
    return (f"SELECT COUNT_BIG(*) FROM {a.qualified(a.schema, table)} "
            f"WHERE $PARTITION.{a.q(a.function_name(table))}({a.q(SPEC.table(table).key)}) = ?")


TABLES_NAMED_SQL = "SELECT COUNT(*) FROM sys.tables WHERE schema_id = SCHEMA_ID(?) AND name IN (?, ?)"
TABLES_IN_SCHEMA_SQL = "SELECT COUNT(*) FROM sys.tables WHERE schema_id = SCHEMA_ID(?)"
# Range constraints of the staging tables (before the switch: all trusted; after: none left).
STAGING_CONSTRAINTS_SQL = ("SELECT OBJECT_NAME(parent_object_id), is_not_trusted FROM sys.check_constraints "
                           "WHERE schema_id = SCHEMA_ID(?) ORDER BY 1")
UNTRUSTED_IN_SCHEMA_SQL = ("SELECT COUNT(*) FROM sys.check_constraints "
                           "WHERE schema_id = SCHEMA_ID(?) AND is_not_trusted = 1")
# Each partition's storage: a switched-in partition brings the staging table's partition_id.
PARTITION_IDS_SQL = ("SELECT partition_number, partition_id FROM sys.partitions "
                     "WHERE object_id = OBJECT_ID(?) AND index_id IN (0, 1) ORDER BY partition_number")
FINGERPRINT_SQL = "SELECT COUNT_BIG(*), CHECKSUM_AGG(BINARY_CHECKSUM(*)) FROM {table}"
COUNT_SQL = "SELECT COUNT_BIG(*) FROM {table}"
VISIBLE_SCHEDULERS_SQL = "SELECT scheduler_id FROM sys.dm_os_schedulers WHERE status = 'VISIBLE ONLINE'"
LEASE_CLEANUP_SQL = "DELETE FROM [switchyard].[run_lease] WHERE [target_schema] = ?"
CLAIM_SCHEDULER_SQL = ("EXEC sp_getapplock @Resource = ?, @LockMode = N'Exclusive', @LockOwner = N'Session', "
                       "@LockTimeout = 0")


# load_stats as the first versions created it: keyed without the DAG, without the later columns.
EARLIER_LOAD_STATS_SQL = ("CREATE TABLE {table} (run_id nvarchar(250) NOT NULL, batch nvarchar(250) NOT NULL, "
                          "table_name nvarchar(128) NOT NULL, stream int NOT NULL, [file] nvarchar(1000) NOT NULL, "
                          "rows_loaded bigint NULL, CONSTRAINT [load_stats_pk] PRIMARY KEY (run_id, table_name, stream))")
EARLIER_LOAD_STATS_ROW_SQL = ("INSERT INTO {table} (run_id, batch, table_name, stream, [file], rows_loaded) "
                              "VALUES (N'manual__old', N'b0', N'orders', 1, N'/old/orders.1.tbl', 5)")
LOAD_STATS_KEY_SQL = ("SELECT COL_NAME(ic.[object_id], ic.column_id) FROM sys.key_constraints AS k "
                      "JOIN sys.index_columns AS ic ON ic.[object_id] = k.parent_object_id AND ic.index_id = k.unique_index_id "
                      "WHERE k.parent_object_id = OBJECT_ID(?) AND k.[type] = 'PK' ORDER BY ic.key_ordinal")
LOAD_STATS_ROWS_SQL = "SELECT dag_id, run_id, rows_loaded FROM {table} ORDER BY dag_id, run_id"
DROP_TABLE_SQL = "DROP TABLE IF EXISTS {table}"
DROP_SCHEMA_SQL = "DROP SCHEMA IF EXISTS {schema}"
# Storage: each data file's size now (8-KB pages), and autogrowth events the default trace
# recorded for this database since a time (EventClass 92: data file, 93: log file).
FILE_SIZES_SQL = "SELECT name, size FROM sys.database_files WHERE [type] = 0"
AUTOGROWTH_EVENTS_SQL = ("SELECT COUNT(*) FROM sys.fn_trace_gettable((SELECT [path] FROM sys.traces "
                         "WHERE is_default = 1), DEFAULT) WHERE EventClass IN (92, 93) AND DatabaseID = DB_ID() "
                         "AND StartTime >= ?")
SERVER_TIME_SQL = "SELECT SYSDATETIME()"
CORPUS_ROWS_SQL = "SELECT id, body, tag FROM {table} ORDER BY id"


def drop_sql(a, tables, streams: int = 3) -> list[str]:
    """Tables, then schemas; partition functions, schemes and filegroups stay for the next run
    (functions are named after the schema: each test's schema has its own)."""
    drops = [f"DROP TABLE IF EXISTS {a.qualified(s, t)}" for s in (a.schema, a.staging_schema)
             for t in [*tables, *(f"{t}_{k}" for t in tables for k in range(1, streams + 1)),
                       *(f"{t}_{k}_old" for t in tables for k in range(1, streams + 1))]]
    return drops + [f"DROP SCHEMA IF EXISTS {a.q(a.staging_schema)}", f"DROP SCHEMA IF EXISTS {a.q(a.schema)}"]


def suite_sql(a) -> list[str]:
    """Every statement of the suite's own, for the parser check."""
    return [*(rows_in_partition_sql(a, t) for t in ("orders", "lineitem")), TABLES_NAMED_SQL, TABLES_IN_SCHEMA_SQL,
            STAGING_CONSTRAINTS_SQL, UNTRUSTED_IN_SCHEMA_SQL, PARTITION_IDS_SQL,
            FINGERPRINT_SQL.format(table=a.qualified(a.schema, "orders")),
            COUNT_SQL.format(table=a.qualified(a.staging_schema, "orders_1")), VISIBLE_SCHEDULERS_SQL,
            CLAIM_SCHEDULER_SQL, LEASE_CLEANUP_SQL, *drop_sql(a, TABLES),
            *(q.format(table=a.qualified(a.schema, "load_stats")) for q in (
                EARLIER_LOAD_STATS_SQL, EARLIER_LOAD_STATS_ROW_SQL, LOAD_STATS_ROWS_SQL, DROP_TABLE_SQL)),
            LOAD_STATS_KEY_SQL, DROP_SCHEMA_SQL.format(schema=a.q(a.schema)), FILE_SIZES_SQL, AUTOGROWTH_EVENTS_SQL,
            SERVER_TIME_SQL, CORPUS_ROWS_SQL.format(table=a.qualified(a.staging_schema, "notes_1"))]


def load_options() -> dict:
    """bulk_insert where the server sees the shared folder, else TDS bulk copy."""
    if SHARED_DIR and SERVER_DATA_ROOT:
        return {"load_mode": "bulk_insert", "local_data_root": str(Path(SHARED_DIR).resolve()),
                "server_data_root": SERVER_DATA_ROOT}
    if "load_mode=" in (URI or ""):
        return {}
    return {"load_mode": "tds"}


def shared_batch(folder: Path) -> tuple[Path, Path]:
    """(data root, batch folder) the loads read: a copy in the shared folder for bulk_insert."""
    if load_options().get("load_mode") != "bulk_insert":
        return folder.parent, folder
    root = Path(SHARED_DIR).resolve()
    target = root / f"contract-{uuid.uuid4().hex[:8]}"
    shutil.copytree(folder, target)
    return root, target


@pytest.fixture(scope="module")
def batch(tpch_batch):
    name, folder = tpch_batch
    root, folder = shared_batch(folder)
    manifest = read_manifest(folder, SPEC)
    yield folder, manifest, plan_batch(SPEC, manifest, TABLES)
    if folder.name.startswith("contract-"):
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def adapter(batch):
    from switchyard.targets.mssql import MssqlAdapter
    schema = f"c_{uuid.uuid4().hex[:8]}"
    a = MssqlAdapter(SPEC, uri=URI, schema=schema, **load_options())
    yield a
    a.execute(drop_sql(a, TABLES))


def _load_stream(adapter, folder, s):
    adapter.prepare(s)
    result = adapter.load(s, folder / s.file)
    return result


def _validate(adapter, s, rows):
    table = SPEC.table(s.table)
    return validate_table(adapter.sqlalchemy_url(), adapter.staging_schema, s.staging_table, table.key,
                          rows, s.key_min, s.key_max, engine=adapter.engine)


def test_scheduler_count_is_positive(adapter):
    assert adapter.scheduler_count() >= 1


def test_load_validate_switch_every_stream(adapter, batch):
    folder, manifest, plan = batch
    assert any("new table" in n for n in adapter.setup(plan))
    assert not any("new table" in n for n in adapter.setup(plan))  # a second setup finds everything in place
    waits_before = adapter.wait_stats_snapshot()
    for table_plan in plan.tables:
        streams = [s for s in table_plan.streams if not s.empty]
        for s in streams:
            expected = manifest.entry(s.table, s.stream).rows
            result = _load_stream(adapter, folder, s)
            assert result.rows == expected, f"{s.group_id}: loaded {result.rows}, manifest says {expected}"
            assert result.details["session_id"] is not None or result.details.get("mode") == "tds"
            if s.partitioned:
                assert adapter.constraint_trusted(s) is True, f"{s.group_id}: range constraint not trusted before switch"
            outcome = _validate(adapter, s, expected)
            assert outcome.success, outcome.to_dict()
            switched = adapter.switch(s)
            # A partitioned table's streams go in together, with its last switch.
            assert switched["in_target"] is (s is streams[-1] or not s.partitioned)
            if s.partitioned and s is not streams[-1]:
                assert adapter.row_count(s.table) == 0, "readers saw part of the batch"
        for s in streams:
            expected = manifest.entry(s.table, s.stream).rows
            if s.partitioned:
                # RANGE LEFT with an empty partition below stream 1: stream k is partition k + 1.
                assert adapter.partition_number(s) == s.stream + 1
                assert adapter.partition_rows(s) == expected
                n = adapter.fetch(rows_in_partition_sql(adapter, s.table), (s.stream + 1,))[0][0]
                assert n == expected
    for table in TABLES:
        total = sum(e.rows for e in manifest.entries if e.table == table)
        assert adapter.row_count(table) == total
    assert isinstance(adapter.wait_stats_snapshot(), dict) and isinstance(waits_before, dict)
    assert adapter.latch_stats_snapshot() is not None


def test_rerun_of_the_batch_replaces_the_table_whole(adapter, batch):
    folder, manifest, plan = batch
    before = fingerprint(adapter, ["orders"])
    adapter.setup(plan)
    streams = plan.table("orders").streams
    for s in streams:
        _load_stream(adapter, folder, s)
        assert adapter.constraint_trusted(s) is True
        result = adapter.switch(s)
    assert result["table_switched"] is True and result["removed"]
    assert fingerprint(adapter, ["orders"]) == before
    left = adapter.fetch(TABLES_NAMED_SQL, (adapter.staging_schema, streams[0].staging_table, streams[1].staging_table))
    assert left[0][0] == 0


def test_rerun_of_an_unpartitioned_table_replaces_it(adapter, batch):
    folder, manifest, plan = batch
    s = plan.stream("nation", 1)
    _load_stream(adapter, folder, s)
    adapter.switch(s)
    assert adapter.row_count("nation") == 25


def test_a_bad_file_fails_naming_the_file(adapter, batch, tmp_path):
    from switchyard.targets import TargetError
    folder, manifest, plan = batch
    s = plan.stream("orders", 3)
    bad = folder / "orders" / "orders.3.bad.tbl"
    lines = (folder / s.file).read_text().splitlines(keepends=True)
    lines[4] = lines[4].replace("|O|", "|O|x", 1) if "|O|" in lines[4] else "not|a|row|\n"
    bad.write_text("".join(lines))
    try:
        adapter.prepare(s)
        with pytest.raises(TargetError, match=r"orders\.3\.bad\.tbl"):
            adapter.load(s, bad)
    finally:
        bad.unlink()


def test_a_retried_switch_finds_it_done(adapter, batch):
    """The table's commit ran but its task died before reporting: the retry finds no staging
    table and the stream's partition holding rows, and changes nothing."""
    folder, manifest, plan = batch
    adapter.setup(plan)
    streams = plan.table("orders").streams
    for s in streams:
        _load_stream(adapter, folder, s)
        last = adapter.switch(s)
    assert last["table_switched"] is True
    ids = adapter.fetch(PARTITION_IDS_SQL, (adapter.qualified(adapter.schema, "orders"),))
    before = fingerprint(adapter, ["orders"])
    for s in streams:
        again = adapter.switch(s)
        assert again["already_switched"] is True and again["partition_number"] == s.stream + 1
    assert fingerprint(adapter, ["orders"]) == before
    assert adapter.fetch(PARTITION_IDS_SQL, (adapter.qualified(adapter.schema, "orders"),)) == ids


def test_an_earlier_load_stats_table_is_rekeyed_by_dag_and_keeps_its_rows(batch):
    """A run id is unique only within its DAG: setup re-keys a load_stats table of the
    earlier shape, keeps its rows, and then two DAGs' rows with one run id both stay."""
    from switchyard.observability.stats import write_load_stats
    from switchyard.targets.mssql import MssqlAdapter
    control = f"k_{uuid.uuid4().hex[:8]}"
    a = MssqlAdapter(SPEC, uri=URI, schema=f"c_{uuid.uuid4().hex[:8]}", control_schema=control, **load_options())
    table = a.qualified(control, "load_stats")
    _, _, plan = batch
    try:
        a.setup(plan)  # the control schema, then load_stats as the first versions left it
        a.execute([DROP_TABLE_SQL.format(table=table), EARLIER_LOAD_STATS_SQL.format(table=table),
                   EARLIER_LOAD_STATS_ROW_SQL.format(table=table)])
        a.setup(plan)
        assert [r[0] for r in a.fetch(LOAD_STATS_KEY_SQL, (table,))] == ["dag_id", "run_id", "table_name", "stream"]
        assert a.fetch(LOAD_STATS_ROWS_SQL.format(table=table)) == [("", "manual__old", 5)]
        for dag_id, rows in (("nightly_sales", 100), ("nightly_tpch", 200), ("nightly_tpch", 201)):
            write_load_stats(a, {"dag_id": dag_id, "run_id": "scheduled__2026-11-23T02:00:00+00:00", "batch": "b1",
                                 "groups": [{"table": "orders", "stream": 1, "file": "/b1/orders.1.tbl",
                                             "rows": rows, "outcome": "switched"}]})
        a.setup(plan)  # nothing left to re-key
        assert a.fetch(LOAD_STATS_ROWS_SQL.format(table=table)) == [
            ("", "manual__old", 5), ("nightly_sales", "scheduled__2026-11-23T02:00:00+00:00", 100),
            ("nightly_tpch", "scheduled__2026-11-23T02:00:00+00:00", 201)]
    finally:
        a.execute([DROP_TABLE_SQL.format(table=table), DROP_TABLE_SQL.format(table=a.qualified(control, "run_lease")),
                   *drop_sql(a, TABLES), DROP_SCHEMA_SQL.format(schema=a.q(control))])


def test_a_refused_login_or_database_fails_at_once(adapter):
    import dataclasses
    from switchyard.targets import TargetError
    for change in ({"password": f"wrong-{uuid.uuid4().hex}"}, {"database": f"no_db_{uuid.uuid4().hex[:8]}"}):
        refused = dataclasses.replace(adapter.endpoint, **change)
        other = type(adapter)(SPEC, uri=URI, schema=adapter.schema, **load_options())
        other.endpoint = refused
        with pytest.raises(TargetError, match="the target refused the connection") as caught:
            other.connect_odbc()
        assert caught.value.permanent is True, change


# --- one load per scheduler, on the server -----------------------------------------------------
def test_scheduler_guard_reconnects_then_loads_shared(adapter, batch):
    """A second session holds every scheduler's claim: each attempt gets the server's busy
    error, the loader reconnects guard_retries times, then loads without the claim."""
    if adapter.load_mode != "bulk_insert":
        pytest.skip("the scheduler guard is part of the BULK INSERT batch: set SWITCHYARD_MSSQL_SHARED_DIR "
                    "and SWITCHYARD_MSSQL_SERVER_DATA_ROOT")
    folder, manifest, plan = batch
    s = plan.stream("orders", 1)
    adapter.setup(plan)
    expected = manifest.entry("orders", 1).rows
    retries = adapter.guard_retries
    adapter.guard_retries = 2
    blocker = adapter.connect_odbc()
    try:
        cur = blocker.cursor()
        schedulers = [r[0] for r in cur.execute(VISIBLE_SCHEDULERS_SQL).fetchall()]
        for scheduler in schedulers:
            cur.execute(CLAIM_SCHEDULER_SQL, f"switchyard.scheduler.{scheduler}")
        adapter.prepare(s)
        shared = adapter.load(s, folder / s.file)
    finally:
        blocker.close()  # ends the session: its claims go with it
        adapter.guard_retries = retries
    assert shared.rows == expected
    assert shared.details["attempts"] == 4  # the first try, 2 reconnects, then without the claim
    assert shared.details["scheduler_shared"] is True and shared.details["scheduler_claimed"] is False
    # With the schedulers free, a retried load claims one at once and still loads each row once.
    again = adapter.load(s, folder / s.file)
    assert again.rows == expected and again.details["attempts"] == 1 and again.details["scheduler_claimed"]
    staging = adapter.qualified(adapter.staging_schema, s.staging_table)
    assert adapter.fetch(COUNT_SQL.format(table=staging))[0][0] == expected


# --- the whole DAG on SQL Server ---------------------------------------------------------------
def airflow_connection(options: dict) -> str:
    """The Airflow connection (JSON form of AIRFLOW_CONN_*) for the server named by the URI."""
    from switchyard.targets.mssql import parse_uri
    endpoint, _ = parse_uri(URI)
    extra = {**dict(parse_qsl(urlsplit(URI).query)), **options}
    return json.dumps({"conn_type": "mssql", "host": endpoint.host, "port": endpoint.port,
                       "login": endpoint.user, "password": endpoint.password, "schema": endpoint.database,
                       "extra": extra})


def line_count(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def fingerprint(a, tables) -> dict:
    return {t: tuple(a.fetch(FINGERPRINT_SQL.format(table=a.qualified(a.schema, t)))[0]) for t in tables}


def test_the_whole_dag(tpch_batch, tmp_path):
    """`airflow dags test` of the real DAG at scale 0.01 in 3 streams: loaded, validated,
    switched; then a run that stops before the switches (trusted constraints on staging);
    then a full rerun that replaces every partition with the same rows."""
    from switchyard_dev.local import airflow, airflow_env, migrate
    from switchyard.targets.mssql import MssqlAdapter
    name, folder = tpch_batch
    root, folder = shared_batch(folder)
    options = {**load_options(), "local_data_root": str(root)}
    schema = f"d_{uuid.uuid4().hex[:8]}"
    env = airflow_env(streams=3, extra={
        "AIRFLOW_CONN_SWITCHYARD_TARGET": airflow_connection(options),
        "SWITCHYARD_DATA_ROOT": str(root), "SWITCHYARD_SCHEMA": schema,
        "SWITCHYARD_RUNS_DIR": str(tmp_path / "runs"), "SWITCHYARD_SCHEDULE": "none"})
    migrate(env)
    a = MssqlAdapter(SPEC, uri=URI, schema=schema, **options)
    manifest = read_manifest(folder, SPEC)
    plan = plan_batch(SPEC, manifest)
    conf = json.dumps({"batch": folder.name})

    def dags_test(*extra: str):
        return airflow("dags", "test", "switchyard_tpch", "-c", conf, *extra, env=env, check=False, timeout=3600)

    try:
        first = dags_test()
        assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
        for table in SPEC.tables:
            files = sorted((folder / table.name).glob("*.tbl"))
            assert a.row_count(table.name) == sum(line_count(f) for f in files), table.name
        for s in plan.all_streams():
            if s.partitioned and not s.empty:
                lines = line_count(folder / s.file)
                assert a.partition_number(s) == s.stream + 1, s.group_id
                assert a.fetch(rows_in_partition_sql(a, s.table), (s.stream + 1,))[0][0] == lines, s.group_id
                assert a.partition_rows(s) == lines, s.group_id
        # Switched: no staging table is left, and with them their constraints.
        assert a.fetch(TABLES_IN_SCHEMA_SQL, (a.staging_schema,))[0][0] == 0
        assert a.fetch(STAGING_CONSTRAINTS_SQL, (a.staging_schema,)) == []
        assert a.fetch(UNTRUSTED_IN_SCHEMA_SQL, (a.schema,))[0][0] == 0
        before = fingerprint(a, SPEC.table_names)
        ids_before = {t: a.fetch(PARTITION_IDS_SQL, (a.qualified(a.schema, t),)) for t in ("orders", "lineitem")}

        # Loaded and validated, switches not run: every staging table holds its file, under
        # a trusted range constraint (SWITCH would refuse an untrusted one); the target is as it was.
        dags_test("--mark-success-pattern", r".*\.switch")
        constraints = a.fetch(STAGING_CONSTRAINTS_SQL, (a.staging_schema,))
        partitioned = [s for s in plan.all_streams() if s.partitioned and not s.empty]
        assert sorted(r[0] for r in constraints) == sorted(s.staging_table for s in partitioned)
        assert all(r[1] == 0 for r in constraints), constraints
        for s in partitioned:
            staged = a.fetch(COUNT_SQL.format(table=a.qualified(a.staging_schema, s.staging_table)))[0][0]
            assert staged == line_count(folder / s.file), s.group_id
        assert fingerprint(a, SPEC.table_names) == before

        # A full rerun replaces every partition (new storage) with the same rows.
        second = dags_test()
        assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
        assert fingerprint(a, SPEC.table_names) == before
        for t, old in ids_before.items():
            new = a.fetch(PARTITION_IDS_SQL, (a.qualified(a.schema, t),))
            assert [n for n, _ in new] == [n for n, _ in old]
            changed = [n for (n, pid), (_, old_pid) in zip(new, old) if pid != old_pid]
            assert changed == [s.stream + 1 for s in plan.table(t).streams if not s.empty], t
        assert a.fetch(TABLES_IN_SCHEMA_SQL, (a.staging_schema,))[0][0] == 0
        stats = json.loads(max((tmp_path / "runs").glob("switchyard_tpch/*/stats.json"),
                               key=lambda p: p.stat().st_mtime).read_text())
        assert stats["failed_groups"] == []
        assert all(g["replaced"] for g in stats["groups"] if g["table"] in ("orders", "lineitem"))
    finally:
        a.execute(drop_sql(a, SPEC.table_names))
        if folder.name.startswith("contract-"):
            shutil.rmtree(folder, ignore_errors=True)


# --- storage and logging (issue: what a DBA checks) ---------------------------------------------
def test_files_are_presized_and_no_load_waits_for_autogrowth(adapter, batch):
    """setup makes every stream's files at least the size the batch needs; the loads then
    leave every data file's size as it was, and the default trace (where readable) records no
    autogrowth of this database meanwhile."""
    folder, manifest, plan = batch
    adapter.setup(plan)
    planned = {f["name"]: f["size_pages"] for fg in adapter.filegroups(plan) for f in fg["files"]}
    sizes = dict(adapter.fetch(FILE_SIZES_SQL))
    for name, pages in planned.items():
        assert sizes[name] >= pages, f"{name}: {sizes[name]} pages, planned {pages}"
    since = adapter.fetch(SERVER_TIME_SQL)[0][0]
    for s in plan.all_streams():
        if not s.empty:
            _load_stream(adapter, folder, s)
    assert dict(adapter.fetch(FILE_SIZES_SQL)) == sizes, "a data file grew during the loads"
    try:
        events = adapter.fetch(AUTOGROWTH_EVENTS_SQL, (since,))[0][0]
    except Exception as exc:  # the default trace may be off, or the login may not read it
        pytest.skip(f"default trace not readable here ({exc}); the sizes above did not change")
    assert events == 0


def test_each_load_reports_how_it_was_logged_and_where_it_ran(adapter, batch):
    """The load's details say minimal or full logging, consistent with the database's
    recovery model (measured from the session's log bytes where a sample fell inside a
    batch's transaction), and the scheduler and node it ran on."""
    from switchyard.targets.mssql.recovery import recovery_advice
    folder, manifest, plan = batch
    adapter.setup(plan)
    state = adapter.recovery_state()
    advice = recovery_advice(state)
    expected = "minimal" if state.minimal_logging else "full"
    s = plan.stream("lineitem", 1)
    batch_size, every = adapter.batch_size, adapter.watch_every
    adapter.batch_size, adapter.watch_every = 2_000, 0.02  # many short transactions, looked at often
    try:
        result = _load_stream(adapter, folder, s)
    finally:
        adapter.batch_size, adapter.watch_every = batch_size, every
    d = result.details
    assert d["logging"] == expected, (d, advice.text)
    assert d["recovery_model"] == state.recovery_model
    assert d["logging_basis"].startswith(("measured", "rules"))
    if d["logging_basis"].startswith("measured"):
        assert (d["log_ratio"] < 0.25) == (expected == "minimal")
    assert d.get("scheduler_id") is not None and d.get("node_id") is not None
    assert advice.minimal is state.minimal_logging


# --- byte-exact: a corpus of nasty values through BULK INSERT and TDS bulk copy ----------------------
@pytest.mark.parametrize("path_kind, fmt, nullable", [
    ("bulk_insert", {"delimiter": "|", "trailing_delimiter": True, "null_marker": ""}, True),
    ("bulk_insert", {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1}, False),
    ("tds", {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "null_marker": "NA"}, True),
    ("tds", {"delimiter": "|", "trailing_delimiter": True, "line_end": "crlf"}, True),
])
def test_what_is_in_the_file_is_what_is_in_the_table(tmp_path, path_kind, fmt, nullable):
    """Every field loaded compared, by a hash per row, with an independent reading of the file."""
    from test_mssql_formats import NASTY, digest, independent_rows, spec_with, stream_of, write_corpus
    from switchyard.core.planner import LoadPlan, TablePlan
    from switchyard.targets.mssql import MssqlAdapter
    options = load_options()
    if path_kind == "bulk_insert" and options.get("load_mode") != "bulk_insert":
        pytest.skip("BULK INSERT needs the shared folder: set SWITCHYARD_MSSQL_SHARED_DIR and "
                    "SWITCHYARD_MSSQL_SERVER_DATA_ROOT")
    spec = spec_with(fmt, nullable=nullable)
    root = Path(SHARED_DIR).resolve() if path_kind == "bulk_insert" else tmp_path
    folder = root / f"corpus-{uuid.uuid4().hex[:8]}"
    (folder / "notes").mkdir(parents=True)
    s = stream_of(spec, 1, 1000)
    values = NASTY if fmt.get("quoting") == "csv" else [v for v in NASTY if "\n" not in v]
    data = write_corpus(folder / s.file, fmt, values, header=bool(fmt.get("header_lines")))
    a = MssqlAdapter(spec, uri=URI, schema=f"x_{uuid.uuid4().hex[:8]}",
                     **{**options, "local_data_root": str(root), "load_mode": path_kind})
    plan = LoadPlan(spec=spec, streams=1, tables=(TablePlan(spec.table("notes"), (s,)),))
    try:
        a.setup(plan)
        a.prepare(s)
        result = a.load(s, folder / s.file)
        assert result.rows == len(values)
        # BULK INSERT where the server stores the text exactly, else the client path (the
        # load says which and why); either way the rows must be the file's.
        path_taken = f'{result.details["mode"]}: {result.details.get("load_path")}'
        loaded = [tuple(r) for r in a.fetch(CORPUS_ROWS_SQL.format(table=a.qualified(a.staging_schema, "notes_1")))]
        expected = independent_rows(data, fmt, bool(fmt.get("header_lines")))
        marker = fmt.get("null_marker")
        if nullable and marker is not None:
            # The one exception: the NULL marker, unquoted, in the nullable column.
            quoted_csv = fmt.get("quoting") == "csv"
            expected = [(i, None if b == marker and not (quoted_csv and b in ("", "NA")) else b, t)
                        for i, b, t in expected]
        assert [digest(r) for r in loaded] == [digest(r) for r in expected], (path_taken, list(zip(loaded, expected)))
    finally:
        a.execute([f"DROP TABLE IF EXISTS {a.qualified(a.staging_schema, 'notes_1')}",
                   f"DROP TABLE IF EXISTS {a.qualified(a.schema, 'notes')}",
                   f"DROP SCHEMA IF EXISTS {a.q(a.staging_schema)}", f"DROP SCHEMA IF EXISTS {a.q(a.schema)}"])
        shutil.rmtree(folder, ignore_errors=True)


def test_one_past_the_declared_length_fails_on_both_paths(tmp_path):
    from test_mssql_formats import spec_with, stream_of, write_corpus
    from switchyard.core.planner import LoadPlan, TablePlan
    from switchyard.targets import TargetError
    from switchyard.targets.mssql import MssqlAdapter
    fmt = {"delimiter": "|", "trailing_delimiter": True}
    spec = spec_with(fmt, nullable=False)
    for kind in ("bulk_insert", "tds"):
        options = load_options()
        if kind == "bulk_insert" and options.get("load_mode") != "bulk_insert":
            continue
        root = Path(SHARED_DIR).resolve() if kind == "bulk_insert" else tmp_path
        folder = root / f"corpus-{uuid.uuid4().hex[:8]}"
        (folder / "notes").mkdir(parents=True)
        s = stream_of(spec, 1, 1000)
        write_corpus(folder / s.file, fmt, ["exactly 12 c", "thirteen char"])
        a = MssqlAdapter(spec, uri=URI, schema=f"x_{uuid.uuid4().hex[:8]}",
                         **{**options, "local_data_root": str(root), "load_mode": kind})
        try:
            a.setup(LoadPlan(spec=spec, streams=1, tables=(TablePlan(spec.table("notes"), (s,)),)))
            a.prepare(s)
            with pytest.raises(TargetError, match=r"notes\.1\.txt") as failed:
                a.load(s, folder / s.file)
            assert failed.value.permanent is True
        finally:
            a.execute([f"DROP TABLE IF EXISTS {a.qualified(a.staging_schema, 'notes_1')}",
                       f"DROP TABLE IF EXISTS {a.qualified(a.schema, 'notes')}",
                       f"DROP SCHEMA IF EXISTS {a.q(a.staging_schema)}", f"DROP SCHEMA IF EXISTS {a.q(a.schema)}"])
            shutil.rmtree(folder, ignore_errors=True)


def test_the_servers_layout_reads_and_plans_ports(adapter):
    """LAYOUT_SQL on the server, parsed by the code `plan --emit server-config --layout` uses."""
    from switchyard.targets.mssql.server_config import plan_ports, server_config
    layout = adapter.server_layout()
    assert layout.nodes and all(n.schedulers >= 1 for n in layout.nodes)
    assert sum(n.schedulers for n in layout.nodes) == adapter.scheduler_count()
    plan = plan_ports(layout, 8)
    assert len(plan.stream_ports) == 8
    assert "PROCESS AFFINITY CPU =" not in server_config(layout, 8).replace("CPU = AUTO", "")
