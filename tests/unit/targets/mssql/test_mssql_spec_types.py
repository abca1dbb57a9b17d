"""A spec's column types per target: a type with no meaning, or another meaning, on a target is
refused by the spec check with the per-target declaration that fixes it; `switchyard plan
--target mssql` ends in a message, never a traceback, for any spec."""
from __future__ import annotations

import pytest

from switchyard.core.spec import SpecError, parse_spec


def one_column(sql_type, partitioned=True):
    return parse_spec({"name": "x", "tables": {"t": {"key": "k", "partitioned": partitioned,
                                                      "columns": [{"name": "k", "type": sql_type}]}}})


@pytest.mark.parametrize("declared, message", [
    ("timestamp", "'timestamp' is not a SQL Server type for this column (there it means rowversion, a row version "
                  "counter); give one type per target: {postgres: timestamp, mssql: datetime2(6)}"),
    ("timestamp(3)", "give one type per target: {postgres: timestamp(3), mssql: datetime2(3)}"),
    ({"postgres": "timestamp", "mssql": "timestamp"}, "{postgres: timestamp, mssql: datetime2(6)}"),
    ("datetime2(3)", "'datetime2(3)' is not a PostgreSQL type for this column; give one type per target: "
                     "{postgres: timestamp(3), mssql: datetime2(3)}"),
    ("datetime", "{postgres: timestamp(3), mssql: datetime}"),
    ("tinyint", "{postgres: smallint, mssql: tinyint}"),
    ("boolean", "{postgres: boolean, mssql: bit}"),
])
def test_a_type_another_target_reads_otherwise_is_refused_with_the_fix(declared, message):
    with pytest.raises(SpecError) as exc:
        one_column(declared, partitioned=not isinstance(declared, str) or declared != "boolean")
    assert message in str(exc.value)


@pytest.mark.parametrize("declared", ["bigint primary key", "int identity", "int not null", "char default"])
def test_a_column_definition_is_not_a_type(declared):
    with pytest.raises(SpecError, match="is not a type"):
        one_column(declared, partitioned=False)


@pytest.mark.parametrize("declared", ["double precision", "character varying(20)", "bigint",
                                      {"postgres": "timestamp", "mssql": "datetime2(7)"},
                                      {"postgres": "timestamp(3)", "mssql": "datetime"}])
def test_types_both_targets_read_alike_pass(declared):
    one_column(declared, partitioned=not (isinstance(declared, str) and declared[0] in "dc"))


def test_plan_refuses_a_timestamp_key_by_the_spec_check_without_a_traceback(tmp_path):
    from test_mssql_cli import switchyard
    spec = tmp_path / "s.yaml"
    spec.write_text("name: s\ntables:\n  t:\n    key: at\n    columns:\n      - {name: at, type: timestamp}\n")
    run = switchyard("plan", "--target", "mssql", "--spec", str(spec), "--batch", str(tmp_path))
    assert run.returncode != 0 and "Traceback" not in run.stderr, run.stderr
    assert "{postgres: timestamp, mssql: datetime2(6)}" in run.stderr
