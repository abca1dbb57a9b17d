"""What is in the file is what is in the table: byte-exact loads and the formats extracts come in.

Each case writes a file of nasty values in one of the spec's formats, loads it through the
real PostgreSQL adapter (setup, prepare, load, switch) into the embedded server, and compares
every row, by a hash of its fields, with an independent reading of the same file: plain
splitting for quoting none, Python's csv module for quoting csv; never the loader's code.
The one exception to "byte for byte" is the spec's: a field equal to the NULL marker in a
nullable column is NULL. char(n) holds its value blank-padded to n (the type's meaning).
"""
from __future__ import annotations

import re

import csv
import gzip
import hashlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from helpers import load_through_steps, publish
from switchyard.core.batch import BatchError, count_file, describe_batch, manifest_for, read_manifest, write_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.spec import SpecError, parse_spec
from switchyard.targets.postgres import load as pg_load
from switchyard.targets.base import TargetError
from switchyard.targets.postgres import PostgresAdapter

# (name, type, nullable): the corpus table. `code` holds the marker text as a value where it
# is NOT NULL (a country code "NA"); `note` and `qty` are nullable; `fixed` is char(5).
COLUMNS = [("id", "bigint", False), ("code", "char(2)", False), ("note", "varchar(12)", True),
           ("body", "text", False), ("fixed", "char(5)", False), ("qty", "integer", True),
           ("tail", "varchar(20)", False)]

NASTY = [
    "\\N", "\\t", "\\\\", "\\", "ends in a backslash\\", "C:\\new\\table\\N", "\\.", "\\x41\\101",
    '"', '""', '"quoted"', 'a"b', "'single'", '\\"', "a\tb", "tab at end\t",
    "漢字テキスト", "😀👍🏽 family 👨‍👩‍👧", "e\u0301 A\u030a \u00c5", "مرحبا", "\u2028\u2029", "\ufeffbom inside",
    "  leading", "trailing  ", "  both  ", " ", "", "NA", "na", "NULL", "null", "\\N\\N",
    "\x01", "a\x01b\x01c", "\x01\x01", "\x02\x03\x7f", "\x0b\x0c\x1c", "%s %d {}", "a;b,c|d",
    "x" * 300, "é" * 150, "line\nbreak", "crlf\r\ninside", "cr\ronly", '"a|b",\n"c"',
]
NOTES = [None, "NA", "exactly12chr", "ÅÅÅÅÅÅÅÅÅÅÅÅ", "abc         ", "  ", "x", "\\N", "12 chars 😀😀."[:12]]
CODES = ["NA", "DE", "", "  ", "é", "\\N"]
FIXED = ["abcde", "ab", "", "a  ", "ünï", "\\\\", "ab   "]  # "ab   " fits char(5) exactly
QTY = [None, "1", "-5", "0", "2147483647"]
TAILS = ["", "end\\", "  ", "x" * 20, "ü" * 20, "\\N", "NA", "tail ", "\x01tail\x01"]


def corpus(nulls: bool = True) -> list[list[str | None]]:
    """One row per nasty value; without nulls (a format with no NULL marker), values instead."""
    rows = []
    for i, body in enumerate(NASTY):
        note, qty = NOTES[i % len(NOTES)], QTY[i % len(QTY)]
        rows.append([str(i + 1), CODES[i % len(CODES)], note if note is not None or nulls else "",
                     body, FIXED[i % len(FIXED)], qty if qty is not None or nulls else "7", TAILS[i % len(TAILS)]])
    return rows


@dataclass
class Fmt:
    quoting: str = "none"
    delimiter: str = "|"
    trailing: bool = True
    marker: str | None = "NA"
    header_lines: int = 0
    crlf: bool = False
    gzip: bool = False

    def spec_format(self) -> dict:
        return {"delimiter": self.delimiter, "trailing_delimiter": self.trailing, "quoting": self.quoting,
                "header_lines": self.header_lines, "null_marker": self.marker,
                "line_end": "crlf" if self.crlf else "lf"}


def make_spec(fmt: Fmt, columns=COLUMNS, name: str = "corpus"):
    suffix = ".gz" if fmt.gzip else ""
    return parse_spec({
        "name": "exact", "format": fmt.spec_format(),
        "files": f"{{table}}/{{table}}.{{stream}}.txt{suffix}",
        "tables": {name: {"key": columns[0][0], "unique": True, "columns": [
            {"name": n, "type": t, **({"nullable": True} if nullable else {})} for n, t, nullable in columns]}}})


def representable(value: str | None, fmt: Fmt, nullable: bool) -> bool:
    """Whether the format can carry this value at all (quoting none has no way to put its
    delimiter or a line break in a field; a nullable column's marker text means NULL)."""
    if value is None:
        return fmt.marker is not None and nullable
    if nullable and value == fmt.marker:
        return False
    if fmt.quoting == "none":
        return fmt.delimiter not in value and "\n" not in value and "\r" not in value
    return True


def write_file(path: Path, rows: list[list[str | None]], fmt: Fmt, nullable: list[bool],
               quote_all: bool = False) -> list[list[str | None]]:
    """Write the rows in the format (test code, not the loader's); returns the rows written."""
    eol = "\r\n" if fmt.crlf else "\n"
    out = io.StringIO(newline="")
    for h in range(fmt.header_lines):
        out.write(f"header line {h + 1}: {fmt.delimiter.join(c[0] for c in COLUMNS)} \\N \"{eol}")
    written = []
    for row in rows:
        if not all(representable(v, fmt, n) for v, n in zip(row, nullable)):
            continue
        fields = []
        for v in row:
            if v is None:
                fields.append(fmt.marker)
            elif fmt.quoting == "csv" and (quote_all or any(ch in v for ch in f'"{fmt.delimiter}\r\n')
                                           or v.startswith(" ")):
                fields.append('"' + v.replace('"', '""') + '"')
            else:
                fields.append(v)
        out.write(fmt.delimiter.join(fields) + (fmt.delimiter if fmt.trailing else "") + eol)
        written.append(row)
    data = out.getvalue().encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data) if fmt.gzip else data)
    return written


def read_independently(path: Path, fmt: Fmt, columns=COLUMNS) -> list[list[str | None]]:
    """The file's rows as the spec defines them, by plain splitting or Python's csv module."""
    data = path.read_bytes()
    if fmt.gzip:
        data = gzip.decompress(data)
    text = data.decode("utf-8")
    eol = "\r\n" if fmt.crlf else "\n"
    if fmt.quoting == "csv":
        body = text.split(eol, fmt.header_lines)[-1] if fmt.header_lines else text
        records = list(csv.reader(io.StringIO(body, newline=""), delimiter=fmt.delimiter))
    else:
        lines = text.split(eol)
        assert lines[-1] == "", "the file ends with its line end"
        records = [line.split(fmt.delimiter) for line in lines[fmt.header_lines:-1]]
    rows = []
    for fields in records:
        if fmt.trailing:
            assert fields[-1] == ""
            fields = fields[:-1]
        assert len(fields) == len(columns), fields
        row = []
        for value, (_, sql_type, nullable) in zip(fields, columns):
            if nullable and fmt.marker is not None and value == fmt.marker:
                row.append(None)
            elif sql_type.startswith("char("):
                # char(n) is blank-padded to n: the type's meaning, the documented exception.
                row.append(value.ljust(int(sql_type[5:-1])))
            else:
                row.append(value)
        rows.append(row)
    return rows


def row_hash(values) -> str:
    return hashlib.sha256(json.dumps([None if v is None else str(v) for v in values],
                                     ensure_ascii=False).encode()).hexdigest()


def load(pg_uri: str, schema: str, batch: Path, spec, streams: int = 1) -> tuple[PostgresAdapter, list[dict]]:
    """Setup, prepare, load and switch every stream through the real adapter."""
    write_manifest(batch, manifest_for(batch, spec, streams))
    plan = plan_batch(spec, read_manifest(batch, spec))
    adapter = PostgresAdapter(spec, uri=pg_uri, schema=schema)
    adapter.setup(plan)
    results = []
    for s in plan.all_streams():
        adapter.prepare(s)
        loaded = adapter.load(s, batch / s.file)
        switched = adapter.switch(s)
        results.append({"rows": loaded.rows, "switch": switched, "expected_rows": s.rows})
    # The batch in, as the DAG's last step does; its ATTACHes are the ones that skip their scans.
    published = publish(adapter, plan) or {}
    for r in results:
        r["switch"].setdefault("attach_scan_skipped", None)
        if published.get("attach_scan_skipped") is not None:
            r["switch"]["attach_scan_skipped"] = published["attach_scan_skipped"]
    return adapter, results


def loaded_hashes(pg_uri: str, schema: str, table: str = "corpus", columns=COLUMNS) -> dict[int, str]:
    names = ", ".join(f'"{n}"' for n, _, _ in columns)
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(f'SELECT {names} FROM "{schema}"."{table}"').fetchall()
    return {int(r[0]): row_hash(r) for r in rows}


def file_hashes(rows) -> dict[int, str]:
    return {int(r[0]): row_hash(r) for r in rows}


FORMATS = {
    "pipe-trailing-NA": Fmt(),
    "tab-empty-marker-header-crlf-gzip": Fmt(delimiter="\t", trailing=False, marker="", header_lines=1,
                                             crlf=True, gzip=True),
    "csv-comma-empty-marker-2-headers-crlf": Fmt(quoting="csv", delimiter=",", trailing=False, marker="",
                                                 header_lines=2, crlf=True),
    "csv-semicolon-trailing-NA-gzip": Fmt(quoting="csv", delimiter=";", trailing=True, marker="NA", gzip=True),
    "pipe-no-marker": Fmt(marker=None),
}


@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=list(FORMATS))
def test_every_field_arrives_byte_for_byte(pg_uri, schema, tmp_path, fmt):
    spec = make_spec(fmt)
    batch = tmp_path / "batch"
    nullable = [n for _, _, n in COLUMNS]
    written = write_file(batch / spec.file_for("corpus", 1), corpus(fmt.marker is not None), fmt, nullable)
    assert len(written) >= len(NASTY) - 10, "the corpus must survive the format mostly whole"
    _, results = load(pg_uri, schema, batch, spec)

    expected = read_independently(batch / spec.file_for("corpus", 1), fmt)
    assert [r["rows"] for r in results] == [len(expected)] == [results[0]["expected_rows"]]
    got = loaded_hashes(pg_uri, schema)
    want = file_hashes(expected)
    differ = sorted(k for k in want if got.get(k) != want[k])
    assert got.keys() == want.keys() and not differ, _explain(pg_uri, schema, expected, differ)
    # The independent reading agrees with what was meant to be written (the test's own check).
    assert file_hashes(expected) == file_hashes(
        [[v if not (t.startswith("char(") and v is not None) else v.ljust(int(t[5:-1]))
          for v, (_, t, _) in zip(r, COLUMNS)] for r in written])


def _explain(pg_uri, schema, expected, ids) -> str:
    with psycopg.connect(pg_uri) as conn:
        got = {r[0]: r for r in conn.execute(f'SELECT * FROM "{schema}"."corpus"').fetchall()}
    rows = {int(r[0]): r for r in expected}
    return "\n".join(f"id {i}: file {rows[i]!r}\n      table {got.get(i)!r}" for i in ids[:10])


def stream_file(tmp_path, spec):
    """A batch folder and the path of its one corpus stream file (not yet written)."""
    batch = tmp_path / "batch"
    path = batch / spec.file_for("corpus", 1)
    path.parent.mkdir(parents=True)
    return batch, path


def test_the_marker_is_null_only_in_nullable_columns(pg_uri, schema, tmp_path):
    fmt = Fmt(marker="NA")
    spec = make_spec(fmt)
    batch, path = stream_file(tmp_path, spec)
    path.write_bytes(b"1|NA|NA|NA|NA|NA|NA|\n2|NA||||NA||\n")
    load(pg_uri, schema, batch, spec)
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(f'SELECT * FROM "{schema}".corpus ORDER BY id').fetchall()
    assert rows == [(1, "NA", None, "NA", "NA   ", None, "NA"), (2, "NA", "", "", "     ", None, "")]


def test_quoted_marker_is_a_value_unquoted_is_null(pg_uri, schema, tmp_path):
    # RFC 4180: quoting makes a field a value. With the empty marker, "" is the empty
    # string and an unquoted empty field is NULL, in nullable columns only.
    fmt = Fmt(quoting="csv", delimiter=",", trailing=False, marker="")
    spec = make_spec(fmt)
    batch, path = stream_file(tmp_path, spec)
    path.write_bytes(b'1,"",,"",,,""\n2,,"","","",,\n')
    load(pg_uri, schema, batch, spec)
    with psycopg.connect(pg_uri) as conn:
        rows = conn.execute(f'SELECT * FROM "{schema}".corpus ORDER BY id').fetchall()
    assert rows == [(1, "  ", None, "", "     ", None, ""), (2, "  ", "", "", "     ", None, "")]


def test_many_chunks_with_the_quote_byte_across_their_edges(pg_uri, schema, tmp_path, monkeypatch):
    """The client's guard of quoting none: chunks cut at line ends, lines holding 0x01
    quoted, lines longer than a chunk carried, at chunk sizes that split lines everywhere."""
    fmt = Fmt()
    spec = make_spec(fmt)
    nullable = [n for _, _, n in COLUMNS]
    rows = []
    base = corpus()
    for i in range(4000):
        row = list(base[i % len(base)])
        row[0] = str(i + 1)
        if i % 97 == 0:
            row[3] = row[3] + "\x01" * (i % 3 + 1) + "x" * (i % 700)
        rows.append(row)
    for size in (1 << 20, 4099, 7):
        monkeypatch.setattr(pg_load, "_CHUNK", size)
        batch = tmp_path / f"batch-{size}"
        write_file(batch / spec.file_for("corpus", 1), rows, fmt, nullable)
        load(pg_uri, schema, batch, spec)
        expected = read_independently(batch / spec.file_for("corpus", 1), fmt)
        assert loaded_hashes(pg_uri, schema) == file_hashes(expected), f"chunk size {size}"


def test_streams_and_partitions_with_nullable_columns(pg_uri, schema, tmp_path):
    """Three streams into three partitions: nullable columns stay nullable on the target and
    the staging table, the key stays NOT NULL, and ATTACH still skips its scan."""
    fmt = Fmt(quoting="csv", delimiter=",", trailing=False, marker="", header_lines=1, gzip=True)
    spec = make_spec(fmt)
    batch = tmp_path / "batch"
    nullable = [n for _, _, n in COLUMNS]
    rows = corpus()
    per = len(rows) // 3 + 1
    expected = []
    for k in range(3):
        write_file(batch / spec.file_for("corpus", k + 1), rows[k * per:(k + 1) * per], fmt, nullable)
        expected += read_independently(batch / spec.file_for("corpus", k + 1), fmt)
    _, results = load(pg_uri, schema, batch, spec, streams=3)
    assert all(r["switch"]["attach_scan_skipped"] for r in results), results
    assert loaded_hashes(pg_uri, schema) == file_hashes(expected)
    with psycopg.connect(pg_uri) as conn:
        found = dict(conn.execute(
            "SELECT column_name, is_nullable FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = 'corpus'", (schema,)).fetchall())
    assert found == {n: ("YES" if null else "NO") for n, _, null in COLUMNS}


# --- lengths: at the limit loads, past it fails clearly -------------------------------------
LENGTH_CASES = {
    "varchar one past": (3, "note", "x" * 13, "value too long for type character varying(12)"),
    "varchar multibyte one past": (3, "note", "é" * 13, "value too long for type character varying(12)"),
    "varchar excess trailing spaces": (3, "note", "abc" + " " * 10, "value too long for type character varying(12)"),
    "char one past": (5, "fixed", "abcdef", "value too long for type character(5)"),
}


@pytest.mark.parametrize("case", list(LENGTH_CASES), ids=list(LENGTH_CASES))
def test_a_field_past_its_length_fails_naming_file_line_column(pg_uri, schema, tmp_path, case):
    field, column, value, message = LENGTH_CASES[case]
    fmt = Fmt(header_lines=2)
    spec = make_spec(fmt)
    batch, path = stream_file(tmp_path, spec)
    good = ["1", "NA", "exactly12chr", "x", "abcde", "1", "y" * 20]
    bad = list(good)
    bad[0] = "2"
    bad[field - 1] = value
    lines = ["h1", "h2", "|".join(good) + "|", "|".join(bad) + "|", "3|DE|NA|z|a|NA|z|"]
    path.write_bytes(("\n".join(lines) + "\n").encode())
    with pytest.raises(TargetError) as err:
        load(pg_uri, schema, batch, spec)
    text = str(err.value)
    assert str(path) in text and "line 4," in text and f"column {column}" in text and message in text, text
    assert err.value.permanent
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}".corpus').fetchone()[0] == 0


def test_char_pads_and_excess_trailing_spaces_are_its_padding(pg_uri, schema, tmp_path):
    fmt = Fmt()
    spec = make_spec(fmt)
    batch, path = stream_file(tmp_path, spec)
    path.write_bytes("1|N|NA|x|ab       |1|y|\n".encode())
    load(pg_uri, schema, batch, spec)
    with psycopg.connect(pg_uri) as conn:
        row = conn.execute(f'SELECT code, fixed FROM "{schema}".corpus').fetchone()
    assert row == ("N ", "ab   ")


# --- line numbers are the file's -----------------------------------------------------------
def test_error_line_counts_header_lines_and_quoted_line_breaks(pg_uri, schema, tmp_path):
    fmt = Fmt(quoting="csv", delimiter=",", trailing=False, marker="", header_lines=3)
    spec = make_spec(fmt)
    batch, path = stream_file(tmp_path, spec)
    path.write_bytes(b'a\nb\nc\n1,DE,,"two\nlines\r\nthree",x,1,y\n2,DE,,z,x,1,y\n3,DE,,z,x,notanumber,y\n')
    with pytest.raises(TargetError) as err:
        load(pg_uri, schema, batch, spec)
    text = str(err.value)
    # Line 8 of the file: 3 header lines, a record over three lines, one more record.
    assert "line 8, column qty: 'notanumber': not an integer (integer)" in text, text


def test_field_count_hint_names_the_files_line(pg_uri, schema, tmp_path):
    fmt = Fmt(header_lines=1)
    spec = make_spec(fmt)
    batch, path = stream_file(tmp_path, spec)
    path.write_bytes(b"header\n1|DE|a|b|c|1|d|\n2|DE|a|b|1|d|\n")
    with pytest.raises(TargetError) as err:
        load(pg_uri, schema, batch, spec)
    assert "line 3" in str(err.value) and "line 3 has 6 fields, the spec expects 7" in str(err.value), str(err.value)


# --- gzip ---------------------------------------------------------------------------------
def test_gzip_under_a_plain_name_is_refused_saying_gzip(pg_uri, schema, tmp_path):
    fmt = Fmt()
    spec = make_spec(fmt)
    batch, path = stream_file(tmp_path, spec)
    path.write_bytes(b"1|DE|a|b|c|1|d|\n")
    write_manifest(batch, manifest_for(batch, spec, 1))
    path.write_bytes(gzip.compress(b"1|DE|a|b|c|1|d|\n"))
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "corpus")
    with pytest.raises(TargetError) as err:
        adapter.load(s, path)
    text = str(err.value)
    assert str(path) in text and "gzip-compressed" in text and "line 1" in text and ".gz" in text, text
    assert err.value.permanent


def test_a_broken_gzip_file_fails_clearly(pg_uri, schema, tmp_path):
    fmt = Fmt(gzip=True)
    spec = make_spec(fmt)
    batch, path = stream_file(tmp_path, spec)
    data = gzip.compress(b"1|DE|a|b|c|1|d|\n" * 1000)
    path.write_bytes(data)
    write_manifest(batch, manifest_for(batch, spec, 1))
    path.write_bytes(data[: len(data) // 2])
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "corpus")
    with pytest.raises(TargetError) as err:
        adapter.load(s, path)
    assert str(path) in str(err.value) and "gzip" in str(err.value), str(err.value)


# --- the manifest producer counts rows -----------------------------------------------------
def test_count_file_counts_records_not_lines(tmp_path):
    fmt = Fmt(quoting="csv", delimiter=",", trailing=False, marker="", header_lines=2, crlf=True, gzip=True)
    spec = make_spec(fmt)
    table = spec.table("corpus")
    path = tmp_path / "c.csv.gz"
    rows = corpus()
    write_file(path, rows, fmt, [n for _, _, n in COLUMNS])
    lines = gzip.decompress(path.read_bytes()).count(b"\n")
    size, counted, first, last = count_file(path, table.format, 0)
    assert counted == len(rows) and lines > counted + 2, (counted, lines)
    assert (size, first, last) == (path.stat().st_size, 1, len(rows))
    # The key need not be the first field.
    plain = Fmt(header_lines=1)
    p2 = tmp_path / "p.txt"
    write_file(p2, rows, plain, [n for _, _, n in COLUMNS])
    written = read_independently(p2, plain)
    assert count_file(p2, make_spec(plain).table("corpus").format, 5)[1:] == (
        len(written), int(written[0][5]) if written[0][5] else None, int(written[-1][5]) if written[-1][5] else None)


def test_count_file_refuses_gzip_under_a_plain_name(tmp_path):
    from switchyard.core.batch import BatchError
    path = tmp_path / "x.tbl"
    path.write_bytes(gzip.compress(b"1|a|\n"))
    with pytest.raises(BatchError, match="gzip"):
        count_file(path)


def test_a_null_marker_with_control_characters_is_refused():
    with pytest.raises(SpecError, match="null_marker"):
        make_spec(Fmt(marker="\x01"))


# --- what the field check passes, the server keeps exactly; what it refuses, the server changes --
_INSTANT = re.compile(r"^(?:(\d{4}-\d{2}-\d{2})[T ]?)?(?:(\d{2}):(\d{2})(?::(\d{2}(?:\.\d*)?))?)?"
                      r"\s*(Z|[+-]\d{2}(?::?\d{2})?|[A-Za-z][A-Za-z/]*)?$")


def _instant(text: str) -> tuple:
    """(day, hours, minutes, seconds as an exact Decimal, zone or era) of an ISO 8601 date,
    timestamp or time; a word (`infinity`, `today`) as itself."""
    from decimal import Decimal
    m = _INSTANT.match(text)
    if not m or not (m.group(1) or m.group(2)):
        return (text,)
    return m.group(1), int(m.group(2) or 0), int(m.group(3) or 0), Decimal(m.group(4) or 0), m.group(5)


TIMES = {"timestamp": ["2026-03-01 10:00:00.123456", "2026-03-01 10:00:00.1234567", "2026-03-01 23:59:60",
                       "2026-03-01 24:00:00", "2026-03-01T23:59:59.9999995", "2026-03-01 10:00:00+02",
                       "2026-03-01T10:00:00Z", "2026-03-01 10:00:00 -05:30", "2026-03-01 10:00:00 UTC",
                       "2026-03-01 10:00:00 Europe/Paris", "2026-03-01 10:00:00 BC", "infinity", "now", "epoch",
                       "J2461011 10:00", "26-12-05 10:00:00", "Dec 5 2026 10:00 CET", "2026/12/05 10:00 -0500",
                       "2026-03-01 10:00:00-8", "2026-03-01 10:00:00+01:00:00",
                       # Other forms the server reads as another time, without an error.
                       "2026-01-05 10:30.5", "Jan 5 2026 10:30.5", "2026-01-05 24:0", "20260105 24:0",
                       "2026-01-05TT10:00:00", "2026-01-05 EST 00:00", "Mon Jan  5 10:00:00 EST 2026",
                       "2026-01-05 10:00:00 +05 PM", "today allballs", "2026-01-05 09:0:00.1234567"],
         "timestamp(3)": ["2026-03-01 10:00:00.1230", "2026-03-01 10:00:00.1234", "2026-03-01 10:00:00.9995",
                          "2026-03-01 10:00:00.123000", "2026-03-01T10:00", "2026-03-01 23:59:59.999",
                          "20270501T120000.1234"],
         "timestamp(0)": ["2026-03-01 10:00:00", "2026-03-01 10:00:00.5", "2026/03/01 10:00:00.5", "Mar 1 2026 24:00",
                          "2026-01-05 1:2:3.5", "2026-01-05 10:00:5.5", "2026-01-05 1000.5", "2026-03-01 10:00:00.",
                          "20270501T120000.5", "20270501 120000.5", "2027-05-01T120000.5"],
         "date": ["2026-03-01", "2026-03-01 00:00:00", "2026-03-01T00:00", "2026-03-01 10:11:12", "2026-03-01 UTC", "today", "yesterday",
                  "-infinity", "epoch", "J2461011", "26-12-05", "261205", "5-Dec-26", "20270501T120000",
                  "20270501 134500", "2027-05-01 1:45pm", "Dec 5 2026 10:00"],
         "time": ["10:00:00.123456", "10:00:00.1234567", "10:00:60", "10:00:00+02", "10:00:00 UTC", "10:30.5",
                  "T10:30.5", "9:59:60", "12:00:60 PM", "9:00:00.1234567", "2026/01/05 10:00", "now z"],
         "time(2)": ["10:00:00.12", "10:00:00.125"],
         "time(0)": ["10:00:00", "2026-03-01 10:00:00.7"]}


@pytest.mark.parametrize("sql_type", sorted(TIMES))
def test_the_field_check_refuses_exactly_the_times_the_server_would_change(pg_uri, sql_type):
    """Each value through the server's own input function for the type: a value the check passes
    comes back as the same instant, one it refuses comes back as another (rounded, rolled over into
    the next minute or day, its time of day or its zone dropped, the time of the statement taken for
    a word), never an error the load would report."""
    from switchyard.core.fields import field_check, kept_pattern
    check, kept = field_check(sql_type), re.compile(kept_pattern(sql_type))
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("SET DateStyle = 'ISO, YMD'")      # as the loads read dates
        for text in TIMES[sql_type]:
            stored = conn.execute(f"SELECT %s::{sql_type}::text", (text,)).fetchone()[0]
            assert (check(text) is None) == (_instant(stored) == _instant(text)), (text, stored, check(text))
            # The load's value guard passes on one match only what the server keeps.
            assert not kept.fullmatch(text) or _instant(stored) == _instant(text), (text, stored)


def _epoch(text: str):
    """The exact instant of an ISO 8601 timestamp with an offset (Z, +hh, +hh:mm), in seconds since
    1970 as a Decimal: no rounding, whatever its digits after the second's point."""
    from datetime import datetime, timedelta, timezone
    from decimal import Decimal
    m = re.match(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?\s*(Z|[+-]\d{2})(?::?(\d{2}))?$", text)
    zone = m.group(6)
    offset = timedelta(0) if zone == "Z" else (1 if zone[0] == "+" else -1) * timedelta(
        hours=int(zone[1:]), minutes=int(m.group(7) or 0))
    whole = datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}:{m.group(3)}:{m.group(4)}").replace(
        tzinfo=timezone(offset))
    return Decimal(int(whole.timestamp())) + Decimal("0." + (m.group(5) or "0"))


ZONED = {"timestamptz(3)": ["2026-03-01 10:00:00.123+02", "2026-03-01 10:00:00.1234+02", "2026-03-01T10:00:00Z",
                            "2026-03-01 10:00:00.1230-05:30", "2026-03-01 10:00:00.9995Z"],
         "timestamptz": ["2026-03-01 10:00:00.123456+02", "2026-03-01 10:00:00.1234567+02", "2026-03-01 10:00:00+0530"]}


@pytest.mark.parametrize("sql_type", sorted(ZONED))
def test_the_field_check_refuses_exactly_the_instants_the_server_would_change(pg_uri, sql_type):
    """A type that keeps an instant reads a value's zone: the check passes a value the server keeps
    as the same instant, and refuses one it rounds (digits past its precision)."""
    from decimal import Decimal
    from switchyard.core.fields import field_check, kept_pattern
    check, kept = field_check(sql_type), re.compile(kept_pattern(sql_type))
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for text in ZONED[sql_type]:
            stored = Decimal(str(conn.execute(f"SELECT extract(epoch FROM %s::{sql_type})", (text,)).fetchone()[0]))
            assert (check(text) is None) == (stored == _epoch(text)), (text, stored, _epoch(text), check(text))
            assert not kept.fullmatch(text) or stored == _epoch(text), (text, stored)


TIMES_OF_DAY_ZONED = {
    "timetz": ["10:00:00.123456+02", "10:00:00.1234567+02", "10:00", "10:00Z", "10:00 GMT", "10:00 UTC",
               "10:00 +05:30", "10:00:00-0530", "10:00+5", "10:00 UTC+5", "10:00 EST", "10:00 Europe/Paris",
               "2026-03-01 10:00+01", "10:00:60+01", "10:30.5+01", "now", "allballs"],
    "time(3) with time zone": ["10:00:00.123+02", "10:00:00.1234+02", "23:59:59.9995Z", "10:00:00.1230-03"]}


def _seconds_of_day(text: str):
    """The instant an ISO 8601 time of day with an offset (Z, UTC, GMT, +hh, +hh:mm, none: UTC, as the
    loads read it) stands for, in seconds from midnight UTC as an exact Decimal; None for any other form."""
    from decimal import Decimal
    m = re.match(r"^(\d{2}):(\d{2})(?::(\d{2}(?:\.\d*)?))?\s*(?:(Z|UTC|GMT)|([+-])(\d{2})(?::?(\d{2}))?)?$", text)
    if m is None or int(m[1]) > 23 or int(m[2]) > 59 or Decimal(m[3] or 0) >= 60:
        return None
    offset = 0 if not m[5] else (1 if m[5] == "+" else -1) * (int(m[6]) * 3600 + int(m[7] or 0) * 60)
    return int(m[1]) * 3600 + int(m[2]) * 60 + Decimal(m[3] or 0) - offset


@pytest.mark.parametrize("sql_type", sorted(TIMES_OF_DAY_ZONED))
def test_the_field_check_refuses_exactly_the_times_of_day_with_a_zone_the_server_would_change(pg_uri, sql_type):
    """PostgreSQL's time with time zone: the check passes a value the server keeps as the time and
    offset written, and refuses one it reads as another (UTC+5 as -05, an abbreviation by its own
    list, digits past its precision rounded, a date dropped, a word as the load's own time) or
    refuses at the load (a region's name, which it reads only with a date)."""
    from decimal import Decimal
    from switchyard.core.fields import field_check, kept_pattern
    check, kept = field_check(sql_type), re.compile(kept_pattern(sql_type))
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")      # as the loads read times
        for text in TIMES_OF_DAY_ZONED[sql_type]:
            try:
                stored = Decimal(str(conn.execute(f"SELECT extract(epoch FROM %s::{sql_type})", (text,)).fetchone()[0]))
            except psycopg.errors.DataError:
                stored = None       # the load's error, after other loads ran: the check refuses it first
            meant = _seconds_of_day(text)
            kept_as_written = stored is not None and meant is not None and stored == meant
            assert (check(text) is None) == kept_as_written, (text, stored, meant, check(text))
            assert not kept.fullmatch(text) or kept_as_written, (text, stored)


REGIONS = ["2026-07-01 10:00:00 Europe/Berlin", "2026-10-25 01:59:59 europe/berlin", "2026-10-25 03:30 Europe/Berlin",
           "2026-10-25 02:30:00 Europe/Berlin", "2026-03-29 02:30:00 Europe/Berlin", "2026-11-01 01:30 America/New_York",
           "Oct 25 2026 2:30 AM Europe/Berlin", "Jul 1 2026 10:00 AM Europe/Berlin", "2026-07-01 10:00 Europe/Berlinn"]


def test_the_field_check_refuses_exactly_the_local_times_of_a_region_that_are_not_one_instant(pg_uri):
    """A time with a region's name (`Europe/Berlin`) in a timestamptz: the check passes one the
    server keeps as the instant the region's clocks showed it at once, and refuses one its clocks
    pass twice (the hour repeated at the change back) or skip (at the change forward), which the
    server stores as one reading without an error, and a region it does not have (its error)."""
    from datetime import datetime, timezone
    from decimal import Decimal
    from zoneinfo import ZoneInfo, available_timezones
    from switchyard.core.fields import field_check
    check = field_check("timestamptz")
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("SET DateStyle = 'ISO, YMD'")
        conn.execute("SET TimeZone = 'UTC'")
        for text in REGIONS:
            try:
                stored = Decimal(str(conn.execute("SELECT extract(epoch FROM %s::timestamptz)", (text,)).fetchone()[0]))
            except psycopg.errors.DataError:
                stored = None
            local, zone = text.rsplit(" ", 1)
            zone = next((z for z in available_timezones() if z.lower() == zone.lower()), None)
            wall = datetime.strptime(local, "%b %d %Y %I:%M %p" if "M" in local[-2:] else
                                     "%Y-%m-%d %H:%M:%S" if local.count(":") == 2 else "%Y-%m-%d %H:%M")
            readings = {wall.replace(tzinfo=ZoneInfo(zone), fold=f).astimezone(timezone.utc) for f in (0, 1)} if zone \
                else set()
            one_instant = len(readings) == 1 and readings.pop().astimezone(ZoneInfo(zone)).replace(tzinfo=None) == wall
            meant = Decimal(int(wall.replace(tzinfo=ZoneInfo(zone)).timestamp())) if one_instant else None
            assert (check(text) is None) == (stored is not None and stored == meant), (text, stored, meant, check(text))


OFFSETS = ["2026-03-01 10:00+15:59", "2026-03-01 10:00-15:59", "2026-03-01 10:00+16:00", "2026-03-01 10:00-1600",
           "2026-03-01 10:00+24:00", "2026-03-01 10:00+05:60", "2026-03-01 10:00+14", "2026-03-01 10:00+00:00",
           "2026-03-01 10:00 posix/Europe/Paris", "2026-03-01 10:00 right/Asia/Tokyo", "2026-03-01 10:00 Europe/Paris"]


def test_the_field_check_passes_exactly_the_offsets_and_zones_the_server_reads(pg_uri):
    """An offset PostgreSQL reads (up to 15:59 either way) and a region of its time zone database
    pass; an offset past it, minutes past 59, a region of the database's posix/ or right/ trees
    (which PostgreSQL's does not have) are refused, as the load would refuse them. The same for a
    time of day with its zone's offset."""
    from switchyard.core.fields import field_check
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for sql_type, texts in (("timestamptz", OFFSETS),
                                ("timetz", [t.split(" ", 1)[1] for t in OFFSETS if "/" not in t])):
            check = field_check(sql_type)
            for text in texts:
                try:
                    conn.execute(f"SELECT %s::{sql_type}", (text,))
                    read = True
                except psycopg.errors.DataError:
                    read = False
                assert (check(text) is None) == read, (sql_type, text, check(text))


DECIMALS = {"numeric(10,3)": ["12.345", "12.3456", "0012.300", "12.3450000", "-.5", "+7.", "12.3451", "1.2345e1", "1.23456e1", "1e-3", "1e-4", "1e2", "0e5",
                             "-1.5E+2", "0.00100e2", "1234567e0", "12345678e0"],
            "numeric(5,2)": ["999.99", "9999e-1", "99999e-3", "999.995", "1e999999999999999999999999"]}


@pytest.mark.parametrize("sql_type", sorted(DECIMALS))
def test_the_field_check_refuses_exactly_the_decimals_the_server_would_change(pg_uri, sql_type):
    """Each number through the server's numeric input: a value the check passes comes back as the
    same number; one it refuses comes back rounded, or is an error the load would stop at. An
    exponent is counted as the digits it stands for (1.23456e1 is 12.3456: rounded to 12.346)."""
    from decimal import Decimal
    from switchyard.core.fields import field_check, kept_pattern
    check, kept = field_check(sql_type), re.compile(kept_pattern(sql_type))
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for text in DECIMALS[sql_type]:
            try:
                stored = conn.execute(f"SELECT %s::{sql_type}::text", (text,)).fetchone()[0]
            except psycopg.errors.NumericValueOutOfRange:
                assert check(text) is not None, text     # refused before the load that would stop at it
                continue
            assert (check(text) is None) == (Decimal(stored) == Decimal(text)), (text, stored, check(text))
            # The load's value guard passes on one match only what the server keeps.
            assert not kept.fullmatch(text) or Decimal(stored) == Decimal(text), (text, stored)


INTEGERS = ["12", "+12", "-0", "007", " 12 ", "-2147483648", "0x1F", "0X1f", "-0x1F", "0o17", "0b101", "1_000", "1_0",
            "12.0", "1e3", "2147483648", "", "\u0663"]


def test_the_field_check_passes_exactly_the_integers_the_server_reads_as_written(pg_uri):
    """Each field through PostgreSQL's integer input: the check passes a field the server stores
    as the number its decimal digits say, and refuses one it reads as another (`0x1F` is 31 since
    PostgreSQL 16, `1_000` is 1000) or does not read (the load would stop at it). The load's value
    guard passes on one match only decimal digits, which the server keeps or refuses."""
    from switchyard.core.fields import field_check, kept_pattern
    check, kept = field_check("integer"), re.compile(kept_pattern("integer"))
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for text in INTEGERS:
            try:
                stored = conn.execute("SELECT %s::integer::text", (text,)).fetchone()[0]
            except (psycopg.errors.InvalidTextRepresentation, psycopg.errors.NumericValueOutOfRange):
                stored = None
            as_written = re.fullmatch(r"\s*[+-]?[0-9]+\s*", text) is not None and stored == str(int(text))
            assert (check(text) is None) == as_written, (text, stored, check(text))
            # Kept as written, or refused with an error the load reports (out of the type's range).
            assert not kept.fullmatch(text) or stored in (None, str(int(text))), (text, stored)
    assert [t for t in INTEGERS if field_check("integer")(t) is None] == ["12", "+12", "-0", "007", " 12 ",
                                                                          "-2147483648"]


FLOATS = ["1.5", " 1.5 ", "-.25", "1e3", "12.", "inf", "-Infinity", "NaN", "0x10", "0x1p3", "1_000.5", "1,5", "",
          "\u0661.5", "1e400", "-1e400", "1e-400", "1e39", "1e-50", "0e-500"]


@pytest.mark.parametrize("sql_type", ["double precision", "real", "numeric"])
def test_the_field_check_passes_exactly_the_floats_the_server_reads_as_written(pg_uri, sql_type):
    """Each field through PostgreSQL's input for a float, and for a numeric without a precision:
    the check passes a field the server stores as the number Python reads in it, and refuses one
    the server reads as another number (`0x10` is 16) or does not read; the load's value guard
    passes on one match only decimal digits. A numeric takes no word (`inf`, `NaN`)."""
    import math
    from switchyard.core.fields import field_check, kept_pattern
    check, kept = field_check(sql_type), re.compile(kept_pattern(sql_type))
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for text in FLOATS:
            try:
                stored = float(conn.execute(f"SELECT %s::{sql_type}", (text,)).fetchone()[0])
            except psycopg.errors.DataError:
                stored = None
            try:
                meant = float(text) if text.isascii() and "_" not in text else None
            except ValueError:
                meant = None
            same = stored is not None and meant is not None and (
                stored == meant or math.isnan(stored) and math.isnan(meant) or abs(stored - meant) < 1e-6 * abs(meant))
            as_written = same and (sql_type != "numeric" or not any(c.isalpha() for c in text.lower().replace("e", "")))
            assert (check(text) is None) == as_written, (text, stored, check(text))
            # Kept as written, or refused with an error the load reports (`1e400`: out of range).
            assert not kept.fullmatch(text) or same or stored is None, (text, stored)


BOOLEANS = ["true", "TRUE", "t", "tr", "tru", "yes", "Y", "ye", "on", "1", "false", "f", "fa", "no", "n", "off", "of",
            "0", " true ", "o", "2", "-1", "maybe", "", "yess", "truth", "01"]


def test_the_field_check_passes_exactly_the_booleans_the_server_reads(pg_uri):
    """Each field through PostgreSQL's boolean input: the check of its `boolean` passes exactly the
    fields the server reads, and refuses the others (the load would stop at them). A `boolean` for
    every target passes only what SQL Server's bit reads alike: true, false, 1, 0."""
    from switchyard.core.fields import field_check
    check, neutral = field_check("boolean"), field_check("boolean", neutral=True)
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for text in BOOLEANS:
            try:
                conn.execute("SELECT %s::boolean", (text,))
                read = True
            except psycopg.errors.InvalidTextRepresentation:
                read = False
            assert (check(text) is None) == read, (text, check(text))
            assert neutral(text) is not None or (read and text.lower() in ("true", "false", "1", "0")), text
    assert [t for t in BOOLEANS if neutral(t) is None] == ["true", "TRUE", "1", "false", "0"]


def _copy_refused(conn, body: bytes) -> bool:
    """Whether COPY's CSV reader refuses `body` as the load reads a file (the NULL marker the empty
    field, not in the first column, `a`) into the temporary table `t`, emptied after."""
    try:
        with conn.cursor().copy("COPY t FROM STDIN (FORMAT csv, FORCE_NOT_NULL (a))") as copy:
            copy.write(body)
        return False
    except psycopg.errors.DataError:        # a bad line end, a value its type does not read
        return True
    finally:
        conn.execute("TRUNCATE t")


CSV_LINE_ENDS = [b'1,"1.50"\n2,"2.50"\r\n', b'1,"1.50"\r\n2,"2.50"\n', b'1,1.50\r\n2,2.50\n', b'1,"1.50"\n2,2.50\n',
                 b'1,"1.50"\r\n2,"2.50"\r\n', b'1,1.50\r\n2,\r\n', b'1,1.50\r\n2,""\r\n', b'1,"1.\n5"\n2,\n']


def test_the_check_refuses_exactly_the_csv_line_ends_and_quoted_markers_the_server_refuses(pg_uri, tmp_path):
    """Each file through COPY's CSV reader, as the load reads it (the NULL marker the empty field,
    in the nullable column): the check refuses exactly those the server stops at (a line end unlike
    the first record's; a quoted empty field, a value, in a number column)."""
    from switchyard.core.batch import check_batch, describe_batch, write_manifest
    from switchyard.core.spec import parse_spec
    spec = parse_spec({"name": "e", "files": "{table}/{table}.{stream}.csv", "tables": {"t": {
        "partitioned": False, "columns": [{"name": "a", "type": "integer"},
                                          {"name": "b", "type": "numeric(12,2)", "nullable": True}]}},
        "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "null_marker": ""}})
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("CREATE TEMP TABLE t (a integer NOT NULL, b numeric(12,2))")
        for i, body in enumerate(CSV_LINE_ENDS):
            folder = tmp_path / str(i)
            (folder / "t").mkdir(parents=True)
            (folder / "t" / "t.1.csv").write_bytes(body)
            refused = _copy_refused(conn, body)
            write_manifest(folder, describe_batch(folder, spec))
            assert bool(check_batch(folder, spec)) == refused, (body, check_batch(folder, spec))


ODD_FIELDS = [b'1,"",,x\n', b'1,,"",x\n', b"1,,\xd9\xa1\xd9\xa2,x\n", b"\xd9\xa1,,,x\n", b"1,,,a\x00b\n",
              b"1,5/6/2027,,x\n", b"1,6.5.2027,,x\n",
              b"1,2026-03-01,12.50,x\n", b'1,,,""\n', b"1,,,\n", b'1,"2026-03-01","12.50","x"\n', b"1,Dec 5 2026,,x\n",
              b"1,2026/12/05,,x\n"]


def test_the_check_refuses_exactly_the_odd_fields_the_servers_copy_refuses(pg_uri, tmp_path):
    """Each record through COPY's CSV reader, as the load reads it: a quoted empty field (a value,
    never NULL) in a date or a number column, another script's digits (`١٢`) in a number, a NUL
    byte in text. The check refuses exactly those the server refuses, before any load."""
    from switchyard.core.batch import check_batch
    from switchyard.core.spec import parse_spec
    spec = parse_spec({"name": "odd", "files": "{table}/{table}.{stream}.csv", "tables": {"t": {
        "partitioned": False, "columns": [{"name": "a", "type": "integer"},
                                          {"name": "d", "type": "date", "nullable": True},
                                          {"name": "n", "type": "numeric(12,2)", "nullable": True},
                                          {"name": "note", "type": "varchar(20)", "nullable": True}]}},
        "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "null_marker": ""}})
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute("SET DateStyle = 'ISO, YMD'")      # as the loads read dates
        conn.execute("CREATE TEMP TABLE t (a integer NOT NULL, d date, n numeric(12,2), note varchar(20))")
        said = []
        for i, body in enumerate(ODD_FIELDS):
            folder = tmp_path / str(i)
            (folder / "t").mkdir(parents=True)
            (folder / "t" / "t.1.csv").write_bytes(body)
            refused = _copy_refused(conn, body)
            (folder / "manifest.json").write_text(json.dumps({
                "format": "switchyard-manifest/1", "spec": "odd", "streams": 1, "files": [
                    {"table": "t", "stream": 1, "file": "t/t.1.csv", "bytes": len(body), "rows": 1}]}))
            assert bool(check_batch(folder, spec)) == refused, (body, refused, check_batch(folder, spec))
            said.append(refused)
    # The first seven are odd fields the server refuses (a date day or month first among them, as the
    # loads read dates year first); a quoted empty text is a value, NULLs and other forms pass.
    assert said == [True] * 7 + [False] * 6, said


def _staged(uri: str, schema: str, spec, batch: Path, table: str, stream: int = 1):
    """(adapter, plan, stream) of a batch set up on the target, the stream's staging table made."""
    plan = plan_batch(spec, read_manifest(batch, spec))
    adapter = PostgresAdapter(spec, uri=uri, schema=schema)
    adapter.setup(plan)
    s = plan.stream(table, stream)
    adapter.prepare(s)
    return adapter, plan, s


# --- a file's UTF-8 byte order mark: not data, so refused before any load where it would be --
def _lookup_batch(tmp_path: Path, name: str, data: bytes, **fmt):
    """A batch of one lookup table keyed by a text code, its one file holding `data`, with the
    manifest a producer counts for it (`manifest_for`; `switchyard manifest` would refuse a
    file the check refuses)."""
    spec = parse_spec({"name": "bom", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", **fmt},
                       "tables": {"stations": {"partitioned": False, "key": "code", "columns": [
                           {"name": "code", "type": "varchar(8)"}, {"name": "name", "type": "varchar(40)"}]}}})
    batch = tmp_path / name
    (batch / "stations").mkdir(parents=True)
    (batch / "stations" / "stations.1.csv").write_bytes(data)
    write_manifest(batch, manifest_for(batch, spec, 1))
    return batch, spec


def test_an_empty_lookup_is_refused_while_the_table_holds_rows_and_loaded_once_it_was_emptied(pg_uri, schema,
                                                                                             tmp_path):
    """A lookup's batch whose file has its header only: loading it would empty the table, which a
    producer's empty file by mistake must not do, so the batch is refused before any load while the
    table holds rows. Emptied on purpose (the refusal's way on), the same batch loads: the table
    stays empty and holds that batch, as its control row says."""
    full, spec = _lookup_batch(tmp_path, "full", b"code,name\nST001,Main street\nST002,Harbour\n", header_lines=1)
    load_through_steps(pg_uri, schema, spec, full, "full")
    empty, _ = _lookup_batch(tmp_path, "empty", b"code,name\n", header_lines=1)
    with pytest.raises(TargetError) as refused:
        load_through_steps(pg_uri, schema, spec, empty, "empty")
    assert (f"{schema}.stations: its one stream is empty in this batch (0 rows); loading it would empty the table. "
            f"If that is meant, truncate the table yourself") in str(refused.value), str(refused.value)
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}".stations').fetchone()[0] == 2
        conn.execute(f'TRUNCATE "{schema}".stations')
    load_through_steps(pg_uri, schema, spec, empty, "empty")
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}".stations').fetchone()[0] == 0
        assert conn.execute("SELECT batch FROM switchyard.partition_batches WHERE target_schema = %s AND "
                            "table_name = 'stations'", (schema,)).fetchall() == [("empty",)]


def test_a_byte_order_mark_the_load_would_keep_refuses_the_batch_before_any_load(pg_uri, schema, tmp_path):
    """Some tools write UTF-8's byte order mark (EF BB BF) before a file's text. The load keeps it
    as the start of the first field: the code `ST001` is stored as `\ufeffST001` and joins nothing.
    The batch's check (the plan's and `switchyard check`'s) refuses it, naming the file, the line
    and the column; in a header line, which the load skips, it is no problem."""
    from switchyard.core.batch import check_batch
    bom, rows = b"\xef\xbb\xbf", b"ST001,Main street\nST002,\xc3\x9cbergang\n"
    batch, spec = _lookup_batch(tmp_path, "no-header", bom + rows)
    path = batch / "stations" / "stations.1.csv"
    assert check_batch(batch, spec) == [
        f"{path}: line 1, column code: starts with UTF-8's byte order mark (EF BB BF), which the load would keep "
        f"as the start of the first field; write the file without it (UTF-8 without BOM), or say "
        f"`header_lines: 1` if its first line is a header"]
    # What the refusal keeps out: loaded anyway, the server keeps the mark in the key.
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "stations")
    adapter.load(s, path)
    adapter.switch(s)
    publish(adapter, plan)
    with psycopg.connect(pg_uri) as conn:
        codes = [r[0] for r in conn.execute(f'SELECT code FROM "{schema}"."stations" ORDER BY name')]
    assert codes == ["\ufeffST001", "ST002"]
    # The producer's manifest is refused for it the same way.
    with pytest.raises(BatchError, match=r"line 1, column code: starts with UTF-8's byte order mark"):
        describe_batch(batch, spec)
    # In a header line the mark is skipped with the line: nothing to refuse.
    batch, spec = _lookup_batch(tmp_path, "header", bom + b"code,name\n" + rows, header_lines=1)
    assert check_batch(batch, spec) == []
    # A file the spec calls latin-1 that starts with it is UTF-8: its other characters would change.
    batch, spec = _lookup_batch(tmp_path, "latin-1", bom + b"code,name\n" + rows, header_lines=1, encoding="latin-1")
    found = check_batch(batch, spec)
    assert found[0] == (
        f"{batch / 'stations' / 'stations.1.csv'}: line 1: starts with UTF-8's byte order mark, but the spec says "
        f"the file's encoding is latin-1: its characters past ASCII would load as other characters; say "
        f"`encoding: utf-8`")
    # ... and its text past ASCII says the same (test_utf8_text_in_a_file_the_spec_calls_latin_1_...).
    assert len(found) == 2 and "line 3, column name: the file's text past ASCII reads as UTF-8" in found[1], found


# --- a header line that is a record: a file written without its header -----------------------
def test_a_file_without_its_header_line_refuses_the_batch_before_any_load(pg_uri, schema, tmp_path):
    """A producer that writes the header line in its first file only: `header_lines: 1` skips the
    first record of the others, and a manifest counted the same way (records after the header
    lines) agrees with the load, so the run would end `success` a record short per file. The
    line skipped as a header is read: a record of the table (a bigint where a name would be) is
    refused by the plan's check, `switchyard check` and `switchyard manifest`, naming the file."""
    from dataclasses import replace
    from switchyard.core.batch import check_batch
    spec = parse_spec({"name": "hdr", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                       "tables": {"trips": {"key": "trip_id", "columns": [
                           {"name": "trip_id", "type": "bigint"}, {"name": "station", "type": "varchar(20)"}]}}})
    batch = tmp_path / "batch"
    (batch / "trips").mkdir(parents=True)
    first, second = batch / "trips" / "trips.1.csv", batch / "trips" / "trips.2.csv"
    first.write_bytes(b"trip_id,station\n1,Nord\n2,Sud\n")
    second.write_bytes(b"trip_id,station\n10,Ost\n11,West\n")
    manifest = describe_batch(batch, spec)
    write_manifest(batch, manifest)
    assert check_batch(batch, spec) == []
    # The second file as its producer writes it, without the header; its manifest entry counted
    # the way the load reads it: one record, keys 11..11.
    second.write_bytes(b"10,Ost\n11,West\n")
    entries = tuple(replace(e, bytes=second.stat().st_size, rows=count_file(second, spec.table("trips").format)[1],
                            key_min=11) if e.stream == 2 else e for e in manifest.entries)
    write_manifest(batch, replace(manifest, entries=entries))
    refusal = (f"{second}: line 1: skipped as a header line (header_lines: 1), but it is a record of trips (column "
               f"trip_id: '10', a value of bigint, not a name): the load would leave it out; write the file with its "
               f"header line, or say `header_lines: 0`")
    assert check_batch(batch, spec) == [refusal]
    with pytest.raises(BatchError, match=re.escape(refusal)):
        describe_batch(batch, spec)
    # What the refusal keeps out: loaded anyway, the record is gone and the count agrees.
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "trips", 2)
    assert adapter.load(s, second).rows == s.rows == 1


def test_a_header_line_the_load_would_take_for_a_record_refuses_the_batch_before_any_load(pg_uri, schema, tmp_path):
    """The other way round: a file with its header line, a spec without `header_lines`. In a
    table of text columns the header loads as a record, without an error. A first line that is
    the table's column names, in order, is refused before any load."""
    from switchyard.core.batch import check_batch
    batch, spec = _lookup_batch(tmp_path, "names", b"Code,Name\nST001,Main street\n")
    path = batch / "stations" / "stations.1.csv"
    refusal = (f"{path}: line 1: the table's column names (code, name), a header line, which the load would take "
               f"for a record of stations (header_lines: 0); say `header_lines: 1`")
    assert check_batch(batch, spec) == [refusal]
    # What the refusal keeps out: loaded anyway, the header is a row of the table.
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "stations")
    assert adapter.load(s, path).rows == s.rows == 2
    with pytest.raises(BatchError, match=re.escape(refusal)):
        describe_batch(batch, spec)
    # With the header line said, the batch is what it holds.
    batch, spec = _lookup_batch(tmp_path, "said", b"Code,Name\nST001,Main street\n", header_lines=1)
    assert check_batch(batch, spec) == []


# --- RFC 4180's quotes: one where none is allowed is refused, not dropped ------------------------
@pytest.mark.parametrize("line, column, stored", [
    (b'3,b "x" c\n', "name", "b x c"),        # quotes inside an unquoted field
    (b'3,"q"r\n', "name", "qr"),               # text after a closing quote
    (b'3,x""\n', "name", "x"),                 # a doubled quote in an unquoted field
    (b'""3,x\n', "code", None),                # text after an empty quoted field
])
def test_a_quote_where_rfc_4180_allows_none_is_refused_not_dropped(pg_uri, schema, tmp_path, line, column, stored):
    """PostgreSQL's CSV reader takes a quote RFC 4180 does not allow where it is without an error
    and drops it: `b "x" c` is stored as `b x c`. Python's csv module, which the batch's check
    reads records with, keeps it. Such a quote is refused by the check and by the load, naming
    the file, the line and the column; quotes where RFC 4180 puts them load byte for byte."""
    from switchyard.core.batch import check_batch
    good = b'1,"say ""hi"", then ""bye"""\n2,"two\nlines, one field"\n'
    batch, spec = _lookup_batch(tmp_path, "quotes", b"code,name\n" + good + line, header_lines=1)
    path = batch / "stations" / "stations.1.csv"
    said = (f"{path}: line 5, column {column}: a quote where RFC 4180 allows none (quoting: csv): a field holding "
            f"a quote is quoted whole, each quote in it doubled")
    problems = check_batch(batch, spec)
    assert len(problems) >= 1 and problems[0].startswith(said), problems
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "stations")
    with pytest.raises(TargetError) as refused:
        adapter.load(s, path)
    assert refused.value.permanent and str(refused.value).startswith(said), str(refused.value)
    assert "kept for inspection, empty: the COPY rolled back" in str(refused.value)
    if stored is not None:
        # What the refusal keeps out: the server's CSV reader, given the line as it is.
        with psycopg.connect(pg_uri) as conn, conn.cursor() as cur:
            cur.execute("CREATE TEMP TABLE t (code text, name text)")
            with cur.copy("COPY t FROM STDIN (FORMAT csv)") as copy:
                copy.write(line)
            assert cur.execute("SELECT name FROM t").fetchone() == (stored,)
    # Without the misplaced quote the same file loads byte for byte.
    batch, spec = _lookup_batch(tmp_path, "quotes-good", b"code,name\n" + good, header_lines=1)
    assert check_batch(batch, spec) == []
    plan = plan_batch(spec, read_manifest(batch, spec))
    adapter.setup(plan)
    adapter.prepare(s)
    assert adapter.load(s, batch / "stations" / "stations.1.csv").rows == 2
    adapter.switch(s)
    publish(adapter, plan)
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f'SELECT code, name FROM "{schema}"."stations" ORDER BY code').fetchall() == [
            ("1", 'say "hi", then "bye"'), ("2", "two\nlines, one field")]


# --- a field the server would change: refused by the load of a batch too big to read before it ------
@pytest.mark.parametrize("field, column, why", [
    ("12.345", "price", "3 digits after the point, numeric(12,2) keeps 2"),
    ("19.989999999", "price", "9 digits after the point"),
    ("2026-03-01 10:00:00+02", "at", "a time zone (+02)"),
    ("2026-03-01 10:00:00.1234567", "at", "7 digits after the second's point"),
    ("0x1F", "qty", "not an integer (integer)"),
    ("1_000", "qty", "not an integer (integer)"),
    ("yes", "paid", "not a boolean (boolean: true, false, 1 or 0"),
])
def test_a_field_the_server_would_change_is_refused_by_the_load(pg_uri, schema, tmp_path, field, column, why):
    """A batch too big to read field by field before its loads (SWITCHYARD_CHECK_FIELDS_MB) is read
    by them as it streams: a field PostgreSQL would store changed, without an error, fails the
    load, naming the file, the line and the column, and nothing of the file is kept. The server's
    own reading of the field is shown beside: the value it would have stored."""
    from switchyard.core.batch import check_batch
    spec = parse_spec({"name": "prices", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                       "tables": {"prices": {"partitioned": False, "key": "sku", "columns": [
                           {"name": "sku", "type": "varchar(8)"}, {"name": "price", "type": "numeric(12,2)"},
                           {"name": "at", "type": "timestamp"}, {"name": "qty", "type": "integer"},
                           {"name": "paid", "type": "boolean"}]}}})
    good = "".join(f"S{i:03},{i}.50,2026-03-01 10:00:00.{i:06},{i},true\n" for i in range(1, 5000))
    fields = {"price": "1.00", "at": "2026-03-01 10:00:00", "qty": "7", "paid": "false", column: field}
    bad = f"S9999,{fields['price']},{fields['at']},{fields['qty']},{fields['paid']}\n"
    batch = tmp_path / "prices"
    (batch / "prices").mkdir(parents=True)
    path = batch / "prices" / "prices.1.csv"
    path.write_text("sku,price,at,qty,paid\n" + good + bad + good.replace("S", "T"))
    write_manifest(batch, manifest_for(batch, spec, 1))
    said = f"{path}: line 5001, column {column}: {field!r}: {why}"
    assert any(p.startswith(said) for p in check_batch(batch, spec)), check_batch(batch, spec)
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "prices")
    with pytest.raises(TargetError) as refused:
        adapter.load(s, path)
    assert refused.value.permanent and str(refused.value).startswith(said), str(refused.value)
    assert "kept for inspection, empty: the COPY rolled back" in str(refused.value)
    with psycopg.connect(pg_uri) as conn:
        staged = conn.execute(f'SELECT count(*) FROM "{schema}_staging"."{s.staging_table}"').fetchone()[0]
        sql_type = {"price": "numeric(12,2)", "at": "timestamp", "qty": "integer", "paid": "boolean"}[column]
        stored = conn.execute(f"SELECT %s::{sql_type}::text", (field,)).fetchone()[0]
    assert staged == 0
    assert stored != field, stored      # what the load would have kept: rounded, or its zone dropped



def test_a_postgres_money_keeps_the_digits_of_the_sessions_locale_and_the_load_refuses_more(pg_uri, schema,
                                                                                            tmp_path):
    """A money for PostgreSQL alone keeps the digits of the session's lc_monetary (2 in the C
    locale, 0 for yen): the load reads them from the server and refuses a field with more, which
    the server would round without an error, naming the file, the line and the column. The plan's
    read of every target's types does not know the target's locale: the load is where it is found."""
    from switchyard.core.batch import check_batch
    spec = parse_spec({"name": "fees", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                       "tables": {"fees": {"partitioned": False, "key": "code", "columns": [
                           {"name": "code", "type": "varchar(8)"},
                           {"name": "fee", "type": {"postgres": "money", "mssql": "money"}}]}}})
    batch = tmp_path / "fees"
    (batch / "fees").mkdir(parents=True)
    path = batch / "fees" / "fees.1.csv"
    path.write_text("code,fee\nA,12.50\nB,3\nC,0.125\n")
    write_manifest(batch, manifest_for(batch, spec, 1))
    assert check_batch(batch, spec) == []
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "fees")
    with pytest.raises(TargetError) as refused:
        adapter.load(s, path)
    said = (f"{path}: line 4, column fee: '0.125': 3 digits after the point, money keeps 2: the load would round "
            f"it to another value without an error")
    assert refused.value.permanent and str(refused.value).startswith(said), str(refused.value)
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT '0.125'::money::numeric::text").fetchone()[0] == "0.13"   # the server's reading
        assert conn.execute(f'SELECT count(*) FROM "{schema}_staging"."{s.staging_table}"').fetchone()[0] == 0
    path.write_text("code,fee\nA,12.50\nB,3\nC,0.12\n")
    write_manifest(batch, manifest_for(batch, spec, 1))
    assert adapter.load(s, path).rows == 3


# --- a compressed file cut short inside its last field: refused by the load ------------------------
@pytest.mark.parametrize("fmt", [
    {"delimiter": "|"},                                               # COPY's text format
    {"delimiter": "|", "null_marker": ""},                            # CSV, quoting none
    {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
], ids=["text", "csv-none", "csv"])
def test_a_compressed_file_cut_short_inside_its_last_field_is_refused_by_the_load(pg_uri, schema, tmp_path, fmt):
    """A gzip file whose last line has no line end, cut inside its last field, in a batch too big
    to read field by field before its loads (the plan reads a plain file's last byte, not a
    compressed file's end): as many fields as any record, so COPY would take what is left for the
    value. Each of the load's ways to COPY refuses it, naming the file, the line and the column,
    and nothing of the file is kept; the whole file loads."""
    spec = parse_spec({"name": "cut", "files": "{table}/{table}.{stream}.txt.gz", "format": fmt,
                       "tables": {"notes": {"partitioned": False, "key": "id", "columns": [
                           {"name": "id", "type": "bigint"}, {"name": "body", "type": "varchar(20)"},
                           {"name": "tag", "type": "varchar(20)", "nullable": True}]}}})
    sep, end = fmt["delimiter"], "" if fmt.get("trailing_delimiter") is False else fmt["delimiter"]
    whole = ("id,body,tag\n" if fmt.get("header_lines") else "") + "".join(
        f"{i}{sep}note {i}{sep}tag {i}{end}\n" for i in range(1, 5001))
    batch = tmp_path / "cut"
    (batch / "notes").mkdir(parents=True)
    path = batch / "notes" / "notes.1.txt.gz"
    path.write_bytes(gzip.compress(whole.encode()))
    write_manifest(batch, manifest_for(batch, spec, 1))
    path.write_bytes(gzip.compress(whole[:-1].replace("tag 5000", "tag 5").encode()))   # `tag 5`, no line end
    write_manifest(batch, manifest_for(batch, spec, 1))      # the producer's manifest, of the cut file
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "notes")
    with pytest.raises(TargetError) as refused:
        adapter.load(s, path)
    said = f"{path}: line {5000 + fmt.get('header_lines', 0)}: the file's last line has no line end"
    assert refused.value.permanent and str(refused.value).startswith(said), str(refused.value)
    assert "kept for inspection, empty: the COPY rolled back" in str(refused.value)
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}_staging"."{s.staging_table}"').fetchone()[0] == 0
    path.write_bytes(gzip.compress(whole.encode()))
    assert adapter.load(s, path).rows == 5000

# --- text of another encoding in a file the spec calls latin-1 ---------------------------------------
WINDOWS = "ST001,Café\nST002,\u20ac 5 \u2018net\u2019\n"


@pytest.mark.parametrize("text, written, line, told", [
    # UTF-8 text: `Müller` would load as `MÃ¼ller`; written in latin-1 it loads as written.
    ("ST001,Müller\nST002,Ærø café\n", "utf-8", 1,
     "the file's text past ASCII reads as UTF-8, but the spec says its encoding is latin-1: each such character "
     "would load as two or three others without an error"),
    # Windows' cp1252 writes `€`, `‘`, `’` and `…` as bytes 0x80-0x9F, latin-1's C1 control characters:
    # the euro signs would load as U+0080; the same file called cp1252 loads as written.
    (WINDOWS, "cp1252", 2,
     "byte 0x80, a control character in latin-1 (C1, 0x80-0x9F), which text does not hold; it is '\u20ac' in "
     "Windows' cp1252"),
], ids=["utf-8", "cp1252"])
def test_text_of_another_encoding_in_a_file_the_spec_calls_latin_1_is_refused_not_loaded_changed(
        pg_uri, schema, tmp_path, text, written, line, told):
    """In latin-1 every byte is a character, so a file of another encoding loads without an error,
    its text changed. Such text is refused by the check and by the load, naming the line and the
    column; the file written in the encoding its spec says loads byte for byte."""
    from switchyard.core.batch import check_batch
    batch, spec = _lookup_batch(tmp_path, "wrong", text.encode(written), encoding="latin-1")
    path = batch / "stations" / "stations.1.csv"
    said = f"{path}: line {line}, column name: {told}"
    problems = check_batch(batch, spec)
    assert len(problems) == 1 and problems[0].startswith(said), problems
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "stations")
    with pytest.raises(TargetError) as refused:
        adapter.load(s, path)
    assert refused.value.permanent and str(refused.value).startswith(said), str(refused.value)
    # The same text written in the encoding its spec says loads as written.
    right = "latin-1" if written == "utf-8" else written
    batch, spec = _lookup_batch(tmp_path, "right", text.encode(right), encoding=right)
    assert check_batch(batch, spec) == []
    adapter, plan, s = _staged(pg_uri, schema, spec, batch, "stations")
    assert adapter.load(s, batch / "stations" / "stations.1.csv").rows == 2
    adapter.switch(s)
    publish(adapter, plan)
    with psycopg.connect(pg_uri) as conn:
        assert [r[0] for r in conn.execute(f'SELECT name FROM "{schema}"."stations" ORDER BY code')] == [
            row.split(",", 1)[1] for row in text.splitlines()]


# --- dates and times read the same on every server ---------------------------------------------
def test_dates_and_times_read_the_same_whatever_the_servers_settings(pg_uri, schema, tmp_path):
    """A server's DateStyle (initdb takes its day order from the locale) and TimeZone decide how
    COPY reads `01/02/2026` and a timestamptz without an offset, without an error. The steps'
    sessions read year-first and in UTC whatever the server or the connection says, as SQL
    Server's load does: ISO dates load as written, a day-month order is refused naming the line
    and the column, an offset-less timestamptz is UTC."""
    from urllib.parse import quote
    spec = parse_spec({"name": "days", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv"},
                       "tables": {"visits": {"partitioned": False, "columns": [
                           {"name": "code", "type": "varchar(8)"}, {"name": "day", "type": "date"},
                           {"name": "at", "type": "timestamptz"}]}}})
    # A connection that asks for the other day order and another zone (its extra's `options`).
    uri = f"{pg_uri}?options={quote('-c DateStyle=ISO,DMY -c TimeZone=America/New_York')}"
    batch = tmp_path / "days"
    (batch / "visits").mkdir(parents=True)
    path = batch / "visits" / "visits.1.csv"
    path.write_bytes(b"a,2026-02-01,2026-01-01 10:00\nb,2026/03/04,2026-01-01 10:00:00+02\n")
    write_manifest(batch, manifest_for(batch, spec, 1))
    adapter, plan, s = _staged(uri, schema, spec, batch, "visits")
    adapter.load(s, path)
    adapter.switch(s)
    publish(adapter, plan)
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f"""SELECT code, day::text, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI')
                                FROM "{schema}"."visits" ORDER BY code""").fetchall() == [
            ("a", "2026-02-01", "2026-01-01 10:00"), ("b", "2026-03-04", "2026-01-01 08:00")]
    # The day-month order the connection asked for is refused, not read as February or January:
    # by the load's reading of its file, before the COPY, and by the step's session, year first.
    path.write_bytes(b"a,01/02/2026,2026-01-01 10:00\n")
    write_manifest(batch, manifest_for(batch, spec, 1))
    adapter.prepare(s)
    with pytest.raises(TargetError,
                       match=r"visits\.1\.csv: line 1, column day: '01/02/2026': the day or the month first"):
        adapter.load(s, path)
    with adapter.connection() as conn, pytest.raises(psycopg.errors.DatetimeFieldOverflow):
        conn.execute("SELECT '01/02/2026'::date")


# --- what already worked, kept: TPC-H files with one fault each ------------------------------
def _orders_batch(tpch_batch, tmp_path: Path, data: bytes) -> tuple[Path, object]:
    """A one-stream batch of TPC-H orders holding `data` as its file."""
    from switchyard.core.spec import load_spec
    spec = load_spec("tpch")
    batch = tmp_path / "orders-batch"
    path = batch / spec.file_for("orders", 1)
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return batch, spec


def _orders(tpch_batch) -> bytes:
    return (tpch_batch[1] / "orders" / "orders.1.tbl").read_bytes()


def _load_orders(pg_uri, schema, batch, spec, manifest_from: bytes | None = None):
    """Load the batch's orders file; the manifest is counted from `manifest_from` when given
    (the file as the producer wrote it, before it was damaged)."""
    path = batch / spec.file_for("orders", 1)
    if manifest_from is not None:
        damaged = path.read_bytes()
        path.write_bytes(manifest_from)
        write_manifest(batch, manifest_for(batch, spec, 1, tables=["orders"]))
        path.write_bytes(damaged)
    else:
        write_manifest(batch, manifest_for(batch, spec, 1, tables=["orders"]))
    plan = plan_batch(spec, read_manifest(batch, spec), tables=["orders"])
    adapter = PostgresAdapter(spec, uri=pg_uri, schema=schema)
    adapter.setup(plan)
    s = plan.stream("orders", 1)
    adapter.prepare(s)
    result = adapter.load(s, path)
    adapter.switch(s)
    publish(adapter, plan)
    return result


def _on_line(data: bytes, number: int, change) -> bytes:
    lines = data.split(b"\n")
    lines[number - 1] = change(lines[number - 1])
    return b"\n".join(lines)


FAULTS = {
    "utf-8 BOM": (lambda d: b"\xef\xbb\xbf" + d, ["line 1, column o_orderkey", "'\\ufeff1': not an integer (bigint)"]),
    "blank trailing line": (lambda d: d + b"\n", ["line {n1}, column o_orderkey", 'invalid input syntax for type bigint: ""']),
    "NUL byte": (lambda d: _on_line(d, 3, lambda line: line[:-5] + b"\x00" + line[-5:]),
                 ["line 3, column o_comment", 'invalid byte sequence for encoding "UTF8": 0x00']),
    "Latin-1 byte": (lambda d: _on_line(d, 4, lambda line: line[:-3] + "é".encode("latin-1") + line[-3:]),
                     ["line 4, column o_comment", 'invalid byte sequence for encoding "UTF8": 0xe9']),
    "gzip under the .tbl name": (lambda d: gzip.compress(d), ["line 1, column o_orderkey", "gzip-compressed",
                                                              "does not end in .gz"]),
    # TPC-H's `|` ends every line: its dummy column is no column of the user's, never named.
    "no trailing delimiter": (lambda d: _on_line(d, 5, lambda line: line[:-1]),
                              ["line 5: the line does not end with the trailing delimiter '|', as every line must"]),
    "text after the trailing delimiter": (lambda d: _on_line(d, 6, lambda line: line + b"x"),
                                          ["line 6: text after the trailing delimiter '|'"]),
}


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
def test_damaged_tpch_files_fail_at_load_naming_file_line_column(pg_uri, schema, tmp_path, tpch_batch, fault):
    damage, needles = FAULTS[fault]
    good = _orders(tpch_batch)
    batch, spec = _orders_batch(tpch_batch, tmp_path, damage(good))
    with pytest.raises(TargetError) as err:
        _load_orders(pg_uri, schema, batch, spec, manifest_from=good)
    text = str(err.value)
    n1 = good.count(b"\n") + 1
    assert str(batch / spec.file_for("orders", 1)) in text, text
    for needle in needles:
        assert needle.format(n1=n1) in text, f"{needle!r} not in {text}"
    assert err.value.permanent


def test_crlf_tpch_file_loads_identically(pg_uri, schema, tmp_path, tpch_batch):
    good = _orders(tpch_batch)

    def contents():
        with psycopg.connect(pg_uri) as conn:
            return conn.execute(f'SELECT count(*), md5(string_agg(t::text, \'\n\' ORDER BY o_orderkey)) '
                                f'FROM "{schema}".orders t').fetchone()

    batch, spec = _orders_batch(tpch_batch, tmp_path / "lf", good)
    _load_orders(pg_uri, schema, batch, spec)
    lf = contents()
    batch, spec = _orders_batch(tpch_batch, tmp_path / "crlf", good.replace(b"\n", b"\r\n"))
    result = _load_orders(pg_uri, schema, batch, spec)
    assert result.rows == good.count(b"\n") and contents() == lf


def test_a_target_made_with_varchar_and_not_null_is_refused_at_setup_with_the_fix(pg_uri, schema, tmp_path):
    fmt = Fmt()
    spec = make_spec(fmt)
    batch = tmp_path / "batch"
    write_file(batch / spec.file_for("corpus", 1), corpus(), fmt, [n for _, _, n in COLUMNS])
    with psycopg.connect(pg_uri, autocommit=True) as conn:  # as an earlier version made it
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".corpus (id bigint NOT NULL, code char(2) NOT NULL, '
                     f'note varchar(12) NOT NULL, body text NOT NULL, fixed char(5) NOT NULL, qty integer NOT NULL, '
                     f'tail varchar(20) NOT NULL) PARTITION BY RANGE (id)')
    with pytest.raises(TargetError) as err:
        load(pg_uri, schema, batch, spec)
    text = str(err.value)
    assert "corpus: column note is character varying(12) in the table, text in the spec" in text, text
    assert "corpus: column qty is NOT NULL in the table, nullable in the spec" in text, text
    # Each difference names the statement that brings the table in line: run them all.
    fixes = re.findall(r"to bring the table in line, run: (.*?;)(?: \(|$)", text, re.M)
    assert len(fixes) == 7, text
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for fix in fixes:
            conn.execute(fix)
    load(pg_uri, schema, batch, spec)
    assert loaded_hashes(pg_uri, schema) == file_hashes(read_independently(batch / spec.file_for("corpus", 1), fmt))


def test_count_file_reads_date_keys(tmp_path):
    path = tmp_path / "d.csv"
    path.write_bytes(b'day,note\r\n2026-01-02,"a\r\nb"\r\n2026-01-05,c\r\n')
    fmt = make_spec(Fmt(quoting="csv", delimiter=",", trailing=False, header_lines=1)).table("corpus").format
    from datetime import date
    assert count_file(path, fmt, 0, "date")[1:] == (2, date(2026, 1, 2), date(2026, 1, 5))
