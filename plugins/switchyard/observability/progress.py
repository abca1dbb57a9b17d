"""Progress of one long load in its task's log: rows, MB, MB/s and percent of the file.

The adapters call a progress callback with the bytes sent so far; this module turns those
calls into a log line every few seconds. Where the target reports its own progress
(`TargetAdapter.server_progress`: PostgreSQL's `pg_stat_progress_copy`), the line also
carries the rows the server has processed: one small query per line, nothing per chunk.
"""
from __future__ import annotations

import logging
import time
from typing import Callable

log = logging.getLogger(__name__)


def every_seconds() -> float:
    """The interval between progress lines (SWITCHYARD_PROGRESS_SECONDS, default 5)."""
    from switchyard.settings import get
    return get().progress_seconds


class LoadProgress:
    """The progress callback of one load: logs a line at most every `every` seconds."""

    def __init__(self, group_id: str, every: float | None = None,
                 server: Callable[[], tuple[int, int] | None] | None = None,
                 clock: Callable[[], float] = time.monotonic, logger: logging.Logger = log):
        self.group_id = group_id
        self.every = every_seconds() if every is None else every
        self.server = server
        self.clock = clock
        self.log = logger
        self.began = clock()
        self.last = self.began
        self.lines = 0

    def __call__(self, sent: int, total: int) -> None:
        now = self.clock()
        if now - self.last < self.every:
            return
        self.last = now
        self.log.info("%s", self.line(sent, total, now))
        self.lines += 1

    def _server_rows(self) -> int | None:
        if self.server is None:
            return None
        try:
            sample = self.server()
        except Exception as exc:  # progress is a courtesy: never let it fail a load
            self.log.warning("%s: server progress unavailable (%s); logging bytes only", self.group_id, exc)
            self.server = None
            return None
        return sample[0] if sample else None

    def line(self, sent: int, total: int, now: float) -> str:
        elapsed = max(now - self.began, 1e-9)
        mb = sent / 1e6
        rows = self._server_rows()
        counted = f"{rows:,} rows, " if rows is not None else ""
        rows_rate = f", {rows / elapsed:,.0f} rows/s" if rows is not None else ""
        return (f"{self.group_id}: progress {counted}{mb:,.1f} of {total / 1e6:,.1f} MB "
                f"({100.0 * sent / max(total, 1):.0f}%), {mb / elapsed:,.1f} MB/s{rows_rate} after {elapsed:,.1f} s")
