"""Airflow's local settings for Switchyard's local Airflow (found on PYTHONPATH, see local.py).

Airflow imports this module in every one of its processes; `preload` acts only in the
scheduler, whose LocalExecutor forks the task processes (see switchyard/preload.py).
"""
import os

from switchyard.airflow.preload import preload

preload()

if os.environ.get("SWITCHYARD_FLAT_PRIORITIES", "").strip().lower() in ("1", "true", "yes", "on"):
    # Every task at the same weight: lets the benchmark measure what the DAG's
    # biggest-table-first priority weights are worth against Airflow's plain order.
    def task_policy(task):
        task.priority_weight = 1
