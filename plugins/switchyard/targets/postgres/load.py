"""prepare and load on PostgreSQL: a staging table per stream, filled by TRUNCATE + COPY ... FREEZE in
one transaction, with errors that name the file, line and column."""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Callable

from switchyard.core.batch import refused_in_reading
from switchyard.core.fields import is_money
from switchyard.core.files import (GZIP_UNDER_PLAIN_NAME, GzipUnderPlainName, MisplacedQuote, StreamFileError,
                                   UnendedData, WrongSingleByte, open_source)
from switchyard.core.planner import StreamPlan
from switchyard.core.spec import Table
from switchyard.core.value_guard import ChangedValue, value_guard
from switchyard.targets.base import LoadResult, ProgressCallback, TargetError
from switchyard.targets.postgres.copy_format import copy_chunks, copy_format, field_count, field_index, record_at
from switchyard.targets.postgres.sql import EOL_COLUMN

_CHUNK = 1 << 20
_COPY_LINE = re.compile(r"\bline (\d+)")
# A CHECK constraint's columns, in its key's order, and its definition (pg_constraint.conkey holds
# the column numbers a table constraint reads; pg_get_constraintdef prints it as the server keeps it).
CHECK_READ_SQL = (
    "SELECT ARRAY(SELECT a.attname FROM unnest(c.conkey) WITH ORDINALITY AS k(attnum, n) "
    "JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum ORDER BY k.n), "
    "pg_get_constraintdef(c.oid) "
    "FROM pg_constraint c JOIN pg_class r ON r.oid = c.conrelid JOIN pg_namespace ns ON ns.oid = r.relnamespace "
    "WHERE ns.nspname = %s AND r.relname = %s AND c.conname = %s AND c.contype = 'c'")
_BAD_BYTES = re.compile(r"invalid byte sequence for encoding \"[^\"]+\": ((?:0x[0-9a-f]{2} ?)+)$")


class PostgresLoad:
    """A stream's staging table made and loaded."""

    def prepare(self, stream: StreamPlan) -> None:
        """A fresh staging table with its partition's range CHECK. The run's lease is renewed on
        the same connection first, in a transaction of its own (one connection per prepare)."""
        import psycopg
        try:
            with self.connection() as conn:
                if self.lease_holder:
                    self.check_lease(self.claim_lease(conn))
                with conn.transaction(), conn.cursor() as cur:
                    for stmt in self.prepare_sql(stream):
                        cur.execute(stmt)
        except psycopg.OperationalError as exc:
            raise TargetError(f"prepare of {stream.group_id}: connection lost: {exc}; nothing was "
                              f"committed") from exc

    def create_staging(self, stream: StreamPlan) -> None:
        import psycopg
        try:
            self.execute(self.prepare_sql(stream))
        except psycopg.OperationalError as exc:
            raise TargetError(f"prepare of {stream.group_id}: connection lost: {exc}; nothing was "
                              f"committed") from exc

    def load(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None = None) -> LoadResult:
        """The stream file into its staging table. The run's lease is renewed on the load's own
        connection once it holds its COPY slot, just before the COPY (load_staging): no
        connection of its own, and no lease renewed long before a COPY that waited for a slot."""
        return self.load_staging(stream, path, progress)

    def load_staging(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        table = self.spec.table(stream.table)
        where = f"[table {stream.table}, stream {stream.stream}]"
        statements = self.load_sql(stream)
        at = next(i for i, stmt in enumerate(statements)
                  if "\n".join(ln for ln in stmt.splitlines() if not ln.startswith("--")).startswith("COPY "))
        before, copy, after = statements[:at], statements[at], statements[at + 1:]
        total = path.stat().st_size
        single_field = len(table.columns) == 1 and not table.format.trailing_delimiter
        text_format = copy_format(table.format, table.columns) == "text"
        began = time.monotonic()
        with self.connection() as conn:
            connected = time.monotonic()
            # The lease is renewed before the wait for a slot, as a separate step's renewal was:
            # the slot is then held for the COPY alone.
            if self.lease_holder:
                self.check_lease(self.claim_lease(conn))
            leased = time.monotonic()
            with self.copy_slot(conn) as slot:
                release = slot["release"] if self.copy_slot_release == "copy" else None
                rows, pid, copy_began_at, copy_ended_at, seconds, copied, filenode = self._copy(
                    conn, stream, path, progress, table, where, before, copy, after, total, single_field, text_format,
                    release)
        ended = time.monotonic()
        # The load's fixed cost beside its COPY, part by part (the benchmark reports them):
        # connecting, the lease's renewal, the slot's query, release, and closing the connection.
        return LoadResult(rows=rows, bytes=total, seconds=seconds,
                          details={"backend_pid": pid, "copy_slot": slot["slot"], "staging_filenode": filenode,
                                   "copy_slot_wait_seconds": slot["waited_seconds"],
                                   "connect_seconds": round(connected - began, 4),
                                   "lease_seconds": round(leased - connected, 4),
                                   "release_seconds": round(ended - copied, 4),
                                   # When the server held the slot for this COPY (epoch seconds;
                                   # released before the commit, the commit follows).
                                   "copy_began_at": round(copy_began_at, 4),
                                   "copy_ended_at": round(copy_ended_at, 4)})

    def _check_read(self, conn, diag: Any, table: Table, range_check: str) -> tuple[list[str], str | None] | None:
        """The columns a CHECK the COPY broke reads, and its definition as the server keeps it
        (None for another error): PostgreSQL's error names the constraint and the line, not the
        column. The range CHECK reads the key; a target's own CHECK (a DBA's) is read from the
        catalog, only after a COPY failed on it. A varchar's length CHECK and the trailing field's
        are told by copy_error_message itself."""
        name = diag.constraint_name or ""
        if diag.sqlstate != "23514" or not name or name.endswith("_eol") \
                or any(c["name"] == name for c in self.length_checks(table)):
            return None
        if name == range_check:
            return [table.key], None
        import psycopg
        try:
            # The COPY's transaction is rolled back: the staging table and its constraints stand.
            with conn.transaction():
                row = conn.execute(CHECK_READ_SQL, (diag.schema_name, diag.table_name, name)).fetchone()
        except psycopg.Error:
            return None                     # the COPY's own error is the one to tell, as it is
        return (list(row[0]), row[1]) if row and row[0] else None

    def _money_digits(self, cur, table: Table) -> int | None:
        """The digits after the point a money column keeps in this session: its lc_monetary's
        (2 for most locales, 0 for yen; the cast to numeric rounds to them,
        https://www.postgresql.org/docs/current/datatype-money.html); None without a money column."""
        if not any(is_money(c.declared(self.dialect)[0]) for c in table.columns):
            return None
        cur.execute("SELECT scale(0::money::numeric)")
        return int(cur.fetchone()[0])

    def _copy(self, conn, stream: StreamPlan, path: Path, progress: ProgressCallback | None, table: Table,
              where: str, before: list[str], copy: str, after: list[str], total: int, single_field: bool,
              text_format: bool, release: Callable[[], None] | None = None) -> tuple:
        """The load's transaction on `conn`, its COPY slot held: (rows, backend pid, COPY start and
        end in epoch seconds, COPY seconds with the commit, monotonic end, the staging table's
        file node as the transaction left it). `release`, when
        given, gives the slot back once the COPY's statements are done, before the commit; the
        COPY's end is then that moment."""
        import psycopg
        # The COPY's own time: the wait for a slot and the lease are not part of it.
        started = time.monotonic()
        copy_began_at = time.time()
        try:
            with conn.transaction(), conn.cursor() as cur:
                for stmt in before:
                    cur.execute(stmt)
                # The file as the spec declares it, decompressed while read, header lines
                # skipped, guarded against the quote byte (see copy_format.py), every record read
                # for a field the server would change without an error (core/value_guard.py).
                guard = value_guard(table, self.dialect, self._money_digits(cur, table))
                with open_source(path) as source, cur.copy(copy) as cp:
                    for data in copy_chunks(source.read, table.format, text_format, single_field, _CHUNK, guard):
                        cp.write(data)
                        if progress:
                            progress(source.consumed(), total)
                rows = cur.rowcount
                for stmt in after:
                    cur.execute(stmt)
                # The storage this transaction's TRUNCATE gave the table and its COPY filled:
                # validation takes the COPY's count while the table is still this file node.
                cur.execute("SELECT pg_relation_filenode(to_regclass(%s))",
                            (self.qualified(self.staging_schema, stream.staging_table),))
                filenode = cur.fetchone()[0]
                pid = conn.info.backend_pid
                if release is not None:
                    release()
                    copy_ended_at = time.time()
        except (WrongSingleByte, MisplacedQuote, ChangedValue, UnendedData) as exc:
            # What the file's reading refused (its encoding, a quote, a field the server would
            # change, a last line cut short), as a COPY error is told: the data is at fault.
            staging = f"{self.staging_schema}.{stream.staging_table}"
            raise TargetError(f"{refused_in_reading(path, table, exc)} {_kept_empty(stream, staging)}",
                              permanent=True) from exc
        except GzipUnderPlainName as exc:
            raise TargetError(f"{path}: line 1, column {table.columns[0].name}: {GZIP_UNDER_PLAIN_NAME} "
                              f"{where}", permanent=True) from exc
        except StreamFileError as exc:
            raise TargetError(f"{exc} {where}; nothing was committed", permanent=True) from exc
        except psycopg.OperationalError as exc:
            raise TargetError(f"{path}: connection lost while loading {where}: {exc}; nothing was "
                              f"committed") from exc
        except psycopg.Error as exc:
            failed = failed_record(exc, path, table)
            range_check = f"{stream.staging_table}_range"
            message = copy_error_message(exc, path, stream, f"{self.staging_schema}.{stream.staging_table}",
                                         table, self.length_checks(table), failed,
                                         self._check_read(conn, exc.diag, table, range_check))
            hint = field_count_hint(failed, table)
            if exc.diag.constraint_name == range_check:
                hint += (f"; {table.key} must lie in {stream.lower}..{stream.upper}, "
                         f"this stream's key range in the manifest")
            raise TargetError(message + hint, permanent=True) from exc
        copied = time.monotonic()
        if release is None:
            copy_ended_at = time.time()
        return rows, pid, copy_began_at, copy_ended_at, copied - started, copied, filenode


def failed_record(exc: Any, path: Path, table: Table) -> tuple[int, int, bytes] | None:
    """(COPY's line number, the line in the file where that record starts, the record's
    bytes) of the record COPY failed on, if it named one. COPY counts what it was sent:
    header lines skipped before it do not count, and with quoting csv a record may span
    lines (see copy_format.record_at)."""
    match = _COPY_LINE.search(exc.diag.context or "")
    if not match:
        return None
    copy_line = int(match.group(1))
    found = record_at(path, table.format, copy_line)
    if found is None:
        return copy_line, copy_line + table.format.header_lines, b""
    return copy_line, found[0], found[1]


def copy_error_message(exc: Any, path: Path, stream: StreamPlan, staging: str, table: Table,
                       length_checks: list[dict] = (), failed: tuple[int, int, bytes] | None = None,
                       check_read: tuple[list[str], str | None] | None = None) -> str:
    """PostgreSQL's COPY error, with the file's own line number and the staging table kept.

    The line is the file's (`failed`, from failed_record). A varchar(n) column's length
    CHECK gets PostgreSQL's own varchar wording and the column; an invalid byte sequence,
    which PostgreSQL reports for the line only, gets the column it is in; another CHECK gets the
    columns it reads and its definition (`check_read`, from the catalog).

    The staging table stays until the group's next successful run replaces it, but empty:
    the COPY is one transaction (what lets FREEZE skip WAL), so nothing of a failed file
    is in it. What to inspect is the file at the line and column named here."""
    diag = exc.diag
    primary = diag.message_primary or str(exc)
    where = diag.context or ""
    # context reads 'COPY orders_3, line 42, column o_custkey: "x"'; drop the table name.
    where = where.split(", ", 1)[1] if where.startswith("COPY ") and ", " in where else where
    if failed and failed[0] != failed[1]:
        where = _COPY_LINE.sub(f"line {failed[1]}", where, count=1)
    detail = f" ({diag.message_detail})" if diag.message_detail else ""
    eol = _trailing_delimiter_problem(primary, diag.constraint_name or "", table)
    if eol:
        # The trailing delimiter's dummy column (sql.EOL_COLUMN) is no column of the user's.
        where, primary, detail = where.split(", column", 1)[0].split(":", 1)[0], eol, ""
    check = next((c for c in length_checks if c["name"] == diag.constraint_name), None)
    if check is not None:
        where = where.split(":", 1)[0] + f", column {check['column']}"
        primary = f"value too long for type character varying({check['max']})"
        detail = f" (check constraint {check['name']}: char_length({check['column']}) <= {check['max']})"
    elif check_read is not None and ", column " not in where:
        columns, definition = check_read
        where = where.split(":", 1)[0] + f", column{'s' if len(columns) > 1 else ''} {', '.join(columns)}"
        if definition:
            primary = f"{primary}: {definition}"
    bad = _BAD_BYTES.match(primary)
    if bad and failed and failed[2] and ", column " not in where:
        at = failed[2].find(bytes(int(b, 16) for b in bad.group(1).split()))
        index = field_index(failed[2][:at], table.format) if at >= 0 else None
        if index is not None and index < len(table.columns):
            where = where.split(":", 1)[0] + f", column {table.columns[index].name}"
    return f"{path}: {where}: {primary}{detail} {_kept_empty(stream, staging)}".replace(": :", ":")


def _kept_empty(stream: StreamPlan, staging: str) -> str:
    """What a failed COPY leaves, after its error: the stream named, its staging table kept, empty."""
    return (f"[table {stream.table}, stream {stream.stream}; staging table {staging} kept for inspection, empty: "
            f"the COPY rolled back]")


def _trailing_delimiter_problem(primary: str, constraint: str, table: Table) -> str | None:
    """What an error about the trailing delimiter's dummy column means in the file's terms."""
    d = table.format.delimiter
    if f'"{EOL_COLUMN}"' in primary:
        return (f"the line does not end with the trailing delimiter {d!r}, as every line must "
                f"(trailing_delimiter: true)")
    if constraint.endswith("_eol"):
        return f"text after the trailing delimiter {d!r}, which ends every line (trailing_delimiter: true)"
    return None


def field_count_hint(failed: tuple[int, int, bytes] | None, table: Table) -> str:
    """When the failing record has the wrong number of fields, say so: the engine's own
    message then names whichever column the shifted values first broke, which misleads."""
    if not failed or not failed[2]:
        return ""
    fields = field_count(failed[2], table.format)
    if fields == len(table.columns):
        return ""
    return f"; line {failed[1]} has {fields} fields, the spec expects {len(table.columns)}"
