"""core/value_guard.py: every record of a file read on its way to the load, at every chunk size,
with and without quoting; what a server would change refused with its place, the rest passed."""
from __future__ import annotations

import pytest

from switchyard.core.spec import parse_spec
from switchyard.core.value_guard import ChangedValue, value_guard

COLUMNS = [{"name": "id", "type": "bigint"}, {"name": "note", "type": "text"},
           {"name": "price", "type": "numeric(12,2)"}, {"name": "day", "type": "date"},
           {"name": "at", "type": "timestamp(3)", "nullable": True}, {"name": "tail", "type": "varchar(20)"}]


def _table(**fmt):
    spec = parse_spec({"name": "g", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": "|", "trailing_delimiter": False, "null_marker": "", **fmt},
                       "tables": {"t": {"partitioned": False, "key": "id", "columns": COLUMNS}}})
    return spec.table("t")


GOOD = [b"1|plain|12.50|2026-03-01|2026-03-01 10:00:00.125|x",
        b"2|trailing zeros past the scale|12.5000|2026-03-01||y",
        b"3|an exponent that stays the number|1.25e1|2026-02-28|2026-03-01T23:59:59|z",
        b"4|another form the server reads itself| 7 |2026-02-28|2026-03-01 10:00|w",
        b"5|not a date at all: the load refuses it|1|2026-02-30|2026-03-01 10:00|w",
        b"6|a field count the load names|1",
        b"7|a date at midnight, as a timestamp's export writes it|1|2026-03-01 00:00:00||x"]


def _run(table, data: bytes, size: int) -> bytes:
    guard = value_guard(table, "postgres")
    chunks = [data[i:i + size] for i in range(0, len(data), size)]
    return b"".join(guard.chunks(chunks))


@pytest.mark.parametrize("size", [1, 2, 7, 64, 1 << 20])
def test_records_no_server_changes_pass_unchanged_at_every_chunk_size(size):
    data = b"\n".join(GOOD) + b"\n"
    assert _run(_table(), data, size) == data
    assert _run(_table(), data.rstrip(b"\n"), size) == data.rstrip(b"\n")   # no line end after the last
    crlf = data.replace(b"\n", b"\r\n")
    assert _run(_table(), crlf, size) == crlf


BAD = [(b"7|x|12.345|2026-03-01||x", "price", "12.345", "3 digits after the point"),
       (b"7|x|1.2345e1|2026-03-01||x", "price", "1.2345e1", "3 digits after the point"),
       (b"7|x|1|2026-03-01 10:00|2026-03-01 10:00|x", "day", "2026-03-01 10:00", "a time of day"),
       (b"7|x|1|2026-03-01+02|2026-03-01 10:00|x", "day", "2026-03-01+02", "a time zone"),
       (b"7|x|1|today|2026-03-01 10:00|x", "day", "today", "the load's own date or time"),
       (b"7|x|1|2026-03-01|2026-03-01 10:00:00.1234|x", "at", "2026-03-01 10:00:00.1234", "keeps 3"),
       (b"7|x|1|2026-03-01|2026-03-01T10:00:00Z|x", "at", "2026-03-01T10:00:00Z", "a time zone (Z)"),
       (b"7|x|1|2026-03-01|2026-03-01 24:00:00|x", "at", "2026-03-01 24:00:00", "not a time of day"),
       (b"7|x|1|2026-03-01|2026-03-01 10:00:60|x", "at", "2026-03-01 10:00:60", "not a time of day")]


@pytest.mark.parametrize("size", [1, 5, 1 << 20])
@pytest.mark.parametrize("line, column, text, why", BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_a_field_a_server_would_change_is_refused_with_its_record_and_column(line, column, text, why, size):
    before = b"\n".join(GOOD[:5]) + b"\n"
    data = before + line + b"\n" + GOOD[0] + b"\n"
    with pytest.raises(ChangedValue) as caught:
        _run(_table(), data, size)
    assert (caught.value.offset, caught.value.column, caught.value.text) == (len(before), column, text)
    assert why in caught.value.why, caught.value.why
    # The same record last, without a line end after it.
    with pytest.raises(ChangedValue):
        _run(_table(), before + line, size)


@pytest.mark.parametrize("size", [1, 3, 1 << 20])
def test_with_quoting_a_quoted_field_and_quoted_line_breaks_are_read_as_records(size):
    table = _table(quoting="csv")
    good = (b'1|"a|b\nc"|"12.50"|2026-03-01||x\n'
            b'2|"say ""hi"""|12.5|"2026-03-01"|"2026-03-01 10:00"|"multi\r\nline"\n')
    assert _run(table, good, size) == good
    bad = good + b'3|"\n\n"|"12.345"|2026-03-01||x\n'
    with pytest.raises(ChangedValue) as caught:
        _run(table, bad, size)
    assert (caught.value.offset, caught.value.column, caught.value.text) == (len(good), "price", "12.345")


def test_the_null_marker_passes_only_where_the_column_is_nullable():
    table = _table(null_marker="NA")
    assert _run(table, b"1|x|1|2026-03-01|NA|x\n", 1 << 20)
    with pytest.raises(ChangedValue, match="not a decimal"):     # NOT NULL: "NA" is a value
        _run(table, b"1|x|NA|2026-03-01|2026-03-01|x\n", 1 << 20)


def test_a_quoted_null_marker_is_a_value_as_the_servers_csv_reader_takes_it():
    """With quoting csv only the unquoted marker is NULL: a quoted one is a value, checked as one."""
    table = _table(quoting="csv", null_marker="today")
    assert _run(table, b"1|x|1|2026-03-01|today|x\n", 1 << 20)
    with pytest.raises(ChangedValue, match="the load's own date or time"):
        _run(table, b'1|x|1|2026-03-01|"today"|x\n', 1 << 20)


def test_a_field_the_check_cannot_read_is_refused_not_passed():
    with pytest.raises(ChangedValue, match="exponent out of range"):
        _run(_table(), b"1|x|1e999999999999999999999999|2026-03-01||x\n", 1 << 20)


def test_beside_a_load_a_file_the_worker_cannot_read_fails_it_and_a_changed_field_after_the_load(tmp_path):
    """read_beside: whatever stopped the reading is raised once the load is done, never lost."""
    from switchyard.core.value_guard import read_beside
    guard = value_guard(_table(), "postgres")
    with pytest.raises(OSError):
        with read_beside(guard, tmp_path / "missing.txt", 0):
            pass
    path = tmp_path / "t.txt"
    path.write_bytes(b"\n".join(GOOD) + b"\n" + BAD[0][0] + b"\n")
    loaded = []
    with pytest.raises(ChangedValue):
        with read_beside(guard, path, 0):
            loaded.append(True)
    assert loaded == [True]


def test_a_table_without_a_column_at_risk_has_no_guard():
    spec = parse_spec({"name": "g", "files": "{table}.{stream}", "format": {"delimiter": ","},
                       "tables": {"t": {"partitioned": False, "key": "id", "columns": [
                           {"name": "id", "type": "varchar(8)"}, {"name": "s", "type": "text"},
                           {"name": "b", "type": {"postgres": "boolean"}}]}}})
    assert value_guard(spec.table("t"), "postgres") is None


def test_a_float_or_an_unscaled_numeric_the_server_would_read_as_another_number_is_refused():
    """PostgreSQL reads `0x10` into a float or a numeric as 16, and `inf` into a numeric as
    Infinity; its own float's `inf` and `nan` are its values, as written. A float for every
    target takes neither: SQL Server's float holds no NaN or infinity."""
    spec = parse_spec({"name": "g", "files": "{table}.{stream}", "format": {"delimiter": ","},
                       "tables": {"t": {"partitioned": False, "key": "x", "columns": [
                           {"name": "x", "type": {"postgres": "double precision"}},
                           {"name": "n", "type": {"postgres": "numeric"}}, {"name": "f", "type": "float"}]}}})
    guard = value_guard(spec.table("t"), "postgres")
    good = b"1.5,2,1\n-.25,1e3,2.5\n 7 ,-0.5,3\ninf,12.34567,4\nNaN,1E-3,5e2\n"
    assert b"".join(guard.chunks([good])) == good
    for line, column in ((b"0x10,1,1", "x"), (b"1_000.5,1,1", "x"), (b"1,0x10,1", "n"), (b"1,inf,1", "n"),
                         (b"1,1,NaN", "f"), (b"1,1,-inf", "f")):
        with pytest.raises(ChangedValue) as caught:
            b"".join(guard.chunks([good + line + b"\n"]))
        assert (caught.value.offset, caught.value.column) == (len(good), column), line
    # Decimal digits pass on one match: one past the range (`1e400`) is the load's error, naming its line.
    assert b"".join(guard.chunks([good + b"1,1,1e400\n"])) == good + b"1,1,1e400\n"


@pytest.mark.parametrize("line, column, text, why", [
    (b"0x1F,true,1", "id", "0x1F", "not an integer"), (b"0o7,true,1", "id", "0o7", "not an integer"),
    (b"-0b11,true,1", "id", "-0b11", "not an integer"), (b"1_000,true,1", "id", "1_000", "not an integer"),
    (b"1,yes,1", "paid", "yes", "not a boolean"), (b"1,true,2", "flag", "2", "not a boolean")])
def test_an_integer_or_a_boolean_a_server_would_read_as_another_value_is_refused(line, column, text, why):
    """PostgreSQL 16 reads `0x1F` into an integer as 31 (`0o7`, `0b11`, `1_000` likewise), SQL
    Server's bit any number but 0 as 1; a boolean for every target takes what both read alike."""
    spec = parse_spec({"name": "g", "files": "{table}.{stream}", "format": {"delimiter": ","},
                       "tables": {"t": {"partitioned": False, "key": "id", "columns": [
                           {"name": "id", "type": "integer"}, {"name": "paid", "type": "boolean"},
                           {"name": "flag", "type": {"postgres": "boolean", "mssql": "bit"}}]}}})
    guard = value_guard(spec.table("t"), "mssql")
    good = b"1,true,1\n-2,0,0\n+3,FALSE,TRUE\n 4 ,1,false\n"
    assert b"".join(guard.chunks([good])) == good
    with pytest.raises(ChangedValue) as caught:
        b"".join(guard.chunks([good + line + b"\n"]))
    assert (caught.value.offset, caught.value.column, caught.value.text) == (len(good), column, text)
    assert why in caught.value.why, caught.value.why
    # PostgreSQL's own boolean reads its words as they are meant: `flag`'s `2` is its load's error.
    if column != "flag":
        with pytest.raises(ChangedValue):
            b"".join(value_guard(spec.table("t"), "postgres").chunks([good + line + b"\n"]))


def test_the_guard_reads_the_type_for_its_own_target():
    """A column typed per target is read as the loading target's type."""
    spec = parse_spec({"name": "g", "files": "{table}.{stream}", "format": {"delimiter": "|"},
                       "tables": {"t": {"partitioned": False, "key": "id", "columns": [
                           {"name": "id", "type": "bigint"},
                           {"name": "v", "type": {"postgres": "numeric(10,4)", "mssql": "decimal(10,2)"}}]}}})
    table = spec.table("t")
    data = b"1|1.2345|\n"
    assert b"".join(value_guard(table, "postgres").chunks([data])) == data
    with pytest.raises(ChangedValue):
        b"".join(value_guard(table, "mssql").chunks([data]))


@pytest.mark.parametrize("size", [997, 1 << 16])
def test_a_quoted_field_over_many_chunks_is_held_whole_and_the_record_read_once_it_ends(size):
    """A record whose quoted field spans many chunks is checked once a chunk ends it: its parts are
    held until then, and its place is the record's first byte."""
    table = _table(quoting="csv")
    long = b'"' + b'a ""quoted"" line\n' * 20000 + b'"'
    first = b"1|" + long + b"|12.50|2026-03-01||x\n"
    assert _run(table, first + GOOD[0] + b"\n", size) == first + GOOD[0] + b"\n"
    bad = b"2|" + long + b"|12.505|2026-03-01||x\n"
    with pytest.raises(ChangedValue) as caught:
        _run(table, first + bad + GOOD[0] + b"\n", size)
    assert (caught.value.offset, caught.value.column, caught.value.text) == (len(first), "price", "12.505")


def test_a_money_field_the_server_would_read_as_another_amount_is_refused():
    """PostgreSQL's money reads an empty field as 0.00, `(12)` as -12 and `$12` as 12, and rounds
    to 2 digits (SQL Server's to 4): a money for every target keeps 2."""
    spec = parse_spec({"name": "g", "files": "{table}.{stream}", "format": {"delimiter": ",", "trailing_delimiter": False},
                       "tables": {"t": {"partitioned": False, "key": "id", "columns": [
                           {"name": "id", "type": "varchar(4)"}, {"name": "amount", "type": "money"}]}}})
    guard = value_guard(spec.table("t"), "postgres")
    good = b"a,12.50\nb,-3\nc,7.100\n"
    assert b"".join(guard.chunks([good])) == good
    for field, why in ((b"", "not a decimal number"), (b"(12)", "not a decimal number"), (b"$12", "not a decimal"),
                       (b"12.001", "3 digits after the point, money keeps 2")):
        with pytest.raises(ChangedValue) as caught:
            b"".join(guard.chunks([good + b"d," + field + b"\n"]))
        assert caught.value.column == "amount" and why in caught.value.why, (field, caught.value.why)


def test_a_targets_own_money_keeps_the_digits_its_target_says():
    """A money for one target keeps what that target's money keeps, which the load says: SQL
    Server's 4 digits after the point, PostgreSQL's its locale's (2, or 0 for yen). Without the
    target's word (the plan's read of every target's types) the digits are left to the load."""
    spec = parse_spec({"name": "g", "files": "{table}.{stream}",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "null_marker": ""},
                       "tables": {"t": {"partitioned": False, "key": "id", "columns": [
                           {"name": "id", "type": "varchar(4)"},
                           {"name": "amount", "type": {"postgres": "money", "mssql": "money"}},
                           {"name": "fee", "type": "money", "nullable": True}]}}})
    table = spec.table("t")
    good = b"a,12.3456,1.25\nb,-3,\n"
    assert b"".join(value_guard(table, "mssql", 4).chunks([good])) == good
    with pytest.raises(ChangedValue) as caught:
        b"".join(value_guard(table, "mssql", 4).chunks([good + b"c,12.34567,1\n"]))
    assert (caught.value.column, caught.value.why) == (
        "amount", "5 digits after the point, money keeps 4: the load would round it to another value without an error")
    with pytest.raises(ChangedValue) as caught:
        b"".join(value_guard(table, "postgres", 2).chunks([good]))
    assert (caught.value.column, caught.value.text) == ("amount", "12.3456")
    # A money for every target keeps 2, or fewer where the target's keeps fewer (yen: 0).
    with pytest.raises(ChangedValue) as caught:
        b"".join(value_guard(table, "postgres", 0).chunks([b"a,12,1.25\n"]))
    assert (caught.value.column, caught.value.why) == (
        "fee", "2 digits after the point, money keeps 0: the load would round it to another value without an error")
    assert b"".join(value_guard(table, "postgres", 0).chunks([b"a,12,1\n"])) == b"a,12,1\n"
