"""What the server's DMVs say about a load and the run: where a session ran (scheduler, CPU,
node, port), what it cost, and the server-wide waits and latches around a run."""
from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, Mapping

from ...planner import StreamPlan

if TYPE_CHECKING:
    from .adapter import MssqlAdapter

log = logging.getLogger(__name__)

WAIT_STATS_SQL = ("SELECT wait_type, waiting_tasks_count, wait_time_ms, signal_wait_time_ms "
                  "FROM sys.dm_os_wait_stats WHERE waiting_tasks_count > 0")
LATCH_STATS_SQL = ("SELECT latch_class, waiting_requests_count, wait_time_ms, max_wait_time_ms "
                   "FROM sys.dm_os_latch_stats WHERE waiting_requests_count > 0")
SCHEDULER_COUNT_SQL = "SELECT COUNT(*) FROM sys.dm_os_schedulers WHERE status = 'VISIBLE ONLINE'"
# Where this session runs and what it has cost so far; the scheduler a BULK INSERT claimed
# is in the session context (the stats query itself may run on another scheduler).
SESSION_STATS_SQL = """
SELECT s.session_id, COALESCE(CONVERT(int, SESSION_CONTEXT(N'switchyard.scheduler')), r.scheduler_id),
       sch.cpu_id, sch.parent_node_id, c.local_tcp_port, s.reads, s.writes, s.cpu_time
FROM sys.dm_exec_sessions AS s
JOIN sys.dm_exec_requests AS r ON r.session_id = s.session_id
LEFT JOIN sys.dm_exec_connections AS c ON c.session_id = s.session_id AND c.parent_connection_id IS NULL
LEFT JOIN sys.dm_os_schedulers AS sch
       ON sch.scheduler_id = COALESCE(CONVERT(int, SESSION_CONTEXT(N'switchyard.scheduler')), r.scheduler_id)
WHERE s.session_id = @@SPID
"""
# The session bulk-loading a table is the one holding its table lock (BU with TABLOCK on a heap).
BULK_SESSION_SQL = """
SELECT TOP (1) s.session_id, r.scheduler_id, sch.cpu_id, sch.parent_node_id, c.local_tcp_port,
       s.reads, s.writes, s.cpu_time
FROM sys.dm_tran_locks AS l
JOIN sys.dm_exec_sessions AS s ON s.session_id = l.request_session_id
LEFT JOIN sys.dm_exec_requests AS r ON r.session_id = s.session_id
LEFT JOIN sys.dm_os_schedulers AS sch ON sch.scheduler_id = r.scheduler_id
LEFT JOIN sys.dm_exec_connections AS c ON c.session_id = s.session_id AND c.parent_connection_id IS NULL
WHERE l.resource_type = 'OBJECT' AND l.resource_database_id = DB_ID()
  AND l.resource_associated_entity_id = OBJECT_ID(?) AND l.request_mode IN ('BU', 'X')
  AND l.request_session_id <> @@SPID
"""
_STAT_FIELDS = ("session_id", "scheduler_id", "cpu_id", "node_id", "local_tcp_port", "reads", "writes",
                "cpu_time_ms")


def stats_delta(before: Mapping[str, tuple], after: Mapping[str, tuple]) -> dict[str, tuple]:
    """What accrued between two wait- or latch-stats snapshots (cumulative counters), busiest first."""
    out = {}
    for key, values in after.items():
        prior = before.get(key, (0,) * len(values))
        delta = tuple(a - b for a, b in zip(values, prior))
        if any(delta):
            out[key] = delta
    return dict(sorted(out.items(), key=lambda kv: -kv[1][1] if len(kv[1]) > 1 else 0))


# Waits of background tasks that sleep by design (the lazy writer, checkpoint, Service
# Broker, extended events, WAITFOR ...): they grow with wall time whatever the load does,
# so they would top every delta and hide the waits a load causes.
IDLE_WAITS = frozenset({
    "BROKER_EVENTHANDLER", "BROKER_RECEIVE_WAITFOR", "BROKER_TASK_STOP", "BROKER_TO_FLUSH",
    "BROKER_TRANSMITTER", "CHECKPOINT_QUEUE", "CHKPT", "CLR_AUTO_EVENT", "CLR_MANUAL_EVENT",
    "CLR_SEMAPHORE", "DIRTY_PAGE_POLL", "DISPATCHER_QUEUE_SEMAPHORE", "FT_IFTS_SCHEDULER_IDLE_WAIT",
    "FT_IFTSHC_MUTEX", "HADR_FILESTREAM_IOMGR_IOCOMPLETION", "HADR_WORK_QUEUE", "KSOURCE_WAKEUP",
    "LAZYWRITER_SLEEP", "LOGMGR_QUEUE", "ONDEMAND_TASK_QUEUE", "PWAIT_ALL_COMPONENTS_INITIALIZED",
    "PVS_PREALLOCATE", "QDS_ASYNC_QUEUE", "QDS_CLEANUP_STALE_QUERIES_TASK_MAIN_LOOP_SLEEP",
    "QDS_PERSIST_TASK_MAIN_LOOP_SLEEP", "REQUEST_FOR_DEADLOCK_SEARCH", "RESOURCE_QUEUE",
    "SERVER_IDLE_CHECK", "SLEEP_BPOOL_FLUSH", "SLEEP_DBSTARTUP", "SLEEP_DCOMSTARTUP",
    "SLEEP_MASTERDBREADY", "SLEEP_MASTERMDREADY", "SLEEP_MASTERUPGRADED", "SLEEP_MSDBSTARTUP",
    "SLEEP_SYSTEMTASK", "SLEEP_TASK", "SLEEP_TEMPDBSTARTUP", "SNI_HTTP_ACCEPT", "SOS_WORK_DISPATCHER",
    "SP_SERVER_DIAGNOSTICS_SLEEP", "SQLTRACE_BUFFER_FLUSH", "SQLTRACE_INCREMENTAL_FLUSH_SLEEP",
    "WAITFOR", "WAIT_XTP_CKPT_CLOSE", "WAIT_XTP_HOST_WAIT", "WAIT_XTP_OFFLINE_CKPT_NEW_LOG",
    "XE_DISPATCHER_JOIN", "XE_DISPATCHER_WAIT", "XE_LIVE_TARGET_TVF", "XE_TIMER_EVENT",
})


def snapshot_delta(before: Mapping[str, Any], after: Mapping[str, Any], top: int = 10) -> dict[str, list[dict]]:
    """`server_delta`: the waits and latches that accrued between two server snapshots.

    Snapshots are `{"waits": {wait_type: [waiting_tasks, wait_ms, signal_ms]}, "latches":
    {latch_class: [waiting_requests, wait_ms, max_wait_ms]}}` (lists: they come back from
    JSON). A counter lower after than before means the counters were reset in between (a
    restart, DBCC SQLPERF ... CLEAR): the after value alone is then what accrued since.
    """
    def accrued(kind: str) -> dict[str, tuple]:
        prior = {k: tuple(v) for k, v in (before.get(kind) or {}).items()}
        now = {k: tuple(v) for k, v in (after.get(kind) or {}).items()}
        reset = {k for k, v in now.items() if k in prior and any(a < b for a, b in zip(v, prior[k]))}
        return stats_delta({k: v for k, v in prior.items() if k not in reset}, now)

    waits = [{"wait_type": k, "wait_ms": v[1], "signal_ms": v[2], "waiting_tasks": v[0]}
             for k, v in accrued("waits").items() if k not in IDLE_WAITS and v[1] > 0]
    latches = [{"latch_class": k, "wait_ms": v[1], "waiting_requests": v[0]}
               for k, v in accrued("latches").items() if v[1] > 0]
    order = lambda row: (-row["wait_ms"], row.get("wait_type") or row.get("latch_class"))  # noqa: E731
    return {"waits": sorted(waits, key=order)[:top], "latches": sorted(latches, key=order)[:top]}



class _BulkSessionWatcher:
    """Samples the session that bulk-loads a staging table, from a connection of its own.

    mssql-python's bulk copy opens its own TDS session, which our code cannot query; the
    session holding the staging table's bulk-load lock is that one.
    """

    def __init__(self, adapter: MssqlAdapter, stream: StreamPlan, staging: str, every: float = 1.0):
        self.adapter, self.stream, self.staging, self.every = adapter, stream, staging, every
        self.sample: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.stream.group_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            conn = self.adapter.connect_odbc(self.stream.stream)
        except Exception as exc:  # statistics are best effort; the load goes on
            log.info("%s: no session statistics (%s)", self.stream.group_id, exc)
            return
        try:
            cur = conn.cursor()
            while not self._stop.is_set():
                row = cur.execute(BULK_SESSION_SQL, self.staging).fetchone()
                if row:
                    self.sample = dict(zip(_STAT_FIELDS, row))
                self._stop.wait(self.every)
        except Exception as exc:
            log.info("%s: session statistics stopped (%s)", self.stream.group_id, exc)
        finally:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)


def _load_details(before: dict, after: dict, port: int, mode: str) -> dict[str, Any]:
    out = {k: after.get(k) for k in ("session_id", "scheduler_id", "cpu_id", "node_id", "local_tcp_port")}
    for k in ("reads", "writes", "cpu_time_ms"):
        if after.get(k) is not None and before.get(k) is not None:
            out[k] = int(after[k]) - int(before[k])
    out.update(port=port, mode=mode)
    return out

