"""What the SQL Server instance is and says: its platform and code pages, recovery model and log
chain, data files, schedulers and layout, and its wait and latch counters."""
from __future__ import annotations

import logging
from typing import Any

from switchyard.core.planner import StreamPlan
from switchyard.targets.mssql.dmv import (
    _STAT_FIELDS,
    IDLE_WAITS,
    LATCH_STATS_SQL,
    SCHEDULER_COUNT_SQL,
    SESSION_STATS_SQL,
    WAIT_STATS_SQL,
    snapshot_delta,
)
from switchyard.targets.mssql.errors import _message
from switchyard.targets.mssql.recovery import LAST_LOG_BACKUP_SQL, RECOVERY_SQL, RecoveryState
from switchyard.targets.mssql.server_config import LAYOUT_SQL, Layout, layout_from_json

log = logging.getLogger(__name__)

HOST_PLATFORM_SQL = ("SELECT host_platform, CONVERT(int, SERVERPROPERTY('ProductMajorVersion')) "
                     "FROM sys.dm_os_host_info")
# A character column's code page (0 for nchar/nvarchar, 65001 for a _UTF8 collation).
CODE_PAGES_SQL = ("SELECT c.name, COLLATIONPROPERTY(c.collation_name, 'CodePage') FROM sys.columns AS c "
                  "WHERE c.object_id = OBJECT_ID(?) AND c.collation_name IS NOT NULL")
# Data files only (type 0: ROWS).
USED_PAGES_SQL = "SELECT name, FILEPROPERTY(name, 'SpaceUsed') FROM sys.database_files WHERE [type] = 0"


class MssqlServer:
    """Reads of the instance's state, for the pre-flight, the loads and the run's statistics."""

    # --- steps ----------------------------------------------------------------------------
    def recovery_model(self) -> str:
        return self.fetch("SELECT recovery_model_desc FROM sys.databases WHERE database_id = DB_ID()")[0][0]

    def recovery_state(self, cur=None) -> RecoveryState:
        """The database's recovery model, availability group, mirroring and log chain."""
        if cur is None:
            with self.connection() as conn:
                return self.recovery_state(conn.cursor())
        row = cur.execute(RECOVERY_SQL).fetchone()
        last = None
        try:
            last = cur.execute(LAST_LOG_BACKUP_SQL).fetchone()[0]
        except Exception as exc:  # msdb's history is optional: the login may not read it
            log.info("last log backup unknown (%s)", _message(exc))
        return RecoveryState.from_row(tuple(row), last)

    def used_pages(self, cur) -> dict[str, int]:
        """Pages each data file holds now (FILEPROPERTY SpaceUsed): files grow by what a batch adds."""
        return {name: int(pages or 0) for name, pages in cur.execute(USED_PAGES_SQL).fetchall()}

    def session_stats(self, cur) -> dict[str, Any]:
        row = cur.execute(SESSION_STATS_SQL).fetchone()
        return dict(zip(_STAT_FIELDS, row)) if row else {}

    def server(self, cur) -> tuple[str, int]:
        """(Windows or Linux, major version): sys.dm_os_host_info (2017+; before it, Windows only)."""
        if self._server is None:
            try:
                platform, major = cur.execute(HOST_PLATFORM_SQL).fetchone()
                self._server = (str(platform), int(major))
            except Exception:
                self._server = ("Windows", 13)
        return self._server

    def code_pages(self, stream: StreamPlan) -> dict[str, int]:
        """Each character column's code page in the staging table (65001: a _UTF8 collation)."""
        return {name: int(page) for name, page in self.fetch(CODE_PAGES_SQL, (
            self.qualified(self.staging_schema, stream.staging_table),), stream.stream) if page is not None}

    def scheduler_count(self) -> int:
        return int(self.fetch(SCHEDULER_COUNT_SQL)[0][0])

    def server_layout(self) -> Layout:
        """The server's nodes, processor groups, CPUs and schedulers (LAYOUT_SQL, the query
        `plan --emit server-config` prints for a DBA to run)."""
        # FOR JSON hands a long document back cut into rows of about 2 KB: joined in order.
        return layout_from_json("".join(r[0] for r in self.fetch(LAYOUT_SQL)))

    def wait_stats_snapshot(self) -> dict[str, tuple]:
        return {r[0]: tuple(int(v) for v in r[1:]) for r in self.fetch(WAIT_STATS_SQL)}

    def latch_stats_snapshot(self) -> dict[str, tuple]:
        return {r[0]: tuple(int(v) for v in r[1:]) for r in self.fetch(LATCH_STATS_SQL)}

    def server_snapshot(self) -> dict:
        """Cumulative waits and latches now, as JSON types (lists, not tuples) for XCom."""
        return {"waits": {k: list(v) for k, v in self.wait_stats_snapshot().items() if k not in IDLE_WAITS},
                "latches": {k: list(v) for k, v in self.latch_stats_snapshot().items()}}

    def server_delta(self, before: dict, after: dict, top: int = 10) -> dict:
        return snapshot_delta(before, after, top)

    def row_count(self, table: str) -> int:
        return int(self.fetch(f"SELECT COUNT_BIG(*) FROM {self.qualified(self.schema, table)}")[0][0])
