"""The spec against an existing table, without a server (core/spec_diff.py): every difference,
what each policy does with it, and what is never done. The same comparison on the embedded
PostgreSQL: tests/integration/test_spec_changes.py; on SQL Server's catalog: tests/unit/targets/mssql/test_mssql_spec_changes.py."""
from __future__ import annotations

import pytest

from switchyard.core.spec import parse_spec
from switchyard.core.spec_diff import Existing, ExistingColumn, ExistingUnique, Needed, compare, reconcile


class Sql:
    """Statements as plain text, to see which one each difference names."""
    def add_column(self, c, t): return f"ADD {c} {t}"
    def alter_type(self, c, t): return f"TYPE {c} {t}"
    def set_not_null(self, c): return f"SET NOT NULL {c}"
    def set_not_null_where_none(self, c): return f"SET NOT NULL {c} WHERE NONE NULL"
    def drop_not_null(self, c): return f"DROP NOT NULL {c}"
    def add_check(self, n): return f"CHECK {n}"
    def replace_check(self, n): return f"REPLACE CHECK {n}"
    def drop_index(self, n): return f"DROP INDEX {n}"
    def create_unique(self, n, cols): return f"UNIQUE {n} ({', '.join(cols)})"


def table(policy="fail", unique=None, extra=(), partitioned=True, fmt=None):
    columns = [{"name": "id", "type": "bigint"}, {"name": "note", "type": "varchar(5)", "nullable": True},
               *extra]
    raw = {"key": "id", "columns": columns, "on_spec_change": policy, "partitioned": partitioned}
    if unique:
        raw["unique"] = unique
    return parse_spec({"name": "s", "tables": {"t": raw}, **({"format": fmt} if fmt else {})}).table("t")


TYPES = {"id": "bigint", "note": "text", "gust": "integer", "basin": "character(2)", "wind": "integer"}
AS_MADE = (ExistingColumn("id", "bigint", True, False), ExistingColumn("note", "text", False, False))


def differences(t, columns=AS_MADE, uniques=(), checks=frozenset({"note_length"})):
    needed = Needed(types=TYPES, checks={"note_length": "note"},
                    unique_index="t_unique" if t.unique else None)
    return compare(t, Existing(columns=tuple(columns), uniques=tuple(uniques), checks=checks), needed, Sql())


def test_a_table_as_the_spec_made_it_has_no_difference():
    assert differences(table()) == []
    assert differences(table(unique=["id"]), uniques=[ExistingUnique("t_unique", ("id",), True)]) == []


@pytest.mark.parametrize("policy, applied", [("fail", []), ("add_columns", ["ADD gust integer"]),
                                             ("sync", ["ADD gust integer"])])
def test_a_new_nullable_column_is_added_by_add_columns_and_sync_only(policy, applied):
    t = table(policy, extra=[{"name": "gust", "type": "integer", "nullable": True}])
    problems, notes, statements = reconcile(t, differences(t), "s.t")
    assert statements == applied
    assert bool(problems) == (not applied)
    if problems:
        assert problems == ["s.t: column gust (integer) is in the spec, not in the table: the files carry it and no "
                            "staging table can be switched in without it; to bring the table in line, run: ADD gust "
                            "integer (or set on_spec_change: add_columns for t, which runs it)"]


@pytest.mark.parametrize("policy", ["fail", "add_columns", "sync"])
def test_what_no_policy_ever_does(policy):
    t = table(policy, extra=[{"name": "basin", "type": "char(2)"}])
    retyped = (ExistingColumn("id", "integer", True, False), AS_MADE[1],
               ExistingColumn("legacy", "text", True, False), ExistingColumn("old", "text", False, False))
    problems, notes, statements = reconcile(t, differences(t, columns=retyped), "s.t")
    assert statements == []
    assert [p.split(":")[1].strip() for p in problems] == [
        "column id, the partition key, is integer in the table, bigint in the spec",
        "column basin (character(2), NOT NULL) is in the spec, not in the table",
        "NOT NULL column legacy without a default is not in the spec's files"]
    # A partition key's type is not changed in place on either server: no ALTER is offered for it.
    assert "run: ALTER" not in problems[0] and "create the table anew" in problems[0]
    # A nullable column the spec no longer has is kept, and said so.
    assert notes == ["s.t: column old is not in the spec's files: the batch's rows get NULL in it; Switchyard never "
                     "drops a column (it may hold data)"]


def test_sync_reconciles_nullability_checks_and_its_own_unique_index_never_a_dbas():
    wind = [{"name": "wind", "type": "integer"}]
    t = table("sync", unique=["id", "note"], extra=wind)
    existing = (ExistingColumn("id", "bigint", True, False), ExistingColumn("note", "text", True, False),
                ExistingColumn("wind", "integer", False, False))
    uniques = [ExistingUnique("t_unique", ("id",), True), ExistingUnique("t_dba", ("id",), False)]
    problems, notes, statements = reconcile(t, differences(t, existing, uniques, checks=frozenset()), "s.t")
    assert problems == []
    assert statements == ["DROP NOT NULL note", "SET NOT NULL wind", "CHECK note_length", "DROP INDEX t_unique",
                          "UNIQUE t_unique (id, note)"]
    problems, notes, _ = reconcile(t, differences(t, existing, uniques, checks=frozenset({"note_length", "ck_dba"})),
                                   "s.t")
    assert "s.t: CHECK constraint ck_dba is not Switchyard's: every staging table carries it, so the load refuses a " \
           "row that breaks it, naming file and line; it is never dropped" in notes
    assert "s.t: unique index t_dba on (id) is not Switchyard's: each stream's staging table is checked against " \
           "it before anything is published; it is never dropped" in notes
    # Under fail, each of those is a problem naming its statement, but the NOT NULL the table
    # lacks: validation checks it on every batch, so it is said, with its statement.
    failing = table("fail", unique=["id", "note"], extra=wind)
    problems, notes, statements = reconcile(failing, differences(failing, existing, uniques, checks=frozenset()),
                                            "s.t")
    assert statements == [] and len(problems) == 4 and all("to bring the table in line, run: " in p for p in problems)
    assert ("s.t: column wind is nullable in the table, NOT NULL in the spec: validation checks every batch for NULLs "
            "in it; SET NOT NULL (which checks every row once) would make the table say so too (SET NOT NULL wind; "
            "on_spec_change: sync runs it)") in notes


@pytest.mark.parametrize("policy", ["fail", "add_columns", "sync"])
def test_a_check_whose_text_differs_from_the_specs_is_refused_or_replaced_by_sync(policy):
    """A varchar(n) the spec widened or narrowed: the table's length CHECK holds the old n, and a
    staging table takes the table's constraints."""
    t = table(policy)
    needed = Needed(types=TYPES, checks={"note_length": "note"}, check_defs={"note_length": "CHECK (len <= 5)"})
    existing = Existing(columns=AS_MADE, checks=frozenset({"note_length"}), check_defs={"note_length": "CHECK (len <= 3)"})
    problems, notes, statements = reconcile(t, compare(t, existing, needed, Sql()), "s.t")
    if policy == "sync":
        assert statements == ["REPLACE CHECK note_length"] and problems == []
        assert notes == ["s.t: the CHECK note_length on note is CHECK (len <= 3) in the table, CHECK (len <= 5) for the "
                         "spec; on_spec_change: sync ran: REPLACE CHECK note_length"]
    else:
        assert statements == [] and len(problems) == 1
        assert problems[0].startswith("s.t: the CHECK note_length on note is CHECK (len <= 3) in the table, CHECK "
                                      "(len <= 5) for the spec: a staging table takes the table's constraints")
        assert problems[0].endswith("; to bring the table in line, run: REPLACE CHECK note_length (or set "
                                    "on_spec_change: sync for t, which runs it)")
    # The same text: no difference.
    same = Existing(columns=AS_MADE, checks=frozenset({"note_length"}), check_defs={"note_length": "CHECK (len <= 5)"})
    assert compare(t, same, needed, Sql()) == []


@pytest.mark.parametrize("policy, applied", [("fail", []), ("add_columns", ["ADD basin character(2)"]),
                                             ("sync", ["ADD basin character(2)"])])
def test_a_new_not_null_column_of_a_table_replaced_whole_is_added_nullable(policy, applied):
    """An unpartitioned table's rows are all replaced by each batch: the rows it holds until then
    are the only ones the new column has no value for, so add_columns adds it (nullable); the same
    column of a partitioned table stays refused under every policy (above)."""
    t = table(policy, extra=[{"name": "basin", "type": "char(2)"}], partitioned=False)
    problems, notes, statements = reconcile(t, differences(t), "s.t")
    assert statements == applied
    if problems:
        assert problems == ["s.t: column basin (character(2), NOT NULL) is in the spec, not in the table: the table "
                            "is replaced whole by every batch: the column is added nullable (readers see NULL in it "
                            "until this batch's rows replace the table's), every batch is checked for NULLs in it, and "
                            "sync sets NOT NULL once its rows are in; to bring the table in line, run: ADD basin "
                            "character(2) (or set on_spec_change: add_columns for t, which runs it)"]



@pytest.mark.parametrize("partitioned, statement", [(True, "SET NOT NULL basin"),
                                                     (False, "SET NOT NULL basin WHERE NONE NULL")])
def test_sync_sets_not_null_on_a_table_replaced_whole_only_where_no_row_holds_null(partitioned, statement):
    """The column added nullable to a table replaced whole may hold NULLs of rows the batch's
    publish replaces (a run failed after setup added it): sync's SET NOT NULL runs only where none
    is left, so it never refuses that batch; a partitioned table's rows stay, so it is plain there."""
    t = table("sync", extra=[{"name": "basin", "type": "char(2)"}], partitioned=partitioned)
    columns = (*AS_MADE, ExistingColumn("basin", "character(2)", False, False))
    problems, notes, statements = reconcile(t, differences(t, columns), "s.t")
    assert problems == [] and statements == [statement]


def test_the_length_check_of_a_column_an_earlier_spec_had_is_said_to_be_switchyards():
    """A batch loaded with a spec older than the table (a varchar column added since, with its
    length CHECK): the CHECK is named as Switchyard's, made with that column; a DBA's stays a DBA's."""
    t = table()
    columns = (*AS_MADE, ExistingColumn("memo", "text", False, False))
    needed = Needed(types=TYPES, checks={"note_length": "note"}, former_checks={"memo_length": "memo"})
    found = compare(t, Existing(columns=columns, checks=frozenset({"note_length", "memo_length", "ck_dba"})),
                    needed, Sql())
    problems, notes, statements = reconcile(t, found, "s.t")
    assert problems == [] and statements == []
    assert notes == [
        "s.t: CHECK constraint ck_dba is not Switchyard's: every staging table carries it, so the load refuses a row "
        "that breaks it, naming file and line; it is never dropped",
        "s.t: CHECK constraint memo_length on column memo is Switchyard's, made with the column by a spec that had "
        "it: the column is not in this spec's files: the batch's rows get NULL in it, which the CHECK lets through; "
        "both stay",
        "s.t: column memo is not in the spec's files: the batch's rows get NULL in it; Switchyard never drops a "
        "column (it may hold data)"]


def test_a_column_made_not_null_says_its_null_marker_is_a_value_from_now_on():
    """With a null_marker, a column the spec makes NOT NULL takes the marker's fields as values
    (FileFormat.null_marker): a producer's missing values would load as that text, unrefused. The
    note says so when the change is made."""
    basin = [{"name": "basin", "type": "char(2)"}]
    existing = (*AS_MADE, ExistingColumn("basin", "character(2)", False, False))
    marked = table("fail", extra=basin, fmt={"delimiter": ",", "null_marker": ""})
    _, notes, _ = reconcile(marked, differences(marked, existing), "s.t")
    plain = table("fail", extra=basin)
    assert not any("null_marker" in n for n in reconcile(plain, differences(plain, existing), "s.t")[1])
    assert any("column basin is nullable in the table, NOT NULL in the spec" in n and "from now on a field '' (the "
               "format's null_marker) in this column is a value, not NULL: it loads as that text, and no check "
               "refuses it" in n for n in notes), notes
    # A number's or a date's empty field is refused by the check: nothing to say.
    number = table("fail", extra=[{"name": "wind", "type": "integer"}], fmt={"delimiter": ",", "null_marker": ""})
    assert not any("null_marker" in n for n in reconcile(
        number, differences(number, (*AS_MADE, ExistingColumn("wind", "integer", False, False))), "s.t")[1])
