"""The DAG's schedule: a cron schedule whose own runs start at SWITCHYARD_START_DATE.

Airflow's cron schedule with `catchup` off always offers the schedule's latest time as the next
run, however long ago it was: a schedule set or changed at 19:30 on a Monday made the run of
03:00 that morning at once. Dated before the start date, that run held its tasks off and ended
`success` having loaded nothing, and a backfill asked for that date afterwards found the run and
left it so (Airflow's backfill does not run a date again by default): the batch of that date was
never loaded, while every run said `success`.

This timetable gives the scheduler no time before the start date: its first run is the
schedule's first time at or after it. Only the scheduler's own runs are bound by it (Airflow asks
the timetable with `catchup` off for them and with `catchup` on for a backfill's dates, which
keep every date asked for, before the start date too). It is not the DAG's `start_date`, which
Airflow would give every task (a run dated before it, a manual trigger dated earlier, would get
no task). The wait for the batch still holds off a scheduled run dated before the start date,
should one be made some other way.

Registered in the plugin (plugin.py), as Airflow requires of a timetable of a package's own: the
dag-processor serializes it by name, the scheduler and the api-server read it back.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

import pendulum
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction
from airflow.timetables.trigger import CronTriggerTimetable


class CronFromStartDate(CronTriggerTimetable):
    """A cron schedule (`cron`, in `timezone`) whose scheduled runs are none before `start`."""

    def __init__(self, cron: str, *, timezone: Any = "UTC", start: datetime):
        super().__init__(cron, timezone=timezone)
        self.start = pendulum.instance(start)   # the type of Airflow's own times
        self.description = f"{self.description}; scheduled runs from {start:%Y-%m-%d %H:%M %Z}"

    def next_dagrun_info(self, *, last_automated_data_interval: DataInterval | None,
                         restriction: TimeRestriction) -> DagRunInfo | None:
        if not restriction.catchup:
            # The scheduler's own next run (catchup off): never dated before the start date.
            earliest = max(restriction.earliest or self.start, self.start)
            restriction = TimeRestriction(earliest, restriction.latest, restriction.catchup)
        return super().next_dagrun_info(last_automated_data_interval=last_automated_data_interval,
                                        restriction=restriction)

    def serialize(self) -> dict[str, Any]:
        return {**super().serialize(), "start": self.start.isoformat()}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> CronFromStartDate:
        # The time zone as the parent serializes it: a name, which the parent's constructor reads.
        return cls(data["expression"], timezone=data["timezone"], start=datetime.fromisoformat(data["start"]))
