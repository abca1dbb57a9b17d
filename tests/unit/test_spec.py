"""The spec's format keys, read without a database."""
from __future__ import annotations

import pytest

from switchyard.core.spec import SpecError, parse_spec


def _spec(**fmt) -> dict:
    return {"name": "x", "files": "{table}.{stream}.txt", "format": fmt,
            "tables": {"t": {"partitioned": False, "columns": [{"name": "a", "type": "integer"},
                                                                {"name": "b", "type": "text", "nullable": True}]}}}


def test_a_backslash_n_null_marker_is_refused_saying_what_such_an_export_needs():
    """`\\N` is the NULL of backslash-escaped exports, whose other escapes would be loaded as
    they are (`\\\\` as two backslashes): refused, with the export that is read exactly."""
    with pytest.raises(SpecError, match=r"\\N is the NULL of a backslash-escaped export .* Export as CSV instead"):
        parse_spec(_spec(delimiter="\t", null_marker="\\N"), source="x.yaml")
    # Another marker with a backslash is refused as before, without the export's words.
    with pytest.raises(SpecError) as refused:
        parse_spec(_spec(delimiter="\t", null_marker="\\0"), source="x.yaml")
    assert "backslash-escaped" not in str(refused.value)
    assert parse_spec(_spec(delimiter="\t", null_marker="NULL"), source="x.yaml").format.null_marker == "NULL"


def test_a_partitioned_tables_unique_columns_without_its_key_are_refused_naming_the_fix():
    """A unique index on a partitioned table holds within each partition only (PostgreSQL needs the
    partition key in it; SQL Server's aligned index has it): unique columns without the key would
    be checked per partition, and a value in two partitions would load with the run a success."""
    def spec(unique, partitioned=True):
        return {"name": "c", "files": "{table}/{table}.{stream}.csv", "format": {"delimiter": ","},
                "tables": {"claims": {"key": "claim_date", "partitioned": partitioned, "unique": unique,
                                      "columns": [{"name": "claim_id", "type": "varchar(20)"},
                                                  {"name": "claim_date", "type": "date"}]}}}
    with pytest.raises(SpecError) as refused:
        parse_spec(spec(["claim_id"]), source="claims.yaml")
    assert ("tables.claims.unique (claim_id) leaves out the partition key claim_date. A unique index on a "
            "partitioned table holds within each partition only, so the target cannot keep (claim_id) unique "
            "across the table: list the key in unique too (claim_id, claim_date, unique together), or leave unique "
            "out and check it upstream") in str(refused.value)
    assert parse_spec(spec(["claim_id", "claim_date"])).table("claims").unique == ("claim_id", "claim_date")
    assert parse_spec(spec(True)).table("claims").unique == ("claim_date",)
    # A table loaded whole has no partitions: any of its columns can be unique.
    assert parse_spec(spec(["claim_id"], partitioned=False)).table("claims").unique == ("claim_id",)


def test_a_uniqueness_expectation_without_the_partition_key_is_refused_as_a_check_of_each_stream_alone():
    """Each stream's staging table is validated on its own rows: `expect_column_values_to_be_unique`
    on a column of a partitioned table other than its key would pass a value in two streams (or in
    an earlier batch), and the run end `success` with the column not unique. Refused, naming the
    fix; with the key among the columns, or on a table loaded whole, it holds across the table."""
    def spec(kind, kwargs, partitioned=True):
        return {"name": "b", "files": "{table}/{table}.{stream}.csv", "format": {"delimiter": ","},
                "tables": {"invoices": {"key": "issued_at", "partitioned": partitioned,
                                        "expectations": [{"type": "expect_column_values_to_be_between",
                                                          "kwargs": {"column": "amount", "min_value": 0}},
                                                         {"type": kind, "kwargs": kwargs}],
                                        "columns": [{"name": "invoice_id", "type": "bigint"},
                                                    {"name": "issued_at", "type": "timestamp"},
                                                    {"name": "amount", "type": "numeric(12,2)"}]}}}
    with pytest.raises(SpecError) as refused:
        parse_spec(spec("expect_column_values_to_be_unique", {"column": "invoice_id"}), source="billing.yaml")
    assert ("tables.invoices.expectations[1]: expect_column_values_to_be_unique on invoice_id would be checked on "
            "each stream's rows alone") in str(refused.value)
    assert ("unique across the table only with the partition key issued_at: name it too "
            "(expect_compound_columns_to_be_unique on invoice_id, issued_at, or unique: invoice_id, issued_at), or "
            "check it upstream") in str(refused.value)
    with pytest.raises(SpecError, match=r"expect_compound_columns_to_be_unique on invoice_id, amount would be"):
        parse_spec(spec("expect_compound_columns_to_be_unique", {"column_list": ["invoice_id", "amount"]}))
    parse_spec(spec("expect_compound_columns_to_be_unique", {"column_list": ["invoice_id", "issued_at"]}))
    parse_spec(spec("expect_column_values_to_be_unique", {"column": "issued_at"}))
    parse_spec(spec("expect_column_values_to_be_unique", {"column": "invoice_id"}, partitioned=False))


def test_a_key_of_several_columns_is_refused_pointing_to_unique():
    raw = {"name": "fx", "files": "{table}/{table}.{stream}.csv", "format": {"delimiter": ","},
           "tables": {"fx_rates": {"partitioned": False, "key": ["currency", "day"],
                                   "columns": [{"name": "currency", "type": "char(3)"}, {"name": "day", "type": "date"}]}}}
    with pytest.raises(SpecError, match=r"tables.fx_rates.key: one column, the table's key .*; columns unique together "
                                        r"go in unique: currency, day"):
        parse_spec(raw)


def test_each_wrong_tables_problem_is_said_at_once():
    """Two tables wrong in a spec: both problems in one refusal, not the second after the first is fixed."""
    raw = {"name": "b", "files": "{table}/{table}.{stream}.csv", "format": {"delimiter": ","},
           "tables": {"invoices": {"key": "issued_at", "columns": [{"name": "issued_at", "type": "timestamptz"}]},
                      "fx_rates": {"partitioned": False, "key": ["currency", "day"],
                                   "columns": [{"name": "currency", "type": "char(3)"}, {"name": "day", "type": "date"}]},
                      "ok": {"partitioned": False, "columns": [{"name": "a", "type": "integer"}]}}}
    with pytest.raises(SpecError) as refused:
        parse_spec(raw, source="b.yaml")
    lines = str(refused.value).splitlines()
    assert len(lines) == 2 and lines[0].startswith("b.yaml: tables.invoices.key") and \
        lines[1].startswith("b.yaml: tables.fx_rates.key: one column"), lines


def test_each_wrong_columns_problem_is_said_at_once():
    """Two columns of one table wrong: both in one refusal, as two tables' problems are."""
    raw = {"name": "b", "files": "{table}/{table}.{stream}.csv",
           "tables": {"payments": {"key": "id", "columns": [
               {"name": "id", "type": "bigint"}, {"name": "amount", "type": "decimal(12,2"},
               {"name": "booked", "type": "date", "nullable": "yes"}]}}}
    with pytest.raises(SpecError) as refused:
        parse_spec(raw, source="b.yaml")
    lines = str(refused.value).splitlines()
    assert len(lines) == 2 and lines[0].startswith("b.yaml: tables.payments.columns[1]") and \
        lines[1].startswith("b.yaml: tables.payments.columns[2].nullable: true or false"), lines


def test_allow_empty_goes_with_an_append_table_only():
    """A batch without rows of a table in replace mode, or of one loaded whole, would empty it:
    allow_empty is refused there, and read as a boolean only."""
    def spec(**table):
        return {"name": "x", "files": "{table}.{stream}.txt", "tables": {"t": {
            "key": "a", "columns": [{"name": "a", "type": "integer"}], **table}}}
    assert parse_spec(spec(mode="append", allow_empty=True), source="x.yaml").table("t").allow_empty is True
    assert parse_spec(spec(mode="append"), source="x.yaml").table("t").allow_empty is False
    with pytest.raises(SpecError, match=r"tables\.t\.allow_empty: goes with mode: append \(a batch with no rows"):
        parse_spec(spec(allow_empty=True), source="x.yaml")
    with pytest.raises(SpecError, match=r"allow_empty: goes with mode: append"):
        parse_spec(spec(partitioned=False, allow_empty=True), source="x.yaml")
    with pytest.raises(SpecError, match=r"allow_empty: true or false"):
        parse_spec(spec(mode="append", allow_empty="yes"), source="x.yaml")


def test_optional_is_read_as_a_boolean_and_leaves_the_digest_of_a_spec_without_it_alone():
    """`optional: true` on any table; a spec that does not use it digests as it did before the key
    existed, so a run planned by the previous version is not taken for a spec changed under it."""
    def spec(**table):
        return {"name": "x", "files": "{table}.{stream}.txt", "tables": {"t": {
            "key": "a", "columns": [{"name": "a", "type": "integer"}], **table}}}
    assert parse_spec(spec(optional=True), source="x.yaml").table("t").optional is True
    assert parse_spec(spec(partitioned=False, optional=True), source="x.yaml").table("t").optional is True
    with pytest.raises(SpecError, match=r"tables\.t\.optional: true or false"):
        parse_spec(spec(optional="yes"), source="x.yaml")
    plain, marked = parse_spec(spec(), source="x.yaml"), parse_spec(spec(optional=True), source="x.yaml")
    assert plain.digests()["t"] != marked.digests()["t"]
    assert plain.digests()["t"] == parse_spec(spec(optional=False), source="x.yaml").digests()["t"]


def test_a_columns_unknown_entries_are_refused_naming_them_and_where_they_belong():
    """A misspelt or misplaced entry on a column, taken for its default, would change what loads:
    `nulable: true` left the column NOT NULL, and its empty fields loaded as '' instead of NULL,
    the run a success. Refused, each named, with where the misplaced ones belong."""
    def spec(column):
        raw = _spec(delimiter=",", null_marker="")
        raw["tables"]["t"]["columns"][1] = column
        return raw
    with pytest.raises(SpecError) as refused:
        parse_spec(spec({"name": "b", "type": "text", "nulable": True}), source="x.yaml")
    assert "tables.t.columns[1]: unknown entries nulable (known: name, type, nullable)" in str(refused.value)
    with pytest.raises(SpecError) as refused:
        parse_spec(spec({"name": "b", "type": "text", "unique": True, "null_marker": "NA"}), source="x.yaml")
    said = str(refused.value)
    assert "unknown entries null_marker, unique (known: name, type, nullable)" in said, said
    assert "null_marker belongs to the table's or the spec's `format`" in said, said
    assert "unique belongs to the table's `unique`: a list of columns unique together, or `true` (its key)" in said
    with pytest.raises(SpecError, match=r"columns\[1\]: a mapping of name, type, nullable, not 'b text'"):
        parse_spec(spec("b text"), source="x.yaml")
    # The three known entries are taken as before.
    assert parse_spec(spec({"name": "b", "type": "text", "nullable": True}), source="x.yaml").table("t").columns[1].nullable
