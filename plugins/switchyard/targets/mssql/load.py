"""prepare and load on SQL Server: the staging heap on its stream's filegroup, loaded by BULK INSERT
(the server reads the file) or TDS bulk copy (the worker parses it), one load per scheduler."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Mapping

from switchyard.core.batch import changed_value_problem
from switchyard.core.files import StreamFileError
from switchyard.core.planner import StreamPlan
from switchyard.core.value_guard import ChangedValue, read_beside, value_guard
from switchyard.targets.base import LoadResult, ProgressCallback, TargetError
from switchyard.targets.mssql.dmv import LoadWatcher, _load_details, load_logging
from switchyard.targets.mssql.errors import _message, error_numbers, is_data_error
from switchyard.targets.mssql.guard import SchedulerBusy, is_scheduler_busy, with_scheduler_guard
from switchyard.targets.mssql.rows import FileRows
from switchyard.targets.mssql.server import CODE_PAGES_SQL
from switchyard.targets.mssql.session import drain
from switchyard.targets.mssql.sql import staging_heap_compression
from switchyard.targets.mssql.types import MONEY_DIGITS

# "Cannot insert the value NULL into column ...": a BULK INSERT met an empty field in a NOT NULL column.
NULL_REFUSED = 515


def _as_created(columns) -> list[dict]:
    """The catalog's columns (catalog.ColumnInfo) as prepare.sql creates them."""
    return [{"name": c.name, "type": c.type, "nullable": c.nullable, "collation": c.collation, "sparse": c.sparse}
            for c in columns]


class MssqlLoad:
    """A stream's staging table made and loaded."""

    def create_staging(self, stream: StreamPlan) -> None:
        """The staging table with the target's columns as they are, on the filegroup and with the
        data compression its partition will have (setup's plan), or the table's own for a table
        loaded whole that takes it by SWITCH; from the spec where no plan is."""
        import pyodbc
        try:
            with self.connection(stream.stream) as conn:
                cur = conn.cursor()
                columns, filegroup, compression, checks = None, None, "NONE", []
                if stream.partitioned:
                    target = self.read_target(cur, stream.table)
                    mine = self.planned(cur, stream.table).get(stream.staging_table)
                    if target.exists and target.columns:
                        columns = _as_created(target.columns)
                        checks = target.checks
                    if mine is not None and mine["run"] == (self.lease_holder or ""):
                        filegroup = mine["filegroup"]
                        compression = staging_heap_compression(mine["compression"])
                        if mine["ready_at"] is not None:
                            # A group run again from prepare after its switch marked it ready: it is
                            # not ready until this load is validated and switched again. The table's
                            # commit lock (a table's last switch and the batch's publish take it before
                            # they read what is ready) is held from here to this connection's close,
                            # after the staging table is made again, so no commit takes it meanwhile.
                            self._unready(cur, stream)
                elif (whole := self.swap_target(cur, stream.table)) is not None:
                    # A table loaded whole whose staging table is switched in: made to its shape
                    # (columns, filegroup, data compression, CHECK constraints), as a partition's.
                    columns = _as_created(whole.columns)
                    checks = whole.checks
                    home = self.whole_table_home(whole)
                    filegroup, compression = home["filegroup"], staging_heap_compression(home["compression"])
                for stmt in self.prepare_sql(stream, columns=columns, filegroup=filegroup, compression=compression,
                                             checks=checks):
                    cur.execute(stmt)
                    drain(cur)
        except pyodbc.Error as exc:
            raise TargetError(f"prepare of {stream.group_id} failed: {_message(exc)}") from exc

    def _unready(self, cur, stream: StreamPlan) -> None:
        (lock,) = self.render("commit_lock.sql")
        drain(cur.execute(lock, f"switchyard.commit.{self.schema}.{stream.table}", self.lock_timeout_seconds * 1000))
        cur.execute(f"UPDATE {self.qualified(self.control_schema, 'planned_partitions')} SET ready_at = NULL "
                    f"WHERE target_schema = ? AND table_name = ? AND staging_table = ?",
                    self.schema, stream.table, stream.staging_table)
        drain(cur)

    def load_staging(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        # Both paths end a row at the spec's line end only (BULK INSERT's ROWTERMINATOR, the
        # client reader's lines): a file whose line end differs would load changed, or not at all.
        from switchyard.core.batch import line_end_unlike_spec
        unlike = line_end_unlike_spec(path, self.spec.table(stream.table))
        if unlike:
            raise TargetError(f"{unlike}{self._where(stream)}; nothing was loaded", permanent=True)
        kind, why = self.load_path(stream)
        result = None
        if kind == "bulk_insert":
            try:
                result = self._load_bulk_insert(stream, path, progress)
            except _ClientPath as turn:
                why = str(turn)
        if result is None:
            result = self._load_tds(stream, path, progress)
        result.details["load_path"] = why
        return result

    def text_exact(self, stream: StreamPlan, server: tuple[str, int], code_pages: Mapping[str, int]) -> str | None:
        """None when BULK INSERT stores any text of the file exactly on this server, else why
        only ASCII is sure to arrive unchanged (ASCII is the same in every code page).

        Exact: a UTF-8 file read with CODEPAGE 65001 (Windows) into nchar/nvarchar columns and
        _UTF8-collated char/varchar ones (code page 65001); RAW (Linux) passes the bytes as
        they are, which only a _UTF8-collated char/varchar column holds as the same text; a
        single-byte file into columns of its own code page.
        """
        table = self.spec.table(stream.table)
        page = self.codepage_for(table.format, server)
        text = [c for c in table.columns if re.match(r"n?(var)?char|n?text", self.column_type(c).lower())]
        unicode = [c.name for c in text if self.column_type(c).lower().startswith("n")]
        single = {c.name: code_pages.get(c.name) for c in text if c.name not in unicode}
        if page == "65001":
            off = [f"{n} (code page {cp})" for n, cp in single.items() if cp not in (None, 65001)]
        elif page in ("RAW", None):
            off = [f"{n} (nchar/nvarchar)" for n in unicode]
            off += [f"{n} (code page {cp})" for n, cp in single.items() if cp not in (None, 65001)]
        else:
            off = [f"{n} (code page {cp})" for n, cp in single.items() if str(cp) != page]
            off += [] if page in ("1252", "28591") else [f"{n} (nchar/nvarchar)" for n in unicode]
        if not off:
            return None
        return (f"BULK INSERT with CODEPAGE {page or '(none)'} on {server[0]} stores it exactly only in _UTF8 or "
                f"matching columns, not in {', '.join(off)}")

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
        staging = self.qualified(self.staging_schema, stream.staging_table)
        started = time.monotonic()

        checked: list[bool] = []

        def attempt(guard: bool) -> tuple[int, dict, dict, LoadWatcher]:
            conn = self.connect_odbc(stream.stream)
            watcher = None
            try:
                cur = conn.cursor()
                server = self.server(cur)
                if not checked and self.text_check:
                    # Text the server would not store exactly goes the client path (once per load).
                    code_pages = {n: int(p) for n, p in cur.execute(CODE_PAGES_SQL, staging).fetchall()
                                  if p is not None}
                    inexact = self.text_exact(stream, server, code_pages)
                    if inexact is not None and not file_is_ascii(Path(path)):
                        raise _ClientPath(f"the file holds non-ASCII text and {inexact}")
                    checked.append(True)
                statement, = self.load_sql(stream, path, guard=guard, server=server)
                try:
                    before = self.session_stats(cur)
                    # Another connection watches this session: how its batches are logged.
                    watcher = LoadWatcher(self, stream, staging, session_id=before.get("session_id"),
                                          every=self.watch_every)
                    watcher.start()
                    cur.execute(statement)
                    counts = drain(cur)
                    watcher.stop()
                    rows = next((c for c in reversed(counts) if c >= 0), -1)
                    if rows < 0:
                        rows = int(cur.execute(f"SELECT COUNT_BIG(*) FROM {staging}").fetchone()[0])
                    for stmt in self.constraint_sql(stream):
                        cur.execute(stmt)
                        drain(cur)
                    return rows, before, self.session_stats(cur), watcher
                except pyodbc.Error as exc:
                    if is_scheduler_busy(exc):
                        raise SchedulerBusy(_message(exc)) from exc
                    if NULL_REFUSED in error_numbers(exc) and any(not c.nullable for c in
                                                                  self.spec.table(stream.table).columns):
                        # An empty field in a NOT NULL column: BULK INSERT reads it as NULL
                        # (load.sql); the spec means '', which the client path stores.
                        raise _ClientPath(f"an empty field in a NOT NULL column, which BULK INSERT reads as NULL "
                                          f"({_message(exc)}); the client path loads it as an empty string") from exc
                    raise self._load_error(path, stream, exc) from exc
            finally:
                if watcher is not None:
                    watcher.stop()
                # Closing the unpooled session also releases its scheduler claim.
                conn.close()

        table = self.spec.table(stream.table)
        try:
            # The server reads the file; the worker reads it beside, for a field the server would
            # store changed without an error (core/value_guard.py): the load fails then, its
            # staging table never switched in.
            with read_beside(value_guard(table, self.dialect, MONEY_DIGITS), Path(path), table.format.header_lines):
                (rows, before, after, watcher), guard = with_scheduler_guard(attempt, self.scheduler_guard,
                                                                             self.guard_retries, stream.group_id)
        except ChangedValue as exc:
            raise TargetError(f"{changed_value_problem(Path(path), table, exc)}{self._where(stream)}",
                              permanent=True) from exc
        except (OSError, StreamFileError) as exc:
            # Its fields unread, the load is not passed (the task's retry reads the file again).
            raise TargetError(f"{path}: the worker could not read the file to check its fields beside the "
                              f"server's load: {exc}{self._where(stream)}") from exc
        if progress:
            progress(total, total)
        details = _load_details(before, after, port=self.port_for(stream.stream), mode="bulk_insert")
        details.update(attempts=guard.attempts, scheduler_claimed=guard.claimed, scheduler_shared=guard.shared)
        details.update(load_logging(watcher.log_samples, self.batch_size, after.get("recovery_model")))
        return LoadResult(rows=rows, bytes=total, seconds=time.monotonic() - started, details=details)

    def _load_tds(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        import mssql_python
        import pyodbc
        table = self.spec.table(stream.table)
        staging = self.qualified(self.staging_schema, stream.staging_table)
        started = time.monotonic()
        try:
            self.execute(self.load_sql(stream), stream.stream)
            code_pages = self.code_pages(stream)
        except pyodbc.Error as exc:
            raise self._load_error(path, stream, exc) from exc
        rows = FileRows(Path(path), table, self.dialect, table.format, progress, context=self._where(stream),
                        code_pages=code_pages)
        watcher = LoadWatcher(self, stream, staging, every=self.watch_every)
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
        details.update(load_logging(watcher.log_samples, self.batch_size, details.get("recovery_model")))
        return LoadResult(rows=copied, bytes=rows.bytes, seconds=time.monotonic() - started, details=details)


class _ClientPath(Exception):
    """This load goes the client path after all; the message says why."""


def file_is_ascii(path: Path, chunk: int = 1 << 22) -> bool:
    """Whether every byte of the file is ASCII (read in 4 MB chunks, checked in C)."""
    with Path(path).open("rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            if not block.isascii():
                return False
    return True
