"""Connections to a PostgreSQL target, its statements, the steps' session settings, the COPY slots
and the run lease's SQL."""
from __future__ import annotations

import os
import re
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from switchyard.targets.base import TargetError

_REFUSED = re.compile(r"FATAL:\s+(password authentication failed|no pg_hba\.conf entry|"
                      r"database \".*\" does not exist|role \".*\" does not exist)")
# The steps' statements without parallel workers (SWITCHYARD_STEP_PARALLELISM=serial, the
# default). The method runs one COPY per server core (the COPY slots), so while a batch loads
# every core is busy: a unique index build or a row count that adds workers only shares those
# cores with the COPYs, and pays for the workers' start and their exchange of tuples. Measured
# on one scale-10 lineitem stream (7.5 M rows): the index build 2.0 CPU s serial against 2.3
# with two workers, count(*) 0.41 against 0.52
# (docs/decisions/0007-steps-statements-without-parallel-workers-while.md).
SERIAL_STEP_SETTINGS = {"max_parallel_maintenance_workers": "0", "max_parallel_workers_per_gather": "0"}
# How a step's session reads dates and times, whatever the server's or the connection's own
# settings: a file's `01/02/2026` is January 2 under the server default DateStyle's MDY and
# February 1 under DMY (initdb takes it from the locale), without an error either way. With YMD,
# as SQL Server's load (SET DATEFORMAT ymd), ISO 8601 and other year-first dates read the same
# everywhere and a day-month order is refused with the line and column. A timestamptz value
# written without an offset is read as UTC, as SQL Server reads one into datetimeoffset.
READING_SETTINGS = {"DateStyle": "ISO, YMD", "TimeZone": "UTC"}


class PostgresSession:
    """How a step talks to the server: one connection per step, its settings, statements, the lease."""

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

    def _session(self):
        """A new connection with the steps' session settings."""
        conn = self._connect()
        try:
            # A step reports success only once its commit is on disk: a server tuned for bulk
            # loads (synchronous_commit=off, as the embedded one) could otherwise lose a
            # committed load or switch in a crash after Airflow marked the task done. COPY
            # ... FREEZE with wal_level=minimal syncs its files at commit anyway; this adds
            # one WAL flush per step.
            # One round trip for the session's settings: that one and the steps' (step_settings).
            settings = {"synchronous_commit": "on", **READING_SETTINGS, **step_settings(self.step_parallelism),
                        **self._client_name()}
            conn.execute("SELECT " + ", ".join("set_config(%s, %s, false)" for _ in settings),
                         [part for item in settings.items() for part in item])
            conn.commit()
        except BaseException:
            conn.close()
            raise
        return conn

    _kept: "_KeptSession | None" = None

    def keep_session(self) -> None:
        """Until close(), the connections this adapter hands out one after the other are one
        session (steps.py: a step's statements): a new backend costs the server about as much
        CPU as a short statement, and a switch or a validate asked for three or four."""
        if self._kept is None:
            self._kept = _KeptSession()

    def close(self) -> None:
        kept, self._kept = self._kept, None
        if kept is not None:
            kept.close()

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A connection with the steps' session settings, idle (no transaction open). While the
        adapter keeps its session (keep_session) and nobody else uses it, that session; else,
        as for a nested use or another thread (the progress sampler), a connection of its own,
        closed at the end."""
        kept = self._kept
        if kept is not None and kept.take():
            try:
                if kept.conn is None:
                    kept.conn = self._session()
                try:
                    yield kept.conn
                finally:
                    kept.tidy()
            finally:
                kept.give_back()
            return
        conn = self._session()
        try:
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
        return with_server_options(url, {**step_settings(self.step_parallelism), **self._client_name()})

    def _client_name(self) -> dict[str, str]:
        """The step's name as the server shows its sessions (pg_stat_activity, the server's log
        with %a): set with the step's settings, in the same round trip."""
        return {"application_name": self.session_name} if self.session_name else {}

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

    def drop_lease(self, holder: str, expires_at: Any = None) -> int:
        unrenewed = expires_at is not None
        with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            statement, = self.render("lease_release.sql", schema_literal=None, unrenewed=unrenewed)
            cur.execute(statement, {"schema": self.schema, "holder": holder, "expires_at": expires_at})
            return cur.rowcount

    def lease(self) -> tuple | None:
        """(holder, batch, acquired_at, expires_at) of the schema's lease, if any."""
        rows = self.fetch(f"SELECT holder, batch, acquired_at, expires_at FROM "
                          f"{self.qualified(self.control_schema, 'run_lease')} WHERE target_schema = %s",
                          (self.schema,))
        return rows[0] if rows else None


class _KeptSession:
    """One connection a step's uses share, one use at a time. Each use leaves it as a new one
    would be: no transaction open (what a use left open is rolled back, as closing would),
    autocommit off (a use that adds a notice handler removes it); a connection that broke is
    closed and the next use connects again. Session-level advisory locks (the COPY slot) are
    given back by their holders, which also covers a failed COPY (slots.copy_slot)."""

    def __init__(self) -> None:
        self.conn: Any = None
        self._busy = threading.Lock()

    def take(self) -> bool:
        return self._busy.acquire(blocking=False)

    def give_back(self) -> None:
        self._busy.release()

    def tidy(self) -> None:
        conn = self.conn
        if conn is None:
            return
        if conn.closed or conn.broken:
            self.close()
            return
        try:
            from psycopg.pq import TransactionStatus
            if conn.info.transaction_status != TransactionStatus.IDLE:
                conn.rollback()
            conn.autocommit = False
        except Exception:  # noqa: BLE001 - a session that cannot be made idle is not kept
            self.close()

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass


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


def psycopg_errors():
    import psycopg
    return psycopg.errors
