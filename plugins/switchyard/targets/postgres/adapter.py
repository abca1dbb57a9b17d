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
* SWITCH -> ATTACH PARTITION, of each stream's staging table to the table's next version
  (a partitioned table in the staging schema); the table's last switch then moves the whole
  next version into the target in one transaction, in place of the partitions it replaces
  (replace mode: all of them; append mode: the batch's own from an earlier run), and applies
  the table's retention. Readers see the table before the batch or after it, never a mix.

Staging tables are made LIKE the target as it is (columns, types, nullability, defaults,
CHECK constraints), and a stream's switch builds the target's indexes and unique or primary
key constraints on its staging table before it attaches it, so that ATTACH attaches them
instead of building them under the table's lock.

`setup` checks the batch against the target before anything loads (pre-flight): the table's
partitioning, its columns, and (append mode) the batch's key ranges against the partitions
of other batches, recorded per partition in the control schema's `partition_batches`.

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
import logging
import os
import re
import time
from contextlib import contextmanager
from datetime import date, datetime
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from switchyard.core import keys
from switchyard.core.files import GZIP_UNDER_PLAIN_NAME, GzipUnderPlainName, StreamFileError, open_source
from switchyard.core.planner import LoadPlan, StreamPlan, TablePlan
from switchyard.core.spec import LoadSpec, Table
from switchyard.targets.base import (LoadResult, ProgressCallback, TargetAdapter, TargetError, stream_rows,
                                     unstaged_problems)
from switchyard.targets.postgres.copy_format import (copy_chunks, copy_format, copy_options, field_count,
                                                     field_index, length_check_name, length_check_sql,
                                                     max_chars, record_at, rendered_type)

log = logging.getLogger(__name__)

EOL_COLUMN = "switchyard_eol"
_ENCODINGS = {"utf-8": "UTF8", "utf8": "UTF8", "latin-1": "LATIN1", "latin1": "LATIN1",
              "iso-8859-1": "LATIN1", "ascii": "SQL_ASCII", "cp1252": "WIN1252"}
_CHUNK = 1 << 20
# When a load releases its COPY slot: before its commit (the files' sync) or after it.
COPY_SLOT_RELEASE = ("copy", "commit")
# The table's next version in the staging schema: `<table>__next` (no staging table, named
# `<table>_<stream>`, ends in letters).
NEXT_SUFFIX = "__next"
_BOUND = re.compile(r"^FOR VALUES FROM \((.+)\) TO \((.+)\)$")
_REFUSED = re.compile(r"FATAL:\s+(password authentication failed|no pg_hba\.conf entry|"
                      r"database \".*\" does not exist|role \".*\" does not exist)")


class PostgresAdapter(TargetAdapter):
    engine = "postgres"
    quote_open = quote_close = '"'
    load_names_its_storage = True
    load_stats_columns = ("backend_pid",)

    @classmethod
    def permanent_error(cls, exc: BaseException) -> str | None:
        from switchyard.targets.postgres.errors import permanent_error
        return permanent_error(exc)

    gx_datasource = "postgres"
    # Login, SSL and the other extras handled as Airflow does.
    airflow_hook = "airflow.providers.postgres.hooks.postgres:PostgresHook"
    # The connection's extra keys that are the adapter's (the COPY slot guard's, slots.py), not
    # the driver's: the hook hands every other extra key to psycopg, which refuses unknown ones.
    ADAPTER_EXTRAS = ("copy_slots", "copy_slot_wait_seconds", "copy_slot_release")

    @classmethod
    def from_connection(cls, spec: LoadSpec, fields: Any, hook: Callable[[], Any] | None = None,
                        **options: Any) -> "PostgresAdapter":
        """A connect callable and a SQLAlchemy URL over the provider's hook, made at first use
        (importing the provider costs a task that never connects nothing)."""
        made = []

        def the_hook():
            if not made:
                h = hook()
                h.ignored_extra_options = set(h.ignored_extra_options) | set(cls.ADAPTER_EXTRAS)
                made.append(h)
            return made[0]

        def connect():
            return the_hook().get_conn()

        def url() -> str:
            return the_hook().sqlalchemy_url.render_as_string(hide_password=False)

        slots = {key: fields.extra[key] for key in cls.ADAPTER_EXTRAS if key in fields.extra}
        return cls(spec, conn_id=fields.conn_id, connect=connect, url=url, **slots, **options)

    @classmethod
    def constraint_proofs(cls, url: str, schema: str, table: str, key: str | None, key_min: Any, key_max: Any,
                          not_null: Sequence[str], key_type: str | None = None,
                          loaded_filenode: int | None = None) -> tuple[str | None, dict[str, str], bool]:
        from switchyard.targets.postgres.proofs import constraint_proofs
        return constraint_proofs(url, schema, table, key, key_min, key_max, not_null, key_type, loaded_filenode)

    @classmethod
    def for_script(cls, spec: LoadSpec, schema: str, args: Any, ports: list[int] | None = None) -> "PostgresAdapter":
        return cls(spec, uri="postgresql://plan-only", schema=schema)

    def __init__(self, spec: LoadSpec, conn_id: str | None = None, uri: str | None = None,
                 tablespaces: dict[int, str] | None = None, connect: Callable[[], Any] | None = None,
                 url: Callable[[], str] | None = None, copy_slots: int | None = None,
                 copy_slot_wait_seconds: float = 3600.0, copy_slot_release: str = "copy", **options: Any):
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
        # When a load gives its slot back (the extra's {"copy_slot_release": ...}): "copy", once
        # its COPY is done, before the commit writes the loaded files to disk and waits for
        # them; "commit", after the commit.
        if copy_slot_release not in COPY_SLOT_RELEASE:
            raise TargetError(f"copy_slot_release: {copy_slot_release!r} is not one of "
                              f"{', '.join(COPY_SLOT_RELEASE)}")
        self.copy_slot_release = copy_slot_release

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
        """A stream's switch: a partitioned table's stream attaches to the table's next version
        (the table's last switch then runs `commit_sql`); an unpartitioned table is replaced whole."""
        if stream.partitioned:
            return self.render("switch_partition.sql", s=stream, next_table=self.next_table(stream.table),
                               attached=False, **self._bound_context(stream))
        return self.render("switch_table.sql", s=stream, replace_existing=replace_existing,
                           columns=self.columns(self.spec.table(stream.table)))

    def commit_sql(self, table_plan: TablePlan) -> list[str]:
        """The table's batch moved in whole, as its last switch runs it into an empty target (the
        partitions it replaces and retires are known only then)."""
        table = table_plan.table
        if not table.partitioned:
            return []
        move = [{"staging": s.staging_table, "partition": s.partition_table, "bound": self._bound_sql(*self.bounds(s))}
                for s in table_plan.streams if not s.empty]
        return self.render("commit_table.sql", table=table.name, next_table=self.next_table(table.name),
                           mode=table.mode, remove=[], move=move, retire=[], retention="", archive_schema=None)

    def _bound_sql(self, lower: keys.KeyValue, upper_next: keys.KeyValue) -> str:
        """FOR VALUES FROM (...) TO (...), the literals rendered from the typed values by `lit`."""
        return f"FOR VALUES FROM ({self.lit(lower)}) TO ({self.lit(upper_next)})"

    def next_table(self, table: str) -> str:
        """The table's next version in the staging schema, which its switches attach to."""
        return self.checked(f"{table}{NEXT_SUFFIX}")

    @property
    def archive_schema(self) -> str:
        """Where `retire: archive` moves partitions that fall out of an append table's window."""
        return self.checked(f"{self.schema}_archive")

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
            # One round trip for the session's settings: that one and the steps' (step_settings).
            settings = {"synchronous_commit": "on", **step_settings(self.step_parallelism)}
            conn.execute("SELECT " + ", ".join("set_config(%s, %s, false)" for _ in settings),
                         [part for item in settings.items() for part in item])
            conn.commit()
            yield conn
        finally:
            conn.close()

    def sqlalchemy_url(self) -> str:
        """The URL Great Expectations and the constraint proofs connect with: the steps'
        settings (step_settings) ride in its `options`, as libpq's `-c name=value`."""
        if self.uri:
            url = self.uri.replace("postgresql://", "postgresql+psycopg://", 1)
        elif self._url is None:
            raise TargetError(f"PostgreSQL target {self.conn_id or ''}: no SQLAlchemy URL was given")
        else:
            url = self._url()
        return with_server_options(url, step_settings(self.step_parallelism))

    def scheduler_count(self) -> int:
        # PostgreSQL has no scheduler DMV; one COPY keeps one core busy, so the server's
        # core count is the useful number of concurrent COPYs: the COPY slots.
        return self.copy_slots or (os.cpu_count() or 1)

    def pool_size(self, per_slot: float | None = None) -> int:
        # The COPY slot guard waits for a free slot: the pool may admit more load tasks than
        # the server has slots (settings.pool_size), never more COPYs. Without the guard
        # (copy_slots 0) the pool is the only cap.
        if not self.copy_slots:
            return self.scheduler_count()
        from switchyard.settings import pool_size
        return pool_size(self.copy_slots, per_slot)

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

    def claim_lease(self, conn=None) -> tuple:
        """The claim in a transaction of its own, on `conn` (between its transactions) or on a
        connection of its own."""
        try:
            if conn is not None:
                with conn.transaction(), conn.cursor() as cur:
                    return self._claim(cur)
            with self.connection() as own, own.transaction(), own.cursor() as cur:
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
    def setup(self, plan: LoadPlan, problems: list[str] = ()) -> list[str]:
        """The run lease, then (one transaction) the pre-flight, missing objects, and for each
        partitioned table its next version and this run's planned partitions. Returns the
        pre-flight's notes; raises a permanent TargetError with every problem it found and the
        batch's own `problems` (found before: files, manifest), creating nothing."""
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
                    # Date and timestamp bounds are read as the server prints them: in ISO.
                    cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
                    checks = self.preflight(cur, plan, problems)
                    # The table brought in line with the spec, as its on_spec_change allows
                    # (the pre-flight refused everything else), before setup.sql's IF NOT EXISTS.
                    for stmt in self.spec_changes:
                        cur.execute(stmt)
                    for stmt in self.setup_sql(plan):
                        cur.execute(stmt)
                    discarded = [note for table_plan in plan.tables if table_plan.table.partitioned
                                 for note in self._plan_next(cur, table_plan)]
                    for table_plan in plan.tables:
                        if not table_plan.table.partitioned:
                            # An earlier run's staged table that never went in: this run loads its own.
                            cur.execute(f"DROP TABLE IF EXISTS "
                                        f"{self.qualified(self.staging_schema, self.next_table(table_plan.table.name))}")
            except psycopg.errors.UniqueViolation as exc:
                # The target's unique index, created on a table loaded before it existed.
                raise TargetError(
                    f"setup: the target already holds duplicates of a unique key, so its unique index "
                    f"cannot be built: {exc.diag.message_primary} ({exc.diag.message_detail}); remove the "
                    f"duplicates or drop the table, or declare the table without `unique` in the spec",
                    permanent=True) from exc
        notes = [n for c in checks for n in c.notes] + self.spec_notes + discarded
        for note in discarded:
            log.warning("pre-flight: %s", note)
        for note in notes:
            log.info("pre-flight: %s", note)
        return notes

    def preflight(self, cur, plan: LoadPlan, batch_problems: list[str] = ()) -> list:
        """Each table of the plan against the target as it is; TargetError (permanent) listing
        every problem, with the batch's own (`batch_problems`), before anything is created or
        loaded."""
        from switchyard.core.preflight import check_table
        checks, problems = [], list(batch_problems)
        self.spec_changes, self.spec_notes = [], []
        for table_plan in plan.tables:
            table = table_plan.table
            where = f"{self.schema}.{table.name}"
            shape = self._target_shape(cur, table.name)
            if shape is not None:
                problems += self._shape_problems(table, shape, where)
                problems += self._spec_differences(cur, table, shape, where)
            existing = self._target_partitions(cur, table.name) if shape and shape["partitioned"] else None
            if shape is not None and existing is None:
                existing = []  # the table is there (an unpartitioned one has no partitions)
            check = check_table(table, list(table_plan.streams), self.lease_batch or "", existing, where,
                                kind=table.key_kind(self.engine), key_type=self.key_type(table.name))
            checks.append(check)
            problems += check.problems
        if problems:
            raise TargetError("pre-flight refused the batch before any load; nothing was changed:\n- "
                              + "\n- ".join(problems), permanent=True)
        return checks

    def _target_shape(self, cur, table: str) -> dict | None:
        """The target table as the catalog has it: partitioned on which columns, and its columns."""
        cur.execute(
            "SELECT c.oid, c.relkind, pt.partstrat, "
            "       (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(pt.partattrs::int2[]) "
            "        WITH ORDINALITY AS k(attnum, ord) LEFT JOIN pg_attribute a "
            "        ON a.attrelid = c.oid AND a.attnum = k.attnum) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_partitioned_table pt ON pt.partrelid = c.oid "
            "WHERE n.nspname = %s AND c.relname = %s", (self.schema, table))
        row = cur.fetchone()
        if row is None:
            return None
        oid, relkind, strategy, key_columns = row
        cur.execute("SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef, attgenerated <> '' "
                    "FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (oid,))
        columns = {name: {"type": t, "not_null": nn, "default": d, "generated": g}
                   for name, t, nn, d, g in cur.fetchall()}
        return {"relkind": relkind, "partitioned": relkind == "p", "strategy": strategy,
                "key": list(key_columns or []), "columns": columns}

    def _shape_problems(self, table, shape: dict, where: str) -> list[str]:
        problems = []
        if table.partitioned and not shape["partitioned"]:
            problems.append(f"{where} exists but is not partitioned (the spec partitions it by range on "
                            f"{table.key}): rename or drop it, or declare the table partitioned: false")
        elif table.partitioned and (shape["strategy"] != "r" or shape["key"] != [table.key]):
            problems.append(f"{where} is partitioned by {'range' if shape['strategy'] == 'r' else 'list or hash'} "
                            f"on ({', '.join(c or '<expression>' for c in shape['key'])}), the spec by range on "
                            f"{table.key}: rename or drop it, or change the spec's key")
        elif not table.partitioned and shape["partitioned"]:
            problems.append(f"{where} is partitioned, the spec declares it partitioned: false: rename or drop "
                            f"it, or change the spec")
        return problems

    def _spec_differences(self, cur, table: Table, shape: dict, where: str) -> list[str]:
        """The table against the spec (core/spec_diff.py): the problems that refuse the batch;
        the statements its on_spec_change runs (`spec_changes`) and the notes (`spec_notes`)."""
        from switchyard.core.spec_diff import compare, reconcile
        from switchyard.targets.postgres import spec_change
        our_unique = self.index_name(table.name)
        existing = spec_change.existing_table(cur, self.qualified(self.schema, table.name), shape, our_unique)
        types = spec_change.needed_types(cur, self, self.columns(table))
        needed = spec_change.needed(types, self.length_checks(table),
                                    our_unique if self.parent_has_unique_index(table) else None)
        differences = compare(table, existing, needed, spec_change.Statements(self, table))
        problems, notes, statements = reconcile(table, differences, where)
        self.spec_changes += statements
        self.spec_notes += notes
        return problems

    def _target_partitions(self, cur, table: str, schema: str | None = None) -> list:
        """The table's partitions now, with their bounds and the batch each one is recorded to."""
        from switchyard.core.preflight import Partition, parse_bound_value
        kind = self.spec.table(table).key_kind(self.engine)
        cur.execute(
            "SELECT n.nspname::text, c.relname::text, pg_get_expr(c.relpartbound, c.oid) "
            "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE i.inhparent = to_regclass(%s) ORDER BY c.relname",
            (self.qualified(schema or self.schema, table),))
        rows = cur.fetchall()
        recorded = self._recorded_batches(cur, table) if schema is None else {}
        out = []
        for nsp, name, bound in rows:
            found = _BOUND.match(bound or "")
            if bound == "DEFAULT" or not found:
                out.append(Partition(name=name, lower=None, upper=None, schema=nsp, default=True,
                                     batch=recorded.get(name)))
                continue
            out.append(Partition(name=name, lower=parse_bound_value(found[1], kind),
                                 upper=parse_bound_value(found[2], kind), batch=recorded.get(name), schema=nsp))
        return out

    def _recorded_batches(self, cur, table: str) -> dict[str, str]:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (self.qualified(self.control_schema, "partition_batches"),))
        if not cur.fetchone()[0]:
            return {}
        cur.execute(f"SELECT partition_name, batch FROM {self.qualified(self.control_schema, 'partition_batches')} "
                    f"WHERE target_schema = %s AND table_name = %s", (self.schema, table))
        return dict(cur.fetchall())

    def _plan_next(self, cur, table_plan: TablePlan) -> list[str]:
        """The table's next version, empty, and this run's planned partitions of it. Another
        run's next version still waiting there (a run with a failed group) is discarded, and
        said so: returns that note."""
        table = table_plan.table
        params = {"schema": self.schema, "table": table.name}
        notes = []
        pending = self._planned(cur, table.name)
        others = {(p["run"], p["batch"]) for p in pending.values() if p["run"] != (self.lease_holder or "")}
        if others:
            cur.execute("SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                        "WHERE i.inhparent = to_regclass(%s) ORDER BY 1",
                        (self.qualified(self.staging_schema, self.next_table(table.name)),))
            held = [r[0] for r in cur.fetchall()]
            for run, batch in sorted(others):
                notes.append(f"{self.schema}.{table.name}: batch {batch} (run {run or '(none)'}) never went in: "
                             f"its validated groups ({', '.join(held) or 'none'}) waited for the rest of its batch "
                             f"and are discarded now; to load batch {batch}, run it again from setup.plan")
        for stmt in self.render("next_table.sql", table=table.name, key=table.key,
                                next_table=self.next_table(table.name)):
            cur.execute(stmt, params if "%(" in stmt else None)
        rows = [(self.schema, table.name, s.staging_table, s.partition_table, s.stream, self.lease_batch or "",
                 str(s.lower), str(s.upper), s.rows, self.lease_holder or "")
                for s in table_plan.streams if not s.empty]
        if rows:
            cur.executemany(
                f"INSERT INTO {self.qualified(self.control_schema, 'planned_partitions')} (target_schema, "
                f"table_name, staging_table, partition_name, stream, batch, key_min, key_max, rows_planned, run, "
                f"planned_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())", rows)
        return notes

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
                # skipped, guarded against the quote byte (see copy_format.py).
                with open_source(path) as source, cur.copy(copy) as cp:
                    for data in copy_chunks(source.read, table.format, text_format, single_field, _CHUNK):
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
        copied = time.monotonic()
        if release is None:
            copy_ended_at = time.time()
        return rows, pid, copy_began_at, copy_ended_at, copied - started, copied, filenode

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
            if self.spec.publish == "batch":
                # Validated and staged as the table's next version: the batch's publish moves it in.
                staged = self.fetch("SELECT to_regclass(%s) IS NOT NULL",
                                    (self.qualified(self.staging_schema, self.next_table(stream.table)),))
                return ({"partition": None, "attach_scan_skipped": None, "in_target": False,
                         "table_switched": False} if staged[0][0] else None)
            exists = self.fetch("SELECT to_regclass(%s) IS NOT NULL", (self.qualified(self.schema, stream.table),))
            return {"partition": None, "attach_scan_skipped": None, "in_target": True} if exists[0][0] else None
        with self.connection() as conn, conn.cursor() as cur:
            # Bounds of date and timestamp keys are printed in the session's DateStyle.
            cur.execute("SET DateStyle = 'ISO, YMD'")
            bound, parent = self._existing_partition(cur, stream) or (None, None)
        if bound is None or parent != [self.schema, stream.table]:
            return None
        found = re.fullmatch(r"FOR VALUES FROM \('?([^')]*)'?\) TO \('?([^')]*)'?\)", bound)
        if not found or _bound_values(stream.key_kind, found[1], found[2]) != self.bounds(stream):
            return None
        return {"partition": f"{self.schema}.{stream.partition_table}", "attach_scan_skipped": None,
                "in_target": True}

    def switch_staging(self, stream: StreamPlan) -> dict[str, Any]:
        """Unpartitioned: the table replaced whole. Partitioned: the target's indexes built on the
        staging table, which then joins the table's next version; the table's last switch moves
        the next version in (`in_target` says whether the partition is in the target now)."""
        import psycopg
        if stream.partitioned:
            indexes = self._build_target_indexes(stream)
            return {**self._stage(stream), **indexes}
        if self.spec.publish == "batch":
            return self._stage_whole(stream)
        try:
            self.execute(self.switch_sql(stream, replace_existing=True))
        except psycopg.errors.LockNotAvailable as exc:
            raise self._lock_error(stream) from exc
        except psycopg.Error as exc:
            raise TargetError(f"switch of {stream.group_id} into {self.schema}.{stream.table} failed: "
                              f"{exc.diag.message_primary or exc}") from exc
        return {"partition": None, "replaced": True, "attach_scan_skipped": None, "in_target": True,
                "table_switched": True}

    def _lock_error(self, stream: StreamPlan) -> TargetError:
        return TargetError(
            f"switch of {stream.group_id} into {self.schema}.{stream.table} waited "
            f"{self.lock_timeout_seconds}s for a lock (a long-running reader holds the table); "
            f"nothing was changed, retry later")

    # --- the table's next version and its commit -------------------------------------------
    def _planned(self, cur, table: str) -> dict[str, dict]:
        """This table's planned partitions (setup's), by staging table name."""
        cur.execute(
            f"SELECT staging_table, partition_name, stream, batch, key_min, key_max, rows_planned, run "
            f"FROM {self.qualified(self.control_schema, 'planned_partitions')} "
            f"WHERE target_schema = %s AND table_name = %s ORDER BY stream", (self.schema, table))
        keys = ("staging_table", "partition_name", "stream", "batch", "key_min", "key_max", "rows_planned", "run")
        return {row[0]: dict(zip(keys, row)) for row in cur.fetchall()}

    def _next_bounds(self, cur, table: str) -> dict[str, str]:
        """Staging table -> the bound it is attached to the table's next version with (server text)."""
        cur.execute("SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
                    "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s)",
                    (self.qualified(self.staging_schema, self.next_table(table)),))
        return dict(cur.fetchall())

    def _stage(self, stream: StreamPlan) -> dict[str, Any]:
        import psycopg
        notices: list[str] = []
        where = f"{self.schema}.{stream.table}"
        with self.connection() as conn:
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            try:
                with conn.transaction(), conn.cursor() as cur:
                    planned = self._planned(cur, stream.table)
                    mine = planned.get(stream.staging_table)
                    holder = self.lease_holder or ""
                    if mine is None or mine["run"] != holder:
                        by = (f"run {next(iter(planned.values()))['run'] or '(no run)'} (batch "
                              f"{next(iter(planned.values()))['batch']})" if planned else "no run")
                        raise TargetError(
                            f"switch of {stream.group_id}: {where} has no switch of this run pending: its next "
                            f"version was planned by {by}. A group of an earlier run cannot switch into it; "
                            f"run this batch again from setup.plan (clear the whole run)", permanent=True)
                    if (mine["partition_name"], mine["key_min"], mine["key_max"]) != (
                            stream.partition_table, str(stream.lower), str(stream.upper)):
                        raise TargetError(
                            f"switch of {stream.group_id}: setup planned {mine['partition_name']} (keys "
                            f"{mine['key_min']}..{mine['key_max']}), this group carries {stream.partition_table}; "
                            f"run the batch again from setup.plan", permanent=True)
                    cur.execute("SELECT to_regclass(%s) IS NOT NULL",
                                (self.qualified(self.staging_schema, self.next_table(stream.table)),))
                    if not cur.fetchone()[0]:
                        raise TargetError(
                            f"switch of {stream.group_id}: the next version of {where}, "
                            f"{self.staging_schema}.{self.next_table(stream.table)}, is missing (dropped by hand?); "
                            f"run the batch again from setup.plan", permanent=True)
                    attached = stream.staging_table in self._next_bounds(cur, stream.table)
                    # Date and timestamp bounds are read as the server prints them: in ISO.
                    cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
                    # DEBUG1 carries PostgreSQL's word on whether ATTACH could skip its scan.
                    cur.execute("SET LOCAL client_min_messages = debug1")
                    for stmt in self.render("switch_partition.sql", s=stream, attached=attached,
                                            next_table=self.next_table(stream.table),
                                            **self._bound_context(stream)):
                        cur.execute(stmt)
                    # After the lock: the table's other switches that went before are visible now.
                    bounds = self._next_bounds(cur, stream.table)
                    replaced = self._existing_partition(cur, stream) is not None
                    waiting = sorted(set(planned) - set(bounds), key=lambda n: planned[n]["stream"])
                    result: dict[str, Any] = {
                        "partition": f"{self.schema}.{stream.partition_table}", "replaced": replaced,
                        "already_switched": attached, "in_target": False, "table_switched": False,
                        "waiting_for": waiting}
                    # `publish: table`: the table's last switch moves its batch in. `publish: batch`:
                    # the batch's publish moves every table in together (publish_batch).
                    if not waiting and self.spec.publish == "table":
                        result.update(self._commit_table(cur, stream.table, planned, bounds))
                        result["in_target"] = True
            except psycopg.errors.LockNotAvailable as exc:
                raise self._lock_error(stream) from exc
            except psycopg.Error as exc:
                raise TargetError(f"switch of {stream.group_id} into {where} failed: "
                                  f"{exc.diag.message_primary or exc}") from exc
        # One notice per ATTACH that proved its bound from the CHECK constraint instead of scanning.
        attaches = (0 if attached else 1) + result.get("partitions_in", 0)
        skipped = sum("is implied by existing constraints" in n for n in notices)
        result["attach_scan_skipped"] = skipped >= attaches if attaches else None
        return result

    def _commit_table(self, cur, table: str, planned: dict[str, dict], bounds: dict[str, str]) -> dict[str, Any]:
        """The table's batch moved in whole, in the caller's transaction (its last switch's)."""
        from switchyard.core.preflight import Partition, retention
        spec_table = self.spec.table(table)
        batch = next(iter(planned.values()))["batch"]
        current = self._target_partitions(cur, table)
        if spec_table.mode == "replace":
            remove = current
        else:
            remove = [p for p in current if p.batch == batch]
        incoming = {p["partition_name"] for p in planned.values()}
        kept = [p for p in current if p not in remove]
        clash = [p.name for p in kept if p.name in incoming]
        if clash:
            raise TargetError(f"{self.schema}.{table}: partition {', '.join(clash)} belongs to another batch; "
                              f"this batch would take its name. Nothing was switched; run the batch again from "
                              f"setup.plan, whose pre-flight says what differs", permanent=True)
        stray = [p for p in remove if p.schema != self.schema]
        if stray:
            raise TargetError(f"{self.schema}.{table}: partition {stray[0].schema}.{stray[0].name} lives in another "
                              f"schema; move it to {self.schema} or detach it", permanent=True)
        kind, key_type = spec_table.key_kind(self.engine), self.key_type(table)
        for p in planned.values():
            p["lower"] = _typed(p["key_min"], kind)
            p["upper_next"] = keys.after(_typed(p["key_max"], kind), key_type)
        after = kept + [Partition(name=p["partition_name"], batch=batch, lower=p["lower"], upper=p["upper_next"])
                        for p in planned.values()]
        retired, why = retention(spec_table, after)
        if any(p.batch == batch for p in retired):
            raise TargetError(f"{self.schema}.{table}: batch {batch} would be retired as it goes in ({why}); "
                              f"nothing was switched", permanent=True)
        retire = [{"name": p.name, "archived_as": self._archive_name(cur, p.name)
                   if spec_table.retire == "archive" else None} for p in retired]
        staged = [planned[name] for name in sorted(planned, key=lambda n: planned[n]["stream"])]
        # The bounds the plan gave (the ones each stream's switch attached with), rendered by `lit`.
        move = [{"staging": p["staging_table"], "partition": p["partition_name"],
                 "bound": self._bound_sql(p["lower"], p["upper_next"])} for p in staged]
        for stmt in self.render("commit_table.sql", table=table, next_table=self.next_table(table),
                                mode=spec_table.mode, remove=[p.name for p in remove], move=move, retire=retire,
                                retention=", ".join(f"{k}: {v}" for k, v in (("keep", spec_table.keep),
                                                    ("keep_days", spec_table.keep_days)) if v is not None),
                                archive_schema=self.archive_schema
                                if spec_table.retire == "archive" else None):
            cur.execute(stmt)
        control = self.qualified(self.control_schema, "partition_batches")
        gone = [p.name for p in remove] + [p.name for p in retired]
        cur.execute(f"DELETE FROM {control} WHERE target_schema = %s AND table_name = %s "
                    f"AND partition_name = ANY(%s)", (self.schema, table, gone + sorted(incoming)))
        cur.executemany(
            f"INSERT INTO {control} (target_schema, table_name, partition_name, batch, key_min, key_max, "
            f"rows_planned, run, switched_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now())",
            [(self.schema, table, p["partition_name"], batch, p["key_min"], p["key_max"], p["rows_planned"],
              p["run"]) for p in staged])
        cur.execute(f"DELETE FROM {self.qualified(self.control_schema, 'planned_partitions')} "
                    f"WHERE target_schema = %s AND table_name = %s", (self.schema, table))
        log.info("%s.%s: batch %s switched in: %d partitions%s%s", self.schema, table, batch, len(staged),
                 f"; replaced {', '.join(p.name for p in remove)}" if remove else "",
                 f"; {why}" + (f" (moved to {self.archive_schema})" if spec_table.retire == "archive" else " (dropped)")
                 if retired else "")
        return {"table_switched": True, "batch": batch, "partitions_in": len(staged),
                "removed": [p.name for p in remove],
                "retired": [f"{self.archive_schema}.{r['archived_as']}" if r["archived_as"] else r["name"]
                            for r in retire]}

    def _stage_whole(self, stream: StreamPlan) -> dict[str, Any]:
        """An unpartitioned table's validated staging table, renamed to the table's next version
        (`publish: batch`): the batch's publish replaces the table's rows with it."""
        import psycopg
        staged = self.qualified(self.staging_schema, stream.staging_table)
        try:
            self.execute([f"DROP TABLE IF EXISTS {self.qualified(self.staging_schema, self.next_table(stream.table))}",
                          f"ALTER TABLE {staged} RENAME TO {self.q(self.next_table(stream.table))}"])
        except psycopg.Error as exc:
            raise TargetError(f"switch of {stream.group_id}: could not stage {staged} as the next version of "
                              f"{self.schema}.{stream.table}: {exc.diag.message_primary or exc}") from exc
        return {"partition": None, "replaced": None, "already_switched": False, "in_target": False,
                "table_switched": False, "waiting_for": []}

    def publish_batch(self, streams: list[StreamPlan]) -> dict[str, Any]:
        """Every table of the batch in, in one transaction (`publish: batch`): readers see the
        previous batch or this one, across tables. `streams`: the run's plan for its tables.

        Refuses, changing nothing, unless every stream the plan loads was validated and staged
        (attached to its table's next version, or an unpartitioned table's next version made):
        a stream that produced no load is named, with its rows. Every table is locked first, in
        name order, with `lock_timeout`: a long reader delays the publish, not the other way
        round, and the transaction then changes catalog entries only (an unpartitioned table's
        rows are copied: a lookup table's). A retry whose earlier attempt committed finds
        nothing pending and this run's rows in `partition_batches`: it reports that."""
        import psycopg
        holder = self.lease_holder or ""
        by_table: dict[str, list[StreamPlan]] = {}
        for s in streams:
            by_table.setdefault(s.table, []).append(s)
        names = sorted(by_table)
        started = time.monotonic()
        notices: list[str] = []
        with self.connection() as conn:
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            try:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
                    cur.execute(f"SET LOCAL lock_timeout = '{int(self.lock_timeout_seconds)}s'")
                    # DEBUG1 carries PostgreSQL's word on whether each ATTACH skipped its scan.
                    cur.execute("SET LOCAL client_min_messages = debug1")
                    if not self._anything_staged(cur, names, holder) and self._published_by(cur, names, holder):
                        return {"tables": names, "already_published": True, "lock_seconds": 0.0}
                    pending, problems = self._publish_pending(cur, by_table, holder)
                    if problems:
                        raise TargetError(
                            f"publish of batch {self.lease_batch or ''} refused; no table of the batch was "
                            f"published, every table keeps its previous contents:\n- " + "\n- ".join(problems),
                            permanent=True)
                    # One statement locks every table, in this order (PostgreSQL takes them one by
                    # one in the order listed), so two publishes never wait on each other in a circle.
                    cur.execute("LOCK TABLE " + ", ".join(self.qualified(self.schema, n) for n in names)
                                + " IN ACCESS EXCLUSIVE MODE")
                    locked = time.monotonic()
                    tables = {}
                    for name in names:
                        table = self.spec.table(name)
                        if table.partitioned:
                            tables[name] = self._commit_table(cur, name, pending[name],
                                                              self._next_bounds(cur, name))
                        else:
                            tables[name] = self._commit_whole(cur, by_table[name][0])
                # The transaction's end: the locks are held until the commit is on disk.
                committed = time.monotonic()
            except psycopg.errors.LockNotAvailable as exc:
                raise TargetError(f"publish of batch {self.lease_batch or ''} waited {self.lock_timeout_seconds}s "
                                  f"for a lock on {', '.join(names)} (a long-running reader holds one); nothing "
                                  f"was published, retry later") from exc
            except psycopg.Error as exc:
                raise TargetError(f"publish of batch {self.lease_batch or ''} into {self.schema} failed: "
                                  f"{exc.diag.message_primary or exc}; nothing was published") from exc
        attaches = sum(t.get("partitions_in", 0) for t in tables.values())
        skipped = sum("is implied by existing constraints" in n for n in notices)
        return {"tables": names, "already_published": False, "by_table": tables,
                "attach_scan_skipped": skipped >= attaches if attaches else None,
                "lock_seconds": round(committed - locked, 4), "seconds": round(committed - started, 4)}

    def _publish_pending(self, cur, by_table: dict[str, list[StreamPlan]], holder: str
                         ) -> tuple[dict[str, dict], list[str]]:
        """(each partitioned table's planned partitions, every reason the batch cannot go in)."""
        pending, problems = {}, []
        for name, table_streams in sorted(by_table.items()):
            where = f"{self.schema}.{name}"
            loads = [s for s in table_streams if not s.empty]
            if not self.spec.table(name).partitioned:
                cur.execute("SELECT to_regclass(%s) IS NOT NULL",
                            (self.qualified(self.staging_schema, self.next_table(name)),))
                if not cur.fetchone()[0]:
                    problems.append(f"{where}: its stream ({stream_rows(loads[0])}) was not validated and switched in "
                                    f"this run")
                continue
            planned = {k: v for k, v in self._planned(cur, name).items() if v["run"] == holder}
            if not planned:
                if loads:
                    problems.append(f"{where}: nothing of this run is pending (planned by another run, or "
                                    f"published already)")
                continue
            attached = self._next_bounds(cur, name)
            problems += unstaged_problems(where, loads, lambda s: s.staging_table in attached,
                                          lambda s: s.staging_table in planned)
            pending[name] = planned
        return pending, problems

    def _anything_staged(self, cur, tables: list[str], holder: str) -> bool:
        """Whether any of `tables` has something of this run waiting to go in: a planned
        partition, or an unpartitioned table's next version."""
        cur.execute(f"SELECT count(*) FROM {self.qualified(self.control_schema, 'planned_partitions')} "
                    f"WHERE target_schema = %s AND table_name = ANY(%s) AND run = %s", (self.schema, tables, holder))
        if cur.fetchone()[0]:
            return True
        for name in tables:
            if not self.spec.table(name).partitioned:
                cur.execute("SELECT to_regclass(%s) IS NOT NULL",
                            (self.qualified(self.staging_schema, self.next_table(name)),))
                if cur.fetchone()[0]:
                    return True
        return False

    def _published_by(self, cur, tables: list[str], holder: str) -> bool:
        """Whether this run's publish committed already: its rows in partition_batches."""
        cur.execute(f"SELECT count(*) FROM {self.qualified(self.control_schema, 'partition_batches')} "
                    f"WHERE target_schema = %s AND table_name = ANY(%s) AND run = %s", (self.schema, tables, holder))
        return cur.fetchone()[0] > 0

    def _commit_whole(self, cur, stream: StreamPlan) -> dict[str, Any]:
        """An unpartitioned table's rows replaced by its next version's, in the caller's
        transaction. TRUNCATE and INSERT keep the table itself (its grants, the views on it);
        the rows are copied under the publish's lock: a lookup table's, a few milliseconds."""
        table = self.spec.table(stream.table)
        target = self.qualified(self.schema, table.name)
        staged = self.qualified(self.staging_schema, self.next_table(table.name))
        cols = ", ".join(self.q(c.name) for c in table.columns)
        cur.execute(f"TRUNCATE {target}")
        cur.execute(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {staged}")
        rows = cur.rowcount
        cur.execute(f"DROP TABLE {staged}")
        control = self.qualified(self.control_schema, "partition_batches")
        cur.execute(f"DELETE FROM {control} WHERE target_schema = %s AND table_name = %s", (self.schema, table.name))
        # Recorded as a table-wide "partition" named after the table: the run that published it.
        cur.execute(f"INSERT INTO {control} (target_schema, table_name, partition_name, batch, key_min, key_max, "
                    f"rows_planned, run, switched_at) VALUES (%s, %s, %s, %s, '', '', %s, %s, now())",
                    (self.schema, table.name, table.name, self.lease_batch or "", stream.rows, self.lease_holder or ""))
        if stream.rows is not None and rows != stream.rows:
            # Validation counted the staging table; a different count now means it changed since.
            raise TargetError(f"{self.schema}.{table.name}: {rows} rows to publish, the manifest says {stream.rows}; "
                              f"nothing was published", permanent=True)
        log.info("%s: replaced whole by batch %s: %d rows", target, self.lease_batch, rows)
        return {"table_switched": True, "rows": rows}

    def _archive_name(self, cur, name: str) -> str:
        """`name` in the archive schema, or `name_<n>` when an earlier retirement took it."""
        for n in range(0, 1000):
            candidate = self.checked(name if n == 0 else f"{name[:56]}_{n}")
            cur.execute("SELECT to_regclass(%s) IS NULL", (self.qualified(self.archive_schema, candidate),))
            if cur.fetchone()[0]:
                return candidate
        raise TargetError(f"{self.archive_schema}: no free name for {name}")

    # --- the target's indexes on the staging table ------------------------------------------
    def _staging_index_name(self, stream: StreamPlan, parent_index: str) -> str:
        """Unique in the target schema once the partition moves there: the partition's name and
        the parent index's, hashed when that would pass PostgreSQL's 63 bytes."""
        digest = hashlib.md5(parent_index.encode()).hexdigest()[:8]
        name = f"{stream.partition_table}_{digest}"
        if len(name) > 63:
            name = f"{stream.table[:30]}_{hashlib.md5((stream.partition_table + parent_index).encode()).hexdigest()[:24]}"
        return self.checked(name)

    def target_indexes(self, cur, table: str, schema: str | None = None) -> list[dict[str, Any]]:
        """A table's indexes (the target's, or with `schema` a staging table's): name, whether
        unique, the definition of the constraint that owns it (primary key, unique, exclusion)
        if one does, and the index's own definition after `USING` (columns, opclasses, INCLUDE,
        WHERE), as the server writes them."""
        schema = schema or self.schema
        cur.execute("SET LOCAL search_path = pg_catalog")  # the server writes every name qualified
        cur.execute(
            "SELECT ic.relname::text, i.indisunique, pg_get_indexdef(i.indexrelid), con.conname::text, "
            "       pg_get_constraintdef(con.oid), quote_ident(%s) || '.' || quote_ident(%s) "
            "FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid "
            "LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid "
            "     AND con.contype IN ('p', 'u', 'x') "
            "WHERE i.indrelid = to_regclass(%s) ORDER BY 1",
            (schema, table, self.qualified(schema, table)))
        out = []
        for name, unique, indexdef, constraint, constraintdef, ref in cur.fetchall():
            entry = {"name": name, "unique": unique, "constraint": constraintdef if constraint else None,
                     "using": None}
            for marker in (f" ON ONLY {ref} USING ", f" ON {ref} USING "):
                if marker in indexdef:
                    entry["using"] = indexdef.split(marker, 1)[1]
                    break
            out.append(entry)
        cur.execute("RESET search_path")
        return out

    def _build_target_indexes(self, stream: StreamPlan) -> dict[str, Any]:
        """The target's indexes and key constraints built on the staging table, in a transaction
        of their own before the switch's: ATTACH PARTITION then attaches them instead of building
        them while it holds the table. Idempotent: a retry finds them built."""
        staging = self.qualified(self.staging_schema, stream.staging_table)
        started = time.monotonic()
        built = []
        with self.connection() as conn:
            with conn.transaction(), conn.cursor() as cur:
                indexes = self.target_indexes(cur, stream.table)
                if not indexes:
                    return {"indexes_built": [], "index_seconds": 0.0}
                on_staging = self.target_indexes(cur, stream.staging_table, schema=self.staging_schema)
                present = {i["name"] for i in on_staging}
                # An equivalent index is there already (validation's unique index, or an earlier
                # attempt's): ATTACH adopts it. A constraint's index counts only as that constraint.
                equivalent = {(i["unique"], i["using"], i["constraint"]) for i in on_staging}
                for index in indexes:
                    name = self._staging_index_name(stream, index["name"])
                    if name in present or (index["unique"], index["using"], index["constraint"]) in equivalent:
                        continue
                    if index["constraint"]:
                        # The server's own text of the target's constraint (PRIMARY KEY (...), UNIQUE (...)).
                        cur.execute(f"ALTER TABLE {staging} ADD CONSTRAINT {self.q(name)} {index['constraint']}")
                    elif index["using"]:
                        cur.execute(f"CREATE {'UNIQUE ' if index['unique'] else ''}INDEX {self.q(name)} "
                                    f"ON {staging} USING {index['using']}")
                    else:
                        log.warning("%s: index %s of %s.%s not reproduced on the staging table; ATTACH builds it",
                                    stream.group_id, index["name"], self.schema, stream.table)
                        continue
                    built.append(index["name"])
        seconds = round(time.monotonic() - started, 4)
        if built:
            log.info("%s: built the target's %s on the staging table in %.2f s", stream.group_id,
                     ", ".join(built), seconds)
        return {"indexes_built": built, "index_seconds": seconds}

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
            out["duplicates"] = self._duplicates(staging, columns, exc)
        except psycopg.OperationalError as exc:
            raise TargetError(f"validate of {stream.group_id}: connection lost while building the unique "
                              f"index: {exc}") from exc
        out["seconds"] = round(time.monotonic() - started, 4)
        return out

    def prove_target_uniques(self, stream: StreamPlan) -> list[dict[str, Any]]:
        """The target's unique indexes besides the spec's own (a DBA's index or primary key),
        each built on the staging table now, at validate, so that a duplicate fails the group's
        validation, naming the index and a few duplicated keys, before any switch (where the
        index would otherwise be built, see _build_target_indexes, which then finds it there).
        One result per index, as prove_unique's."""
        import psycopg
        from switchyard.targets.postgres.spec_change import UNIQUES_SQL
        staging = self.qualified(self.staging_schema, stream.staging_table)
        ours = self.index_name(stream.table)
        with self.connection() as conn, conn.cursor() as cur:
            indexes = {i["name"]: i for i in self.target_indexes(cur, stream.table) if i["unique"]}
            cur.execute(UNIQUES_SQL, (self.qualified(self.schema, stream.table),))
            columns = {name: (None if expression else list(cols or ())) for name, cols, expression in cur.fetchall()}
        out = []
        for name, index in sorted(indexes.items()):
            if (name == ours and self.spec.table(stream.table).unique) or not (index["constraint"] or index["using"]):
                continue    # the spec's own: prove_unique checks it
            on_staging = self._staging_index_name(stream, name)
            found: dict[str, Any] = {"columns": columns.get(name) or ["<expression>"],
                                     "index": f"{self.schema}.{name}", "scope": "table", "duplicates": None}
            started = time.monotonic()
            statement = (f"ALTER TABLE {staging} ADD CONSTRAINT {self.q(on_staging)} {index['constraint']}"
                         if index["constraint"] else
                         f"CREATE UNIQUE INDEX IF NOT EXISTS {self.q(on_staging)} ON {staging} USING {index['using']}")
            try:
                with self.connection() as conn, conn.cursor() as cur:
                    cur.execute("SELECT to_regclass(%s) IS NULL",
                                (self.qualified(self.staging_schema, on_staging),))
                    if cur.fetchone()[0]:   # a retried validation finds it built
                        cur.execute(statement)
            except psycopg.errors.UniqueViolation as exc:
                found["duplicates"] = self._duplicates(staging, columns.get(name), exc)
            found["seconds"] = round(time.monotonic() - started, 4)
            out.append(found)
        return out

    def _duplicates(self, staging: str, columns: list[str] | None, exc: Any) -> dict[str, Any]:
        """How many keys of `columns` the staging table holds more than once, and a few of them
        (one GROUP BY, only after an index build found a duplicate)."""
        out: dict[str, Any] = {"keys": None, "extra_rows": None, "examples": [], "server": exc.diag.message_detail}
        if not columns:
            return out
        cols = ", ".join(self.q(c) for c in columns)
        # Names are validated identifiers (the spec's, or the catalog's), quoted; nothing else is in it.
        rows = self.fetch(
            f"SELECT {cols}, count(*) AS n, count(*) OVER () AS keys, sum(count(*) - 1) OVER () AS extra "
            f"FROM {staging} GROUP BY {cols} HAVING count(*) > 1 ORDER BY {cols} LIMIT 5")
        if rows:
            out.update(keys=int(rows[0][-2]), extra_rows=int(rows[0][-1]),
                       examples=[{**{c: _json_value(v) for c, v in zip(columns, r)}, "rows": int(r[len(columns)])}
                                 for r in rows])
        return out

    def partitions(self, table: str) -> list[str]:
        """Names of the table's partitions (none when the table does not exist)."""
        rows = self.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s) ORDER BY 1", (self.qualified(self.schema, table),))
        return [r[0] for r in rows]

    def row_count(self, table: str) -> int:
        return self.fetch(f"SELECT count(*) FROM {self.qualified(self.schema, table)}")[0][0]


# The steps' statements without parallel workers (SWITCHYARD_STEP_PARALLELISM=serial, the
# default). The method runs one COPY per server core (the COPY slots), so while a batch loads
# every core is busy: a unique index build or a row count that adds workers only shares those
# cores with the COPYs, and pays for the workers' start and their exchange of tuples. Measured
# on one scale-10 lineitem stream (7.5 M rows): the index build 2.0 CPU s serial against 2.3
# with two workers, count(*) 0.41 against 0.52 (docs/benchmarks.md).
SERIAL_STEP_SETTINGS = {"max_parallel_maintenance_workers": "0", "max_parallel_workers_per_gather": "0"}


def step_settings(parallelism: str) -> dict[str, str]:
    """The server settings of a step's sessions: `serial` turns parallel workers off, `server`
    leaves the server's own."""
    if parallelism == "serial":
        return dict(SERIAL_STEP_SETTINGS)
    if parallelism == "server":
        return {}
    raise ValueError(f"step parallelism {parallelism!r}: serial or server")


def with_server_options(url: str, settings: dict[str, str]) -> str:
    """`url` with `settings` appended to its libpq `options` (`-c name=value`), after any the
    connection already has. Names and values are this module's constants, never user input."""
    if not settings:
        return url
    from sqlalchemy.engine import make_url
    parsed = make_url(url)
    current = parsed.query.get("options")
    if isinstance(current, tuple):
        current = " ".join(current)
    added = " ".join(f"-c {name}={value}" for name, value in settings.items())
    return parsed.update_query_dict({"options": f"{current} {added}" if current else added}).render_as_string(
        hide_password=False)


def _typed(text: str, kind: str) -> keys.KeyValue:
    """A key bound kept as text in the control tables (the plan's JSON value), as a Python value."""
    return keys.parse_key(kind, int(text) if kind == "integer" else text)


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
