"""Airflow's local settings for Switchyard (put this folder on the Airflow components' PYTHONPATH).

Airflow imports this module in every one of its processes; `preload` acts only in the
scheduler, whose LocalExecutor forks the task processes, and in an Edge worker, which forks its
loads' task processes (see switchyard/airflow/preload.py).
"""
from switchyard.airflow.preload import preload

preload()
