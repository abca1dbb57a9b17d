"""SQL Server's nightly load modes without a server: the partition window decided from the catalog.

No SQL Server runs here. `ScriptedCatalog` below gives SCRIPTED CATALOG ANSWERS: the rows the
pre-flight queries (targets/mssql/templates/catalog_*.sql: sys.partition_functions,
sys.partition_range_values, sys.partition_schemes, sys.destination_data_spaces, sys.partitions,
sys.indexes, sys.columns) and the control table partition_batches would return for the table
described, written by hand. The adapter's own code sends the queries and reads the answers; the
decision (window.plan_window) is pure Python, and every T-SQL statement it leads to is kept in
golden files (tests/golden/mssql/; regenerate with SWITCHYARD_UPDATE_GOLDEN=1 and review the
diff) and parsed as T-SQL. The same statements against a real server run in
tests/contract/test_mssql_contract_modes.py.
"""
from __future__ import annotations

import random
import re
from dataclasses import replace as changed

import pytest

from switchyard.core.batch import Manifest, ManifestEntry
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.mssql import MssqlAdapter
from switchyard.targets.mssql.sql import staging_heap_compression
from switchyard.targets.mssql.catalog import shape_problems, target_from_catalog
from switchyard.targets.mssql.keys import key_type
from switchyard.targets.mssql.window import (Incoming, Layout, Partition, RowsWouldMove, object_name,
                                             plan_window)
from test_mssql_tsql import check_golden, sqlfluff_parses

# A table's own commit at its last switch (`publish: table`); the batch's publish, every table in
# one transaction (`publish: batch`, the default), is in tests/unit/targets/mssql/test_mssql_publish.py.
SPEC = changed(load_spec("tpch"), publish="table")
KEY = key_type("bigint")
FUNCTION_ID = 65601


def spec_with(**table):
    """The tpch spec with orders changed (mode, keep, retire ...)."""
    tables = tuple(changed(t, **table) if t.name == "orders" else t for t in SPEC.tables)
    return changed(SPEC, tables=tables)


def adapter(spec=SPEC, **options) -> MssqlAdapter:
    return MssqlAdapter(spec, base_port=2000, port_count=4,
                        lease_holder=options.pop("lease_holder", "switchyard_tpch/run-2"),
                        lease_batch=options.pop("batch", "2026-04-05"), **options)


def orders_plan(spec, ranges, rows=100):
    entries = tuple(ManifestEntry("orders", k, f"orders/orders.{k}.tbl", 10_000, rows, lo, hi)
                    for k, (lo, hi) in enumerate(ranges, start=1))
    return plan_batch(spec, Manifest(spec="tpch", streams=len(ranges), entries=entries), ["orders"])


def even(n: int, start: int = 1, size: int = 8_000) -> list[tuple[int, int]]:
    """n streams over `size` keys from `start`, contiguous."""
    step = size // n
    return [(start + i * step, start + (i + 1) * step - 1) for i in range(n)]


# --- the catalog, scripted -------------------------------------------------------------------
ORDERS_COLUMNS = [(c.name, *{"bigint": ("bigint", 8, 19, 0), "char(1)": ("char", 1, 0, 0),
                             "money": ("money", 8, 19, 4), "date": ("date", 3, 10, 0),
                             "char(15)": ("char", 15, 0, 0), "integer": ("int", 4, 10, 0),
                             "varchar(79)": ("varchar", 79, 0, 0), "decimal(15,2)": ("decimal", 9, 15, 2)}
                   [c.sql_type("mssql")], 0, "SQL_Latin1_General_CP1_CI_AS" if "char" in c.sql_type("mssql") else None,
                   0, 0, None) for c in SPEC.table("orders").columns]


class ScriptedCatalog:
    """SCRIPTED CATALOG ANSWERS for tpch.orders: answers exactly the pre-flight's queries, for a
    table with `partitions` (window.Partition: bounds, filegroup, rows, batch) and `indexes`
    (rows of catalog_indexes.sql). `exists=False`: no such table; `leftover`: rows of
    catalog_leftover.sql, what a table of that name dropped earlier left (none by default);
    `loaded`: (table, batch) rows of catalog_loaded_tables.sql besides orders' own, tables of the
    schema Switchyard loaded."""

    def __init__(self, a: MssqlAdapter, partitions=(), indexes=(), exists=True, range_right=False,
                 column="o_orderkey", shared=(), parameter_type="bigint", dependencies=(), columns=None,
                 schemes=("ps_tpch_orders",), leftover=(), loaded=()):
        self.sql = a.catalog_sql("orders")
        self.sent: list[tuple[str, tuple]] = []
        parts = sorted(partitions, key=lambda p: p.number)
        recorded = [(str(KEY.after(p.lower)), str(p.upper), p.batch) for p in parts if p.batch]
        index_names = {0: "(heap)", **{r[0]: r[1] for r in indexes}}
        self.answers = {
            self.sql["table"]: [("PS", "ps_tpch_orders", FUNCTION_ID, "pf_tpch_orders", int(range_right), len(parts),
                                 parameter_type, 8, 19, 0, column)] if exists else [],
            self.sql["boundaries"]: [(i + 1, p.upper) for i, p in enumerate(parts[:-1])],
            self.sql["partitions"]: [(index_id, None if index_id == 0 else index_names[index_id], p.number,
                                      p.rows, dict(p.compression).get(index_names[index_id], "NONE"), p.filegroup)
                                     for index_id in sorted({0, *[r[0] for r in indexes]} - ({0} if any(
                                         r[0] == 1 for r in indexes) else set())) for p in parts],
            self.sql["indexes"]: [tuple(r) for r in indexes],
            self.sql["columns"]: ORDERS_COLUMNS if columns is None else columns,
            self.sql["shared"]: [(name,) for name in shared],
            self.sql["schemes"]: [(name,) for name in schemes],
            self.sql["batches"]: recorded,
            self.sql["leftover"]: [tuple(r) for r in leftover],
            # catalog_dependencies.sql: (kind, name, detail, flag) rows; none unless a test scripts them.
            self.sql["dependencies"]: [tuple(r) for r in dependencies],
            "SELECT OBJECT_ID(?, N'U')": [(1,)],
            a.render("catalog_loaded_tables.sql")[0]: sorted({("orders", b) for *_, b in recorded} | set(loaded)),
        }
        self._rows: list = []

    def execute(self, sql: str, *params):
        self.sent.append((sql, params))
        if sql not in self.answers:
            raise AssertionError(f"not a pre-flight query:\n{sql}")
        self._rows = list(self.answers[sql])
        return self

    def fetchall(self):
        return self._rows

    def fetchone(self):
        return self._rows[0] if self._rows else None


def layout_of(batches: dict[str, list[tuple[int, int]]], rows: int = 100, compression="NONE") -> list[Partition]:
    """A table as Switchyard leaves it: an empty partition at both ends (fg_edge), and each
    batch's streams in partitions of their own on fg<k>, gaps empty on fg_edge."""
    ranges = sorted((lo, hi, batch, k) for batch, rs in batches.items() for k, (lo, hi) in enumerate(rs, start=1))
    out, previous, number = [], None, 0
    for lo, hi, batch, k in ranges:
        if previous is None or lo - 1 != previous:
            number += 1
            out.append(Partition(number, previous, lo - 1, "fg_edge", 0, (("(heap)", compression),)))
        number += 1
        out.append(Partition(number, lo - 1, hi, f"fg{k}", rows, (("(heap)", compression),), batch))
        previous = hi
    out.append(Partition(number + 1, previous, None, "fg_edge", 0, (("(heap)", compression),)))
    return out


def commit_text(a: MssqlAdapter, plan, partitions, indexes=()) -> str:
    cur = ScriptedCatalog(a, partitions, indexes)
    target = a.read_target(cur, "orders")
    statements = a.commit_sql(plan.table("orders"), target=target, batch=a.lease_batch, run=a.lease_holder)
    return "\n".join(s + ";\nGO" for s in statements) + "\n"


# --- names ------------------------------------------------------------------------------------
def test_functions_and_schemes_are_named_per_schema_within_128_characters():
    a, b = MssqlAdapter(SPEC, schema="sales"), MssqlAdapter(SPEC, schema="tpch")
    assert (a.function_name("orders"), a.scheme_name("orders")) == ("pf_sales_orders", "ps_sales_orders")
    assert a.function_name("orders") != b.function_name("orders")
    long_schema, long_table = "s" * 63, "t" * 63
    name = object_name("pf", long_schema, long_table)
    assert len(name) == 128 and name.startswith("pf_sss") and name != object_name("pf", long_schema, "t" * 62 + "u")
    setup = "\n".join(MssqlAdapter(SPEC, schema="sales").setup_sql(orders_plan(SPEC, even(2))))
    assert "CREATE PARTITION FUNCTION [pf_sales_orders]" in setup and "AS PARTITION [pf_sales_orders]" in setup


# --- the classic case: 8 streams, then 4 --------------------------------------------------------
def test_eight_then_four_streams_in_append_mode_is_refused_in_preflight_naming_both_batches():
    spec = spec_with(mode="append")
    a = adapter(spec, batch="2026-04-05")
    cur = ScriptedCatalog(a, layout_of({"2026-04-04": even(8)}))
    plan = orders_plan(spec, even(4))
    with pytest.raises(TargetError) as refused:
        a.preflight(cur, plan)
    message = str(refused.value)
    assert refused.value.permanent is True
    assert message.startswith("pre-flight refused the batch before any load; nothing was changed:")
    assert ("tpch.orders: batch 2026-04-05 overlaps batch 2026-04-04: its stream 1 (keys 1..2000) and partition 2 "
            "(keys 1..1000, 100 rows); partition 3 (keys 1001..2000, 100 rows) of batch 2026-04-04; its range spans "
            "the boundary 1000 of pf_tpch_orders.") in message
    assert message.count("overlaps batch 2026-04-04") == 4
    assert "TRUNCATE TABLE tpch.orders WITH (PARTITIONS (2, 3))" in message and "mode: replace" in message
    # Only the catalog was read (the scripted catalog answers nothing else): nothing created, nothing loaded.
    assert cur.sent and all(re.search(r"^\s*SELECT", sql, re.M) for sql, _ in cur.sent)


def test_eight_then_four_streams_in_replace_mode_go_through_the_replace_transaction():
    a = adapter(batch="2026-04-05")
    partitions = layout_of({"2026-04-04": even(8)})
    plan = orders_plan(SPEC, even(4))
    notes = a.preflight(ScriptedCatalog(a, partitions), plan)
    assert any("replace mode: its 8 filled partitions give way to this batch's 4" in n for n in notes)
    wp = a.window("orders", a.read_target(ScriptedCatalog(a, partitions), "orders"), a.incoming(plan.table("orders")),
                  "2026-04-05")
    kinds = [s.kind for s in wp.steps]
    # All old partitions emptied first, then only empty ranges merged and split, then the switches.
    assert kinds == ["truncate"] * 8 + ["merge"] * 8 + ["split"] * 4 + ["switch_in"] * 4
    assert wp.final.boundaries == [0, 2000, 4000, 6000, 8000]
    assert wp.final.filegroups == ["fg_edge", "fg1", "fg2", "fg3", "fg4", "fg_edge"]
    assert wp.placement == {k: (f"fg{k}", (("(heap)", "NONE"),)) for k in range(1, 5)}
    # Never a CHECK spanning two partitions: each stream's staging CHECK is its partition exactly.
    for s in plan.table("orders").streams:
        assert (f"CHECK ([o_orderkey] IS NOT NULL AND [o_orderkey] >= {s.lower} AND [o_orderkey] <= {s.upper})"
                    in a.prepare_sql(s)[-1])
    check_golden("replace_8_then_4_streams_commit.sql", commit_text(a, plan, partitions))


def test_a_replace_with_the_same_ranges_only_empties_and_switches():
    a = adapter(batch="b2")
    wp = a.window("orders", a.read_target(ScriptedCatalog(a, layout_of({"b1": even(4)})), "orders"),
                  a.incoming(orders_plan(SPEC, even(4)).table("orders")), "b2")
    assert [s.kind for s in wp.steps] == ["truncate"] * 4 + ["switch_in"] * 4


# --- append: the sliding window ---------------------------------------------------------------
def test_sliding_window_keep_3_archives_the_oldest_and_merges_its_empty_range():
    spec = spec_with(mode="append", keep=3, retire="archive")
    a = adapter(spec, batch="d")
    partitions = layout_of({"a": even(2, 1, 2000), "b": even(2, 2001, 2000), "c": even(2, 4001, 2000)})
    plan = orders_plan(spec, even(2, 6001, 2000))
    notes = a.preflight(ScriptedCatalog(a, partitions), plan)
    assert any(n.startswith("tpch.orders: when batch d goes in, and not before: keep: 3 batches; retired: a")
               and "switched out to the archive schema" in n for n in notes), notes
    wp = a.window("orders", a.read_target(ScriptedCatalog(a, partitions), "orders"), a.incoming(plan.table("orders")), "d")
    assert [(s.kind, s.value) for s in wp.steps] == [
        ("archive", 1000), ("archive", 2000), ("merge", 0), ("merge", 1000),
        ("split", 7000), ("split", 8000), ("switch_in", 7000), ("switch_in", 8000)]
    assert [s.archive_table for s in wp.steps[:2]] == ["orders_1_1000", "orders_1001_2000"]
    # An empty partition stays at both ends; the new partitions came from the empty last one.
    assert wp.final.boundaries == [2000, 3000, 4000, 5000, 6000, 7000, 8000]
    assert wp.final.filegroups[0] == "fg2" and wp.final.filegroups[-1] == "fg_edge"
    text = commit_text(a, plan, partitions)
    check_golden("sliding_window_keep3_archive_commit.sql", text)
    # SWITCH out to an archive table on the partition's own filegroup, made to the target's shape.
    assert "CREATE TABLE [tpch_archive].[orders_1_1000] (" in text and ") ON [fg1]\n" in text
    assert text.index("SWITCH PARTITION @partition TO [tpch_archive].[orders_1_1000]") < text.index("MERGE RANGE (0)")
    assert (text.index("MERGE RANGE (1000)\n") < text.index("NEXT USED [fg1]")
            < text.index("ALTER PARTITION FUNCTION [pf_tpch_orders]() SPLIT RANGE (7000)"))
    assert "SETUP" not in text and "BEGIN TRANSACTION" in text


def test_retire_drop_empties_the_oldest_partitions():
    spec = spec_with(mode="append", keep=1)
    a = adapter(spec, batch="b")
    wp = a.window("orders", a.read_target(ScriptedCatalog(a, layout_of({"a": even(2)})), "orders"),
                  a.incoming(orders_plan(spec, even(2, 8001)).table("orders")), "b")
    assert [s.kind for s in wp.steps][:2] == ["truncate", "truncate"] and wp.retired and not wp.removed


def test_four_nightly_batches_with_keep_3_leave_the_last_three():
    spec = spec_with(mode="append", keep=3)
    a = adapter(spec)
    partitions: list[Partition] = []
    for night in range(4):
        batch = f"2026-04-0{night + 1}"
        streams = a.incoming(orders_plan(spec, even(2, 1 + night * 2000, 2000)).table("orders"))
        layout = partitions or layout_of({})
        wp = plan_window("tpch.orders", "append", batch, layout, streams, KEY, keep=3)
        assert wp.ok, wp.problems
        final = wp.final
        # The commit's result, as the next night's catalog shows it.
        partitions = [changed(p, rows=100 if p.batch else 0) for p in final.partitions()]
    assert sorted({p.batch for p in partitions if p.rows}) == ["2026-04-02", "2026-04-03", "2026-04-04"]
    assert partitions[0].rows == 0 and partitions[-1].rows == 0


def test_a_rerun_of_the_middle_batch_replaces_exactly_its_own_partitions():
    spec = spec_with(mode="append")
    a = adapter(spec, batch="b")
    partitions = layout_of({"a": even(2, 1, 2000), "b": even(2, 2001, 2000), "c": even(2, 4001, 2000)})
    # The rerun brings 3 streams over the same keys: only b's partitions give way.
    plan = orders_plan(spec, [(2001, 2600), (2601, 3300), (3301, 4000)])
    wp = a.window("orders", a.read_target(ScriptedCatalog(a, partitions), "orders"), a.incoming(plan.table("orders")), "b")
    assert wp.ok, wp.problems
    assert [p.batch for p in wp.removed] == ["b", "b"]
    assert [(s.kind, s.value) for s in wp.steps if s.kind != "switch_in"] == [
        ("truncate", 3000), ("truncate", 4000), ("merge", 3000), ("split", 2600), ("split", 3300)]
    kept = [p for p in wp.final.partitions() if p.batch in ("a", "c")]
    assert [(p.lower, p.upper) for p in kept] == [(0, 1000), (1000, 2000), (4000, 5000), (5000, 6000)]


def test_a_batch_overlapping_unrecorded_rows_is_refused_naming_them():
    spec = spec_with(mode="append")
    a = adapter(spec, batch="b")
    partitions = [changed(p, batch=None) for p in layout_of({"x": even(2)})]
    with pytest.raises(TargetError, match=r"overlaps no batch \(recorded to none: loaded by hand"):
        a.preflight(ScriptedCatalog(a, partitions), orders_plan(spec, even(2, 4001)))


def test_a_split_in_a_populated_partition_is_refused():
    """A table made by hand whose last partition holds rows: a batch above its last boundary
    would SPLIT it and move rows. Append refuses it (it overlaps those rows); the simulation
    refuses any such step on its own."""
    spec = spec_with(mode="append")
    a = adapter(spec, batch="b")
    partitions = [Partition(1, None, 0, "fg_edge", 0), Partition(2, 0, 1000, "fg1", 50, batch="a"),
                  Partition(3, 1000, None, "fg_edge", 70)]
    with pytest.raises(TargetError, match=r"partition 3 \(keys above 1000, 70 rows\)"):
        a.preflight(ScriptedCatalog(a, partitions), orders_plan(spec, even(2, 2001, 2000)))
    layout = Layout.of(partitions)
    with pytest.raises(RowsWouldMove, match="SPLIT RANGE \\(5000\\) would split partition 3, which holds 70 rows"):
        layout.split(5000, "fg1")
    with pytest.raises(RowsWouldMove, match="MERGE RANGE \\(1000\\)"):
        layout.merge(1000)


def test_split_and_merge_follow_sql_servers_range_left_rules():
    """SPLIT: the new partition is the one holding the new value (RANGE LEFT: the left one) and
    takes NEXT USED; the right one keeps its filegroup; both keep the split one's compression.
    MERGE: the partition holding the value (left) goes; the merged one keeps the right one's."""
    layout = Layout.of([Partition(1, None, 6, "FG1", 0, (("(heap)", "PAGE"),)), Partition(2, 6, None, "FG2", 0)])
    layout.split(20, "FG3")
    assert layout.filegroups == ["FG1", "FG3", "FG2"] and layout.compression[1] == ()
    layout.split(2, "FG4")
    assert layout.filegroups == ["FG4", "FG1", "FG3", "FG2"]
    assert layout.compression[0] == layout.compression[1] == (("(heap)", "PAGE"),)
    layout.merge(6)
    assert layout.boundaries == [2, 20] and layout.filegroups == ["FG4", "FG3", "FG2"]


def test_random_batches_never_move_rows_and_always_get_partitions_of_their_own():
    """Replace mode after any earlier layout, and append above it: every plan applies (the
    simulation raises on a step that would move rows) and leaves each stream exactly its range."""
    rng = random.Random(15)
    for _ in range(200):
        before = even(rng.randint(1, 12), 1, rng.choice([4_000, 8_000, 9_000]))
        partitions = layout_of({"old": before})
        n = rng.randint(1, 12)
        size = rng.choice([3_000, 8_000, 12_000])
        start = rng.choice([1, 500, 9_001])
        streams = [Incoming(k, lo, hi, f"fg{k}") for k, (lo, hi) in enumerate(even(n, start, size), start=1)]
        for mode in ("replace", "append"):
            wp = plan_window("tpch.orders", mode, "new", partitions, streams, KEY)
            if mode == "append" and start < before[-1][1]:
                assert not wp.ok and "overlaps batch old" in wp.problems[0]
                continue
            assert wp.ok, wp.problems
            for s in streams:
                i = wp.final.index_of(s.lower)
                assert wp.final.boundaries[i - 1] == s.lower - 1 and wp.final.boundaries[i] == s.upper
            assert wp.final.rows[0] == 0 and wp.final.rows[-1] == 0
            if mode == "replace":
                assert [wp.placement[s.stream][0] for s in streams] == [s.filegroup for s in streams]


def test_a_function_shared_with_another_table_is_refused_when_the_batch_needs_a_split():
    a = adapter(batch="b2")
    partitions = layout_of({"b1": even(4)})
    shared = ["[sales].[orders]"]
    with pytest.raises(TargetError, match=r"its partition function pf_tpch_orders is used by \[sales\]\.\[orders\] too"):
        a.preflight(ScriptedCatalog(a, partitions, shared=shared), orders_plan(SPEC, even(2)))
    # The same ranges need no SPLIT or MERGE: the shared function is left alone, the batch goes.
    a.preflight(ScriptedCatalog(a, partitions, shared=shared), orders_plan(SPEC, even(4)))


def test_the_target_is_checked_against_the_spec_from_the_catalog():
    a = adapter()
    plan = orders_plan(SPEC, even(2))
    for kwargs, expected in (
            ({"range_right": True}, "is RANGE RIGHT"),
            ({"column": "o_custkey"}, "is partitioned on o_custkey, the spec on o_orderkey"),
            ({"parameter_type": "int"}, "takes int, the spec's key o_orderkey is bigint"),
            ({"indexes": [(2, "ix_cust", "NONCLUSTERED", 0, 0, 0, 0, 0, None, 0, "o_custkey", 1, 0, 0)]},
             "index ix_cust is not aligned"),
            ({"indexes": [(2, "ix_open", "NONCLUSTERED", 0, 0, 0, 0, 1, "([o_orderstatus]='O')", 1, "o_custkey", 1, 0,
                           0)]}, "index ix_open is filtered"),
            # Names a DBA chose that the commit's T-SQL could not write: refused before any load,
            # not when the commit renders after the loads.
            ({"schemes": ("ps_tpch_orders", "ps orders-2026")}, "include 'ps orders-2026': Switchyard writes a "
                                                               "catalog name into T-SQL only as letters, digits"),
            ({"indexes": [(2, "ix]cust", "NONCLUSTERED", 0, 0, 0, 0, 0, None, 1, "o_custkey", 1, 0, 0)]},
             "tpch.orders: 'ix]cust': a name Switchyard does not write into T-SQL (letters, digits, _ @ # $ only); "
             "rename it (sp_rename)")):
        with pytest.raises(TargetError, match=re.escape(expected)):
            a.preflight(ScriptedCatalog(a, layout_of({"b1": even(2)}), **kwargs), plan)
    target = target_from_catalog(KEY, [("FG", "PRIMARY", None, None, None, None, None, None, None, None, None)],
                                 column_rows=ORDERS_COLUMNS)
    assert "exists but is not partitioned (it is on PRIMARY" in shape_problems(
        target, "tpch.orders", SPEC.table("orders"), KEY, "bigint")[0]
    notes = a.preflight(ScriptedCatalog(a, exists=False), plan)
    assert notes == ["tpch.orders: new table; setup creates it with this batch's 2 partitions on pf_tpch_orders"]


def test_a_new_table_on_a_partition_function_a_dropped_table_left_is_checked_before_any_load():
    """DROP TABLE leaves the table's partition function and scheme; setup creates them only where
    missing, so a new table of that name would go on them as they are. One that cannot hold the
    spec's partitions is refused before any load (the SWITCH would refuse it after every load);
    one that can is said and used."""
    a = adapter()
    plan = orders_plan(SPEC, even(2))
    for leftover, expected in (
            ([("function", "pf_tpch_orders", 1, "bigint", 0)], "partition function pf_tpch_orders setup would "
             "create it on is in the database already, RANGE RIGHT"),
            ([("function", "pf_tpch_orders", 0, "int", 0)], "taking int; the spec's key o_orderkey is bigint"),
            ([("scheme", "ps_tpch_orders", None, "pf_other", None)], "the partition scheme ps_tpch_orders setup "
             "would create it on is in the database already, on the partition function pf_other")):
        with pytest.raises(TargetError, match=re.escape(expected)) as refused:
            a.preflight(ScriptedCatalog(a, exists=False, leftover=leftover), plan)
        assert ("DROP PARTITION SCHEME [ps_tpch_orders]; DROP PARTITION FUNCTION [pf_tpch_orders], once no table "
                "uses them") in str(refused.value)
    same = [("function", "pf_tpch_orders", 0, "bigint", 0), ("scheme", "ps_tpch_orders", None, "pf_tpch_orders", None)]
    notes = a.preflight(ScriptedCatalog(a, exists=False, leftover=same), plan)
    assert notes[0] == ("tpch.orders: the partition function pf_tpch_orders and scheme ps_tpch_orders a table of "
                        "that name left are in the database; setup creates the table on them (RANGE LEFT, bigint)")


# --- staging tables from the target as it is -----------------------------------------------------
DBA_INDEXES = [
    # index_id, name, type, unique, pk, unique constraint, disabled, has_filter, filter, aligned,
    # column, key_ordinal, descending, included
    (1, "PK_orders", "CLUSTERED", 1, 1, 0, 0, 0, None, 1, "o_orderkey", 1, 0, 0),
    (3, "IX_orders_cust_date", "NONCLUSTERED", 0, 0, 0, 0, 0, None, 1, "o_custkey", 1, 0, 0),
    (3, "IX_orders_cust_date", "NONCLUSTERED", 0, 0, 0, 0, 0, None, 1, "o_orderdate", 2, 1, 0),
    (3, "IX_orders_cust_date", "NONCLUSTERED", 0, 0, 0, 0, 0, None, 1, "o_totalprice", 0, 0, 1),
]


def test_staging_tables_take_the_targets_columns_indexes_and_compression():
    """A DBA added a nonclustered index and PAGE-compressed the table: the staging table is made
    with the target's columns (collations included), on its partition's filegroup with PAGE, and
    the target's primary key and index are built on it before the switch."""
    a = adapter(batch="b2")
    partitions = [changed(p, compression=(("PK_orders", "PAGE"), ("IX_orders_cust_date", "PAGE")))
                  for p in layout_of({"b1": even(2)})]
    cur = ScriptedCatalog(a, partitions, DBA_INDEXES)
    target = a.read_target(cur, "orders")
    plan = orders_plan(SPEC, even(2))
    wp = a.window("orders", target, a.incoming(plan.table("orders")), "b2")
    s = plan.stream("orders", 2)
    fg, compression = wp.placement[2]
    assert (fg, compression) == ("fg2", (("PK_orders", "PAGE"), ("IX_orders_cust_date", "PAGE")))
    columns = [{"name": c.name, "type": c.type, "nullable": c.nullable, "collation": c.collation}
               for c in target.columns]
    # The heap loads uncompressed: the clustered primary key built on it compresses the rows once.
    heap = staging_heap_compression(compression)
    assert heap == "NONE" and staging_heap_compression((("(heap)", "PAGE"),)) == "PAGE"
    prepare = a.prepare_sql(s, columns=columns, filegroup=fg, compression=heap)
    indexes = a.staging_index_sql(s, target.indexes, fg, dict(compression))
    text = "\n".join(x + ";\nGO" for x in [*prepare, *indexes]) + "\n"
    check_golden("staging_from_target_orders_2.sql", text)
    assert "[o_comment] varchar(79) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL" in text
    assert ") ON [fg2];" in text and "WITH (DATA_COMPRESSION = PAGE, SORT_IN_TEMPDB = ON, MAXDOP = 1) ON [fg2]" in text
    # Serial builds by default (SWITCHYARD_STEP_PARALLELISM=serial): the other streams load on
    # the other schedulers.
    assert ("ALTER TABLE [tpch_staging].[orders_2] ADD CONSTRAINT [orders_2__PK_orders] PRIMARY KEY CLUSTERED "
            "([o_orderkey]) WITH (DATA_COMPRESSION = PAGE, SORT_IN_TEMPDB = ON, MAXDOP = 1) ON [fg2]") in text
    assert ("CREATE NONCLUSTERED INDEX [IX_orders_cust_date] ON [tpch_staging].[orders_2] ([o_custkey], "
            "[o_orderdate] DESC) INCLUDE ([o_totalprice]) WITH (DATA_COMPRESSION = PAGE, SORT_IN_TEMPDB = ON, MAXDOP = 1) "
            "ON [fg2]") in text
    # The server's own degree of parallelism on request.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SWITCHYARD_STEP_PARALLELISM", "server")
        server = "\n".join(adapter(batch="b2").staging_index_sql(s, target.indexes, fg, dict(compression)))
    assert "MAXDOP" not in server
    assert "INCLUDE ([o_totalprice]) WITH (DATA_COMPRESSION = PAGE, SORT_IN_TEMPDB = ON) ON [fg2]" in server


def test_the_preflight_queries_match_golden():
    a = adapter()
    sql = a.catalog_sql("orders")
    text = "".join(f"-- {name}\n{statement};\nGO\n" for name, statement in sql.items())
    check_golden("preflight_queries_orders.sql", text)


def test_every_new_statement_parses_as_tsql():
    spec = spec_with(mode="append", keep=3, retire="archive")
    a = adapter(spec, batch="d")
    partitions = layout_of({"a": even(2, 1, 2000), "b": even(2, 2001, 2000), "c": even(2, 4001, 2000)})
    statements = [*commit_text(a, orders_plan(spec, even(2, 6001, 2000)), partitions, DBA_INDEXES).split(";\nGO\n"),
                  *commit_text(adapter(batch="x"), orders_plan(SPEC, even(4)), layout_of({"w": even(8)})).split(";\nGO\n"),
                  *a.catalog_sql("orders").values(), *a.render("staging_indexes.sql", s=orders_plan(spec, even(2)).stream(
                      "orders", 1), indexes=target_from_catalog(KEY, [("PS", "ps", 1, "pf", 0, 2, "bigint", 8, 19, 0,
                                                                       "o_orderkey")], index_rows=DBA_INDEXES).indexes,
                      filegroup="fg1", compression={}, constraint_names={"PK_orders": "orders_1__PK_orders"}),
                  *a.render("commit_lock.sql"), *a.switched_in_sql(orders_plan(spec, even(2)).stream("orders", 1))]
    # sqlfluff's grammar takes SWITCH ... PARTITION only with a literal (ours is a variable set
    # from $PARTITION) and lacks TRUNCATE TABLE ... WITH (PARTITIONS (n)) (SQL Server 2016+):
    # for those the rest of the statement is checked with a literal, and without the clause.
    stand_ins = [(r"PARTITION @partition\b", "PARTITION 2"), (r" WITH \(PARTITIONS \(\d+\)\)", ""),
                 (r"\?", "@p")]
    failed = []
    for statement in (x for x in statements if x.strip()):
        for pattern, literal in stand_ins:
            statement = re.sub(pattern, literal, statement)
        if not sqlfluff_parses(statement):
            failed.append(statement)
    assert not failed, "not T-SQL by sqlfluff:\n\n" + "\n\n".join(failed)


def test_the_modes_contract_suites_own_queries_parse():
    from test_mssql_contract_modes import suite_sql
    statements = suite_sql(adapter(schema="m_0123abcd"))
    # sqlfluff's T-SQL grammar has no DROP PARTITION SCHEME / FUNCTION and no ALTER TABLE ...
    # ENABLE / DISABLE CHANGE_TRACKING: those four are checked by form.
    drops = [x for x in statements if x.startswith("DROP PARTITION ")]
    assert len(drops) == 2 and all(re.fullmatch(r"DROP PARTITION (SCHEME|FUNCTION) \[\w+\]", x) for x in drops)
    tracking = [x for x in statements if x.endswith("ABLE CHANGE_TRACKING")]
    assert len(tracking) == 2 and all(re.fullmatch(r"ALTER TABLE \[\w+\]\.\[\w+\] (EN|DIS)ABLE CHANGE_TRACKING", x)
                                      for x in tracking)
    failed = [x for x in statements if x not in drops + tracking and not sqlfluff_parses(re.sub(r"\?", "@p", x))]
    assert not failed, "not T-SQL by sqlfluff:\n\n" + "\n\n".join(failed)


# --- a table's switches, against a scripted session -----------------------------------------------
class ScriptedSession(ScriptedCatalog):
    """SCRIPTED CATALOG ANSWERS plus a hand-kept `planned_partitions` table: what the switch step
    reads and writes besides the catalog. The table's commit batch is recorded, not run."""

    def __init__(self, a, partitions, indexes=()):
        super().__init__(a, partitions, indexes)
        self.planned: list[dict] = []
        self.commits: list[str] = []
        self.nextset = lambda: False
        self.rowcount = 1
        self.description = None

    def execute(self, sql: str, *params):
        self.sent.append((sql, params))
        head = " ".join(sql.split())
        self._rows = []
        if sql in self.answers and "OBJECT_ID(?, N'U')" != sql.split("SELECT ")[-1]:
            self._rows = list(self.answers[sql])
        elif head.startswith("SELECT OBJECT_ID(?, N'U')"):
            self._rows = [(None,)] if "archive" in str(params[0]) else [(1,)]
        elif "sp_getapplock" in sql:
            pass
        elif head.startswith("SELECT DISTINCT run, batch FROM [switchyard].[planned_partitions]"):
            self._rows = sorted({(p["run"], p["batch"]) for p in self.planned if p["run"] != params[2]})
        elif head.startswith("SELECT staging_table FROM [switchyard].[planned_partitions]"):
            self._rows = [(p["staging_table"],) for p in self.planned
                          if "ready_at IS NOT NULL" not in head or p["ready_at"]]
        elif head.startswith("DROP TABLE IF EXISTS") or head.startswith("DELETE FROM [switchyard].[planned"):
            if head.startswith("DELETE"):
                self.planned = []
        elif head.startswith("INSERT INTO [switchyard].[planned_partitions]"):
            keys = ("target_schema", "table_name", "staging_table", "stream", "batch", "key_min", "key_max",
                    "rows_planned", "run", "stream_filegroup", "filegroup", "compression")
            self.planned.append({**dict(zip(keys, params)), "ready_at": None})
        elif head.startswith("SELECT [staging_table], [stream]"):
            fields = ("staging_table", "stream", "batch", "key_min", "key_max", "rows_planned", "run",
                      "stream_filegroup", "filegroup", "compression", "ready_at")
            self._rows = [tuple(p[f] for f in fields) for p in sorted(self.planned, key=lambda p: p["stream"])]
        elif head.startswith("UPDATE [switchyard].[planned_partitions] SET ready_at"):
            for p in self.planned:
                if p["staging_table"] == params[2] and not p["ready_at"]:
                    p["ready_at"] = "now"
        elif head.startswith("-- tpch.orders: batch"):
            self.commits.append(sql)
        else:
            raise AssertionError(f"not a statement of this step:\n{sql}")
        return self


def scripted(a, session):
    from contextlib import contextmanager

    class Conn:
        def cursor(self):
            return session

    @contextmanager
    def connection(stream=None):
        yield Conn()
    a.connection = connection
    return a


def test_a_tables_streams_wait_for_its_last_switch_which_commits_the_batch():
    a = scripted(adapter(batch="2026-04-05"), ScriptedSession(adapter(), layout_of({"2026-04-04": even(8)}),
                                                              DBA_INDEXES[:1]))
    session = a.connection().__enter__().cursor()
    plan = orders_plan(SPEC, even(4))
    assert a._plan_table(session, plan.table("orders")) == []
    assert [(p["stream"], p["filegroup"], p["compression"]) for p in session.planned] == [
        (k, f"fg{k}", '[["PK_orders", "NONE"]]') for k in range(1, 5)]
    streams = plan.table("orders").streams
    for s in streams[:3]:
        result = a._stage(s)
        assert result["in_target"] is False and not session.commits
    assert result["waiting_for"] == ["orders_4"]
    last = a._stage(streams[3])
    assert last["in_target"] and last["table_switched"] and last["partitions_in"] == 4
    (commit,) = session.commits
    assert commit.count("TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS") == 8
    assert commit.count("SWITCH TO [tpch].[orders] PARTITION @partition") == 4
    # A group of another run cannot switch into this run's plan.
    other = scripted(adapter(batch="2026-04-06", lease_holder="switchyard_tpch/run-3"), session)
    with pytest.raises(TargetError, match="has no switch of this run pending: its plan was made by run "
                                          "switchyard_tpch/run-2 \\(batch 2026-04-05\\)") as refused:
        other._stage(streams[0])
    assert refused.value.permanent is True


def test_the_commit_refuses_when_the_table_changed_since_setup():
    session = ScriptedSession(adapter(), layout_of({"b1": even(4)}))
    a = scripted(adapter(batch="b2"), session)
    plan = orders_plan(SPEC, even(4))
    a._plan_table(session, plan.table("orders"))
    for p in session.planned:
        p["filegroup"] = "fg_elsewhere"     # as if a DBA had moved the partitions since setup
    for s in plan.table("orders").streams[:3]:
        a._stage(s)
    with pytest.raises(TargetError, match="the table changed since setup.plan .*nothing was switched"):
        a._stage(plan.table("orders").streams[3])
    assert not session.commits


def test_a_later_run_discards_a_held_back_batch_and_says_so():
    session = ScriptedSession(adapter(), layout_of({"b1": even(4)}))
    first = scripted(adapter(batch="b2"), session)
    plan = orders_plan(SPEC, even(4))
    first._plan_table(session, plan.table("orders"))
    first._stage(plan.table("orders").streams[0])        # stream 2 failed: nothing went in
    later = scripted(adapter(batch="b3", lease_holder="switchyard_tpch/run-9"), session)
    notes = later._plan_table(session, plan.table("orders"))
    assert notes == ["tpch.orders: batch b2 (run switchyard_tpch/run-2) never went in: its validated groups "
                     "(orders_1) waited for the rest of its batch and are discarded now; to load batch b2, run it "
                     "again from setup.plan"]
    assert {p["run"] for p in session.planned} == {"switchyard_tpch/run-9"}
    assert any(sql.startswith("DROP TABLE IF EXISTS [tpch_staging].[orders_1]") for sql, _ in session.sent)


def test_keep_days_on_a_date_key_retires_the_days_outside_the_window():
    from datetime import date, timedelta
    key = key_type("date")
    day = date(2026, 4, 1)
    partitions = [Partition(1, None, day - timedelta(days=1), "fg_edge", 0)]
    for i in range(3):   # three daily batches, one partition each
        partitions.append(Partition(i + 2, day + timedelta(days=i - 1), day + timedelta(days=i), "fg1", 10,
                                    batch=f"d{i}"))
    partitions.append(Partition(5, day + timedelta(days=2), None, "fg_edge", 0))
    new = [Incoming(1, day + timedelta(days=3), day + timedelta(days=3), "fg1")]
    wp = plan_window("tpch.events", "append", "d3", partitions, new, key, keep_days=2)
    assert wp.ok, wp.problems
    assert [p.batch for p in wp.retired] == ["d0", "d1"]
    assert [(s.kind, s.value) for s in wp.steps][:2] == [("truncate", day), ("truncate", day + timedelta(days=1))]
    assert wp.final.boundaries == [day + timedelta(days=1), day + timedelta(days=2), day + timedelta(days=3)]
