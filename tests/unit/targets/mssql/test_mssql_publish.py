"""SQL Server's `publish: batch` without a server: every table of the batch in one transaction.

Each group's switch only stages (a partitioned table's stream is marked ready in
planned_partitions, an unpartitioned table's validated staging table is renamed
`<table>__next`); `MssqlAdapter.publish_batch` then checks that every stream of the run's plan is
staged and moves every table in, in one T-SQL transaction (targets/mssql/templates/publish_batch.sql),
under the short LOCK_TIMEOUT and the retry on error 1222 of a table's own commit.

`BatchSession` below gives SCRIPTED CATALOG ANSWERS for several tables at once (the pre-flight's
catalog queries, targets/mssql/templates/catalog_*.sql, answered per table from a layout written by
hand, as tests/unit/targets/mssql/test_mssql_window.py's ScriptedCatalog does for orders) plus hand-kept control
tables (planned_partitions, partition_batches) and staging tables. The adapter's own code sends
every query and statement; the publish's transaction is recorded (and its effect on the control
tables applied), not run. The rendered transaction is kept in golden files and parsed as T-SQL;
the same path against a real server runs in tests/contract/test_mssql_contract_modes.py.
"""
from __future__ import annotations

import re
from dataclasses import replace as changed

import pytest

from switchyard.core.batch import Manifest, ManifestEntry
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.mssql import MssqlAdapter
from test_mssql_commit_locks import LOCK_TIMEOUT
from test_mssql_tsql import check_golden, sqlfluff_parses
from test_mssql_window import even, layout_of

TPCH = load_spec("tpch")
BATCH_SPEC = changed(TPCH, tables=tuple(changed(t, mode="append") if t.name == "lineitem" else t for t in TPCH.tables))
TABLES = ("lineitem", "nation", "orders")
HEAD = "-- tpch: batch "    # how the publish's transaction starts (publish_batch.sql)


def adapter(spec=BATCH_SPEC, batch="2026-04-05", run="switchyard_tpch/run-2", **options) -> MssqlAdapter:
    return MssqlAdapter(spec, base_port=2000, port_count=4, lease_holder=run, lease_batch=batch, **options)


def batch_plan(spec=BATCH_SPEC, orders=even(4), lineitem=even(2, 8001, 2000), rows=100, nation_rows=25,
               lineitem_rows=None):
    """orders, lineitem and nation of one batch: orders and lineitem in `orders` / `lineitem` key
    ranges, nation in one stream of `nation_rows` rows; `lineitem_rows=0`: lineitem's streams
    have no rows."""
    entries = [ManifestEntry("orders", k, f"orders/orders.{k}.tbl", 10_000, rows, lo, hi)
               for k, (lo, hi) in enumerate(orders, start=1)]
    entries += [ManifestEntry("lineitem", k, f"lineitem/lineitem.{k}.tbl", 40_000, rows * 4, lo, hi)
                if lineitem_rows is None else
                ManifestEntry("lineitem", k, f"lineitem/lineitem.{k}.tbl", 0, lineitem_rows, None, None)
                for k, (lo, hi) in enumerate(lineitem, start=1)]
    entries.append(ManifestEntry("nation", 1, "nation/nation.1.tbl", 2_224 if nation_rows else 0, nation_rows,
                                 0 if nation_rows else None, nation_rows - 1 if nation_rows else None))
    manifest = Manifest(spec="tpch", streams=max(len(orders), len(lineitem)), entries=tuple(entries))
    return plan_batch(spec, manifest, list(TABLES))


# --- the catalog and the control tables, scripted ------------------------------------------------
_TYPES = {"bigint": ("bigint", 8, 19, 0), "integer": ("int", 4, 10, 0), "money": ("money", 8, 19, 4),
          "date": ("date", 3, 10, 0)}


def column_rows(table):
    """catalog_columns.sql's rows for a spec table, as the catalog describes the table setup made."""
    rows = []
    for c in table.columns:
        t = c.sql_type("mssql")
        sized = re.fullmatch(r"(var)?char\((\d+)\)", t)
        name, length, precision, scale = (("varchar" if sized[1] else "char", int(sized[2]), 0, 0) if sized
                                          else _TYPES[t])
        rows.append((c.name, name, length, precision, scale, int(c.nullable),
                     "SQL_Latin1_General_CP1_CI_AS" if sized else None, 0, 0, None))
    return rows


class BatchSession:
    """SCRIPTED CATALOG ANSWERS for tpch.orders and tpch.lineitem (partitioned: `layouts`, each a
    list of window.Partition) and tpch.nation (unpartitioned), and the control tables and
    staging tables a run's setup, switches and publish read and write. `lock_timeouts`: how many
    times the publish's transaction fails with SQL Server's lock time-out (1222) first."""

    def __init__(self, a: MssqlAdapter, layouts: dict, lock_timeouts: int = 0, dependencies: dict | None = None,
                 absent: tuple[str, ...] = (), table_rows: dict | None = None, lookup_rows: int = 25,
                 lookup_indexes: dict | None = None):
        self.a = a
        # catalog_dependencies.sql's rows (kind, name, detail, flag) per table; none unless scripted.
        self.dependencies = dependencies or {}
        # Tables not in the database yet (`absent`), and catalog_table.sql's row written by hand
        # for others (`table_rows`, e.g. a table partitioned where the spec loads it whole).
        self.absent, self.table_rows = set(absent), table_rows or {}
        # The rows an unpartitioned table holds (its heap's one partition in sys.partitions).
        self.lookup_rows = lookup_rows
        # catalog_indexes.sql's rows per unpartitioned table (a DBA's primary key), each index on
        # the table's filegroup; none unless scripted.
        self.lookup_indexes = lookup_indexes or {}
        # The shape a table loaded whole's staging tables were made to: on this filegroup, with
        # the table's indexes once built (staging_indexes).
        self.staging_filegroup, self.staging_indexes = "PRIMARY", False
        # The catalog's queries are one text for every table but the boundaries' (in the key's type).
        names = [t.name for t in a.spec.tables]
        self.sql = a.catalog_sql("orders" if "orders" in names else names[0])
        if "lineitem" in names:
            assert self.sql == a.catalog_sql("lineitem")   # both keys are bigint: one text, answered per table
        self.layouts = layouts
        self.function_ids = {name: 65601 + i for i, name in enumerate(sorted(layouts))}
        self.planned: list[dict] = []
        self.batches: list[dict] = []      # partition_batches: (table, key_max) -> batch, run
        self.staging: set[str] = set()     # tables in the staging schema
        self.publishes: list[str] = []     # the publish transactions that committed
        self.statistics: list[str] = []    # the tables whose statistics were updated, in order
        self.attempts = 0
        self.lock_timeouts = lock_timeouts
        self.sent: list[tuple[str, tuple]] = []
        self.rowcount, self.description, self._rows = 1, None, []
        self.nextset = lambda: False

    # the catalog, per table
    def _table_of(self, qualified: str) -> str:
        return re.fullmatch(r"\[tpch\]\.\[(\w+)\]", qualified)[1]

    def _catalog(self, kind: str, params: tuple) -> list:
        if kind in ("boundaries", "schemes"):
            name = next((n for n, f in self.function_ids.items() if f == params[0]), None)
            if name is None:   # a function scripted by hand (table_rows): no scheme besides the table's
                return []
        elif kind == "batches":
            name = params[1]
        elif str(params[0]).startswith("[tpch_staging]."):
            return self._staging_catalog(kind, params[0])
        else:
            name = self._table_of(params[1] if kind == "shared" else params[0])
        spec_table = self.a.spec.table(name)
        if name in self.absent:
            return []
        if kind == "table" and name in self.table_rows:
            return [self.table_rows[name]]
        if not spec_table.partitioned:
            indexes = self.lookup_indexes.get(name, [])
            clustered = any(r[2] == "CLUSTERED" for r in indexes)
            return {"table": [("FG", "PRIMARY", None, None, None, None, None, None, None, None, None)],
                    "partitions": [(0 if not clustered else 1, None, 1, self.lookup_rows, "NONE", "PRIMARY")]
                    + [(r[0], r[1], 1, self.lookup_rows, "PAGE", "PRIMARY") for r in indexes if r[0] > 1],
                    "indexes": indexes,
                    "columns": column_rows(spec_table),
                    "dependencies": self.dependencies.get(name, [])}.get(kind, [])
        parts = sorted(self.layouts[name], key=lambda p: p.number)
        function_id = self.function_ids[name]
        return {
            "table": [("PS", f"ps_tpch_{name}", function_id, f"pf_tpch_{name}", 0, len(parts), "bigint", 8, 19, 0,
                       spec_table.key)],
            "boundaries": [(i + 1, p.upper) for i, p in enumerate(parts[:-1])],
            "schemes": [(f"ps_tpch_{name}",)],
            "partitions": [(0, None, p.number, p.rows, "NONE", p.filegroup) for p in parts],
            "columns": column_rows(spec_table),
            "dependencies": self.dependencies.get(name, []),
            "batches": [(str(p.lower + 1), str(p.upper), p.batch) for p in parts if p.batch],
        }.get(kind, [])

    def _staging_catalog(self, kind: str, qualified: str) -> list:
        """A table loaded whole's staging table or next version, made to the table's shape by its
        prepare (on `staging_filegroup`, the table's CHECKs copied), without indexes until a
        build adds them (`staging_indexes`)."""
        made = re.fullmatch(r"\[tpch_staging\]\.\[(\w+?)(?:__next|_\d+)\]", qualified)
        if made is None or made[1] not in (t.name for t in self.a.spec.tables) or \
                self.a.spec.table(made[1]).partitioned or made[0] not in self._staged_names():
            return []
        name = made[1]
        indexes = self.lookup_indexes.get(name, []) if self.staging_indexes else []
        clustered = any(r[2] == "CLUSTERED" for r in indexes)
        return {"table": [("FG", self.staging_filegroup, None, None, None, None, None, None, None, None, None)],
                "partitions": [(1 if clustered else 0, None, 1, self.lookup_rows, "NONE", self.staging_filegroup)]
                + [(r[0], r[1], 1, self.lookup_rows, "PAGE", self.staging_filegroup) for r in indexes if r[0] > 1],
                "indexes": indexes, "columns": column_rows(self.a.spec.table(name)),
                "dependencies": [d for d in self.dependencies.get(name, []) if d[0] == "check"]}.get(kind, [])

    def _staged_names(self) -> set[str]:
        return {f"[tpch_staging].[{n}]" for n in self.staging}

    def execute(self, sql: str, *params):
        self.sent.append((sql, params))
        head = " ".join(sql.split())
        self._rows = []
        kind = next((k for k, v in self.sql.items() if v == sql), None)
        if kind is not None:
            self._rows = self._catalog(kind, params)
        elif head.startswith("SELECT OBJECT_ID(?, N'U')"):
            name = params[0]
            staged = re.fullmatch(r"\[tpch_staging\]\.\[(\w+)\]", name)
            self._rows = [(None,)] if ("archive" in name or (staged and staged[1] not in self.staging)) else [(1,)]
        elif "sp_getapplock" in sql:
            pass
        elif head.startswith("SELECT DISTINCT run, batch FROM [switchyard].[planned_partitions]"):
            self._rows = sorted({(p["run"], p["batch"]) for p in self.planned
                                 if p["table_name"] == params[1] and p["run"] != params[2]})
        elif head.startswith("SELECT staging_table FROM [switchyard].[planned_partitions]"):
            self._rows = [(p["staging_table"],) for p in self.planned if p["table_name"] == params[1]
                          and ("ready_at IS NOT NULL" not in head or p["ready_at"])]
        elif head.startswith("DROP TABLE IF EXISTS [tpch_staging]."):
            self.staging.discard(re.match(r"DROP TABLE IF EXISTS \[tpch_staging\]\.\[(\w+)\]", head)[1])
        elif head.startswith("DELETE FROM [switchyard].[planned_partitions]"):
            self.planned = [p for p in self.planned if p["table_name"] != params[1]]
        elif head.startswith("INSERT INTO [switchyard].[planned_partitions]"):
            keys = ("target_schema", "table_name", "staging_table", "stream", "batch", "key_min", "key_max",
                    "rows_planned", "run", "stream_filegroup", "filegroup", "compression")
            self.planned.append({**dict(zip(keys, params)), "ready_at": None})
            self.staging.add(params[2])     # prepare and load made it; its switch marks it ready
        elif head.startswith("SELECT [staging_table], [stream]"):
            fields = ("staging_table", "stream", "batch", "key_min", "key_max", "rows_planned", "run",
                      "stream_filegroup", "filegroup", "compression", "ready_at")
            self._rows = [tuple(p[f] for f in fields) for p in sorted(self.planned, key=lambda p: p["stream"])
                          if p["table_name"] == params[1]]
        elif head.startswith("UPDATE [switchyard].[planned_partitions] SET ready_at"):
            for p in self.planned:
                if p["table_name"] == params[1] and p["staging_table"] == params[2] and not p["ready_at"]:
                    p["ready_at"] = "now"
        elif head.startswith("-- The tables of the target schema that Switchyard loaded"):
            self._rows = sorted({(name, p.batch) for name, parts in self.layouts.items() for p in parts if p.batch}
                                | {(b["table"], b["batch"]) for b in self.batches if "batch" in b})
        elif head.startswith("SELECT COUNT(*) FROM [switchyard].[partition_batches]"):
            self._rows = [(sum(1 for b in self.batches if b["table"] == params[1] and b["run"] == params[2]),)]
        elif head.startswith("-- publish: batch. The validated staging table"):
            staging, next_table = re.search(r"@objname = N'\[tpch_staging\]\.\[(\w+)\]', @newname = N'(\w+)'",
                                            sql).groups()
            self.staging.discard(staging)
            self.staging.add(next_table)
        elif re.search(r"^UPDATE STATISTICS \[tpch\]\.\[(\w+)\]$", sql, re.M):
            # After a publish: nothing of the run is pending any more.
            assert self.publishes and not self.planned, "statistics updated before the publish committed"
            self.statistics.append(re.search(r"^UPDATE STATISTICS \[tpch\]\.\[(\w+)\]$", sql, re.M)[1])
        elif head.startswith(HEAD):
            self.attempts += 1
            if self.attempts <= self.lock_timeouts:
                raise RuntimeError(*LOCK_TIMEOUT)
            self._commit(sql)
        else:
            raise AssertionError(f"not a statement of this step:\n{sql}")
        return self

    def _commit(self, sql: str) -> None:
        """What the publish's transaction leaves: staging tables gone, the run's rows recorded."""
        self.publishes.append(sql)
        for name in re.findall(r"DROP TABLE \[tpch_staging\]\.\[(\w+)\]", sql):
            self.staging.discard(name)
        for table, run in re.findall(r"INSERT INTO \[switchyard\]\.\[partition_batches\] .*?VALUES\s*\(N'tpch', "
                                     r"N'(\w+)', N'[^']*', N'[^']*', N'[^']*', N'([^']*)'", sql, re.S):
            self.batches.append({"table": table, "run": run})
        done = set(re.findall(r"DELETE FROM \[switchyard\]\.\[planned_partitions\] WHERE target_schema = N'tpch' "
                              r"AND table_name = N'(\w+)'", sql))
        self.planned = [p for p in self.planned if p["table_name"] not in done]

    def fetchall(self):
        return self._rows

    def fetchone(self):
        return self._rows[0] if self._rows else None


def scripted(a: MssqlAdapter, session: BatchSession) -> MssqlAdapter:
    from contextlib import contextmanager

    class Conn:
        def cursor(self):
            return session

    @contextmanager
    def connection(stream=None):
        yield Conn()
    a.connection = connection
    a.commit_pause = 0.0
    return a


def staged_run(lock_timeouts=0, skip=(), **options):
    """A run of batch 2026-04-05 over a target that holds batch 2026-04-04 (orders in 8 streams,
    lineitem's own append partitions): setup's plan, then every group's switch except `skip`
    ((table, stream) pairs, as a group that failed or was never switched)."""
    layouts = {"orders": layout_of({"2026-04-04": even(8)}), "lineitem": layout_of({"2026-04-04": even(2, 6001, 2000)})}
    a = adapter(**options)
    session = BatchSession(a, layouts, lock_timeouts)
    scripted(a, session)
    plan = batch_plan()
    for name in ("lineitem", "orders"):
        assert a._plan_table(session, plan.table(name)) == []
    for s in plan.all_streams():
        if (s.table, s.stream) in skip:
            continue
        if s.partitioned:
            result = a._stage(s)
        else:
            session.staging.add(s.staging_table)       # loaded and validated
            a.execute(a.switch_sql(s, replace_existing=True), s.stream)
            result = {"in_target": False}
        assert result["in_target"] is False
    return a, session, plan


def streams_of(plan):
    return [s for s in plan.all_streams()]


# --- each switch only stages ---------------------------------------------------------------------
def test_with_publish_batch_no_switch_commits_and_the_unpartitioned_table_is_staged_as_its_next_version():
    """SCRIPTED: every group of the batch switched; nothing went into the target."""
    a, session, plan = staged_run()
    assert not session.publishes
    assert {p["table_name"] for p in session.planned if p["ready_at"]} == {"orders", "lineitem"}
    assert all(p["ready_at"] for p in session.planned)
    assert "nation__next" in session.staging and "nation_1" not in session.staging
    stage = "\n".join(a.switch_sql(plan.stream("nation", 1), replace_existing=True))
    assert "TRUNCATE" not in stage and "[tpch].[nation]" not in stage.split("\nSET XACT_ABORT ON")[1]
    assert ("EXEC sys.sp_rename @objname = N'[tpch_staging].[nation_1]', @newname = N'nation__next', "
            "@objtype = N'OBJECT'") in stage
    # publish: table: today's switch, the table replaced whole at once.
    table_mode = adapter(changed(BATCH_SPEC, publish="table")).switch_sql(plan.stream("nation", 1), True)
    assert "TRUNCATE TABLE [tpch].[nation]" in "\n".join(table_mode)
    # setup drops a next version an earlier run left behind (publish: batch only), and so does the
    # group's prepare: a group run again from prepare would otherwise make its staging table's
    # constraints under the names the next version's still hold.
    assert any(s.endswith("\nDROP TABLE IF EXISTS [tpch_staging].[nation__next]") for s in a.setup_sql(plan))
    assert any(s.endswith("\nDROP TABLE IF EXISTS [tpch_staging].[nation__next]")
               for s in a.prepare_sql(plan.stream("nation", 1)))
    assert not any("nation__next" in s for s in adapter(changed(BATCH_SPEC, publish="table")).prepare_sql(
        plan.stream("nation", 1)))
    assert not any("nation__next" in s for s in adapter(changed(BATCH_SPEC, publish="table")).setup_sql(plan))


@pytest.mark.parametrize("dependency, expected", [
    (("fk_in", "FK_customer_nation", "[tpch].[customer]", 0),
     "tpch.nation is referenced by foreign key FK_customer_nation of [tpch].[customer]: TRUNCATE TABLE refuses"),
    (("indexed_view", "[tpch].[v_nations]", None, 0), "tpch.nation is in the indexed view [tpch].[v_nations]"),
    (("cdc", "nation", None, 0), "tpch.nation: change data capture tracks it"),
    (("replication", "nation", None, 0), "tpch.nation is published or subscribed for replication"),
    (("temporal", "nation", "SYSTEM_VERSIONED_TEMPORAL_TABLE", 2), "tpch.nation is system-versioned"),
    (("ledger", "ledger_transaction_id", None, 0), "tpch.nation is a ledger table"),
    (("read_only", "FG_ARCHIVE", None, 0), "tpch.nation: filegroup FG_ARCHIVE, which holds partitions of it")])
def test_an_unpartitioned_table_that_truncate_would_refuse_is_refused_at_the_pre_flight(dependency, expected):
    """SCRIPTED: the replace of an unpartitioned table empties it with TRUNCATE TABLE, which the
    dependency refuses; the pre-flight says so before any load."""
    layouts = {"orders": layout_of({"2026-04-04": even(8)}), "lineitem": layout_of({"2026-04-04": even(2, 6001, 2000)})}
    a = adapter()
    session = BatchSession(a, layouts, dependencies={"nation": [dependency]})
    with pytest.raises(TargetError) as refused:
        a.preflight(session, batch_plan())
    assert refused.value.permanent and expected in str(refused.value), str(refused.value)
    assert "tpch.orders" not in str(refused.value) and "tpch.lineitem" not in str(refused.value)


def test_an_append_table_without_rows_in_the_batch_is_refused_unless_its_spec_allows_it():
    """SCRIPTED: lineitem (append) has no rows in batch 2026-04-05. Refused as an incomplete batch,
    naming allow_empty; with allow_empty: true the batch adds nothing to it, unless the table holds
    batch 2026-04-05 already: its partitions would stay, the batch no longer having their rows."""
    plan = batch_plan(lineitem_rows=0)
    earlier = {"orders": layout_of({"2026-04-04": even(8)}), "lineitem": layout_of({"2026-04-04": even(2, 6001, 2000)})}
    a = adapter()
    with pytest.raises(TargetError) as refused:
        a.preflight(BatchSession(a, earlier), plan)
    assert ("tpch.lineitem: every stream of the table is empty in batch 2026-04-05; in append mode that would add "
            "nothing. If that is meant, declare allow_empty: true on the table") in str(refused.value)
    allowed = changed(BATCH_SPEC, tables=tuple(changed(t, allow_empty=True) if t.name == "lineitem" else t
                                               for t in BATCH_SPEC.tables))
    plan = batch_plan(allowed, lineitem_rows=0)
    a = adapter(allowed)
    notes = a.preflight(BatchSession(a, earlier), plan)
    assert ("tpch.lineitem: every stream of the table is empty in batch 2026-04-05: it adds nothing "
            "(allow_empty: true)") in notes
    again = {**earlier, "lineitem": layout_of({"2026-04-05": even(2, 6001, 2000)})}
    with pytest.raises(TargetError) as refused:
        a.preflight(BatchSession(a, again), plan)
    assert ("tpch.lineitem: batch 2026-04-05 is in the table already (2 partitions), and this delivery of it has no "
            "rows of the table") in str(refused.value), str(refused.value)


def test_a_replace_table_holding_an_append_tables_batches_is_refused_unless_sync():
    """SCRIPTED: orders (replace) holds three batches, an append table's history: this batch would
    replace them all. Refused, unless the table's on_spec_change is sync."""
    history = layout_of({"2026-04-01": even(2, 1, 2000), "2026-04-02": even(2, 4001, 2000),
                         "2026-04-03": even(2, 8001, 2000)})
    layouts = {"orders": history, "lineitem": layout_of({"2026-04-04": even(2, 6001, 2000)})}
    a = adapter()
    with pytest.raises(TargetError) as refused:
        a.preflight(BatchSession(a, layouts), batch_plan(orders=even(4, 12001)))
    assert ("tpch.orders: holds 3 batches (2026-04-01, 2026-04-02, 2026-04-03), as a table in append mode does; the "
            "spec says mode: replace") in str(refused.value), str(refused.value)
    synced = changed(BATCH_SPEC, tables=tuple(changed(t, on_spec_change="sync") if t.name == "orders" else t
                                              for t in BATCH_SPEC.tables))
    a = adapter(synced)
    notes = a.preflight(BatchSession(a, layouts), batch_plan(synced, orders=even(4, 12001)))
    assert ("tpch.orders: holds 3 batches (2026-04-01, 2026-04-02, 2026-04-03); in replace mode this batch replaces "
            "all of them (on_spec_change: sync)") in notes


def test_an_empty_lookup_is_refused_while_the_table_holds_rows_and_taken_once_it_was_emptied():
    """SCRIPTED: nation's one stream has no rows in this batch: loading it would empty the table,
    which holds 25 rows (sys.partitions): refused before any load, naming the way on. The table
    emptied on purpose (the refusal's way on), the same batch passes the pre-flight, and its
    publish replaces the table with its stream's 0 rows, checked against the manifest."""
    layouts = {"orders": layout_of({"2026-04-04": even(8)}), "lineitem": layout_of({"2026-04-04": even(2, 6001, 2000)})}
    plan = batch_plan(nation_rows=0)
    a = adapter()
    with pytest.raises(TargetError) as refused:
        a.preflight(BatchSession(a, layouts), plan)
    assert ("tpch.nation: its one stream is empty in this batch (0 rows); loading it would empty the table. If that "
            "is meant, truncate the table yourself") in str(refused.value), str(refused.value)
    emptied = BatchSession(a, layouts, lookup_rows=0)
    a.preflight(emptied, plan)
    scripted(a, emptied)
    for name in ("lineitem", "orders"):
        assert a._plan_table(emptied, plan.table(name)) == []
    for s in plan.all_streams():
        if s.partitioned:
            a._stage(s)
        else:
            emptied.staging.add(s.staging_table)       # loaded (0 rows) and validated
            a.execute(a.switch_sql(s, replace_existing=True), s.stream)
    assert a.publish_batch(streams_of(plan))["by_table"]["nation"] == {"table_switched": True, "rows": 0}
    (text,) = emptied.publishes
    assert "ALTER TABLE [tpch_staging].[nation__next] SWITCH TO [tpch].[nation]\n" in text
    assert ("IF (SELECT COUNT_BIG(*) FROM [tpch_staging].[nation__next] WITH (TABLOCKX, HOLDLOCK)) <> 0 THROW 51012"
            in text)


# --- the publish ----------------------------------------------------------------------------------
def test_the_batch_goes_in_in_one_transaction_the_partitioned_tables_first_in_name_order():
    """SCRIPTED: one transaction for lineitem (append), nation (replaced whole) and orders (replace,
    8 streams before, 4 now), each table's window planned from the catalog now."""
    a, session, plan = staged_run()
    result = a.publish_batch(streams_of(plan))
    assert result["tables"] == ["lineitem", "nation", "orders"] and result["already_published"] is False
    assert set(result) >= {"tables", "already_published", "lock_seconds", "seconds", "by_table"}
    assert result["by_table"]["orders"]["partitions_in"] == 4 and len(result["by_table"]["orders"]["removed"]) == 8
    assert result["by_table"]["lineitem"]["partitions_in"] == 2 and result["by_table"]["lineitem"]["removed"] == []
    assert result["by_table"]["nation"] == {"table_switched": True, "rows": 25}
    (text,) = session.publishes
    check_golden("publish_batch_lineitem_nation_orders.sql", text + ";\nGO\n")
    # One transaction, under the commit's short lock wait; the partitioned tables in name order,
    # then the unpartitioned one.
    assert text.count("BEGIN TRANSACTION") == 1 and text.count("COMMIT TRANSACTION") == 1
    assert "SET XACT_ABORT ON\nSET LOCK_TIMEOUT 1000\n" in text
    assert (text.index("SWITCH TO [tpch].[lineitem]") < text.index("TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS")
            < text.index("ALTER TABLE [tpch].[nation] SWITCH TO [tpch_staging].[nation__old]\n"))
    # orders: 8 old partitions emptied, empty ranges merged and split, 4 switched in.
    assert text.count("TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS") == 8
    assert text.count("SWITCH TO [tpch].[orders] PARTITION @partition") == 4
    assert text.count("SWITCH TO [tpch].[lineitem] PARTITION @partition") == 2
    # nation (replaced whole): its next version counted before any table is taken, then switched
    # in by metadata only, its rows never copied under the table's lock.
    count = "IF (SELECT COUNT_BIG(*) FROM [tpch_staging].[nation__next] WITH (TABLOCKX, HOLDLOCK)) <> 25 THROW 51012"
    assert text.index(count) < text.index("ALTER TABLE [tpch].[lineitem]")
    # The empty table nation's rows go to is made before the first table is taken, so no reader of
    # lineitem or orders waits for its DDL.
    assert (text.index("CREATE TABLE [tpch_staging].[nation__old]") < text.index("ALTER TABLE [tpch].[lineitem]")
            < text.index("ALTER TABLE [tpch].[nation] SWITCH TO [tpch_staging].[nation__old]"))
    assert "TRUNCATE TABLE [tpch].[nation]" not in text and "INSERT INTO [tpch].[nation]" not in text
    assert "ALTER TABLE [tpch_staging].[nation__next] SWITCH TO [tpch].[nation]\n" in text
    # The control rows go with the tables: each table's batch, this run's plan done.
    for name in TABLES:
        assert "INSERT INTO [switchyard].[partition_batches]" in text and f"N'tpch', N'{name}'" in text
    assert not session.planned and not session.staging
    # After the COMMIT, the statistics of the table switched in whole (they still describe the
    # rows switched out), once; the partitioned tables' are the DBA's (docs/sql-server.md).
    assert session.statistics == ["nation"]
    # The same steps as a table's own commit (publish: table), from the same template.
    own = adapter(changed(BATCH_SPEC, publish="table"))
    own_session = BatchSession(own, session.layouts)
    target = own.read_target(own_session, "orders")
    (commit,) = own.commit_sql(plan.table("orders"), target=target, batch="2026-04-05", run="switchyard_tpch/run-2")
    steps = commit.split("    BEGIN TRANSACTION\n", 1)[1].split("    COMMIT TRANSACTION\n")[0]
    # ... but for its first lock: its own commit takes it at low priority (an empty partition
    # switched out, its probe table dropped); in the publish orders is not the first table, and
    # its switches ask at normal priority, under the short LOCK_TIMEOUT, not holding lineitem
    # while they wait at low priority.
    lock, rest = steps.split("    DROP TABLE [tpch_staging].[orders__lock]\n")
    wait = "\n        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))"
    assert "SWITCH PARTITION @partition TO [tpch_staging].[orders__lock]" in lock and wait in rest
    assert rest.replace(wait, "") in text
    orders = text[text.index("-- tpch.orders"):]
    assert "SWITCH TO [tpch].[orders] PARTITION @partition\n" in orders and "WAIT_AT_LOW_PRIORITY" not in orders
    assert "orders__lock" not in text
    # lineitem, the transaction's first table, begins with SPLIT: it is taken by such a switch first.
    first = text.index("BEGIN TRANSACTION")
    assert (text.index("ALTER TABLE [tpch].[lineitem] SWITCH PARTITION @partition TO [tpch_staging].[lineitem__lock]\n"
                       "        WITH (WAIT_AT_LOW_PRIORITY", first)
            < text.index("DROP TABLE [tpch_staging].[lineitem__lock]", first)
            < text.index("ALTER PARTITION SCHEME [ps_tpch_lineitem] NEXT USED", first))


def test_an_unpartitioned_table_goes_after_a_partitioned_one_which_takes_its_lock_at_low_priority():
    """SCRIPTED: nation (unpartitioned) sorts before orders by name. In the publish orders comes
    first and is taken at low priority (an empty partition switched out to its probe table), and
    nation's SWITCH out asks for its lock only after it, at normal priority under the short
    LOCK_TIMEOUT (a low-priority wait would hold orders): the same order whether nation is
    switched in or, where SWITCH cannot take it, replaced by TRUNCATE TABLE, which cannot wait at
    low priority at all."""
    a, session, plan = staged_run()
    result = a.publish_batch([s for s in streams_of(plan) if s.table != "lineitem"])
    assert result["tables"] == ["nation", "orders"]
    (text,) = session.publishes
    first = text.index("BEGIN TRANSACTION")
    assert (text.index("ALTER TABLE [tpch].[orders] SWITCH PARTITION @partition TO [tpch_staging].[orders__lock]\n"
                       "        WITH (WAIT_AT_LOW_PRIORITY", first)
            < text.index("TRUNCATE TABLE [tpch].[orders] WITH (PARTITIONS", first)
            < text.index("ALTER TABLE [tpch].[nation] SWITCH TO [tpch_staging].[nation__old]\n    --", first))
    assert "WAIT_AT_LOW_PRIORITY" not in text[text.index("-- tpch.nation (unpartitioned"):]


def test_the_publish_refuses_changing_nothing_when_a_stream_was_not_switched():
    """SCRIPTED: orders stream 3 and nation's group never switched (a switch marked success by
    hand, a group cleared half-way): the publish names both with their rows and runs nothing."""
    a, session, plan = staged_run(skip={("orders", 3), ("nation", 1)})
    before = [dict(p) for p in session.planned]
    sent = len(session.sent)
    with pytest.raises(TargetError) as refused:
        a.publish_batch(streams_of(plan))
    assert refused.value.permanent is True
    assert str(refused.value) == (
        "publish of batch 2026-04-05 refused; no table of the batch was published, every table keeps its previous "
        "contents:\n"
        "- tpch.nation: its stream (25 rows in the manifest) was not validated and switched in this run\n"
        "- tpch.orders: stream 3 (100 rows in the manifest) was not validated and switched in this run")
    assert session.attempts == 0 and not session.publishes and session.planned == before
    # Only reads (and the commit locks) were sent: nothing changed.
    assert all(re.match(r"(--[^\n]*\n)*(SELECT|DECLARE @lock)", sql) for sql, _ in session.sent[sent:])


def test_a_retry_after_a_committed_publish_reports_it_published():
    """SCRIPTED: the publish committed but its task died before Airflow heard of it; the retry
    finds nothing ready or pending of this run and this run's rows in partition_batches."""
    a, session, plan = staged_run()
    a.publish_batch(streams_of(plan))
    again = a.publish_batch(streams_of(plan))
    assert again["already_published"] is True and again["tables"] == ["lineitem", "nation", "orders"]
    assert len(session.publishes) == 1 and session.attempts == 1
    # Another run's publish of the same tables is not this run's: refused, naming what is missing.
    other = scripted(adapter(run="switchyard_tpch/run-3", batch="2026-04-06"), session)
    with pytest.raises(TargetError, match=r"tpch.orders: nothing of this run is pending"):
        other.publish_batch(streams_of(plan))


def test_a_publish_that_timed_out_on_a_lock_runs_the_whole_transaction_again():
    """SCRIPTED: the transaction fails with SQL Server's lock time-out (1222) three times (each
    time rolled back whole), then commits."""
    a, session, plan = staged_run(lock_timeouts=3)
    result = a.publish_batch(streams_of(plan))
    assert result["already_published"] is False and session.attempts == 4 and len(session.publishes) == 1
    sent = [sql for sql, _ in session.sent if sql.startswith(HEAD)]
    assert len(sent) == 4 and len(set(sent)) == 1      # the same whole transaction each time


def test_a_publish_that_keeps_timing_out_gives_up_retryable_with_nothing_published():
    a, session, plan = staged_run(lock_timeouts=100, commit_attempts=5)
    with pytest.raises(TargetError) as failed:
        a.publish_batch(streams_of(plan))
    assert failed.value.permanent is False
    assert str(failed.value) == ("publish of batch 2026-04-05 into tpch: 5 attempts each waited 1000 ms for a lock on "
                                 "one of lineitem, nation, orders (a long-running reader holds it); nothing was "
                                 "published, retry later")
    assert session.attempts == 5 and not session.publishes and all(p["ready_at"] for p in session.planned)


def test_another_error_is_not_retried_and_nothing_is_published():
    a, session, plan = staged_run()
    original = session.execute

    def failing(sql, *params):
        if sql.startswith(HEAD):
            session.attempts += 1
            raise RuntimeError("42000", "[42000] [SQL Server]tpch.orders: its partitions changed since this commit "
                                        "was planned; nothing was changed (51010) (SQLExecDirectW)")
        return original(sql, *params)
    session.execute = failing
    with pytest.raises(TargetError, match=r"publish of batch 2026-04-05 into tpch failed: .*\(51010\).*; nothing was "
                                          r"published"):
        a.publish_batch(streams_of(plan))
    assert session.attempts == 1 and not session.publishes


# --- the plan script and the T-SQL ------------------------------------------------------------------
def test_the_plan_script_shows_the_batch_commit_as_one_transaction():
    plan = batch_plan()
    # Fixed data roots: the script names each file by its path, which must not be this checkout's.
    roots = dict(local_data_root="/srv/switchyard/data", server_data_root="/var/opt/mssql/switchyard")
    text = MssqlAdapter(BATCH_SPEC, base_port=2000, port_count=4, **roots).script(plan)
    check_golden("lineitem_nation_orders_batch_plan.sql", text)
    tail = text.split("\n-- publish_batch: ", 1)[1]
    assert tail.count("BEGIN TRANSACTION") == 1 and "-- lineitem: its last switch" not in text
    assert "-- tpch: batch batch goes in whole: lineitem, orders, nation, every table in one" in tail
    # publish: table: each table's own commit at its last switch, as before.
    own = MssqlAdapter(changed(BATCH_SPEC, publish="table"), base_port=2000, port_count=4, **roots).script(plan)
    assert "-- publish_batch" not in own and own.count("its last switch moves the batch in whole") == 2


def test_every_statement_of_the_batch_publish_parses_as_tsql():
    a, session, plan = staged_run()
    a.publish_batch(streams_of(plan))
    statements = [*session.publishes, *adapter().publish_sql(plan), *a.switch_sql(plan.stream("nation", 1), True),
                  *[s for s in a.setup_sql(plan) if "nation__next" in s]]
    # sqlfluff's grammar takes SWITCH ... PARTITION only with a literal (ours is a variable set
    # from $PARTITION) and lacks TRUNCATE TABLE ... WITH (PARTITIONS (n)) (SQL Server 2016+): for
    # those the rest of the statement is checked with a literal, and without the clause.
    stand_ins = [(r"PARTITION @partition\b", "PARTITION 2"), (r" WITH \(PARTITIONS \(\d+\)\)", "")]
    failed = []
    for statement in statements:
        for pattern, literal in stand_ins:
            statement = re.sub(pattern, literal, statement)
        if not sqlfluff_parses(statement):
            failed.append(statement)
    assert len(statements) == 4 and not failed, "not T-SQL by sqlfluff:\n\n" + "\n\n".join(failed)


# --- a user's own lookups: a text key, and no key ---------------------------------------------------
def own_spec():
    """The spec of docs/first-own-load.md, as a user writes it: `stations` keyed by a text code,
    `payment_types` without a key, both loaded whole."""
    from pathlib import Path
    import tempfile
    doc = (Path(__file__).resolve().parents[4] / "docs" / "first-own-load.md").read_text(encoding="utf-8")
    text = re.search(r"```yaml\n(.*?)```", doc, re.S)[1]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "trips.yaml"
        path.write_text(text, encoding="utf-8")
        return load_spec(str(path))


def lookups_plan(spec):
    entries = (ManifestEntry("stations", 1, "stations/stations.1.csv", 120, 3, None, None),
               ManifestEntry("payment_types", 1, "payment_types/payment_types.1.csv", 80, 2, None, None))
    return plan_batch(spec, Manifest(spec="trips", streams=1, entries=entries), ["stations", "payment_types"])


def test_lookups_with_a_text_key_or_none_pass_the_pre_flight_and_go_in_whole():
    """SCRIPTED: the documented own spec's lookups on SQL Server: the pre-flight reads them
    (new, then as setup made them), their switches stage them and the publish replaces each whole."""
    spec = own_spec()
    assert spec.table("stations").key == "code" and spec.table("payment_types").key is None
    a = adapter(spec, batch="2026-01-01", run="switchyard_trips/run-1")
    plan = lookups_plan(spec)
    new = BatchSession(a, {}, absent=("stations", "payment_types"))
    notes = a.preflight(new, plan)
    assert "tpch.stations: new table; setup creates it" in notes and "tpch.payment_types: new table; setup creates it" in notes
    session = BatchSession(a, {})
    assert a.preflight(session, plan) == []
    scripted(a, session)
    for s in plan.all_streams():
        session.staging.add(s.staging_table)       # loaded and validated
        a.execute(a.switch_sql(s, replace_existing=True), s.stream)
    result = a.publish_batch(streams_of(plan))
    assert result["by_table"] == {"payment_types": {"table_switched": True, "rows": 2},
                                  "stations": {"table_switched": True, "rows": 3}}
    (text,) = session.publishes
    for name, rows in (("stations", 3), ("payment_types", 2)):
        assert f"ALTER TABLE [tpch_staging].[{name}__next] SWITCH TO [tpch].[{name}]\n" in text
        assert f"FROM [tpch_staging].[{name}__next] WITH (TABLOCKX, HOLDLOCK)) <> {rows} THROW" in text


def test_a_lookup_the_target_holds_partitioned_is_refused_naming_it():
    """SCRIPTED: `stations` (the spec loads it whole, keyed by text) is partitioned in the
    database, with rows recorded in partition_batches: refused before any load, naming the table."""
    spec = own_spec()
    a = adapter(spec, batch="2026-01-01", run="switchyard_trips/run-1")
    partitioned = ("PS", "ps_tpch_stations", 65700, "pf_tpch_stations", 0, 3, "int", 4, 10, 0, "id")
    session = BatchSession(a, {}, table_rows={"stations": partitioned})
    with pytest.raises(TargetError) as refused:
        a.preflight(session, lookups_plan(spec))
    text = str(refused.value)
    assert refused.value.permanent and "tpch.stations is partitioned, the spec declares it partitioned: false" in text
    assert "payment_types" not in text


def test_a_compression_changed_in_the_control_table_never_reaches_a_statement():
    """SCRIPTED: planned_partitions keeps each stream's data compression as JSON, and a staging
    index's DATA_COMPRESSION takes no parameter: a value read back is checked again, and anything
    but NONE, ROW or PAGE stops the step, naming the row, before a statement is built from it."""
    a, session, plan = staged_run()
    planned = next(p for p in session.planned if p["table_name"] == "orders")
    planned["compression"] = '[["(heap)", "NONE) ON [PRIMARY]; DROP TABLE [tpch].[orders]; --"]]'
    sent = len(session.sent)
    with pytest.raises(TargetError) as refused:
        a.planned(session, "orders")
    assert refused.value.permanent
    assert f"[switchyard].[planned_partitions], staging table {planned['staging_table']}: data compression" in str(
        refused.value)
    assert len(session.sent) == sent + 1 and session.sent[-1][0].startswith("SELECT")


def test_a_split_gives_every_scheme_of_the_function_its_next_used_filegroup():
    """SCRIPTED: lineitem has an index on a second scheme of its own function (aligned, on the
    same filegroups: the pre-flight takes it). A SPLIT needs a NEXT USED filegroup in every scheme
    of the function (it fails otherwise): the publish sets the new partition's filegroup in both,
    the table's scheme first, before each SPLIT."""
    a, session, plan = staged_run()
    answer = session._catalog
    lineitem_function = session.function_ids["lineitem"]
    session._catalog = lambda kind, params: (
        [("ps_tpch_lineitem",), ("ps_tpch_lineitem_ix",)] if kind == "schemes" and params[0] == lineitem_function
        else answer(kind, params))
    a.publish_batch(streams_of(plan))
    (text,) = session.publishes
    splits = re.findall(r"    ALTER PARTITION SCHEME \[ps_tpch_lineitem\] NEXT USED \[(\w+)\]\n"
                        r"    ALTER PARTITION SCHEME \[ps_tpch_lineitem_ix\] NEXT USED \[(\w+)\]\n"
                        r"    ALTER PARTITION FUNCTION \[pf_tpch_lineitem\]\(\) SPLIT RANGE", text)
    assert splits == [("fg1", "fg1"), ("fg2", "fg2")]
    # orders' function has its own scheme only: its SPLITs set that one.
    assert text.count("ALTER PARTITION SCHEME [ps_tpch_orders] NEXT USED") == text.count(
        "ALTER PARTITION FUNCTION [pf_tpch_orders]() SPLIT") > 0
    # The stand-ins of the parse test below: a literal partition, no WITH (PARTITIONS (n)).
    assert sqlfluff_parses(re.sub(r" WITH \(PARTITIONS \(\d+\)\)", "", re.sub(r"PARTITION @partition\b", "PARTITION 2",
                                                                             text)))


# --- a table loaded whole: switched in, or its rows copied where SWITCH cannot take it -------------
NATION_PK = [(1, "PK_nation", "CLUSTERED", 1, 1, 0, 0, 0, None, 1, "n_nationkey", 1, 0, 0),
             (2, "IX_nation_name", "NONCLUSTERED", 0, 0, 0, 0, 0, None, 1, "n_name", 1, 0, 0)]


class PrepareBatchSession(BatchSession):
    """BatchSession that also takes a prepare and a validate: their own statements recorded, not run."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.prepared: list[str] = []

    def execute(self, sql, *params):
        try:
            return super().execute(sql, *params)
        except AssertionError:  # a statement of the prepare or of an index build
            self.prepared.append(sql)
            self._rows = []
            return self


def test_a_table_loaded_whole_is_made_to_its_shape_and_switched_in_its_readers_waiting_for_no_copy():
    """SCRIPTED: nation, with a DBA's clustered primary key, a nonclustered index (PAGE) and a CHECK
    constraint: prepare makes its staging table on the table's filegroup with the table's columns
    and the CHECK, validate builds the table's indexes there, and the table's own switch
    (publish: table) moves it in by SWITCH in one transaction, the table taken at low priority by
    switching its rows out to an empty table of its shape. No row is copied under its lock."""
    pytest.importorskip("pyodbc", reason="prepare reads pyodbc's errors: needs unixODBC (libodbc.so.2)",
                        exc_type=ImportError)
    check = ("check", "CK_nation_region", "([n_regionkey]>=(0))", 0)
    a = adapter(changed(BATCH_SPEC, publish="table"))
    session = PrepareBatchSession(a, {"orders": layout_of({"x": even(4)}), "lineitem": layout_of({"x": even(2)})},
                                  dependencies={"nation": [check]}, lookup_indexes={"nation": NATION_PK})
    scripted(a, session)
    plan = batch_plan()
    assert not [n for n in a.preflight(session, plan) if "tpch.nation: replaced by TRUNCATE" in n]
    s = plan.stream("nation", 1)
    a.create_staging(s)
    prepared = "\n".join(session.prepared)
    assert ") ON [PRIMARY]" in prepared and "[fg1]" not in prepared and "[n_name] char(25) COLLATE SQL_Latin1_General_CP1_CI_AS NOT NULL" in prepared
    assert ("ALTER TABLE [tpch_staging].[nation_1] WITH CHECK\n    ADD CONSTRAINT [nation_1__CK_nation_region] "
            "CHECK ([n_regionkey]>=(0))") in prepared
    assert "_range" not in prepared
    session.prepared.clear()
    session.staging.add(s.staging_table)      # loaded
    assert [f["index"] for f in a.prove_target_uniques(s)] == ["tpch.PK_nation"]
    built = "\n".join(session.prepared)
    assert ("ALTER TABLE [tpch_staging].[nation_1] ADD CONSTRAINT [nation_1__PK_nation] PRIMARY KEY CLUSTERED "
            "([n_nationkey]) WITH (DATA_COMPRESSION = NONE, SORT_IN_TEMPDB = ON") in built
    assert ("CREATE NONCLUSTERED INDEX [IX_nation_name] ON [tpch_staging].[nation_1] ([n_name]) WITH "
            "(DATA_COMPRESSION = PAGE") in built
    statements = a.switch_sql(s, True, target=a.swap_target(session, "nation"))
    body = "\n".join(statements)
    assert "TRUNCATE" not in body and "INSERT" not in body and "IDENTITY_INSERT" not in body
    old = body.index("CREATE TABLE [tpch_staging].[nation__old]")
    out = body.index("ALTER TABLE [tpch].[nation] SWITCH TO [tpch_staging].[nation__old]\n"
                     "        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))")
    into = body.index("ALTER TABLE [tpch_staging].[nation_1] SWITCH TO [tpch].[nation]\n")
    assert (body.index("BEGIN TRANSACTION") < old < body.index("ADD CONSTRAINT [nation__old__PK_nation] PRIMARY KEY "
                                                               "CLUSTERED ([n_nationkey]) WITH (DATA_COMPRESSION = NONE)")
            < body.index("CREATE NONCLUSTERED INDEX [IX_nation_name] ON [tpch_staging].[nation__old] ([n_name]) WITH "
                         "(DATA_COMPRESSION = PAGE) ON [PRIMARY]")
            < out < into < body.index("DROP TABLE [tpch_staging].[nation__old]")
            < body.index("DROP TABLE [tpch_staging].[nation_1]") < body.index("COMMIT TRANSACTION"))
    assert sqlfluff_parses(body)


@pytest.mark.parametrize("dependency, why", [
    (("fk_out", "FK_nation_region", "[tpch].[region]", 0), "foreign key FK_nation_region (to [tpch].[region])"),
    (("check", "CK_nation_name", "(len([n_name])>(0))", 0), "CHECK constraint CK_nation_name is not one Switchyard copies"),
    (("lob_filegroup", "FG_LOB", None, 0), "its large values are on filegroup FG_LOB, apart from its rows"),
    (("table_option", "text in row", None, 0), "its table option 'text in row' is ON")])
def test_a_table_switch_cannot_take_has_its_rows_copied_and_the_pre_flight_says_why(dependency, why):
    """SCRIPTED: what SWITCH needs the same on both tables and Switchyard does not build on its
    staging table: the table loaded whole is replaced by TRUNCATE TABLE and INSERT ... SELECT
    (its readers wait for the copy), as the pre-flight says, never refused for it."""
    layouts = {"orders": layout_of({"2026-04-04": even(8)}), "lineitem": layout_of({"2026-04-04": even(2, 6001, 2000)})}
    a = adapter()
    session = BatchSession(a, layouts, dependencies={"nation": [dependency]})
    scripted(a, session)
    plan = batch_plan()
    notes = a.preflight(session, plan)
    assert (f"tpch.nation: replaced by TRUNCATE TABLE and INSERT ... SELECT, not by SWITCH: {why}" in "\n".join(notes)
            and "Its readers wait while its rows are copied" in "\n".join(notes)), notes
    assert a.swap_target(session, "nation") is None
    for name in ("lineitem", "orders"):
        a._plan_table(session, plan.table(name))
    for s in plan.all_streams():
        if s.partitioned:
            a._stage(s)
        else:
            session.staging.add(s.staging_table)
            a.execute(a.switch_sql(s, replace_existing=True), s.stream)
    a.publish_batch(streams_of(plan))
    (text,) = session.publishes
    assert "TRUNCATE TABLE [tpch].[nation]\n" in text and "IF @@ROWCOUNT <> 25 THROW 51012" in text
    assert "nation__old" not in text and "COUNT_BIG(*) FROM [tpch_staging].[nation__next]" not in text
    assert session.statistics == []     # an INSERT counts its rows for the automatic update


def test_a_table_with_an_identity_column_keeps_the_copy_which_moves_its_identity_value_up():
    """SCRIPTED: SWITCH ignores IDENTITY: the table's identity value would stay where it was,
    below the file's values, and the next INSERT would reuse them. Such a table keeps the copy,
    whose IDENTITY_INSERT moves it up, and the pre-flight says why."""
    layouts = {"orders": layout_of({"2026-04-04": even(8)}), "lineitem": layout_of({"2026-04-04": even(2, 6001, 2000)})}
    a = adapter()
    session = BatchSession(a, layouts)
    rows = column_rows(a.spec.table("nation"))
    identity = [(*rows[0][:8], 1, None), *rows[1:]]
    session._catalog = (lambda kind, params, plain=session._catalog:
                        identity if kind == "columns" and params[0] == "[tpch].[nation]" else plain(kind, params))
    notes = a.preflight(session, batch_plan())
    assert ("tpch.nation: replaced by TRUNCATE TABLE and INSERT ... SELECT, not by SWITCH: column n_nationkey has "
            "the IDENTITY property (SWITCH would leave the table's identity value below the file's values)") in \
        "\n".join(notes), notes
    assert a.swap_target(session, "nation") is None


@pytest.mark.parametrize("changed_since", ["staged on another filegroup", "the table's index added since"])
def test_a_next_version_not_made_to_the_tables_shape_as_it_is_now_has_its_rows_copied(changed_since):
    """SCRIPTED: prepare decided on the table as it was then. A next version made another way (by
    a prepare that chose the copy, on the stream's filegroup from the spec) or a table a DBA gave
    an index after the index build: SWITCH would fail, so the publish copies its rows instead."""
    a, session, plan = staged_run()
    if changed_since == "staged on another filegroup":
        session.staging_filegroup = "fg1"
    else:
        session.lookup_indexes = {"nation": NATION_PK}
    a.publish_batch(streams_of(plan))
    (text,) = session.publishes
    assert "TRUNCATE TABLE [tpch].[nation]\n" in text and "IF @@ROWCOUNT <> 25 THROW 51012" in text
    assert "nation__old" not in text and session.statistics == []
    # Made to the shape, with the table's index built on it: switched in.
    again, session, plan = staged_run()
    session.lookup_indexes, session.staging_indexes = {"nation": NATION_PK}, True
    again.publish_batch(streams_of(plan))
    assert "ALTER TABLE [tpch_staging].[nation__next] SWITCH TO [tpch].[nation]\n" in session.publishes[0]
