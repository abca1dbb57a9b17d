"""Date- and timestamp-keyed tables on the real embedded PostgreSQL: planned from a manifest of
ISO-8601 bounds, loaded, validated and switched in with ATTACH skipping its scan; then the
same through the DAG. And a key at the end of its type's range."""
from __future__ import annotations

import json
import random
from datetime import date, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from helpers import ids_batch, ids_spec, load_through_steps, publish
from switchyard.core.batch import MANIFEST_FORMAT, read_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec
from switchyard.targets.postgres import PostgresAdapter
from switchyard.observability.validation import describe_failures, validate_stream

SPEC_YAML = """
name: events
format: {delimiter: "|", trailing_delimiter: false}
files: "{table}/{table}.{stream}.txt"
tables:
  events:
    key: event_day
    unique: [event_day, event_id]
    columns:
      - {name: event_day, type: date}
      - {name: event_id, type: bigint}
      - {name: kind, type: varchar(12)}
      - {name: amount, type: "numeric(10,2)"}
    expectations:
      - {type: expect_column_values_to_be_in_set, kwargs: {column: kind, value_set: [click, view, buy]}}
  readings:
    key: read_at
    unique: true
    columns:
      - {name: read_at, type: {postgres: timestamp, mssql: "datetime2(6)"}}
      - {name: sensor, type: integer}
      - {name: value, type: double precision}
"""
STREAMS = 3


def write_batch(folder: Path, streams: int = STREAMS) -> dict:
    """Three months of events (one month a stream) and a day of readings a stream, at
    microsecond times; the manifest written from the rows as generated, not by Switchyard."""
    rng = random.Random(13)
    entries = []
    for k in range(1, streams + 1):
        first = date(2026, k, 1)
        last = date(2026, k + 1, 1) - timedelta(days=1)
        rows, day, n = [], first, 0
        while day <= last:
            for i in range(rng.randint(1, 4)):
                n += 1
                rows.append(f"{day.isoformat()}|{k * 100000 + n}|{rng.choice(['click', 'view', 'buy'])}|"
                            f"{rng.randint(0, 99999) / 100:.2f}")
            day += timedelta(days=1)
        path = folder / "events" / f"events.{k}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(rows) + "\n")
        keys = [r.split("|", 1)[0] for r in rows]
        entries.append({"table": "events", "stream": k, "file": f"events/events.{k}.txt",
                        "bytes": path.stat().st_size, "rows": len(rows), "key_min": keys[0], "key_max": keys[-1]})

        start = datetime(2026, 3, 1) + timedelta(days=k - 1)
        times = sorted({start + timedelta(microseconds=rng.randint(0, 86_400_000_000 - 1)) for _ in range(200)})
        times[-1] = start + timedelta(days=1) - timedelta(microseconds=1)  # the day's very last microsecond
        rows = [f"{t.isoformat(sep=' ')}|{rng.randint(1, 9)}|{rng.random():.6f}" for t in times]
        path = folder / "readings" / f"readings.{k}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(rows) + "\n")
        entries.append({"table": "readings", "stream": k, "file": f"readings/readings.{k}.txt",
                        "bytes": path.stat().st_size, "rows": len(rows),
                        "key_min": times[0].isoformat(), "key_max": times[-1].isoformat()})
    manifest = {"format": MANIFEST_FORMAT, "spec": "events", "streams": streams, "files": entries}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


@pytest.fixture(scope="module")
def events_spec(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "events.yaml"
    path.write_text(SPEC_YAML)
    return str(path), load_spec(str(path))


@pytest.fixture(scope="module")
def events_batch(data_root):
    folder = data_root / "events-2026"
    if not (folder / "manifest.json").exists():
        write_batch(folder)
    return "events-2026", folder


def test_date_and_timestamp_tables_plan_load_validate_and_switch(pg_uri, schema, events_spec, events_batch):
    _, spec = events_spec
    _, folder = events_batch
    plan = plan_batch(spec, read_manifest(folder, spec))
    adapter = PostgresAdapter(spec, uri=pg_uri, schema=schema)
    staged_index = {}
    for rerun in (False, True):
        adapter.setup(plan)  # a run (and a rerun) starts with setup: it plans each table's next version
        for s in plan.all_streams():
            adapter.prepare(s)
            loaded = adapter.load(s, folder / s.file)
            assert loaded.rows == s.rows
            outcome = validate_stream(adapter, spec, s)
            assert outcome.success, describe_failures(outcome, s.group_id)
            checks = {(c.expectation, c.column): c for c in outcome.checks}
            key = spec.table(s.table).key
            # The key range is proven from the staging table's CHECK of typed literals...
            assert "planner refutes" in checks[("expect_column_max_to_be_between", key)].observed["proven"]
            assert checks[("expect_column_max_to_be_between", key)].expected == [s.key_min, s.key_max]
            # ...and uniqueness by the index the partition keeps.
            unique = [c for c in outcome.checks if c.category == "unique"]
            assert len(unique) == 1 and "unique index" in unique[0].observed["proven"]
            with psycopg.connect(pg_uri) as conn:
                staged_index[s.group_id] = conn.execute(
                    "SELECT to_regclass(%s)::oid", (f'"{schema}_staging"."{s.partition_table}_unique"',)).fetchone()[0]
            switched = adapter.switch(s)
            assert switched["attach_scan_skipped"] is True, (s.group_id, switched)
            assert switched["replaced"] is rerun
            # A batch's tables go in together: no partition is in the target before the batch's
            # publish (on the rerun the first run's partition of the same bounds is there all along).
            assert switched["in_target"] is False
            assert (adapter.switched_in(s) is not None) is rerun
        published = publish(adapter, plan)
        assert published["tables"] == ["events", "readings"] and published["attach_scan_skipped"] is True
        assert all(adapter.switched_in(s) is not None for s in plan.all_streams())

    with psycopg.connect(pg_uri) as conn:
        bounds = dict(conn.execute(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = ANY (%s::regclass[]) ORDER BY 1",
            ([f'"{schema}"."events"', f'"{schema}"."readings"'],)).fetchall())
        assert bounds["events_20260101_20260131"] == "FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')"
        assert bounds["events_20260301_20260331"] == "FOR VALUES FROM ('2026-03-01') TO ('2026-04-01')"
        readings = [s for s in plan.table("readings").streams]
        last = readings[0]
        assert bounds[last.partition_table].endswith("TO ('2026-03-02 00:00:00')"), bounds[last.partition_table]
        # Every row arrived, the last microsecond of each day included.
        for table in ("events", "readings"):
            rows = conn.execute(f'SELECT count(*) FROM "{schema}"."{table}"').fetchone()[0]
            assert rows == sum(s.rows for s in plan.table(table).streams)
        assert conn.execute(f'SELECT max(read_at) FROM "{schema}"."readings"').fetchone()[0] == \
            datetime(2026, 3, 3, 23, 59, 59, 999999)
        # ATTACH adopted each staging table's unique index (the same index, now a partition of
        # the table's unique index) instead of building one.
        for s in plan.all_streams():
            oid, parent = conn.execute(
                "SELECT i.inhrelid::oid, i.inhparent::regclass::text FROM pg_inherits i "
                "WHERE i.inhrelid = to_regclass(%s)", (f'"{schema}"."{s.partition_table}_unique"',)).fetchone()
            assert oid == staged_index[s.group_id]
            assert parent == f"{schema}.{s.table}_unique"


def test_date_keyed_batch_through_the_dag(pg_uri, data_root, schema, events_spec, events_batch, tmp_path):
    from helpers import run_dag
    path, spec = events_spec
    name, folder = events_batch
    run = run_dag(pg_uri, data_root, schema, STREAMS, {"batch": name}, tmp_path / "runs",
                  extra_env={"SWITCHYARD_SPEC": path})
    assert run.returncode == 0, run.output[-4000:]
    assert run.stats["failed_groups"] == [] and run.stats["totals"]["switched"] == 2 * STREAMS
    groups = {g["group"]: g for g in run.stats["groups"]}
    assert groups["events_2"]["partition"] == f"{schema}.events_20260201_20260228"
    with psycopg.connect(pg_uri) as conn:
        count = conn.execute(f'SELECT count(*) FROM "{schema}"."events"').fetchone()[0]
    assert count == sum(e.rows for e in read_manifest(folder, spec).entries if e.table == "events")



def test_an_integer_key_at_its_types_largest_value_loads_and_later_batches_go_below_it(pg_uri, schema, tmp_path):
    """A key of 2147483647 in an `integer` column: the partition's range ends one past it, which
    no integer is; the bound is MAXVALUE, the partition holds the same keys, ATTACH still proves
    it from the staging CHECK, and the next batch's lower keys are planned beside it."""
    largest = 2**31 - 1
    spec = ids_spec(tmp_path)
    for batch, ids in (("2027-01-01", range(largest - 9, largest + 1)), ("2027-02-01", range(1, 11)),
                       ("2027-01-01", range(largest - 9, largest + 1))):  # and the first again: a rerun
        load_through_steps(pg_uri, schema, spec, ids_batch(tmp_path / f"{batch}-{ids[0]}", ids), batch)
    with psycopg.connect(pg_uri) as conn:
        bounds = sorted(conn.execute(
            "SELECT pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = %s::regclass", (f'"{schema}"."ids"',)).fetchall())
        assert bounds == [("FOR VALUES FROM (1) TO (11)",), (f"FOR VALUES FROM ({largest - 9}) TO (MAXVALUE)",)]
        ids = [r[0] for r in conn.execute(f'SELECT id FROM "{schema}"."ids" ORDER BY id')]
        assert ids == list(range(1, 11)) + list(range(largest - 9, largest + 1))
