"""When the spec changes under a SQL Server table that holds batches, without a server.

The pre-flight reads the table (SCRIPTED CATALOG ANSWERS: tests/unit/targets/mssql/test_mssql_window.py's
ScriptedCatalog, tpch.orders as setup made it, with the columns each test changes) and compares
it with the spec (core/spec_diff.py): a new nullable column is refused naming its ALTER TABLE
(`on_spec_change: fail`) or added by setup (`add_columns`); a retyped column, a column the files
do not carry (BULK INSERT loads by position) and a new column anywhere but last are refused
under every policy. The statements are parsed as T-SQL. The same comparison on the embedded
PostgreSQL, run for real: tests/integration/test_spec_changes.py.
"""
from __future__ import annotations

from dataclasses import replace as changed

import pytest

from switchyard.core.spec import Column
from switchyard.targets import TargetError
from switchyard.targets.mssql.spec_change import catalog_type
from test_mssql_preflight import with_column
from test_mssql_tsql import sqlfluff_parses
from test_mssql_window import ORDERS_COLUMNS, ScriptedCatalog, adapter, even, layout_of, orders_plan, spec_with

NOTE = Column(name="o_note", types={"postgres": "varchar(40)", "mssql": "varchar(40)"}, nullable=True)


def with_spec_columns(columns, policy="fail"):
    return spec_with(columns=tuple(columns), on_spec_change=policy)


def preflight(spec, columns=None, indexes=()):
    a = adapter(spec)
    cur = ScriptedCatalog(a, layout_of({"b1": even(2)}), indexes, columns=columns)
    return a, a.preflight(cur, orders_plan(spec, even(2)))


def refusal(spec, columns=None) -> str:
    with pytest.raises(TargetError) as caught:
        preflight(spec, columns)
    assert caught.value.permanent and "pre-flight refused the batch before any load" in str(caught.value)
    return str(caught.value)


def orders_columns():
    return spec_with().table("orders").columns


def test_a_new_nullable_column_last_is_refused_with_its_alter_table_or_added_by_add_columns():
    wider = [*orders_columns(), NOTE]
    statement = "ALTER TABLE [tpch].[orders] ADD [o_note] varchar(40) NULL;"
    message = refusal(with_spec_columns(wider))
    assert (f"tpch.orders: column o_note (varchar(40)) is in the spec, not in the table: the files carry it and no "
            f"staging table can be switched in without it; to bring the table in line, run: {statement} (or set "
            f"on_spec_change: add_columns for orders, which runs it)") in message
    a, notes = preflight(with_spec_columns(wider, "add_columns"))
    assert a.spec_changes == [statement] and sqlfluff_parses(statement)
    assert f"tpch.orders: column o_note (varchar(40)) is in the spec, not in the table; on_spec_change: add_columns " \
           f"ran: {statement}" in notes


def test_what_sql_server_refuses_under_every_policy():
    columns = list(orders_columns())
    # A new column between two of the table's: SWITCH needs the table's order, ADD appends.
    message = refusal(with_spec_columns([columns[0], NOTE, *columns[1:]], "sync"))
    assert "tpch.orders has the columns (o_orderkey, o_custkey" in message and "a new column goes after the others" \
        in message
    # A column of the table the files do not carry: BULK INSERT loads by position.
    message = refusal(with_spec_columns(columns[:-1], "sync"))
    assert (f"tpch.orders: column {columns[-1].name} is not in the spec's files: the files are loaded by position, so "
            f"no load can leave it out") in message
    # A retyped column: the statement, never run by a policy.
    retyped = [changed(c, types={**c.types, "mssql": "decimal(18,2)"}) if c.name == "o_totalprice" else c
               for c in columns]
    message = refusal(with_spec_columns(retyped, "sync"))
    statement = "ALTER TABLE [tpch].[orders] ALTER COLUMN [o_totalprice] decimal(18,2) NOT NULL;"
    assert (f"tpch.orders: column o_totalprice is money in the table, decimal(18,2) in the spec: a staging "
            f"table takes the table's types, so the loads would not be what the spec says; changing a type rewrites "
            f"every partition, which is yours to decide; to bring the table in line, run: {statement}") in message
    assert sqlfluff_parses(statement)


def test_sync_relaxes_nullability_and_a_nullable_table_column_is_said():
    relaxed = [changed(c, nullable=True) if c.name == "o_comment" else c for c in orders_columns()]
    a, notes = preflight(with_spec_columns(relaxed, "sync"))
    assert a.spec_changes == ["ALTER TABLE [tpch].[orders] ALTER COLUMN [o_comment] varchar(79) "
                              "COLLATE SQL_Latin1_General_CP1_CI_AS NULL;"]
    assert all(sqlfluff_parses(x) for x in a.spec_changes)
    # The column keeps the collation it has: without COLLATE, ALTER COLUMN would give it the
    # database's default, a change nobody asked for.
    utf8 = [(*row[:6], "Latin1_General_100_CI_AS_SC_UTF8", *row[7:]) if row[0] == "o_comment" else row
            for row in ORDERS_COLUMNS]
    a, notes = preflight(with_spec_columns(relaxed, "sync"), columns=utf8)
    assert a.spec_changes == ["ALTER TABLE [tpch].[orders] ALTER COLUMN [o_comment] varchar(79) "
                              "COLLATE Latin1_General_100_CI_AS_SC_UTF8 NULL;"]
    assert all(sqlfluff_parses(x) for x in a.spec_changes)
    a, notes = preflight(spec_with(), columns=with_column("o_clerk", nullable=True))
    assert a.spec_changes == [] and any("column o_clerk is nullable in the table, NOT NULL in the spec: validation "
                                        "checks every batch for NULLs in it" in n for n in notes)


def test_the_spec_types_are_read_as_the_catalog_writes_them():
    assert [catalog_type(t) for t in ("integer", "INT", "datetime2", "datetime2(3)", "decimal", "decimal(15, 2)",
                                      "varchar(79)", "nvarchar(max)", "double precision", "char", "bigint")] == [
        "int", "int", "datetime2(7)", "datetime2(3)", "decimal(18,0)", "decimal(15,2)", "varchar(79)",
        "nvarchar(max)", "float", "char(1)", "bigint"]
    # Every built-in spec's table against the catalog as setup makes it: no difference.
    assert [r[0] for r in ORDERS_COLUMNS] == [c.name for c in orders_columns()]
    a, notes = preflight(spec_with())
    assert a.spec_changes == [] and not [n for n in notes if "in the spec" in n]


# --- a DBA's unique index, checked at validate ---------------------------------------------------------
def staged_session(duplicates):
    """SCRIPTED CATALOG ANSWERS for orders with the DBA's indexes (a unique primary key among
    them), its stream 1 planned and loaded; the index builds recorded, the unique one refused
    with Msg 1505 when `duplicates` (the GROUP BY's rows) are scripted."""
    pyodbc = pytest.importorskip("pyodbc", exc_type=ImportError,
                                 reason="pyodbc cannot load without unixODBC's libodbc.so.2: apt-get install unixodbc")
    from test_mssql_window import DBA_INDEXES, ScriptedSession, scripted

    class Session(ScriptedSession):
        def __init__(self, a):
            super().__init__(a, layout_of({"b1": even(2)}), DBA_INDEXES)
            self.built: list[str] = []

        def execute(self, sql, *params):
            head = " ".join(sql.split())
            if sql == self.sql["indexes"] and "staging" in str(params[0]):
                self.sent.append((sql, params))
                self._rows = []             # nothing built on the staging table yet
                return self
            if "INDEX" in head and ("CREATE" in head or "ADD CONSTRAINT" in head):
                self.sent.append((sql, params))
                if duplicates and "PRIMARY KEY" in head:
                    raise pyodbc.IntegrityError("23000", "[23000] [Microsoft][ODBC Driver 18 for SQL Server][SQL "
                                                "Server]The CREATE UNIQUE INDEX statement terminated because a "
                                                "duplicate key was found for the object name 'tpch_staging.orders_1' "
                                                "and the index name 'orders_1__PK_orders'. The duplicate key value "
                                                "is (7). (1505) (SQLExecDirectW)")
                self.built.append(head)
                return self
            if "HAVING COUNT_BIG(*) > 1" in head:
                self.sent.append((sql, params))
                self._rows = list(duplicates or [])
                return self
            return super().execute(sql, *params)

    a = adapter(spec_with())
    session = Session(a)
    scripted(a, session)
    plan = orders_plan(spec_with(), even(2))
    a._plan_table(session, plan.table("orders"))
    return a, session, plan.stream("orders", 1)


def test_a_dbas_unique_index_broken_by_a_batch_fails_its_validation_naming_keys():
    a, session, s = staged_session(duplicates=[(7, 2, 3, 3), (19, 2, 3, 3)])
    found = a.prove_target_uniques(s)
    assert [f["index"] for f in found] == ["tpch.PK_orders"]
    dup = found[0]["duplicates"]
    assert dup["keys"] == 3 and dup["extra_rows"] == 3
    assert dup["examples"] == [{"o_orderkey": 7, "rows": 2}, {"o_orderkey": 19, "rows": 2}]
    query = next(sql for sql, _ in session.sent if "HAVING COUNT_BIG(*) > 1" in sql)
    assert query == ("SELECT TOP (5) [o_orderkey], COUNT_BIG(*) AS n, COUNT_BIG(*) OVER () AS keys, "
                     "SUM(COUNT_BIG(*) - 1) OVER () AS extra FROM [tpch_staging].[orders_1] GROUP BY [o_orderkey] "
                     "HAVING COUNT_BIG(*) > 1 ORDER BY [o_orderkey]")
    assert sqlfluff_parses(query)
    # The validation's outcome: a failed uniqueness check naming the index, before any switch.
    from switchyard.observability.validation import _unique_check
    check = _unique_check(found[0]["columns"], found[0])
    assert not check.success and check.observed["by"] == "unique index tpch.PK_orders"


def test_without_duplicates_the_targets_indexes_are_built_on_the_staging_table_at_validate():
    a, session, s = staged_session(duplicates=None)
    found = a.prove_target_uniques(s)
    assert found[0]["duplicates"] is None and len(session.built) >= 2     # the primary key and the DBA's index
    assert all("[tpch_staging].[orders_1]" in b for b in session.built)


def test_not_null_for_a_table_replaced_whole_is_set_only_where_no_row_holds_null():
    """sync's statement for a table every batch replaces whole (core/spec_diff.py): the NULLs of a
    run that failed after adding the column are left to the batch that replaces them."""
    from switchyard.targets.mssql.spec_change import Statements
    spec = spec_with()
    statement = Statements(adapter(spec), spec.table("orders")).set_not_null_where_none("o_clerk")
    assert statement == ("IF NOT EXISTS (SELECT 1 FROM [tpch].[orders] WHERE [o_clerk] IS NULL) "
                         "ALTER TABLE [tpch].[orders] ALTER COLUMN [o_clerk] char(15) NOT NULL;")
    assert sqlfluff_parses(statement)
