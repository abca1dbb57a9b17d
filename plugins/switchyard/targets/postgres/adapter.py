"""PostgreSQL: tablespaces for filegroups, declarative range partitions, COPY FREEZE, ATTACH.

The PostgreSQL form of the record-load method:
* filegroup  -> tablespace (optional: a tablespace needs a directory the server owns);
* staging table with a trusted range CHECK -> the same, written as the partition bound
  (`key >= lower AND key < upper + 1`), which lets ATTACH PARTITION skip its scan;
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

import os
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from switchyard.core.planner import LoadPlan, StreamPlan
from switchyard.core.spec import LoadSpec
from switchyard.targets.base import LoadResult, ProgressCallback, TargetAdapter, TargetError

EOL_COLUMN = "switchyard_eol"
_ENCODINGS = {"utf-8": "UTF8", "utf8": "UTF8", "latin-1": "LATIN1", "latin1": "LATIN1",
              "iso-8859-1": "LATIN1", "ascii": "SQL_ASCII", "cp1252": "WIN1252"}
_CHUNK = 1 << 20
_REFUSED = re.compile(r"FATAL:\s+(password authentication failed|no pg_hba\.conf entry|"
                      r"database \".*\" does not exist|role \".*\" does not exist)")


class PostgresAdapter(TargetAdapter):
    engine = "postgres"
    quote_open = quote_close = '"'

    def __init__(self, spec: LoadSpec, conn_id: str | None = None, uri: str | None = None,
                 tablespaces: dict[int, str] | None = None, airflow_connection: Any = None,
                 copy_slots: int | None = None, copy_slot_wait_seconds: float = 3600.0, **options: Any):
        super().__init__(spec, **options)
        if not conn_id and not uri:
            raise TargetError("PostgreSQL target needs an Airflow connection id or a URI")
        self.conn_id = conn_id
        self.uri = uri
        self._hook = None
        self._airflow_connection = airflow_connection
        self.tablespaces = {k: self.checked(v) for k, v in (tablespaces or {}).items()}
        # How many COPYs the server runs at once (slots.py): the connection's extra
        # {"copy_slots": N} (the server's cores), else this machine's cores (the embedded server
        # runs here); 0 turns the guard off.
        extra = getattr(airflow_connection, "extra_dejson", None) or {}
        configured = copy_slots if copy_slots is not None else extra.get("copy_slots")
        self.copy_slots = int(configured) if configured is not None else (os.cpu_count() or 1)
        self.copy_slot_wait_seconds = float(extra.get("copy_slot_wait_seconds", copy_slot_wait_seconds))

    # --- SQL text ---------------------------------------------------------------------
    def _eol(self) -> str | None:
        return EOL_COLUMN if self.spec.format.trailing_delimiter else None

    def setup_sql(self, plan: LoadPlan) -> list[str]:
        tables = [{"name": t.table.name, "key": t.table.key, "partitioned": t.table.partitioned,
                   "columns": self.columns(t.table)} for t in plan.tables]
        return self.render("setup.sql", tables=tables)

    def prepare_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        return self.render("prepare.sql", s=stream, columns=self.columns(table), key=table.key,
                           eol_column=self._eol(), tablespace=self.tablespaces.get(stream.stream))

    def load_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        encoding = _ENCODINGS.get(self.spec.format.encoding.lower())
        if encoding is None:
            raise TargetError(f"encoding {self.spec.format.encoding!r} has no PostgreSQL name here")
        return self.render("load.sql", s=stream, columns=self.columns(table), eol_column=self._eol(),
                           delimiter=self.spec.format.delimiter.replace("'", "''"), encoding=encoding)

    def switch_sql(self, stream: StreamPlan, replace_existing: bool) -> list[str]:
        template = "switch_partition.sql" if stream.partitioned else "switch_table.sql"
        return self.render(template, s=stream, replace_existing=replace_existing,
                           columns=self.columns(self.spec.table(stream.table)))

    # --- connections --------------------------------------------------------------------
    def _connect(self):
        import psycopg
        try:
            if self.uri:
                return psycopg.connect(self.uri, application_name="switchyard")
            return self.hook().get_conn()
        except psycopg.OperationalError as exc:
            # A refused login or an unknown database stays refused: fail at once instead of
            # retrying. libpq gives no SQLSTATE for a failed connection, only the server's
            # FATAL message (English unless the server's lc_messages says otherwise).
            if _REFUSED.search(str(exc)):
                raise TargetError(f"the target refused the connection {self.conn_id or '(URI)'}: "
                                  f"{str(exc).split('FATAL:', 1)[-1].strip()}", permanent=True) from exc
            raise

    def hook(self):
        """The Airflow hook of the target's connection, one per adapter: it looks the connection
        up once (an API call from a task), not once per statement batch."""
        if self._hook is None:
            from airflow.providers.postgres.hooks.postgres import PostgresHook
            self._hook = PostgresHook(postgres_conn_id=self.conn_id, connection=self._airflow_connection)
        return self._hook

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
        return self.hook().sqlalchemy_url.render_as_string(hide_password=False)

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
            with conn.transaction(), conn.cursor() as cur:
                cur.execute("SELECT pg_advisory_xact_lock(hashtext('switchyard.setup'))")
                for stmt in self.setup_sql(plan):
                    cur.execute(stmt)

    def create_staging(self, stream: StreamPlan) -> None:
        import psycopg
        try:
            self.execute(self.prepare_sql(stream))
        except psycopg.OperationalError as exc:
            raise TargetError(f"prepare of {stream.group_id}: connection lost: {exc}; nothing was "
                              f"committed") from exc

    def load_staging(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult:
        import psycopg
        statements = self.load_sql(stream)
        at = next(i for i, stmt in enumerate(statements) if stmt.startswith("COPY "))
        before, copy, after = statements[:at], statements[at], statements[at + 1:]
        total = path.stat().st_size
        sent = 0
        with self.connection() as conn, self.copy_slot(conn) as slot:
            # The COPY's own time: the wait for a slot is not part of it.
            started = time.monotonic()
            try:
                with conn.transaction(), conn.cursor() as cur:
                    for stmt in before:
                        cur.execute(stmt)
                    # Unbuffered: each read returns what is there (a pipe need not fill 1 MiB
                    # first), so progress and the server see data as it comes.
                    with path.open("rb", buffering=0) as fh, cur.copy(copy) as cp:
                        while chunk := fh.read(_CHUNK):
                            cp.write(chunk)
                            sent += len(chunk)
                            if progress:
                                progress(sent, total)
                    rows = cur.rowcount
                    for stmt in after:
                        cur.execute(stmt)
                    pid = conn.info.backend_pid
            except psycopg.OperationalError as exc:
                raise TargetError(f"{path}: connection lost while loading [table {stream.table}, stream "
                                  f"{stream.stream}]: {exc}; nothing was committed") from exc
            except psycopg.Error as exc:
                message = copy_error_message(exc, path, stream, f"{self.staging_schema}.{stream.staging_table}")
                hint = field_count_hint(exc, path, len(self.spec.table(stream.table).columns),
                                        self.spec.format.delimiter, self.spec.format.trailing_delimiter)
                if (exc.diag.constraint_name or "").endswith("_range"):
                    key = self.spec.table(stream.table).key
                    hint += (f"; {key} must lie in {stream.lower}..{stream.upper}, "
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
        VALUES FROM (lower) TO (upper + 1); for an unpartitioned table, the table."""
        if not stream.partitioned:
            exists = self.fetch("SELECT to_regclass(%s) IS NOT NULL", (self.qualified(self.schema, stream.table),))
            return {"partition": None, "attach_scan_skipped": None} if exists[0][0] else None
        with self.connection() as conn, conn.cursor() as cur:
            bound, parent = self._existing_partition(cur, stream) or (None, None)
        if bound is None or parent != [self.schema, stream.table]:
            return None
        found = re.fullmatch(r"FOR VALUES FROM \('?(-?\d+)'?\) TO \('?(-?\d+)'?\)", bound)
        if not found or (int(found[1]), int(found[2])) != (stream.lower, stream.upper + 1):
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

    def partitions(self, table: str) -> list[str]:
        """Names of the table's partitions (none when the table does not exist)."""
        rows = self.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s) ORDER BY 1", (self.qualified(self.schema, table),))
        return [r[0] for r in rows]

    def row_count(self, table: str) -> int:
        return self.fetch(f"SELECT count(*) FROM {self.qualified(self.schema, table)}")[0][0]


def psycopg_errors():
    import psycopg
    return psycopg.errors


def copy_error_message(exc: Any, path: Path, stream: StreamPlan, staging: str) -> str:
    """PostgreSQL's COPY error, with the file and the staging table kept for inspection.

    The staging table stays until the group's next successful run replaces it, but empty:
    the COPY is one transaction (what lets FREEZE skip WAL), so nothing of a failed file
    is in it. What to inspect is the file at the line and column named here."""
    diag = exc.diag
    primary = diag.message_primary or str(exc)
    where = diag.context or ""
    # context reads 'COPY orders_3, line 42, column o_custkey: "x"'; drop the table name.
    where = where.split(", ", 1)[1] if where.startswith("COPY ") and ", " in where else where
    detail = f" ({diag.message_detail})" if diag.message_detail else ""
    return (f"{path}: {where}: {primary}{detail} [table {stream.table}, stream {stream.stream}; "
            f"staging table {staging} kept for inspection, empty: the COPY rolled back]").replace(": :", ":")


def field_count_hint(exc, path: Path, columns: int, delimiter: str, trailing: bool) -> str:
    """When the failing line has the wrong number of fields, say so: the engine's own message
    then names whichever column the shifted values first broke, which misleads."""
    import re
    match = re.search(r"line (\d+)", exc.diag.context or "")
    if not match:
        return ""
    wanted = int(match.group(1))
    with path.open("rb") as fh:
        for number, line in enumerate(fh, 1):
            if number == wanted:
                break
        else:
            return ""
    body = line.rstrip(b"\r\n")
    fields = body.count(delimiter.encode()) + (0 if trailing and body.endswith(delimiter.encode()) else 1)
    if fields == columns:
        return ""
    return f"; line {wanted} has {fields} fields, the spec expects {columns}"
