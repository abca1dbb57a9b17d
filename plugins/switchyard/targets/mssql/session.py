"""Connections to a SQL Server target, pinned to a stream's port: ODBC for statements, mssql-python
for TDS bulk copy; statements, and the run lease's SQL."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from switchyard.targets.base import TargetError
from switchyard.targets.mssql.errors import _message, error_numbers, is_login_refused
from switchyard.targets.mssql.settings import find_odbc_driver, odbc_value


class MssqlSession:
    """How a step talks to the server: its port, its connection, statements, the lease."""

    def _port_rule(self) -> str:
        consecutive = self.ports == [self.ports[0] + i for i in range(len(self.ports))]
        if consecutive:
            return (f"stream k connects to port {self.ports[0]}"
                    + (f" + (k - 1) mod {len(self.ports)}" if len(self.ports) > 1 else ""))
        return f"stream k connects to the k-th port of the port map ({len(self.ports)} entries; each stream's below)"

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
        parts += [("APP", self.session_name or "switchyard"), ("PacketSize", str(self.packet_size)), *e.attributes]
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

    def drop_lease(self, holder: str, expires_at: Any = None) -> int:
        unrenewed = expires_at is not None
        statement, = self.render("lease_release.sql", schema_literal=None, unrenewed=unrenewed)
        with self.connection() as conn:
            return drain(conn.cursor().execute(statement, self.schema, holder,
                                               *([expires_at] if unrenewed else [])))[0]

    def lease(self) -> tuple | None:
        """(holder, batch, acquired_at, expires_at) of the schema's lease, if any."""
        rows = self.fetch(f"SELECT [holder], [batch], [acquired_at], [expires_at] FROM "
                          f"{self.qualified(self.control_schema, 'run_lease')} WHERE [target_schema] = ?",
                          (self.schema,))
        return rows[0] if rows else None


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
