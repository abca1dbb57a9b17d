"""When a group run as one task (`tasks: single`) is retried by Airflow rather than cleared by
hand: the rule in Airflow's own terms (try_number, max_tries, the task's retries)."""
from __future__ import annotations

import inspect

from switchyard.airflow.operators import a_retry


def test_a_retry_is_told_from_a_first_try_and_from_the_first_try_after_a_clear():
    retries = 1
    assert not a_retry(1, retries, retries)          # the first try: max_tries = retries
    assert a_retry(2, retries, retries)              # Airflow's retry of it: max_tries unchanged
    # Cleared by hand after try 2: max_tries = 2 + retries, the next try is 3.
    assert not a_retry(3, 2 + retries, retries)
    assert a_retry(4, 2 + retries, retries)
    assert not a_retry(1, 0, 0)                      # no retries: every try is a first one
    assert not a_retry(2, 1 + 0, 0)                  # cleared after try 1 with no retries
    assert a_retry(3, 1 + 2, 2) and a_retry(4, 1 + 2, 2)  # two retries after a clear
    assert not a_retry(2, 1 + 2, 2)


def test_the_rule_is_the_one_the_installed_airflow_clears_tasks_by():
    """The rule reads max_tries as Airflow's clear sets it: try_number + retries. A version of
    Airflow that sets it otherwise fails here, before a retry is taken for a clear."""
    from airflow.models.taskinstance import clear_task_instances
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    assert "ti.max_tries = ti.try_number + task.retries" in inspect.getsource(clear_task_instances)
    assert "first_try_number = max_tries - retries + 1" in inspect.getsource(
        RuntimeTaskInstance.get_first_reschedule_date)
