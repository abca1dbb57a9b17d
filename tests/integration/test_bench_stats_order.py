"""The DAG lever "preload, stats after the Asset events" (bench/stats_order.py): the stats task
after the tables' publish tasks again, in the benchmark's own Airflow only, applied before the
DAG is built."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import switchyard_dev.bench

LOCAL = Path(switchyard_dev.bench.__file__).parent / "local_settings"

# Run in a process of its own: the lever replaces the graph's builder for good.
PROBE = """
import airflow_local_settings
from switchyard.airflow.dag_factory import DagConfig, build_dag
dag = build_dag(DagConfig(streams=2))
print("after", sorted(t for t in dag.get_task("stats").upstream_task_ids if not t.endswith(".switch")))
"""


def _probe(tmp_path, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "SWITCHYARD_BENCH_STATS_AFTER_PUBLISH"}
    full.update(SWITCHYARD_PRELOAD_DAG="1", SWITCHYARD_RUNS_DIR=str(tmp_path),
                PYTHONPATH=os.pathsep.join([str(LOCAL), *sys.path]), **env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out


def test_the_lever_puts_the_stats_after_every_publish_task(tmp_path):
    out = _probe(tmp_path, SWITCHYARD_BENCH_STATS_AFTER_PUBLISH="1")
    assert "the 'stats after the Asset events' lever" in out.stderr
    tables = ["customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier"]
    assert f"after {sorted(['publish_batch', *(f'publish.{t}' for t in tables)])}" in out.stdout


def test_without_the_lever_the_stats_wait_for_the_batch_alone(tmp_path):
    out = _probe(tmp_path)
    assert "lever" not in out.stderr
    assert "after ['publish_batch']" in out.stdout
