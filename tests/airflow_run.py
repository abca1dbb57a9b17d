"""Runs the real DAG with `airflow dags test` against the embedded PostgreSQL."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from switchyard_dev.local import airflow, airflow_env, migrate


@dataclass
class DagRun:
    returncode: int
    output: str
    stats: dict | None


def run_dag(pg_uri: str, data_root: Path, schema: str, streams: int, conf: dict,
            runs_dir: Path, extra_env: dict | None = None, logical_date: str | None = None,
            spec: str = "tpch", dag_id: str = "switchyard_tpch") -> DagRun:
    env = airflow_env(streams=streams, extra={
        "AIRFLOW_CONN_SWITCHYARD_TARGET": pg_uri,
        "SWITCHYARD_DATA_ROOT": str(data_root),
        "SWITCHYARD_SCHEMA": schema,
        "SWITCHYARD_RUNS_DIR": str(runs_dir),
        "SWITCHYARD_SPEC": spec,
        "SWITCHYARD_DAG_ID": dag_id,
        **(extra_env or {}),
    })
    migrate(env)
    when = [logical_date] if logical_date else []
    result = airflow("dags", "test", dag_id, *when, "-c", json.dumps(conf), env=env, check=False,
                     timeout=900)
    output = result.stdout + result.stderr
    stats = None
    found = sorted(runs_dir.glob(f"{dag_id}/*/stats.json"), key=lambda p: p.stat().st_mtime)
    if found:
        stats = json.loads(found[-1].read_text())
    return DagRun(result.returncode, output, stats)
