"""Partition keys on SQL Server, type by type, without a server.

Each key type is modelled here by its own ticks, independently of the adapter's code: an
integer's 1, date's day, smalldatetime's minute, datetime's 1/300 s, datetime2(p)'s
10^(7-p) x 100 ns. Random rows are cut into streams at random places (neighbouring streams
often one tick apart, as day- and hour-split extracts are), the adapter writes the partition
function and each staging table's CHECK, and the T-SQL it wrote is read back into ticks:

* no two streams share a partition;
* every row's key lies within its stream's CHECK;
* the RANGE LEFT boundaries match the CHECKs exactly: a stream's partition is (the boundary
  below, its boundary], and that is [its CHECK's lower end, its CHECK's upper end].

The plan of a spec with datetime and datetime2(7) keys is also rendered by
`switchyard plan --target mssql --spec ... --batch ...`, day-split and hour-split, and kept
in a golden file.
"""
from __future__ import annotations

import json
import random
import re
import zlib
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from switchyard.core.batch import MANIFEST_FORMAT
from switchyard.core.planner import LoadPlan, PlanError, _table_plan
from switchyard.core.spec import parse_spec
from switchyard.targets import TargetError
from switchyard.targets.mssql import MssqlAdapter
from switchyard.targets.mssql.keys import key_type
from test_mssql_tsql import check_golden, sqlfluff_parses

EPOCH = datetime(2000, 1, 1)
# Each type's tick in 100 ns units (None: not a time type).
TICK_100NS = {"date": 864_000_000_000, "smalldatetime": 600_000_000, "datetime": None,
              "datetime2(0)": 10_000_000, "datetime2(3)": 10_000, "datetime2(6)": 10, "datetime2(7)": 1}
PG_TYPE = {"tinyint": "smallint", "date": "date", "smalldatetime": "timestamp(0)", "datetime": "timestamp(3)",
           "datetime2(0)": "timestamp(0)", "datetime2(3)": "timestamp(3)", "datetime2(6)": "timestamp",
           "datetime2(7)": "timestamp"}
TYPES = ["tinyint", "smallint", "int", "bigint", "date", "smalldatetime", "datetime", "datetime2(0)",
         "datetime2(3)", "datetime2(6)", "datetime2(7)"]


def spec_for(sql_type: str):
    return parse_spec({"name": "keys", "files": "{table}/{table}.{stream}.txt", "tables": {"t": {
        "key": "k", "columns": [{"name": "k", "type": {"postgres": PG_TYPE.get(sql_type, sql_type), "mssql": sql_type}},
                                {"name": "v", "type": "integer"}]}}}, source="keys.yaml")


# --- the independent model: ticks <-> values and the text the adapter writes ---------------------
def to_value(sql_type: str, tick: int):
    """A tick as the Python value a manifest holds (datetime2(7): its microsecond, the value a
    producer's six-digit timestamp text gives)."""
    if sql_type in ("tinyint", "smallint", "int", "bigint"):
        return tick
    if sql_type == "date":
        return date(2000, 1, 1) + timedelta(days=tick)
    if sql_type == "datetime":
        ms = (tick // 3) * 10 + (0, 3, 7)[tick % 3]
        return EPOCH + timedelta(milliseconds=ms)
    return EPOCH + timedelta(microseconds=tick * TICK_100NS[sql_type] // 10)


def literal_ticks(sql_type: str, literal: str) -> int:
    """A literal the adapter wrote, read back into ticks without the adapter's code."""
    if sql_type in ("tinyint", "smallint", "int", "bigint"):
        return int(literal)
    m = re.fullmatch(r"CONVERT\((\w+(?:\(\d\))?), '([^']+)', (\d+)\)", literal)
    if m:
        declared, text, style = m.groups()
    else:
        # A boundary value: ISO 8601 text the function's parameter type converts.
        b = re.fullmatch(r"'([^']+)'", literal)
        assert b, literal
        declared, text, style = sql_type, b.group(1), "23" if sql_type == "date" else "126"
    if sql_type == "date":
        assert (declared, style) == ("date", "23"), literal
        return (date.fromisoformat(text) - date(2000, 1, 1)).days
    assert style == "126" and declared == sql_type, literal
    t = re.fullmatch(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?", text)
    assert t, literal
    whole = datetime(*map(int, t.groups()[:6]))
    fraction = t.group(7) or ""
    seconds = int((whole - EPOCH).total_seconds())
    if sql_type == "datetime":
        assert len(fraction) == 3 and fraction[2] in "037", literal
        ms = int(fraction)
        return seconds * 300 + (ms // 10) * 3 + {"0": 0, "3": 1, "7": 2}[fraction[2]]
    if sql_type == "smalldatetime":
        assert not fraction and seconds % 60 == 0, literal
        return seconds // 60
    digits = int(sql_type[-2])
    assert len(fraction) == digits, literal
    per_second = 10 ** digits
    return seconds * per_second + (int(fraction) if fraction else 0)


def cuts(rng: random.Random, rows: list[int], n: int) -> list[list[int]]:
    """`rows` (sorted ticks) cut into n non-empty contiguous streams at random places."""
    places = sorted(rng.sample(range(1, len(rows)), n - 1))
    return [rows[a:b] for a, b in zip([0, *places], [*places, len(rows)])]


def random_rows(rng: random.Random, sql_type: str) -> list[int]:
    """Sorted distinct ticks: dense (neighbours one tick apart, as day- and hour-split extracts
    meet) or sparse, away from the type's limits."""
    start = {"tinyint": 1, "smallint": -30_000, "int": -2 ** 31 + 1, "bigint": 2 ** 62}.get(sql_type, 10 ** 5)
    span = 200 if sql_type == "tinyint" else 5_000
    if rng.random() < 0.5:
        first = start + rng.randrange(20)
        return list(range(first, first + rng.randint(12, min(span, 60))))
    return sorted(rng.sample(range(start, start + span), rng.randint(12, 50)))


def microsecond(sql_type: str, tick: int) -> int:
    return tick // 10 if sql_type == "datetime2(7)" else tick


@pytest.mark.parametrize("sql_type", TYPES)
def test_random_stream_cuts_give_each_stream_exactly_its_partition(sql_type):
    spec = spec_for(sql_type)
    a = MssqlAdapter(spec)
    rng = random.Random(zlib.crc32(sql_type.encode()))
    planned = 0
    for _ in range(40):
        rows = random_rows(rng, sql_type)
        streams = cuts(rng, rows, rng.randint(2, min(8, len(rows) - 1)))
        ranges = {k: (to_value(sql_type, s[0]), to_value(sql_type, s[-1]), len(s))
                  for k, s in enumerate(streams, start=1)}
        if sql_type == "datetime2(7)" and any(microsecond(sql_type, p[-1]) == microsecond(sql_type, n[0])
                                              for p, n in zip(streams, streams[1:])):
            # Two streams meeting inside one microsecond: the planner refuses them, by name.
            with pytest.raises(PlanError, match="not above the previous stream's last key"):
                _table_plan(spec, spec.table("t"), ranges)
            continue
        table_plan = _table_plan(spec, spec.table("t"), ranges)
        plan = LoadPlan(spec=spec, streams=len(streams), tables=(table_plan,))
        setup = "\n".join(a.setup_sql(plan))
        m = re.search(r"AS RANGE LEFT FOR VALUES \((.*)\)\s*\n", setup)
        assert m, setup
        boundaries = [literal_ticks(sql_type, x) for x in re.findall(r"'[^']*'|-?\d+", m.group(1))]
        assert boundaries == sorted(set(boundaries)), "boundaries in order, each once"
        partitions = []
        for s, ticks in zip(table_plan.streams, streams):
            check = a.prepare_sql(s)[-1]
            c = re.search(r"CHECK \(\[k\] IS NOT NULL AND \[k\] >= (.+) AND \[k\] <= (.+)\);?$", check)
            assert c, check
            lo, hi = literal_ticks(sql_type, c.group(1)), literal_ticks(sql_type, c.group(2))
            assert all(lo <= t <= hi for t in ticks), (sql_type, lo, hi, ticks)
            # Its partition: (the boundary below, its own boundary], exactly [lo, hi].
            assert hi in boundaries, (sql_type, hi, boundaries)
            below = boundaries[boundaries.index(hi) - 1]
            assert boundaries.index(hi) > 0 and below == lo - 1, (sql_type, below, lo)
            partitions.append(boundaries.index(hi))
        assert len(set(partitions)) == len(partitions), "no two streams share a partition"
        # The table's commit into the new table goes through (no stream refused its partition).
        assert a.commit_sql(table_plan)
        planned += 1
    assert planned >= 20


def test_datetime_steps_are_its_ticks():
    key = key_type("datetime")
    assert key.after("2026-01-01T23:59:59.997") == datetime(2026, 1, 2)
    assert key.before("2026-01-02T00:00:00") == datetime(2026, 1, 1, 23, 59, 59, 997000)
    assert [key.text(v) for v in (key.after("2026-01-01T00:00:00"), key.after("2026-01-01T00:00:00.003"))] == [
        "2026-01-01T00:00:00.003", "2026-01-01T00:00:00.007"]
    assert key.text(key.before("2026-01-01T00:00:00.007")) == "2026-01-01T00:00:00.003"
    with pytest.raises(TargetError, match="1/300 s ticks"):
        key.literal("2026-01-01T23:59:59.998")


def test_datetime2_7_keeps_its_seventh_digit():
    key = key_type("datetime2(7)")
    # A bound is its whole microsecond: a CHECK from its first 100 ns to its last.
    assert key.literal("2026-01-01T23:59:59.999999") == "CONVERT(datetime2(7), '2026-01-01T23:59:59.9999999', 126)"
    assert key.literal("2026-01-02T00:00:00", start=True) == "CONVERT(datetime2(7), '2026-01-02T00:00:00.0000000', 126)"
    # Seven digits of text are read as their microsecond, never shifted below the real value.
    assert key.literal("2026-01-01T23:59:59.9999999") == "CONVERT(datetime2(7), '2026-01-01T23:59:59.9999999', 126)"
    assert key.before("2026-01-02T00:00:00") == datetime(2026, 1, 1, 23, 59, 59, 999999)
    assert key_type("datetime2").declared == "datetime2(7)"
    with pytest.raises(TargetError, match="more fractional digits"):
        key_type("datetime2(6)").literal("2026-01-01T00:00:00.0000001")


@pytest.mark.parametrize("sql_type, edge", [("tinyint", 0), ("smallint", -2 ** 15), ("date", "0001-01-01"),
                                            ("datetime", "1753-01-01T00:00:00"),
                                            ("smalldatetime", "1900-01-01T00:00:00")])
def test_a_stream_at_the_types_limit_is_refused_by_name(sql_type, edge):
    with pytest.raises(TargetError, match="smallest value of"):
        key_type(sql_type).before(edge)


def test_out_of_range_bounds_are_refused():
    with pytest.raises(TargetError, match="outside the range of tinyint"):
        key_type("tinyint").literal(256)
    with pytest.raises(TargetError, match="outside the range of smalldatetime"):
        key_type("smalldatetime").literal("2079-06-07T00:00:00")


# --- switchyard plan with datetime and datetime2(7) keys ------------------------------------------
SPEC_YAML = """\
name: clicks
files: "{table}/{table}.{stream}.txt"
publish: table
format: {trailing_delimiter: false}
tables:
  daily:
    key: at
    columns:
      - {name: at, type: {postgres: "timestamp(3)", mssql: datetime}}
      - {name: n, type: integer}
  hourly:
    key: at
    columns:
      - {name: at, type: {postgres: timestamp, mssql: "datetime2(7)"}}
      - {name: n, type: integer}
"""


def write_batch(folder: Path) -> None:
    """Two day-split streams of `daily` (datetime) and three hour-split streams of `hourly`
    (datetime2(7)), each ending at the last value its type holds before the next one starts."""
    entries = []
    for k in (1, 2):
        day = f"2026-03-0{k}"
        entries.append({"table": "daily", "stream": k, "key_min": f"{day}T00:00:00",
                        "key_max": f"{day}T23:59:59.997"})
    for k in (1, 2, 3):
        hour = f"{k - 1:02d}"
        entries.append({"table": "hourly", "stream": k, "key_min": f"2026-03-01T{hour}:00:00",
                        "key_max": f"2026-03-01T{hour}:59:59.999999"})
    manifest = {"format": MANIFEST_FORMAT, "spec": "clicks", "streams": 3,
                "files": [{"file": f"{e['table']}/{e['table']}.{e['stream']}.txt", "bytes": 1000, "rows": 10, **e}
                          for e in entries]}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))


def test_plan_with_datetime_and_datetime2_7_keys_is_exact_day_and_hour_split(tmp_path):
    from test_mssql_cli import switchyard
    spec = tmp_path / "clicks.yaml"
    spec.write_text(SPEC_YAML)
    write_batch(tmp_path / "b1")
    run = switchyard("plan", "--target", "mssql", "--spec", str(spec), "--batch", str(tmp_path / "b1"),
                     env={"SWITCHYARD_DATA_ROOT": "/srv/switchyard/data"})
    assert run.returncode == 0, run.stderr
    text = run.stdout
    assert "Traceback" not in run.stderr
    # datetime, day-split: stream 2 starts at .000 right after stream 1's .997; nothing between.
    assert ("(datetime) AS RANGE LEFT FOR VALUES ('2026-02-28T23:59:59.997', '2026-03-01T23:59:59.997', "
            "'2026-03-02T23:59:59.997')" in text)
    assert ("CHECK ([at] IS NOT NULL AND [at] >= CONVERT(datetime, '2026-03-02T00:00:00.000', 126) AND "
            "[at] <= CONVERT(datetime, '2026-03-02T23:59:59.997', 126))" in text)
    # datetime2(7), hour-split: each hour to its last 100 ns.
    assert ("(datetime2(7)) AS RANGE LEFT FOR VALUES ('2026-02-28T23:59:59.9999999', '2026-03-01T00:59:59.9999999', "
            "'2026-03-01T01:59:59.9999999', '2026-03-01T02:59:59.9999999')" in text)
    assert ("CHECK ([at] IS NOT NULL AND [at] >= CONVERT(datetime2(7), '2026-03-01T01:00:00.0000000', 126) AND "
            "[at] <= CONVERT(datetime2(7), '2026-03-01T01:59:59.9999999', 126))" in text)
    # The batch is the folder's (its name: it is not under the data root), in the files' paths
    # and in the control rows.
    assert "FROM '/srv/switchyard/data/b1/" in text and "N'b1'" in text and "N'batch'" not in text
    check_golden("clicks_datetime_keys_plan.sql", text)


def test_plan_names_a_bound_the_key_type_does_not_hold_without_a_traceback(tmp_path):
    from test_mssql_cli import switchyard
    spec = tmp_path / "clicks.yaml"
    spec.write_text(SPEC_YAML)
    write_batch(tmp_path / "b1")
    manifest = json.loads((tmp_path / "b1" / "manifest.json").read_text())
    manifest["files"][0]["key_max"] = "2026-03-01T23:59:59.999"
    (tmp_path / "b1" / "manifest.json").write_text(json.dumps(manifest))
    run = switchyard("plan", "--target", "mssql", "--spec", str(spec), "--batch", str(tmp_path / "b1"),
                     "--tables", "daily")
    assert run.returncode != 0
    assert "Traceback" not in run.stderr
    assert "plan: '2026-03-01T23:59:59.999000'" in run.stderr or "1/300 s ticks" in run.stderr, run.stderr


def test_typed_key_literals_parse_as_tsql():
    from test_mssql_tsql import sqlfluff_parses
    text = (Path(__file__).resolve().parents[3] / "golden" / "mssql" / "clicks_datetime_keys_plan.sql").read_text()
    statements = [s.strip() for s in text.split("\nGO\n") if "CONVERT(datetime" in s or "AS RANGE LEFT" in s]
    assert len(statements) >= 8
    failed = [s for s in statements if not sqlfluff_parses(re.sub(r"PARTITION @partition\b", "PARTITION 2", s))]
    assert not failed, "not T-SQL by sqlfluff:\n\n" + "\n\n".join(failed)


# --- an existing datetime2(7) function, read from the catalog ---------------------------------------
# SCRIPTED CATALOG ANSWERS: catalog_table.sql's row for `hourly` on a datetime2 function of the
# given scale, and catalog_boundaries.sql's rows as the server's style-126 text.
def hourly_target(boundaries, scale=7):
    from switchyard.targets.mssql.catalog import target_from_catalog
    key = key_type("datetime2(7)")
    return key, target_from_catalog(
        key, [("PS", "ps_clicks_hourly", 7, "pf_clicks_hourly", 0, len(boundaries) + 1, "datetime2", 8, 27, scale,
               "at")], [(i + 1, b) for i, b in enumerate(boundaries)],
        column_rows=[("at", "datetime2", 8, 27, 7, 0, None), ("n", "int", 4, 10, 0, 0, None)])


def hourly_problems(boundaries, scale=7):
    from switchyard.targets.mssql.catalog import shape_problems
    key, target = hourly_target(boundaries, scale)
    spec = parse_spec(yaml.safe_load(SPEC_YAML))
    return shape_problems(target, "clicks.hourly", spec.table("hourly"), key, "datetime2(7)")


def test_a_datetime2_7_function_is_read_with_all_seven_digits():
    spec_file = parse_spec(yaml.safe_load(SPEC_YAML))
    a = MssqlAdapter(spec_file, schema="clicks")
    boundaries_sql = a.catalog_sql("hourly")["boundaries"]
    assert "CONVERT(nvarchar(33), CONVERT(datetime2(7), rv.[value]), 126)" in boundaries_sql
    # datetime keeps its milliseconds in a client value: read as the value itself.
    assert "CONVERT(datetime, rv.[value]) AS boundary" in a.catalog_sql("daily")["boundaries"]
    assert sqlfluff_parses(boundaries_sql.replace("?", "1"))
    # Switchyard's own boundaries (the last 100 ns of a microsecond) are read and accepted.
    _, target = hourly_target(["2026-03-01T00:59:59.9999999", "2026-03-01T01:59:59.9999999"])
    assert target.boundaries == [datetime(2026, 3, 1, 0, 59, 59, 999999), datetime(2026, 3, 1, 1, 59, 59, 999999)]
    assert hourly_problems(["2026-03-01T00:59:59.9999999", "2026-03-01T01:59:59.9999999"]) == []


@pytest.mark.parametrize("boundaries", [["2026-03-01T00:59:59.9999999", "2026-03-01T01:00:00.1234560"],
                                        ["2026-03-01T01:00:00", "2026-03-01T02:00:00"]])
def test_a_datetime2_7_boundary_inside_a_microsecond_is_refused_naming_it(boundaries):
    problems = hourly_problems(boundaries)
    assert len(problems) == 1, problems
    inexact = [b for b in boundaries if not b.endswith("9")]
    assert f"pf_clicks_hourly has the boundary {inexact[0]}" in problems[0]
    assert "not the last 100 ns of a microsecond" in problems[0] and "rebuild the table" in problems[0]


def test_a_datetime2_function_of_another_precision_is_refused():
    problems = hourly_problems([], scale=3)
    assert problems == ["clicks.hourly: its partition function pf_clicks_hourly takes datetime2(3), the spec's key "
                        "at is datetime2(7): the boundaries would not compare; make them the same precision"]


def test_a_table_partitioned_on_a_key_of_another_type_is_refused_naming_both_not_read_as_the_specs():
    """The spec's key moved to an integer column while the table is partitioned on its datetime2
    column: refused naming the two keys and types; its boundaries are not read as integers (which
    raised a ValueError the pre-flight took for an unwritable name)."""
    from switchyard.targets.mssql.catalog import shape_problems, target_from_catalog
    key = key_type("bigint")
    target = target_from_catalog(
        key, [("PS", "ps_clicks_hourly", 7, "pf_clicks_hourly", 0, 3, "datetime2", 8, 27, 7, "at")],
        [(1, "2026-03-01T00:59:59.9999999"), (2, "2026-03-01T01:59:59.9999999")],
        column_rows=[("at", "datetime2", 8, 27, 7, 0, None), ("n", "bigint", 8, 19, 0, 0, None)])
    raw = yaml.safe_load(SPEC_YAML)
    raw["tables"]["hourly"]["key"] = "n"
    problems = shape_problems(target, "clicks.hourly", parse_spec(raw).table("hourly"), key, "bigint")
    assert "clicks.hourly is partitioned on at, the spec on n" in problems[0], problems
    assert "its partition function pf_clicks_hourly takes datetime2, the spec's key n is bigint" in problems[1], problems
