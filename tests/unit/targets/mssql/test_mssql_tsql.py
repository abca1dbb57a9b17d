"""The SQL Server target without a server: its T-SQL, checked statement by statement.

Also the docker-compose file, validated. Golden files hold the complete script of a small configuration; regenerate them after an
intended change with `SWITCHYARD_UPDATE_GOLDEN=1 pytest tests/unit/targets/mssql/test_mssql_tsql.py` and
review the diff. Every generated statement goes through sqlfluff's T-SQL grammar; the
numbers are checked against the TPC-H key rules in switchyard.core.tpch.
"""
from __future__ import annotations

import functools
import os
import re
import time
from dataclasses import replace
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from switchyard.core import tpch
from switchyard.core.planner import plan_tpch
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError, adapter_class
from switchyard.targets.mssql import FileRows, MssqlAdapter, converter, parse_uri, plan_script, stats_delta

SPEC = load_spec("tpch")
GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "mssql"
UPDATE = os.environ.get("SWITCHYARD_UPDATE_GOLDEN") == "1"
LOCAL_ROOT = "/srv/switchyard/data"
SERVER_ROOT = "/var/opt/mssql/switchyard"


def adapter(spec=SPEC, **options) -> MssqlAdapter:
    base = dict(local_data_root=LOCAL_ROOT, server_data_root=SERVER_ROOT, base_port=2000, port_count=3,
                files_per_filegroup=2, file_dirs=["/mnt/v1", "/mnt/v2"], batch_size=100_000)
    base.update(options)
    return MssqlAdapter(spec, **base)


def small_plan():
    return plan_tpch(SPEC, 0.01, 3, tables=["orders", "lineitem"])


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"{path} is missing; create it with SWITCHYARD_UPDATE_GOLDEN=1 and review it")
        path.write_text(text)
    assert text == path.read_text(), f"{path} differs; if intended, regenerate with SWITCHYARD_UPDATE_GOLDEN=1"


# --- golden files ---------------------------------------------------------------------------
def table_adapter(**options) -> MssqlAdapter:
    """`publish: table`: each table goes in at its last switch, in its own commit."""
    return adapter(replace(SPEC, publish="table"), **options)


def test_script_matches_golden_bulk_insert():
    check_golden("orders_lineitem_s3_bulk_insert.sql", table_adapter().script(small_plan()))


def test_script_matches_golden_tds():
    check_golden("orders_lineitem_s3_tds.sql", table_adapter(load_mode="tds").script(small_plan()))


def test_lease_and_switch_retry_match_golden():
    """The run lease's claim and release (values are parameters), the hand-run release the
    LeaseHeld message prints, and the check a retried switch makes."""
    a = adapter()
    s = small_plan().stream("orders", 2)
    statements = [*a.render("lease_claim.sql"), *a.render("lease_release.sql", schema_literal=None),
                  *a.render("lease_release.sql", schema_literal=a.schema), *a.switched_in_sql(s)]
    check_golden("lease_and_switch_retry.sql", "\n".join(stmt + ";\nGO" for stmt in statements) + "\n")


def test_lease_held_names_the_holder_and_the_t_sql_to_free_it():
    """The shared lease check (targets/base.py) on the SQL Server adapter: the claim's row
    (naive UTC times from datetime2) decides; the hand-run release is T-SQL."""
    from datetime import datetime
    from switchyard.targets import LeaseHeld
    a = adapter(lease_holder="switchyard_tpch/run-b", lease_batch="2026-01-02")
    row = ("switchyard_tpch/run-a", "2026-01-01", datetime(2026, 1, 1, 2, 0, 5), datetime(2026, 1, 1, 2, 30, 5))
    with pytest.raises(LeaseHeld) as held:
        a.check_lease(row)
    assert held.value.permanent is False
    assert str(held.value) == (
        "target schema tpch is being loaded by run switchyard_tpch/run-a (batch 2026-01-01, since "
        "2026-01-01 02:00:05 UTC); this run waits its turn. The lease lapses at 2026-01-01 02:30:05 UTC unless "
        "that run renews it; if that run is dead: DELETE FROM [switchyard].[run_lease] WHERE [target_schema] = N'tpch'")
    a.check_lease(("switchyard_tpch/run-b", *row[1:]))  # our own lease: no error


# --- statements through a T-SQL parser -------------------------------------------------------
def all_statements(a: MssqlAdapter) -> list[tuple[str, str]]:
    plan = plan_tpch(SPEC, 0.01, 3, tables=["orders", "lineitem", "nation"])
    out = [("setup", s) for s in a.setup_sql(plan)]
    for s in plan.all_streams():
        out += [("prepare", x) for x in a.prepare_sql(s)]
        out += [("load", x) for x in a.load_sql(s)]
        out += [("constraint", x) for x in a.constraint_sql(s)]
        out += [("switch", x) for x in a.switch_sql(s, replace_existing=False)]
        out += [("switched-in", x) for x in (a.switched_in_sql(s) if s.partitioned else [])]
    for t in plan.tables:
        out += [("commit", x) for x in a.commit_sql(t)]
        if t.table.partitioned:
            out += [("catalog", x) for x in a.catalog_sql(t.table.name).values()]
    # publish: batch (the spec's default): every table in one transaction; publish: table: an
    # unpartitioned table replaced whole at its switch.
    out += [("publish", x) for x in a.publish_sql(plan)]
    table_mode = adapter(replace(a.spec, publish="table"), **{k: getattr(a, k) for k in ("load_mode", "scheduler_guard")})
    out += [("switch", x) for s in plan.all_streams() for x in table_mode.switch_sql(s, replace_existing=True)]
    out += [("lease", x) for x in a.render("lease.sql")]
    out += [("lease-claim", x) for x in a.render("lease_claim.sql")]
    out += [("lease-release", x) for x in a.render("lease_release.sql", schema_literal=None)]
    out += [("lease-release-by-hand", x) for x in a.render("lease_release.sql", schema_literal=a.schema)]
    return out


def sqlfluff_parses(sql: str) -> bool:
    """Whether sqlfluff's T-SQL grammar parses `sql`. Statements that differ only in their digits
    (stream 2's and stream 3's, a name's number, a literal's value) are parsed once: the grammar
    reads a number or a name's digits the same whatever their value, and a parse takes a tenth
    of a second. A run of digits that starts with 0 is left as it is (0x1 is a hex literal)."""
    return _parses(re.sub(r"\b[1-9][0-9]*|(?<=[A-Za-z_])[1-9][0-9]*", "1", sql))


@functools.lru_cache(maxsize=None)
def _parses(sql: str) -> bool:
    import sqlfluff
    from sqlfluff.api.simple import APIParsingError
    try:
        sqlfluff.parse(sql + ";\n", dialect="tsql")
        return True
    except APIParsingError:
        return False


# sqlfluff's grammar takes SWITCH ... WITH (WAIT_AT_LOW_PRIORITY ...) only with a literal
# partition number; ours is a variable set from $PARTITION. For those statements the rest
# of the grammar is checked with a literal in the variable's place.
_PARTITION_VARIABLE = re.compile(r"PARTITION @partition\b")


def test_every_statement_parses_as_tsql():
    a = adapter()
    failed, with_literal = [], []
    for step, stmt in all_statements(a):
        # pyodbc's ? placeholders (values are parameters) read as a T-SQL variable.
        if sqlfluff_parses(re.sub(r"\?", "@p", stmt)):
            continue
        if _PARTITION_VARIABLE.search(stmt) and sqlfluff_parses(_PARTITION_VARIABLE.sub("PARTITION 2", stmt)):
            with_literal.append(step)
            continue
        failed.append((step, stmt))
    assert not failed, "not T-SQL by sqlfluff:\n\n" + "\n\n".join(f"[{k}]\n{s}" for k, s in failed)
    # Exactly the partition switches of the tables' commits and the batch's publish need the
    # literal stand-in; anything else must parse as is.
    assert set(with_literal) == {"commit", "publish"}


def test_tds_mode_statements_parse_too():
    assert all(sqlfluff_parses(re.sub(r"\?", "@p", stmt)) or _PARTITION_VARIABLE.search(stmt)
               for _, stmt in all_statements(adapter(load_mode="tds", scheduler_guard=False)))


def test_the_contract_suites_own_queries_parse():
    """The SQL Server contract suite runs only against a server; its own queries are checked
    here (pyodbc's ? placeholders read as a T-SQL variable)."""
    from test_mssql_contract import suite_sql
    statements = suite_sql(adapter(schema="c_0123abcd"))
    failed = [x for x in statements if not sqlfluff_parses(re.sub(r"\?", "@p", x))]
    assert not failed, "not T-SQL by sqlfluff:\n\n" + "\n\n".join(failed)
    assert len(statements) > 20


def test_the_parser_check_can_fail():
    assert not sqlfluff_parses("ALTER TABLE [s].[o] SWICH TO [t].[o] PARTITION 3")
    assert not sqlfluff_parses("CREATE PARTITION FUNCTION [pf] (bigint) AS RANGE LEFT FOR VALUE (0, 1)")
    assert not sqlfluff_parses("BULK INSERT [s].[o] FROM N'/x' WITH (TABLOCK)")


def test_sqlglot_parses_the_plain_statements():
    # sqlglot's tsql dialect is the common choice; it falls back to an unparsed Command for
    # partition DDL, filegroups and SWITCH, so it can vouch only for the plain statements.
    import sqlglot
    from sqlglot import exp
    a = adapter()
    s = small_plan().stream("orders", 2)
    create, constraint = a.prepare_sql(s)[1:]
    assert isinstance(sqlglot.parse_one(a.prepare_sql(s)[0], read="tsql"), exp.Drop)
    created = sqlglot.parse_one(create, read="tsql")
    assert isinstance(created, exp.Create)
    assert [c.name for c in created.find_all(exp.ColumnDef)] == list(SPEC.table("orders").column_names)
    assert isinstance(sqlglot.parse_one(constraint, read="tsql"), exp.Alter)


# --- the method, statement by statement ------------------------------------------------------
_PIECE = re.compile(r"N'((?:[^']|'')*)'|NCHAR\((\d+)\)|(REPLACE\(@rowterminator, N'''', N''''''\))|(@rowterminator)")


def dynamic_bulk_insert(batch: str) -> tuple[str, str]:
    """(row terminator, BULK INSERT) as sp_executesql runs them: the batch's two DECLAREd
    expressions evaluated (N'' literals, NCHAR(n), the variable, the variable's quotes doubled)."""
    def evaluate(expr: str, rowterminator: str = "") -> str:
        out = []
        for m in _PIECE.finditer(expr):
            out.append(m.group(1).replace("''", "'") if m.group(1) is not None else
                       chr(int(m.group(2))) if m.group(2) else
                       rowterminator.replace("'", "''") if m.group(3) else rowterminator)
        return "".join(out)
    rt = evaluate(re.search(r"DECLARE @rowterminator nvarchar\(12\) = (.*)$", batch, re.M).group(1))
    load = re.search(r"DECLARE @load nvarchar\(max\) = (.*)$", batch, re.M).group(1)
    return rt, evaluate(load, rt)


def test_bulk_insert_statement_follows_the_method():
    a = adapter(batch_size=250_000)
    s = small_plan().stream("lineitem", 3)
    (stmt,) = a.load_sql(s, Path(LOCAL_ROOT) / "nightly" / s.file)
    # '|' then LF: the trailing delimiter folded into the row terminator, built with NCHAR(10)
    # (no line break inside any literal of the batch) and run by sp_executesql.
    assert "DECLARE @rowterminator nvarchar(12) = N'|' + NCHAR(10)\n" in stmt
    assert stmt.rstrip().endswith("EXEC sys.sp_executesql @load")
    code = "\n".join(ln for ln in stmt.splitlines() if not ln.lstrip().startswith("--"))
    for literal in re.findall(r"N?'(?:[^']|'')*'", code):
        assert "\n" not in literal and "\r" not in literal, literal
    rt, inner = dynamic_bulk_insert(stmt)
    assert rt == "|\n"
    assert f"FROM '{SERVER_ROOT}/nightly/lineitem/lineitem.3.tbl'" in inner
    assert inner.startswith("BULK INSERT [tpch_staging].[lineitem_3] ")
    assert "DATAFILETYPE = 'char'" in inner and "FIELDTERMINATOR = '|'" in inner
    assert "ROWTERMINATOR = '|\n'" in inner and "CODEPAGE = '65001'" in inner
    for option in ("TABLOCK", "CHECK_CONSTRAINTS", "BATCHSIZE = 250000", "MAXERRORS = 0"):
        assert option in inner
    assert sqlfluff_parses(inner)
    # The scheduler claim comes before the load, in the same batch.
    assert stmt.index("sp_getapplock") < stmt.index("sys.sp_executesql")
    assert "@LockOwner = N'Session'" in stmt and "@LockTimeout = 0" in stmt
    (unguarded,) = adapter(scheduler_guard=False).load_sql(s, Path(LOCAL_ROOT) / "x" / s.file)
    assert "sp_getapplock" not in unguarded


def test_staging_table_is_on_its_filegroup_with_the_partition_range():
    s = small_plan().stream("orders", 2)
    drop, create, check = adapter().prepare_sql(s)
    assert drop == "DROP TABLE IF EXISTS [tpch_staging].[orders_2]" or drop.endswith(
        "DROP TABLE IF EXISTS [tpch_staging].[orders_2]")
    assert create.rstrip().endswith(") ON [fg2]")
    cols = re.findall(r"^\s+\[(\w+)\] (.+?) NOT NULL,?$", create, re.M)
    assert cols == [(c.name, c.sql_type("mssql")) for c in SPEC.table("orders").columns]
    assert "WITH CHECK" in check
    assert f"CHECK ([o_orderkey] IS NOT NULL AND [o_orderkey] >= {s.lower} AND [o_orderkey] <= {s.upper})" in check


def test_partition_layout_puts_each_stream_in_its_own_partition_on_its_filegroup():
    plan = small_plan()
    a = adapter()
    setup = "\n".join(a.setup_sql(plan))
    for table in ("orders", "lineitem"):
        values = [int(v) for v in re.search(
            rf"CREATE PARTITION FUNCTION \[pf_tpch_{table}\] \(bigint\) AS RANGE LEFT FOR VALUES \(([^)]*)\)",
            setup).group(1).split(", ")]
        scheme = re.search(rf"CREATE PARTITION SCHEME \[ps_tpch_{table}\] AS PARTITION \[pf_tpch_{table}\] TO \(([^)]*)\)",
                           setup).group(1).split(", ")
        assert len(scheme) == len(values) + 1 and values == sorted(values)

        def partition(key: int) -> int:  # RANGE LEFT: the boundary belongs to the left partition
            return 1 + sum(1 for b in values if key > b)

        for s in plan.table(table).streams:
            # Exactly the stream's keys: bounded by the values lower - 1 and upper.
            assert partition(s.lower) == partition(s.upper)
            assert s.lower - 1 in values and s.upper in values
            assert scheme[partition(s.lower) - 1] == f"[{s.filegroup}]"
            commit = "\n".join(a.commit_sql(plan.table(table)))
            assert f"SET @partition = $PARTITION.[pf_tpch_{table}]({s.upper})\n    ALTER TABLE [tpch_staging].[{s.staging_table}] SWITCH" in commit
        # Every partition that holds no stream sits on the edge filegroup, never on PRIMARY.
        streams = {partition(s.lower) for s in plan.table(table).streams}
        assert all(fg == "[fg_edge]" for i, fg in enumerate(scheme, start=1) if i not in streams)
        assert scheme[0] == scheme[-1] == "[fg_edge]" and "[PRIMARY]" not in scheme
        # Every boundary is in the function when it is created: a new table's commit only switches.
        assert "SPLIT RANGE" not in setup and "MERGE RANGE" not in "\n".join(a.commit_sql(plan.table(table)))
    assert re.search(r"CREATE TABLE \[tpch\]\.\[orders\] \(.*\) ON \[ps_tpch_orders\]\(\[o_orderkey\]\)", setup, re.S)


def test_filegroups_get_files_round_robin_and_only_when_missing():
    setup = adapter().setup_sql(small_plan())
    files = [s for s in setup if "ADD FILE (" in s and "[fg_edge]" not in s]
    assert len(files) == 3 * 2
    assert all(s.lstrip().splitlines()[-2].startswith("IF NOT EXISTS (SELECT 1 FROM sys.database_files")
               for s in files)
    paths = [re.search(r"FILENAME = N'([^']+)'", s).group(1) for s in files]
    assert paths[:3] == ["/mnt/v1/switchyard_fg1_1.ndf", "/mnt/v2/switchyard_fg1_2.ndf",
                         "/mnt/v1/switchyard_fg2_1.ndf"]
    groups = [s for s in setup if "ADD FILEGROUP" in s]
    assert [re.search(r"ADD FILEGROUP \[(\w+)\]", s).group(1) for s in groups] == ["fg1", "fg2", "fg3", "fg_edge"]
    assert all("IF NOT EXISTS (SELECT 1 FROM sys.filegroups" in s for s in groups)
    assert any("recovery_model_desc" in s and "N'FULL'" in s for s in setup)


def test_setup_creates_a_function_for_a_new_table_only_and_never_splits():
    """An existing table keeps its function: the pre-flight checks the batch against it and the
    table's commit merges and splits (tests/unit/targets/mssql/test_mssql_window.py); setup never repartitions."""
    setup = adapter().setup_sql(small_plan())
    function = next(x for x in setup if "CREATE PARTITION FUNCTION [pf_tpch_orders]" in x)
    scheme = next(x for x in setup if "CREATE PARTITION SCHEME [ps_tpch_orders]" in x)
    for statement in (function, scheme):
        assert "IF OBJECT_ID(N'[tpch].[orders]', N'U') IS NULL AND NOT EXISTS" in statement
    assert not any("SPLIT RANGE" in x or "NEXT USED" in x for x in setup)
    assert any("CREATE TABLE [switchyard].[planned_partitions]" in x for x in setup)
    assert any("CREATE TABLE [switchyard].[partition_batches]" in x for x in setup)


def test_a_load_starts_by_emptying_its_staging_table():
    """A retried load task (prepare is not rerun) must not append to a half-loaded table."""
    s = small_plan().stream("orders", 2)
    (bulk,) = adapter().load_sql(s, Path(LOCAL_ROOT) / "b" / s.file)
    truncate = bulk.index("TRUNCATE TABLE [tpch_staging].[orders_2]\n")
    assert bulk.index("THROW 51001") < truncate < bulk.index("BULK INSERT [tpch_staging].[orders_2]")
    (unguarded,) = adapter(scheduler_guard=False).load_sql(s, Path(LOCAL_ROOT) / "b" / s.file)
    assert unguarded.index("TRUNCATE TABLE [tpch_staging].[orders_2]") < unguarded.index("BULK INSERT [")
    assert [x.splitlines()[-1] for x in adapter(load_mode="tds").load_sql(s)] == [
        "TRUNCATE TABLE [tpch_staging].[orders_2]"]


def test_unpartitioned_table_is_replaced_whole_in_one_transaction():
    plan = plan_tpch(SPEC, 0.01, 3, tables=["nation"])
    (s,) = plan.table("nation").streams
    a = table_adapter()
    assert a.constraint_sql(s) == []
    body = "\n".join(a.switch_sql(s, replace_existing=True))
    assert body.index("BEGIN TRANSACTION") < body.index("TRUNCATE TABLE [tpch].[nation]") \
        < body.index("INSERT INTO [tpch].[nation] WITH (TABLOCK)") < body.index("COMMIT TRANSACTION")
    # Without the table's catalog (where SWITCH cannot take it): its rows copied. The short lock
    # wait of a table's commit: TRUNCATE asks for Sch-M at normal priority.
    assert "SWITCH TO" not in body and "SET LOCK_TIMEOUT 1000" in body
    # An IDENTITY column takes the file's values (the INSERT names every column): IDENTITY_INSERT
    # around the INSERT where the table has one, and OFF again if the transaction fails.
    on, off = (f"IF OBJECTPROPERTY(OBJECT_ID(N'[tpch].[nation]'), 'TableHasIdentity') = 1 "
               f"SET IDENTITY_INSERT [tpch].[nation] {state}\n" for state in ("ON", "OFF"))
    assert (body.index("TRUNCATE TABLE [tpch].[nation]") < body.index(on)
            < body.index("INSERT INTO [tpch].[nation] WITH (TABLOCK)") < body.index(off) < body.index("COMMIT TRANSACTION")
            < body.index("BEGIN CATCH") < body.index(off, body.index("BEGIN CATCH")) < body.index(";THROW"))
    assert sqlfluff_parses(body)


# --- numbers: orders at scale 1000 in 56 streams ------------------------------------------
def test_orders_sf1000_56_streams_bounds_equal_the_tpch_rules():
    scale, n = 1000, 56
    a = adapter(port_count=8)
    plan = plan_tpch(SPEC, scale, n, tables=["orders"])
    setup = "\n".join(a.setup_sql(plan))
    values = [int(v) for v in re.search(r"CREATE PARTITION FUNCTION \[pf_tpch_orders\] \(bigint\) AS RANGE LEFT "
                                        r"FOR VALUES \(([^)]*)\)", setup).group(1).split(", ")]
    keys = [tpch.stream_keys("orders", scale, n, k) for k in range(1, n + 1)]
    assert values == [keys[0].key_min - 1] + [k.key_max for k in keys]
    # Stream 1's last key by hand: tpchgen-cli cuts a part into C ~15 MiB chunks of 114-byte
    # rows, C = 1_500_000_000 // 56 * 114 // 15 MiB + 1 = 195, so stream 1 ends at generator row
    # (1_500_000_000 // (56 * 195)) * 195 = 26,785,590, whose sparse key is 107,142,342.
    assert values[:2] == [0, 107_142_342]
    for k, s in enumerate(plan.table("orders").streams, start=1):
        check = a.prepare_sql(s)[-1]
        lo, hi = map(int, re.search(r"CHECK \(\[o_orderkey\] IS NOT NULL AND \[o_orderkey\] >= (\d+) AND "
                                   r"\[o_orderkey\] <= (\d+)\)", check).groups())
        assert lo == (keys[k - 2].key_max + 1 if k > 1 else keys[0].key_min)
        assert hi == keys[k - 1].key_max
        assert lo <= keys[k - 1].key_min  # the file's smallest key lies inside its partition


def test_script_for_96_streams_at_scale_1000_without_a_server():
    started = time.monotonic()
    text = plan_script(1000, 96)
    assert time.monotonic() - started < 20
    assert text.count("\nGO\n") > 96 * 6 * 4
    for k in (1, 96):
        assert f"BULK INSERT [tpch_staging].[lineitem_{k}]" in text
        assert f"ADD FILEGROUP [fg{k}]" in text
    assert "orders_97" not in text


# --- configuration and safety --------------------------------------------------------------
def test_adapter_class_and_ports():
    assert adapter_class("mssql") is MssqlAdapter
    a = MssqlAdapter(SPEC, ports=[2000, 2001, 2002, 2003])
    assert [a.port_for(k) for k in (1, 2, 4, 5, 56)] == [2000, 2001, 2003, 2000, 2003]
    b = adapter(base_port=3000, port_count=2)
    assert [b.port_for(k) for k in (1, 2, 3)] == [3000, 3001, 3000]
    assert "SERVER=localhost,3001;" in b.odbc_connection_string(b.port_for(2), driver="d")
    assert "Server=localhost,3000;" in b.tds_connection_string(b.port_for(3))
    assert "PacketSize=32767" in b.tds_connection_string(3000)


def test_uri_options_and_urls():
    endpoint, options = parse_uri("mssql://sa:p%40ss%3Bw@db.example:2000/warehouse"
                                  "?load_mode=tds&port_count=4&TrustServerCertificate=yes")
    assert (endpoint.host, endpoint.port, endpoint.user, endpoint.password, endpoint.database) == \
        ("db.example", 2000, "sa", "p@ss;w", "warehouse")
    a = MssqlAdapter(SPEC, uri="mssql://sa:p%40ss%3Bw@db.example:2000/warehouse?load_mode=tds&port_count=4"
                               "&TrustServerCertificate=yes", odbc_driver="ODBC Driver 18 for SQL Server")
    assert a.load_mode == "tds" and a.ports == [2000, 2001, 2002, 2003]
    conn = a.odbc_connection_string(2001)
    assert "PWD={p@ss;w}" in conn and "TrustServerCertificate=yes" in conn
    url = a.sqlalchemy_url()
    assert url.startswith("mssql+pyodbc://sa:p%40ss%3Bw@db.example:2000/warehouse?")
    with pytest.raises(TargetError):
        parse_uri("mssql://h/db?Driver=evil")
    with pytest.raises(TargetError):
        MssqlAdapter(SPEC, load_mode="insert")


def test_nothing_unvalidated_reaches_the_sql():
    with pytest.raises(TargetError):
        adapter(server_data_root="/x'; DROP TABLE t; --")
    with pytest.raises(TargetError):
        adapter(file_dirs=["/data'x"])
    with pytest.raises(TargetError):
        MssqlAdapter(SPEC, schema="tpch]; DROP")
    a = adapter()
    s = small_plan().stream("orders", 1)
    with pytest.raises(TargetError, match="outside the data root"):
        a.load_sql(s, Path("/etc/passwd"))


def test_server_path_mapping():
    a = adapter()
    assert a.server_path(Path(LOCAL_ROOT) / "b" / "orders" / "orders.1.tbl") == f"{SERVER_ROOT}/b/orders/orders.1.tbl"
    w = adapter(server_data_root="D:\\loads")
    assert w.server_path(Path(LOCAL_ROOT) / "b" / "x.tbl") == "D:\\loads\\b\\x.tbl"
    same = MssqlAdapter(SPEC, local_data_root=LOCAL_ROOT)
    assert same.server_path(Path(LOCAL_ROOT) / "b" / "x.tbl") == f"{LOCAL_ROOT}/b/x.tbl"


def test_stats_delta():
    before = {"PAGEIOLATCH_EX": (10, 100, 5), "WRITELOG": (1, 2, 0)}
    after = {"PAGEIOLATCH_EX": (15, 400, 9), "WRITELOG": (1, 2, 0), "BULKOP": (2, 50, 1)}
    assert stats_delta(before, after) == {"PAGEIOLATCH_EX": (5, 300, 4), "BULKOP": (2, 50, 1)}


# --- the TDS path's parser --------------------------------------------------------------------
def test_converters_parse_without_locale_rules():
    assert converter("bigint")("-42") == -42
    assert converter("money")("1234.56") == Decimal("1234.56")
    assert converter("date")("1998-08-02") == date(1998, 8, 2)
    assert converter("char(1)")("F") == "F"
    for sql_type, bad in [("bigint", "1_000"), ("bigint", " 1"), ("integer", "99999999999"),
                          ("money", "1,5"), ("money", "NaN"), ("date", "02/08/1998"), ("char(1)", "FO")]:
        with pytest.raises(ValueError):
            converter(sql_type)(bad)


def test_file_rows_read_a_real_batch(tpch_batch):
    name, folder = tpch_batch
    import json
    manifest = json.loads((folder / "manifest.json").read_text())
    entry = next(e for e in manifest["files"] if e["table"] == "lineitem" and e["stream"] == 2)
    rows = FileRows(folder / entry["file"], SPEC.table("lineitem"), "mssql")
    out = list(rows)
    assert len(out) == entry["rows"] == rows.rows
    assert out[0][0] == entry["key_min"] and out[-1][0] == entry["key_max"]
    assert isinstance(out[0][4], Decimal) and isinstance(out[0][10], date)


def test_a_bad_line_names_file_line_and_column(tmp_path):
    good = "1|36901|O|173665.47|1996-01-02|5-LOW|Clerk#000000951|0|nstructions sleep furiously among |\n"
    bad = "2|78002|O|46929.18|1996-13-01|1-URGENT|Clerk#000000880|0| foxes. pending accounts|\n"
    path = tmp_path / "orders.1.tbl"
    path.write_text(good + bad)
    rows = FileRows(path, SPEC.table("orders"), "mssql")
    with pytest.raises(TargetError, match=r"orders\.1\.tbl: line 2: column o_orderdate: .*'1996-13-01'"):
        list(rows)
    assert rows.error is not None
    path.write_text(good + "3|1|O|1.00|1996-01-02|x|y|0|z\n")
    with pytest.raises(TargetError, match=r"line 2: 8 fields, expected 9"):
        list(FileRows(path, SPEC.table("orders"), "mssql"))


# --- the docker-compose stack's file, validated without Docker ---------------------------------
# Interpolated as `docker compose` does (${VAR}, ${VAR:-default}, ${VAR:?error}, $$), anchors
# and merge keys resolved by PyYAML, then parsed by compose-spec (the Rust compose_spec crate,
# a validating parser of the Compose Specification); then the structure the stack relies on.
import json  # noqa: E402

import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parents[4]
COMPOSE = ROOT / "docker-compose.yaml"
ENV = {"MSSQL_SA_PASSWORD": "Example-Passw0rd", "AIRFLOW_DB_PASSWORD": "example", "AIRFLOW_JWT_SECRET": "x" * 32,
       "AIRFLOW_UID": "1000"}
_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value, env):
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m):
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        op, arg = m.group(2), m.group(3)
        current = env.get(name)
        if op and op.endswith("-"):
            return current if current else arg
        if op and op.endswith("?"):
            if not current:
                raise KeyError(f"{name}: {arg}")
            return current
        return current or ""
    return _VAR.sub(sub, value)


def load(env=ENV) -> dict:
    raw = yaml.safe_load(COMPOSE.read_text())
    return interpolate({k: v for k, v in raw.items() if not k.startswith("x-")}, env)


def test_compose_file_is_valid_compose():
    from compose_spec import PyCompose
    compose = PyCompose.from_json(json.dumps(load()))
    assert {"postgres", "mssql", "mssql-ports", "airflow-init", "switchyard-demo", "airflow-apiserver",
            "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer", *EDGE_PROFILE} == set(
        compose.service_names())


EDGE_PROFILE = {"edge-init", "edge-apiserver", "edge-scheduler", "edge-dag-processor", "edge-triggerer",
                "edge-worker-source-a", "edge-worker-source-b"}


def test_the_edge_profile_is_a_site_of_its_own_with_a_worker_and_a_volume_per_source():
    services = load()["services"]
    assert {name for name, svc in services.items() if svc.get("profiles")} == EDGE_PROFILE
    assert all(services[name]["profiles"] == ["edge"] for name in EDGE_PROFILE)
    for name in EDGE_PROFILE:
        env = services[name]["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor,airflow.providers.edge3.executors.EdgeExecutor"
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres/airflow_edge")  # not the stack's
        assert env["SWITCHYARD_LOAD_EXECUTOR"] == "EdgeExecutor"
        assert env["AIRFLOW__EDGE__API_URL"] == "http://edge-apiserver:8080/edge_worker/v1/rpcapi"
        assert env["SWITCHYARD_SPEC"] == "/switchyard/spec/tpch-sources.yaml"
        assert env["SWITCHYARD_SCHEMA"] == "tpch_edge" and env["SWITCHYARD_DATA_ROOT"] == "/switchyard/data"
        assert any(v.startswith("./.switchyard/edge/spec:/switchyard/spec") for v in services[name]["volumes"])
    roots = {}
    for source in ("source_a", "source_b"):
        worker = services[f"edge-worker-{source.replace('_', '-')}"]
        # Its own queue (without one a worker serves every queue) and its own volume as its data root.
        assert worker["command"].split()[:4] == ["edge", "worker", "--queues", source]
        (mount,) = [v for v in worker["volumes"] if ":/switchyard/data" in v]
        roots[source] = mount
        assert mount == f"./.switchyard/edge/{source}:/switchyard/data:ro"
        assert worker["depends_on"]["edge-apiserver"]["condition"] == "service_healthy"
        assert "airflow edge status" in worker["healthcheck"]["test"][-1]
    central = [v for v in services["edge-scheduler"]["volumes"] if v.endswith(":/switchyard/data")]
    assert central == ["./.switchyard/edge/central:/switchyard/data"]
    init = services["edge-init"]
    assert init["entrypoint"][-1] == "/opt/airflow/include/docker/init-edge.sh"
    assert {f"./.switchyard/edge/{s}:/switchyard/sources/{s}" for s in roots} <= set(init["volumes"])
    assert services["edge-apiserver"]["ports"] == ["127.0.0.1:8081:8080"]
    script = (ROOT / "include" / "docker" / "init-edge.sh").read_text()
    assert "CREATE DATABASE airflow_edge" in script and "init-switchyard.sh" in script
    blocks = re.findall(r"python - <<'PY'\n(.*?)\nPY\n", script, re.S)
    assert len(blocks) == 2
    for python in blocks:
        compile(python, "init-edge.sh:python", "exec")


def test_the_validator_rejects_a_broken_file():
    from compose_spec import PyCompose
    broken = load()
    broken["services"]["airflow-scheduler"]["depends_on"]["mssql-ports"]["condition"] = "service_ready"
    with pytest.raises(ValueError):
        PyCompose.from_json(json.dumps(broken))


def test_secrets_come_from_env_and_are_required():
    text = COMPOSE.read_text()
    assert "Example-Passw0rd" not in text
    assert "${MSSQL_SA_PASSWORD:?" in text and "${AIRFLOW_DB_PASSWORD:?" in text
    with pytest.raises(KeyError, match="MSSQL_SA_PASSWORD"):
        load({k: v for k, v in ENV.items() if k != "MSSQL_SA_PASSWORD"})
    example = (ROOT / ".env.example").read_text()
    for name in ("MSSQL_SA_PASSWORD", "AIRFLOW_DB_PASSWORD", "AIRFLOW_JWT_SECRET"):
        assert re.search(rf"^{name}=$", example, re.M), f"{name} must be listed empty in .env.example"
    assert ".env" in (ROOT / ".gitignore").read_text().split()


def test_services_structure():
    services = load()["services"]
    one_shot = {name for name, svc in services.items() if svc.get("restart") == "no"}
    assert one_shot == {"airflow-init", "switchyard-demo", "edge-init"}
    for name, svc in services.items():
        if name not in one_shot:
            assert "healthcheck" in svc, f"{name} has no health check"
    mssql = services["mssql"]
    assert mssql["image"] == "mcr.microsoft.com/mssql/server:2022-latest"
    assert mssql["environment"]["ACCEPT_EULA"] == "Y"
    assert "sqlcmd" in mssql["healthcheck"]["test"][-1]
    host_ports = [p.split(":") for p in mssql["ports"]]
    assert len(host_ports) >= 2 and all(p[0] == "127.0.0.1" and p[-1] == "1433" for p in host_ports)
    assert len({p[1] for p in host_ports}) == len(host_ports)
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        svc = services[name]
        assert svc["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
        assert svc["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert svc["depends_on"]["mssql"]["condition"] == "service_healthy"
        assert svc["environment"]["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert svc["environment"]["SWITCHYARD_DATA_ROOT"] == "/switchyard/data"
        assert svc["build"]["dockerfile"] == "include/docker/Dockerfile"
    assert "airflow-worker" not in services and "redis" not in services


def test_data_volume_is_shared_at_the_same_path():
    services = load()["services"]
    mount = "./.switchyard/data:/switchyard/data"
    assert any(v.startswith(mount) for v in services["mssql"]["volumes"])
    assert mount in services["airflow-scheduler"]["volumes"]
    init = (ROOT / "include" / "docker" / "init-switchyard.sh").read_text()
    assert '"server_data_root": "/switchyard/data"' in init
    assert "python -m switchyard pool sync --conn-id switchyard_target" in init
    assert '"conn_type": "mssql"' in init and "switchyard_target" in init
    runs = "./.switchyard/runs:/switchyard/runs"
    assert runs in services["airflow-scheduler"]["volumes"]
    assert services["airflow-scheduler"]["environment"]["SWITCHYARD_RUNS_DIR"] == "/switchyard/runs"


def test_init_generates_the_demo_batch_and_the_demo_service_unpauses_the_dag():
    services = load()["services"]
    init = (ROOT / "include" / "docker" / "init-switchyard.sh").read_text()
    generate = re.search(r"python -m switchyard generate (.*?)\n\s*--batch \"\$\{SWITCHYARD_DEMO_BATCH:-demo\}\"",
                         init, re.S)
    assert generate and '--streams "${SWITCHYARD_STREAMS:-4}"' in generate.group(1)
    env = services["airflow-init"]["environment"]
    assert env["SWITCHYARD_DEMO_BATCH"] == services["switchyard-demo"]["environment"]["SWITCHYARD_DEMO_BATCH"]
    assert env["SWITCHYARD_STREAMS"] == services["airflow-scheduler"]["environment"]["SWITCHYARD_STREAMS"]
    # The init connects through the forwarder (the connection's host), so it waits for it.
    assert services["airflow-init"]["depends_on"]["mssql-ports"]["condition"] == "service_healthy"
    demo = services["switchyard-demo"]
    assert demo["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"
    assert "airflow-dag-processor" in demo["depends_on"]
    assert demo["entrypoint"][-1] == "/opt/airflow/include/docker/unpause-switchyard.sh"


def test_init_scripts_are_valid_bash_and_python():
    import subprocess
    for name in ("init-switchyard.sh", "unpause-switchyard.sh", "init-edge.sh"):
        path = ROOT / "include" / "docker" / name
        assert subprocess.run(["bash", "-n", str(path)], capture_output=True).returncode == 0, name
    init = (ROOT / "include" / "docker" / "init-switchyard.sh").read_text()
    (python,) = re.findall(r"python - <<'PY'\n(.*?)\nPY\n", init, re.S)
    compile(python, "init-switchyard.sh:python", "exec")
    # The database name is checked by every statement that carries it.
    uses = re.findall(r'cur\.execute\(f"[^"]*\{([^}]*)\}', python)
    assert uses and all(u == "db(database)" for u in uses), uses


def test_odbc_password_braces_are_escaped():
    from switchyard.targets.mssql import odbc_value
    assert odbc_value("plain") == "plain"
    assert odbc_value("pa}ss;w") == "{pa}}ss;w}"
    assert odbc_value("{x}") == "{{x}}}"


def test_forwarder_ports_match_the_connection():
    services = load()["services"]
    fwd = services["mssql-ports"]
    assert fwd["command"][fwd["command"].index("--listen") + 1] == "2000-2003"
    assert services["airflow-init"]["environment"]["SWITCHYARD_MSSQL_PORTS"] == "2000,2001,2002,2003"


def test_dockerfile_extends_the_official_image():
    text = (ROOT / "include" / "docker" / "Dockerfile").read_text()
    assert re.search(r"^FROM apache/airflow:3\.3\.2-python3\.11$", text, re.M)
    assert "unixodbc" in text and "requirements.txt" in text
    assert "[mssql,edge]" in text  # the Edge executor's provider, for the edge profile
