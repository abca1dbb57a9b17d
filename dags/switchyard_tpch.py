"""The TPC-H load DAG: one task group per (table, stream), from the built-in TPC-H spec.

Configured from the environment (docs/configuration.md): SWITCHYARD_STREAMS, SWITCHYARD_SCHEMA,
SWITCHYARD_CONN_ID, SWITCHYARD_POOL, SWITCHYARD_DATA_ROOT.
"""
import sys
from pathlib import Path

try:
    import switchyard  # noqa: F401  (Airflow puts plugins/ on sys.path)
except ImportError:  # the DAG file imported outside Airflow, e.g. by a test runner
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "plugins"))

from switchyard.airflow.preload import forget_changed_code

forget_changed_code()  # a task process forked from the scheduler: code as it is on disk now

from switchyard.airflow.dag_factory import dag_from_env  # noqa: E402

dag = dag_from_env()
