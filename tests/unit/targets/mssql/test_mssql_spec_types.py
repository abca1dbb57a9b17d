"""A spec's column types on each target. One type for every target is neutral: each engine reads
it in its own words (timestamp is datetime2 on SQL Server, where `timestamp` means rowversion;
datetime2(3) is timestamp(3) on PostgreSQL). A type given for one target is that engine's own,
taken as written, and refused by its adapter, with the type that fixes it, where it means
something else there. `switchyard plan --target mssql` ends in a message, never a traceback."""
from __future__ import annotations

import pytest

from switchyard.core.spec import SpecError, parse_spec
from switchyard.targets import TargetError
from switchyard.targets.mssql import types as mssql_types
from switchyard.targets.postgres import types as postgres_types


def one_column(sql_type, partitioned=True):
    return parse_spec({"name": "x", "tables": {"t": {"key": "k", "partitioned": partitioned,
                                                      "columns": [{"name": "k", "type": sql_type}]}}})


def on_each(spec):
    column = spec.table("t").column("k")
    return postgres_types.column_type(column), mssql_types.column_type(column)


@pytest.mark.parametrize("declared, postgres, mssql", [
    ("timestamp", "timestamp", "datetime2(6)"),
    ("timestamp(3)", "timestamp(3)", "datetime2(3)"),
    ("datetime2(3)", "timestamp(3)", "datetime2(3)"),
    ("datetime2(7)", "timestamp(6)", "datetime2(7)"),
    ("datetime", "timestamp(3)", "datetime"),
    ("tinyint", "smallint", "tinyint"),
    ("bigint", "bigint", "bigint"),
    ("date", "date", "date"),
    # The neutral type with one target's own beside it.
    ({"default": "timestamp", "mssql": "datetime2(7)"}, "timestamp", "datetime2(7)"),
])
def test_a_neutral_type_is_read_in_each_engines_words(declared, postgres, mssql):
    assert on_each(one_column(declared)) == (postgres, mssql)


@pytest.mark.parametrize("declared, postgres, mssql", [
    ("boolean", "boolean", "bit"), ("uuid", "uuid", "uniqueidentifier"), ("nvarchar(40)", "varchar(40)", "nvarchar(40)"),
    ("timestamptz", "timestamptz", "datetimeoffset(6)"),
])
def test_neutral_types_of_unpartitioned_columns(declared, postgres, mssql):
    assert on_each(one_column(declared, partitioned=False)) == (postgres, mssql)


@pytest.mark.parametrize("declared, module, message", [
    ({"postgres": "timestamp", "mssql": "timestamp"}, mssql_types,
     "column k: 'timestamp' is not a SQL Server type for this column (there it means rowversion, a row version "
     "counter); give mssql: datetime2(6), or one type for every target (timestamp)"),
    ({"postgres": "datetime2(3)", "mssql": "datetime2(3)"}, postgres_types,
     "column k: 'datetime2(3)' is not a PostgreSQL type for this column; give postgres: timestamp(3), or one type "
     "for every target (datetime2(3))"),
    ({"postgres": "bigint"}, mssql_types,
     "column k: the spec gives no type for mssql (it gives one for postgres); add one, or give one type for every "
     "target"),
    ({"mssql": "bigint"}, postgres_types,
     "column k: the spec gives no type for postgres (it gives one for mssql); add one, or give one type for every "
     "target"),
])
def test_an_engines_own_type_that_means_something_else_there_is_refused_with_the_fix(declared, module, message):
    with pytest.raises(TargetError) as exc:
        module.column_type(one_column(declared).table("t").column("k"))
    assert str(exc.value) == message and exc.value.permanent


@pytest.mark.parametrize("declared", ["numeric", "decimal"])
def test_a_neutral_decimal_without_a_precision_is_refused_on_sql_server_which_would_round_it(declared):
    """PostgreSQL's numeric keeps every digit; SQL Server's is decimal(18,0), to which 12.34
    loads as 12 without an error. One type for every target must mean one value."""
    column = one_column(declared, partitioned=False).table("t").column("k")
    assert postgres_types.column_type(column) == declared
    with pytest.raises(TargetError) as exc:
        mssql_types.column_type(column)
    assert exc.value.permanent and str(exc.value) == (
        f"column k: {declared!r} without a precision keeps every digit on PostgreSQL but is decimal(18,0) on SQL "
        f"Server, where the load would round each fraction away without an error (12.34 stored as 12); give it a "
        f"precision and scale ({declared}(18,4)), or a type for mssql")
    # SQL Server's own, taken as written: a DBA's decimal is decimal(18,0) by choice.
    own = parse_spec({"name": "x", "tables": {"t": {"partitioned": False, "columns": [
        {"name": "k", "type": {"default": declared, "mssql": "decimal(18,4)"}}]}}}).table("t").column("k")
    assert mssql_types.column_type(own) == "decimal(18,4)"


@pytest.mark.parametrize("declared", ["bigint primary key", "int identity", "int not null", "char default"])
def test_a_column_definition_is_not_a_type(declared):
    with pytest.raises(SpecError, match="is not a type"):
        one_column(declared, partitioned=False)


@pytest.mark.parametrize("declared", ["double precision", "character varying(20)", "bigint",
                                      {"postgres": "timestamp", "mssql": "datetime2(7)"},
                                      {"postgres": "timestamp(3)", "mssql": "datetime"}])
def test_types_both_targets_read_alike_pass(declared):
    one_column(declared, partitioned=not (isinstance(declared, str) and declared[0] in "dc"))


def test_a_key_of_two_kinds_is_refused_by_the_spec_check():
    with pytest.raises(SpecError, match="is of a different kind on each target"):
        one_column({"postgres": "timestamp", "mssql": "bigint"})


def test_plan_renders_a_neutral_timestamp_key_as_datetime2_and_refuses_an_own_timestamp_without_a_traceback(tmp_path):
    from test_mssql_cli import switchyard
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\ntables:\n  t:\n    key: at\n    columns:\n      - {name: at, type: timestamp}\n")
    batch = tmp_path / "b"
    (batch / "t").mkdir(parents=True)
    (batch / "t" / "t.1.tbl").write_text("2026-01-01 00:00:00|\n")
    made = switchyard("manifest", str(batch), "--spec", str(spec))
    assert made.returncode == 0, made.stderr
    run = switchyard("plan", "--target", "mssql", "--spec", str(spec), "--batch", str(batch))
    assert run.returncode == 0, run.stderr
    assert "[at] datetime2(6) NOT NULL" in run.stdout
    spec.write_text("name: s\ntables:\n  t:\n    key: at\n    columns:\n"
                    "      - {name: at, type: {postgres: timestamp, mssql: timestamp}}\n")
    run = switchyard("plan", "--target", "mssql", "--spec", str(spec), "--batch", str(batch))
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert "give mssql: datetime2(6)" in run.stderr


def test_a_spec_refusal_is_never_retried():
    from switchyard.targets import permanent_reason
    assert permanent_reason(None, SpecError("tables.t.columns[0].type: ...")) == "permanent"
