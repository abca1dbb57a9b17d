"""One load per scheduler: the scheduler guard's error and its retry policy."""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from switchyard.targets.mssql.errors import error_numbers

log = logging.getLogger(__name__)

SCHEDULER_BUSY_ERROR = 51001
SCHEDULER_BUSY_MESSAGE = "switchyard: another load holds this scheduler"


class SchedulerBusy(Exception):
    """The scheduler claim failed (SCHEDULER_BUSY_ERROR): another load runs on this scheduler."""


def is_scheduler_busy(exc: BaseException) -> bool:
    """Our THROW, by its number and its text (a bare number could be a row number in a message)."""
    return SCHEDULER_BUSY_ERROR in error_numbers(exc) and SCHEDULER_BUSY_MESSAGE in str(exc)


@dataclass(frozen=True)
class GuardOutcome:
    attempts: int
    claimed: bool   # the load ran holding its scheduler alone
    shared: bool    # every reconnect landed on a busy scheduler: loaded without the claim


def with_scheduler_guard(attempt: Callable[[bool], Any], guard: bool, retries: int,
                         label: str = "load") -> tuple[Any, GuardOutcome]:
    """Run `attempt(guard)` on fresh connections until a scheduler is free.

    Each attempt opens its own session (the scheduler is picked per connection), so a busy
    answer means: close, reconnect, try again, up to `retries` times. Then the load runs
    anyway without the claim, and the outcome records that it shared a scheduler: a load
    late by a busy scheduler is better than no load.
    """
    attempts, shared = 0, False
    while True:
        attempts += 1
        try:
            return attempt(guard), GuardOutcome(attempts, guard, shared)
        except SchedulerBusy:
            if not guard:
                raise
            if attempts <= retries:
                log.info("%s: scheduler taken by another load, reconnecting (attempt %d of %d)",
                         label, attempts, retries)
                continue
            log.warning("%s: %d reconnects all landed on busy schedulers; loading without the claim",
                        label, retries)
            guard, shared = False, True
