"""The pre-flight reads everything about an existing target that can make the commit's TRUNCATE,
SWITCH, SPLIT or MERGE fail, and refuses before any load, naming the object and the fix.

No SQL Server runs here: `ScriptedCatalog` (tests/unit/targets/mssql/test_mssql_window.py) gives SCRIPTED CATALOG
ANSWERS, written by hand, for the pre-flight's queries (targets/mssql/templates/catalog_*.sql),
including catalog_dependencies.sql's rows (kind, name, detail, flag). The same cases against a
real server are in tests/contract/test_mssql_contract_modes.py (run with SWITCHYARD_MSSQL_URI).
"""
from __future__ import annotations

import re

import pytest

from switchyard.targets import TargetError
from test_mssql_tsql import check_golden, sqlfluff_parses
from test_mssql_window import (DBA_INDEXES, ORDERS_COLUMNS, SPEC, ScriptedCatalog, adapter, even, layout_of,
                               orders_plan)


def preflight(dependencies=(), columns=None, indexes=(), mode_batch="b2"):
    a = adapter(batch=mode_batch)
    cur = ScriptedCatalog(a, layout_of({"b1": even(2)}), indexes, dependencies=dependencies, columns=columns)
    return a, a.preflight(cur, orders_plan(SPEC, even(2)))


def refused(dependencies=(), columns=None, indexes=()) -> str:
    with pytest.raises(TargetError) as exc:
        preflight(dependencies, columns, indexes)
    assert exc.value.permanent and "pre-flight refused the batch before any load" in str(exc.value)
    return str(exc.value)


def with_column(name, **changes):
    """ORDERS_COLUMNS (scripted sys.columns rows) with one column changed: nullable, computed,
    identity, sparse (the rows' 6th, 8th, 9th and 11th fields)."""
    out = []
    for row in ORDERS_COLUMNS:
        row = list(row) + [0] * (11 - len(row))
        if row[0] == name:
            for field, index in (("nullable", 5), ("computed", 7), ("identity", 8), ("sparse", 10)):
                if field in changes:
                    row[index] = int(changes[field])
        out.append(tuple(row))
    return out


@pytest.mark.parametrize("dependency, expected", [
    (("fk_in", "FK_lineitem_orders", "[tpch].[lineitem]", 0),
     "tpch.orders is referenced by foreign key FK_lineitem_orders of [tpch].[lineitem]: TRUNCATE TABLE refuses a "
     "table a foreign key references (Msg 4712)"),
    (("fk_out", "FK_orders_customer", "[tpch].[customer]", 0),
     "tpch.orders: foreign key FK_orders_customer references [tpch].[customer]: SWITCH needs every staging table to "
     "carry it, trusted"),
    (("indexed_view", "[tpch].[v_order_totals]", None, 0), "tpch.orders is in the indexed view [tpch].[v_order_totals]"),
    (("cdc", "orders", None, 0), "tpch.orders: change data capture tracks it: TRUNCATE TABLE refuses such a table"),
    (("replication", "orders", None, 0), "tpch.orders is published or subscribed for replication"),
    (("temporal", "orders", "SYSTEM_VERSIONED_TEMPORAL_TABLE", 2),
     "tpch.orders is system-versioned (SYSTEM_VERSIONED_TEMPORAL_TABLE): TRUNCATE TABLE and SWITCH out of it, with "
     "which the commit replaces or retires its rows, are refused while SYSTEM_VERSIONING is ON"),
    (("temporal", "orders", "HISTORY_TABLE", 1),
     "tpch.orders is a history table (HISTORY_TABLE): SWITCH into it is refused while SYSTEM_VERSIONING is ON"),
    (("ledger", "ledger_start_transaction_id", None, 0),
     "tpch.orders is a ledger table (its column ledger_start_transaction_id is one the ledger generates): TRUNCATE "
     "TABLE and deleting rows, with which the commit replaces or retires its partitions, are not supported"),
    (("change_tracking", "orders", None, 0),
     "tpch.orders: change tracking is enabled on it: ALTER TABLE SWITCH fails on such a table (Msg 4900)"),
    (("set_option", "ANSI_NULLS", None, 0),
     "tpch.orders was created with ANSI_NULLS OFF: SWITCH needs the staging tables' ANSI_NULLS setting the same"),
    (("set_option", "QUOTED_IDENTIFIER", None, 0), "tpch.orders was created with QUOTED_IDENTIFIER OFF"),
    (("column", "o_comment", "ANSI_PADDING OFF", 0),
     "tpch.orders: column o_comment has ANSI_PADDING OFF: SWITCH needs the same on the staging tables"),
    (("column", "o_orderkey", "ROWGUIDCOL", 0), "tpch.orders: column o_orderkey has ROWGUIDCOL"),
    (("check", "CK_orders_recent", "([o_orderdate]>=dateadd(year,(-1),getdate()))", 0),
     "tpch.orders: CHECK constraint CK_orders_recent ([o_orderdate]>=dateadd(year,(-1),getdate())): SWITCH needs "
     "every staging table to carry it"),
    (("check", "CK_orders_other", "([o_comment]<>[x])", 0), "CHECK constraint CK_orders_other"),
    (("fulltext", "orders", None, 0), "tpch.orders has a full-text index: ALTER TABLE SWITCH refuses such a table "
                                      "(Msg 4918)"),
    (("read_only", "fg_2019", None, 0),
     "tpch.orders: filegroup fg_2019, which holds partitions of it (or of its indexes or LOB data), is read-only: "
     "TRUNCATE TABLE and SWITCH refuse a partition there (Msg 4707, 4978-4981)"),
    (("table_option", "large value types out of row", None, 0),
     "tpch.orders: its table option 'large value types out of row' is ON, and Switchyard creates the staging tables "
     "without it: SWITCH needs the option the same on both tables"),
    (("table_option", "text in row", None, 0), "tpch.orders: its table option 'text in row' is ON"),
    (("check_nfr", "CK_orders_price", "([o_totalprice]>=(0))", 0),
     "tpch.orders: CHECK constraint CK_orders_price ([o_totalprice]>=(0)) is NOT FOR REPLICATION, and the copy each "
     "staging table carries is not: SWITCH needs the two the same (Msg 4975)"),
    (("rule", "o_orderstatus", "r_status", 0),
     "tpch.orders: rule r_status is bound to its column o_orderstatus: SWITCH is not allowed on a table with a rule "
     "(Msg 4964)"),
    # The run's user without the permissions the commit's statements need: found before any load.
    (("permission", "ALTER", "loader", 0),
     "tpch.orders: the run's database user loader lacks ALTER on it, which TRUNCATE TABLE and SWITCH need"),
    (("permission", "ALTER ANY DATASPACE", "load]er", 0),
     "tpch.orders: the run's database user load]er lacks ALTER ANY DATASPACE, which the commit's SPLIT and MERGE of "
     "the partition function and NEXT USED of its scheme need"),
])
def test_each_dependency_that_breaks_the_commit_is_refused_naming_it_and_the_fix(dependency, expected):
    text = refused([dependency])
    assert expected in text, text
    assert "; " in text.split(expected)[1] or "out of this run" in text or "after" in text  # the fix follows


def test_a_missing_permission_names_the_grant_that_gives_it():
    assert "; GRANT ALTER ON [tpch].[orders] TO [loader]" in refused([("permission", "ALTER", "loader", 0)])
    assert "; GRANT ALTER ANY DATASPACE TO [load]]er], or run as a user of db_ddladmin" in refused(
        [("permission", "ALTER ANY DATASPACE", "load]er", 0)])


def test_a_column_of_a_clr_type_is_refused_not_a_crash():
    """TYPE_NAME(system_type_id) is NULL for a CLR type (hierarchyid, geometry, geography): refused
    with the other problems before any load, where it raised an AttributeError."""
    columns = [tuple([row[0], None, *row[2:]]) if row[0] == "o_comment" else row for row in ORDERS_COLUMNS]
    assert "a column of a CLR type (hierarchyid, geometry, geography)" in refused(columns=columns)


def test_a_computed_column_is_refused_and_an_identity_is_a_note():
    assert "column o_totalprice is computed" in refused(columns=with_column("o_totalprice", computed=True))
    _, notes = preflight(columns=with_column("o_custkey", identity=True))
    assert any("column o_custkey has the IDENTITY property" in n for n in notes)


def test_a_nullable_key_column_is_taken_care_of_by_the_staging_check_and_said():
    a, notes = preflight(columns=with_column("o_orderkey", nullable=True))
    assert any("key column o_orderkey allows NULL" in n and "IS NOT NULL" in n for n in notes)
    target = a.read_target(ScriptedCatalog(a, layout_of({"b1": even(2)}), columns=with_column("o_orderkey",
                                                                                               nullable=True)), "orders")
    columns = [{"name": c.name, "type": c.type, "nullable": c.nullable, "collation": c.collation} for c in target.columns]
    s = orders_plan(SPEC, even(2)).stream("orders", 2)
    text = "\n".join(a.prepare_sql(s, columns=columns, filegroup="fg2"))
    assert "[o_orderkey] bigint NULL" in text
    assert "CHECK ([o_orderkey] IS NOT NULL AND [o_orderkey] >= 4001 AND [o_orderkey] <= 8000)" in text


def test_the_targets_simple_check_constraints_are_copied_to_each_staging_table():
    checks = [("check", "CK_orders_price", "([o_totalprice]>=(0))", 0),
              ("check", "CK_orders_status", "([o_orderstatus]='P' OR [o_orderstatus]='O' OR [o_orderstatus]='F')", 0),
              ("check", "CK_orders_off", "([o_shippriority]=(0))", 1)]
    a, notes = preflight(checks, indexes=DBA_INDEXES[:1])
    assert any("CHECK constraint CK_orders_price ([o_totalprice]>=(0)) is copied" in n for n in notes)
    assert any("CHECK constraint CK_orders_off is disabled" in n for n in notes)
    cur = ScriptedCatalog(a, layout_of({"b1": even(2)}), DBA_INDEXES[:1], dependencies=checks)
    target = a.read_target(cur, "orders")
    columns = [{"name": c.name, "type": c.type, "nullable": c.nullable, "collation": c.collation} for c in target.columns]
    s = orders_plan(SPEC, even(2)).stream("orders", 2)
    statements = a.prepare_sql(s, columns=columns, filegroup="fg2", checks=target.checks)
    text = "\n".join(x + ";\nGO" for x in statements) + "\n"
    check_golden("staging_with_target_checks_orders_2.sql", text)
    assert ("ALTER TABLE [tpch_staging].[orders_2] WITH CHECK\n    ADD CONSTRAINT [orders_2__CK_orders_price] CHECK "
            "([o_totalprice]>=(0))") in text
    assert "CK_orders_off" not in text
    assert all(sqlfluff_parses(x) for x in statements if "CK_orders" in x)


def test_an_index_on_another_scheme_of_the_tables_function_counts_as_aligned():
    """Aligned is decided in the catalog query by the partition function and the partitioning
    column, not by the data space: its text says so (the real server's answer is in the contract
    suite); a not-aligned answer is refused naming the index."""
    sql = adapter().catalog_sql("orders")["indexes"]
    assert "CASE WHEN ips.function_id = tps.function_id" in sql and "partition_ordinal = 1" in sql
    assert "i.data_space_id = t.data_space_id" not in sql
    text = refused(indexes=[(2, "ix_cust", "NONCLUSTERED", 0, 0, 0, 0, 0, None, 0, "o_custkey", 1, 0, 0)])
    assert "index ix_cust is not aligned (not partitioned by o_orderkey on a scheme of the table's function" in text


def test_a_check_definition_is_copied_only_when_every_token_is_known():
    from switchyard.targets.mssql.catalog import check_copy
    cols = ["a", "b"]
    assert check_copy("([a]>=(0) AND [b] IS NOT NULL)", cols) == "([a]>=(0) AND [b] IS NOT NULL)"
    assert check_copy("([a] IN (N'x', 'it''s'))", cols) is not None
    for bad in ("([a]>=(0)); DROP TABLE x --", "([c]=(1))", "(len([a])>(0))", "([a]=(1)) /* x */", "([a]=(1)",
                "([a].[b]=1)", None, ""):
        assert check_copy(bad, cols) is None, bad


def test_the_dependencies_query_parses_as_tsql():
    sql = adapter().catalog_sql("orders")["dependencies"]
    assert sqlfluff_parses(re.sub(r"\?", "@p", sql))


def test_an_index_with_partitions_on_other_filegroups_is_refused_naming_one():
    """An index on another scheme of the table's function whose filegroups differ: the staging
    tables' indexes are built on the partition's filegroup, so SWITCH would refuse it."""
    a = adapter(batch="b2")
    index = [(2, "ix_cust", "NONCLUSTERED", 0, 0, 0, 0, 0, None, 1, "o_custkey", 1, 0, 0)]
    cur = ScriptedCatalog(a, layout_of({"b1": even(2)}), index)
    rows = cur.answers[cur.sql["partitions"]]
    cur.answers[cur.sql["partitions"]] = [r[:5] + ("PRIMARY",) if r[0] == 2 else r for r in rows]
    with pytest.raises(TargetError, match=r"index ix_cust has partitions on other filegroups than the table's "
                                          r"\(partition 1 on PRIMARY\)"):
        a.preflight(cur, orders_plan(SPEC, even(2)))
    # On the same filegroups (the scripted default) it is taken as aligned and built on staging.
    a.preflight(ScriptedCatalog(a, layout_of({"b1": even(2)}), index), orders_plan(SPEC, even(2)))


def test_files_are_sized_for_the_index_builds_on_the_staging_tables():
    """A target with indexes: each staging table gets them built before the switch, a second
    copy of its rows for the clustered one, so the pre-flight doubles its streams' file room."""
    plain, _ = preflight()
    indexed, _ = preflight(indexes=DBA_INDEXES[:1])
    plan = orders_plan(SPEC, even(2))
    sizes = [{fg["name"]: fg["bytes"] for fg in a.filegroups(plan)} for a in (plain, indexed)]
    assert sizes[1]["fg1"] == 2 * sizes[0]["fg1"] > 0


def test_a_column_type_the_client_path_cannot_read_is_refused_before_any_load_where_the_files_take_it():
    """SCRIPTED: a table whose files the worker reads (here the deployment's load_mode tds) with a
    `time` column, which the client path has no reader for, is refused at the pre-flight, naming
    the column and why the files take that path; with BULK INSERT the server reads it."""
    from dataclasses import replace as changed
    from test_mssql_window import spec_with
    orders = SPEC.table("orders")
    timed = spec_with(columns=tuple(changed(c, types={"default": "time(3)"}) if c.name == "o_clerk" else c
                                    for c in orders.columns))
    plan = orders_plan(timed, even(2))
    tds = adapter(timed, load_mode="tds")
    with pytest.raises(TargetError) as exc:
        tds.preflight(ScriptedCatalog(tds, layout_of({"b1": even(2)})), plan)
    assert ("tpch.orders: column o_clerk: column type 'time(3)' has no converter in the TDS loader, which this "
            "table's files take (load_mode tds: the worker reads the file)") in str(exc.value)
    bulk = adapter(timed)
    assert bulk.client_path_problems(plan.tables[0], "tpch.orders") == []


def test_a_replace_table_holding_a_newer_batch_is_refused_unless_the_run_asks():
    """The control table's batches (scripted) against the run's: an older date would put the
    table back behind the newer batch it holds."""
    a = adapter(batch="2026-04-02")
    with pytest.raises(TargetError) as exc:
        a.preflight(ScriptedCatalog(a, layout_of({"2026-04-03": even(2)})), orders_plan(SPEC, even(2)))
    assert ("tpch.orders: holds batch 2026-04-03, newer than this batch 2026-04-02: in replace mode loading it "
            "would put the table back to batch 2026-04-02's rows") in str(exc.value)
    notes = a.preflight(ScriptedCatalog(a, layout_of({"2026-04-03": even(2)})), orders_plan(SPEC, even(2)),
                        replace_newer=True)
    assert ("tpch.orders: holds batch 2026-04-03, newer than this batch 2026-04-02; put back to batch 2026-04-02, "
            "as the run asks (replace_newer)") in notes
    # A newer batch goes in as before.
    newer = adapter(batch="2026-04-04")
    newer.preflight(ScriptedCatalog(newer, layout_of({"2026-04-03": even(2)})), orders_plan(SPEC, even(2)))


def test_a_table_switchyard_loaded_that_the_spec_no_longer_has_is_named_in_the_notes():
    """The control table's batches (scripted: catalog_loaded_tables.sql, whose OBJECT_ID keeps the
    tables still there) for a table renamed in the spec: the old table stays with its rows, and
    each run's pre-flight names it with its newest batch; the spec's own tables are not named."""
    a = adapter(batch="2026-04-04")
    cur = ScriptedCatalog(a, layout_of({"2026-04-03": even(2)}),
                          loaded=[("routes", "2026-04-01"), ("routes", "2026-04-02")])
    notes = a.preflight(cur, orders_plan(SPEC, even(2)))
    named = [n for n in notes if "no table of the spec" in n]
    assert named == [f"tpch.routes: loaded by Switchyard (its newest batch 2026-04-02) but no table of the spec "
                     f"{SPEC.source} any more: no run loads it now, and its readers keep its rows as they are; drop "
                     f"it, or move its rows to the table that took its place, or give the spec the table back"]
    sent = [params for sql, params in cur.sent if sql == a.render("catalog_loaded_tables.sql")[0]]
    assert sent == [("tpch",)]
