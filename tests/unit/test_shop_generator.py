"""The shop example's generator, read back by an independent reader (csv, gzip modules).

What it writes must be what it means: the manifest's counts and key ranges, the header,
the formats the spec declares (CRLF, gzip, NULL markers), unique keys, the declared
expectations, and every kind of messy value a real extract holds.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import unicodedata
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import pytest

from helpers import (declared_length, raw_text, read_records, records_by_line_end, split_fields,
                       table_rows, with_nulls)
from switchyard.core.datagen import generate
from switchyard.core.shop import generate_shop
from switchyard.core.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec("shop")
SCALE = 0.002   # about 200 customers, 800 orders, 3,000 events
STREAMS = 3


@pytest.fixture(scope="module")
def batch(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("shop") / "batch"
    generate_shop(folder, SPEC, SCALE, STREAMS)
    return folder


@pytest.fixture(scope="module")
def manifest(batch) -> dict:
    return json.loads((batch / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def rows(batch, manifest) -> dict[str, list[tuple]]:
    """Every table's rows as the independent reader sees them."""
    out = {}
    for table in SPEC.tables:
        files = [e["file"] for e in sorted(manifest["files"], key=lambda e: e["stream"]) if e["table"] == table.name]
        out[table.name] = list(table_rows(batch, table, files))
    return out


def entries(manifest: dict, table: str) -> list[dict]:
    return sorted((e for e in manifest["files"] if e["table"] == table), key=lambda e: e["stream"])


def column(table: str, name: str, rows) -> list:
    i = SPEC.table(table).column_names.index(name)
    return [r[i] for r in rows[table]]


def test_the_spec_declares_the_formats_keys_and_checks_of_a_real_extract():
    customers, orders, events = SPEC.table("customers"), SPEC.table("orders"), SPEC.table("events")
    assert SPEC.generator == "shop"
    for t in SPEC.tables:
        assert t.format.quoting == "csv" and t.format.delimiter == "," and not t.format.trailing_delimiter
        assert t.format.header_lines == 1 and t.unique and t.expectations
        assert any(c.nullable for c in t.columns) and not t.column(t.key).nullable
    assert customers.key_kind() == "integer" and customers.format.line_end == "crlf"
    assert orders.key_kind() == events.key_kind() == "date"
    assert orders.key_kind("mssql") == events.key_kind("mssql") == "date"
    assert orders.files.endswith(".gz") and orders.format.null_marker == "NA"
    assert customers.format.null_marker == events.format.null_marker == ""
    kinds = {e.type for t in SPEC.tables for e in t.expectations}
    assert {"expect_column_values_to_be_in_set", "expect_column_values_to_be_between",
            "expect_column_values_to_match_regex"} <= kinds


def test_manifest_lists_every_stream_file_with_its_own_counts_and_key_ranges(batch, manifest):
    assert manifest["format"] == "switchyard-manifest/1"
    assert manifest["spec"] == "shop" and manifest["streams"] == STREAMS and manifest["scale"] == SCALE
    assert len(manifest["files"]) == len(SPEC.tables) * STREAMS
    for table in SPEC.tables:
        previous_max = None
        for k, entry in enumerate(entries(manifest, table.name), start=1):
            assert entry["stream"] == k and entry["file"] == SPEC.file_for(table.name, k)
            path = batch / entry["file"]
            assert entry["bytes"] == path.stat().st_size > 0
            header, records = read_records(path, table)
            assert entry["rows"] == len(records) > 0, entry
            key_index = table.column_names.index(table.key)
            keys = [r[key_index] for r in records]
            if table.key_kind() == "date":
                # ISO-8601 text in the manifest; every key a real date
                assert all(isinstance(entry[k_], str) for k_ in ("key_min", "key_max"))
                parsed = [date.fromisoformat(k_) for k_ in keys]
                assert entry["key_min"] == parsed[0].isoformat() and entry["key_max"] == parsed[-1].isoformat()
                lo, hi = date.fromisoformat(entry["key_min"]), date.fromisoformat(entry["key_max"])
                if previous_max is not None:  # contiguous day ranges: every day has rows
                    assert lo == previous_max + timedelta(days=1), (table.name, k)
            else:
                assert all(type(entry[k_]) is int for k_ in ("key_min", "key_max"))
                parsed = [int(k_) for k_ in keys]
                assert entry["key_min"] == parsed[0] and entry["key_max"] == parsed[-1]
                lo, hi = parsed[0], parsed[-1]
                if previous_max is not None:
                    assert lo > previous_max, (table.name, k)
            assert parsed == sorted(parsed), f"{entry['file']}: keys are not increasing"
            assert min(parsed) == lo and max(parsed) == hi
            previous_max = hi


def test_manifest_is_written_after_every_stream_file(batch, manifest):
    written = (batch / "manifest.json").stat().st_mtime_ns
    assert all((batch / e["file"]).stat().st_mtime_ns <= written for e in manifest["files"])
    assert not list(batch.glob("*.tmp"))


def test_every_file_has_the_header_and_every_record_all_columns(batch, manifest):
    for entry in manifest["files"]:
        table = SPEC.table(entry["table"])
        header, records = read_records(batch / entry["file"], table)
        assert header == [list(table.column_names)], entry["file"]
        assert all(len(r) == len(table.columns) for r in records), entry["file"]


def test_values_parse_as_their_types_and_fit_their_declared_lengths(rows):
    for table in SPEC.tables:
        for target in ("postgres", "mssql"):
            for i, c in enumerate(table.columns):
                limit = declared_length(c.sql_type(target))
                if limit is None:
                    continue
                values = [r[i] for r in rows[table.name] if r[i] is not None]
                # PostgreSQL counts characters; SQL Server's nvarchar counts UTF-16 code units
                # (an emoji is two) and varchar bytes (these varchar columns are ASCII).
                if target == "mssql" and c.sql_type(target).startswith("n"):
                    size = lambda v: len(v.encode("utf-16-le")) // 2  # noqa: E731
                elif target == "mssql":
                    assert all(v.isascii() for v in values), (table.name, c.name)
                    size = len
                else:
                    size = len
                assert max(map(size, values)) <= limit, (table.name, c.name, target)
                if c.sql_type(target).startswith(("char", "nchar")):
                    assert {size(v) for v in values} == {limit}, (table.name, c.name)
    # the event's time is on the event's day, and every row's total has two decimals
    for event_date, event_time in zip(column("events", "event_date", rows), column("events", "event_time", rows)):
        assert isinstance(event_time, datetime) and event_time.date() == event_date
    assert all(t.as_tuple().exponent == -2 for t in column("orders", "total", rows))


def test_declared_unique_keys_are_unique(rows):
    for table in SPEC.tables:
        idx = [table.column_names.index(c) for c in table.unique]
        keys = [tuple(r[i] for i in idx) for r in rows[table.name]]
        assert len(set(keys)) == len(keys), table.name


def test_nulls_only_in_nullable_columns_and_in_each_of_them(rows):
    for table in SPEC.tables:
        for i, c in enumerate(table.columns):
            nulls = sum(r[i] is None for r in rows[table.name])
            if c.nullable:
                assert 0 < nulls < len(rows[table.name]), (table.name, c.name, nulls)
            else:
                assert nulls == 0, (table.name, c.name)


def test_the_data_meets_the_expectations_its_spec_declares(rows):
    for table in SPEC.tables:
        for e in table.expectations:
            values = [v for v in column(table.name, e.kwargs["column"], rows) if v is not None]
            if e.type == "expect_column_values_to_be_in_set":
                assert set(values) <= set(e.kwargs["value_set"]), (table.name, e)
                assert len(set(values)) > 1
            elif e.type == "expect_column_values_to_be_between":
                assert all(Decimal(str(e.kwargs["min_value"])) <= v <= Decimal(str(e.kwargs["max_value"]))
                           for v in values), (table.name, e)
            elif e.type == "expect_column_values_to_match_regex":
                assert all(re.search(e.kwargs["regex"], v) for v in values), (table.name, e)
            else:
                pytest.fail(f"no independent check for {e.type}")


def test_line_ends_and_compression_are_as_declared(batch, manifest):
    for entry in manifest["files"]:
        table = SPEC.table(entry["table"])
        path = batch / entry["file"]
        head = path.read_bytes()[:2]
        if path.name.endswith(".gz"):
            assert head == b"\x1f\x8b"
            assert path.read_bytes()[4:8] == bytes(4), "no time in the gzip header: same rows, same bytes"
            with gzip.open(path, "rb") as fh:  # the whole stream, its CRC and length checked
                fh.read()
        else:
            assert head != b"\x1f\x8b"
        text = raw_text(path)
        if table.format.line_end == "crlf":
            # Cut at CRLF outside quotes: one piece per record, header included, so no record
            # ends in a bare LF; quoted fields hold CRLF and bare LF alike.
            assert len(records_by_line_end(text, "\r\n")) == entry["rows"] + 1, entry["file"]
            assert text.endswith("\r\n")
        else:
            records = records_by_line_end(text, "\n")
            assert len(records) == entry["rows"] + 1, entry["file"]
            assert not any(r.endswith("\r") for r in records), entry["file"]


def test_the_messy_values_a_real_extract_holds_are_all_there(batch, manifest, rows):
    text = [v for t in SPEC.tables for r in rows[t.name] for v in r if isinstance(v, str)]

    def some(pred) -> bool:
        return any(pred(v) for v in text)

    assert some(lambda v: "," in v) and some(lambda v: '"' in v), "delimiter and quotes inside fields"
    assert some(lambda v: v == '"') and some(lambda v: v == '""') and some(lambda v: v == ",")
    assert some(lambda v: "\n" in v.replace("\r\n", "")), "a bare LF inside a field"
    assert any("\r\n" in v for v in column("customers", "notes", rows) if v), "CRLF inside a field of a CRLF file"
    assert any("\r\n" in v for v in column("orders", "gift_message", rows) if v), "CRLF inside a field of an LF file"
    # backslashes: what PostgreSQL's text format would take for escapes
    for exact in ("\\N", "C:\\new\\table\\N", "\\\\"):
        assert exact in text, exact
    assert some(lambda v: v.endswith("\\") and not v.endswith("\\\\")), "a trailing backslash"
    assert some(lambda v: "\\d" in v), "a regular expression"
    assert some(lambda v: v.startswith("{") and "\\\\" in v and '\\"' in v), "JSON with escapes"
    assert some(lambda v: "\r\n\\.\r\n" in v), "a line holding only \\. inside a field"
    assert some(lambda v: "\t" in v)
    # unicode
    assert some(lambda v: re.search("[\u4e00-\u9fff]", v)) and some(lambda v: re.search("[\uac00-\ud7af]", v))
    assert some(lambda v: any(ord(ch) >= 0x1F300 for ch in v)), "emoji"
    assert some(lambda v: any(unicodedata.combining(ch) for ch in v)), "combining characters"
    assert some(lambda v: "\u200d" in v) and some(lambda v: "\u2028" in v)
    assert some(lambda v: unicodedata.normalize("NFC", v) != v), "text that is not in NFC"
    # spaces, empty strings, NULL-looking text
    assert some(lambda v: v.strip() and v != v.strip()), "leading or trailing spaces"
    assert "   " in column("customers", "notes", rows)
    assert "" in column("customers", "full_name", rows), "an empty string in a NOT NULL column"
    assert "" in column("orders", "coupon_code", rows), "an empty string where the NULL marker is NA"
    assert "" in column("orders", "gift_message", rows)
    assert "NA" in column("orders", "ship_country", rows), "the NULL marker's text in a NOT NULL column"
    assert "NULL" in column("customers", "notes", rows) and "NULL" in column("events", "search_query", rows)
    assert "NA" in column("events", "search_query", rows), "NA is text where the marker is the empty field"
    assert "na" in column("orders", "coupon_code", rows) and "N/A" in column("orders", "coupon_code", rows)
    # the NULL marker's text, quoted, in a nullable column: a value, not NULL
    assert "NA" in column("orders", "coupon_code", rows) and None in column("orders", "coupon_code", rows)
    assert "" in column("customers", "email", rows) and None in column("customers", "email", rows)
    # a field exactly at its declared length, in multi-byte characters
    limit = declared_length(SPEC.table("orders").column("coupon_code").sql_type("postgres"))
    assert any(v is not None and len(v) == limit and not v.isascii() for v in column("orders", "coupon_code", rows))
    # the same NULL-marker text unquoted where a column is NOT NULL: read as text, not as NULL
    orders_text = "".join(raw_text(batch / e["file"]) for e in entries(manifest, "orders"))
    assert re.search(r"^\d+(,[^,\n]*){5},NA,", orders_text, re.M), "unquoted NA as ship_country"
    customers_text = "".join(raw_text(batch / e["file"]) for e in entries(manifest, "customers"))
    assert re.search(r"^\d+,[^,\n]*,,", customers_text, re.M), "an unquoted empty full_name"
    assert re.search(r'^\d+(,[^,\n]*){6},"NA",', orders_text, re.M), "a quoted NA as coupon_code"
    assert re.search(r'^\d+,"",', customers_text, re.M), "a quoted empty email"
    # and quoted fields that need no quotes (an exporter that quotes everything, some rows)
    assert re.search(r'^\d+,"\d{4}-\d\d-\d\d",', orders_text, re.M)


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_one_seed_gives_the_same_bytes_and_the_same_rows_at_any_stream_count(batch, rows, tmp_path):
    again = tmp_path / "again"
    generate_shop(again, SPEC, SCALE, STREAMS)
    assert _digests(again) == _digests(batch)

    other_seed = tmp_path / "seed2"
    generate_shop(other_seed, SPEC, SCALE, STREAMS, seed=2)
    assert _digests(other_seed) != _digests(batch)

    two = tmp_path / "two-streams"
    manifest = generate_shop(two, SPEC, SCALE, 2)
    for table in SPEC.tables:
        files = [e.file for e in manifest.entries if e.table == table.name]
        assert list(table_rows(two, table, files)) == rows[table.name], table.name


def test_a_generation_that_fails_leaves_no_manifest(batch, tmp_path):
    folder = tmp_path / "broken"
    generate_shop(folder, SPEC, SCALE, STREAMS)
    assert (folder / "manifest.json").exists()
    (folder / "events" / "events.2.csv").unlink()
    (folder / "events" / "events.2.csv").mkdir()  # the next generation cannot write this file
    with pytest.raises(IsADirectoryError):
        generate_shop(folder, SPEC, SCALE, STREAMS)
    assert not (folder / "manifest.json").exists(), "a half-written batch must not look complete"


def test_the_generator_is_chosen_by_the_spec(tmp_path):
    manifest = generate(tmp_path / "b", SPEC, SCALE, 2, tables=["customers"])
    assert {e.table for e in manifest.entries} == {"customers"}
    with pytest.raises(ValueError, match="no seed"):
        generate(tmp_path / "t", load_spec("tpch"), 0.01, 2, seed=3)


def test_generate_command_writes_a_shop_batch(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "plugins"), SWITCHYARD_DATA_ROOT=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "switchyard", "generate", "--spec", "shop", "--scale", "0.001",
                           "--streams", "2", "--seed", "5"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "shop-sf0.001-s2"
    raw = json.loads((folder / "manifest.json").read_text())
    assert raw["spec"] == "shop" and len(raw["files"]) == 6
    assert f"{sum(e['rows'] for e in raw['files']):,} rows" in done.stdout
    assert _digests(folder) == _digests(_generated(tmp_path / "same", 5))

    bad = subprocess.run([sys.executable, "-m", "switchyard", "generate", "--spec", "shop", "--streams", "400"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "at most 365 streams" in bad.stderr


def _generated(folder: Path, seed: int) -> Path:
    generate_shop(folder, SPEC, 0.001, 2, seed=seed)
    return folder


def test_with_nulls_reads_the_marker_only_unquoted_in_nullable_columns():
    orders = SPEC.table("orders")
    record = split_fields('1,2025-01-01,2,paid,1.00,EUR,NA,NA,,"NA"', ",")
    assert with_nulls(orders, record) == ["1", "2025-01-01", "2", "paid", "1.00", "EUR", "NA", None, "", "NA"]
    assert [f.quoted for f in split_fields('"a ""b"", c",,"",x,', ",")] == [True, False, True, False, False]
    assert split_fields('"a ""b"", c",,"",x,', ",") == ['a "b", c', "", "", "x", ""]


def test_the_spec_takes_sql_server_types_with_digits_and_still_refuses_free_text():
    from switchyard.core.spec import SpecError, parse_spec
    assert SPEC.table("events").column("event_time").sql_type("mssql") == "datetime2(3)"
    for bad in ("datetime2(3); DROP TABLE x", "varchar(10)--", "2varchar"):
        raw = {"name": "s", "tables": {"t": {"key": "k", "columns": [
            {"name": "k", "type": "bigint"}, {"name": "v", "type": {"postgres": "text", "mssql": bad}}]}}}
        with pytest.raises(SpecError, match="not an accepted SQL type"):
            parse_spec(raw)
    # YAML's flow mapping cuts an unquoted type at its comma: the message says so.
    import yaml
    cut = yaml.safe_load('{name: s, tables: {t: {key: k, columns: [{name: k, type: bigint}, '
                         '{name: v, type: numeric(10,3)}]}}}')
    with pytest.raises(SpecError, match=r"'numeric\(10' is not an accepted SQL type; in YAML's `\{...\}` a comma "
                                        r"ends the value: quote the type"):
        parse_spec(cut)
    # An unbounded length: the message says what is accepted instead.
    raw = {"name": "s", "tables": {"t": {"key": "k", "columns": [
        {"name": "k", "type": "bigint"}, {"name": "v", "type": {"postgres": "text", "mssql": "nvarchar(max)"}}]}}}
    with pytest.raises(SpecError, match=r"'nvarchar\(max\)' is not an accepted SQL type; a length of `max` is not "
                                        r"accepted: give the longest value's length \(on SQL Server nvarchar\(n\) "
                                        r"takes n up to 4000"):
        parse_spec(raw)


def test_the_shop_spec_renders_as_its_own_dag():
    from switchyard.airflow.dag_factory import DagConfig, build_dag
    dag = build_dag(DagConfig(spec="shop", dag_id="switchyard_shop", schema="shop", streams=STREAMS, schedule=None))
    assert dag.dag_id == "switchyard_shop"
    groups = {t.task_id.split(".")[0] for t in dag.tasks if t.task_id.endswith(".load")}
    assert groups == {f"{t.name}_{k}" for t in SPEC.tables for k in range(1, STREAMS + 1)}
    assert set(dag.params["tables"]) == {"customers", "orders", "events"}
