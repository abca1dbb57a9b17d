"""Pinned ports: a real listener on 127.0.0.1 sees the TDS pre-login on the stream's port.

No driver is mocked: the adapter's own connection methods (pyodbc with Microsoft ODBC
Driver 18 for DDL and BULK INSERT; mssql-python for TDS bulk copy) open the connection,
and the listener records the first bytes that arrive. A TDS pre-login packet starts with
packet type 0x12. The listener then closes the socket, so the driver's login fails, which
the adapter reports as a TargetError naming host and port.
"""
from __future__ import annotations

import importlib.util
import socket
import sys
import threading
from pathlib import Path

import pytest

from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.mssql import MssqlAdapter

SPEC = load_spec("tpch")
TDS_PRELOGIN = 0x12


class Listener:
    """Accepts connections on one port and keeps the first bytes of each."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.first_bytes: list[bytes] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(5)
                try:
                    self.first_bytes.append(conn.recv(8))
                except OSError:
                    self.first_bytes.append(b"")

    def close(self):
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


@pytest.fixture
def listeners():
    made = [Listener() for _ in range(3)]
    yield made
    for lst in made:
        lst.close()


def _pyodbc_available() -> str | None:
    try:
        import pyodbc  # noqa: F401
    except ImportError as exc:
        return f"pyodbc cannot load ({exc}); install unixODBC: apt-get install unixodbc"
    return None


def adapter_for(listeners) -> MssqlAdapter:
    ports = [lst.port for lst in listeners]
    return MssqlAdapter(SPEC, uri=f"mssql://loader:secret@127.0.0.1:{ports[0]}/switchyard"
                                  f"?ports={','.join(map(str, ports))}&login_timeout=3&TrustServerCertificate=yes")


def test_pyodbc_path_sends_prelogin_to_the_streams_port(listeners):
    reason = _pyodbc_available()
    if reason:
        pytest.skip(reason)
    a = adapter_for(listeners)
    assert a.port_for(2) == listeners[1].port
    with pytest.raises(TargetError, match=rf"127\.0\.0\.1,{listeners[1].port}") as caught:
        a.connect_odbc(stream=2)
    # A server that went away is worth a retry (a refused login is not: tests/unit/targets/mssql/test_mssql_guard.py).
    assert caught.value.permanent is False and "cannot connect to SQL Server" in str(caught.value)
    assert listeners[1].first_bytes and listeners[1].first_bytes[0][0] == TDS_PRELOGIN
    assert not listeners[0].first_bytes and not listeners[2].first_bytes


def test_stream_k_wraps_round_the_port_map(listeners):
    reason = _pyodbc_available()
    if reason:
        pytest.skip(reason)
    a = adapter_for(listeners)
    with pytest.raises(TargetError):
        a.connect_odbc(stream=4)  # (4 - 1) % 3 = 0: the first port
    assert listeners[0].first_bytes[0][0] == TDS_PRELOGIN


def _mssql_python_available() -> str | None:
    if importlib.util.find_spec("mssql_python") is None:
        return "mssql-python is not installed"
    # The ODBC driver inside the mssql-python wheel loads libltdl.so.7 (Debian: libltdl7).
    import ctypes
    try:
        ctypes.CDLL("libltdl.so.7")
    except OSError as exc:
        return f"mssql-python's bundled driver cannot load ({exc}); install it: apt-get install libltdl7"
    return None


def test_mssql_python_path_sends_prelogin_to_the_streams_port(listeners):
    reason = _mssql_python_available()
    if reason:
        pytest.skip(reason)
    a = adapter_for(listeners)
    with pytest.raises(TargetError, match=rf"127\.0\.0\.1,{listeners[2].port}") as caught:
        a.connect_tds(stream=3)
    assert caught.value.permanent is False
    assert listeners[2].first_bytes and listeners[2].first_bytes[0][0] == TDS_PRELOGIN
    assert not listeners[0].first_bytes and not listeners[1].first_bytes


def test_port_forwarder_of_the_compose_stack_relays_the_prelogin(listeners):
    """The docker-compose stack's forwarder: several pinned ports in front of one server port."""
    reason = _pyodbc_available()
    if reason:
        pytest.skip(reason)
    import asyncio
    sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "include" / "docker"))
    import port_forward

    free = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        free.append(s.getsockname()[1])
        s.close()
    loop = asyncio.new_event_loop()
    servers = loop.run_until_complete(port_forward.serve("127.0.0.1", free, "127.0.0.1", listeners[0].port))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        a = MssqlAdapter(SPEC, uri=f"mssql://u:p@127.0.0.1/switchyard?ports={free[0]},{free[1]}&login_timeout=3")
        with pytest.raises(TargetError, match=rf",{free[1]}"):
            a.connect_odbc(stream=2)
        assert listeners[0].first_bytes and listeners[0].first_bytes[0][0] == TDS_PRELOGIN
    finally:
        for s in servers:
            s.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=2)
