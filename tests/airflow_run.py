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
            runs_dir: Path, extra_env: dict | None = None, logical_date: str | None = None) -> DagRun:
    env = airflow_env(streams=streams, extra={
        "AIRFLOW_CONN_SWITCHYARD_TARGET": pg_uri,
        "SWITCHYARD_DATA_ROOT": str(data_root),
        "SWITCHYARD_SCHEMA": schema,
        "SWITCHYARD_RUNS_DIR": str(runs_dir),
        **(extra_env or {}),
    })
    migrate(env)
    when = [logical_date] if logical_date else []
    result = airflow("dags", "test", "switchyard_tpch", *when, "-c", json.dumps(conf), env=env, check=False,
                     timeout=900)
    output = result.stdout + result.stderr
    stats = None
    found = sorted(runs_dir.glob("switchyard_tpch/*/stats.json"), key=lambda p: p.stat().st_mtime)
    if found:
        stats = json.loads(found[-1].read_text())
    return DagRun(result.returncode, output, stats)
