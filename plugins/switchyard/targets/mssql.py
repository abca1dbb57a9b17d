"""SQL Server: the record-load method itself.

* one filegroup per stream (`fg<k>`, N files each), a RANGE LEFT partition function per
  table and a scheme mapping stream k's partition to `fg<k>`;
* one heap staging table per (table, stream) on its filegroup, with the partition's range
  as a trusted CHECK constraint;
* the load, chosen per deployment (`load_mode`):
  - `bulk_insert`: server-side BULK INSERT of the file (the 2010 run), the worker's path
    mapped to the path the server sees (`server_data_root`);
  - `tds` (alias `bcp`): the worker parses the file and streams rows over TDS bulk copy
    with a table lock (the 2008 run), for files the server cannot see;
* each stream's connection pinned to a TCP port from a port map (the record runs mapped
  ports to soft-NUMA nodes), and, for BULK INSERT, one load per scheduler claimed with a
  session applock;
* SWITCH of the validated staging table into its partition, WAIT_AT_LOW_PRIORITY;
* one run at a time per target schema: the run lease (base.py), a row in the control
  schema's `run_lease` taken with MERGE ... WITH (HOLDLOCK) (lease_claim.sql).

Drivers: pyodbc with Microsoft ODBC Driver 18 for DDL, BULK INSERT, statistics and for
Great Expectations (mssql+pyodbc); mssql-python only for its TDS bulk copy. Both are
imported inside the functions that use them.
"""
from __future__ import annotations

import dataclasses
import glob
import logging
import math
import platform
import re
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import parse_qsl, unquote, urlsplit

from switchyard.core.planner import LoadPlan, StreamPlan, plan_tpch
from switchyard.core.spec import LoadSpec, Table
from switchyard.targets.base import LoadResult, ProgressCallback, TargetAdapter, TargetError

log = logging.getLogger(__name__)

LOAD_MODES = ("bulk_insert", "tds")
_MODE_ALIASES = {"bulk_insert": "bulk_insert", "bulk-insert": "bulk_insert", "tds": "tds", "bcp": "tds"}
# Largest TDS packet SQL Server accepts (the record run's "32 KB" instead of 4 KB).
MAX_PACKET_SIZE = 32767
DEFAULT_PORT = 1433
DEFAULT_FILE_DIR = "/var/opt/mssql/data"
SCHEDULER_BUSY_ERROR = 51001
SCHEDULER_BUSY_MESSAGE = "switchyard: another load holds this scheduler"
ODBC_DRIVER_NAME = "ODBC Driver 18 for SQL Server"
# Settings read from a connection's extras or a URI's query, besides the constructor's.
ADAPTER_OPTIONS = ("load_mode", "server_data_root", "local_data_root", "ports", "base_port", "port_count",
                   "file_dirs", "files_per_filegroup", "file_size_mb", "file_growth_mb", "batch_size",
                   "packet_size", "scheduler_guard", "guard_retries", "odbc_driver", "codepage",
                   "login_timeout")
# ODBC attributes passed through to both drivers; anything else in extras is refused.
ODBC_ATTRIBUTES = {"encrypt": "Encrypt", "trustservercertificate": "TrustServerCertificate",
                   "hostnameincertificate": "HostNameInCertificate"}
# A path the server reads is written into a string literal: only plain characters.
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_.:/\\ -]+$")
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_.-]+$")


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def _int_list(value: Any) -> list[int]:
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\s]+", value) if v]
    try:
        out = [int(v) for v in value]
    except (TypeError, ValueError) as exc:
        raise TargetError(f"ports: {value!r} is not a list of port numbers") from exc
    for p in out:
        if not 0 < p < 65536:
            raise TargetError(f"ports: {p} is not a TCP port")
    return out


@dataclass(frozen=True)
class Endpoint:
    """Where the server is and who logs in; the port comes from the port map per stream."""
    host: str = "localhost"
    port: int = DEFAULT_PORT
    user: str | None = None
    password: str | None = None
    database: str = "switchyard"
    attributes: tuple[tuple[str, str], ...] = ()


def parse_uri(uri: str) -> tuple[Endpoint, dict[str, str]]:
    """`mssql://user:password@host:port/database?option=value&...` into an endpoint and options.

    Options are the adapter's settings (ADAPTER_OPTIONS) and the ODBC attributes Encrypt,
    TrustServerCertificate and HostNameInCertificate.
    """
    parts = urlsplit(uri)
    if parts.scheme not in ("mssql", "sqlserver", "mssql+pyodbc"):
        raise TargetError(f"{parts.scheme!r} is not an SQL Server URI scheme (use mssql://user:password@host:port/database)")
    database = unquote(parts.path.lstrip("/")) or "switchyard"
    query = dict(parse_qsl(parts.query))
    options = {k: v for k, v in query.items() if k in ADAPTER_OPTIONS}
    attributes = _odbc_attributes({k: v for k, v in query.items() if k not in ADAPTER_OPTIONS})
    return Endpoint(host=parts.hostname or "localhost", port=parts.port or DEFAULT_PORT,
                    user=unquote(parts.username) if parts.username else None,
                    password=unquote(parts.password) if parts.password is not None else None,
                    database=database, attributes=attributes), options


def _odbc_attributes(raw: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    out = []
    for key, value in raw.items():
        name = ODBC_ATTRIBUTES.get(key.lower())
        if name is None:
            raise TargetError(f"connection option {key!r} is not known (known: "
                              f"{', '.join(ADAPTER_OPTIONS + tuple(ODBC_ATTRIBUTES.values()))})")
        value = str(value)
        if not _SAFE_VALUE.match(value):
            raise TargetError(f"connection option {key}: {value!r} has characters that are not allowed")
        out.append((name, value))
    return tuple(out)


def odbc_value(value: str) -> str:
    """An ODBC connection-string value, braced when it holds anything special."""
    if re.search(r"[;{}=\s]", value) or value != value.strip():
        return "{" + value.replace("}", "}}") + "}"
    return value


def find_odbc_driver() -> str:
    """The Microsoft ODBC Driver 18 library shipped in the mssql-python-odbc wheel, else its name.

    Using the wheel's library means no Microsoft apt repository is needed; unixODBC's
    libodbc.so.2 (Debian package `unixodbc`) is still needed by pyodbc itself.
    """
    try:
        import mssql_python_odbc
    except ImportError:
        return ODBC_DRIVER_NAME
    libs = mssql_python_odbc.get_libs_dir()
    distro = "debian_ubuntu"
    try:
        release = Path("/etc/os-release").read_text().lower()
        if re.search(r"^id(_like)?=.*(rhel|fedora|centos)", release, re.M):
            distro = "rhel"
        elif re.search(r"^id(_like)?=.*suse", release, re.M):
            distro = "suse"
    except OSError:
        pass
    arch = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower())
    for pattern in (f"{libs}/linux/{distro}/{arch}/lib/libmsodbcsql-18*.so*",
                    f"{libs}/linux/*/{arch}/lib/libmsodbcsql-18*.so*"):
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return ODBC_DRIVER_NAME


# --- the TDS path: parsing lines without locale rules --------------------------------------
_INT = re.compile(r"-?[0-9]+\Z")
_DEC = re.compile(r"-?[0-9]+(\.[0-9]+)?\Z")
_FLOAT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\Z")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\Z")
_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,7})?)?)?\Z")
_TYPE = re.compile(r"^([a-z ]+?)\s*(?:\((\d+)(?:,\s?(\d+))?\))?$")
_INT_RANGES = {"tinyint": (0, 255), "smallint": (-2**15, 2**15 - 1), "int": (-2**31, 2**31 - 1),
               "integer": (-2**31, 2**31 - 1), "bigint": (-2**63, 2**63 - 1)}


def converter(sql_type: str) -> Callable[[str], Any]:
    """A strict text-to-value function for one SQL Server column type; raises ValueError."""
    m = _TYPE.match(sql_type.strip().lower())
    if not m:
        raise TargetError(f"column type {sql_type!r} is not understood by the TDS loader")
    base, length = m.group(1), m.group(2)
    if base in _INT_RANGES:
        lo, hi = _INT_RANGES[base]

        def to_int(text: str) -> int:
            if not _INT.match(text):
                raise ValueError("not an integer")
            value = int(text)
            if not lo <= value <= hi:
                raise ValueError(f"outside the {base} range")
            return value
        return to_int
    if base in ("money", "smallmoney", "decimal", "numeric"):
        def to_decimal(text: str) -> Decimal:
            if not _DEC.match(text):
                raise ValueError("not a decimal number")
            return Decimal(text)
        return to_decimal
    if base in ("float", "real", "double precision"):
        def to_float(text: str) -> float:
            if not _FLOAT.match(text):
                raise ValueError("not a number")
            return float(text)
        return to_float
    if base == "date":
        def to_date(text: str) -> date:
            m = _DATE.match(text)
            if not m:
                raise ValueError("not a yyyy-mm-dd date")
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        return to_date
    if base in ("datetime", "datetime2", "smalldatetime"):
        def to_datetime(text: str) -> datetime:
            if not _DATETIME.match(text):
                raise ValueError("not an ISO date and time")
            return datetime.fromisoformat(text.replace("T", " ")[:26])
        return to_datetime
    if base in ("char", "varchar", "nchar", "nvarchar", "text"):
        limit = int(length) if length else None

        def to_str(text: str) -> str:
            if limit is not None and len(text) > limit:
                raise ValueError(f"longer than {limit} characters")
            return text
        return to_str
    if base == "bit":
        def to_bit(text: str) -> bool:
            if text not in ("0", "1"):
                raise ValueError("not 0 or 1")
            return text == "1"
        return to_bit
    raise TargetError(f"column type {sql_type!r} has no converter in the TDS loader")


class FileRows:
    """The rows of one stream file as typed tuples, for TDS bulk copy.

    Iterating raises TargetError naming the file, line and column of the first bad field;
    the error is also kept in `error`, since a driver may wrap what its iterator raised.
    """

    def __init__(self, path: Path, table: Table, engine: str, delimiter: str, trailing_delimiter: bool,
                 encoding: str = "utf-8", progress: ProgressCallback | None = None,
                 context: str = ""):
        self.path = path
        self.names = [c.name for c in table.columns]
        self.convert = [converter(c.sql_type(engine)) for c in table.columns]
        self.delimiter = delimiter
        self.trailing = trailing_delimiter
        self.encoding = encoding
        self.progress = progress
        self.context = context
        self.rows = 0
        self.bytes = 0
        self.error: TargetError | None = None

    def _fail(self, lineno: int, message: str) -> TargetError:
        self.error = TargetError(f"{self.path}: line {lineno}: {message}{self.context}", permanent=True)
        return self.error

    def __iter__(self) -> Iterator[tuple]:
        total = self.path.stat().st_size
        expected = len(self.names) + (1 if self.trailing else 0)
        names, convert, sep = self.names, self.convert, self.delimiter
        reported = 0
        with self.path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                self.bytes += len(raw)
                try:
                    line = raw.decode(self.encoding)
                except UnicodeDecodeError as exc:
                    raise self._fail(lineno, f"not valid {self.encoding} at byte {exc.start}")
                if line.endswith("\n"):
                    line = line[:-1]
                fields = line.split(sep)
                if len(fields) != expected or (self.trailing and fields[-1] != ""):
                    raise self._fail(lineno, f"{len(fields) - (1 if self.trailing else 0)} fields, expected "
                                             f"{len(names)}{' and a final ' + repr(sep) if self.trailing else ''}")
                row = []
                for i, fn in enumerate(convert):
                    try:
                        row.append(fn(fields[i]))
                    except ValueError as exc:
                        raise self._fail(lineno, f"column {names[i]}: {exc}: {fields[i]!r}") from None
                self.rows += 1
                if self.progress and self.bytes - reported >= 1 << 20:
                    reported = self.bytes
                    self.progress(self.bytes, total)
                yield tuple(row)
        if self.progress:
            self.progress(self.bytes, total)


# --- statistics helpers ---------------------------------------------------------------------
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


# --- what a failed load means for a retry -------------------------------------------------
# SQL Server errors about the data itself: the same file fails the same way on every try.
DATA_ERRORS = frozenset({
    241, 242, 245, 8114, 8115,  # conversion of a value (date, number) failed or overflowed
    515,                        # NULL into a NOT NULL column
    547,                        # CHECK constraint violated: a key outside the partition's range
    2601, 2627,                 # duplicate key
    2628, 8152,                 # string or binary data would be truncated
    4815, 4816,                 # bulk copy: invalid column length / type from the client
    4832,                       # bulk load: unexpected end of file
    4863, 4864, 4867,           # bulk load conversion error (truncation, type, overflow) at row, column
    4865,                       # bulk load: more errors than MAXERRORS
    4866,                       # bulk load: a field too long (wrong terminators) at row, column
    4879,                       # bulk load: invalid column value in a CSV file
})
# ODBC SQLSTATE classes: 22 data exception, 23 integrity constraint violation; 08 and the
# timeouts are connection troubles, worth a retry whatever else the message says.
_NATIVE_ERROR = re.compile(r"\((\d+)\)(?=\s*(?:;|\(SQL\w+\)|$))")
_CONNECTION_LOST = re.compile(r"communication link failure|connection (?:is )?(?:broken|reset|closed)|"
                              r"transport-level error|TCP Provider", re.I)


def error_numbers(exc: BaseException) -> set[int]:
    """SQL Server's native error numbers in a driver error (pyodbc ends each record with `(n)`)."""
    return {int(n) for n in _NATIVE_ERROR.findall(str(exc))}


def is_data_error(exc: BaseException) -> bool:
    """True when a load failed on the data (a retry cannot help), False for everything else."""
    args = getattr(exc, "args", ())
    sqlstate = str(args[0]) if args and isinstance(args[0], str) and len(args[0]) == 5 else ""
    if sqlstate.startswith("08") or sqlstate in ("HYT00", "HYT01") or _CONNECTION_LOST.search(str(exc)):
        return False
    if error_numbers(exc) & DATA_ERRORS or sqlstate[:2] in ("22", "23"):
        return True
    # DB-API classes (mssql-python's bulk copy raises these): DataError, IntegrityError.
    return any(c.__name__ in ("DataError", "IntegrityError") for c in type(exc).__mro__)


# A refused login (18456) or a database the login cannot open (4060): the same on every try.
LOGIN_REFUSED = frozenset({18456, 4060})
_LOGIN_REFUSED_TEXT = re.compile(r"Login failed for user|Cannot open database", re.I)


def is_login_refused(exc: BaseException) -> bool:
    """True when the server refused the login or the database, by number (pyodbc) or by the
    server's own message (mssql-python may not end it with the number)."""
    return bool(error_numbers(exc) & LOGIN_REFUSED) or bool(_LOGIN_REFUSED_TEXT.search(str(exc)))


# --- one load per scheduler: the retry policy of the guard -----------------------------------
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


class MssqlAdapter(TargetAdapter):
    engine = "mssql"
    quote_open = "["
    quote_close = "]"

    def __init__(self, spec: LoadSpec, conn_id: str | None = None, uri: str | None = None,
                 load_mode: str | None = None, server_data_root: str | None = None,
                 local_data_root: str | Path | None = None, ports: list[int] | str | None = None,
                 base_port: int | None = None, port_count: int | None = None,
                 file_dirs: list[str] | str | None = None, files_per_filegroup: int | None = None,
                 file_size_mb: int | None = None, file_growth_mb: int | None = None,
                 batch_size: int | None = None, packet_size: int | None = None,
                 scheduler_guard: bool | None = None, guard_retries: int | None = None,
                 odbc_driver: str | None = None, codepage: str | None = None,
                 login_timeout: int | None = None, database: str | None = None,
                 script_batch: str = "batch", airflow_connection: Any = None, **options: Any):
        super().__init__(spec, **options)
        self.conn_id = conn_id
        self.uri = uri
        self._airflow_connection = airflow_connection
        endpoint, configured = self._endpoint()
        if database:
            endpoint = dataclasses.replace(endpoint, database=database)
        self.endpoint = endpoint
        given = dict(load_mode=load_mode, server_data_root=server_data_root, local_data_root=local_data_root,
                     ports=ports, base_port=base_port, port_count=port_count, file_dirs=file_dirs,
                     files_per_filegroup=files_per_filegroup, file_size_mb=file_size_mb,
                     file_growth_mb=file_growth_mb, batch_size=batch_size, packet_size=packet_size,
                     scheduler_guard=scheduler_guard, guard_retries=guard_retries, odbc_driver=odbc_driver,
                     codepage=codepage, login_timeout=login_timeout)
        opt = {**configured, **{k: v for k, v in given.items() if v is not None}}

        mode = _MODE_ALIASES.get(str(opt.get("load_mode", "bulk_insert")).lower())
        if mode is None:
            raise TargetError(f"load_mode {opt.get('load_mode')!r} is not one of bulk_insert, tds (bcp)")
        self.load_mode = mode
        self.server_data_root = str(opt["server_data_root"]) if opt.get("server_data_root") else None
        if self.server_data_root and not _SAFE_PATH.match(self.server_data_root):
            raise TargetError(f"server_data_root {self.server_data_root!r} has characters that are not allowed")
        from switchyard.core.batch import data_root
        self.local_data_root = Path(opt.get("local_data_root") or data_root()).resolve()
        if opt.get("ports"):
            self.ports = _int_list(opt["ports"])
        else:
            base = int(opt.get("base_port") or endpoint.port)
            self.ports = _int_list([base + i for i in range(int(opt.get("port_count") or 1))])
        dirs = opt.get("file_dirs") or [DEFAULT_FILE_DIR]
        self.file_dirs = [d for d in (dirs.split(",") if isinstance(dirs, str) else dirs) if d]
        for d in self.file_dirs:
            if not _SAFE_PATH.match(d):
                raise TargetError(f"file_dirs: {d!r} has characters that are not allowed")
        self.files_per_filegroup = max(1, int(opt.get("files_per_filegroup") or 1))
        self.file_size_mb = int(opt.get("file_size_mb") or 64)
        self.file_growth_mb = int(opt.get("file_growth_mb") or 256)
        self.batch_size = int(opt.get("batch_size") or 100_000)
        self.packet_size = min(int(opt.get("packet_size") or MAX_PACKET_SIZE), MAX_PACKET_SIZE)
        self.scheduler_guard = _bool(opt.get("scheduler_guard", True))
        self.guard_retries = int(opt.get("guard_retries") or 8)
        self.odbc_driver = opt.get("odbc_driver") or None
        self.codepage = opt.get("codepage") or None
        if self.codepage and not _SAFE_VALUE.match(str(self.codepage)):
            raise TargetError(f"codepage {self.codepage!r} is not allowed")
        self.login_timeout = int(opt.get("login_timeout") or 15)
        self.database = self.checked(endpoint.database)
        self.script_batch = script_batch

    # --- configuration ---------------------------------------------------------------
    def _endpoint(self) -> tuple[Endpoint, dict[str, Any]]:
        if self.uri:
            return parse_uri(self.uri)
        if self.conn_id:
            conn = self._airflow_connection
            if conn is None:
                from airflow.sdk import BaseHook
                conn = BaseHook.get_connection(self.conn_id)
            extra = dict(conn.extra_dejson or {})
            options = {k: extra.pop(k) for k in list(extra) if k in ADAPTER_OPTIONS}
            return Endpoint(host=conn.host or "localhost", port=int(conn.port or DEFAULT_PORT),
                            user=conn.login or None, password=conn.password or None,
                            database=conn.schema or "switchyard", attributes=_odbc_attributes(extra)), options
        # No connection: the adapter only writes SQL (script, plan output).
        return Endpoint(), {}

    def port_for(self, stream: int) -> int:
        """Stream k's pinned port: the port map taken round-robin from stream 1."""
        return self.ports[(int(stream) - 1) % len(self.ports)]

    def driver(self) -> str:
        return self.odbc_driver or find_odbc_driver()

    def odbc_connection_string(self, port: int | None = None, driver: str | None = None) -> str:
        e = self.endpoint
        parts = [("DRIVER", "{" + (driver or self.driver()) + "}"),
                 ("SERVER", f"{e.host},{port or self.ports[0]}"), ("DATABASE", e.database)]
        if e.user:
            parts += [("UID", e.user), ("PWD", e.password or "")]
        else:
            parts.append(("Trusted_Connection", "yes"))
        parts += [("APP", "switchyard"), ("PacketSize", str(self.packet_size)), *e.attributes]
        return ";".join(f"{k}={v if k == 'DRIVER' else odbc_value(v)}" for k, v in parts)

    def tds_connection_string(self, port: int) -> str:
        """For mssql-python, which brings its own driver; its bulk copy reads Server and PacketSize."""
        e = self.endpoint
        parts = [("Server", f"{e.host},{port}"), ("Database", e.database)]
        if e.user:
            parts += [("UID", e.user), ("PWD", e.password or "")]
        parts += [("PacketSize", str(self.packet_size)), *e.attributes]
        return ";".join(f"{k}={odbc_value(v)}" for k, v in parts)

    def sqlalchemy_url(self) -> str:
        from sqlalchemy.engine import URL
        e = self.endpoint
        query = {"driver": self.driver(), **dict(e.attributes)}
        return URL.create("mssql+pyodbc", username=e.user, password=e.password, host=e.host,
                          port=self.ports[0], database=e.database, query=query).render_as_string(hide_password=False)

    # --- SQL text --------------------------------------------------------------------------
    def render(self, template: str, **context: Any) -> list[str]:
        return super().render(template, nstr=nstr, str=sstr, **context)

    def function_name(self, table: str) -> str:
        return self.checked(f"pf_{table}")

    def scheme_name(self, table: str) -> str:
        return self.checked(f"ps_{table}")

    def _key_type(self, table: Table) -> str:
        return next(c.sql_type(self.engine) for c in table.columns if c.name == table.key)

    def filegroups(self, plan: LoadPlan) -> list[dict]:
        """Every stream's filegroup with its files, spread round-robin over `file_dirs`."""
        names = sorted({s.filegroup for s in plan.all_streams() if not s.empty},
                       key=lambda n: (len(n), n))
        out, index = [], 0
        for fg in names:
            files = []
            for i in range(1, self.files_per_filegroup + 1):
                d = self.file_dirs[index % len(self.file_dirs)]
                index += 1
                sep = "\\" if "\\" in d else "/"
                files.append({"name": f"{fg}_{i}",
                              "path": f"{d.rstrip(sep)}{sep}{self.database}_{fg}_{i}.ndf"})
            out.append({"name": self.checked(fg), "files": files})
        return out

    def _table_context(self, plan_table) -> dict:
        t = plan_table.table
        streams = [s for s in plan_table.streams if not s.empty]
        ctx = {"name": t.name, "key": t.key, "key_type": self._key_type(t), "partitioned": t.partitioned,
               "columns": self.columns(t)}
        if t.partitioned and streams:
            first_edge = streams[0].lower - 1
            uppers = {s.upper: s.filegroup for s in streams}
            edges = {s.lower - 1 for s in streams} - set(uppers)
            extend = sorted([{"value": v, "filegroup_sql": "[PRIMARY]"} for v in edges]
                            + [{"value": v, "filegroup_sql": self.q(fg)} for v, fg in uppers.items()],
                            key=lambda e: e["value"])
            ctx.update(function=self.function_name(t.name), scheme=self.scheme_name(t.name),
                       boundaries=[first_edge] + [s.upper for s in streams],
                       scheme_filegroups=[s.filegroup for s in streams], extend=extend)
        else:
            ctx["partitioned"] = False
        return ctx

    def setup_sql(self, plan: LoadPlan) -> list[str]:
        return self.render("setup.sql", filegroups=self.filegroups(plan),
                           tables=[self._table_context(t) for t in plan.tables],
                           file_size_mb=self.file_size_mb, file_growth_mb=self.file_growth_mb)

    def prepare_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        return self.render("prepare.sql", s=stream, columns=self.columns(table), key=table.key)

    def server_path(self, path: Path) -> str:
        """The file's path as the server sees it: the local data root replaced by `server_data_root`."""
        local = Path(path).resolve() if Path(path).is_absolute() else (self.local_data_root / path).resolve()
        if not local.is_relative_to(self.local_data_root):
            raise TargetError(f"{local}: outside the data root {self.local_data_root}; BULK INSERT reads only "
                              f"files under it")
        relative = local.relative_to(self.local_data_root).parts
        # Without a mapping the server is taken to see the data root at the same path (one
        # volume mounted at the same place on both sides, as in the docker-compose stack).
        root = self.server_data_root or str(self.local_data_root)
        cls = PureWindowsPath if ("\\" in root or re.match(r"^[A-Za-z]:", root)) else PurePosixPath
        server = str(cls(root).joinpath(*relative))
        if not _SAFE_PATH.match(server):
            raise TargetError(f"{server}: the server path has characters that are not allowed in a load path")
        return server

    def truncate_sql(self, stream: StreamPlan) -> list[str]:
        return self.render("truncate.sql", s=stream)

    def load_sql(self, stream: StreamPlan, path: Path | None = None, guard: bool | None = None) -> list[str]:
        """bulk_insert: one batch (claim, TRUNCATE, BULK INSERT); tds: the TRUNCATE before the copy."""
        if self.load_mode != "bulk_insert":
            return self.truncate_sql(stream)
        if path is None:
            path = self.local_data_root / self.script_batch / stream.file
        fmt = self.spec.format
        delimiter = fmt.delimiter
        # The trailing delimiter of every line is folded into the row terminator.
        row_terminator = (delimiter if fmt.trailing_delimiter else "") + "\n"
        return self.render("load.sql", s=stream, server_path=self.server_path(path), delimiter=delimiter,
                           row_terminator=row_terminator, batch_size=self.batch_size, codepage=self.codepage,
                           guard=self.scheduler_guard if guard is None else guard,
                           busy_error=SCHEDULER_BUSY_ERROR, busy_message=SCHEDULER_BUSY_MESSAGE)

    def constraint_sql(self, stream: StreamPlan) -> list[str]:
        if not stream.partitioned:
            return []
        return self.render("constraint.sql", s=stream)

    def wait_minutes(self) -> int:
        return max(1, math.ceil(self.lock_timeout_seconds / 60))

    def switch_sql(self, stream: StreamPlan, replace_existing: bool) -> list[str]:
        columns = self.columns(self.spec.table(stream.table))
        if not stream.partitioned:
            return self.render("switch_table.sql", s=stream, columns=columns)
        return self.render("switch_partition.sql", s=stream, columns=columns, replace_existing=replace_existing,
                           function=self.function_name(stream.table), wait_minutes=self.wait_minutes(),
                           old_table=self.checked(f"{stream.staging_table}_old"))

    def script(self, plan: LoadPlan) -> str:
        """The whole load as T-SQL for review, in execution order, one batch per GO."""
        out = [f"-- Switchyard load plan: spec {self.spec.name}, {plan.streams} streams, target mssql, "
               f"load mode {self.load_mode}",
               f"-- database {self.database}; stream k connects to port {self.ports[0]}"
               + (f" + (k - 1) mod {len(self.ports)}" if len(self.ports) > 1 else ""),
               f"USE {self.q(self.database)};", "GO", "", "-- objects"]

        def emit(statements: list[str]) -> None:
            for stmt in statements:
                out.append(stmt + ";")
                out.append("GO")

        emit(self.setup_sql(plan))
        for s in plan.all_streams():
            if s.empty:
                continue
            out.append(f"\n-- {s.group_id}: {s.file}, keys {s.key_min}..{s.key_max}, "
                       f"filegroup {s.filegroup}, port {self.port_for(s.stream)}")
            emit(self.prepare_sql(s))
            emit(self.load_sql(s))
            if self.load_mode != "bulk_insert":
                out.append(f"-- load: TDS bulk copy of {s.file} into {self.staging_schema}.{s.staging_table} "
                           f"(table lock, check constraints, batch size {self.batch_size}, "
                           f"packet size {self.packet_size})")
            emit(self.constraint_sql(s))
            emit(self.switch_sql(s, replace_existing=False))
        return "\n".join(out) + "\n"

    # --- connections ----------------------------------------------------------------------
    def connect_odbc(self, stream: int | None = None):
        """A pyodbc connection (autocommit) to the stream's pinned port."""
        import pyodbc
        # A pooled connection would keep its session, and with it a scheduler claim, alive.
        pyodbc.pooling = False
        port = self.port_for(stream) if stream else self.ports[0]
        try:
            return pyodbc.connect(self.odbc_connection_string(port), autocommit=True, timeout=self.login_timeout)
        except pyodbc.Error as exc:
            raise self._connect_error(port, exc) from exc

    def connect_tds(self, stream: int):
        """An mssql-python connection to the stream's pinned port (its bulk copy uses the same server)."""
        import mssql_python
        port = self.port_for(stream)
        try:
            return mssql_python.connect(self.tds_connection_string(port), autocommit=True,
                                        attrs_before={mssql_python.SQL_ATTR_LOGIN_TIMEOUT: self.login_timeout})
        except mssql_python.Error as exc:
            raise self._connect_error(port, exc) from exc

    def _connect_error(self, port: int, exc: BaseException) -> TargetError:
        """A failed connection; permanent when the server refused the login or the database
        (a retry would be refused the same way), else retryable (server down, network)."""
        refused = is_login_refused(exc)
        return TargetError(f"{'the target refused the connection' if refused else 'cannot connect to SQL Server'} "
                           f"at {self.endpoint.host},{port} (database {self.endpoint.database}): {_message(exc)}",
                           permanent=refused)

    @contextmanager
    def connection(self, stream: int | None = None) -> Iterator[Any]:
        conn = self.connect_odbc(stream)
        try:
            yield conn
        finally:
            conn.close()

    def execute(self, statements: list[str], stream: int | None = None) -> None:
        with self.connection(stream) as conn:
            cur = conn.cursor()
            for stmt in statements:
                cur.execute(stmt)
                drain(cur)

    def fetch(self, sql: str, params: tuple = (), stream: int | None = None) -> list[tuple]:
        with self.connection(stream) as conn:
            cur = conn.cursor()
            cur.execute(sql, *params)
            return [tuple(r) for r in cur.fetchall()]

    # --- the run lease (the shared logic is in base.py) -----------------------------------
    def _claim(self, cur) -> tuple:
        statement, = self.render("lease_claim.sql")
        p = self.lease_params()
        cur.execute(statement, p["schema"], p["holder"], p["batch"], p["ttl"])
        return first_row(cur)

    def claim_lease(self) -> tuple:
        import pyodbc
        try:
            with self.connection() as conn:
                return self._claim(conn.cursor())
        except pyodbc.Error as exc:
            if 208 in error_numbers(exc):  # invalid object name
                raise TargetError(f"{self.control_schema}.run_lease is missing: did setup.plan run?") from exc
            raise TargetError(f"renewing the run lease on {self.schema} failed: {_message(exc)}") from exc

    def drop_lease(self) -> None:
        statement, = self.render("lease_release.sql", schema_literal=None)
        with self.connection() as conn:
            drain(conn.cursor().execute(statement, self.schema, self.lease_holder))

    def lease(self) -> tuple | None:
        """(holder, batch, acquired_at, expires_at) of the schema's lease, if any."""
        rows = self.fetch(f"SELECT [holder], [batch], [acquired_at], [expires_at] FROM "
                          f"{self.qualified(self.control_schema, 'run_lease')} WHERE [target_schema] = ?",
                          (self.schema,))
        return rows[0] if rows else None

    # --- steps ----------------------------------------------------------------------------
    def recovery_model(self) -> str:
        return self.fetch("SELECT recovery_model_desc FROM sys.databases WHERE database_id = DB_ID()")[0][0]

    def setup(self, plan: LoadPlan) -> None:
        import pyodbc
        with self.connection() as conn:
            cur = conn.cursor()
            model = cur.execute("SELECT recovery_model_desc FROM sys.databases WHERE database_id = DB_ID()").fetchone()[0]
            if model == "FULL":
                log.warning("database %s uses the FULL recovery model: bulk loads are fully logged, not "
                            "minimally; set SIMPLE or BULK_LOGGED for load speed", self.database)
            # Concurrent runs would race on the IF NOT EXISTS checks and the SPLITs: one at a time.
            cur.execute("EXEC sp_getapplock @Resource = N'switchyard.setup', @LockMode = N'Exclusive', "
                        "@LockOwner = N'Session', @LockTimeout = ?", self.lock_timeout_seconds * 1000)
            try:
                # The lease first, in a transaction of its own: a run that must wait creates nothing.
                if self.lease_holder:
                    for stmt in self.render("lease.sql"):
                        cur.execute(stmt)
                        drain(cur)
                    try:
                        row = self._claim(cur)
                    except pyodbc.Error as exc:
                        raise TargetError(f"claiming the run lease on {self.schema} failed: "
                                          f"{_message(exc)}") from exc
                    self.check_lease(row)
                for stmt in self.setup_sql(plan):
                    cur.execute(stmt)
                    drain(cur)
            except pyodbc.Error as exc:
                raise TargetError(f"setup of {self.schema} failed: {_message(exc)}\nstatement:\n{stmt}") from exc

    def create_staging(self, stream: StreamPlan) -> None:
        import pyodbc
        try:
            self.execute(self.prepare_sql(stream), stream.stream)
        except pyodbc.Error as exc:
            raise TargetError(f"prepare of {stream.group_id} failed: {_message(exc)}") from exc

    def session_stats(self, cur) -> dict[str, Any]:
        row = cur.execute(SESSION_STATS_SQL).fetchone()
        return dict(zip(_STAT_FIELDS, row)) if row else {}

    def load_staging(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        if self.load_mode == "tds":
            return self._load_tds(stream, path, progress)
        return self._load_bulk_insert(stream, path, progress)

    def _where(self, stream: StreamPlan) -> str:
        return (f" [table {stream.table}, stream {stream.stream}; staging table "
                f"{self.staging_schema}.{stream.staging_table} kept for inspection]")

    def _load_error(self, path: Path, stream: StreamPlan, exc: BaseException, line: str = "") -> TargetError:
        """A failed load as TargetError: permanent when the data is at fault, else retryable."""
        permanent = is_data_error(exc)
        hint = "" if permanent else " (not a data error: the task's retry starts the load again)"
        return TargetError(f"{path}: {line}{_message(exc)}{hint}{self._where(stream)}", permanent=permanent)

    def _load_bulk_insert(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        import pyodbc
        total = Path(path).stat().st_size
        started = time.monotonic()

        def attempt(guard: bool) -> tuple[int, dict, dict]:
            conn = self.connect_odbc(stream.stream)
            try:
                cur = conn.cursor()
                statement, = self.load_sql(stream, path, guard=guard)
                try:
                    before = self.session_stats(cur)
                    cur.execute(statement)
                    counts = drain(cur)
                    rows = next((c for c in reversed(counts) if c >= 0), -1)
                    if rows < 0:
                        staging = self.qualified(self.staging_schema, stream.staging_table)
                        rows = int(cur.execute(f"SELECT COUNT_BIG(*) FROM {staging}").fetchone()[0])
                    for stmt in self.constraint_sql(stream):
                        cur.execute(stmt)
                        drain(cur)
                    return rows, before, self.session_stats(cur)
                except pyodbc.Error as exc:
                    if is_scheduler_busy(exc):
                        raise SchedulerBusy(_message(exc)) from exc
                    raise self._load_error(path, stream, exc) from exc
            finally:
                # Closing the unpooled session also releases its scheduler claim.
                conn.close()

        (rows, before, after), guard = with_scheduler_guard(attempt, self.scheduler_guard, self.guard_retries,
                                                            stream.group_id)
        if progress:
            progress(total, total)
        details = _load_details(before, after, port=self.port_for(stream.stream), mode="bulk_insert")
        details.update(attempts=guard.attempts, scheduler_claimed=guard.claimed, scheduler_shared=guard.shared)
        return LoadResult(rows=rows, bytes=total, seconds=time.monotonic() - started, details=details)

    def _load_tds(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        import mssql_python
        import pyodbc
        fmt = self.spec.format
        rows = FileRows(Path(path), self.spec.table(stream.table), self.engine, fmt.delimiter,
                        fmt.trailing_delimiter, fmt.encoding, progress, context=self._where(stream))
        staging = self.qualified(self.staging_schema, stream.staging_table)
        started = time.monotonic()
        try:
            self.execute(self.load_sql(stream), stream.stream)
        except pyodbc.Error as exc:
            raise self._load_error(path, stream, exc) from exc
        watcher = _BulkSessionWatcher(self, stream, staging)
        conn = self.connect_tds(stream.stream)
        watcher.start()
        try:
            cur = conn.cursor()
            # The record run's fast load: table lock, batches, large packets; constraints
            # checked row by row so the range CHECK stays trusted for SWITCH.
            result = cur.bulkcopy(staging, rows, batch_size=self.batch_size, timeout=0,
                                  table_lock=True, check_constraints=True)
        except TargetError:
            raise
        except Exception as exc:  # the driver may wrap an error raised by our row iterator
            if rows.error is not None:
                raise rows.error from exc
            # mssql-python's errors, and those of its Rust core (mssql_py_core: DB-API classes).
            if (isinstance(exc, (mssql_python.Error, RuntimeError, ValueError))
                    or type(exc).__module__.startswith("mssql_py")):
                raise self._load_error(path, stream, exc, line=f"line {rows.rows + 1} or before: ") from exc
            raise
        finally:
            conn.close()
            watcher.stop()
        if rows.error is not None:
            raise rows.error
        copied = int(result.get("rows_copied", rows.rows)) if isinstance(result, dict) else rows.rows
        try:
            self.execute(self.constraint_sql(stream), stream.stream)
        except pyodbc.Error as exc:
            raise self._load_error(path, stream, exc) from exc
        details = dict(watcher.sample or {})
        details.update(mode="tds", port=self.port_for(stream.stream), packet_size=self.packet_size,
                       batch_size=self.batch_size, parsed_rows=rows.rows,
                       session_sampled=watcher.sample is not None)
        return LoadResult(rows=copied, bytes=rows.bytes, seconds=time.monotonic() - started, details=details)

    def partition_number(self, stream: StreamPlan) -> int:
        """The stream's partition now, by the function's own word."""
        return self.fetch(f"SELECT $PARTITION.{self.q(self.function_name(stream.table))}(?)",
                          (stream.lower,))[0][0]

    def partition_rows(self, stream: StreamPlan) -> int:
        rows = self.fetch(
            "SELECT COALESCE(SUM(row_count), 0) FROM sys.dm_db_partition_stats "
            "WHERE object_id = OBJECT_ID(?) AND index_id IN (0, 1) AND partition_number = "
            f"$PARTITION.{self.q(self.function_name(stream.table))}(?)",
            (self.qualified(self.schema, stream.table), stream.lower))
        return int(rows[0][0])

    def constraint_trusted(self, stream: StreamPlan) -> bool | None:
        rows = self.fetch("SELECT is_not_trusted FROM sys.check_constraints "
                          "WHERE parent_object_id = OBJECT_ID(?) AND name = ?",
                          (self.qualified(self.staging_schema, stream.staging_table), f"{stream.staging_table}_range"))
        return None if not rows else not rows[0][0]

    def staging_exists(self, stream: StreamPlan) -> bool:
        return self.fetch("SELECT OBJECT_ID(?, N'U')",
                          (self.qualified(self.staging_schema, stream.staging_table),))[0][0] is not None

    def switched_in_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        return self.render("switched_in.sql", function=self.function_name(stream.table),
                           key_type=self._key_type(table))

    def switched_in(self, stream: StreamPlan) -> dict[str, Any] | None:
        """The stream's partition holding rows (its two boundaries in place); for an
        unpartitioned table, the table."""
        target = self.qualified(self.schema, stream.table)
        if not stream.partitioned:
            exists = self.fetch("SELECT OBJECT_ID(?, N'U')", (target,))[0][0] is not None
            return {"partition": None} if exists else None
        statement, = self.switched_in_sql(stream)
        rows = self.fetch(statement, (target, stream.lower, self.function_name(stream.table),
                                      stream.lower - 1, stream.upper))
        if not rows:
            return None
        number = int(rows[0][0])
        return {"partition_number": number, "partition": f"{self.schema}.{stream.table} partition {number}"}

    def switch_staging(self, stream: StreamPlan) -> dict[str, Any]:
        import pyodbc
        replace = stream.partitioned and self.partition_rows(stream) > 0
        try:
            self.execute(self.switch_sql(stream, replace_existing=replace), stream.stream)
        except pyodbc.Error as exc:
            text = _message(exc)
            if "1222" in str(exc) or "Lock request time out" in text:
                raise TargetError(f"switch of {stream.group_id} into {self.schema}.{stream.table} waited "
                                  f"{self.lock_timeout_seconds}s for a lock (a long-running reader holds the "
                                  f"table); nothing was changed, retry later") from exc
            raise TargetError(f"switch of {stream.group_id} into {self.schema}.{stream.table} failed: {text}") from exc
        out: dict[str, Any] = {"replaced": replace}
        if stream.partitioned:
            out["partition_number"] = self.partition_number(stream)
            out["partition"] = f"{self.schema}.{stream.table} partition {out['partition_number']}"
        return out

    def scheduler_count(self) -> int:
        return int(self.fetch(SCHEDULER_COUNT_SQL)[0][0])

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


def first_row(cur) -> tuple | None:
    """The first row of a batch's first result set (row counts of earlier statements are
    skipped), then the rest of the batch, whose errors surface only when read."""
    while cur.description is None:
        if not cur.nextset():
            return None
    row = cur.fetchone()
    drain(cur)
    return tuple(row) if row is not None else None


def drain(cur) -> list[int]:
    """Every row count of a batch; errors of later statements surface only when read."""
    counts = [cur.rowcount]
    while cur.nextset():
        counts.append(cur.rowcount)
    return counts


def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    text = str(args[-1]) if args else str(exc)
    return re.sub(r"\[Microsoft\]\[ODBC Driver \d+ for SQL Server\](\[SQL Server\])?", "", text).strip()


def nstr(value: str) -> str:
    """A Unicode string literal; quotes doubled."""
    return "N'" + str(value).replace("'", "''") + "'"


def sstr(value: str) -> str:
    """A plain string literal (BULK INSERT options take these); quotes doubled."""
    return "'" + str(value).replace("'", "''") + "'"


def plan_script(scale: float, streams: int, tables: list[str] | None = None, spec: str = "tpch",
                **options: Any) -> str:
    """The T-SQL of a TPC-H load planned from the generator's rules, for `plan --target mssql`."""
    from switchyard.core.spec import load_spec
    loaded = load_spec(spec)
    plan = plan_tpch(loaded, scale, streams, tables)
    return MssqlAdapter(loaded, **options).script(plan)
