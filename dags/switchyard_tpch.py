"""The Switchyard load DAG: one task group per (table, stream), from the load spec (the built-in
TPC-H spec by default).

Configured by the DAG's settings (docs/configuration.md, "The DAG": SWITCHYARD_SPEC, _DAG_ID,
_SCHEMA, _STREAMS, _SCHEDULE, _START_DATE, ...), read from the DAG's settings file in the Airflow
home (`switchyard.env`) where there is one, so that every process that parses this file, the
scheduler's and `airflow dags test` in any shell alike, builds the same DAG; else from the
environment.
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
