"""Contract suite for the nightly load modes against a real SQL Server, through the adapter API
the DAG uses (setup.plan, prepare, load, switch).

Runs only when SWITCHYARD_MSSQL_URI names a server (see tests/test_mssql_contract.py for the
URI and the shared-folder settings; without them the loads go over TDS bulk copy):

    SWITCHYARD_MSSQL_URI='mssql://sa:<password>@127.0.0.1:2000/switchyard?TrustServerCertificate=yes' \\
        .venv/bin/python -m pytest -m mssql tests/test_mssql_contract_modes.py

Each test loads small batches of orders rows it writes itself (key ranges chosen per test, so
stream shapes change between batches) into a schema of its own, dropped afterwards with its
partition function and scheme. Every statement the suite sends itself is in `suite_sql`, which
tests/test_mssql_window.py parses as T-SQL without a server.
"""
from __future__ import annotations

import os
import uuid
from dataclasses import replace as changed
from pathlib import Path

import pytest

from switchyard.core.batch import Manifest, ManifestEntry
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec

URI = os.environ.get("SWITCHYARD_MSSQL_URI")
pytestmark = [
    pytest.mark.mssql,
    pytest.mark.skipif(not URI, reason="set SWITCHYARD_MSSQL_URI=mssql://user:password@host:port/database?... "
                                       "to run the SQL Server contract suite (see tests/test_mssql_contract.py)"),
]
SPEC = load_spec("tpch")

# --- the suite's own queries (parsed as T-SQL by tests/test_mssql_window.py) ---------------------
FUNCTIONS_SQL = "SELECT name FROM sys.partition_functions WHERE name IN (?, ?) ORDER BY name"
STAGING_TABLES_SQL = "SELECT COUNT(*) FROM sys.tables WHERE schema_id = SCHEMA_ID(?)"
BATCHES_SQL = ("SELECT batch, COUNT(*) FROM [switchyard].[partition_batches] WHERE target_schema = ? "
               "AND table_name = N'orders' GROUP BY batch ORDER BY batch")
EDGE_ROWS_SQL = ("SELECT MIN(p.partition_number), MAX(p.partition_number), "
                 "SUM(CASE WHEN p.partition_number IN (1, (SELECT MAX(partition_number) FROM sys.partitions "
                 "WHERE [object_id] = OBJECT_ID(?) AND index_id IN (0, 1))) THEN p.[rows] ELSE 0 END) "
                 "FROM sys.partitions AS p WHERE p.[object_id] = OBJECT_ID(?) AND p.index_id IN (0, 1)")
KEY_RANGE_SQL = "SELECT MIN(o_orderkey), MAX(o_orderkey), COUNT_BIG(*) FROM {table}"
DBA_INDEX_SQL = "CREATE NONCLUSTERED INDEX [ix_orders_custkey] ON {table} ([o_custkey]) ON {scheme}([o_orderkey])"
DBA_COMPRESS_SQL = "ALTER TABLE {table} REBUILD PARTITION = ALL WITH (DATA_COMPRESSION = PAGE)"
INDEX_EXISTS_SQL = "SELECT COUNT(*) FROM sys.indexes WHERE [object_id] = OBJECT_ID(?) AND name = N'ix_orders_custkey'"
COMPRESSION_SQL = ("SELECT DISTINCT data_compression_desc FROM sys.partitions WHERE [object_id] = OBJECT_ID(?) "
                   "AND [rows] > 0")
CLEANUP_SQL = [
    "DELETE FROM [switchyard].[partition_batches] WHERE target_schema = ?",
    "DELETE FROM [switchyard].[planned_partitions] WHERE target_schema = ?",
    "DELETE FROM [switchyard].[run_lease] WHERE target_schema = ?",
]


def drop_sql(a) -> list[str]:
    """The schema's tables (target, staging, archive), then its function and scheme, then schemas."""
    staging = [f"DROP TABLE IF EXISTS {a.qualified(a.staging_schema, f'orders_{k}')}" for k in range(1, 9)]
    return [*staging, f"DROP TABLE IF EXISTS {a.qualified(a.schema, 'orders')}",
            f"DROP PARTITION SCHEME {a.q(a.scheme_name('orders'))}",
            f"DROP PARTITION FUNCTION {a.q(a.function_name('orders'))}",
            f"DROP SCHEMA IF EXISTS {a.q(a.staging_schema)}", f"DROP SCHEMA IF EXISTS {a.q(a.schema)}"]


def suite_sql(a) -> list[str]:
    table = a.qualified(a.schema, "orders")
    return [FUNCTIONS_SQL, STAGING_TABLES_SQL, BATCHES_SQL, EDGE_ROWS_SQL, KEY_RANGE_SQL.format(table=table),
            DBA_INDEX_SQL.format(table=table, scheme=a.q(a.scheme_name("orders"))), DBA_COMPRESS_SQL.format(table=table),
            INDEX_EXISTS_SQL, COMPRESSION_SQL, *CLEANUP_SQL, *drop_sql(a)]


# --- batches written by the tests --------------------------------------------------------------------
def write_batch(root: Path, name: str, ranges: list[tuple[int, int]]) -> tuple[Path, Manifest]:
    """Orders files, one per stream, holding every key of its range (TPC-H's layout: '|' after
    each field, LF)."""
    folder = root / name
    (folder / "orders").mkdir(parents=True, exist_ok=True)
    entries = []
    for k, (lo, hi) in enumerate(ranges, start=1):
        path = folder / "orders" / f"orders.{k}.tbl"
        with path.open("w") as out:
            for key in range(lo, hi + 1):
                out.write(f"{key}|{key % 1000 + 1}|O|{key % 997}.25|2026-04-0{key % 9 + 1}|1-URGENT|"
                          f"Clerk#{key % 1000:09d}|0|batch {name}|\n")
        entries.append(ManifestEntry("orders", k, f"orders/orders.{k}.tbl", path.stat().st_size, hi - lo + 1, lo, hi))
    return folder, Manifest(spec="tpch", streams=len(ranges), entries=tuple(entries))


def even(n: int, start: int = 1, size: int = 4000) -> list[tuple[int, int]]:
    step = size // n
    return [(start + i * step, start + (i + 1) * step - 1) for i in range(n)]


@pytest.fixture
def target(tmp_path):
    """make(mode=..., keep=..., retire=...) -> load(batch, ranges, switch=...) on a schema of its own."""
    from test_mssql_contract import SHARED_DIR, load_options
    from switchyard.targets.mssql import MssqlAdapter
    schema = f"m_{uuid.uuid4().hex[:8]}"
    options = load_options()
    root = Path(SHARED_DIR).resolve() / f"modes-{schema}" if options.get("load_mode") == "bulk_insert" else tmp_path
    made = []
    state = {"run": 0}

    class Target:
        def __init__(self, **table):
            self.spec = changed(SPEC, tables=tuple(changed(t, **table) if t.name == "orders" else t
                                                   for t in SPEC.tables))

        def adapter(self, batch: str = ""):
            state["run"] += 1
            a = MssqlAdapter(self.spec, uri=URI, schema=schema, lease_holder=f"dag/run-{state['run']}",
                             lease_batch=batch, **options)
            made.append(a)
            return a

        def load(self, batch: str, ranges, switch=None):
            """setup.plan, then prepare, load and switch each stream (`switch`: the streams
            whose switch runs; the others stay validated but held back)."""
            folder, manifest = write_batch(root, batch, ranges)
            plan = plan_batch(self.spec, manifest, ["orders"])
            a = self.adapter(batch)
            notes = a.setup(plan)
            results = []
            for s in plan.table("orders").streams:
                a.prepare(s)
                a.load(s, folder / s.file)
                if switch is None or s.stream in switch:
                    results.append(a.switch(s))
            a.release_lease()
            return a, plan, notes, results

    yield Target
    if made:
        a = made[0]
        a.execute([f"DROP TABLE IF EXISTS {a.qualified(a.archive_schema, t)}" for (t,) in a.fetch(
            "SELECT name FROM sys.tables WHERE schema_id = SCHEMA_ID(?)", (a.archive_schema,))]
            + [f"DROP SCHEMA IF EXISTS {a.q(a.archive_schema)}"])
        for statement in drop_sql(a):
            try:
                a.execute([statement])
            except Exception:  # noqa: BLE001 - best effort: a failed test may have left less behind
                pass
        with a.connection() as conn:
            for statement in CLEANUP_SQL:
                conn.cursor().execute(statement, schema)


def key_range(a) -> tuple:
    return tuple(a.fetch(KEY_RANGE_SQL.format(table=a.qualified(a.schema, "orders")))[0])


# --- replace ------------------------------------------------------------------------------------------
def test_replace_a_grown_batch_never_shows_a_mix(target):
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(8))
    assert key_range(a) == (1, 4000, 4000)
    # The next batch is grown and cut in 4: its ranges straddle the table's boundaries.
    b, plan, notes, results = t.load("2026-04-05", even(4, 1, 6000), switch={1, 2, 3})
    assert any("replace mode: its 8 filled partitions give way to this batch's 4" in n for n in notes)
    assert [r["in_target"] for r in results] == [False, False, False]
    assert key_range(b) == (1, 4000, 4000)          # readers still see the old batch, whole
    last = b.switch(plan.stream("orders", 4))
    assert last["in_target"] and last["table_switched"] and last["partitions_in"] == 4
    assert key_range(b) == (1, 6000, 6000)          # then the new one, whole
    table = b.qualified(b.schema, "orders")
    low, high, edge_rows = b.fetch(EDGE_ROWS_SQL, (table, table))[0]
    assert (low, high, edge_rows) == (1, 6, 0)      # 4 partitions and an empty one at each end
    assert b.fetch(STAGING_TABLES_SQL, (b.staging_schema,))[0][0] == 0


def test_replace_with_a_failed_group_leaves_the_table_whole_and_the_next_run_says_so(target):
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(4))
    t.load("2026-04-05", even(2, 1, 6000), switch={1})     # stream 2 never switches (it failed)
    assert key_range(a) == (1, 4000, 4000)
    _, _, notes, _ = t.load("2026-04-06", even(2, 1, 5000))
    assert any("batch 2026-04-05 (run dag/run-2) never went in" in n for n in notes)
    assert key_range(a) == (1, 5000, 5000)


def test_a_target_with_a_dba_index_and_page_compression_still_switches(target):
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(4))
    table = a.qualified(a.schema, "orders")
    a.execute([DBA_INDEX_SQL.format(table=table, scheme=a.q(a.scheme_name("orders"))),
               DBA_COMPRESS_SQL.format(table=table)])
    b, _, _, results = t.load("2026-04-05", even(2, 1, 3000))
    assert results[-1]["table_switched"] and "ix_orders_custkey" in results[0]["indexes_built"]
    assert key_range(b) == (1, 3000, 3000)
    assert b.fetch(INDEX_EXISTS_SQL, (table,))[0][0] == 1
    assert [r[0] for r in b.fetch(COMPRESSION_SQL, (table,))] == ["PAGE"]


def test_partition_functions_are_per_schema(target):
    first, second = target(), target()
    a, _, _, _ = first.load("2026-04-04", even(2))
    assert [r[0] for r in a.fetch(FUNCTIONS_SQL, (a.function_name("orders"), "pf_orders"))] == [a.function_name("orders")]


# --- append: the sliding window -------------------------------------------------------------------------
def test_append_four_nights_with_keep_3_archives_the_first_and_keeps_empty_ends(target):
    t = target(mode="append", keep=3, retire="archive")
    for night in range(4):
        a, _, _, _ = t.load(f"2026-04-0{night + 1}", even(2, 1 + night * 2000, 2000))
    assert key_range(a) == (2001, 8000, 6000)
    assert a.fetch(BATCHES_SQL, (a.schema,)) == [("2026-04-02", 2), ("2026-04-03", 2), ("2026-04-04", 2)]
    table = a.qualified(a.schema, "orders")
    assert a.fetch(EDGE_ROWS_SQL, (table, table))[0][2] == 0
    archived = sum(a.fetch(KEY_RANGE_SQL.format(table=a.qualified(a.archive_schema, name)))[0][2]
                   for name in ("orders_1_1000", "orders_1001_2000"))
    assert archived == 2000


def test_append_rerun_of_the_middle_batch_replaces_only_its_own(target):
    t = target(mode="append")
    for night in range(3):
        a, _, _, _ = t.load(f"2026-04-0{night + 1}", even(2, 1 + night * 2000, 2000))
    # The middle night again, in 3 streams over the same keys.
    b, _, notes, _ = t.load("2026-04-02", even(3, 2001, 1998))
    assert any("batch 2026-04-02 is in the table already (2 partitions)" in n for n in notes)
    assert b.fetch(BATCHES_SQL, (b.schema,)) == [("2026-04-01", 2), ("2026-04-02", 3), ("2026-04-03", 2)]
    assert key_range(b) == (1, 6000, 5998)


def test_append_an_overlapping_batch_is_refused_before_any_load(target):
    from switchyard.targets import TargetError
    t = target(mode="append")
    a, _, _, _ = t.load("2026-04-04", even(8))
    with pytest.raises(TargetError, match="overlaps batch 2026-04-04") as refused:
        t.load("2026-04-05", even(4))
    assert refused.value.permanent is True and "2026-04-05" in str(refused.value)
    assert a.fetch(STAGING_TABLES_SQL, (a.staging_schema,))[0][0] == 0
    assert key_range(a) == (1, 4000, 4000)
