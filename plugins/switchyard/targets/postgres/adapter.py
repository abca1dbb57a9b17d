"""PostgreSQL: tablespaces for filegroups, declarative range partitions, COPY FREEZE, ATTACH.

The PostgreSQL form of the record-load method:
* filegroup  -> tablespace (optional: a tablespace needs a directory the server owns);
* staging table with a trusted range CHECK -> the same, written as the partition bound
  (`key >= lower AND key < upper + one unit`: 1, 1 day or 1 microsecond for integer, date
  and timestamp keys), which lets ATTACH PARTITION skip its scan;
* the target's unique index (the spec's `unique`) -> built on the staging table during
  validation, where a duplicate fails it; ATTACH adopts it instead of building its own;
* BULK INSERT ... TABLOCK into a heap -> TRUNCATE + COPY ... FREEZE in one transaction
  (with wal_level=minimal the rows are not WAL-logged either);
* SWITCH -> DETACH the old partition, ATTACH the new one, in one transaction.

One run at a time loads a schema: a row in the control schema's `run_lease` table names
the run that holds it. Airflow's max_active_runs does not cover backfill runs (they are
counted per backfill) nor a second DAG or Airflow on the same target, and staging tables
have one name per (table, stream): two runs at once would drop each other's staging
tables and mix two batches' partitions. A lease in the target itself covers every case.
It is a row, not a session lock, because a run's steps are separate processes; it
expires when no step renews it for `lease_ttl_seconds`, so a run that died releases it.
The lease's logic is shared with SQL Server in base.py; its SQL is in lease*.sql here.
"""
from __future__ import annotations

import hashlib
import os
import re
import time
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Any, Callable, Iterator

from switchyard.core import keys
from switchyard.core.files import GZIP_UNDER_PLAIN_NAME, GzipUnderPlainName, StreamFileError, open_source
from switchyard.core.planner import LoadPlan, StreamPlan
from switchyard.core.spec import LoadSpec, Table
from switchyard.targets.base import LoadResult, ProgressCallback, TargetAdapter, TargetError
from switchyard.targets.postgres.copy_format import (copy_chunks, copy_format, copy_options, field_count,
                                                     field_index, length_check_name, length_check_sql,
                                                     max_chars, record_at, rendered_type)

EOL_COLUMN = "switchyard_eol"
_ENCODINGS = {"utf-8": "UTF8", "utf8": "UTF8", "latin-1": "LATIN1", "latin1": "LATIN1",
              "iso-8859-1": "LATIN1", "ascii": "SQL_ASCII", "cp1252": "WIN1252"}
_CHUNK = 1 << 20
_REFUSED = re.compile(r"FATAL:\s+(password authentication failed|no pg_hba\.conf entry|"
                      r"database \".*\" does not exist|role \".*\" does not exist)")


class PostgresAdapter(TargetAdapter):
    engine = "postgres"
    quote_open = quote_close = '"'
    load_stats_columns = ("backend_pid",)

    def __init__(self, spec: LoadSpec, conn_id: str | None = None, uri: str | None = None,
                 tablespaces: dict[int, str] | None = None, connect: Callable[[], Any] | None = None,
                 url: Callable[[], str] | None = None, copy_slots: int | None = None,
                 copy_slot_wait_seconds: float = 3600.0, **options: Any):
        """A URI (`postgresql://...`), or `connect` (returns a new psycopg connection) with `url`
        (returns its SQLAlchemy URL): switchyard/airflow/connections.py builds those two from an
        Airflow connection, and the COPY slot settings from its extra. `conn_id` names the
        connection in messages."""
        super().__init__(spec, **options)
        if not uri and connect is None:
            raise TargetError("PostgreSQL target needs a URI or a connect callable")
        self.conn_id = conn_id
        self.uri = uri
        self._connect_callable = connect
        self._url = url
        self.tablespaces = {k: self.checked(v) for k, v in (tablespaces or {}).items()}
        # How many COPYs the server runs at once (slots.py): the connection's extra
        # {"copy_slots": N} (the server's cores), else this machine's cores (the embedded server
        # runs here); 0 turns the guard off.
        self.copy_slots = int(copy_slots) if copy_slots is not None else (os.cpu_count() or 1)
        self.copy_slot_wait_seconds = float(copy_slot_wait_seconds)

    # --- SQL text ---------------------------------------------------------------------
    def _eol(self, table: Table) -> str | None:
        return EOL_COLUMN if table.format.trailing_delimiter else None

    def columns(self, table: Table) -> list[dict[str, Any]]:
        """Each column as created here: its type (varchar(n) as text, see copy_format.py), and
        NOT NULL unless the spec declares it nullable."""
        return [{"name": c.name, "type": rendered_type(c.sql_type(self.engine)), "nullable": c.nullable}
                for c in table.columns]

    def length_checks(self, table: Table) -> list[dict[str, Any]]:
        """The CHECK (char_length(c) <= n) of each varchar(n) column: name, column, n."""
        out = []
        for c in table.columns:
            n = max_chars(c.sql_type(self.engine))
            if n is not None:
                out.append({"name": length_check_name(c.name), "column": c.name, "max": n,
                            "sql": length_check_sql(self.q(c.name), n)})
        return out

    def date_literal(self, value: date) -> str:
        return keys.ansi_literal(value)            # DATE 'YYYY-MM-DD'

    def timestamp_literal(self, value: datetime) -> str:
        return keys.ansi_literal(value)            # TIMESTAMP 'YYYY-MM-DD HH:MM:SS.ffffff'

    def bounds(self, stream: StreamPlan) -> tuple[keys.KeyValue, keys.KeyValue]:
        """(FROM, TO) of the stream's partition: its lower bound and its upper bound plus one
        unit of the key's type (a timestamp(p) column's unit is 10^(6-p) microseconds: a bound
        finer than the column would be rounded by PostgreSQL, so it is refused here)."""
        key_type = self.key_type(stream.table)
        try:
            return keys.aligned(stream.typed("lower"), key_type), keys.after(stream.typed("upper"), key_type)
        except keys.KeyValueError as exc:
            raise TargetError(f"{stream.group_id}: the key range {stream.lower}..{stream.upper} does not fit "
                              f"the key's type: {exc}", permanent=True) from None

    def _bound_context(self, stream: StreamPlan) -> dict[str, Any]:
        if not stream.partitioned or stream.empty:
            return {"lower": None, "upper_next": None}
        lower, upper_next = self.bounds(stream)
        return {"lower": lower, "upper_next": upper_next}

    @staticmethod
    def index_name(base: str, suffix: str = "_unique") -> str:
        """`<base>_unique`, or a hashed form of it where that would pass 63 characters."""
        name = base + suffix
        if len(name) <= keys.MAX_NAME:
            return name
        return f"{base[:40]}_{hashlib.sha1(name.encode()).hexdigest()[:12]}{suffix}"

    @staticmethod
    def parent_has_unique_index(table: Table) -> bool:
        """PostgreSQL allows a unique index on a partitioned table only when it includes the
        partition key; an unpartitioned table can always have one."""
        return bool(table.unique) and (not table.partitioned or table.key in table.unique)

    def unique_index_name(self, stream: StreamPlan) -> str:
        """The staging table's unique index: named after the partition it becomes (names of
        indexes share the schema with tables, and a partition keeps its index's name)."""
        return self.index_name(stream.partition_table if stream.partitioned else stream.staging_table)

    def setup_sql(self, plan: LoadPlan) -> list[str]:
        tables = [{"name": t.table.name, "key": t.table.key, "partitioned": t.table.partitioned,
                   "columns": self.columns(t.table), "checks": self.length_checks(t.table),
                   "unique": list(t.table.unique),
                   "unique_index": self.index_name(t.table.name) if self.parent_has_unique_index(t.table) else None}
                  for t in plan.tables]
        return self.render("setup.sql", tables=tables)

    def prepare_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        return self.render("prepare.sql", s=stream, columns=self.columns(table), key=table.key,
                           checks=self.length_checks(table), eol_column=self._eol(table),
                           tablespace=self.tablespaces.get(stream.stream), **self._bound_context(stream))

    def validate_sql(self, stream: StreamPlan) -> list[str]:
        return self.unique_index_sql(stream) if self.spec.table(stream.table).unique else []

    def unique_index_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        return self.render("unique_index.sql", s=stream, index=self.unique_index_name(stream),
                           columns=list(table.unique), tablespace=self.tablespaces.get(stream.stream))

    def load_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        fmt = table.format
        encoding = _ENCODINGS.get(fmt.encoding.lower())
        if encoding is None:
            raise TargetError(f"encoding {fmt.encoding!r} has no PostgreSQL name here")
        eol = self._eol(table)
        return self.render("load.sql", s=stream, columns=self.columns(table), eol_column=eol,
                           options=copy_options(fmt, table.columns, eol, encoding, self.q),
                           text_format=copy_format(fmt, table.columns) == "text")

    def switch_sql(self, stream: StreamPlan, replace_existing: bool) -> list[str]:
        template = "switch_partition.sql" if stream.partitioned else "switch_table.sql"
        return self.render(template, s=stream, replace_existing=replace_existing,
                           columns=self.columns(self.spec.table(stream.table)), **self._bound_context(stream))

    # --- connections --------------------------------------------------------------------
    def _connect(self):
        import psycopg
        try:
            if self.uri:
                return psycopg.connect(self.uri, application_name="switchyard")
            return self._connect_callable()
        except psycopg.OperationalError as exc:
            # A refused login or an unknown database stays refused: fail at once instead of
            # retrying. libpq gives no SQLSTATE for a failed connection, only the server's
            # FATAL message (English unless the server's lc_messages says otherwise).
            if _REFUSED.search(str(exc)):
                raise TargetError(f"the target refused the connection {self.conn_id or '(URI)'}: "
                                  f"{str(exc).split('FATAL:', 1)[-1].strip()}", permanent=True) from exc
            raise

    @contextmanager
    def connection(self) -> Iterator[Any]:
        conn = self._connect()
        try:
            # A step reports success only once its commit is on disk: a server tuned for bulk
            # loads (synchronous_commit=off, as the embedded one) could otherwise lose a
            # committed load or switch in a crash after Airflow marked the task done. COPY
            # ... FREEZE with wal_level=minimal syncs its files at commit anyway; this adds
            # one WAL flush per step.
            conn.execute("SET synchronous_commit = on")
            conn.commit()
            yield conn
        finally:
            conn.close()

    def sqlalchemy_url(self) -> str:
        if self.uri:
            return self.uri.replace("postgresql://", "postgresql+psycopg://", 1)
        if self._url is None:
            raise TargetError(f"PostgreSQL target {self.conn_id or ''}: no SQLAlchemy URL was given")
        return self._url()

    def scheduler_count(self) -> int:
        # PostgreSQL has no scheduler DMV; one COPY keeps one core busy, so the server's
        # core count is the useful number of concurrent COPYs: the COPY slots.
        return self.copy_slots or (os.cpu_count() or 1)

    @contextmanager
    def copy_slot(self, conn) -> Iterator[dict]:
        """One of the server's COPY slots for the block (slots.py); a wait that outlasts
        copy_slot_wait_seconds is worth a retry, not a failure of the data."""
        from switchyard.targets.postgres.slots import NoSlot, copy_slot
        try:
            with copy_slot(conn, self.copy_slots, self.copy_slot_wait_seconds) as held:
                yield held
        except NoSlot as exc:
            raise TargetError(str(exc)) from exc

    def execute(self, statements: list[str]) -> None:
        with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            for stmt in statements:
                cur.execute(stmt)

    def fetch(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self.connection() as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    # --- the run lease (the shared logic is in base.py) ----------------------------------
    def _claim(self, cur) -> tuple:
        for stmt in self.render("lease_claim.sql"):
            cur.execute(stmt, self.lease_params())
        return cur.fetchone()

    def claim_lease(self) -> tuple:
        try:
            with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
                return self._claim(cur)
        except psycopg_errors().UndefinedTable as exc:
            raise TargetError(f"{self.control_schema}.run_lease is missing: did setup.plan run?") from exc

    def drop_lease(self) -> None:
        with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            for stmt in self.render("lease_release.sql", schema_literal=None):
                cur.execute(stmt, self.lease_params())

    def lease(self) -> tuple | None:
        """(holder, batch, acquired_at, expires_at) of the schema's lease, if any."""
        rows = self.fetch(f"SELECT holder, batch, acquired_at, expires_at FROM "
                          f"{self.qualified(self.control_schema, 'run_lease')} WHERE target_schema = %s",
                          (self.schema,))
        return rows[0] if rows else None

    # --- steps --------------------------------------------------------------------------
    def setup(self, plan: LoadPlan) -> None:
        with self.connection() as conn:
            # Concurrent runs creating the same objects would race on IF NOT EXISTS; an
            # advisory lock around setup makes it one at a time. The lease is taken first
            # and committed on its own, so a run that must wait creates nothing.
            if self.lease_holder:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_xact_lock(hashtext('switchyard.setup'))")
                    for stmt in self.render("lease.sql"):
                        cur.execute(stmt)
                    self.check_lease(self._claim(cur))
            import psycopg
            try:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_xact_lock(hashtext('switchyard.setup'))")
                    for stmt in self.setup_sql(plan):
                        cur.execute(stmt)
                    self._check_columns(cur, plan)
            except psycopg.errors.UniqueViolation as exc:
                # The target's unique index, created on a table loaded before it existed.
                raise TargetError(
                    f"setup: the target already holds duplicates of a unique key, so its unique index "
                    f"cannot be built: {exc.diag.message_primary} ({exc.diag.message_detail}); remove the "
                    f"duplicates or drop the table, or declare the table without `unique` in the spec",
                    permanent=True) from exc

    def _check_columns(self, cur, plan: LoadPlan) -> None:
        """Refuse, before any load, a target table whose columns a staging table of this spec
        could not be attached to: one created by an earlier version (varchar(n), now text with
        a length CHECK; every column NOT NULL) or by hand. Only what the spec decides here is
        compared (varchar lengths and nullability); the fix is a DBA's, so it is named, not run."""
        names = [t.table.name for t in plan.tables]
        cur.execute(
            "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull "
            "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = ANY(%s) AND a.attnum > 0 AND NOT a.attisdropped",
            (self.schema, names))
        found = {(t, c): (kind, not_null) for t, c, kind, not_null in cur.fetchall()}
        cur.execute(
            "SELECT c.relname, k.conname FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = ANY(%s) AND k.contype = 'c'", (self.schema, names))
        checks = set(cur.fetchall())
        fixes, why = [], []
        for t in plan.tables:
            table = self.qualified(self.schema, t.table.name)
            for c in t.table.columns:
                if (t.table.name, c.name) not in found:
                    continue
                kind, not_null = found[(t.table.name, c.name)]
                if max_chars(c.sql_type(self.engine)) is not None and kind != "text":
                    why.append(f"{t.table.name}.{c.name} is {kind}, loads make it text with a length CHECK "
                               f"(varchar(n) would cut excess trailing spaces)")
                    fixes.append(f"ALTER TABLE {table} ALTER COLUMN {self.q(c.name)} TYPE text;")
                if not_null == c.nullable:
                    why.append(f"{t.table.name}.{c.name} is {'NOT NULL' if not_null else 'nullable'}, the spec "
                               f"says {'nullable' if c.nullable else 'NOT NULL'}")
                    fixes.append(f"ALTER TABLE {table} ALTER COLUMN {self.q(c.name)} "
                                 f"{'DROP' if c.nullable else 'SET'} NOT NULL;")
            for k in self.length_checks(t.table):
                if (t.table.name, k["name"]) not in checks:
                    why.append(f"{t.table.name} lacks the CHECK {k['name']}")
                    fixes.append(f"ALTER TABLE {table} ADD CONSTRAINT {self.q(k['name'])} CHECK ({k['sql']});")
        if fixes:
            raise TargetError(
                f"the target's tables differ from what this spec loads, so no staging table would attach: "
                f"{'; '.join(why)}. Nothing was loaded. To keep the data, run (a CHECK scans the table once): "
                f"{' '.join(fixes)} Or drop the tables to have them created anew.", permanent=True)

    def create_staging(self, stream: StreamPlan) -> None:
        import psycopg
        try:
            self.execute(self.prepare_sql(stream))
        except psycopg.OperationalError as exc:
            raise TargetError(f"prepare of {stream.group_id}: connection lost: {exc}; nothing was "
                              f"committed") from exc

    def load_staging(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        import psycopg
        table = self.spec.table(stream.table)
        where = f"[table {stream.table}, stream {stream.stream}]"
        statements = self.load_sql(stream)
        at = next(i for i, stmt in enumerate(statements)
                  if "\n".join(ln for ln in stmt.splitlines() if not ln.startswith("--")).startswith("COPY "))
        before, copy, after = statements[:at], statements[at], statements[at + 1:]
        total = path.stat().st_size
        single_field = len(table.columns) == 1 and not table.format.trailing_delimiter
        text_format = copy_format(table.format, table.columns) == "text"
        with self.connection() as conn, self.copy_slot(conn) as slot:
            # The COPY's own time: the wait for a slot is not part of it.
            started = time.monotonic()
            try:
                with conn.transaction(), conn.cursor() as cur:
                    for stmt in before:
                        cur.execute(stmt)
                    # The file as the spec declares it, decompressed while read, header lines
                    # skipped, guarded against the quote byte (see copy_format.py).
                    with open_source(path) as source, cur.copy(copy) as cp:
                        for data in copy_chunks(source.read, table.format, text_format, single_field, _CHUNK):
                            cp.write(data)
                            if progress:
                                progress(source.consumed(), total)
                    rows = cur.rowcount
                    for stmt in after:
                        cur.execute(stmt)
                    pid = conn.info.backend_pid
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
                message = copy_error_message(exc, path, stream, f"{self.staging_schema}.{stream.staging_table}",
                                             table, self.length_checks(table), failed)
                hint = field_count_hint(failed, table)
                if (exc.diag.constraint_name or "").endswith("_range"):
                    hint += (f"; {table.key} must lie in {stream.lower}..{stream.upper}, "
                             f"this stream's key range in the manifest")
                raise TargetError(message + hint, permanent=True) from exc
            seconds = time.monotonic() - started
        return LoadResult(rows=rows, bytes=total, seconds=seconds,
                          details={"backend_pid": pid, "copy_slot": slot["slot"],
                                   "copy_slot_wait_seconds": slot["waited_seconds"]})

    def _existing_partition(self, cur, stream: StreamPlan) -> tuple[str, list[str]] | None:
        """(bound, [parent schema, parent name]) of the partition that has this stream's name
        now, if there is one."""
        cur.execute(
            "SELECT pg_get_expr(c.relpartbound, c.oid), c.relispartition, "
            "       (SELECT ARRAY[pn.nspname::text, p.relname::text] FROM pg_inherits i "
            "        JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace pn ON pn.oid = p.relnamespace "
            "        WHERE i.inhrelid = c.oid) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s",
            (self.schema, stream.partition_table))
        row = cur.fetchone()
        if row is None:
            return None
        bound, is_partition, parent = row
        if not is_partition:
            raise TargetError(f"{self.schema}.{stream.partition_table} exists but is not a partition of "
                              f"{self.schema}.{stream.table}; rename or drop it")
        return bound, parent

    def staging_exists(self, stream: StreamPlan) -> bool:
        return self.fetch("SELECT to_regclass(%s) IS NOT NULL",
                          (self.qualified(self.staging_schema, stream.staging_table),))[0][0]

    def switched_in(self, stream: StreamPlan) -> dict[str, Any] | None:
        """The partition named stream.partition_table, attached to the stream's table FOR
        VALUES FROM (lower) TO (upper + one unit); for an unpartitioned table, the table."""
        if not stream.partitioned:
            exists = self.fetch("SELECT to_regclass(%s) IS NOT NULL", (self.qualified(self.schema, stream.table),))
            return {"partition": None, "attach_scan_skipped": None} if exists[0][0] else None
        with self.connection() as conn, conn.cursor() as cur:
            # Bounds of date and timestamp keys are printed in the session's DateStyle.
            cur.execute("SET DateStyle = 'ISO, YMD'")
            bound, parent = self._existing_partition(cur, stream) or (None, None)
        if bound is None or parent != [self.schema, stream.table]:
            return None
        found = re.fullmatch(r"FOR VALUES FROM \('?([^')]*)'?\) TO \('?([^')]*)'?\)", bound)
        if not found or _bound_values(stream.key_kind, found[1], found[2]) != self.bounds(stream):
            return None
        return {"partition": f"{self.schema}.{stream.partition_table}", "attach_scan_skipped": None}

    def switch_staging(self, stream: StreamPlan) -> dict[str, Any]:
        import psycopg
        notices: list[str] = []
        with self.connection() as conn:
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            try:
                with conn.transaction(), conn.cursor() as cur:
                    replace = stream.partitioned and self._existing_partition(cur, stream) is not None
                    # DEBUG1 carries PostgreSQL's word on whether ATTACH could skip its scan.
                    cur.execute("SET LOCAL client_min_messages = debug1")
                    for stmt in self.switch_sql(stream, replace_existing=replace):
                        cur.execute(stmt)
            except psycopg.errors.LockNotAvailable as exc:
                raise TargetError(
                    f"switch of {stream.group_id} into {self.schema}.{stream.table} waited "
                    f"{self.lock_timeout_seconds}s for a lock (a long-running reader holds the table); "
                    f"nothing was changed, retry later") from exc
            except psycopg.Error as exc:
                raise TargetError(f"switch of {stream.group_id} into {self.schema}.{stream.table} failed: "
                                  f"{exc.diag.message_primary or exc}") from exc
        scan_skipped = any("is implied by existing constraints" in n for n in notices)
        return {"partition": f"{self.schema}.{stream.partition_table}" if stream.partitioned else None,
                "replaced": replace, "attach_scan_skipped": scan_skipped if stream.partitioned else None}

    def prove_unique(self, stream: StreamPlan) -> dict[str, Any] | None:
        """The table's unique columns checked by building their unique index on the staging
        table: the build sorts the rows and fails at the first duplicate; the index is the one
        the target's table has (setup.sql), so the switch's ATTACH adopts it instead of building
        one. Measured at scale 1 against Great Expectations' uniqueness expectations and a
        GROUP BY query: see docs/validation.md. On a duplicate, one GROUP BY
        (only then) counts the duplicated keys and names a few."""
        import psycopg
        table = self.spec.table(stream.table)
        if not table.unique:
            return None
        columns = list(table.unique)
        staging = self.qualified(self.staging_schema, stream.staging_table)
        out: dict[str, Any] = {
            "columns": columns, "index": f"{self.staging_schema}.{self.unique_index_name(stream)}",
            "scope": "table" if self.parent_has_unique_index(table) else "stream", "duplicates": None}
        started = time.monotonic()
        try:
            self.execute(self.unique_index_sql(stream))
        except psycopg.errors.UniqueViolation as exc:
            cols = ", ".join(self.q(c) for c in columns)
            # Names are validated identifiers, quoted; nothing else is in the statement.
            rows = self.fetch(
                f"SELECT {cols}, count(*) AS n, count(*) OVER () AS keys, sum(count(*) - 1) OVER () AS extra "
                f"FROM {staging} GROUP BY {cols} HAVING count(*) > 1 ORDER BY {cols} LIMIT 5")
            out["duplicates"] = {
                "keys": int(rows[0][-2]) if rows else None,
                "extra_rows": int(rows[0][-1]) if rows else None,
                "examples": [{**{c: _json_value(v) for c, v in zip(columns, r)}, "rows": int(r[len(columns)])}
                             for r in rows],
                "server": exc.diag.message_detail}
        except psycopg.OperationalError as exc:
            raise TargetError(f"validate of {stream.group_id}: connection lost while building the unique "
                              f"index: {exc}") from exc
        out["seconds"] = round(time.monotonic() - started, 4)
        return out

    def partitions(self, table: str) -> list[str]:
        """Names of the table's partitions (none when the table does not exist)."""
        rows = self.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s) ORDER BY 1", (self.qualified(self.schema, table),))
        return [r[0] for r in rows]

    def row_count(self, table: str) -> int:
        return self.fetch(f"SELECT count(*) FROM {self.qualified(self.schema, table)}")[0][0]


def _json_value(value: Any) -> Any:
    """A value read from the server as JSON: dates and timestamps in ISO-8601, decimals as text."""
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    return str(value)


def _bound_values(kind: str, lower: str, upper: str) -> tuple | None:
    """A partition bound's FROM and TO values as PostgreSQL prints them (DateStyle ISO), parsed."""
    try:
        if kind == "integer":
            return int(lower), int(upper)
        parse = date.fromisoformat if kind == "date" else datetime.fromisoformat
        return parse(lower), parse(upper)
    except ValueError:
        return None


def psycopg_errors():
    import psycopg
    return psycopg.errors


_COPY_LINE = re.compile(r"\bline (\d+)")
_BAD_BYTES = re.compile(r"invalid byte sequence for encoding \"[^\"]+\": ((?:0x[0-9a-f]{2} ?)+)$")


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
                       length_checks: list[dict] = (), failed: tuple[int, int, bytes] | None = None) -> str:
    """PostgreSQL's COPY error, with the file's own line number and the staging table kept.

    The line is the file's (`failed`, from failed_record). A varchar(n) column's length
    CHECK gets PostgreSQL's own varchar wording and the column; an invalid byte sequence,
    which PostgreSQL reports for the line only, gets the column it is in.

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
    check = next((c for c in length_checks if c["name"] == diag.constraint_name), None)
    if check is not None:
        where = where.split(":", 1)[0] + f", column {check['column']}"
        primary = f"value too long for type character varying({check['max']})"
        detail = f" (check constraint {check['name']}: char_length({check['column']}) <= {check['max']})"
    bad = _BAD_BYTES.match(primary)
    if bad and failed and failed[2] and ", column " not in where:
        at = failed[2].find(bytes(int(b, 16) for b in bad.group(1).split()))
        index = field_index(failed[2][:at], table.format) if at >= 0 else None
        if index is not None and index < len(table.columns):
            where = where.split(":", 1)[0] + f", column {table.columns[index].name}"
    return (f"{path}: {where}: {primary}{detail} [table {stream.table}, stream {stream.stream}; "
            f"staging table {staging} kept for inspection, empty: the COPY rolled back]").replace(": :", ":")


def field_count_hint(failed: tuple[int, int, bytes] | None, table: Table) -> str:
    """When the failing record has the wrong number of fields, say so: the engine's own
    message then names whichever column the shifted values first broke, which misleads."""
    if not failed or not failed[2]:
        return ""
    fields = field_count(failed[2], table.format)
    if fields == len(table.columns):
        return ""
    return f"; line {failed[1]} has {fields} fields, the spec expects {len(table.columns)}"
