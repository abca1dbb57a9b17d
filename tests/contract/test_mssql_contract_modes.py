"""Contract suite for the nightly load modes against a real SQL Server, through the adapter API
the DAG uses (setup.plan, prepare, load, switch, and with `publish: batch` publish_batch).

Runs only when SWITCHYARD_MSSQL_URI names a server (see tests/contract/test_mssql_contract.py for the
URI and the shared-folder settings; without them the loads go over TDS bulk copy):

    SWITCHYARD_MSSQL_URI='mssql://sa:<password>@127.0.0.1:2000/switchyard?TrustServerCertificate=yes' \\
        .venv/bin/python -m pytest -m mssql tests/contract/test_mssql_contract_modes.py

Each test loads small batches of orders rows it writes itself (key ranges chosen per test, so
stream shapes change between batches) into a schema of its own, dropped afterwards with its
partition function and scheme. Every statement the suite sends itself is in `suite_sql`, which
tests/unit/targets/mssql/test_mssql_window.py parses as T-SQL without a server.
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
                                       "to run the SQL Server contract suite (see tests/contract/test_mssql_contract.py)"),
]
SPEC = load_spec("tpch")

# --- the suite's own queries (parsed as T-SQL by tests/unit/targets/mssql/test_mssql_window.py) ---------------------
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
# The pre-flight's dependencies, made by a DBA on a loaded table (tests at the end).
DBA_KEY_SQL = "ALTER TABLE {table} ADD CONSTRAINT [pk_orders] PRIMARY KEY NONCLUSTERED ([o_orderkey]) ON {scheme}([o_orderkey])"
DBA_FK_TABLE_SQL = ("CREATE TABLE {referencing} ([o_orderkey] bigint NOT NULL CONSTRAINT [fk_ref_orders] "
                    "REFERENCES {table} ([o_orderkey]))")
DBA_CHECK_SQL = "ALTER TABLE {table} WITH CHECK ADD CONSTRAINT [ck_orders_price] CHECK ([o_totalprice] >= 0)"
DBA_CHECK_NOW_SQL = "ALTER TABLE {table} WITH NOCHECK ADD CONSTRAINT [ck_orders_recent] CHECK ([o_orderdate] <= GETDATE())"
DBA_VIEW_SQL = ("CREATE VIEW {view} WITH SCHEMABINDING AS SELECT [o_orderstatus], COUNT_BIG(*) AS [n] FROM {table} "
                "GROUP BY [o_orderstatus]")
DBA_VIEW_INDEX_SQL = "CREATE UNIQUE CLUSTERED INDEX [ix_v_orders] ON {view} ([o_orderstatus])"
SCHEME_FILEGROUPS_SQL = ("SELECT fg.name FROM sys.partition_schemes AS ps JOIN sys.destination_data_spaces AS dds "
                         "ON dds.partition_scheme_id = ps.data_space_id JOIN sys.filegroups AS fg "
                         "ON fg.data_space_id = dds.data_space_id WHERE ps.name = ? ORDER BY dds.destination_id")
DBA_SCHEME_COPY_SQL = "CREATE PARTITION SCHEME {copy} AS PARTITION {function} TO ({filegroups})"
DBA_INDEX_ON_COPY_SQL = "CREATE NONCLUSTERED INDEX [ix_orders_cust_copy] ON {table} ([o_custkey]) ON {copy}([o_orderkey])"
DBA_REF_TABLE_SQL = "CREATE TABLE {ref} ([c_custkey] bigint NOT NULL CONSTRAINT [pk_customer_ref] PRIMARY KEY)"
DBA_FK_OUT_SQL = ("ALTER TABLE {table} WITH NOCHECK ADD CONSTRAINT [fk_orders_customer] FOREIGN KEY ([o_custkey]) "
                  "REFERENCES {ref} ([c_custkey])")
DBA_COMPUTED_SQL = "ALTER TABLE {table} ADD [o_price_x2] AS ([o_totalprice] * 2)"
DBA_PERIOD_SQL = ("ALTER TABLE {table} ADD [valid_from] datetime2(7) GENERATED ALWAYS AS ROW START HIDDEN NOT NULL "
                  "CONSTRAINT [df_orders_from] DEFAULT SYSUTCDATETIME(), [valid_to] datetime2(7) GENERATED ALWAYS AS "
                  "ROW END HIDDEN NOT NULL CONSTRAINT [df_orders_to] DEFAULT "
                  "CONVERT(datetime2(7), '9999-12-31T23:59:59.9999999', 126), "
                  "PERIOD FOR SYSTEM_TIME ([valid_from], [valid_to])")
DBA_VERSIONING_ON_SQL = "ALTER TABLE {table} SET (SYSTEM_VERSIONING = ON (HISTORY_TABLE = {history}))"
DBA_VERSIONING_OFF_SQL = "ALTER TABLE {table} SET (SYSTEM_VERSIONING = OFF)"
# Change tracking: on the database first (the test turns off there only what it turned on), then
# on the table, which needs a primary key.
CT_ENABLED_SQL = "SELECT COUNT(*) FROM sys.change_tracking_databases WHERE database_id = DB_ID()"
DBA_CT_DATABASE_ON_SQL = "ALTER DATABASE CURRENT SET CHANGE_TRACKING = ON"
DBA_CT_DATABASE_OFF_SQL = "ALTER DATABASE CURRENT SET CHANGE_TRACKING = OFF"
# Change data capture: sysadmin enables it on the database, db_owner on a table; the test
# disables on the database only what it enabled itself.
# Replication: a publication needs a distributor configured on the server (the test skips
# without one); the test takes back on the database only what it set itself.
PUBLISHED_DB_SQL = "SELECT DB_NAME(), is_published FROM sys.databases WHERE database_id = DB_ID()"
REPL_DB_OPTION_SQL = "EXEC sys.sp_replicationdboption @dbname = ?, @optname = N'publish', @value = ?"
REPL_PUBLICATION_SQL = "EXEC sys.sp_addpublication @publication = ?, @status = N'active', @repl_freq = N'continuous'"
REPL_ARTICLE_SQL = ("EXEC sys.sp_addarticle @publication = ?, @article = N'orders', @source_owner = ?, "
                    "@source_object = N'orders'")
REPL_DROP_ARTICLE_SQL = ("EXEC sys.sp_droparticle @publication = ?, @article = N'orders', "
                         "@force_invalidate_snapshot = 1")
REPL_DROP_PUBLICATION_SQL = "EXEC sys.sp_droppublication @publication = ?"
DBA_NATION_KEY_SQL = "ALTER TABLE {nation} ADD CONSTRAINT [pk_nation] PRIMARY KEY ([n_nationkey])"
DBA_NATION_REFS_SQL = ("CREATE TABLE {refs} ([n_nationkey] int NOT NULL CONSTRAINT [fk_refs_nation] "
                       "REFERENCES {nation} ([n_nationkey]))")
CDC_ENABLED_SQL = "SELECT is_cdc_enabled FROM sys.databases WHERE database_id = DB_ID()"
CDC_ENABLE_DB_SQL = "EXEC sys.sp_cdc_enable_db"
CDC_DISABLE_DB_SQL = "EXEC sys.sp_cdc_disable_db"
CDC_ENABLE_TABLE_SQL = "EXEC sys.sp_cdc_enable_table @source_schema = ?, @source_name = N'orders', @role_name = NULL"
CDC_DISABLE_TABLE_SQL = "EXEC sys.sp_cdc_disable_table @source_schema = ?, @source_name = N'orders', @capture_instance = N'all'"
CHECKS_ON_STAGING_SQL = "SELECT COUNT(*) FROM sys.check_constraints WHERE name = ? AND is_not_trusted = 0"
# publish: batch (tests at the end): which batch the unpartitioned table holds, and the staging
# table an unrelated session drops after its switch (a failure inside the publish's transaction).
NATION_SQL = "SELECT COUNT_BIG(*), MIN(n_comment), MAX(n_comment) FROM {table}"
CLEANUP_SQL = [
    "DELETE FROM [switchyard].[partition_batches] WHERE target_schema = ?",
    "DELETE FROM [switchyard].[planned_partitions] WHERE target_schema = ?",
    "DELETE FROM [switchyard].[run_lease] WHERE target_schema = ?",
]


def drop_sql(a) -> list[str]:
    """The schema's tables (target, staging, archive), then its function and scheme, then schemas."""
    staging = [f"DROP TABLE IF EXISTS {a.qualified(a.staging_schema, f'orders_{k}')}" for k in range(1, 9)]
    staging += [f"DROP TABLE IF EXISTS {a.qualified(a.staging_schema, name)}" for name in ("nation_1", "nation__next", "nation__old")]
    return [*staging, f"DROP TABLE IF EXISTS {a.qualified(a.schema, 'orders')}",
            f"DROP TABLE IF EXISTS {a.qualified(a.schema, 'nation')}",
            f"DROP PARTITION SCHEME {a.q(a.scheme_name('orders'))}",
            f"DROP PARTITION FUNCTION {a.q(a.function_name('orders'))}",
            f"DROP SCHEMA IF EXISTS {a.q(a.staging_schema)}", f"DROP SCHEMA IF EXISTS {a.q(a.schema)}"]


def dba_sql(a) -> dict[str, str]:
    """The DBA's statements of the pre-flight tests, for this schema."""
    table, scheme = a.qualified(a.schema, "orders"), a.q(a.scheme_name("orders"))
    copy = a.q(a.scheme_name("orders") + "_copy")
    return {"key": DBA_KEY_SQL.format(table=table, scheme=scheme),
            "fk_table": DBA_FK_TABLE_SQL.format(referencing=a.qualified(a.schema, "order_refs"), table=table),
            "check": DBA_CHECK_SQL.format(table=table), "check_now": DBA_CHECK_NOW_SQL.format(table=table),
            "view": DBA_VIEW_SQL.format(view=a.qualified(a.schema, "v_orders"), table=table),
            "view_index": DBA_VIEW_INDEX_SQL.format(view=a.qualified(a.schema, "v_orders")),
            "scheme_copy": DBA_SCHEME_COPY_SQL.format(copy=copy, function=a.q(a.function_name("orders")),
                                                      filegroups="[fg1], [fg_edge]"),
            "index_on_copy": DBA_INDEX_ON_COPY_SQL.format(table=table, copy=copy),
            "ref_table": DBA_REF_TABLE_SQL.format(ref=a.qualified(a.schema, "customer_ref")),
            "fk_out": DBA_FK_OUT_SQL.format(table=table, ref=a.qualified(a.schema, "customer_ref")),
            "drop_fk_out": f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS [fk_orders_customer]",
            "drop_ref_table": f"DROP TABLE IF EXISTS {a.qualified(a.schema, 'customer_ref')}",
            "nation_key": DBA_NATION_KEY_SQL.format(nation=a.qualified(a.schema, "nation")),
            "nation_refs": DBA_NATION_REFS_SQL.format(refs=a.qualified(a.schema, "nation_refs"),
                                                      nation=a.qualified(a.schema, "nation")),
            "drop_nation_refs": f"DROP TABLE IF EXISTS {a.qualified(a.schema, 'nation_refs')}",
            "computed": DBA_COMPUTED_SQL.format(table=table),
            "period": DBA_PERIOD_SQL.format(table=table),
            "versioning_on": DBA_VERSIONING_ON_SQL.format(table=table, history=a.qualified(a.schema, "orders_history")),
            "versioning_off": DBA_VERSIONING_OFF_SQL.format(table=table),
            "drop_history": f"DROP TABLE IF EXISTS {a.qualified(a.schema, 'orders_history')}",
            "tracking_on": f"ALTER TABLE {table} ENABLE CHANGE_TRACKING",
            "tracking_off": f"ALTER TABLE {table} DISABLE CHANGE_TRACKING",
            "drop_key": f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS [pk_orders]",
            "drop_view": f"DROP VIEW IF EXISTS {a.qualified(a.schema, 'v_orders')}",
            "drop_fk_table": f"DROP TABLE IF EXISTS {a.qualified(a.schema, 'order_refs')}",
            "drop_index_on_copy": f"DROP INDEX IF EXISTS [ix_orders_cust_copy] ON {table}",
            "drop_scheme_copy": f"DROP PARTITION SCHEME {copy}"}


def suite_sql(a) -> list[str]:
    table = a.qualified(a.schema, "orders")
    return [FUNCTIONS_SQL, STAGING_TABLES_SQL, BATCHES_SQL, EDGE_ROWS_SQL, KEY_RANGE_SQL.format(table=table),
            NATION_SQL.format(table=a.qualified(a.schema, "nation")),
            DBA_INDEX_SQL.format(table=table, scheme=a.q(a.scheme_name("orders"))), DBA_COMPRESS_SQL.format(table=table),
            INDEX_EXISTS_SQL, COMPRESSION_SQL, SCHEME_FILEGROUPS_SQL, CHECKS_ON_STAGING_SQL, CDC_ENABLED_SQL,
            CDC_ENABLE_DB_SQL, CDC_DISABLE_DB_SQL, CDC_ENABLE_TABLE_SQL, CDC_DISABLE_TABLE_SQL, PUBLISHED_DB_SQL,
            REPL_DB_OPTION_SQL, REPL_PUBLICATION_SQL, REPL_ARTICLE_SQL, REPL_DROP_ARTICLE_SQL,
            REPL_DROP_PUBLICATION_SQL,
            *[x for k, x in dba_sql(a).items() if k != "drop_scheme_copy"], *CLEANUP_SQL, *drop_sql(a)]


# --- batches written by the tests --------------------------------------------------------------------
def write_batch(root: Path, name: str, ranges: list[tuple[int, int]],
                nation_rows: int | None = None) -> tuple[Path, Manifest]:
    """Orders files, one per stream, holding every key of its range (TPC-H's layout: '|' after
    each field, LF); with `nation_rows`, a nation file of that many rows too, each naming the batch."""
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
    if nation_rows:
        (folder / "nation").mkdir(parents=True, exist_ok=True)
        path = folder / "nation" / "nation.1.tbl"
        path.write_text("".join(f"{key}|NATION {key}|{key % 5}|batch {name}|\n" for key in range(nation_rows)))
        entries.append(ManifestEntry("nation", 1, "nation/nation.1.tbl", path.stat().st_size, nation_rows, 0,
                                     nation_rows - 1))
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
        def __init__(self, publish: str = "table", **table):
            # publish: table (each table goes in at its last switch) unless a test says batch.
            self.spec = changed(SPEC, publish=publish, tables=tuple(changed(t, **table) if t.name == "orders" else t
                                                                    for t in SPEC.tables))

        def adapter(self, batch: str = ""):
            state["run"] += 1
            a = MssqlAdapter(self.spec, uri=URI, schema=schema, lease_holder=f"dag/run-{state['run']}",
                             lease_batch=batch, **options)
            made.append(a)
            return a

        def load(self, batch: str, ranges, switch=None, replace_newer: bool = False):
            """setup.plan, then prepare, load and switch each stream (`switch`: the streams
            whose switch runs; the others stay validated but held back). The run's lease is
            given up also when setup refuses, as the DAG's stats task gives it up."""
            folder, manifest = write_batch(root, batch, ranges)
            plan = plan_batch(self.spec, manifest, ["orders"])
            a = self.adapter(batch)
            try:
                notes = a.setup(plan, replace_newer=replace_newer)
                results = []
                for s in plan.table("orders").streams:
                    a.prepare(s)
                    a.load(s, folder / s.file)
                    if switch is None or s.stream in switch:
                        results.append(a.switch(s))
            finally:
                a.release_lease()
            return a, plan, notes, results

        def load_batch(self, batch: str, ranges, nation_rows: int, switch=None, before_publish=None):
            """orders and nation as one batch (publish: batch): setup.plan, each group's prepare,
            load and switch (`switch`: the (table, stream) groups whose switch runs), then
            publish_batch (its error returned, not raised); `before_publish(a)` runs just before."""
            from switchyard.targets import TargetError
            folder, manifest = write_batch(root, batch, ranges, nation_rows)
            plan = plan_batch(self.spec, manifest, ["nation", "orders"])
            a = self.adapter(batch)
            a.setup(plan)
            results = []
            for s in plan.all_streams():
                a.prepare(s)
                a.load(s, folder / s.file)
                if switch is None or (s.table, s.stream) in switch:
                    results.append(a.switch(s))
            if before_publish is not None:
                before_publish(a)
            try:
                published = a.publish_batch(list(plan.all_streams()))
            except TargetError as exc:
                published = exc
            a.release_lease()
            return a, plan, results, published

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


def test_a_replace_table_holding_a_newer_batch_is_refused_unless_the_run_asks(target):
    """An older batch (a backfill of past dates, a cleared night) would put a replace table back
    behind the newer batch it holds: refused before any load, the table as it was, unless the run
    asks for it (the DAG's replace_newer param)."""
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-05", even(4))
    with pytest.raises(TargetError, match="holds batch 2026-04-05, newer than this batch 2026-04-04"):
        t.load("2026-04-04", even(2, 1, 3000))
    assert a.fetch(STAGING_TABLES_SQL, (a.staging_schema,))[0][0] == 0
    assert key_range(a) == (1, 4000, 4000)
    assert a.fetch(BATCHES_SQL, (a.schema,)) == [("2026-04-05", 4)]
    b, _, notes, _ = t.load("2026-04-04", even(2, 1, 3000), replace_newer=True)
    assert any("put back to batch 2026-04-04, as the run asks (replace_newer)" in n for n in notes)
    assert key_range(b) == (1, 3000, 3000)
    assert b.fetch(BATCHES_SQL, (b.schema,)) == [("2026-04-04", 2)]


# --- the pre-flight: what a DBA adds to a loaded table ---------------------------------------------------
def test_a_foreign_key_referencing_the_target_is_refused_before_any_load(target):
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    dba = dba_sql(a)
    a.execute([dba["key"], dba["fk_table"]])
    try:
        with pytest.raises(TargetError, match="is referenced by foreign key fk_ref_orders") as refused:
            t.load("2026-04-05", even(2))
        assert refused.value.permanent and "Msg 4712" in str(refused.value)
        assert a.fetch(STAGING_TABLES_SQL, (a.staging_schema,))[0][0] == 0
        assert key_range(a) == (1, 4000, 4000)
    finally:
        a.execute([dba["drop_fk_table"]])


def test_the_targets_check_constraint_goes_on_the_staging_tables_and_the_batch_switches(target):
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    a.execute([dba_sql(a)["check"]])
    b, _, notes, results = t.load("2026-04-05", even(2, 1, 3000))
    assert any("CHECK constraint ck_orders_price" in n and "is copied" in n for n in notes)
    assert results[-1]["table_switched"] and key_range(b) == (1, 3000, 3000)


def test_a_check_constraint_switchyard_cannot_copy_is_refused_naming_it(target):
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    a.execute([dba_sql(a)["check_now"]])
    with pytest.raises(TargetError, match="CHECK constraint ck_orders_recent"):
        t.load("2026-04-05", even(2))


def test_an_indexed_view_over_the_target_is_refused_before_any_load(target):
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    dba = dba_sql(a)
    a.execute([dba["view"], dba["view_index"]])
    try:
        with pytest.raises(TargetError, match=r"is in the indexed view \[m_\w+\]\.\[v_orders\]"):
            t.load("2026-04-05", even(2))
    finally:
        a.execute([dba["drop_view"]])


def test_a_foreign_key_of_the_target_is_refused_before_any_load(target):
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    dba = dba_sql(a)
    a.execute([dba["ref_table"], dba["fk_out"]])
    try:
        with pytest.raises(TargetError, match=r"foreign key fk_orders_customer references \[m_\w+\]\.\[customer_ref\]"):
            t.load("2026-04-05", even(2))
        assert a.fetch(STAGING_TABLES_SQL, (a.staging_schema,))[0][0] == 0
        assert key_range(a) == (1, 4000, 4000)
    finally:
        a.execute([dba["drop_fk_out"], dba["drop_ref_table"]])


def test_a_target_made_with_a_nullable_key_takes_batches_into_every_partition(target, tmp_path):
    # A DBA made the table from Switchyard's own script, with the key column allowing NULL:
    # each staging table's CHECK says the key IS NOT NULL, which SWITCH into a partition other
    # than the first needs (Msg 4982 otherwise).
    t = target()
    _, manifest = write_batch(tmp_path / "by-hand", "2026-04-03", even(2))
    by_hand = t.adapter()
    script = by_hand.setup_sql(plan_batch(t.spec, manifest, ["orders"]))
    made = [x.replace("[o_orderkey] bigint NOT NULL", "[o_orderkey] bigint NULL") for x in script]
    assert made != script
    by_hand.execute(made)
    a, _, notes, results = t.load("2026-04-04", even(2))
    assert any("its key column o_orderkey allows NULL" in n for n in notes)
    assert results[-1]["table_switched"] and key_range(a) == (1, 4000, 4000)
    b, _, _, results = t.load("2026-04-05", even(4, 1, 6000))
    assert results[-1]["table_switched"] and key_range(b) == (1, 6000, 6000)


def test_a_computed_column_on_the_target_is_refused_before_any_load(target):
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    a.execute([dba_sql(a)["computed"]])
    with pytest.raises(TargetError, match="column o_price_x2 is computed"):
        t.load("2026-04-05", even(2))
    assert key_range(a) == (1, 4000, 4000)


def test_a_system_versioned_target_is_refused_before_any_load(target):
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    dba = dba_sql(a)
    a.execute([dba["key"], dba["period"], dba["versioning_on"]])
    try:
        with pytest.raises(TargetError, match="is system-versioned"):
            t.load("2026-04-05", even(2))
        assert key_range(a) == (1, 4000, 4000)
    finally:
        a.execute([dba["versioning_off"], dba["drop_history"]])


def test_a_target_with_change_tracking_is_refused_before_any_load(target):
    # SWITCH fails on a table with change tracking enabled (Msg 4900): refused before any load.
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    dba = dba_sql(a)
    database_on = not a.fetch(CT_ENABLED_SQL)[0][0]
    a.execute(([DBA_CT_DATABASE_ON_SQL] if database_on else []) + [dba["key"], dba["tracking_on"]])
    try:
        with pytest.raises(TargetError, match="change tracking is enabled on it"):
            t.load("2026-04-05", even(2))
        assert a.fetch(STAGING_TABLES_SQL, (a.staging_schema,))[0][0] == 0
        assert key_range(a) == (1, 4000, 4000)
    finally:
        a.execute([dba["tracking_off"], dba["drop_key"]] + ([DBA_CT_DATABASE_OFF_SQL] if database_on else []))


def test_a_target_tracked_by_change_data_capture_is_refused_before_any_load(target):
    import pyodbc
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    enabled_before = bool(a.fetch(CDC_ENABLED_SQL)[0][0])
    with a.connection() as conn:
        cur = conn.cursor()
        try:
            if not enabled_before:
                cur.execute(CDC_ENABLE_DB_SQL)
            cur.execute(CDC_ENABLE_TABLE_SQL, a.schema)
        except pyodbc.Error as exc:
            pytest.skip(f"change data capture cannot be enabled on this server or login: {exc}")
    try:
        with pytest.raises(TargetError, match="change data capture tracks it"):
            t.load("2026-04-05", even(2))
        assert key_range(a) == (1, 4000, 4000)
    finally:
        with a.connection() as conn:
            conn.cursor().execute(CDC_DISABLE_TABLE_SQL, a.schema)
            if not enabled_before:
                conn.cursor().execute(CDC_DISABLE_DB_SQL)


def test_a_published_target_is_refused_before_any_load(target):
    import pyodbc
    from switchyard.targets import TargetError
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(2))
    a.execute([dba_sql(a)["key"]])      # a transactional article needs a primary key
    database, published_before = a.fetch(PUBLISHED_DB_SQL)[0]
    publication = f"pub_{a.schema}"
    with a.connection() as conn:
        cur = conn.cursor()
        try:
            if not published_before:
                cur.execute(REPL_DB_OPTION_SQL, database, "true")
            cur.execute(REPL_PUBLICATION_SQL, publication)
            cur.execute(REPL_ARTICLE_SQL, publication, a.schema)
        except pyodbc.Error as exc:
            undo_publication(a, publication, database, published_before)
            pytest.skip(f"replication cannot be set up on this server or login (a distributor is needed): {exc}")
    try:
        with pytest.raises(TargetError, match="is published or subscribed for replication"):
            t.load("2026-04-05", even(2))
        assert key_range(a) == (1, 4000, 4000)
    finally:
        undo_publication(a, publication, database, published_before)


def undo_publication(a, publication: str, database: str, published_before: bool) -> None:
    """Each step of the set-up taken back, best effort (some may not have happened)."""
    import pyodbc
    steps = [(REPL_DROP_ARTICLE_SQL, (publication,)), (REPL_DROP_PUBLICATION_SQL, (publication,))]
    if not published_before:
        steps.append((REPL_DB_OPTION_SQL, (database, "false")))
    with a.connection() as conn:
        for sql, params in steps:
            try:
                conn.cursor().execute(sql, *params)
            except pyodbc.Error:
                pass


def test_an_index_on_another_scheme_of_the_same_function_and_filegroups_is_aligned(target):
    t = target()
    a, _, _, _ = t.load("2026-04-04", even(1))
    dba = dba_sql(a)
    filegroups = [r[0] for r in a.fetch(SCHEME_FILEGROUPS_SQL, (a.scheme_name("orders"),))]
    assert filegroups == ["fg_edge", "fg1", "fg_edge"]
    a.execute([dba["scheme_copy"].replace("[fg1], [fg_edge]", "[fg_edge], [fg1], [fg_edge]"), dba["index_on_copy"]])
    try:
        b, _, _, results = t.load("2026-04-05", even(1))
        assert results[-1]["table_switched"] and "ix_orders_cust_copy" in results[0]["indexes_built"]
        # Two streams now: the commit SPLITs, which needs a NEXT USED filegroup in both schemes.
        c, _, _, results = t.load("2026-04-06", even(2))
        assert results[-1]["table_switched"] and key_range(c) == (1, 4000, 4000)
    finally:
        a.execute([dba["drop_index_on_copy"], dba["drop_scheme_copy"]])


# --- publish: batch: the batch goes in whole, every table in one transaction -------------------------
def nation(a) -> tuple:
    return tuple(a.fetch(NATION_SQL.format(table=a.qualified(a.schema, "nation")))[0])


def test_a_batch_goes_in_whole_and_a_failed_group_keeps_every_table_out(target):
    t = target(publish="batch")
    a, plan, results, published = t.load_batch("2026-04-04", even(2), nation_rows=25)
    assert not isinstance(published, Exception), published
    assert published["tables"] == ["nation", "orders"] and published["already_published"] is False
    assert [r["in_target"] for r in results] == [False, False, False]   # the switches only staged
    assert key_range(a) == (1, 4000, 4000) and nation(a) == (25, "batch 2026-04-04", "batch 2026-04-04")
    # A retry of that publish (its task died after the commit) finds the batch published.
    assert a.publish_batch(list(plan.all_streams()))["already_published"] is True
    # The next batch's nation group fails (its switch never runs): the publish refuses, naming it,
    # and neither table changed, though every orders group switched.
    b, _, results, refused = t.load_batch("2026-04-05", even(4, 1, 6000), nation_rows=20,
                                          switch={("orders", k) for k in range(1, 5)})
    assert isinstance(refused, Exception) and refused.permanent
    assert f"{b.schema}.nation: its stream (20 rows in the manifest) was not validated and switched in this run" in str(
        refused)
    assert key_range(b) == (1, 4000, 4000) and nation(b) == (25, "batch 2026-04-04", "batch 2026-04-04")
    assert b.fetch(BATCHES_SQL, (b.schema,)) == [("2026-04-04", 2)]


def test_a_failure_inside_the_publish_rolls_back_every_table(target):
    t = target(publish="batch")
    a, _, _, published = t.load_batch("2026-04-04", even(2), nation_rows=25)
    assert not isinstance(published, Exception), published

    def lose_a_staging_table(adapter):
        # orders stream 2 was validated and marked ready, then its staging table went (dropped by
        # hand): the publish's check passes, and its SWITCH fails after nation was replaced.
        adapter.execute([f"DROP TABLE {adapter.qualified(adapter.staging_schema, 'orders_2')}"])
    b, _, _, failed = t.load_batch("2026-04-05", even(2, 1, 6000), nation_rows=20, before_publish=lose_a_staging_table)
    assert isinstance(failed, Exception) and "nothing was published" in str(failed)
    assert key_range(b) == (1, 4000, 4000) and nation(b) == (25, "batch 2026-04-04", "batch 2026-04-04")
    assert b.fetch(BATCHES_SQL, (b.schema,)) == [("2026-04-04", 2)]


def test_an_unpartitioned_table_a_foreign_key_references_is_refused_before_any_load(target):
    from switchyard.targets import TargetError
    t = target(publish="batch")
    a, _, _, published = t.load_batch("2026-04-04", even(2), nation_rows=25)
    assert not isinstance(published, Exception), published
    dba = dba_sql(a)
    a.execute([dba["nation_key"], dba["nation_refs"]])
    try:
        # The replace empties nation with TRUNCATE TABLE, which the foreign key refuses (Msg 4712).
        with pytest.raises(TargetError, match="nation is referenced by foreign key fk_refs_nation"):
            t.load_batch("2026-04-05", even(2, 1, 6000), nation_rows=20)
        assert key_range(a) == (1, 4000, 4000) and nation(a) == (25, "batch 2026-04-04", "batch 2026-04-04")
    finally:
        a.execute([dba["drop_nation_refs"]])


KEY_CONSTRAINT_SQL = "SELECT name FROM sys.key_constraints WHERE parent_object_id = OBJECT_ID(?)"


def test_an_unpartitioned_table_is_switched_in_whole_and_one_switch_cannot_take_has_its_rows_copied(target):
    t = target(publish="batch")
    a, _, _, published = t.load_batch("2026-04-04", even(2), nation_rows=25)
    assert not isinstance(published, Exception), published
    table = a.qualified(a.schema, "nation")
    a.execute([dba_sql(a)["nation_key"]])
    # The DBA's primary key, built on the next version before the publish: SWITCH takes it, and the
    # table keeps its own key by name; the previous rows went with the table switched out.
    b, _, _, published = t.load_batch("2026-04-05", even(2, 1, 6000), nation_rows=20)
    assert not isinstance(published, Exception), published
    assert nation(b) == (20, "batch 2026-04-05", "batch 2026-04-05")
    assert b.fetch(KEY_CONSTRAINT_SQL, (table,)) == [("pk_nation",)]
    assert b.fetch("SELECT OBJECT_ID(?, N'U')", (b.qualified(b.staging_schema, "nation__old"),)) == [(None,)]
    # A computed column: SWITCH cannot take the table; its rows are copied instead, as the
    # pre-flight says.
    b.execute([f"ALTER TABLE {table} ADD [n_name_length] AS LEN([n_name])"])
    c, _, _, published = t.load_batch("2026-04-06", even(2, 1, 6000), nation_rows=22)
    assert not isinstance(published, Exception), published
    assert nation(c) == (22, "batch 2026-04-06", "batch 2026-04-06")
    assert c.fetch(f"SELECT COUNT(*) FROM {table} WHERE [n_name_length] = LEN([n_name])") == [(22,)]
