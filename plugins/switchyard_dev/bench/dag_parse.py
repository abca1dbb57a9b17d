"""The DAG file's parse time: the file imported in fresh processes for a stream count, then
serialized as Airflow's dag-processor stores it."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from switchyard_dev.bench.common import spread

_PARSE = """
import importlib.util, json, sys, time
t0 = time.perf_counter()
import airflow.sdk  # already imported in Airflow's dag-processor: timed apart
t1 = time.perf_counter()
spec = importlib.util.spec_from_file_location("switchyard_dag_file", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
t2 = time.perf_counter()
# What the dag-processor does next with the DAG at every parse: serialize it (to compare with
# the stored version, and store it when it changed).
from airflow.serialization.serialized_objects import DagSerialization
t3 = time.perf_counter()
serialized = json.dumps(DagSerialization.to_dict(module.dag))
t4 = time.perf_counter()
print(json.dumps({"dag_file_seconds": t2 - t1, "airflow_sdk_import_seconds": t1 - t0,
                  "serialize_seconds": t4 - t3, "serialized_mb": len(serialized) / 1e6,
                  "tasks": len(module.dag.tasks)}))
"""


def dag_file() -> Path:
    return Path(__file__).resolve().parents[3] / "dags" / "switchyard_tpch.py"


def parse_seconds(streams: int, rounds: int = 3) -> dict:
    """The DAG file imported in a fresh process with SWITCHYARD_STREAMS set, `rounds` times."""
    import subprocess
    env = dict(os.environ, SWITCHYARD_STREAMS=str(streams),
               PYTHONPATH=os.pathsep.join(filter(None, [str(dag_file().parents[1] / "plugins"),
                                                        os.environ.get("PYTHONPATH")])))
    runs = []
    for _ in range(rounds):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _PARSE, str(dag_file())], env=env, check=True,
                              capture_output=True, text=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        r["process_seconds"] = time.perf_counter() - started
        runs.append(r)
    return {"streams": streams, "tasks": runs[0]["tasks"], "rounds": rounds,
            "dag_file_seconds": spread([r["dag_file_seconds"] for r in runs]),
            "airflow_sdk_import_seconds": spread([r["airflow_sdk_import_seconds"] for r in runs]),
            "serialize_seconds": spread([r["serialize_seconds"] for r in runs]),
            "serialized_mb": round(runs[0]["serialized_mb"], 2),
            "process_seconds": spread([r["process_seconds"] for r in runs])}
