"""The DAG's schedule with a start date: the scheduler's own runs start at it, a backfill keeps
every date it is asked for. On the DAG as Airflow's scheduler reads it back from its serialized
form (the dag-processor's), through Airflow's own time rules."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pendulum
from airflow.serialization.serialized_objects import DagSerialization
from airflow.timetables.base import DagRunInfo

from switchyard.airflow.dag_factory import DagConfig, build_dag


def scheduler_side(config: DagConfig):
    """The DAG as the scheduler has it: serialized as the dag-processor stores it, read back."""
    return DagSerialization.from_dict(DagSerialization.to_dict(build_dag(config)))


def test_no_scheduled_run_is_dated_before_the_start_date_and_a_backfill_keeps_its_dates():
    now = pendulum.instance(datetime.now(timezone.utc))
    start = (now + timedelta(days=1, minutes=30)).replace(second=0, microsecond=0)
    dag = scheduler_side(DagConfig(streams=1, schedule="0 * * * *", start_date=start))
    assert type(dag.timetable).__name__ == "CronFromStartDate"
    assert "scheduled runs from" in dag.timetable.description
    first = dag.next_dagrun_info(last_automated_run_info=None)
    # The schedule's first time at or after the start date, not its latest time before now.
    assert start <= first.run_after < start + timedelta(hours=1), first
    # ... also after a run of the schedule before it (a schedule set again: Airflow offers its
    # latest time, an hour ago at most, as the next run).
    earlier = DagRunInfo.interval(now - timedelta(days=3, hours=1), now - timedelta(days=3))
    assert dag.next_dagrun_info(last_automated_run_info=earlier).run_after >= start
    # A backfill (Airflow asks with catchup on) keeps every date asked for, before the start date.
    dates = [i.run_after for i in dag.iter_dagrun_infos_between(now - timedelta(hours=5), now)]
    assert len(dates) == 5 and all(d < start for d in dates), dates

    # The same cron schedule without a start date: the next run is within the hour (Airflow's own).
    plain = scheduler_side(DagConfig(streams=1, schedule="0 * * * *", start_date=None))
    assert type(plain.timetable).__name__ == "CronTriggerTimetable"
    assert plain.next_dagrun_info(last_automated_run_info=None).run_after <= now + timedelta(hours=1)
    # With catchup, the DAG's start date bounds the runs already: Airflow's cron schedule as is.
    caught = scheduler_side(DagConfig(streams=1, schedule="0 * * * *", start_date=start, catchup=True))
    assert type(caught.timetable).__name__ == "CronTriggerTimetable"
    assert caught.next_dagrun_info(last_automated_run_info=None).run_after >= start
