"""Progress of one long load in its task's log: rows, MB, MB/s and percent of the file.

The adapters call a progress callback with the bytes sent so far; this module turns those
calls into a log line every few seconds. Where the target reports its own progress (the
engine has a `copy_progress.sql` template: PostgreSQL's `pg_stat_progress_copy`), the line
also carries the rows the server has processed, sampled over one side connection that
stays open for the load: one small query per line, nothing per chunk.
"""
from __future__ import annotations

import logging
import os
import time
from contextlib import ExitStack
from typing import Any, Callable

log = logging.getLogger(__name__)

DEFAULT_EVERY_SECONDS = 5.0


def every_seconds() -> float:
    """The interval between progress lines (SWITCHYARD_PROGRESS_SECONDS, default 5)."""
    return float(os.environ.get("SWITCHYARD_PROGRESS_SECONDS", DEFAULT_EVERY_SECONDS))


class ServerProgress:
    """Samples the server's own progress of a bulk load into one staging table.

    Returns (rows processed, bytes processed) or None while the server has not started
    the load yet. The side connection opens at the first sample and closes with `close()`.
    """

    def __init__(self, adapter: Any, schema: str, table: str):
        self.adapter = adapter
        self.sql, = adapter.render("copy_progress.sql")
        self.target = adapter.qualified(schema, table)
        self._stack = ExitStack()
        self._conn = None

    @staticmethod
    def available(adapter: Any) -> bool:
        from switchyard.targets.base import SQL_ROOT
        return (SQL_ROOT / adapter.engine / "copy_progress.sql").is_file()

    def __call__(self) -> tuple[int, int] | None:
        if self._conn is None:
            self._conn = self._stack.enter_context(self.adapter.connection())
            self._conn.autocommit = True
        cur = self._conn.cursor()
        cur.execute(self.sql, (self.target,))
        row = cur.fetchone()
        return (int(row[0]), int(row[1])) if row else None

    def close(self) -> None:
        self._stack.close()


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
