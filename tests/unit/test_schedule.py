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


def test_a_schedule_in_a_time_zone_runs_at_its_clock_and_names_the_batch_by_its_date(monkeypatch):
    """SWITCHYARD_TIMEZONE=Europe/Berlin, `30 0 * * *`: half past midnight in Berlin, summer
    (22:30 UTC the day before) and winter (23:30 UTC) alike, across the change of 25 October 2026;
    each run's batch is its Berlin date, not the UTC day before's."""
    from switchyard import settings
    from switchyard.airflow.operators import batch_name
    start = datetime(2026, 10, 22, tzinfo=timezone.utc)
    dag = scheduler_side(DagConfig(streams=1, schedule="30 0 * * *", timezone="Europe/Berlin", start_date=start))
    between = [i.run_after for i in dag.iter_dagrun_infos_between(
        datetime(2026, 10, 23, tzinfo=timezone.utc), datetime(2026, 10, 27, tzinfo=timezone.utc))]
    assert [d.astimezone(timezone.utc).strftime("%m-%d %H:%M") for d in between] == [
        "10-23 22:30", "10-24 22:30", "10-25 23:30", "10-26 23:30"], between
    berlin = settings.Settings.from_env({"SWITCHYARD_SETTINGS_FILE": "/nonexistent/switchyard.env",
                                         "SWITCHYARD_TIMEZONE": "Europe/Berlin"})
    monkeypatch.setattr(settings, "get", lambda file=None: berlin)
    assert [batch_name(None, {"logical_date": d}) for d in between] == [
        "2026-10-24", "2026-10-25", "2026-10-26", "2026-10-27"]
    # `switchyard runs` names a run's batch by the same rule, from the run's logical date as the API gives it.
    from switchyard_dev import local, runs
    monkeypatch.setattr(local, "airflow_env", lambda: {"SWITCHYARD_SETTINGS_FILE": "/nonexistent/switchyard.env",
                                                       "SWITCHYARD_TIMEZONE": "Europe/Berlin"})
    assert runs.batch_of({"logical_date": "2026-10-23T22:30:00Z", "conf": {}}) == "2026-10-24"
    # Without one, UTC: Airflow's own cron schedule, the batch of the UTC date.
    utc = settings.Settings.from_env({"SWITCHYARD_SETTINGS_FILE": "/nonexistent/switchyard.env"})
    monkeypatch.setattr(settings, "get", lambda file=None: utc)
    assert batch_name(None, {"logical_date": between[0]}) == "2026-10-23"
    plain = scheduler_side(DagConfig(streams=1, schedule="30 0 * * *", start_date=None))
    assert plain.next_dagrun_info(last_automated_run_info=None).run_after.strftime("%H:%M") == "00:30"


def test_a_run_whose_batch_name_another_run_of_the_schedule_shares_is_refused(monkeypatch):
    """Two runs naming one batch would load it twice and the other period's files never: a
    schedule every 6 hours with the daily name, or an hourly schedule in Berlin on the night the
    clock goes back (02:00 comes twice; both 00:00 and 01:00 UTC name 2026-10-25T0200), whose
    runs Airflow makes both. Each such run fails before its wait, saying which format tells them
    apart; a manual run dated now names the day's batch on purpose, and a daily name across the
    repeated hour is the day's batch, however often it is loaded."""
    from types import SimpleNamespace
    from airflow.exceptions import AirflowFailException
    from switchyard import settings
    from switchyard.airflow.operators import refuse_a_shared_batch

    def given(**env):
        made = settings.Settings.from_env({"SWITCHYARD_SETTINGS_FILE": "/nonexistent/switchyard.env", **env})
        monkeypatch.setattr(settings, "get", lambda file=None: made)
        return made

    def run(when, kind="scheduled", batch=""):
        refuse_a_shared_batch(batch, {"logical_date": when, "dag_run": SimpleNamespace(run_type=kind)})

    six = datetime(2026, 11, 21, 6, tzinfo=timezone.utc)
    given(SWITCHYARD_SCHEDULE="0 */6 * * *")
    for kind in ("scheduled", "backfill"):
        try:
            run(six, kind)
            raise AssertionError("a shared batch was not refused")
        except AirflowFailException as exc:
            assert str(exc) == (
                "refused: the schedule (0 */6 * * *) runs at 2026-11-21 00:00 and at 2026-11-21 06:00 (UTC), and "
                "SWITCHYARD_BATCH_FORMAT (%Y-%m-%d) names both batch 2026-11-21: each run would load the same batch; "
                "give the format the part of the time that tells the runs apart (%Y-%m-%dT%H%M for a schedule of "
                "hours)")
    run(six, "manual")
    run(six, batch="2026-11-21")                     # named by the run: its own choice
    given(SWITCHYARD_SCHEDULE="0 */6 * * *", SWITCHYARD_BATCH_FORMAT="%Y-%m-%dT%H%M")
    run(six)
    berlin = dict(SWITCHYARD_SCHEDULE="0 * * * *", SWITCHYARD_TIMEZONE="Europe/Berlin")
    given(**berlin, SWITCHYARD_BATCH_FORMAT="%Y-%m-%dT%H%M")
    for hour in (0, 1):
        try:
            run(datetime(2026, 10, 25, hour, tzinfo=timezone.utc), "manual")
            raise AssertionError("the repeated hour was not refused")
        except AirflowFailException as exc:
            assert "2026-10-25 02:00 in Europe/Berlin, comes twice that night" in str(exc)
            assert "names both alike, batch 2026-10-25T0200" in str(exc)
    run(datetime(2026, 10, 25, 2, tzinfo=timezone.utc))
    made = given(**berlin, SWITCHYARD_BATCH_FORMAT="%Y-%m-%dT%H%M%Z")
    run(datetime(2026, 10, 25, 0, tzinfo=timezone.utc))
    assert [made.batch_for(datetime(2026, 10, 25, h, tzinfo=timezone.utc)) for h in (0, 1)] == [
        "2026-10-25T0200CEST", "2026-10-25T0200CET"]
    from pathlib import Path
    from switchyard.core.batch import resolve_batch
    assert resolve_batch("2026-10-25T0200CEST", Path("/data")) == Path("/data/2026-10-25T0200CEST")
    given(SWITCHYARD_SCHEDULE="30 2 * * *", SWITCHYARD_TIMEZONE="Europe/Berlin")
    run(datetime(2026, 10, 25, 0, 30, tzinfo=timezone.utc))
    run(datetime(2026, 10, 25, 1, 30, tzinfo=timezone.utc))
