"""A producer's tools, without a server: `switchyard manifest` describes a batch folder from its
files, `switchyard check` finds every problem of a batch without loading it; both against an
independent reading of the files (Python's csv module, the test's own counts)."""
from __future__ import annotations

import csv
import gzip
import json
import re
from dataclasses import replace
from datetime import datetime

import pytest

from switchyard.cli import main
from switchyard.core.batch import BatchError, check_batch, check_files, describe_batch, read_manifest, write_manifest
from switchyard.core.spec import parse_spec

SPEC = parse_spec({
    "name": "sales",
    "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1, "null_marker": ""},
    "files": "{table}/part-{stream}.csv",
    "tables": {
        "sales": {"key": "sold_at", "columns": [
            {"name": "sold_at", "type": {"postgres": "timestamp", "mssql": "datetime2(6)"}},
            {"name": "note", "type": "varchar(40)", "nullable": True}]},
        "shops": {"partitioned": False, "key": "code", "files": "{table}/shops.{stream}.csv.gz",
                  "columns": [{"name": "code", "type": "varchar(4)"}, {"name": "city", "type": "varchar(20)"}]},
    },
}, source="sales.yaml")

# Not in key order within a file, a quoted line break, a header: the smallest and largest keys
# are read from every record, not from the first and last line.
SALES = {
    1: [("2026-01-03 10:00:00", "b"), ("2026-01-01 09:00:00", "first\nof the year"), ("2026-01-02 08:00:00", "")],
    2: [("2026-01-05 00:00:00", "x"), ("2026-01-04 23:59:59.5", "y")],
}
SHOPS = [("AB", "Oslo"), ("CD", "Bergen, west"), ("NA", "no such city")]


def write_batch(folder, sales=SALES):
    (folder / "sales").mkdir(parents=True)
    (folder / "shops").mkdir()
    for k, records in sales.items():
        with open(folder / "sales" / f"part-{k}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["sold_at", "note"])
            w.writerows(records)
    with gzip.open(folder / "shops" / "shops.1.csv.gz", "wt", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["code", "city"])
        w.writerows(SHOPS)


def independent(folder, table, k, name):
    """bytes, rows and the smallest and largest key of a file, as this test reads it."""
    path = folder / table / name
    opener = gzip.open if name.endswith(".gz") else open
    with opener(path, "rt", newline="") as fh:
        records = list(csv.reader(fh))[1:]
    keys = sorted(datetime.fromisoformat(r[0]) for r in records) if table == "sales" else None
    return path.stat().st_size, len(records), keys and keys[0], keys and keys[-1]


def test_the_manifest_is_every_file_read_whole(tmp_path):
    write_batch(tmp_path)
    manifest = describe_batch(tmp_path, SPEC)
    got = {(e.table, e.stream): (e.bytes, e.rows, e.key_min, e.key_max) for e in manifest.entries}
    assert got == {("sales", 1): independent(tmp_path, "sales", 1, "part-1.csv"),
                   ("sales", 2): independent(tmp_path, "sales", 2, "part-2.csv"),
                   ("shops", 1): independent(tmp_path, "shops", 1, "shops.1.csv.gz")[:2] + (None, None)}
    assert got[("sales", 1)][1:] == (3, datetime(2026, 1, 1, 9), datetime(2026, 1, 3, 10))
    assert manifest.streams == 2
    # Through the command, written as the DAG reads it, and then checked clean.
    assert main(["manifest", str(tmp_path), "--spec", str(write_spec(tmp_path))]) == 0
    written = json.loads((tmp_path / "manifest.json").read_text())
    assert [(f["file"], f["rows"], f["key_min"], f["key_max"]) for f in written["files"]] == [
        ("sales/part-1.csv", 3, "2026-01-01T09:00:00", "2026-01-03T10:00:00"),
        ("sales/part-2.csv", 2, "2026-01-04T23:59:59.500000", "2026-01-05T00:00:00"),
        ("shops/shops.1.csv.gz", 3, None, None)]
    assert check_batch(tmp_path, SPEC) == []
    # Once written, it is replaced only with --force; a dry run writes nothing and needs none.
    before = (tmp_path / "manifest.json").read_text()
    with pytest.raises(SystemExit, match="exists; --force replaces it"):
        main(["manifest", str(tmp_path), "--spec", str(write_spec(tmp_path))])
    assert main(["manifest", str(tmp_path), "--spec", str(write_spec(tmp_path)), "--dry-run"]) == 0
    assert (tmp_path / "manifest.json").read_text() == before


def write_spec(folder, **sales):
    """The batch's spec as a user's file; `sales`: entries of the sales table."""
    import yaml
    # A file of its own per content: specs are read once per path and process.
    path = folder.parent / f"{folder.name}-sales{''.join(f'-{k}-{v}' for k, v in sorted(sales.items()))}.yaml"
    path.write_text(yaml.safe_dump({
        "name": "sales", "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv",
                                    "header_lines": 1, "null_marker": ""},
        "files": "{table}/part-{stream}.csv",
        "tables": {"sales": {"key": "sold_at", "columns": [
            {"name": "sold_at", "type": {"postgres": "timestamp", "mssql": "datetime2(6)"}},
            {"name": "note", "type": "varchar(40)", "nullable": True}], **sales},
            "shops": {"partitioned": False, "key": "code", "files": "{table}/shops.{stream}.csv.gz",
                      "columns": [{"name": "code", "type": "varchar(4)"}, {"name": "city", "type": "varchar(20)"}]}}}))
    return path


def test_overlapping_ranges_a_gap_and_a_bad_key_are_refused_naming_each_file(tmp_path):
    overlapping = {1: SALES[1], 2: [("2026-01-02 12:00:00", "inside stream 1's range")]}
    write_batch(tmp_path, overlapping)
    with pytest.raises(BatchError, match=r"part-2\.csv: keys 2026-01-02T12:00:00\.\.2026-01-02T12:00:00 overlap"):
        describe_batch(tmp_path, SPEC)
    (tmp_path / "sales" / "part-2.csv").rename(tmp_path / "sales" / "part-3.csv")
    with pytest.raises(BatchError, match=r"sales has files for streams 1, 3; .*missing 2: sales/part-2\.csv") as gap:
        describe_batch(tmp_path, SPEC)
    assert str(gap.value).count(str(tmp_path)) == 1, str(gap.value)  # the folder named once
    (tmp_path / "sales" / "part-3.csv").write_text("sold_at,note\n2026-01-09 00:00:00,a\nyesterday,b\n")
    (tmp_path / "sales" / "part-3.csv").rename(tmp_path / "sales" / "part-2.csv")
    with pytest.raises(BatchError, match=r"part-2\.csv: line 3, column sold_at: 'yesterday' is not a timestamp key"):
        describe_batch(tmp_path, SPEC)


def test_a_key_outside_its_streams_range_is_named_by_its_line(tmp_path):
    """A record whose key is outside the range the manifest gives its stream (a producer that cut
    the streams wrong, an id of another stream's) is named by its line and column, the others
    counted, before any load."""
    write_batch(tmp_path)
    manifest = json.loads(json.dumps(describe_batch(tmp_path, SPEC).to_json()))
    manifest["files"][0]["key_max"] = "2026-01-01T09:00:00"
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    part1 = tmp_path / "sales" / "part-1.csv"
    assert check_batch(tmp_path, SPEC) == [
        f"{part1}: line 2, column sold_at: key 2026-01-03T10:00:00, outside the manifest's "
        f"2026-01-01T09:00:00..2026-01-01T09:00:00 (sales stream 1); 1 more record outside it, the file's keys "
        f"2026-01-01T09:00:00..2026-01-03T10:00:00"]


def test_check_finds_every_problem_at_once_without_loading(tmp_path, capsys):
    write_batch(tmp_path)
    write_manifest(tmp_path, describe_batch(tmp_path, SPEC))
    (tmp_path / "sales" / "part-2.csv").unlink()
    with open(tmp_path / "sales" / "part-1.csv", "a", newline="") as fh:
        fh.write("2026-01-03 11:00:00,one row more\r\n")    # csv.writer's line end, as the file's
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["files"][2]["rows"] = 4     # shops: the producer miscounted
    manifest["files"][2]["bytes"] = (tmp_path / "shops" / "shops.1.csv.gz").stat().st_size
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    problems = check_batch(tmp_path, SPEC)
    part1, size1 = tmp_path / "sales" / "part-1.csv", manifest["files"][0]["bytes"]
    assert problems == [
        f"{tmp_path / 'sales' / 'part-1.csv'}: {part1.stat().st_size:,} bytes, the manifest says {size1:,} (sales "
        f"stream 1): the file changed after the manifest was written, or is incomplete",
        f"{tmp_path / 'sales' / 'part-2.csv'}: listed in the manifest (sales stream 2, 2 rows) but not found",
        f"{part1}: 4 records, the manifest says 3 (sales stream 1)",
        f"{part1}: line 6, column sold_at: key 2026-01-03T11:00:00, outside the manifest's "
        f"2026-01-01T09:00:00..2026-01-03T10:00:00 (sales stream 1)",
        f"{tmp_path / 'shops' / 'shops.1.csv.gz'}: 3 records, the manifest says 4 (shops stream 1)"]
    # The command prints them all and exits 1.
    assert main(["check", "--batch", str(tmp_path), "--spec", str(write_spec(tmp_path))]) == 1
    assert "the files were not read" not in capsys.readouterr().err
    # Without a manifest (the producer's, or `switchyard manifest` refused the batch): says how to get one.
    (tmp_path / "manifest.json").unlink()
    assert main(["check", "--batch", str(tmp_path), "--spec", str(write_spec(tmp_path))]) == 1
    assert (f"the files were not read: a run reads the batch once its producer wrote manifest.json, last. To write "
            f"one from the files as they are (every record read, the batch refused with each problem found): "
            f"switchyard manifest --spec {write_spec(tmp_path)} {tmp_path}") in capsys.readouterr().err
    # A file of a table in the folder that the manifest does not list would be left out of a run.
    tmp_path = tmp_path / "unlisted"
    write_batch(tmp_path)
    write_manifest(tmp_path, describe_batch(tmp_path, SPEC))
    (tmp_path / "sales" / "part-3.csv").write_text("sold_at,note\n2026-01-09 00:00:00,late\n")
    assert check_batch(tmp_path, SPEC) == [
        f"{tmp_path / 'sales' / 'part-3.csv'}: a file of table sales (stream 3) the manifest does not list: a run "
        f"would not load it; list it (`switchyard manifest` writes the manifest from the folder's files) or move "
        f"it out of the batch folder"]
    assert check_batch(tmp_path, SPEC, ["shops"]) == []
    # OK says what it read: the tables asked for, and which it did not read.
    capsys.readouterr()
    assert main(["check", "--batch", str(tmp_path), "--spec", str(write_spec(tmp_path)), "--tables", "shops"]) == 0
    said = capsys.readouterr().out
    assert "OK: 1 file of 1 table (shops), 3 rows, each file read and matching its manifest entry; not read " \
           "(not asked for): sales" in said, said
    assert "note:" not in said
    # Every stream of a partitioned table empty: OK for the batch, but a run refuses it where the
    # target has the table already, which the check cannot see: it says so.
    tmp_path = tmp_path.parent / "empty"
    write_batch(tmp_path, {1: [], 2: []})
    write_manifest(tmp_path, describe_batch(tmp_path, SPEC))
    assert main(["check", "--batch", str(tmp_path), "--spec", str(write_spec(tmp_path))]) == 0
    assert ("note: every stream of sales is empty in this batch: a run refuses that where the target already has "
            "sales (replace mode: it would empty the table)") in capsys.readouterr().out
    # In append mode the note names allow_empty; with it, the run adds nothing to the table.
    assert main(["check", "--batch", str(tmp_path), "--spec", str(write_spec(tmp_path, mode="append"))]) == 0
    assert ("sales (append mode: it would add nothing); if that is meant, declare allow_empty: true on it, or leave "
            "sales out of the run") in capsys.readouterr().out
    allowed = write_spec(tmp_path, mode="append", allow_empty=True)
    assert main(["check", "--batch", str(tmp_path), "--spec", str(allowed)]) == 0
    assert ("note: every stream of sales is empty in this batch: a run adds nothing to it (allow_empty: true)"
            in capsys.readouterr().out)


FIELDS_SPEC = parse_spec({
    "name": "tracks",
    "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
    "files": "{table}/{table}.{stream}.csv",
    "tables": {"tracks": {"key": "ts", "columns": [
        {"name": "ts", "type": {"postgres": "timestamp", "mssql": "datetime2(0)"}},
        {"name": "name", "type": "varchar(6)"},
        {"name": "wind", "type": "integer", "nullable": True},
        {"name": "price", "type": {"postgres": "numeric(5,2)", "mssql": "decimal(5,2)"}},
        {"name": "code", "type": "char(2)"},
        {"name": "seen", "type": "date"}]}},
}, source="tracks.yaml")


def test_check_names_each_bad_field_with_its_line_and_column_before_any_load(tmp_path):
    (tmp_path / "tracks").mkdir()
    lines = ["ts,name,wind,price,code,seen",
             "2026-01-01 00:00:00,Alma,10,1.5,AB,2026-01-01",        # good
             "2026-01-01 06:00:00,Bonnie,,2,CD  ,2026-01-02",         # no NULL marker: '' is no integer
             "2026-01-01 12:00:00,Alma,3000000000,123.456,EF,2026-02-30",
             "2026-01-01 18:00:00,Cristobal,7,1000,GHI,2026-01-03",
             "2026-01-02 00:00:00,Alma,7",
             "2026-01-02 06:00:00,Alma,NA,abc,IJ,01/02/2026"]
    (tmp_path / "tracks" / "tracks.1.csv").write_text("\n".join(lines) + "\n")
    write_manifest(tmp_path, describe_batch(tmp_path, FIELDS_SPEC))
    path = tmp_path / "tracks" / "tracks.1.csv"
    problems = check_batch(tmp_path, FIELDS_SPEC)
    assert problems == [
        f"{path}: line 3, column wind: '': not an integer (integer)",
        f"{path}: line 4, column wind: '3000000000': outside the range of integer (-2147483648..2147483647)",
        # A third decimal the column's scale does not keep: the servers would round it silently.
        f"{path}: line 4, column price: '123.456': 3 digits after the point, numeric(5,2) keeps 2: the load would "
        f"round it to another value without an error",
        f"{path}: line 4, column seen: '2026-02-30': not a date (day is out of range for month)",
        f"{path}: line 5, column name: 'Cristobal': 9 characters, varchar(6) holds 6",
        f"{path}: 6 more problems (11 in all, in 5 records; the load would stop at the first)"], problems
    from switchyard.core.fields import RecordCheck
    check = RecordCheck(FIELDS_SPEC.table("tracks"))
    assert check.problems(lines[5].split(",")) == ["3 fields, the table has 6 columns"]
    # A blank line says so, as the key's reading (`switchyard manifest`) says it.
    assert check.problems("".split(",")) == ["1 fields, the table has 6 columns (a blank line)"]
    # 'NA' is no NULL marker here; a date month or day first is refused before the load, which
    # reads dates year first and would refuse it there, or read another day.
    assert check.problems(lines[6].split(",")) == [
        "column wind: 'NA': not an integer (integer)", "column price: 'abc': not a decimal number (numeric(5,2))",
        "column seen: '01/02/2026': the day or the month first: the loads read dates year first, so the server "
        "would refuse it or read another day; write the date as YYYY-MM-DD"]
    assert check.problems(["2026-01-01 00:00:00", "Alma", "1", "1", "CD  ", "2026-01-01"]) == []  # char(2) pads
    # Trailing zeros after the point are the same number: 1.500 fits numeric(5,2) exactly.
    assert check.problems(["2026-01-01 00:00:00", "Alma", "1", "1.500", "CD", "2026-01-01"]) == []
    # A NULL marker makes the empty field NULL in the nullable column; the rest stay bad.
    marked = parse_spec({**{"name": "tracks", "files": "{table}/{table}.{stream}.csv",
                            "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv",
                                       "header_lines": 1, "null_marker": ""}},
                         "tables": {"tracks": {"key": "ts", "columns": [
                             {"name": c.name, "type": dict(c.types), "nullable": c.nullable}
                             for c in FIELDS_SPEC.table("tracks").columns]}}}, source="tracks.yaml")
    assert f"{path}: line 3, column wind: '': not an integer (integer)" not in check_batch(tmp_path, marked)


def test_check_names_a_bad_key_with_the_files_other_problems(tmp_path):
    """A key that does not read as its kind is one more problem of the file: the file's other
    problems are still found and named, in one check, not one per run."""
    (tmp_path / "tracks").mkdir()
    lines = ["ts,name,wind,price,code,seen",
             "2026-01-01 00:00:00,Alma,10,1.5,AB,2026-01-01",
             "2026-01-01 06:00:00,Alma,11,1.5,AB,2026-01-01",
             "2026-01-01 12:00:00,Alma,12,1.5,AB,2026-01-01",
             "2026-01-01 18:00:00,Alma,13,1.5,AB,2026-01-01"]
    path = tmp_path / "tracks" / "tracks.1.csv"
    path.write_text("\n".join(lines) + "\n")
    write_manifest(tmp_path, describe_batch(tmp_path, FIELDS_SPEC))
    # The same bytes but two fields: a wind too big for its column, an hour no day has in the key.
    lines[2] = lines[2].replace(",11,", ",1x,")
    lines[3] = lines[3].replace("12:00:00", "25:00:00")
    path.write_text("\n".join(lines) + "\n")
    problems = check_batch(tmp_path, FIELDS_SPEC)
    assert problems[0] == f"{path}: line 3, column wind: '1x': not an integer (integer)", problems
    assert problems[1].startswith(f"{path}: line 4, column ts: '2026-01-01 25:00:00'"), problems
    assert len(problems) == 2, problems


def test_check_refuses_a_time_finer_than_its_column_keeps_and_a_dates_time_of_day():
    from switchyard.core.fields import field_check
    ok = [("timestamp", "2026-01-01 10:00:00.123456"), ("timestamp(3)", "2026-01-01T10:00:00.1230"),
          ("date", "2026-01-01 00:00:00"), ("smalldatetime", "2026-01-01 10:59"),
          ("datetime", "2026-01-01 10:00:00.127"), ("datetime", "2026-01-01 10:00:00.5"),
          ("datetime2", "2026-01-01 10:00:00.1234567"), ("time(7)", "10:00:00.1234567"), ("time", "10:00"),
          ("timestamp", "1 Jan 2026 10:00"),       # another form than ISO 8601: the server decides
          ("timestamp", "2026-01-01 10:00:00 BC"), ("date", "infinity"),   # an era and a value, not a zone or a word
          # halves of the day and midnight's word: other forms than ISO 8601, not zones (the server decides)
          ("timestamp", "2026-03-01 10:00:00 pm"), ("time", "10:00 AM"), ("time", "103000.5"),
          # Other forms with the year in full: the server reads them year first, or refuses them.
          ("date", "Dec 5 2026"), ("date", "20261205"), ("date", "2026/12/05"), ("date", "infinity"),
          ("date", "5 December 2026"), ("timestamp", "Dec 5 2026 10:00"), ("timestamp", "20270501T120000"),
          ("timestamp", "2027-05-01 1:45pm"), ("timestamptz", "Dec 5 2026 10:00 Europe/Paris"),
          ("timestamptz", "2026-03-01 10:00:00 UTC"), ("date", "5-Dec-2026"), ("date", "2026-Dec-05"),
          ("timestamp", "December 5, 2026 12:30 AM"), ("timestamp", "2026-1-5 9:05"),
          ("timestamptz", "Tue, 01 Dec 2026 10:00:00 GMT")]
    for sql_type, text in ok:
        assert field_check(sql_type)(text) is None, (sql_type, text)
    refused = [
        ("timestamp", "2026-01-01 10:00:00.1234567", "7 digits after the second's point, timestamp (no precision "
         "given) keeps 6: the load would round it to another time without an error"),
        ("timestamp(3)", "2026-01-01 10:00:00.1234", "4 digits after the second's point, timestamp(3) keeps 3"),
        ("time(2)", "10:00:00.125", "3 digits after the second's point, time(2) keeps 2"),
        ("date", "2026-01-01 10:00", "a time of day (10:00): date keeps the day only, the load would drop it"),
        ("smalldatetime", "2026-01-01 10:00:30", "10:00:30: smalldatetime keeps whole minutes"),
        ("datetime", "2026-01-01 10:00:00.001", "datetime keeps 1/300 of a second"),
        ("datetime", "2026-01-01 10:00:00.1234", "4 digits after the second's point, datetime keeps 3"),
        ("timestamp", "2026-01-01 23:59:60", "not a time of day (23:59:60"),
        ("time", "24:00:00", "not a time of day (24:00:00"),
        ("timestamp", "2026-01-01T10:00:00Z", "a time zone (Z): timestamp keeps none, the load would drop it "
         "without an error and keep 2026-01-01T10:00:00"),
        ("datetime2(3)", "2026-01-01 10:00:00.123 +05:30", "a time zone (+05:30): datetime2(3) keeps none"),
        ("time", "10:00 CET", "a time zone (CET): time keeps none"),
        ("date", "2026-01-01-05", "a time zone (-05): date keeps none"),
        ("timestamp", " Now ", "a word PostgreSQL reads as the load's own date or time"),
        ("date", "epoch", "a word PostgreSQL reads as 1970-01-01 00:00:00"),
        ("timestamp", "J2461011 10:00", "a Julian day"),
        ("date", "26-12-05", "no year of four digits: the server would guess the century"),
        ("date", "5-Dec-26", "no year of four digits"), ("timestamp", "261205 10:00", "no year of four digits"),
        ("date", "", "an empty field, not a value of date"), ("time", " ", "an empty field, not a value of time"),
        ("integer", "١٢", "not an integer"), ("numeric(10,2)", "١٢", "not a decimal number"),
        ("real", "١٢", "not a number"), ("date", "٢٠٢٦-٠١-٠١", "digits of another script"),
        ("date", "5/6/2027", "the day or the month first"), ("date", "6.5.2027", "the day or the month first"),
        ("date", "20270501T120000", "a time of day after the date: date keeps the day only"),
        ("date", "2027-05-01 1:45pm", "a time of day after the date"), ("date", "Dec 5 2026 10:00", "a time of day"),
        ("timestamp", "Dec 5 2026 10:00 CET", "a time zone after the time: timestamp keeps none"),
        ("timestamp(0)", "2026/12/05 10:00:00.5", "1 digits after the second's point, timestamp(0) keeps 0")]
    for sql_type, text, why in refused:
        assert why in (field_check(sql_type)(text) or ""), (sql_type, text, field_check(sql_type)(text))
    # A type for every target keeps microseconds at most: the target that keeps fewest decides.
    assert "datetime2 as the type for every target keeps 6" in field_check("datetime2", neutral=True)(
        "2026-01-01 10:00:00.1234567")
    assert field_check("datetime2(7)", neutral=False)("2026-01-01 10:00:00.1234567") is None


def _field_shapes() -> list[str]:
    """Fields of every shape the checks tell apart: numbers of each length, sign and scale, dates
    and times with each part at and past its limits, other scripts' digits, junk."""
    from itertools import product
    numbers = [sign + digits + fraction for sign, digits, fraction in product(
        ["", "-", "+"], ["0", "7", "0007", "255", "256", "32767", "32768", "999999999", "2147483648",
                         "9223372036854775807", "9223372036854775808", "1234567890123"],
        ["", ".", ".5", ".50", ".125", ".1250", ".12345"])]
    # Leap years and not (2024, 2000, 1756; 2026, 2100, 1900, 1752: datetime's range starts in 1753).
    days = [f"{y}-{m}-{d}" for y, m, d in product(["0000", "2026", "2024", "2000", "2100", "1900", "1756", "1752"],
                                                    ["00", "02", "04", "12", "13"],
                                                    ["00", "01", "28", "29", "30", "31", "32"])]
    clocks = [c + f for c, f in product(["10:00", "23:59:59", "24:00:00", "10:60", "10:00:60", "10:00:00"],
                                        ["", ".0", ".5", ".003", ".001", ".123", ".1234", ".123456",
                                         ".1234567", ".12345678", ".000"]) if not (f and c.count(":") == 1)]
    stamps = [d + sep + c for d, sep, c in product(days[::3] + ["2026-01-28", "2026-02-28"], ["T", " "], clocks)]
    return numbers + days + clocks + stamps + ["", " ", "1e5", "abc", "١٢", "2026-01-01T10:00:00Z", "12:00 pm"]


def test_a_float_past_its_types_range_or_too_small_and_a_word_sql_server_lacks_are_refused():
    """PostgreSQL refuses a float past its type's range (`1e400`; `1e39` in a real) or so small it
    would be 0 (`1e-400`), which Python reads as infinity or 0.0: refused before any load.
    `NaN` and `inf` are PostgreSQL's; a float for every target refuses them (SQL Server's float
    holds neither), its own float takes them."""
    from switchyard.core.fields import field_check
    double, real, neutral = field_check("double precision"), field_check("real"), field_check("float", neutral=True)
    assert "1e400 is out of the range of double precision" in double("1e400")
    assert "1e-400 is too small for double precision (it would be 0)" in double("1e-400")
    assert double("1e39") is None and double("1e-300") is None and double("0e-500") is None
    assert "1e39 is out of the range of real" in real("1e39") and "too small for real" in real("1e-50")
    assert real("1e-45") is None            # a subnormal the server keeps
    assert double("NaN") is None and double("-Infinity") is None
    assert "SQL Server's float holds no NaN or infinity" in neutral("NaN") and neutral("inf") is not None
    assert neutral("1.5e3") is None


def test_a_time_types_precision_written_before_its_zone_is_read():
    """PostgreSQL also writes `timestamp(3) with time zone` and `time(0) without time zone`: the
    check reads the precision there as in `timestamptz(3)`, where it left such a type to the load."""
    from switchyard.core.fields import field_check, kept_pattern
    zoned, plain = field_check("timestamp(3) with time zone"), field_check("TIME (0)  WITHOUT TIME ZONE")
    assert zoned("2026-03-01 10:00:00.123+02") is None
    assert "4 digits after the second's point" in zoned("2026-03-01 10:00:00.1234+02")
    assert "UTC+5" in zoned("2026-03-01 10:00 UTC+5")
    assert plain("10:00:00") is None and "keeps 0" in plain("10:00:00.5")
    assert kept_pattern("timestamp(3) with time zone") == kept_pattern("timestamptz(3)")


def test_a_type_sql_server_reads_refuses_infinity_an_era_and_days_outside_its_range():
    """PostgreSQL stores `infinity` and a date BC; SQL Server's load refuses them, after other
    loads ran. A type for every target, or SQL Server's own, refuses them before any load; a
    PostgreSQL type of its own keeps them."""
    from switchyard.core.fields import field_check
    refused = [("date", True, "infinity", "(infinity): date as the type for every target takes only values both"),
               ("timestamp(3)", True, "-infinity", "{postgres: timestamp(3)}"),
               ("timestamp", True, "2026-03-01 10:00:00 BC", "(the era BC)"),
               ("datetime2", False, "infinity", "SQL Server's datetime2 does not hold (infinity): its load would refuse it"),
               ("datetime", False, "1752-12-31", "a day outside datetime's range (1753-01-01 to 9999-12-31)"),
               ("datetime", False, "1700-06-01 10:00:00.003", "outside datetime's range"),
               ("smalldatetime", False, "2079-06-07 00:00", "outside smalldatetime's range (1900-01-01 to 2079-06-06)"),
               ("smalldatetime", False, "1899-12-31 23:59", "outside smalldatetime's range")]
    for sql_type, neutral, text, why in refused:
        for fast in (True, False):
            assert why in (field_check(sql_type, neutral, fast)(text) or ""), (sql_type, text, fast)
    kept = [("date", False, "infinity"), ("timestamp", False, "2026-03-01 10:00:00 BC"), ("date", True, "9999-12-31"),
            ("datetime", False, "1753-01-01 00:00:00"), ("smalldatetime", False, "2079-06-06 23:59"),
            ("timestamp(1)", False, "20270501T120000.5")]
    for sql_type, neutral, text in kept:
        assert field_check(sql_type, neutral)(text) is None, (sql_type, text)


@pytest.mark.parametrize("neutral", [False, True])
def test_the_quick_pattern_passes_only_fields_the_full_check_passes(neutral):
    """Each type's check passes the common shapes of field on one pattern match: on every shape
    of field, it says exactly what the full check says."""
    from switchyard.core.fields import field_check
    fields = _field_shapes()
    for sql_type in ["integer", "smallint", "bigint", "tinyint", "numeric(12,2)", "numeric(5)", "numeric(3,3)",
                     "decimal(10,4)", "timestamp", "timestamp(0)", "timestamp(3)", "datetime2", "datetime2(7)",
                     "datetime", "smalldatetime", "date", "time", "time(2)", "varchar(4)", "real", "timestamptz(3)",
                     "datetimeoffset", "money", "smallmoney", "char(3)"]:
        quick, full = field_check(sql_type, neutral), field_check(sql_type, neutral, fast=False)
        differ = [(text, quick(text), full(text)) for text in fields if quick(text) != full(text)]
        assert not differ, (sql_type, differ[:5])


@pytest.mark.parametrize("fmt", [
    {"delimiter": "|", "trailing_delimiter": True, "quoting": "none", "null_marker": "NA"},
    {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "null_marker": ""},
    {"delimiter": "\t", "trailing_delimiter": False, "quoting": "none"}])
def test_a_record_passed_on_one_match_is_one_the_field_checks_pass(fmt):
    """A record whose fields all take common shapes passes on one pattern match of the whole
    record (RecordCheck.whole); any record, it says what the checks field by field say."""
    import random
    from switchyard.core.fields import Quoted, RecordCheck
    types = ["integer", "bigint", "numeric(12,2)", {"postgres": "numeric(15,2)", "mssql": "money"}, "date",
             {"postgres": "timestamp", "mssql": "datetime2(3)"}, "time(2)", "char(3)", "varchar(4)", "text",
             "datetime", "boolean"]
    spec = parse_spec({"name": "shapes", "format": {"header_lines": 0, **fmt}, "files": "{table}/{stream}.txt",
                       "tables": {"shapes": {"partitioned": False, "columns": [
                           {"name": f"c{i}", "type": t, "nullable": i % 2 == 0} for i, t in enumerate(types)]}}})
    # A boolean has no pattern of its own here: its column sends every record to the field checks.
    assert RecordCheck(spec.table("shapes")).whole is None
    table = replace(spec.table("shapes"), columns=spec.table("shapes").columns[:-1])
    check, by_field = RecordCheck(table), RecordCheck(table)
    assert check.whole is not None
    by_field.whole = None
    delimiter = fmt["delimiter"]
    shapes = _field_shapes()
    odd = ["abcd", "abcde", "a b", "x\ry", "\x00", "\udcff", "a" + delimiter + "b", "\\N", "NA", "", "2024-02-29",
           "2100-02-29", "1999-04-31", "1.2345", "12.50"]
    good = ["42", "-7", "3.14", "12.5", "2026-01-31", "2024-02-29 23:59:59.123", "10:00:00.5", "abc", "ab", "any text",
            "1753-01-01 00:00:00"]
    rng = random.Random(7)
    records = []
    for _ in range(4000):
        fields = list(good)
        for _ in range(rng.choice([0, 0, 1, 2])):       # most records well formed, some with a bad field
            fields[rng.randrange(len(fields))] = rng.choice(shapes if rng.random() < 0.5 else odd)
        if rng.random() < 0.1:
            fields[rng.randrange(len(fields))] = fmt.get("null_marker") or ""
        if fmt["quoting"] == "csv" and rng.random() < 0.1:
            at = rng.randrange(len(fields))
            fields[at] = Quoted(fields[at])
        if rng.random() < 0.03:
            fields = fields[:-1] if rng.random() < 0.5 else fields + ["1"]
        records.append(fields + ([""] if fmt["trailing_delimiter"] else []))
    passed_whole = 0
    for fields in records:
        assert check.problems(fields) == by_field.problems(fields), fields
        passed_whole += bool(check.whole.fullmatch(delimiter.join(fields)))
    assert 1000 < passed_whole < len(records), passed_whole   # both paths taken


def test_check_finds_no_bad_field_in_the_generated_batches(tmp_path):
    from switchyard.core.datagen import generate_tpch
    from switchyard.core.shop import generate_shop
    from switchyard.core.spec import load_spec
    # Scale 0.01 at least: below it TPC-H's 4 suppliers of a part (ps_suppkey, from the supplier
    # count) repeat for some parts, and partsupp's unique key would refuse the batch.
    generate_tpch(tmp_path / "tpch", load_spec("tpch"), 0.01, 2)
    assert check_batch(tmp_path / "tpch", load_spec("tpch")) == []
    generate_shop(tmp_path / "shop", load_spec("shop"), 0.002, 2)
    assert check_batch(tmp_path / "shop", load_spec("shop")) == []


# --- the line skipped as a header: a header, or a record the skip would drop -------------------------
_PIVOT = {"sales": {"partitioned": False, "columns": [
    {"name": "region", "type": "varchar(20)"}, {"name": "y2024", "type": "integer"},
    {"name": "y2025", "type": "integer"}]}}
_CURRENCIES = {"currencies": {"partitioned": False, "key": "code", "columns": [
    {"name": "code", "type": "char(3)"}, {"name": "name", "type": "varchar(60)"},
    {"name": "minor_units", "type": "smallint"}]}}
_COUNTRIES = {"countries": {"partitioned": False, "key": "code", "columns": [
    {"name": "code", "type": "varchar(2)"}, {"name": "name", "type": "varchar(60)"},
    {"name": "eu_member", "type": "boolean"}]}}
_RATES = {"rates": {"partitioned": False, "key": "id", "columns": [
    {"name": "id", "type": "integer"}, {"name": "name", "type": "varchar(20)"},
    {"name": "rate", "type": "numeric(6,2)"}]}}


@pytest.mark.parametrize("tables, data, refused_on", [
    (_PIVOT, b"region,2024,2025\nnorth,5,6\n", None),         # a report's years as column names: a header
    (_PIVOT, b"north,5,6\n", "y2024"),                       # whole numbers, no column named: a record
    (_PIVOT, b"Region,2024,2025\nnorth,5,6\n", None),         # one column named as the spec does: a header
    # A lookup keyed by a text code without digits, a small number beside it (the code's minor
    # units), or a flag: the line names no column, so it is the first record, not a header.
    (_CURRENCIES, b"EUR,Euro,2\nUSD,US Dollar,2\n", "minor_units"),
    (_CURRENCIES, b"code,name,minor_units\nEUR,Euro,2\n", None),
    (_COUNTRIES, b"DE,Germany,true\nFR,France,true\n", "eu_member"),
    (_COUNTRIES, b"code,name,eu_member\nDE,Germany,true\n", None),
    (_COUNTRIES, b"Land,Name,EU\nDE,Germany,true\n", None),
    (_RATES, b"id,name,rate\n1,abc,3.50\n", None),
    (_RATES, b"1,abc,3.50\n2,def,4.00\n", "id"),              # the key holds a value
    ({"rates": {**_RATES["rates"], "key": None}}, b"1,abc,3.50\n", "rate"),   # no key: a number with a point
])
def test_a_line_skipped_as_a_header_is_refused_only_where_it_is_a_record(tmp_path, tables, data, refused_on):
    from switchyard.core.batch import start_problems
    spec = parse_spec({"name": "h", "files": "{table}/{table}.{stream}.csv", "tables": tables,
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1}})
    path = tmp_path / "f.csv"
    path.write_bytes(data)
    found = start_problems(path, spec.table(next(iter(tables))))
    if refused_on is None:
        assert found == []
    else:
        assert len(found) == 1 and f"but it is a record of {next(iter(tables))} (column {refused_on}:" in found[0]


def test_a_gzip_file_cut_short_is_named_not_a_traceback(tmp_path):
    """A producer's gzip file cut short (a copy that stopped) breaks off as it is read: the check
    and the manifest name the file and say so, as the load does, instead of raising EOFError."""
    spec = parse_spec({"name": "g", "files": "{table}/{table}.{stream}.tbl.gz", "tables": {"t": {
        "key": "id", "columns": [{"name": "id", "type": "bigint"}, {"name": "v", "type": "varchar(20)"}]}}})
    (tmp_path / "t").mkdir()
    path = tmp_path / "t" / "t.1.tbl.gz"
    path.write_bytes(gzip.compress(b"".join(b"%d|value %d|\n" % (i, i) for i in range(1, 5000))))
    manifest = describe_batch(tmp_path, spec)
    path.write_bytes(path.read_bytes()[:path.stat().st_size * 2 // 3])
    write_manifest(tmp_path, replace(manifest, entries=tuple(replace(e, bytes=path.stat().st_size)
                                                            for e in manifest.entries)))
    said = f"{path}: not a readable gzip file: Compressed file ended before the end-of-stream marker was reached"
    assert check_batch(tmp_path, spec) == [said]
    with pytest.raises(BatchError, match=said.replace(".", r"\.")):
        describe_batch(tmp_path, spec)


def test_a_stream_file_compressed_unlike_its_pattern_is_refused_not_left_out(tmp_path):
    """A producer that forgot to compress one file (`t.2.tbl` where the pattern says
    `t.{stream}.tbl.gz`): the pattern does not find it, so the manifest left it out and a run
    loaded the other streams and ended `success`. The manifest and the check (the plan's) refuse
    it, and the other way round (a `.gz` file where the pattern says a plain one)."""
    spec = parse_spec({"name": "g", "files": "{table}/{table}.{stream}.tbl.gz", "tables": {"t": {
        "key": "id", "columns": [{"name": "id", "type": "bigint"}, {"name": "v", "type": "varchar(20)"}]}}})
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "t.1.tbl.gz").write_bytes(gzip.compress(b"".join(b"%d|v|\n" % i for i in range(1, 50))))
    write_manifest(tmp_path, describe_batch(tmp_path, spec))
    plain = tmp_path / "t" / "t.2.tbl"
    plain.write_bytes(b"".join(b"%d|v|\n" % i for i in range(50, 99)))
    said = (f"{plain}: a file of table t (stream 2) not compressed, unlike the table's files pattern "
            f"({{table}}/{{table}}.{{stream}}.tbl.gz): a run would not load it; name it as the pattern says (gzip it) "
            f"or move it out of the batch folder")
    assert check_batch(tmp_path, spec) == [said]
    with pytest.raises(BatchError, match=re.escape(said)):
        describe_batch(tmp_path, spec)
    plain.unlink()
    assert check_batch(tmp_path, spec) == []
    plain_spec = replace(spec, tables=tuple(replace(t, files="{table}/{table}.{stream}.tbl") for t in spec.tables))
    (tmp_path / "t" / "t.1.tbl").write_bytes(b"1|v|\n")
    said = (f"{tmp_path / 't' / 't.1.tbl.gz'}: a file of table t (stream 1) compressed (gzip), unlike the table's "
            f"files pattern ({{table}}/{{table}}.{{stream}}.tbl): a run would not load it; name it as the pattern says "
            f"or move it out of the batch folder")
    with pytest.raises(BatchError, match=re.escape(said)):
        describe_batch(tmp_path, plain_spec)


def test_the_check_takes_a_runs_tables_every_table_of_the_spec_unless_told(tmp_path):
    """A run without a `tables` param loads every table of the spec, and refuses a manifest with
    no entry for one; the check says the same, and with `--tables` what a run with that param does."""
    spec = parse_spec({"name": "g", "files": "{table}/{table}.{stream}.tbl", "tables": {
        t: {"key": "id", "columns": [{"name": "id", "type": "bigint"}]} for t in ("a", "b")}})
    for t in ("a", "b"):
        (tmp_path / t).mkdir()
        (tmp_path / t / f"{t}.1.tbl").write_text("1|\n2|\n")
    write_manifest(tmp_path, describe_batch(tmp_path, spec, ["a"]))
    problems = check_batch(tmp_path, spec)
    assert len(problems) == 2, problems
    assert problems[0] == (f"{tmp_path / 'manifest.json'}: no entry for table b (the run loads it: list its files, "
                           f"or leave the table out of the run's tables)")
    assert "b.1.tbl: a file of table b (stream 1) the manifest does not list" in problems[1]
    assert check_batch(tmp_path, spec, ["a"]) == []


def test_a_key_its_columns_type_would_store_changed_gets_no_manifest(tmp_path):
    """A key with a finer fraction than its column keeps reads as a timestamp, and the manifest
    listed it as its stream's bound; the check and the loads then refused it. The manifest
    refuses it too, naming its line and column in the check's words."""
    spec = parse_spec({"name": "g", "files": "{table}/{table}.{stream}.csv", "tables": {"a": {"key": "ts", "columns": [
        {"name": "ts", "type": {"postgres": "timestamp(3)", "mssql": "datetime2(3)"}}, {"name": "v", "type": "text"}]}},
        "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv"}})
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "a.1.csv").write_text("2026-01-01 00:00:00.125,x\n2026-01-01 00:00:01.1234,y\n")
    with pytest.raises(BatchError, match=r"a\.1\.csv: line 2, column ts: '2026-01-01 00:00:01\.1234': "):
        describe_batch(tmp_path, spec)
    (tmp_path / "a" / "a.1.csv").write_text("2026-01-01 00:00:00.125,x\n2026-01-01 00:00:01.123,y\n")
    assert [e.rows for e in describe_batch(tmp_path, spec).entries] == [2]


def test_a_file_cut_inside_a_quoted_field_is_refused_by_the_manifest_and_the_check(tmp_path):
    """A file cut short inside a quoted field that runs over lines (its last line ends, inside the
    field): Python's csv reader takes the file's end for the field's, so the manifest counted the
    record and the check passed it where the field was the last; the load refused it. Both refuse
    it now, naming its line."""
    spec = parse_spec({"name": "g", "files": "{table}/{table}.{stream}.csv", "tables": {"a": {"key": "id", "columns": [
        {"name": "id", "type": "bigint"}, {"name": "memo", "type": "varchar(50)", "nullable": True}]}},
        "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "null_marker": ""}})
    (tmp_path / "a").mkdir()
    path = tmp_path / "a" / "a.1.csv"
    path.write_text('1,"a ""quoted"" word"\n2,"line one\nline two"\n3,"cut\nhere\n')
    said = f"{path}: line 4: a quoted field of this record is not closed before the file's end"
    with pytest.raises(BatchError, match=re.escape(said)):
        describe_batch(tmp_path, spec)
    path.write_text('1,"a ""quoted"" word"\n2,"line one\nline two"\n3,"whole\nhere"\n')
    write_manifest(tmp_path, describe_batch(tmp_path, spec))
    assert check_batch(tmp_path, spec) == []
    path.write_text('1,"a ""quoted"" word"\n2,"line one\nline two"\n3,"cut\nhere\n')
    write_manifest(tmp_path, replace(read_manifest(tmp_path, spec), entries=tuple(
        replace(e, bytes=path.stat().st_size) for e in read_manifest(tmp_path, spec).entries)))
    assert check_batch(tmp_path, spec) == [said.replace(": line 4:", ": line 4,") + ": a file cut short (a copy that "
                                           "stopped, a full disk) ends so; the load would refuse it; write the file whole"]


def test_a_record_without_its_key_field_is_named_not_called_none(tmp_path):
    spec = parse_spec({"name": "g", "files": "{table}/{table}.{stream}.csv", "tables": {"a": {"key": "ts", "columns": [
        {"name": "v", "type": "text"}, {"name": "ts", "type": "timestamp(0)"}]}},
        "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv"}})
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "a.1.csv").write_text("x,2026-01-01 00:00:00\n\n")
    with pytest.raises(BatchError, match=r"a\.1\.csv: line 2, column ts: the record has 0 fields, the key is field 2 "
                                         r"\(a blank line\)$"):
        describe_batch(tmp_path, spec)


@pytest.mark.parametrize("data, line", [
    (b"1|x\ry|\n2|y|\n", 1),          # a stray carriage return inside a field
    (b"1|x|\n2|y|\r\n3|z|\n", 2),      # one CR LF line in a file whose first line ends LF
    (b"1|x\ry|\r\n", 1),              # a CR inside a field of a CR LF file
])
def test_a_carriage_return_the_load_would_take_for_a_line_end_is_named_before_any_load(tmp_path, data, line):
    """Without quoting the loads take a carriage return for a line end (the file's first line says
    which line end it has); the check names the line and the column instead of leaving it to the
    load, which names no column. A file all in CR LF, or all in LF, passes."""
    from switchyard.core.batch import manifest_for
    spec = parse_spec({"name": "g", "files": "{table}/{table}.{stream}.dat", "tables": {"a": {
        "partitioned": False, "columns": [{"name": "id", "type": "bigint"}, {"name": "v", "type": "varchar(20)"}]}}})
    (tmp_path / "a").mkdir()
    for body, bad in ((data, True), (b"1|x|\r\n2|y|\r\n", False), (b"1|x|\n2|y|\n", False)):
        (tmp_path / "a" / "a.1.dat").write_bytes(body)
        write_manifest(tmp_path, manifest_for(tmp_path, spec, 1))
        found = check_batch(tmp_path, spec)
        if bad:
            assert found == [f"{tmp_path / 'a' / 'a.1.dat'}: line {line}, column v: a carriage return, which the "
                             f"load cannot tell from a line end (quoting: none; the file's first line says its line "
                             f"end)"], found
        else:
            assert found == [], found


def test_a_carriage_return_outside_quotes_is_named_by_its_line_and_column_the_lines_after_it_numbered_as_loaded(
        tmp_path):
    """With RFC 4180 quoting a carriage return inside quotes is a character of its field, and
    outside them a line end to the loads (PostgreSQL: "literal carriage return found in data"),
    which count lines at LF. The check read such a record as two, each with too few fields, and
    numbered every later line one past the line the loads and `grep -n` give it. The record is
    one, its column named; the lines after it keep their numbers."""
    from switchyard.core.batch import manifest_for
    spec = parse_spec({"name": "g", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1,
                                  "null_marker": ""},
                       "tables": {"a": {"partitioned": False, "columns": [
                           {"name": "id", "type": "bigint"}, {"name": "memo", "type": "varchar(20)", "nullable": True},
                           {"name": "at", "type": "date"}]}}})
    (tmp_path / "a").mkdir()
    path = tmp_path / "a" / "a.1.csv"
    good = b'id,memo,at\n1,"in\rquotes",2026-01-01\n2,out side,2026-01-02\n3,"crlf\r\ninside",2026-01-03\n4,x,2026-02-28\n'
    path.write_bytes(good)
    write_manifest(tmp_path, manifest_for(tmp_path, spec, 1))
    assert read_manifest(tmp_path, spec).entries[0].rows == 4
    assert check_batch(tmp_path, spec) == []
    path.write_bytes(good.replace(b"out side", b"out\rside").replace(b"2026-02-28", b"2026-02-30"))
    assert manifest_for(tmp_path, spec, 1).entries[0].rows == 4     # `switchyard manifest` counts it once
    found = check_batch(tmp_path, spec)
    assert found == [f"{path}: line 3, column memo: a carriage return outside quotes, which the load cannot tell from "
                     f"a line end (PostgreSQL: \"literal carriage return found in data\"): quote the field",
                     f"{path}: line 6, column at: '2026-02-30': not a date (day is out of range for month)"], found


def test_a_quoted_field_longer_than_pythons_csv_default_is_read_like_any_other(tmp_path):
    """A JSON document in a quoted field passes Python's csv default of 128 KB a field; PostgreSQL
    takes up to 1 GB. The batch's description, its check and the loads' value guard read it."""
    from switchyard.core.value_guard import value_guard
    spec = parse_spec({"name": "d", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv"},
                       "tables": {"docs": {"partitioned": False, "key": "id", "columns": [
                           {"name": "id", "type": "integer"}, {"name": "at", "type": "date"},
                           {"name": "body", "type": "text"}]}}})
    (tmp_path / "docs").mkdir()
    document = '{"items": [' + ", ".join(['{"sku": "S1", "note": "a \\"quoted\\" word"}'] * 8000) + "]}"
    quoted = '"' + document.replace('"', '""') + '"'
    data = f"1,2026-03-01,{quoted}\n2,2026-03-02,y\n".encode()
    assert len(document) > 300_000
    (tmp_path / "docs" / "docs.1.csv").write_bytes(data)
    manifest = describe_batch(tmp_path, spec)
    assert [e.rows for e in manifest.entries] == [2]
    write_manifest(tmp_path, manifest)
    assert check_batch(tmp_path, spec) == []
    bad = data.replace(b"1,2026-03-01,", b"1,2026-03-01 10:00,")
    guard = value_guard(spec.table("docs"), "postgres")
    with pytest.raises(Exception, match="a time of day"):
        b"".join(guard.chunks([bad]))


def test_a_file_whose_line_ends_are_carriage_returns_alone_is_refused_at_its_first_line(tmp_path):
    """PostgreSQL's COPY takes a file's first line end for all of them, a CR alone too (classic Mac
    OS): refused before any load, whatever the batch's size; a CR inside a quoted field is text."""
    spec = parse_spec({"name": "cr", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv"},
                       "tables": {"t": {"partitioned": False, "key": "id", "columns": [
                           {"name": "id", "type": "integer"}, {"name": "p", "type": "numeric(12,2)"}]}}})
    (tmp_path / "t").mkdir()
    path = tmp_path / "t" / "t.1.csv"
    path.write_bytes(b"1,1.50\n2,1.555\n3,2.50\n")
    write_manifest(tmp_path, describe_batch(tmp_path, spec))    # the producer's manifest, for LF lines
    path.write_bytes(b"1,1.50\r2,1.555\r3,2.50\r")
    said = f"{path}: line 1: its line ends are carriage returns alone"
    assert any(p.startswith(said) for p in check_batch(tmp_path, spec)), check_batch(tmp_path, spec)
    with pytest.raises(BatchError, match="its line ends are carriage returns alone"):
        describe_batch(tmp_path, spec)    # `switchyard manifest` refuses it too
    path.write_bytes(b'1,"1.50"\r\n2,"2.50"\r\n')     # CR LF line ends: each CR before its LF
    write_manifest(tmp_path, describe_batch(tmp_path, spec))
    assert check_batch(tmp_path, spec) == []


@pytest.mark.parametrize("fmt, good, unended, text_after", [
    ({"delimiter": "|"}, b"1|x|\n2|y|\n3|z|\n", b"1|x|\n2|y\n3|z|\n", b"1|x|\n2|y|q\n3|z|\n"),
    # RFC 4180 quoting reads a quoted empty final field as the trailing delimiter's, as the loads do.
    ({"delimiter": ",", "quoting": "csv"}, b'1,"x, y",\n2,y,""\n3,z,\n', b'1,"x, y",\n2,y\n3,z,\n',
     b'1,"x, y",\n2,y,"q"\n3,z,\n'),
], ids=["quoting none", "quoting csv"])
def test_a_line_without_its_trailing_delimiter_is_named_before_any_load(tmp_path, fmt, good, unended, text_after):
    """With `trailing_delimiter: true` (the default) every line ends with the delimiter; a line
    that does not, or has text after it, is refused by the loads (their dummy column's error):
    the check names it first, with its line, in the loads' words."""
    spec = parse_spec({"name": "t", "files": "{table}/{table}.{stream}.dat", "format": fmt, "tables": {"a": {
        "partitioned": False, "columns": [{"name": "id", "type": "bigint"}, {"name": "v", "type": "varchar(20)"}]}}})
    (tmp_path / "a").mkdir()
    path = tmp_path / "a" / "a.1.dat"
    d = fmt["delimiter"]
    for body, said in ((good, None),
                       (unended, f"line 2, the line does not end with the trailing delimiter {d!r}, as every line "
                                 f"must (trailing_delimiter: true, the default; say `trailing_delimiter: false` for "
                                 f"files whose lines do not end with it)"),
                       (text_after, f"line 2, text after the trailing delimiter {d!r}, which ends every line "
                                    f"(trailing_delimiter: true)")):
        path.write_bytes(body)
        write_manifest(tmp_path, describe_batch(tmp_path, spec))
        assert check_batch(tmp_path, spec) == ([] if said is None else [f"{path}: {said}"])


def test_a_header_naming_the_columns_in_another_order_is_refused_before_any_load(tmp_path):
    """The loads take fields by their place: a producer that wrote two numeric columns the other
    way round, header and all, would load each into the other's column without an error. A header
    that names the spec's columns elsewhere is refused by the check and the manifest; one in the
    spec's order (letter case, quotes and a byte order mark aside) or with names of its own passes."""
    spec = parse_spec({"name": "w", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                       "tables": {"o": {"partitioned": False, "columns": [
                           {"name": "id", "type": "bigint"}, {"name": "unit_price", "type": "numeric(12,2)"},
                           {"name": "amount", "type": "numeric(12,2)"}]}}})
    (tmp_path / "o").mkdir()
    path = tmp_path / "o" / "o.1.csv"
    for header in (b"id,unit_price,amount", b'\xef\xbb\xbf"ID","Unit_Price", AMOUNT', b"Order ID,Price,Total",
                   b"Id,UnitPrice,Amount", b"ID,Unit Price,Amount", b"id,UNIT-PRICE,amount"):
        path.write_bytes(header + b"\r\n1,2.00,3.00\r\n")
        write_manifest(tmp_path, describe_batch(tmp_path, spec))
        assert check_batch(tmp_path, spec) == [], header
    path.write_bytes(b"id,amount,unit_price\r\n1,3.00,2.00\r\n")
    said = (f"{path}: line 1: the header names the table's columns in another order than the spec's: field 2 is "
            f"amount (the spec's column 3), field 3 is unit_price (the spec's column 2); the load takes each field "
            f"by its place, so their values would go into other columns: write the fields in the spec's order (id, "
            f"unit_price, amount), or list the spec's columns in the file's order")
    assert check_batch(tmp_path, spec) == [said]
    with pytest.raises(BatchError) as refused:
        describe_batch(tmp_path, spec)    # `switchyard manifest` refuses it too
    assert said in str(refused.value)
    # The same names as an export template writes them (CamelCase, spaces, hyphens): the same refusal.
    for good, header, written in ((b"Id,UnitPrice,Amount", b"Id,Amount,UnitPrice", ("amount", "unitprice")),
                                  (b"ID,Unit Price,Amount", b"ID,Amount,Unit Price", ("amount", "unit price")),
                                  (b"id,UNIT-PRICE,AMOUNT", b"id,AMOUNT,UNIT-PRICE", ("amount", "unit-price"))):
        path.write_bytes(good + b"\r\n1,2.00,3.00\r\n")
        write_manifest(tmp_path, describe_batch(tmp_path, spec))   # the same size, swapped below
        path.write_bytes(header + b"\r\n1,3.00,2.00\r\n")
        assert check_batch(tmp_path, spec) == [
            f"{path}: line 1: the header names the table's columns in another order than the spec's: field 2 is "
            f"{written[0]} (the spec's column 3), field 3 is {written[1]} (the spec's column 2, unit_price); the load "
            f"takes each field by its place, so their values would go into other columns: write the fields in the "
            f"spec's order (id, unit_price, amount), or list the spec's columns in the file's order"], header


@pytest.mark.parametrize("quoting, body, said", [
    # A quoted field is a value, never the NULL marker: `""` is the empty string, which no number is.
    ("csv", b'1,,\r\n2,"",x\r\n3,1.5,""\r\n', "line 2, column d: '': not a decimal number (numeric(12,2))"),
    ("csv", b'1,,\r\n2,1,x\n3,1.5,"a\nb"\r\n', "line 2, its line ends with LF alone, where the file's first record "
                                              "ends with CR LF"),
    ("csv", b'1,,\n2,1,x\r\n3,1.5,"a\r\nb"\n', "line 2, its line ends with CR LF, where the file's first record ends "
                                              "with LF alone"),
    ("none", b'1|||\r\n2|1|x|\n3|1.5||\r\n', "line 2, its line ends with LF alone, where the file's first record "
                                            "ends with CR LF"),
    ("csv", b'1,,\r\n2,1,"a\nb"\r\n3,1.5,""\r\n', None),      # a line break inside quotes is the field's
])
def test_a_quoted_null_marker_and_a_line_end_unlike_the_first_are_named_before_any_load(tmp_path, quoting, body, said):
    """Both stop the load (tests/integration/test_exact_loads.py puts each through the server): the
    check names the line, and the column where there is one."""
    fmt = ({"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "null_marker": ""} if quoting == "csv"
           else {"delimiter": "|", "null_marker": ""})
    spec = parse_spec({"name": "w", "files": "{table}/{table}.{stream}.csv", "format": fmt, "tables": {"o": {
        "partitioned": False, "columns": [{"name": "id", "type": "bigint"},
                                          {"name": "d", "type": "numeric(12,2)", "nullable": True},
                                          {"name": "t", "type": "text", "nullable": True}]}}})
    (tmp_path / "o").mkdir()
    path = tmp_path / "o" / "o.1.csv"
    path.write_bytes(body)
    write_manifest(tmp_path, describe_batch(tmp_path, spec))
    found = check_batch(tmp_path, spec)
    if said is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(f"{path}: {said}"), found


@pytest.mark.parametrize("name", ["o.1.csv", "o.1.csv.gz"])
def test_a_file_whose_last_line_has_no_line_end_is_refused_by_the_manifest_and_the_check(tmp_path, name):
    """A file cut short inside its last record's last field has as many fields in it as any other
    record: only its missing line end tells. `switchyard manifest` and `switchyard check` refuse it,
    naming its last line; a compressed file's end is read with its records."""
    from switchyard.core.batch import manifest_for
    spec = parse_spec({"name": "w", "files": "{table}/{table}.{stream}." + name.split(".", 2)[2],
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                       "tables": {"o": {"partitioned": False, "columns": [
                           {"name": "id", "type": "bigint"}, {"name": "t", "type": "text"}]}}})
    (tmp_path / "o").mkdir()
    path = tmp_path / "o" / name
    opener = gzip.open if name.endswith(".gz") else open
    for body, line in ((b'id,t\r\n1,","\r\n2,whole\r\n', None), (b'id,t\r\n1,","\r\n2,who', 3),
                       (b'id,t\r\n1,","\r\n2,"who', 3)):
        with opener(path, "wb") as fh:
            fh.write(body)
        said = (f"{path}: line {line}: the file's last line has no line end: a file cut short (a copy that "
                f"stopped, a full disk) ends so, and its last record would load with what is left of its last "
                f"field, without an error; write every line with its line end, the last one too")
        if line is None:
            write_manifest(tmp_path, describe_batch(tmp_path, spec))
            assert check_batch(tmp_path, spec) == []
            continue
        with pytest.raises(BatchError) as refused:
            describe_batch(tmp_path, spec)
        assert said in str(refused.value)
        write_manifest(tmp_path, manifest_for(tmp_path, spec, 1))      # a producer's own manifest
        assert said in check_batch(tmp_path, spec), check_batch(tmp_path, spec)


@pytest.mark.parametrize("sql_type, file_text, server_value", [
    ("bigint", " 0041", 41), ("numeric(12,3)", "1.50", "1.5"), ("char(3)", "ER", "ER "),
    ("date", "2027-02-11", "2027-02-11"), ("timestamp(3)", "2027-02-11 06:30:49.900", "2027-02-11T06:30:49.9"),
    ("time(0)", "6:00:00", "06:00:00"), ("varchar(12)", "M-0001", "M-0001")])
def test_a_duplicated_keys_value_compares_as_its_columns_type_reads_it(sql_type, file_text, server_value):
    from switchyard.core.batch import comparable
    assert comparable(sql_type, file_text) == comparable(sql_type, server_value)


def test_values_a_type_tells_apart_stay_apart():
    from switchyard.core.batch import comparable
    assert comparable("varchar(12)", "ER") != comparable("varchar(12)", "ER ")   # varchar keeps the space
    assert comparable("character varying(12)", "ER") != comparable("character varying(12)", "ER ")
    assert comparable("bigint", "x41") == "x41" != comparable("bigint", "41")    # not an integer: its text


# A CSV table with a header line: a station name and a trip id.
TRIPS_CSV = parse_spec({"name": "hdr", "files": "{table}/{table}.{stream}.csv",
                        "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                        "tables": {"trips": {"key": "trip_id", "columns": [
                            {"name": "station", "type": "varchar(20)"}, {"name": "trip_id", "type": "bigint"}]}}})


def test_a_file_without_its_header_whose_first_record_runs_over_lines_is_named_for_the_header(tmp_path):
    """A producer that left out the header line of a CSV file whose first record opens a quoted
    field over two lines: the line skipped as a header is read with the lines its quote runs
    over, as the records are, so the refusal names the missing header, not the record's second
    line (which the skip would leave to be read as a record of its own)."""
    spec, batch = TRIPS_CSV, tmp_path / "batch"
    (batch / "trips").mkdir(parents=True)
    (batch / "trips" / "trips.1.csv").write_bytes(b'station,trip_id\n"Nord\nbahnhof",1\nSud,2\n')
    describe_batch(batch, spec)       # with its header: a record over two lines is a record
    second = batch / "trips" / "trips.2.csv"
    second.write_bytes(b'"Ost\nbahnhof",10\nWest,11\n')
    refusal = (f"{second}: line 1: skipped as a header line (header_lines: 1), but it is a record of trips (column "
               f"trip_id: '10', a value of bigint, not a name): the load would leave it out; write the file with its "
               f"header line, or say `header_lines: 0`")
    with pytest.raises(BatchError) as refused:
        describe_batch(batch, spec)
    assert str(refused.value).endswith(refusal), refused.value
    # A header whose quoted name holds the delimiter still passes as a header.
    second.write_bytes(b'"station, name",trip_id\n"Ost\nbahnhof",10\nWest,11\n')
    write_manifest(batch, describe_batch(batch, spec))
    assert check_batch(batch, spec) == []


def test_a_header_naming_columns_the_spec_lacks_says_which(tmp_path):
    """A producer that added a column before the spec did: every record has a field too many,
    and the header's names say which column it is."""
    spec, batch = TRIPS_CSV, tmp_path / "batch"
    (batch / "trips").mkdir(parents=True)
    path = batch / "trips" / "trips.1.csv"
    path.write_bytes(b"station,trip_id,customs_ref\n" + b"".join(b"Nord,%d,C%d\n" % (k, k) for k in range(1, 8)))
    said = (f"{path}: line 1: the header names 3 fields, the spec's trips 2 columns; not in the spec: customs_ref. "
            f"Add them to the spec's columns, in the file's order (a new nullable column is added to the target with "
            f"on_spec_change: add_columns), or have the producer leave them out")
    with pytest.raises(BatchError) as refused:        # switchyard manifest
        describe_batch(batch, spec)
    assert str(refused.value).endswith(said), refused.value
    # The producer's own manifest: `switchyard check` says it before each record's field count.
    (batch / "manifest.json").write_text(json.dumps({"format": "switchyard-manifest/1", "spec": "hdr", "streams": 1,
        "files": [{"table": "trips", "stream": 1, "file": "trips/trips.1.csv", "bytes": path.stat().st_size,
                   "rows": 7, "key_min": 1, "key_max": 7}]}))
    problems = check_batch(batch, spec)
    # Said once for the file, not again by each record's field count.
    assert problems == [said, f"{path}: 7 records not read against the spec's columns: the file's header names "
                              f"other columns than the spec's"], problems
    # Another name for a column the spec has, and as many fields: a header may name them its own way.
    path.write_bytes(b"station,trip id\nNord,1\n")
    describe_batch(batch, spec)


def test_a_header_lacking_columns_of_the_spec_says_which(tmp_path):
    """A file written before the spec had a column (an older batch loaded again after the column
    was added): every record has a field too few, and the header's names say which is missing."""
    spec = parse_spec({"name": "hdr", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                       "tables": {"trips": {"key": "trip_id", "columns": [
                           {"name": "trip_id", "type": "bigint"}, {"name": "station", "type": "varchar(20)"},
                           {"name": "channel", "type": "text", "nullable": True}]}}})
    batch = tmp_path / "batch"
    (batch / "trips").mkdir(parents=True)
    path = batch / "trips" / "trips.1.csv"
    path.write_bytes(b"trip_id,station\n" + b"".join(b"%d,Nord\n" % k for k in range(1, 8)))
    said = (f"{path}: line 1: the header names 2 fields, the spec's trips 3 columns; not in the file: channel. The "
            f"file was written without them (before the spec had them?): the load takes each field by its place, so "
            f"have the producer write them (an empty field is NULL where the column allows it and the format's "
            f"null_marker is empty), or load this batch with the spec it was written for")
    with pytest.raises(BatchError) as refused:        # switchyard manifest
        describe_batch(batch, spec)
    assert said in str(refused.value), refused.value
    # The producer's own manifest: `switchyard check` says it once, not each record's field count.
    (batch / "manifest.json").write_text(json.dumps({"format": "switchyard-manifest/1", "spec": "hdr", "streams": 1,
        "files": [{"table": "trips", "stream": 1, "file": "trips/trips.1.csv", "bytes": path.stat().st_size,
                   "rows": 7, "key_min": 1, "key_max": 7}]}))
    assert check_batch(batch, spec) == [said, f"{path}: 7 records not read against the spec's columns: the file's "
                                              f"header names other columns than the spec's"]
    # A header naming the spec's columns in full says nothing of the kind.
    path.write_bytes(b"trip_id,station,channel\n1,Nord,\n")
    describe_batch(batch, spec)
    # Written before `note` was renamed `channel` and `rider` added: names on both sides, records as
    # wide as the header. Said before any load, as the shorter header alone is.
    renamed = parse_spec({"name": "hdr", "files": "{table}/{table}.{stream}.csv",
                          "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                          "tables": {"trips": {"key": "trip_id", "columns": [
                              {"name": "trip_id", "type": "bigint"}, {"name": "station", "type": "varchar(20)"},
                              {"name": "channel", "type": "text", "nullable": True},
                              {"name": "rider", "type": "text", "nullable": True}]}}})
    path.write_bytes(b"trip_id,station,note\n" + b"".join(b"%d,Nord,x\n" % k for k in range(1, 8)))
    with pytest.raises(BatchError) as refused:
        describe_batch(batch, renamed)
    assert (f"{path}: line 1: the header names 3 fields, the spec's trips 4 columns; not in the spec: note; not in "
            f"the file: channel, rider, and its records have 3 fields too. Was it written before the spec changed (a "
            f"column renamed, another added)?") in str(refused.value), refused.value
    # Records as wide as the spec (a header short of a name): the records load; nothing said.
    path.write_bytes(b"trip_id,station,note\n" + b"".join(b"%d,Nord,x,y\n" % k for k in range(1, 8)))
    describe_batch(batch, renamed)


def test_a_repeated_unique_key_is_named_by_its_lines_before_any_load(tmp_path):
    """`switchyard check` and the plan's read of a small batch find a record whose unique columns'
    values an earlier record of its file holds, as the validate step's unique index would after
    every load: named by both lines. Values compare as their type reads them; NULLs and values
    that differ (a varchar's trailing space) are no repeat."""
    spec = parse_spec({"name": "depots", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv",
                                  "header_lines": 1, "null_marker": ""},
                       "tables": {
                           "depots": {"partitioned": False, "key": "code", "unique": True, "columns": [
                               {"name": "code", "type": "char(9)"}, {"name": "name", "type": "varchar(40)"}]},
                           "rates": {"key": "day", "unique": ["day", "carrier", "weight"], "columns": [
                               {"name": "day", "type": "date"}, {"name": "carrier", "type": "varchar(10)",
                                                                  "nullable": True},
                               {"name": "weight", "type": "numeric(6,2)"}, {"name": "price", "type": "numeric(8,2)"}]}}})
    batch = tmp_path / "batch"
    (batch / "depots").mkdir(parents=True)
    (batch / "rates").mkdir()
    depots = batch / "depots" / "depots.1.csv"
    depots.write_bytes(b'code,name\nDE-BER-01,Berlin\n"DE-KOL-01","K\xc3\xb6ln, Hbf"\nDE-BER-01 ,Berlin Ost\n')
    rates = batch / "rates" / "rates.1.csv"
    rates.write_bytes(b"day,carrier,weight,price\n"
                      b"2026-12-01,DHL,1.5,4.99\n"
                      b"2026-12-01,DHL ,1.5,4.99\n"       # a varchar keeps its trailing space: another key
                      b"2026-12-01,,1.5,4.99\n2026-12-01,,1.5,5.99\n"   # NULL carriers: never a repeat
                      b'2026-12-01,"",1.5,4.99\n'         # the empty string, quoted: a value
                      b"2026-12-01,DHL,1.50,5.49\n")      # 1.50 is 1.5
    write_manifest(batch, describe_batch(batch, spec))
    assert check_batch(batch, spec) == [
        f"{depots}: line 4: code 'DE-BER-01 ', as on line 2: the table's unique columns (code) hold each value once, "
        f"and the validate step would refuse the batch after its loads",
        f"{rates}: line 7: day '2026-12-01', carrier 'DHL', weight '1.50', as on line 2: the table's unique columns "
        f"(day, carrier, weight) hold each value once, and the validate step would refuse the batch after its loads"]
    # Many repeats: the first five named, the rest counted.
    depots.write_bytes(b"code,name\n" + b"".join(b"DE-HAM-01,Hamburg %d\n" % i for i in range(9)))
    write_manifest(batch, describe_batch(batch, spec))
    found = [p for p in check_batch(batch, spec) if str(depots) in p]
    assert len(found) == 6 and "line 3: code 'DE-HAM-01', as on line 2" in found[0], found
    assert found[-1] == f"{depots}: 3 more records repeat the unique columns' values of an earlier one (8 in all)"


def test_check_says_a_batch_wider_than_the_dag_is_refused_as_the_run_would(tmp_path, monkeypatch, capsys):
    """The DAG has task groups for up to SWITCHYARD_STREAMS streams per table (its settings file);
    a batch with more of one table is refused by the run's first step: `check` says so where the
    DAG it speaks to loads this spec, and not for another spec's DAG."""
    batch = tmp_path / "batch"
    write_batch(batch)
    spec = write_spec(batch)
    assert main(["manifest", str(batch), "--spec", str(spec)]) == 0
    settings_file = tmp_path / "switchyard.env"
    monkeypatch.setenv("SWITCHYARD_SETTINGS_FILE", str(settings_file))
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path / "airflow"))
    for variable in ("SWITCHYARD_SPEC", "SWITCHYARD_STREAMS"):
        monkeypatch.delenv(variable, raising=False)
    settings_file.write_text(f"SWITCHYARD_SPEC={spec}\nSWITCHYARD_STREAMS=1\n")
    capsys.readouterr()
    assert main(["check", "--batch", str(batch), "--spec", str(spec)]) == 1
    said = capsys.readouterr().err
    assert (f"the batch has 2 streams of sales but this DAG has task groups for up to 1 per table (set "
            f"SWITCHYARD_STREAMS=2 or more in the DAG's settings file, {settings_file}") in said
    # Only the lookup asked for: its one stream fits.
    assert main(["check", "--batch", str(batch), "--spec", str(spec), "--tables", "shops"]) == 0
    # Two streams per table, or another spec's DAG: nothing to say.
    settings_file.write_text(f"SWITCHYARD_SPEC={spec}\nSWITCHYARD_STREAMS=2\n")
    assert main(["check", "--batch", str(batch), "--spec", str(spec)]) == 0
    settings_file.write_text("SWITCHYARD_SPEC=tpch\nSWITCHYARD_STREAMS=1\n")
    assert main(["check", "--batch", str(batch), "--spec", str(spec)]) == 0
    # A manifest the check refuses (a table the spec lacks): said as a problem, not a traceback.
    settings_file.write_text(f"SWITCHYARD_SPEC={spec}\nSWITCHYARD_STREAMS=2\n")
    manifest = json.loads((batch / "manifest.json").read_text())
    manifest["files"].append(dict(manifest["files"][0], table="refunds", file="refunds/refunds.1.csv"))
    (batch / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["check", "--batch", str(batch), "--spec", str(spec)]) == 1
    assert "files[3]: table 'refunds' is not in spec 'sales'" in capsys.readouterr().err


def test_a_lookup_of_text_columns_without_its_header_is_named_when_its_code_is_like_the_next_keys(tmp_path):
    """A table of text columns keyed by a code (`ADJ-001`): a line skipped as a header fits every
    column as a name would, but a key field written as the codes of the records after it, with
    digits, is a record: the producer left the header out, and the skip would drop it."""
    spec = parse_spec({"name": "adj", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                       "tables": {"adjusters": {"partitioned": False, "key": "adjuster_id", "unique": True, "columns": [
                           {"name": "adjuster_id", "type": "varchar(8)"}, {"name": "name", "type": "varchar(60)"},
                           {"name": "region", "type": "char(2)", "nullable": True}]}}})
    batch = tmp_path / "batch"
    (batch / "adjusters").mkdir(parents=True)
    path = batch / "adjusters" / "adjusters.1.csv"
    path.write_bytes('"ADJ-001","Élodie","FR"\n"ADJ-002","健太","JP"\n"ADJ-003","Sam",\n'.encode())
    refusal = (f"{path}: line 1: skipped as a header line (header_lines: 1), but it is a record of adjusters (column "
               f"adjuster_id: 'ADJ-001', a code like the key of the records after it, 'ADJ-002', 'ADJ-003', not a "
               f"name): the load would leave it out; write the file with its header line, or say `header_lines: 0`")
    with pytest.raises(BatchError) as refused:
        describe_batch(batch, spec)
    assert str(refused.value).endswith(refusal), refused.value
    # Headers pass: the spec's names, other names for them, and names shaped like no code.
    for header in (b"adjuster_id,name,region\n", b"Adjuster ID,Name,Region\n", b"ADJ_ID,NAME,CC\n", b"id,who,cc\n"):
        path.write_bytes(header + b'"ADJ-001","Elodie","FR"\n"ADJ-002","Kenta","JP"\n')
        describe_batch(batch, spec)
    # Codes without digits cannot be told from names: passes, as before.
    path.write_bytes(b"FR,France,EU\nDE,Germany,EU\nJP,Japan,AS\n")
    assert describe_batch(batch, spec)


def test_a_lookup_keyed_without_digits_and_without_its_header_is_named_by_another_columns_codes(tmp_path):
    """Cost centres keyed by `CC-FIN` (no digits), each with its manager's code (`E-000001`): the
    line skipped as a header is a record when a field of it is written as that column is in the
    records after it; a header naming the columns otherwise (no digits in a code's shape) passes."""
    spec = parse_spec({"name": "cc", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                       "tables": {"cost_centers": {"partitioned": False, "key": "code", "unique": True, "columns": [
                           {"name": "code", "type": "varchar(8)"}, {"name": "name", "type": "varchar(60)"},
                           {"name": "manager_id", "type": "varchar(8)", "nullable": True}]}}})
    batch = tmp_path / "batch"
    (batch / "cost_centers").mkdir(parents=True)
    path = batch / "cost_centers" / "cost_centers.1.csv"
    path.write_bytes(b'CC-FIN,"Finance, Accounting & Tax",E-000001\nCC-SAL,Sales,E-000017\nCC-OPS,Operations,E-000023\n')
    refusal = (f"{path}: line 1: skipped as a header line (header_lines: 1), but it is a record of cost_centers "
               f"(column manager_id: 'E-000001', a code like that column of the records after it, 'E-000017', "
               f"'E-000023', not a name): the load would leave it out; write the file with its header line, or say "
               f"`header_lines: 0`")
    with pytest.raises(BatchError) as refused:
        describe_batch(batch, spec)
    assert str(refused.value).endswith(refusal), refused.value
    for header in (b"code,name,manager_id\n", b"CC,Name,Manager\n", b"Cost Centre,Label,Mgr\n"):
        path.write_bytes(header + b'CC-FIN,"Finance, Accounting & Tax",E-000001\nCC-SAL,Sales,E-000017\n')
        describe_batch(batch, spec)


@pytest.mark.parametrize("quoting", ["csv", "none"])
def test_a_blank_line_is_refused_by_the_manifest_as_by_the_check(tmp_path, quoting):
    """A blank line is no record of a table of several columns (the load refuses it): `switchyard
    manifest` refuses the file as `switchyard check` does, instead of counting it as a row."""
    def spec(columns):
        return parse_spec({"name": "b", "files": "{table}/{table}.{stream}.csv",
                           "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": quoting},
                           "tables": {"t": {"partitioned": False, "columns": [
                               {"name": f"c{i}", "type": "varchar(8)", "nullable": True} for i in range(columns)]}}})
    batch = tmp_path / "batch"
    (batch / "t").mkdir(parents=True)
    path = batch / "t" / "t.1.csv"
    path.write_bytes(b"a,b\nc,d\n\n")
    with pytest.raises(BatchError) as refused:
        describe_batch(batch, spec(2))
    assert str(refused.value).endswith(f"{path}: line 3: a blank line, no record of the table's 2 columns: the load "
                                       f"would refuse it; write the file without it"), refused.value
    # In a table of one column an empty line is a record (an empty field): counted, as before.
    path.write_bytes(b"a\nc\n\n")
    assert describe_batch(batch, spec(1)).entries[0].rows == 3


@pytest.mark.parametrize("data, said", [(b"", "no line at all"), (b"code,name\n", "1 line only")])
def test_a_file_that_ends_before_its_header_is_refused_not_taken_for_an_empty_stream(tmp_path, data, said):
    """A stream with no records still has its header: a file of 0 bytes where the format says a
    header comes first is an export that wrote nothing, which `switchyard manifest` would list
    with 0 rows and a run leave out, ending `success`. The manifest, the check and the plan refuse
    it, naming the file; the header alone passes, an empty stream."""
    lines = 2 if said == "1 line only" else 1
    spec = parse_spec({"name": "h", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ",", "trailing_delimiter": False, "header_lines": lines},
                       "tables": {"t": {"partitioned": False, "key": "code", "columns": [
                           {"name": "code", "type": "varchar(8)"}, {"name": "name", "type": "varchar(8)"}]}}})
    batch = tmp_path / "batch"
    (batch / "t").mkdir(parents=True)
    path = batch / "t" / "t.1.csv"
    path.write_bytes(data)
    why = (f"{path}: {said}, where the format says the file starts with {lines} header line"
           f"{'s' if lines > 1 else ''} (header_lines: {lines}): a stream with no records still has its header")
    with pytest.raises(BatchError, match=re.escape(why)):
        describe_batch(batch, spec)
    path.write_bytes(b"code,name\n" * lines)
    manifest = describe_batch(batch, spec)
    write_manifest(batch, manifest)
    assert read_manifest(batch, spec).entries[0].rows == 0 and check_batch(batch, spec) == []
    # The producer's own manifest lists the file as it is: 0 rows, its size.
    path.write_bytes(data)
    write_manifest(batch, replace(manifest, entries=(replace(manifest.entries[0], bytes=len(data)),)))
    assert any(p.startswith(why) for p in check_batch(batch, spec)), check_batch(batch, spec)
    # The plan's check of the files (setup.plan, and on a source's workers).
    assert any(p.startswith(why) for p in check_files(batch, read_manifest(batch, spec), spec)), why


def test_bytes_a_single_byte_encoding_does_not_decode_are_quoted_as_the_file_holds_them(tmp_path):
    """A UTF-8 `Í` (C3 8D) in a file the spec calls cp1252, where 8D is no character: the check
    quotes the field's bytes as they are in the file, not re-encoded."""
    spec = parse_spec({"name": "e", "files": "{table}/{table}.{stream}.csv",
                       "format": {"delimiter": ";", "trailing_delimiter": False, "encoding": "cp1252"},
                       "tables": {"t": {"partitioned": False, "columns": [
                           {"name": "code", "type": "char(3)"}, {"name": "name", "type": "varchar(20)"}]}}})
    (tmp_path / "t").mkdir()
    path = tmp_path / "t" / "t.1.csv"
    path.write_bytes(b"ISK;\xc3\x8dslensk kr\xc3\xb3na\n")
    write_manifest(tmp_path, describe_batch(tmp_path, spec))
    problems = check_batch(tmp_path, spec)
    assert any(f"{path}: line 1, column name: bytes that are not cp1252: b'\\xc3\\x8dslensk kr\\xc3\\xb3na'" in p
               for p in problems), problems


@pytest.mark.parametrize("sql_type, neutral, text, why", [
    ("datetimeoffset(3)", False, "2026-01-05T10:00:00+14:30", "a time zone offset +14:30 out of range: SQL Server's "
                                                              "datetimeoffset reads offsets up to 14:00 either way"),
    ("timestamptz", True, "2026-01-05T10:00:00-15:00", "a time zone offset -15:00 out of range: SQL Server's "
                                                       "datetimeoffset reads offsets up to 14:00 either way"),
    ("datetimeoffset(3)", False, "2026-01-05T10:00:00 Europe/Paris", "a time zone's name (Europe/Paris): SQL Server's "
                                                                     "datetimeoffset reads an offset only"),
    ("datetimeoffset(3)", False, "2026-01-05T10:00:00-14:00", None),
])
def test_zones_sql_servers_datetimeoffset_does_not_read_are_refused_by_the_check(sql_type, neutral, text, why):
    """SQL Server's datetimeoffset reads an offset up to 14:00 either way, and no zone's name (its
    load refuses the field): the check says so before any load, for that type and for a type
    given to every target (PostgreSQL's own timestamptz reads up to 15:59 and names; the check
    against the server: tests/integration/test_exact_loads.py)."""
    from switchyard.core.fields import field_check
    found = field_check(sql_type, neutral=neutral)(text)
    assert (found is None) if why is None else why in (found or ""), found


@pytest.mark.parametrize("sql_type, text, why", [
    ("timestamptz", "2026-01-05T10:00:00 UTC+5", "a time zone spelt 'UTC+5'"),
    ("timestamptz", "2026-01-05T10:00:00 GMT-3", "a time zone spelt 'GMT-3'"),
    ("timestamptz", "2026-01-05T10:00:00 ist", "a time zone spelt 'ist'"),
    ("timestamptz", "2026-01-05T10:00:00+05:3", "a form of date the check does not read"),
    ("timestamptz", "2026-01-05T10:00:00 Z+05", "a time zone spelt"),
    ("timestamp", "2026-01-05 10:30.5", "a form of date the check does not read"),
    ("timestamp", "2026-01-05 24:0", "a form of date the check does not read"),
    ("timestamp", "2026-01-05TT10:00:00", "a form of date the check does not read"),
    ("timestamp", "today allballs", "a form of date the check does not read"),
    ("timestamp", "2026-01-05 EST 00:00", "a form of date the check does not read"),
    ("timestamp", "Dec 5 2026 13:00 PM", "not a time of day (13:00 PM"),
    ("timestamp(0)", "2026-01-05 1:2:3.5", "a form of date the check does not read"),
    ("time", "10:30.5", "a time of day in a form the check does not read"),
    ("time", "9:59:60", "not a time of day"),
    ("time", "now z", "a time of day in a form the check does not read"),
    ("integer", "\x1c12", "not an integer"),
])
def test_forms_the_server_reads_as_another_value_are_refused_by_the_check_and_the_guard(sql_type, text, why):
    """Each of these PostgreSQL stores as another value without an error (10:30.5 as 00:10:30.5,
    24:0 as the next day, a doubled T at midnight, UTC+5 five hours west, IST as Israel's): the
    check and the loads' value guard refuse them, naming why."""
    from switchyard.core.fields import field_check, kept_pattern
    assert why in (field_check(sql_type)(text) or ""), field_check(sql_type)(text)
    assert not re.fullmatch(kept_pattern(sql_type), text), text
    # Offsets, Z, UTC and a region's name are read alike by every reader.
    for zone in ("Z", "+05", "+0530", "-05:30", "UTC", "Europe/Paris", "America/Argentina/Buenos_Aires"):
        assert field_check("timestamptz")(f"2026-01-05T10:00:00 {zone}") is None, zone
