"""The local scale-out tooling: how streams are split over the sources, how a batch is laid out
over their data roots, the pool check's overlap count, the benchmark's side-by-side lines."""
from __future__ import annotations

from switchyard.core.datagen import generate_tpch
from switchyard.core.spec import load_spec
from switchyard_dev import scaleout
from switchyard_dev.bench.remote import remote_lines


def test_streams_are_split_in_contiguous_runs():
    assert scaleout.split_streams(4) == {"source_a": [1, 2], "source_b": [3, 4]}
    assert scaleout.split_streams(3) == {"source_a": [1, 2], "source_b": [3]}
    assert scaleout.split_streams(1) == {"source_a": [1]}
    assert scaleout.worker_name("source_b") == "worker_b"


def test_each_source_root_gets_only_its_streams_and_the_central_root_the_manifest(tmp_path):
    generated = tmp_path / "generated" / "b1"
    generate_tpch(generated, load_spec("tpch"), 0.001, 4)
    spec = load_spec(scaleout.spec_with_sources("tpch", scaleout.split_streams(4), tmp_path))
    assert spec.name == "tpch" and spec.source_of(2) == "source_a" and spec.source_of(3) == "source_b"
    roots = {"source_a": tmp_path / "a", "source_b": tmp_path / "b"}
    scaleout.distribute(generated, "b1", spec, tmp_path / "central", roots)
    assert [p.name for p in (tmp_path / "central" / "b1").iterdir()] == ["manifest.json"]
    a = sorted(str(p.relative_to(roots["source_a"] / "b1")) for p in (roots["source_a"] / "b1").rglob("*.tbl"))
    b = sorted(str(p.relative_to(roots["source_b"] / "b1")) for p in (roots["source_b"] / "b1").rglob("*.tbl"))
    assert "orders/orders.1.tbl" in a and "orders/orders.2.tbl" in a and "nation/nation.1.tbl" in a
    assert "orders/orders.3.tbl" in b and "orders/orders.4.tbl" in b
    assert not any(".3." in f or ".4." in f for f in a) and not any(".1." in f or ".2." in f for f in b)
    assert (roots["source_a"] / "b1" / "orders" / "orders.1.tbl").read_bytes() == \
        (generated / "orders" / "orders.1.tbl").read_bytes()


def test_max_overlap_counts_an_end_at_a_start_as_free():
    spans = [("2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"), ("2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"),
             ("2026-01-01T00:00:05Z", "2026-01-01T00:00:15Z")]
    assert scaleout.max_overlap(spans) == 2
    assert scaleout.max_overlap(spans + [("2026-01-01T00:00:06Z", "2026-01-01T00:00:07Z")]) == 3


def test_the_metadata_database_is_one_per_airflow_home(monkeypatch, tmp_path):
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path / "one"))
    one = scaleout.metadata_database()
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path / "two"))
    assert one != scaleout.metadata_database() and one.startswith("airflow_")


def test_the_benchmark_prints_both_executors_side_by_side():
    run = {"state": "success", "wall_seconds": 42.0, "load_window_seconds": 31.6, "rows_per_s": 206124.0,
           "pool_busy_fraction": 0.8, "per_step": {}}
    lines = remote_lines({"local": dict(run, cpu_seconds={"scheduler": 4.9, "task processes": 17.0}),
                          "edge": dict(run, cpu_seconds={"scheduler": 7.2, "worker_a": 5.6, "worker_b": 5.1},
                                       loads_by_host={"worker_a": 14, "worker_b": 12})})
    local = next(line for line in lines if line.strip().startswith("local"))
    edge = next(line for line in lines if line.strip().startswith("edge "))
    assert local.split()[-1] == "21.9" and edge.split()[-1] == "17.9"  # Airflow's CPU, all services
    assert any("worker_a 14, worker_b 12" in line for line in lines)
