"""The benchmark's count of the sessions a run made the server open, on the embedded PostgreSQL
(in a database of the test's own, which no other test connects to), and the lever that gives
each use of a step's connection a session of its own."""
from __future__ import annotations

import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from switchyard import steps
from switchyard_dev.bench.sessions import counting, session_per_use


@pytest.fixture
def own_database(pg_uri):
    name = f"sy_sessions_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    u = urlsplit(pg_uri)
    yield urlunsplit(u._replace(path=f"/{name}"))
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_the_count_is_the_sessions_opened_in_between(own_database):
    with counting(own_database) as none:
        pass
    with counting(own_database) as three:
        for _ in range(3):
            psycopg.connect(own_database).close()
    assert (none.result, three.result) == (0, 3)


class Adapter:
    kept = closed = False

    def keep_session(self):
        self.kept = True

    def close(self):
        self.closed = True


def test_the_session_per_use_lever_keeps_no_session(monkeypatch):
    made = []

    def connect():
        made.append(Adapter())
        return made[-1]

    with steps.session(connect):
        pass
    assert (made[-1].kept, made[-1].closed) == (True, True)
    monkeypatch.setattr(steps, "session", steps.session)  # put back at the test's end
    session_per_use()
    with steps.session(connect):
        pass
    assert (made[-1].kept, made[-1].closed) == (False, False)


def test_the_benchmarks_airflow_settings_apply_the_lever(tmp_path):
    """The benchmark's own Airflow reads the lever in its local settings, which every service and
    task process imports first."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    import switchyard_dev.bench
    local = Path(switchyard_dev.bench.__file__).parent / "local_settings"
    env = dict(os.environ, SWITCHYARD_BENCH_SESSION_PER_USE="1", SWITCHYARD_PRELOAD_DAG="0",
               PYTHONPATH=os.pathsep.join([str(local), *sys.path]))
    out = subprocess.run([sys.executable, "-c", "import airflow_local_settings"], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "a session per use" in out.stderr
