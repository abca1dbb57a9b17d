"""The DAG lever "preload, the connection rendered" (bench/rendered.py): the steps' connection
back in a template field, in the benchmark's own Airflow only, applied before the DAG is built."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import switchyard_dev.bench

LOCAL = Path(switchyard_dev.bench.__file__).parent / "local_settings"

# Run in a process of its own: the lever patches the operator classes for good.
PROBE = """
import airflow_local_settings
from switchyard.airflow.dag_factory import DagConfig, build_dag
dag = build_dag(DagConfig(streams=2))
steps = [t for t in dag.tasks if hasattr(t, "lock_timeout_seconds")]
print("fields", sorted({tuple(t.template_fields) for t in steps}))
print("conn_ids", sorted({t.conn_id for t in steps}))
"""


def _probe(tmp_path, **env) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "SWITCHYARD_BENCH_RENDERED_CONN_ID"}
    full.update(SWITCHYARD_PRELOAD_DAG="0", SWITCHYARD_RUNS_DIR=str(tmp_path),
                PYTHONPATH=os.pathsep.join([str(LOCAL), *sys.path]), **env)
    out = subprocess.run([sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out


def test_the_lever_renders_every_steps_connection_from_a_template_field(tmp_path):
    out = _probe(tmp_path, SWITCHYARD_BENCH_RENDERED_CONN_ID="1")
    assert "the 'connection rendered' lever" in out.stderr
    assert "fields [('conn_id',), ('conn_id', 'batch', 'tables')]" in out.stdout
    assert "conn_ids ['{{ params.conn_id }}']" in out.stdout


def test_without_the_lever_no_step_renders_its_connection(tmp_path):
    out = _probe(tmp_path)
    assert "connection rendered" not in out.stderr
    assert "fields [(), ('batch', 'tables')]" in out.stdout
    assert "conn_ids [None]" in out.stdout
