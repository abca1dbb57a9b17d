"""What the server's DMVs say about a load and the run: where a session ran (scheduler, CPU,
node, port), what it cost, how it was logged, and the server-wide waits and latches."""
from __future__ import annotations

import logging
import statistics
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from switchyard.core.planner import StreamPlan

if TYPE_CHECKING:
    from switchyard.targets.mssql.session import MssqlSession

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
       sch.cpu_id, sch.parent_node_id, c.local_tcp_port, s.reads, s.writes, s.cpu_time,
       CONVERT(nvarchar(60), DATABASEPROPERTYEX(DB_NAME(), 'Recovery'))
FROM sys.dm_exec_sessions AS s
JOIN sys.dm_exec_requests AS r ON r.session_id = s.session_id
LEFT JOIN sys.dm_exec_connections AS c ON c.session_id = s.session_id AND c.parent_connection_id IS NULL
LEFT JOIN sys.dm_os_schedulers AS sch
       ON sch.scheduler_id = COALESCE(CONVERT(int, SESSION_CONTEXT(N'switchyard.scheduler')), r.scheduler_id)
WHERE s.session_id = @@SPID
"""
# The session bulk-loading a table is the one holding its table lock (BU with TABLOCK on a heap).
BULK_SESSION_SQL = """
SELECT TOP (1) l.request_session_id
FROM sys.dm_tran_locks AS l
WHERE l.resource_type = 'OBJECT' AND l.resource_database_id = DB_ID()
  AND l.resource_associated_entity_id = OBJECT_ID(?) AND l.request_mode IN ('BU', 'X')
  AND l.request_session_id <> @@SPID
"""
# One look at a loading session from another connection: where it runs (its request's
# scheduler, that scheduler's CPU and node, the port it came in on), what it has cost, and
# how its open transaction is logged against what the heap has grown by. A load commits
# every BATCHSIZE rows, one transaction each; sys.dm_tran_database_transactions counts the
# log bytes and records of the open one, sys.dm_db_partition_stats the heap's rows and
# pages (index_id 0: a heap).
LOAD_SAMPLE_SQL = """
SELECT s.session_id, r.scheduler_id, sch.cpu_id, sch.parent_node_id, c.local_tcp_port, s.reads, s.writes,
       s.cpu_time, CONVERT(nvarchar(60), DATABASEPROPERTYEX(DB_NAME(), 'Recovery')),
       t.transaction_id, t.log_bytes, t.log_records, h.heap_rows, h.heap_pages
FROM sys.dm_exec_sessions AS s
LEFT JOIN sys.dm_exec_requests AS r ON r.session_id = s.session_id
LEFT JOIN sys.dm_os_schedulers AS sch ON sch.scheduler_id = r.scheduler_id
LEFT JOIN sys.dm_exec_connections AS c ON c.session_id = s.session_id AND c.parent_connection_id IS NULL
OUTER APPLY (SELECT TOP (1) st.transaction_id, dt.database_transaction_log_bytes_used AS log_bytes,
                    dt.database_transaction_log_record_count AS log_records
             FROM sys.dm_tran_session_transactions AS st
             JOIN sys.dm_tran_database_transactions AS dt
               ON dt.transaction_id = st.transaction_id AND dt.database_id = DB_ID()
             WHERE st.session_id = s.session_id
             ORDER BY dt.database_transaction_log_bytes_used DESC) AS t
OUTER APPLY (SELECT SUM(ps.row_count) AS heap_rows, SUM(ps.used_page_count) AS heap_pages
             FROM sys.dm_db_partition_stats AS ps
             WHERE ps.object_id = OBJECT_ID(?) AND ps.index_id = 0) AS h
WHERE s.session_id = ?
"""
_STAT_FIELDS = ("session_id", "scheduler_id", "cpu_id", "node_id", "local_tcp_port", "reads", "writes",
                "cpu_time_ms", "recovery_model")
_LOG_FIELDS = ("transaction_id", "log_bytes", "log_records", "heap_rows", "heap_pages")

PAGE = 8192
# Fully logged, a row's log record carries the row: at least about its size in log bytes.
# Minimally logged, only page allocations are logged: a few bytes per 8-KB page written.
# Between the two lies a wide gap; the threshold sits in it.
MINIMAL_BELOW = 0.25
MIN_ROWS_IN_SAMPLE = 1000


@dataclass(frozen=True)
class LogSample:
    """One look at the loading session's open transaction and the heap it fills."""
    transaction_id: int | None
    log_bytes: int | None
    log_records: int | None
    heap_rows: int | None
    heap_pages: int | None


def log_ratios(samples: Sequence[LogSample], batch_size: int) -> list[float]:
    """Log bytes per byte of data pages written, from the samples that can say.

    Two looks at one transaction: the log bytes it added over the pages the heap grew by.
    One look alone: the transaction's log bytes over the rows it has inserted so far (the
    heap's rows past the last full batch) times the heap's bytes per row.
    """
    out = []
    for a, b in zip(samples, samples[1:]):
        if (a.transaction_id is not None and a.transaction_id == b.transaction_id and None not in
                (a.log_bytes, b.log_bytes, a.heap_pages, b.heap_pages) and b.heap_pages - a.heap_pages >= 8):
            out.append((b.log_bytes - a.log_bytes) / ((b.heap_pages - a.heap_pages) * PAGE))
    if out:
        return out
    for x in samples:
        if x.transaction_id is None or None in (x.log_bytes, x.heap_rows, x.heap_pages) or not x.heap_rows:
            continue
        in_batch = x.heap_rows % batch_size
        if in_batch >= MIN_ROWS_IN_SAMPLE and x.heap_pages:
            out.append(x.log_bytes / (in_batch * x.heap_pages * PAGE / x.heap_rows))
    return out


def load_logging(samples: Sequence[LogSample], batch_size: int, recovery_model: str | None) -> dict[str, Any]:
    """How a load was logged: measured from the samples where they say, else by SQL Server's
    rules (TABLOCK into an empty heap, as every load here is: minimal under SIMPLE and
    BULK_LOGGED, full under FULL)."""
    model = (recovery_model or "").upper() or None
    expected = None if model is None else ("minimal" if model in ("SIMPLE", "BULK_LOGGED") else "full")
    ratios = log_ratios(samples, batch_size)
    out: dict[str, Any] = {"recovery_model": model}
    if ratios:
        ratio = statistics.median(ratios)
        measured = "minimal" if ratio < MINIMAL_BELOW else "full"
        out.update(logging=measured, logging_basis=f"measured ({len(ratios)} sample(s))", log_ratio=round(ratio, 4))
        if expected and measured != expected:
            out["logging_note"] = (f"logged {measured}ly under {model} recovery, where the rules say {expected}: "
                                   "check trace flags, replication and the table's state")
    elif expected:
        out.update(logging=expected, logging_basis=f"rules ({model} recovery, TABLOCK into an empty heap; no "
                                                   "sample fell inside a transaction)")
    else:
        out.update(logging="unknown", logging_basis="no sample and no recovery model")
    return out


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



class LoadWatcher:
    """Samples the session that loads a staging table, from a connection of its own.

    For BULK INSERT the session is known (the loader's own); mssql-python's bulk copy opens
    a TDS session of its own, which our code cannot query: the session holding the staging
    table's bulk-load lock is that one.
    """

    def __init__(self, adapter: MssqlSession, stream: StreamPlan, staging: str, session_id: int | None = None,
                 every: float | None = 0.5):
        self.adapter, self.stream, self.staging, self.every = adapter, stream, staging, every
        self.session_id = session_id
        self.sample: dict[str, Any] | None = None
        self.log_samples: list[LogSample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self.every:
            return  # watching switched off: the rules decide how the load was logged
        self._thread = threading.Thread(target=self._run, name=f"watch-{self.stream.group_id}", daemon=True)
        self._thread.start()

    def _look(self, cur) -> None:
        if self.session_id is None:
            row = cur.execute(BULK_SESSION_SQL, self.staging).fetchone()
            if not row:
                return
            self.session_id = int(row[0])
        row = cur.execute(LOAD_SAMPLE_SQL, self.staging, self.session_id).fetchone()
        if row:
            values = tuple(row)
            self.sample = dict(zip(_STAT_FIELDS, values[:len(_STAT_FIELDS)]))
            self.log_samples.append(LogSample(*values[len(_STAT_FIELDS):]))

    def _run(self) -> None:
        try:
            conn = self.adapter.connect_odbc(self.stream.stream)
        except Exception as exc:  # statistics are best effort; the load goes on
            log.info("%s: no session statistics (%s)", self.stream.group_id, exc)
            return
        try:
            cur = conn.cursor()
            while not self._stop.is_set():
                self._look(cur)
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
    out = {k: after.get(k) for k in ("session_id", "scheduler_id", "cpu_id", "node_id", "local_tcp_port",
                                     "recovery_model")}
    for k in ("reads", "writes", "cpu_time_ms"):
        if after.get(k) is not None and before.get(k) is not None:
            out[k] = int(after[k]) - int(before[k])
    out.update(port=port, mode=mode)
    return out

