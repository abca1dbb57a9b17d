"""The embedded PostgreSQL that `make demo` and the tests start: asked for a port other than the
one it already runs on, it says which instead of leaving its clients to "connection refused"."""
from __future__ import annotations

import psycopg
import pytest

from helpers import free_port


def test_a_server_running_on_another_port_is_named_not_refused(pg_uri):
    from switchyard_dev.embedded import EmbeddedPostgres
    running = EmbeddedPostgres()
    assert running.running_port() == running.port
    other = free_port()
    with pytest.raises(RuntimeError, match=rf"already runs on port {running.port}, not {other} "
                                           rf"\(SWITCHYARD_PG_PORT\): stop it first"):
        EmbeddedPostgres(port=other).start()
    # Asked for its own port, it answers as before.
    with psycopg.connect(EmbeddedPostgres(port=running.port).start()) as conn:
        assert conn.execute("SHOW port").fetchone()[0] == str(running.port)
