"""The benchmark's floor and loader-alone parts at scale 0.01: they run and report sane figures.

Performance is never asserted here: only that the parts ran, loaded every row, and wrote
the JSON the README's table is made from.
"""
from __future__ import annotations

import json


def test_floor_and_loader_alone(pg_uri, tpch_batch, tmp_path):
    from switchyard import bench
    name, folder = tpch_batch
    manifest = json.loads((folder / "manifest.json").read_text())
    rows = sum(f["rows"] for f in manifest["files"])
    nbytes = sum(f["bytes"] for f in manifest["files"])

    result = bench.run(0.01, 3, slots=2, parts=("floor", "loader"), out=tmp_path, plot=False)

    written = list(tmp_path.glob("*/bench.json"))
    assert len(written) == 1
    saved = json.loads(written[0].read_text())
    assert saved["batch"]["name"] == name
    assert saved["batch"]["rows"] == rows and saved["batch"]["bytes"] == nbytes
    for part in ("floor", "loader"):
        r = saved[part]
        assert r["rows"] == rows and r["bytes"] == nbytes
        assert r["wall_seconds"] > 0 and r["rows_per_s"] > 0 and r["mb_per_s"] > 0
        assert len(r["files"]) == len([f for f in manifest["files"] if f["rows"]])
        assert all(f["end"] >= f["start"] for f in r["files"])
    assert {f["pid"] for f in saved["loader"]["files"]}, "the loads ran in worker processes"
    assert saved["loader"]["prepare_seconds_median"] >= 0
    assert "dag" not in saved and "peers" not in saved
    assert result["floor"]["rows_per_s"] == saved["floor"]["rows_per_s"]
    lines = bench.table_lines(saved)
    assert lines[1].startswith("floor") and lines[2].startswith("Switchyard loader alone")

    import psycopg
    with psycopg.connect(pg_uri) as conn:
        left = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname IN (%s, %s, %s)",
                            (bench.FLOOR_SCHEMA, bench.LOADER_SCHEMA, bench.LOADER_SCHEMA + "_staging")).fetchone()[0]
    assert left == 0, "the benchmark drops what it loaded"


def test_stripped_stream_removes_only_the_trailing_delimiter(tmp_path):
    from switchyard.bench import _stripped
    path = tmp_path / "t.tbl"
    lines = [f"{i}|a|b{'x' * (i % 7)}|\n".encode() for i in range(300_000)]
    path.write_bytes(b"".join(lines))
    with path.open("rb") as fh:
        out = b"".join(_stripped(fh))
    assert out == b"".join(line[:-2] + b"\n" for line in lines)


def test_schedule_efficiency():
    from switchyard.bench import schedule_efficiency
    loads = [{"work_seconds": w} for w in (4.0, 2.0, 2.0)]
    e = schedule_efficiency(loads, slots=2, makespan=8.0)
    assert e["lower_bound_seconds"] == 4.0 and e["efficiency"] == 0.5
    assert schedule_efficiency([{"work_seconds": 10.0}, {"work_seconds": 1.0}], 2, 10.0)["efficiency"] == 1.0
