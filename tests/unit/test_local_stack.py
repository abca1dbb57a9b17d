"""The local stack's services as processes: a scheduler killed outright (the kernel's OOM killer)
leaves its process group running, its log server holding its port; the stack names that, and
`services stop` ends it. Real processes, no Airflow: a stand-in whose first process exits and
whose child keeps the port, ignoring SIGTERM as an idle LocalExecutor worker does."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

# The stand-in: the group's first process forks a child that listens on the port and ignores
# SIGTERM, says its pid, then exits (as a scheduler killed with SIGKILL does, its children left).
LEFT = """
import os, signal, socket, sys, time
port = int(sys.argv[1])
if os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sock = socket.socket(); sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port)); sock.listen()
    print(os.getpid(), flush=True)
    time.sleep(300)
    sys.exit(0)
time.sleep(0.5)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "airflow"
    home.mkdir()
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(home))
    for variable in ("SWITCHYARD_AIRFLOW_PORT", "SWITCHYARD_AIRFLOW_LOG_PORT", "SWITCHYARD_AIRFLOW_TRIGGER_LOG_PORT"):
        monkeypatch.setenv(variable, str(free_port()))
    return home


def test_a_scheduler_that_ended_without_its_processes_is_named_and_its_group_ended_by_stop(home):
    from switchyard_dev import local
    port = int(os.environ["SWITCHYARD_AIRFLOW_LOG_PORT"])
    scheduler = subprocess.Popen([sys.executable, "-c", LEFT, str(port)], start_new_session=True,
                                 stdout=subprocess.PIPE, text=True, env={**os.environ, "AIRFLOW_HOME": str(home)})
    child = int(scheduler.stdout.readline())
    scheduler.wait(timeout=30)
    (home / "scheduler.pid").write_text(f"{scheduler.pid} 3 tpch local\n")
    try:
        assert local.left_behind("scheduler") == (scheduler.pid, [child])
        status = next(line for line in local.status_lines() if line.startswith("scheduler"))
        assert status.split(None, 1)[1] == (f"ended (pid {scheduler.pid}), but 1 processes of it still run and hold "
                                            f"port {port}: `switchyard services stop` ends them")
        with pytest.raises(local.LocalStackError) as refused:
            local.start_services(local.airflow_env(3), 3)
        assert str(refused.value).startswith(f"the local scheduler (pid {scheduler.pid}) ended without its processes: "
                                             f"1 of its process group still run (pids {child}), and hold its port {port}")
        assert not (home / "api-server.pid").exists()     # nothing started
        stopped = local.stop_services(timeout=2)
        assert f"what the ended scheduler (pid {scheduler.pid}) left running: 1 processes" in stopped
        deadline = time.monotonic() + 10
        while local._alive(child) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not local._alive(child) and not local.port_in_use(port)
        assert local.left_behind("scheduler") is None and not (home / "scheduler.pid").exists()
    finally:
        try:
            os.kill(child, 9)
        except OSError:
            pass
