"""The formats extracts come in, on SQL Server: what BULK INSERT reads itself, what goes the
client path (the worker reads, TDS bulk copy sends), and the guarantee that every field
arrives as it is in the file.

No server here: BULK INSERT is checked as rendered T-SQL (and parsed); the client path's
reader (FileRows) runs for real on a corpus of nasty values and is compared, row by row,
with an independent reading of the same file (Python's csv module, or plain splitting).
The same corpus loaded into a real server by both paths is in tests/contract/test_mssql_contract.py.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from switchyard.core.planner import LoadPlan, StreamPlan, TablePlan
from switchyard.core.spec import parse_spec
from switchyard.targets import TargetError
from switchyard.targets.mssql import FileRows, MssqlAdapter, converter

LOCAL_ROOT = "/srv/switchyard/data"
PG_KEY = {"datetime2": "timestamp", "datetime": "timestamp", "smalldatetime": "timestamp"}


def spec_with(fmt: dict, nullable: bool = True, files: str = "notes/notes.{stream}.txt", key_type="bigint"):
    """A table of nasty text: an id key, a nullable nvarchar and a NOT NULL varchar."""
    return parse_spec({"name": "corpus", "format": fmt, "tables": {"notes": {
        "key": "id", "files": files, "columns": [
            {"name": "id", "type": {"postgres": PG_KEY.get(key_type.split("(")[0], key_type), "mssql": key_type}},
            {"name": "body", "type": {"postgres": "varchar(12)", "mssql": "nvarchar(12)"}, "nullable": nullable},
            {"name": "tag", "type": {"postgres": "varchar(8)", "mssql": "varchar(8)"}},
        ]}}})


def stream_of(spec, lower=1, upper=1000, stream=1) -> StreamPlan:
    return StreamPlan(table="notes", stream=stream, file=spec.file_for("notes", stream), key_min=lower,
                      key_max=upper, rows=None, lower=lower, upper=upper, partition_number=1,
                      staging_table=f"notes_{stream}", partition_table="notes", filegroup=f"fg{stream}")


def adapter(spec, **kw) -> MssqlAdapter:
    return MssqlAdapter(spec, local_data_root=LOCAL_ROOT, server_data_root="/var/opt/mssql/data/in", **kw)


def load_batch(spec, **kw) -> str:
    a = adapter(spec, **kw)
    s = stream_of(spec)
    (batch,) = a.load_sql(s, Path(LOCAL_ROOT) / "b" / s.file, **({"server": kw.pop("server")} if "server" in kw else {}))
    return batch


def inner(batch: str) -> str:
    """The BULK INSERT a batch runs: itself, or what its sp_executesql runs."""
    from test_mssql_tsql import dynamic_bulk_insert, sqlfluff_parses
    if "sp_executesql" in batch:
        assert sqlfluff_parses(batch), batch
        return dynamic_bulk_insert(batch)[1]
    return batch[batch.index("BULK INSERT"):]


# --- BULK INSERT: what the server reads itself ---------------------------------------------------
def test_tpch_like_text_reads_on_the_server():
    spec = spec_with({"delimiter": "|", "trailing_delimiter": True}, nullable=False)
    bulk = inner(load_batch(spec))
    assert "ROWTERMINATOR = '|\n'" in bulk and "FORMAT" not in bulk and "FIRSTROW" not in bulk
    # KEEPNULLS always: an empty field is NULL, never a column default; in a NOT NULL column the
    # server refuses the NULL and the loader takes the client path, which stores '' (load.sql).
    assert "KEEPNULLS" in bulk and "CODEPAGE = '65001'" in bulk


def test_csv_with_a_header_and_crlf():
    spec = spec_with({"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1,
                      "line_end": "crlf"}, nullable=False)
    batch = load_batch(spec)
    assert "DECLARE @rowterminator nvarchar(12) = NCHAR(13) + NCHAR(10)\n" in batch
    bulk = inner(batch)
    assert "FORMAT = 'CSV', FIELDQUOTE = '\"'" in bulk and "FIELDTERMINATOR = ','" in bulk
    assert "ROWTERMINATOR = '\r\n'" in bulk and "FIRSTROW = 2" in bulk
    assert "RFC 4180" in batch and "header line(s) skipped" in batch


def test_a_quote_in_the_row_terminator_is_doubled_in_the_statement_sp_executesql_runs():
    """A trailing delimiter folds into the row terminator, which the batch builds in a variable and
    pastes into the text sp_executesql runs: a quote in it (a `'`-delimited file) is doubled
    there too, or that statement would not parse."""
    spec = spec_with({"delimiter": "'", "trailing_delimiter": True}, nullable=False)
    bulk = inner(load_batch(spec))
    assert "FIELDTERMINATOR = ''''" in bulk and "ROWTERMINATOR = '''\n'" in bulk
    from test_mssql_tsql import sqlfluff_parses
    assert sqlfluff_parses(bulk), bulk


def test_lf_alone_uses_the_documented_hex_form_statically():
    spec = spec_with({"delimiter": "\t", "trailing_delimiter": False}, nullable=False)
    batch = load_batch(spec)
    assert "sp_executesql" not in batch
    assert "ROWTERMINATOR = '0x0a'" in batch and "FIELDTERMINATOR = '\\t'" in batch
    from test_mssql_tsql import sqlfluff_parses
    assert sqlfluff_parses(batch)


def test_a_semicolon_delimiter_keeps_the_load_whole():
    """'; + LF' as the row terminator used to be cut by the statement splitter."""
    spec = spec_with({"delimiter": ";", "trailing_delimiter": True}, nullable=False)
    a = adapter(spec)
    s = stream_of(spec)
    (batch,) = a.load_sql(s, Path(LOCAL_ROOT) / "b" / s.file)
    bulk = inner(batch)
    assert "FIELDTERMINATOR = ';'" in bulk and "ROWTERMINATOR = ';\n'" in bulk
    script = a.script(LoadPlan(spec=spec, streams=1, tables=(TablePlan(spec.table("notes"), (s,)),)))
    assert script.count("EXEC sys.sp_executesql @load;\nGO") == 1
    # The splitter itself: a ';' ending a line inside a literal never ends a statement.
    from switchyard.targets.mssql.tsql import split_statements
    assert split_statements("SELECT 'a;\nb';\nSELECT [x;\n];\n-- c;\nSELECT 1;") == [
        "SELECT 'a;\nb'", "SELECT [x;\n]", "-- c;\nSELECT 1"]
    with pytest.raises(ValueError, match="unterminated"):
        split_statements("SELECT 'open;\n")


def test_null_marker_empty_field_keeps_nulls_on_the_server():
    spec = spec_with({"delimiter": "|", "trailing_delimiter": False, "null_marker": ""})
    batch = load_batch(spec)
    assert "KEEPNULLS" in inner(batch) and "never a column default" in batch


def test_code_pages_follow_the_encoding_and_the_server():
    spec = spec_with({"encoding": "latin-1"}, nullable=False)
    assert "CODEPAGE = '28591'" in inner(load_batch(spec))
    a = adapter(spec_with({}, nullable=False))
    s = stream_of(a.spec)
    path = Path(LOCAL_ROOT) / "b" / s.file
    assert "CODEPAGE = 'RAW'" in inner(a.load_sql(s, path, server=("Linux", 16))[0])
    assert "CODEPAGE" not in inner(a.load_sql(s, path, server=("Linux", 14))[0])
    assert "CODEPAGE = '65001'" in inner(a.load_sql(s, path, server=("Windows", 16))[0])
    assert "CODEPAGE = '1252'" in inner(adapter(a.spec, codepage="1252").load_sql(s, path)[0])


def test_each_table_loads_by_its_own_format():
    """Three tables of one spec: the spec's format (pipe-delimited, a trailing delimiter, the
    empty field as NULL) is the default; `notes` overrides it with CSV, two header lines and
    CRLF, `memos` with the NULL marker 'NA'. Each BULK INSERT, and each plan comment, follows
    its own table's format, never the spec-level one."""
    def column(name, pg, ms, nullable=False):
        return {"name": name, "type": {"postgres": pg, "mssql": ms}, "nullable": nullable}
    spec = parse_spec({"name": "mixed", "format": {"delimiter": "|", "trailing_delimiter": True, "null_marker": ""},
                       "tables": {
        "notes": {"key": "id", "files": "notes/notes.{stream}.csv",
                  "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 2,
                             "line_end": "crlf"},
                  "columns": [column("id", "bigint", "bigint"), column("body", "varchar(12)", "nvarchar(12)")]},
        "tags": {"key": "id", "files": "tags/tags.{stream}.tbl",
                 "columns": [column("id", "bigint", "bigint"), column("tag", "varchar(8)", "varchar(8)", True)]},
        "memos": {"key": "id", "files": "memos/memos.{stream}.txt", "format": {"null_marker": "NA"},
                  "columns": [column("id", "bigint", "bigint"), column("memo", "varchar(8)", "varchar(8)", True)]},
    }})
    assert spec.format.delimiter == "|" and spec.table("notes").format.delimiter == ","

    def stream(table):
        return StreamPlan(table=table, stream=1, file=spec.file_for(table, 1), key_min=1, key_max=1000, rows=None,
                          lower=1, upper=1000, partition_number=1, staging_table=f"{table}_1",
                          partition_table=table, filegroup="fg1")
    a = adapter(spec)
    streams = {t: stream(t) for t in ("notes", "tags", "memos")}

    (notes,) = a.load_sql(streams["notes"])
    bulk = inner(notes)
    assert "BULK INSERT [tpch_staging].[notes_1]" in bulk and "notes.1.csv" in bulk
    assert "FORMAT = 'CSV'" in bulk and "FIELDTERMINATOR = ','" in bulk and "ROWTERMINATOR = '\r\n'" in bulk
    assert "FIRSTROW = 3" in bulk and "KEEPNULLS" in bulk
    assert "-- FIRSTROW 3: the 2 header line(s) skipped" in notes and "RFC 4180" in notes

    (tags,) = a.load_sql(streams["tags"])
    bulk = inner(tags)
    assert "BULK INSERT [tpch_staging].[tags_1]" in bulk and "tags.1.tbl" in bulk
    assert "FIELDTERMINATOR = '|'" in bulk and "ROWTERMINATOR = '|\n'" in bulk and "KEEPNULLS" in bulk
    assert "FORMAT" not in bulk and "FIRSTROW" not in bulk
    assert "header line" not in tags and "RFC 4180" not in tags and "-- KEEPNULLS" in tags

    kind, why = a.load_path(streams["memos"])
    assert kind == "tds" and "the NULL marker 'NA'" in why

    plan = LoadPlan(spec=spec, streams=1, tables=tuple(TablePlan(spec.table(t), (s,)) for t, s in streams.items()))
    script = a.script(plan)
    # The plan: each table's section (from its header comment to the next one) holds its load.
    starts = sorted((script.index(f"\n-- {s.group_id}: {s.file},"), t) for t, s in streams.items())
    sections = {t: script[at:(starts[i + 1][0] if i + 1 < len(starts) else len(script))]
                for i, (at, t) in enumerate(starts)}
    # notes: CRLF is built with NCHAR() and run by sp_executesql (quotes doubled in its literal).
    assert "DECLARE @rowterminator nvarchar(12) = NCHAR(13) + NCHAR(10)\n" in sections["notes"]
    assert "FORMAT = ''CSV''" in sections["notes"] and "FIRSTROW = 3" in sections["notes"]
    assert "FIELDTERMINATOR = ''," in sections["notes"]
    assert "-- FIRSTROW 3: the 2 header line(s) skipped" in sections["notes"]
    assert "DECLARE @rowterminator nvarchar(12) = N'|' + NCHAR(10)\n" in sections["tags"]
    assert "FIELDTERMINATOR = ''|''" in sections["tags"] and "KEEPNULLS" in sections["tags"]
    assert "CSV" not in sections["tags"] and "FIRSTROW" not in sections["tags"]
    assert "BULK INSERT [" not in sections["memos"] and "BULK INSERT [" in sections["tags"]
    assert ("-- load: TDS bulk copy from the worker of memos/memos.1.txt into tpch_staging.memos_1"
            in sections["memos"] and "the NULL marker 'NA'" in sections["memos"])


# --- the client path: what the server cannot read ------------------------------------------------
@pytest.mark.parametrize("fmt, files, reason", [
    ({}, "notes/notes.{stream}.txt.gz", "gzip-compressed and BULK INSERT reads plain files only"),
    ({"null_marker": "NA"}, None, "the NULL marker 'NA' of the nullable columns: BULK INSERT takes only the empty"),
    ({}, None, "nullable columns without a NULL marker: BULK INSERT would make an empty field NULL"),
    ({"quoting": "csv", "null_marker": ""}, None, 'quoted empty field ("") is an empty string'),
    ({"encoding": "utf-16", "null_marker": ""}, None, "has no code page BULK INSERT knows"),
])
def test_the_client_path_says_why_in_the_plan(fmt, files, reason):
    spec = spec_with(fmt, **({"files": files} if files else {}))
    a = adapter(spec)
    s = stream_of(spec)
    kind, why = a.load_path(s)
    assert kind == "tds" and reason in why
    # The load step is then only the TRUNCATE; the plan says what happens and why.
    (truncate,) = a.load_sql(s)
    assert truncate.splitlines()[-1] == "TRUNCATE TABLE [tpch_staging].[notes_1]"
    script = a.script(LoadPlan(spec=spec, streams=1, tables=(TablePlan(spec.table("notes"), (s,)),)))
    assert f"-- load: TDS bulk copy from the worker of {s.file} into tpch_staging.notes_1" in script
    assert reason in script and "BULK INSERT [" not in script


def test_a_null_marker_on_not_null_columns_only_stays_on_the_server():
    assert adapter(spec_with({"null_marker": "NA"}, nullable=False)).load_path(stream_of(spec_with({})))[0] \
        == "bulk_insert"


def test_nullable_columns_in_every_table_the_switch_needs():
    spec = spec_with({"null_marker": ""})
    a = adapter(spec)
    s = stream_of(spec)
    plan = LoadPlan(spec=spec, streams=1, tables=(TablePlan(spec.table("notes"), (s,)),))
    texts = ["\n".join(a.prepare_sql(s)), "\n".join(a.setup_sql(plan))]
    for text in texts:
        assert re.search(r"\[id\] bigint NOT NULL,\n\s+\[body\] nvarchar\(12\) NULL,\n\s+\[tag\] varchar\(8\) NOT NULL",
                         text), text


# --- date and timestamp keys ---------------------------------------------------------------------
def plan_with_bounds(spec, bounds) -> LoadPlan:
    streams = tuple(stream_of(spec, lo, hi, k) for k, (lo, hi) in enumerate(bounds, start=1))
    return LoadPlan(spec=spec, streams=len(streams), tables=(TablePlan(spec.table("notes"), streams),))


def test_date_keys_from_iso_bounds():
    spec = spec_with({"null_marker": ""}, key_type="date")
    a = adapter(spec)
    plan = plan_with_bounds(spec, [("2026-01-01", "2026-01-31"), ("2026-02-01", "2026-02-28")])
    setup = "\n".join(a.setup_sql(plan))
    assert ("CREATE PARTITION FUNCTION [pf_tpch_notes] (date) AS RANGE LEFT FOR VALUES "
            "('2025-12-31', '2026-01-31', '2026-02-28')") in setup
    assert "TO ([fg_edge], [fg1], [fg2], [fg_edge])" in setup
    s = plan.table("notes").streams[1]
    check = a.prepare_sql(s)[-1]
    assert ("CHECK ([id] IS NOT NULL AND [id] >= CONVERT(date, '2026-02-01', 23) AND [id] <= CONVERT(date, '2026-02-28', 23))" in check
            and "ISO 8601" in check)
    # The table's commit finds each stream's partition by its upper boundary, a typed literal.
    assert "$PARTITION.[pf_tpch_notes](CONVERT(date, '2026-02-28', 23))" in "\n".join(a.commit_sql(plan.table("notes")))
    key = a.key("notes")
    assert key.value(s.lower) == date(2026, 2, 1) and key.before(s.lower) == date(2026, 1, 31)
    # A date-typed bound works as well as its ISO text (plans made before ISO text arrives).
    assert a.key("notes").literal(date(2026, 2, 1)) == "CONVERT(date, '2026-02-01', 23)"


def test_timestamp_keys_keep_their_precision():
    spec = spec_with({"null_marker": ""}, key_type="datetime2(3)")
    a = adapter(spec)
    plan = plan_with_bounds(spec, [("2026-01-01T00:00:00", "2026-01-01T11:59:59.999"),
                                   ("2026-01-01 12:00:00", "2026-01-01T23:59:59.999")])
    setup = "\n".join(a.setup_sql(plan))
    assert ("AS RANGE LEFT FOR VALUES ('2025-12-31T23:59:59.999', '2026-01-01T11:59:59.999', "
            "'2026-01-01T23:59:59.999')") in setup
    assert a.key("notes").value("2026-01-01 12:00:00") == datetime(2026, 1, 1, 12)
    for bad in ("2026-01-01T00:00:00.0001", "2026-13-01", "2026-01-01T00:00:00+02:00", 5):
        with pytest.raises(TargetError):
            a.key("notes").literal(bad)
    assert adapter(spec_with({}, key_type="datetime")).key("notes").literal(
        adapter(spec_with({}, key_type="datetime")).key("notes").before("2026-01-01T00:00:00")) \
        == "CONVERT(datetime, '2025-12-31T23:59:59.997', 126)"
    assert adapter(spec_with({}, key_type="smalldatetime")).key("notes").literal("2026-01-01 10:30") \
        == "CONVERT(smalldatetime, '2026-01-01T10:30:00', 126)"
    # Bounds are parsed, never pasted: text that is not a value of the key's type never reaches SQL.
    dated = spec_with({}, key_type="date")
    with pytest.raises(TargetError, match="not an ISO date"):
        adapter(dated).setup_sql(plan_with_bounds(dated, [("2026-01-01'; DROP TABLE x; --", "2026-01-02")]))


# --- byte-exact: the client path's reader against an independent reading --------------------------
# Each value is one field of the `body` column (nvarchar(12)); `tag` (varchar(8)) holds ASCII.
NASTY = ["\\N", "\\t", "\\\\", "trailing\\", "C:\\new\\tab", "漢字かな", "emoji 🎉!", "e\u0301 combining",
         "  lead", "trail  ", "", "exactly 12 c", "x", "NA", "a,b", 'say "hi"', "line\nbreak"]


def write_corpus(path: Path, fmt: dict, values: list[str], header: bool = False) -> bytes:
    """The file as a producer would write it, by hand (not by the loader's code)."""
    sep = fmt.get("delimiter", "|")
    eol = "\r\n" if fmt.get("line_end") == "crlf" else "\n"
    csv_quoting = fmt.get("quoting") == "csv"
    lines = ["id" + sep + "body" + sep + "tag"] if header else []
    for i, v in enumerate(values, start=1):
        body = v
        if csv_quoting and (sep in v or '"' in v or "\n" in v or v in ("", "NA")):
            body = '"' + v.replace('"', '""') + '"'
        lines.append(f"{i}{sep}{body}{sep}t{i}" + (sep if fmt.get("trailing_delimiter", True) else ""))
    data = (eol.join(lines) + eol).encode(fmt.get("encoding", "utf-8"))
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(data))
    else:
        path.write_bytes(data)
    return data


def independent_rows(data: bytes, fmt: dict, header: bool) -> list[tuple]:
    """The file read without the loader's code: the csv module, or plain splitting."""
    text = data.decode(fmt.get("encoding", "utf-8"))
    sep = fmt.get("delimiter", "|")
    if fmt.get("quoting") == "csv":
        records = list(csv.reader(io.StringIO(text, newline=""), delimiter=sep, strict=True))
    else:
        eol = "\r\n" if fmt.get("line_end") == "crlf" else "\n"
        records = [ln.split(sep) for ln in text.split(eol)[:-1]]
    if header:
        records = records[1:]
    out = []
    for r in records:
        if fmt.get("trailing_delimiter", True):
            assert r[-1] == ""
            r = r[:-1]
        out.append((int(r[0]), r[1], r[2]))
    return out


def digest(row: tuple) -> str:
    return hashlib.sha256("\x1f".join("\x00NULL" if v is None else str(v) for v in row).encode()).hexdigest()


@pytest.mark.parametrize("fmt, name, values", [
    ({"delimiter": "|", "trailing_delimiter": True}, "notes.1.txt", [v for v in NASTY if "\n" not in v]),
    ({"delimiter": "|", "trailing_delimiter": False, "line_end": "crlf"}, "notes.1.txt",
     [v for v in NASTY if "\n" not in v]),
    ({"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1}, "notes.1.txt", NASTY),
    ({"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "line_end": "crlf"}, "notes.1.txt.gz",
     [v.replace("\n", "\r\n") for v in NASTY]),
])
def test_every_field_arrives_as_it_is_in_the_file(tmp_path, fmt, name, values):
    spec = spec_with(fmt)
    header = bool(fmt.get("header_lines"))
    path = tmp_path / name
    data = write_corpus(path, fmt, values, header=header)
    loaded = list(FileRows(path, spec.table("notes"), "mssql"))
    expected = independent_rows(data, fmt, header)
    assert len(loaded) == len(expected) == len(values)
    for got, want in zip(loaded, expected):
        assert digest(got) == digest(want), (got, want)
    assert [r[1] for r in loaded] == values


def test_the_null_marker_is_the_only_exception(tmp_path):
    fmt = {"delimiter": "|", "trailing_delimiter": False, "null_marker": "NA"}
    path = tmp_path / "notes.1.txt"
    write_corpus(path, fmt, ["NA", "", "na", " NA"])
    rows = list(FileRows(path, spec_with(fmt).table("notes"), "mssql"))
    assert [r[1] for r in rows] == [None, "", "na", " NA"]
    # In a NOT NULL column the marker is an ordinary value.
    rows = list(FileRows(path, spec_with(fmt, nullable=False).table("notes"), "mssql"))
    assert rows[0][1] == "NA"
    # CSV: a quoted field never matches the marker; the unquoted empty field does when it is ''.
    fmt = {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "null_marker": ""}
    path.write_bytes(b'1,,t\n2,"",t\n')
    assert [r[1] for r in FileRows(path, spec_with(fmt).table("notes"), "mssql")] == [None, ""]


def test_one_past_the_declared_length_fails_clearly(tmp_path):
    fmt = {"delimiter": "|", "trailing_delimiter": False}
    path = tmp_path / "notes.1.txt"
    write_corpus(path, fmt, ["exactly 12 c", "thirteen char"])
    with pytest.raises(TargetError, match=r"notes\.1\.txt: line 2: column body: longer than 12 UTF-16 code units: "
                                          r"'thirteen char'"):
        list(FileRows(path, spec_with(fmt).table("notes"), "mssql"))


def test_lengths_and_characters_as_sql_server_counts_them():
    assert converter("nvarchar(2)")("🎉") == "🎉"                       # one emoji: 2 UTF-16 code units
    with pytest.raises(ValueError, match="UTF-16 code units"):
        converter("nvarchar(2)")("🎉!")
    assert converter("varchar(6)", 65001)("漢字") == "漢字"              # 6 bytes in UTF-8
    with pytest.raises(ValueError, match="longer than 5 bytes"):
        converter("varchar(5)", 65001)("漢字")
    assert converter("varchar(3)", 1252)("é€x") == "é€x"                # all three in code page 1252
    with pytest.raises(ValueError, match="not in the column's code page 1252"):
        converter("varchar(8)", 1252)("漢")


def test_decimals_finer_than_the_column_keeps_are_refused_not_rounded():
    assert converter("decimal(10,3)")("12.340") == Decimal("12.340")   # a trailing zero changes nothing
    assert converter("money")("1.2345") == Decimal("1.2345")
    for sql_type, text in (("decimal(10,3)", "1.2345"), ("numeric", "12.5"), ("money", "0.00001")):
        with pytest.raises(ValueError, match="digits after the point, .* keeps .*: the load would round it"):
            converter(sql_type)(text)


@pytest.mark.parametrize("sql_type, text, kept", [
    ("datetime2", "2026-01-01 10:00:00.123456", datetime(2026, 1, 1, 10, 0, 0, 123456)),
    ("datetime2(6)", "2026-01-01T10:00:00.1234560", datetime(2026, 1, 1, 10, 0, 0, 123456)),
    ("datetime2(3)", "2026-01-01 10:00:00.1230", datetime(2026, 1, 1, 10, 0, 0, 123000)),
    ("datetime", "2026-01-01 10:00:00.127", datetime(2026, 1, 1, 10, 0, 0, 127000)),
    ("smalldatetime", "2026-01-01 10:59:00", datetime(2026, 1, 1, 10, 59)),
    ("datetime2(3)", "2026-01-01 10:00:00.1234", None),     # the bulk copy would round these
    ("datetime2(0)", "2026-01-01 10:00:00.5", None),
    ("datetime", "2026-01-01 10:00:00.001", None),           # datetime counts 1/300 s
    ("smalldatetime", "2026-01-01 10:59:30", None),          # whole minutes
])
def test_times_the_column_keeps_arrive_and_finer_ones_are_refused_not_rounded(sql_type, text, kept):
    """The client path reads datetime2 columns (a name with a digit in it) and refuses a time
    finer than its column keeps, which the bulk copy would round without an error."""
    if kept is not None:
        assert converter(sql_type)(text) == kept
    else:
        with pytest.raises(ValueError, match=f"finer than {re.escape(sql_type)} keeps: the load would round it"):
            converter(sql_type)(text)


def test_gzip_under_a_plain_name_says_it_is_gzip(tmp_path):
    path = tmp_path / "notes.1.txt"
    path.write_bytes(gzip.compress(b"1|x|t|\n"))
    with pytest.raises(TargetError, match=r"notes\.1\.txt: line 1: the file is gzip-compressed \(it starts with "
                                          r"bytes 1f 8b\) but its name does not end in \.gz"):
        list(FileRows(path, spec_with({}).table("notes"), "mssql"))


@pytest.mark.parametrize("content, message", [
    (b"1|x|t|\n2|y|t\n", r"line 2: 2 fields, expected 3 and a final '\|'"),
    (b"1|x|t|\n\n", r"line 2: 0 fields"),
    (b"1|\xff|t|\n", r"line 1: column body: not valid utf-8 at byte 2"),
])
def test_bad_records_name_file_line_and_column(tmp_path, content, message):
    path = tmp_path / "notes.1.txt"
    path.write_bytes(content)
    with pytest.raises(TargetError, match=message):
        list(FileRows(path, spec_with({"null_marker": ""}).table("notes"), "mssql"))


def test_crlf_declared_means_crlf(tmp_path):
    path = tmp_path / "notes.1.txt"
    path.write_bytes(b"1|x|t\r\n2|y|t\n")
    with pytest.raises(TargetError, match="line 2: ends in LF alone; the spec declares CRLF"):
        list(FileRows(path, spec_with({"trailing_delimiter": False, "line_end": "crlf"}).table("notes"), "mssql"))
    path.write_bytes(b'1,"a\nb",t\n2,"open,t\n')
    with pytest.raises(TargetError, match="line 3: a quoted field is not closed before the end of the file"):
        list(FileRows(path, spec_with({"delimiter": ",", "trailing_delimiter": False, "quoting": "csv",
                                       "null_marker": ""}).table("notes"), "mssql"))



@pytest.mark.parametrize("fmt", [{"null_marker": ""}, {"delimiter": ",", "trailing_delimiter": False,
                                                      "quoting": "csv", "null_marker": ""}], ids=["plain", "csv"])
def test_a_compressed_file_cut_short_inside_its_last_field_is_refused(tmp_path, fmt):
    """A gzip file (the client path's) whose last line has no line end, cut inside its last field:
    as many fields as any record, so the bulk copy would take what is left for the value. The
    plan sees a compressed file's end only when it reads the batch's fields; the reader refuses
    it, naming the line."""
    sep, end = fmt.get("delimiter", "|"), "" if fmt.get("trailing_delimiter") is False else "|"
    path = tmp_path / "notes.1.txt.gz"
    whole = "".join(f"{i}{sep}note {i}{sep}tag {i}{end}\n" for i in range(1, 2001))
    cut = whole[:-1].replace("tag 2000", "tag 2")                # the last field cut, the line end gone
    path.write_bytes(gzip.compress(cut.encode()))
    with pytest.raises(TargetError, match=r"notes\.1\.txt\.gz: line 2000: the file's last line has no line end: "
                                          r"a file cut short"):
        list(FileRows(path, spec_with(fmt).table("notes"), "mssql"))
    path.write_bytes(gzip.compress(whole.encode()))
    assert len(list(FileRows(path, spec_with(fmt).table("notes"), "mssql"))) == 2000

# --- text the server path cannot store exactly goes the client path -------------------------------
def test_which_columns_bulk_insert_stores_any_text_in_exactly():
    """SCRIPTED DMV ANSWERS for the code pages: what COLLATIONPROPERTY(collation, 'CodePage')
    gives per column (1252 for a Latin1 collation, 65001 for a _UTF8 one)."""
    spec = spec_with({"null_marker": ""})  # body nvarchar(12), tag varchar(8)
    a = adapter(spec)
    s = stream_of(spec)
    # Windows, CODEPAGE 65001: nvarchar is exact; a varchar in code page 1252 only for ASCII.
    assert "not in tag (code page 1252)" in a.text_exact(s, ("Windows", 16), {"tag": 1252})
    assert a.text_exact(s, ("Windows", 16), {"tag": 65001}) is None
    # Linux, RAW: the bytes pass unconverted, so only a _UTF8 varchar holds them as the same text.
    why = a.text_exact(s, ("Linux", 16), {"tag": 65001})
    assert "CODEPAGE RAW on Linux" in why and "body (nchar/nvarchar)" in why and "tag" not in why
    # A Latin-1 file into Latin-1 columns is exact.
    latin = spec_with({"encoding": "latin-1", "null_marker": ""})
    assert adapter(latin).text_exact(stream_of(latin), ("Windows", 16), {"tag": 28591}) is None


def test_file_is_ascii(tmp_path):
    from switchyard.targets.mssql.load import file_is_ascii
    path = tmp_path / "f.txt"
    path.write_bytes(b"plain|text|\n" * 1000)
    assert file_is_ascii(path)
    path.write_bytes(b"plain|text|\n" * 1000 + "caf\u00e9|\n".encode())
    assert not file_is_ascii(path, chunk=64)


def test_a_file_whose_line_end_is_not_the_specs_is_refused_before_its_load(tmp_path):
    """BULK INSERT ends a row at the spec's line end only (ROWTERMINATOR 0x0a for `lf`), and so
    does the client path's reader: a CR LF file declared `lf` would keep each record's CR in its
    last field, without an error. PostgreSQL reads either, so `switchyard check` passes such a
    file; the SQL Server load refuses it before anything is sent, naming the file and what to say."""
    spec = spec_with({"delimiter": "|", "trailing_delimiter": False})
    path = tmp_path / "notes.1.txt"
    path.write_bytes(b"1|a note|tag\r\n2|another|tag\r\n")
    with pytest.raises(TargetError, match=r"notes\.1\.txt: line 1 ends in CR LF, the spec says `line_end: lf`: a row "
                                          r"would end at the spec's line end only, so each record's last field would "
                                          r"keep the CR; say `line_end: crlf` for notes .*nothing was loaded") as refused:
        adapter(spec).load_staging(stream_of(spec), path, None)
    assert refused.value.permanent
    crlf = spec_with({"delimiter": "|", "trailing_delimiter": False, "line_end": "crlf"})
    path.write_bytes(b"1|a note|tag\n")
    with pytest.raises(TargetError, match=r"line 1 ends in LF alone, the spec says `line_end: crlf`: .* no record "
                                          r"would end; say `line_end: lf`"):
        adapter(crlf).load_staging(stream_of(crlf), path, None)
    # A named pipe is not read here (its bytes are the load's, once): no writer, and no wait.
    import os
    import threading
    from switchyard.core.batch import line_end_unlike_spec
    fifo = tmp_path / "notes.2.txt"
    os.mkfifo(fifo)
    found = []
    reader = threading.Thread(target=lambda: found.append(line_end_unlike_spec(fifo, spec.table("notes"))), daemon=True)
    reader.start()
    reader.join(5)
    assert found == [None]
