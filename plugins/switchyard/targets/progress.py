"""The server's own progress of a bulk load, sampled over a side connection (where an engine
reports one: its `copy_progress.sql` template)."""
from __future__ import annotations

from contextlib import ExitStack
from typing import Any


class ServerProgress:
    """Samples the server's own progress of a bulk load into one staging table.

    Returns (rows processed, bytes processed) or None while the server has not started
    the load yet. The side connection opens at the first sample and closes with `close()`:
    one small query per sample, over one connection for the whole load.
    """

    def __init__(self, adapter: Any, schema: str, table: str):
        self.adapter = adapter
        self.sql, = adapter.render("copy_progress.sql")
        self.target = adapter.qualified(schema, table)
        self._stack = ExitStack()
        self._conn = None

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
