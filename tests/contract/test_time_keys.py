"""Date- and timestamp-keyed tables through the adapter API, on every engine (conftest.py).

Each stream's partition is planned from the manifest's ISO-8601 bounds, its staging table
loaded, validated and switched, the batch published; a timestamp at a day's last microsecond
goes into that day's partition. A second batch adds its own partitions beside the first
(append), its rerun gives only its own partitions new storage, and a batch overlapping them is
refused before any load, the tables as they were.
"""
from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from helpers import publish
from switchyard.core.batch import MANIFEST_FORMAT, read_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec
from switchyard.observability.validation import describe_failures, validate_stream
from switchyard.targets import TargetError

# `timestamp` is read by each engine in its own words (datetime2(6) on SQL Server).
SPEC_YAML = """
name: moments
format: {delimiter: "|", trailing_delimiter: false}
files: "{table}/{table}.{stream}.txt"
tables:
  days:
    key: day
    mode: append
    unique: [day, id]
    columns:
      - {name: day, type: date}
      - {name: id, type: bigint}
      - {name: amount, type: "numeric(10,2)"}
  moments:
    key: at
    mode: append
    unique: true
    columns:
      - {name: at, type: timestamp}
      - {name: sensor, type: integer}
"""
TABLES = ["days", "moments"]


def write_batch(folder: Path, months: list[int]) -> Path:
    """A stream per month: `days` holds two rows a day of it, `moments` a reading every
    three hours of its first day and one at that day's last microsecond. The manifest is
    written from the rows as generated, not by Switchyard."""
    entries = []
    for k, month in enumerate(months, start=1):
        first, end = date(2026, month, 1), date(2026, month + 1, 1)
        days = [first + timedelta(days=d) for d in range((end - first).days)]
        rows = [f"{d.isoformat()}|{d.toordinal() * 10 + i}|{d.day + i / 100:.2f}" for d in days for i in (1, 2)]
        entries.append(_write(folder, "days", k, rows, days[0].isoformat(), days[-1].isoformat()))
        start = datetime(2026, month, 1)
        times = [start + timedelta(hours=h) for h in range(0, 24, 3)] + [start + timedelta(days=1, microseconds=-1)]
        rows = [f"{t.isoformat(sep=' ')}|{i}" for i, t in enumerate(times)]
        entries.append(_write(folder, "moments", k, rows, times[0].isoformat(), times[-1].isoformat()))
    manifest = {"format": MANIFEST_FORMAT, "spec": "moments", "streams": len(months), "files": entries}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return folder


def _write(folder: Path, table: str, stream: int, rows: list[str], key_min: str, key_max: str) -> dict:
    path = folder / table / f"{table}.{stream}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{row}\n" for row in rows))
    return {"table": table, "stream": stream, "file": f"{table}/{table}.{stream}.txt",
            "bytes": path.stat().st_size, "rows": len(rows), "key_min": key_min, "key_max": key_max}


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "moments.yaml"
    path.write_text(SPEC_YAML)
    return load_spec(str(path))


def load(engine, spec, folder: Path, run: str):
    """The batch through the steps as the DAG runs them, each checked, then the run's lease
    given up; (adapter, plan)."""
    folder = engine.folder(folder)
    plan = plan_batch(spec, read_manifest(folder, spec))
    adapter = engine.make(spec, run)
    adapter.setup(plan)
    for s in plan.all_streams():
        adapter.prepare(s)
        assert adapter.load(s, folder / s.file).rows == s.rows
        outcome = validate_stream(adapter, spec, s)
        assert outcome.success, describe_failures(outcome, s.group_id)
        adapter.switch(s)
    assert publish(adapter, plan)["tables"] == TABLES
    adapter.release_lease()  # as the run's last task does: the next run's setup takes it
    return adapter, plan


def rows(plans) -> dict[str, int]:
    return {t: sum(s.rows for plan in plans for s in plan.table(t).streams) for t in TABLES}


def test_date_and_timestamp_keyed_batches_append_rerun_and_refuse_an_overlap(engine, spec, tmp_path):
    adapter, first = load(engine, spec, write_batch(tmp_path / "b1", [1, 2]), "dag/b1")
    assert {t: adapter.row_count(t) for t in TABLES} == rows([first])
    adapter, second = load(engine, spec, write_batch(tmp_path / "b2", [3, 4]), "dag/b2")
    assert {t: adapter.row_count(t) for t in TABLES} == rows([first, second])
    before = engine.fingerprint(adapter, TABLES)
    storage = {t: engine.partition_ids(adapter, t) for t in TABLES}

    # The second batch again: its two partitions of each table get new storage, the first's keep theirs.
    adapter, _ = load(engine, spec, write_batch(tmp_path / "b2-again", [3, 4]), "dag/b2")
    assert engine.fingerprint(adapter, TABLES) == before
    for t in TABLES:
        after = engine.partition_ids(adapter, t)
        assert len({p for p in after if after[p] != storage[t].get(p)}) == 2, (t, storage[t], after)

    # April and May: April is the second batch's.
    overlapping = engine.folder(write_batch(tmp_path / "b3", [4, 5]))
    plan = plan_batch(spec, read_manifest(overlapping, spec))
    refusing = engine.make(spec, "dag/b3")
    with pytest.raises(TargetError, match="overlaps batch") as refused:
        refusing.setup(plan)
    assert refused.value.permanent is True
    assert engine.fingerprint(refusing, TABLES) == before
