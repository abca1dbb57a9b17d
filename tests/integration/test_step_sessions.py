"""A step's statements share one session (PostgreSQL, keep_session): on the embedded server, every
use finds the session as a new one would be, a nested use or another thread gets a connection of
its own, a broken session is replaced, and close() ends it. Then the steps themselves: how many
sessions each opens, counted where the adapter connects."""
from __future__ import annotations

import threading
from dataclasses import replace

import psycopg
import pytest

from switchyard import steps
from switchyard.core.spec import load_spec
from switchyard.targets.postgres import PostgresAdapter

SPEC = load_spec("tpch")


class Counted(PostgresAdapter):
    """The adapter as the steps use it, counting the sessions it opens (the real ones)."""

    opened: list[int]

    def _session(self):
        conn = super()._session()
        self.opened.append(conn.info.backend_pid)
        return conn


def counted(pg_uri: str, schema: str, **options) -> Counted:
    adapter = Counted(SPEC, uri=pg_uri, schema=schema, **options)
    adapter.opened = []
    return adapter


def alive(pg_uri: str, pid: int) -> bool:
    with psycopg.connect(pg_uri) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()[0] == 1


def pid_of(conn) -> int:
    return conn.execute("SELECT pg_backend_pid()").fetchone()[0]


def test_a_kept_session_is_one_backend_and_each_use_finds_it_idle(pg_uri, schema):
    adapter = counted(pg_uri, schema)
    adapter.keep_session()
    with adapter.connection() as conn:
        first = pid_of(conn)
        conn.execute(f'CREATE SCHEMA "{schema}"')
        # Left open (no commit): rolled back at the end of the use, as closing would.
    with adapter.connection() as conn:
        assert pid_of(conn) == first
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS  # the query above
        assert conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()[0] is None
        conn.rollback()
        conn.autocommit = True
        conn.execute(f'CREATE SCHEMA "{schema}"')
    with adapter.connection() as conn:
        assert pid_of(conn) == first and conn.autocommit is False
        assert conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()[0] is not None
        # The step's settings stay: they are the session's.
        assert conn.execute("SELECT current_setting('synchronous_commit')").fetchone()[0] == "on"
    with pytest.raises(psycopg.errors.DivisionByZero):
        with adapter.connection() as conn, conn.transaction():
            conn.execute(f'CREATE TABLE "{schema}".t (n int)')
            conn.execute("SELECT 1 / 0")
    assert adapter.fetch("SELECT to_regclass(%s)", (f'"{schema}".t',)) == [(None,)]
    adapter.execute([f'CREATE TABLE "{schema}".t (n int)', f'INSERT INTO "{schema}".t VALUES (1)'])
    assert adapter.fetch(f'SELECT n FROM "{schema}".t') == [(1,)]
    assert adapter.opened == [first]
    adapter.close()
    assert not alive(pg_uri, first)
    # Closed: the adapter connects for each use again, as one that never kept its session.
    with adapter.connection() as conn:
        again = pid_of(conn)
    with adapter.connection() as conn:
        assert pid_of(conn) != again
    assert len(adapter.opened) == 3


def test_a_nested_use_or_another_thread_gets_a_connection_of_its_own(pg_uri, schema):
    adapter = counted(pg_uri, schema)
    adapter.keep_session()
    seen = {}
    with adapter.connection() as outer:
        seen["outer"] = pid_of(outer)
        with adapter.connection() as inner:
            seen["inner"] = pid_of(inner)

        def other():
            with adapter.connection() as conn:
                seen["thread"] = pid_of(conn)
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len({seen["outer"], seen["inner"], seen["thread"]}) == 3
    assert not alive(pg_uri, seen["inner"]) and not alive(pg_uri, seen["thread"])
    with adapter.connection() as conn:
        assert pid_of(conn) == seen["outer"]
    adapter.close()


def test_a_broken_kept_session_is_replaced(pg_uri, schema):
    adapter = counted(pg_uri, schema)
    adapter.keep_session()
    with adapter.connection() as conn:
        first = pid_of(conn)
        conn.rollback()
    with psycopg.connect(pg_uri, autocommit=True) as dba:
        dba.execute("SELECT pg_terminate_backend(%s)", (first,))
    with pytest.raises(psycopg.OperationalError):
        adapter.fetch("SELECT 1")
    assert adapter.fetch("SELECT 1") == [(1,)]
    assert len(adapter.opened) == 2 and adapter.opened[0] == first
    adapter.close()


def test_each_step_opens_one_session_for_its_statements(tpch_batch, pg_uri, schema):
    """prepare, load, validate, switch and the batch's publish: one session each of the
    adapter's (a long load adds the progress sampler's; Great Expectations, where a check needs
    it, connects on the adapter's URL, not counted here). Before the steps kept their session, a
    switch opened up to four and a validate two."""
    name, folder = tpch_batch
    spec = replace(SPEC, publish="batch")
    made: list[Counted] = []

    def connect() -> Counted:
        adapter = Counted(spec, uri=pg_uri, schema=schema, lease_holder="plain/run-1", lease_batch=name)
        adapter.opened = []
        made.append(adapter)
        return adapter

    tables = ["orders", "lineitem"]
    found, plan, problems, *_ = steps.check_batch(spec, tables, name, streams=3)
    run = steps.set_up(connect(), plan, problems, name, found, tables)
    for gid, raw in run["groups"].items():
        if raw["table"] not in tables:
            continue
        s = steps.stream_plan(run, raw["table"], raw["stream"])
        for step, call in (("prepare", lambda: steps.prepare(connect, run, s)),
                           ("load", lambda: steps.load(connect, run, s, queue=None, host="here")),
                           ("validate", lambda: steps.validate(connect, spec, run, s)),
                           ("switch", lambda: steps.switch(connect, spec, run, s))):
            call()
            assert len(made[-1].opened) == 1, f"{gid} {step}: {len(made[-1].opened)} sessions"
            assert not alive(pg_uri, made[-1].opened[0]), f"{gid} {step}: its session outlived the step"
    steps.publish_batch(connect, run)
    assert len(made[-1].opened) == 1
    connect().release_lease()


class Unreachable(Counted):
    """The adapter with a SQLAlchemy URL that reaches no server: whatever connects by URL fails."""

    def sqlalchemy_url(self) -> str:
        from sqlalchemy.engine import make_url
        return make_url(super().sqlalchemy_url()).set(host="127.0.0.1", port=1).render_as_string(hide_password=False)


def test_validate_proves_the_constraints_on_its_own_session(tpch_batch, pg_uri, schema):
    """The key range, the NOT NULLs and the COPY's count are proven on the validate step's own
    session: with a URL that reaches no server the checks pass, each with its proof, on one
    session of the adapter's."""
    name, _ = tpch_batch
    made: list[Counted] = []

    def connect(kind=Counted) -> Counted:
        adapter = kind(SPEC, uri=pg_uri, schema=schema, lease_holder="plain/run-1", lease_batch=name)
        adapter.opened = []
        made.append(adapter)
        return adapter

    found, plan, problems, *_ = steps.check_batch(SPEC, ["orders"], name, streams=3)
    run = steps.set_up(connect(), plan, problems, name, found, ["orders"])
    s = steps.stream_plan(run, "orders", 1)
    steps.prepare(connect, run, s)
    loaded = steps.load(connect, run, s, queue=None, host="here").xcom()
    result = steps.validate(lambda: connect(Unreachable), SPEC, run, s, loaded=loaded).xcom()
    assert len(made[-1].opened) == 1
    checks = result["checks"]
    proven = {(c["expectation"], c["column"]) for c in checks if isinstance(c["observed"], dict)
              and "proven" in c["observed"]}
    assert {("expect_column_values_to_not_be_null", "o_orderkey"), ("expect_column_min_to_be_between", "o_orderkey"),
            ("expect_column_max_to_be_between", "o_orderkey")} <= proven
    assert ("expect_column_values_to_not_be_null", "o_custkey") in proven
    assert all(c["success"] for c in checks)
    connect().release_lease()


def test_a_failed_proof_raises_its_own_error_and_leaves_the_session_idle(pg_uri, schema):
    """A proof whose statement fails (a column the table does not have) raises the server's own
    error, not one from cleaning up after it; the kept session's next use finds no transaction
    open and the session's own constraint_exclusion."""
    adapter = counted(pg_uri, schema)
    adapter.keep_session()
    with adapter.connection() as conn:
        conn.autocommit = True
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".t (k bigint NOT NULL, CONSTRAINT r CHECK (k >= 1 AND k < 11))')
        before = conn.execute("SHOW constraint_exclusion").fetchone()[0]
    assert adapter.proofs_in_session(schema, "t", "k", 1, 10, [], "bigint")[0] is not None
    with pytest.raises(psycopg.errors.UndefinedColumn, match="missing"):
        adapter.proofs_in_session(schema, "t", "k", 1, 10, ["missing"], "bigint")
    with adapter.connection() as conn:
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SHOW constraint_exclusion").fetchone()[0] == before
    assert len(adapter.opened) == 1
    adapter.close()
