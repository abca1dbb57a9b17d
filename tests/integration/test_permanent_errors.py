"""Which database errors fail a step at once, past its retries, read from real PostgreSQL errors.

Each error below is raised by the embedded server itself (a unique index, a CHECK, a NOT NULL
column, a missing table, a refused permission, a value too long, a lock time-out, a statement
time-out, a refused connection); the engine's classifier reads it once, for every step, and the
operators' `fail_if_permanent` turns the permanent ones into an immediate failure. The same
for SQL Server's error numbers: tests/unit/targets/mssql/test_mssql_guard.py.
"""
from __future__ import annotations

import uuid

import psycopg
import pytest
from airflow.sdk.exceptions import AirflowFailException

from helpers import free_port
from switchyard.airflow.operators import SwitchOperator
from switchyard.targets import TargetError, permanent_reason
from switchyard.targets.postgres import PostgresAdapter


@pytest.fixture
def scratch(pg_uri):
    """A schema of its own with a table holding one row: (id unique, n CHECK n >= 0, label varchar(3))."""
    name = f"e_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
        conn.execute(f'CREATE TABLE "{name}".t (id int PRIMARY KEY, n int NOT NULL CHECK (n >= 0), label varchar(3))')
        conn.execute(f'INSERT INTO "{name}".t VALUES (1, 1, %s)', ("a",))
    yield name
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{name}" CASCADE')
        conn.execute(f"DROP ROLE IF EXISTS {name}_reader")


def error_of(pg_uri: str, *statements: str, options: str = "") -> BaseException:
    with pytest.raises(psycopg.Error) as caught:
        with psycopg.connect(pg_uri, autocommit=True, options=options) as conn:
            for statement in statements:
                conn.execute(statement)
    return caught.value


def test_errors_of_the_data_and_of_the_target_are_permanent(pg_uri, scratch):
    t = f'"{scratch}".t'
    cases = {
        f"INSERT INTO {t} VALUES (1, 2, 'b')": "a unique violation",
        f"INSERT INTO {t} VALUES (2, -1, 'b')": "a CHECK violation",
        f"INSERT INTO {t} VALUES (3, NULL, 'b')": "a NOT NULL violation",
        f"INSERT INTO {t} VALUES (4, 1, 'four')": "a value too long for its column",
        f"INSERT INTO {t} VALUES ('x', 1, 'b')": "a value of the wrong type",
        f'SELECT * FROM "{scratch}".missing': "a missing table",
    }
    for statement, expected in cases.items():
        assert PostgresAdapter.permanent_error(error_of(pg_uri, statement)) == expected, statement
    refused = error_of(pg_uri, f"CREATE ROLE {scratch}_reader", f"SET ROLE {scratch}_reader", f"SELECT * FROM {t}")
    assert PostgresAdapter.permanent_error(refused) == "a refused permission"


def test_errors_a_retry_can_get_past_are_not(pg_uri, scratch):
    t = f'"{scratch}".t'
    with psycopg.connect(pg_uri) as holder:
        holder.execute(f"LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE")
        lock_wait = error_of(pg_uri, "SET lock_timeout = '100ms'", f"SELECT * FROM {t}")
    assert isinstance(lock_wait, psycopg.errors.LockNotAvailable)
    timed_out = error_of(pg_uri, "SET statement_timeout = '50ms'", "SELECT pg_sleep(1)")
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(f"postgresql://postgres@127.0.0.1:{free_port()}/postgres", connect_timeout=2)
    for exc in (lock_wait, timed_out, refused.value):
        assert PostgresAdapter.permanent_error(exc) is None, exc


def test_a_step_fails_at_once_on_a_permanent_error_and_is_retried_otherwise(pg_uri, scratch):
    op = SwitchOperator(task_id="switch", table="t", stream=1)
    op._engine = PostgresAdapter
    duplicate = error_of(pg_uri, f'INSERT INTO "{scratch}".t VALUES (1, 2, %s)' % "'b'")
    # Raw, or wrapped by a step's own TargetError that is not marked permanent: the cause decides.
    for exc in (duplicate, wrapped(duplicate)):
        with pytest.raises(AirflowFailException, match="a unique violation, which a retry cannot fix"):
            op.fail_if_permanent(exc)
        assert permanent_reason(PostgresAdapter, exc) == "a unique violation"
    with psycopg.connect(pg_uri) as holder:
        holder.execute(f'LOCK TABLE "{scratch}".t IN ACCESS EXCLUSIVE MODE')
        lock_wait = error_of(pg_uri, "SET lock_timeout = '100ms'", f'SELECT * FROM "{scratch}".t')
    op.fail_if_permanent(lock_wait)            # returns: Airflow's retry gets it
    op.fail_if_permanent(wrapped(lock_wait))
    with pytest.raises(AirflowFailException, match="^bad data$"):
        op.fail_if_permanent(TargetError("bad data", permanent=True))


def wrapped(exc: BaseException) -> TargetError:
    try:
        raise TargetError("the table's commit failed") from exc
    except TargetError as outer:
        return outer


def test_an_error_of_pythons_own_in_a_step_fails_it_at_once_and_switchyards_own_keep_their_word(tmp_path):
    """A step's code reading a value as another type (the plan reading a table's partition bounds,
    a ValueError) fails the same way on every try: at once, not after a plan's retries for the
    lease (hours). Switchyard's own errors of those classes say themselves: a worker without the
    batch's folder (BatchError, a ValueError) is retried, another worker of the queue may hold it."""
    from switchyard.core.batch import BatchError
    op = SwitchOperator(task_id="switch", table="t", stream=1)
    op._engine = PostgresAdapter
    try:
        int("2025-02-01 02:03:37")
    except ValueError as exc:
        with pytest.raises(AirflowFailException, match=r"^a ValueError in the step \(the same on every try; the "
                                                       r"task's log shows where\), which a retry cannot fix"):
            op.fail_if_permanent(exc)
    op.fail_if_permanent(BatchError(f"{tmp_path}/b: the batch's folder is not on this worker"))   # retried
    op.fail_if_permanent(OSError("the file is being written"))
