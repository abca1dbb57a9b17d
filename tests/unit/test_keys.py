"""Date and timestamp partition keys without a database: strict ISO-8601 values in the manifest,
streams ordered and bounded by them, partition names, typed SQL literals, JSON plans."""
from __future__ import annotations

import json
from datetime import date, datetime

import pytest

from switchyard.core import keys
from switchyard.core.batch import BatchError, MANIFEST_FORMAT, parse_manifest
from switchyard.core.planner import PlanError, StreamPlan, _table_plan, plan_batch
from switchyard.core.spec import SpecError, parse_spec
from switchyard.targets.base import TargetError
from switchyard.targets.postgres import PostgresAdapter

SPEC = parse_spec({
    "name": "events",
    "files": "{table}/{table}.{stream}.txt",
    "format": {"trailing_delimiter": False},
    "tables": {
        "events": {"key": "event_day", "unique": ["event_day", "event_id"], "columns": [
            {"name": "event_day", "type": "date"}, {"name": "event_id", "type": "bigint"}]},
        "readings": {"key": "read_at", "unique": True, "columns": [
            {"name": "read_at", "type": {"postgres": "timestamp", "mssql": "datetime2(6)"}},
            {"name": "value", "type": "integer"}]},
        "coarse": {"key": "at", "columns": [
            {"name": "at", "type": {"postgres": "timestamp(0)", "mssql": "datetime2(0)"}}]},
    },
}, source="events.yaml")


def manifest(entries: list[dict], streams: int = 2) -> dict:
    return {"format": MANIFEST_FORMAT, "spec": "events", "streams": streams,
            "files": [{"file": f"{e['table']}/{e['table']}.{e['stream']}.txt", "bytes": 1, "rows": 1, **e}
                      for e in entries]}


@pytest.mark.parametrize("kind,raw,parsed", [
    ("integer", 42, 42),
    ("date", "2026-01-31", date(2026, 1, 31)),
    ("timestamp", "2026-01-31T23:59:59", datetime(2026, 1, 31, 23, 59, 59)),
    ("timestamp", "2026-01-31 23:59:59.5", datetime(2026, 1, 31, 23, 59, 59, 500000)),
    ("timestamp", "2026-01-31T23:59:59.999999", datetime(2026, 1, 31, 23, 59, 59, 999999)),
])
def test_iso_values_parse_strictly_and_write_back_the_same(kind, raw, parsed):
    assert keys.parse_key(kind, raw) == parsed
    assert keys.parse_key(kind, keys.to_json(parsed)) == parsed


@pytest.mark.parametrize("kind,raw,said", [
    ("date", "2026-02-30", "not a valid date"),
    ("date", "2026-1-31", "not an ISO-8601 date"),
    ("date", "20260131", "not an ISO-8601 date"),
    ("date", "2026-01-31T00:00:00", "not an ISO-8601 date"),
    ("date", 20260131, "expected an ISO-8601 date string"),
    ("timestamp", "2026-01-31", "not an ISO-8601 timestamp"),
    ("timestamp", "2026-01-31T24:00:00", "not a valid timestamp"),
    ("timestamp", "2026-01-31T23:59:59Z", "time zone"),
    ("timestamp", "2026-01-31T23:59:59+02:00", "time zone"),
    ("timestamp", "2026-01-31T23:59:59.1234567", "not an ISO-8601 timestamp"),
    ("integer", "42", "expected an integer"),
    ("integer", True, "expected an integer"),
])
def test_bad_values_are_refused_with_what_was_expected(kind, raw, said):
    with pytest.raises(keys.KeyValueError, match=said):
        keys.parse_key(kind, raw)


def test_a_bad_timestamp_is_told_the_form_files_most_often_have_with_the_space_allowed():
    with pytest.raises(keys.KeyValueError) as err:
        keys.parse_key("timestamp", "yesterday 04:12:45")
    assert "(YYYY-MM-DD HH:MM:SS[.ffffff], a T or a space between date and time)" in str(err.value)
    assert keys.parse_key("timestamp", "2026-01-01 04:12:45") == keys.parse_key("timestamp", "2026-01-01T04:12:45")


def test_a_bad_iso_value_in_a_manifest_names_the_file_and_the_entry():
    raw = manifest([{"table": "events", "stream": 1, "key_min": "2026-01-01", "key_max": "2026-01-31"},
                    {"table": "events", "stream": 2, "key_min": "2026-02-01", "key_max": "2026-02-30"}])
    with pytest.raises(BatchError) as err:
        parse_manifest(raw, "/data/b1/manifest.json", SPEC)
    said = str(err.value)
    assert said.startswith("/data/b1/manifest.json: files[1].key_max (events stream 2): ")
    assert "'2026-02-30' is not a valid date" in said
    raw = manifest([{"table": "readings", "stream": 1, "key_min": "2026-01-01T00:00:00+01:00",
                     "key_max": "2026-01-01T10:00:00"}])
    with pytest.raises(BatchError, match=r"manifest.json: files\[0\].key_min \(readings stream 1\): .*time zone"):
        parse_manifest(raw, "/data/b1/manifest.json", SPEC)
    # An integer key keeps its rule: a JSON number.
    tpch = parse_spec({"name": "t", "tables": {"o": {"key": "k", "columns": [{"name": "k", "type": "bigint"}]}}})
    with pytest.raises(BatchError, match=r"m.json: files\[0\].key_min \(o stream 1\): expected an integer, found '7'"):
        parse_manifest({"format": MANIFEST_FORMAT, "streams": 1, "files": [
            {"table": "o", "stream": 1, "file": "o/o.1.tbl", "bytes": 1, "rows": 1, "key_min": "7", "key_max": 9}]},
            "m.json", tpch)


def test_date_and_timestamp_streams_are_ordered_bounded_and_named():
    raw = manifest([
        {"table": "events", "stream": 2, "key_min": "2026-02-01", "key_max": "2026-02-28"},
        {"table": "events", "stream": 1, "key_min": "2026-01-01", "key_max": "2026-01-31"},
        {"table": "readings", "stream": 1, "key_min": "2026-01-01T00:00:00", "key_max": "2026-01-01T11:59:59.999999"},
        {"table": "readings", "stream": 2, "key_min": "2026-01-01 12:00:00", "key_max": "2026-01-01T23:59:59"},
        {"table": "coarse", "stream": 1, "key_min": None, "key_max": None, "rows": 0},
        {"table": "coarse", "stream": 2, "key_min": None, "key_max": None, "rows": 0},
    ])
    plan = plan_batch(SPEC, parse_manifest(raw, "m.json", SPEC))
    events = plan.table("events").streams
    assert [(s.stream, s.lower, s.upper, s.partition_number) for s in events] == [
        (1, "2026-01-01", "2026-01-31", 1), (2, "2026-02-01", "2026-02-28", 2)]
    assert [s.partition_table for s in events] == ["events_20260101_20260131", "events_20260201_20260228"]
    assert events[0].key_kind == "date" and events[0].typed("upper") == date(2026, 1, 31)
    readings = plan.table("readings").streams
    assert [(s.lower, s.upper) for s in readings] == [
        ("2026-01-01T00:00:00", "2026-01-01T11:59:59.999999"), ("2026-01-01T12:00:00", "2026-01-01T23:59:59")]
    assert [s.partition_table for s in readings] == ["readings_20260101000000_20260101115959999999",
                                                     "readings_20260101120000_20260101235959"]
    assert plan.table("events").boundaries == ["2026-01-31", "2026-02-28"]
    # The plan travels through XCom as JSON and comes back the same.
    back = json.loads(json.dumps(plan.to_dict()))
    for s in plan.all_streams():
        assert StreamPlan(**back["groups"][s.group_id]) == s


def test_overlapping_or_reversed_date_ranges_are_refused():
    table = SPEC.table("events")
    d = date.fromisoformat
    with pytest.raises(PlanError, match="stream 2: keys start at 2026-01-31, not above the previous stream's "
                                        "last key 2026-01-31"):
        _table_plan(SPEC, table, {1: (d("2026-01-01"), d("2026-01-31"), 1), 2: (d("2026-01-31"), d("2026-02-28"), 1)})
    with pytest.raises(PlanError, match=r"key range 2026-02-01..2026-01-01 is empty or reversed"):
        _table_plan(SPEC, table, {1: (d("2026-02-01"), d("2026-01-01"), 1)})
    with pytest.raises(PlanError, match=r"key 5 is not of the key's kind \(date\)"):
        _table_plan(SPEC, table, {1: (5, 9, 1)})


def test_postgres_renders_typed_literals_from_parsed_values_only():
    raw = manifest([
        {"table": "events", "stream": 1, "key_min": "2026-01-01", "key_max": "2026-01-31"},
        {"table": "readings", "stream": 1, "key_min": "2026-01-01T00:00:00", "key_max": "2026-01-01T11:59:59.999999"},
        {"table": "coarse", "stream": 1, "key_min": "2026-01-01T00:00:00", "key_max": "2026-01-01T23:59:59"},
        {"table": "coarse", "stream": 2, "key_min": "2026-01-02T00:00:00", "key_max": "2026-01-02T23:59:59.5"},
    ], streams=2)
    raw["files"] = [f for f in raw["files"]] + [
        {"table": t, "stream": 2, "file": f"{t}/{t}.2.txt", "bytes": 0, "rows": 0, "key_min": None, "key_max": None}
        for t in ("events", "readings")]
    plan = plan_batch(SPEC, parse_manifest(raw, "m.json", SPEC))
    pg = PostgresAdapter(SPEC, uri="postgresql://unused")
    check = " ".join(pg.prepare_sql(plan.stream("events", 1)))
    assert "CHECK (\"event_day\" IS NOT NULL AND \"event_day\" >= DATE '2026-01-01' AND \"event_day\" < DATE '2026-02-01')" in check
    attach = pg.switch_sql(plan.stream("events", 1), replace_existing=False)[-1]
    assert attach.endswith("FOR VALUES FROM (DATE '2026-01-01') TO (DATE '2026-02-01')")
    attach = pg.switch_sql(plan.stream("readings", 1), replace_existing=False)[-1]
    assert attach.endswith("FOR VALUES FROM (TIMESTAMP '2026-01-01 00:00:00.000000') "
                           "TO (TIMESTAMP '2026-01-01 12:00:00.000000')")
    # timestamp(0): one unit is a second, so the bound stays exact in the column's type...
    attach = pg.switch_sql(plan.stream("coarse", 1), replace_existing=False)[-1]
    assert attach.endswith("TO (TIMESTAMP '2026-01-02 00:00:00.000000')")
    # ...and a bound finer than the column keeps is refused, not rounded.
    with pytest.raises(TargetError, match="more fractional digits than a timestamp\\(0\\) column keeps"):
        pg.prepare_sql(plan.stream("coarse", 2))
    # Text never becomes a literal, however date-like.
    for text in ("2026-01-01", "1); DROP TABLE x; --"):
        with pytest.raises(TargetError, match="not an integer, date or timestamp"):
            pg.lit(text)
    assert pg.lit(7) == "7" and pg.lit(date(2026, 1, 2)) == "DATE '2026-01-02'"


def test_a_key_of_two_kinds_across_targets_is_refused():
    with pytest.raises(SpecError, match="different kind on each target"):
        parse_spec({"name": "x", "tables": {"t": {"key": "k", "columns": [
            {"name": "k", "type": {"postgres": "date", "mssql": "datetime2"}}]}}})


def test_partition_names_stay_valid_identifiers():
    long = "t" * 40
    name = keys.partition_name(long, datetime(2026, 1, 1), datetime(2026, 1, 31, 23, 59, 59, 999999))
    assert len(name) <= 63 and name.startswith(long + "_")
    assert keys.partition_name("orders", 1, 20000) == "orders_1_20000"
    assert keys.partition_name("t", -5, 10) == "t_m5_10"


@pytest.mark.parametrize("sql_type,largest,end", [
    ("smallint", 2**15 - 1, "MAXVALUE"), ("int", 2**31 - 1, "MAXVALUE"), ("integer", 2**31 - 1, "MAXVALUE"),
    ("bigint", 2**63 - 1, "MAXVALUE"),
    ("tinyint", 255, "256"),  # a smallint on PostgreSQL, where 256 is a value
])
def test_a_range_ending_at_the_integer_types_largest_key_ends_at_maxvalue_on_postgres(sql_type, largest, end):
    spec = parse_spec({"name": "ids", "files": "{table}.{stream}.txt", "tables": {"ids": {"key": "id", "columns": [
        {"name": "id", "type": sql_type}, {"name": "v", "type": "text"}]}}}, source="ids.yaml")
    raw = {"format": MANIFEST_FORMAT, "spec": "ids", "streams": 2, "files": [
        {"table": "ids", "stream": 1, "file": "ids.1.txt", "bytes": 1, "rows": 2, "key_min": 1, "key_max": 9},
        {"table": "ids", "stream": 2, "file": "ids.2.txt", "bytes": 1, "rows": 2, "key_min": largest - 5,
         "key_max": largest}]}
    plan = plan_batch(spec, parse_manifest(raw, "m.json", spec))
    pg = PostgresAdapter(spec, uri="postgresql://unused")
    # One past the largest is no value of the type (the server's "integer out of range"): MAXVALUE
    # holds the same keys...
    assert pg.switch_sql(plan.stream("ids", 2), replace_existing=False)[-1].endswith(
        f"FOR VALUES FROM ({largest - 5}) TO ({end})")
    # ...while a range below it keeps its literal end, and the staging CHECK its comparison
    # (an integer compared with a wider integer's literal is exact).
    assert pg.switch_sql(plan.stream("ids", 1), replace_existing=False)[-1].endswith("FOR VALUES FROM (1) TO (10)")
    assert f'"id" < {largest + 1})' in " ".join(pg.prepare_sql(plan.stream("ids", 2)))
    assert keys.past_the_type(largest + 1, sql_type) and not keys.past_the_type(largest, sql_type)
    assert keys.past_the_type(2**31, "int4") and not keys.past_the_type(2**31, "bigint")


@pytest.mark.parametrize("table,key_max", [("events", "9999-12-31"), ("readings", "9999-12-31T00:00:00")])
def test_a_date_key_on_9999_12_31_is_refused_at_the_plan_naming_the_file(table, key_max):
    raw = manifest([
        {"table": "events", "stream": 1, "key_min": "2026-01-01", "key_max": "2026-01-31"},
        {"table": "readings", "stream": 1, "key_min": "2026-01-01T00:00:00", "key_max": "2026-01-01T23:59:59"},
        {"table": "coarse", "stream": 1, "key_min": None, "key_max": None, "rows": 0},
    ], streams=1)
    for entry in raw["files"]:
        if entry["table"] == table:
            entry["key_max"] = key_max
    with pytest.raises(PlanError, match=rf"{table} stream 1 \({table}/{table}.1.txt\): key {key_max} is on the "
                                        rf"last day a key holds here \(9999-12-31\)"):
        plan_batch(SPEC, parse_manifest(raw, "m.json", SPEC))
    with pytest.raises(keys.KeyValueError, match="no day comes after it"):
        keys.after(date(9999, 12, 31))
