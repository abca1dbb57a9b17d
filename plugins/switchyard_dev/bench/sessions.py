"""How many sessions the server opened while a part ran, and the lever that gives each of a step's
uses a session of its own.

`pg_stat_database.sessions` counts the sessions established in a database (PostgreSQL 14 and
later), Airflow's own metadata elsewhere: the delta over a DAG run is the number of backends
its steps made the server start, each a process forked, authenticated and given its settings.
The DAG lever "preload, a session per use" (SWITCHYARD_BENCH_SESSION_PER_USE=1 in the
benchmark's own Airflow, from its local settings) puts back what the steps did before they kept
one session for their statements (steps.session): a connection for every use.
"""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator


def sessions(uri: str) -> int:
    """Sessions established in the URI's database so far (this one included)."""
    import psycopg
    with psycopg.connect(uri) as conn:
        return int(conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
                   .fetchone()[0])


class Count:
    result: int | None = None


@contextmanager
def counting(uri: str) -> Iterator[Count]:
    """`with counting(uri) as c: ...` then `c.result`: the sessions opened in between (the
    second reading's own session left out; the first's is counted before)."""
    count = Count()
    before = sessions(uri)
    yield count
    count.result = sessions(uri) - before - 1


def session_per_use() -> None:
    """The "session per use" DAG lever: every step of this process and of the task processes it
    forks connects for each statement or block again, as before steps.session kept one."""
    from switchyard import steps

    @contextmanager
    def unkept(connect):
        yield connect()

    steps.session = unkept
    print("switchyard bench: a session per use (the 'session per use' lever)", file=sys.stderr, flush=True)
