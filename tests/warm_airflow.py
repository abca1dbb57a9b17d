"""`airflow dags test` for the tests, forked from a process that has Airflow imported.

A fresh `airflow dags test` process spends most of its CPU on what every run does first:
importing Airflow (about 3 s), Great Expectations (4-5 s, at the first validate task), the
in-process execution API and its versioned routes (about 6 s, at the first task). A TPC-H run of
three streams took 37 CPU s as a fresh process and 15.5 forked from one that had done that
work. The suite runs dozens of DAG runs: a third of its time.

`run` hands the same command to a long-lived process of the test session (`serve`, below)
that did that work once; it forks, and the child runs Airflow's own command-line entry point
with the command's arguments and environment, its output in files, as a fresh process would.
What the child runs is the real `airflow dags test` against the real metadata database and
target: only the imports and the execution API's route generation come from the parent.

The parent imports Airflow under one environment, so a command whose Airflow settings
(`AIRFLOW*` other than connections and variables, `PYTHONPATH`) differ from it runs as a plain
subprocess instead, as does a command given while another one runs. Two settings are the
child's own (`_PER_COMMAND`): the DAGs folder, which the child sets again from its environment,
and the OpenLineage provider's, which Airflow reads at their first use, after the fork. The
user's path (`switchyard airflow dags test`, a process of its own) keeps tests of its own
(test_cli_test_runs.py).
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# How long the parent may take to import everything before the tests give up on it.
READY_SECONDS = 180.0


class NotStarted(RuntimeError):
    """The warm process did not take the command (it is gone or did not answer)."""


# Settings a command may have of its own: the DAGs folder (the child sets airflow.settings'
# copy again, `_child`) and the OpenLineage provider's (read at their first use, cached then:
# the parent never uses them, tests/integration/test_lineage.py sees the child's events).
_PER_COMMAND = ("AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW__OPENLINEAGE__")


def _startup_settings(env: dict[str, str]) -> dict[str, str]:
    """What the parent's imports were made under: Airflow's settings and the import path.
    Connections and variables from the environment are not among them: Airflow reads those
    from the environment at each lookup."""
    return {k: v for k, v in env.items() if (k.startswith("AIRFLOW") or k == "PYTHONPATH")
            and not k.startswith(("AIRFLOW_CONN_", "AIRFLOW_VAR_", *_PER_COMMAND))}


class _Parent:
    """The session's warm process: one command at a time, over its stdin and stdout."""

    def __init__(self, env: dict[str, str]):
        self.settings = _startup_settings(env)
        self.proc = subprocess.Popen([sys.executable, __file__], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.lock = threading.Lock()
        self._pending = b""  # read from the pipe, not yet a whole line
        self.ready = self._read(time.monotonic() + READY_SECONDS) == {"ready": True}

    def _read(self, deadline: float) -> dict | None:
        """The process's next answer, or None at the deadline or its end. The pipe is read
        unbuffered: two answers arriving together must not leave one where select cannot see it."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return json.loads(line)

    def run(self, argv: list[str], env: dict[str, str], timeout: float | None) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="warm-airflow-") as folder:
            out, err = Path(folder, "stdout"), Path(folder, "stderr")
            try:
                self.proc.stdin.write(json.dumps({"argv": argv, "env": env, "stdout": str(out),
                                                  "stderr": str(err)}) + "\n")
                self.proc.stdin.flush()
                started = self._read(time.monotonic() + 60)
            except OSError:
                started = None
            if not started:
                raise NotStarted("the warm Airflow process did not start the command")
            deadline = time.monotonic() + (timeout or 10 ** 9)
            ended = self._read(deadline)
            if ended is None:  # the timeout: the child and what it started, as subprocess.run would
                try:
                    os.killpg(started["pid"], signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self._read(time.monotonic() + 60)
                raise subprocess.TimeoutExpired(["airflow", *argv], timeout or 0)
            return subprocess.CompletedProcess(["airflow", *argv], ended["rc"],
                                               out.read_text(errors="replace"), err.read_text(errors="replace"))

    def close(self) -> None:
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - the session is ending; do not let it hang
            self.proc.kill()


_parent: _Parent | None = None


def run(argv: list[str], env: dict[str, str], timeout: float | None = None) -> subprocess.CompletedProcess:
    """`airflow *argv` under `env`, as `subprocess.run(..., capture_output=True, text=True)` returns it."""
    global _parent
    if os.environ.get("SWITCHYARD_TEST_COLD_AIRFLOW") == "1":  # every command a fresh process
        return _plain(argv, env, timeout)
    if _parent is None:
        _parent = _Parent(env)
        atexit.register(_parent.close)
        if not _parent.ready:
            print(f"the warm Airflow process did not get ready in {READY_SECONDS:.0f} s: each DAG test "
                  f"runs as a fresh process", file=sys.stderr)
    if not _parent.ready or _parent.settings != _startup_settings(env) or not _parent.lock.acquire(blocking=False):
        return _plain(argv, env, timeout)
    try:
        return _parent.run(argv, env, timeout)
    except NotStarted as exc:  # the warm process is gone: this command and the next ones run cold
        _parent.ready = False
        print(f"{exc}: each DAG test runs as a fresh process from now on", file=sys.stderr)
        return _plain(argv, env, timeout)
    finally:
        _parent.lock.release()


def airflow(*args: str, env: dict[str, str] | None = None, check: bool = True,
            timeout: float | None = None) -> subprocess.CompletedProcess:
    """`switchyard_dev.local.airflow` for a test's own Airflow commands (its set-up and its
    look at the result), through the warm process where it can."""
    from switchyard_dev.local import airflow_env
    result = run(list(args), env or airflow_env(), timeout)
    if check and result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, result.args, result.stdout, result.stderr)
    return result


def _plain(argv: list[str], env: dict[str, str], timeout: float | None) -> subprocess.CompletedProcess:
    from switchyard_dev.local import airflow
    return airflow(*argv, env=env, check=False, timeout=timeout)


# --- the warm process ---------------------------------------------------------------------------
def serve() -> None:
    """Import once, then fork a child per command read from stdin; answer with its pid, then its exit code."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    # The command's output never reaches the protocol's pipe: the children write to their own files.
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    import airflow.__main__  # noqa: F401  Airflow, its configuration and the command line
    import airflow.cli.commands.dag_command  # noqa: F401
    import airflow.sdk.execution_time.task_runner  # noqa: F401
    for name in ("great_expectations", "great_expectations.expectations",
                 "great_expectations.data_context.types.base"):
        __import__(name)
    from airflow.sdk.execution_time.supervisor import in_process_api_server
    app = in_process_api_server().app
    if hasattr(app, "_cadwyn_initialize") and not getattr(app, "_cadwyn_initialized", True):
        app._cadwyn_initialize()  # the versioned routes, made at the first request otherwise
    import gc
    gc.freeze()
    protocol.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            protocol.close()
            _child(request)
        protocol.write(json.dumps({"pid": pid}) + "\n")
        # The child leaves with os._exit, so what it started and a fresh process would have
        # joined at its exit (OpenLineage's listener keeps a pool of worker processes) is left
        # behind: ended with its process group once the child has ended, before the child is
        # reaped, so that its id, the group's, is not reused meanwhile.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass    # nothing left, or the child ended before it had a group of its own
        _, status = os.waitpid(pid, 0)
        protocol.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")


def _child(request: dict) -> None:
    code = 1
    try:
        os.setpgid(0, 0)  # its own process group: a timeout kills whatever it started too
        stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(stdout, 1)
        os.dup2(stderr, 2)
        os.environ.clear()
        os.environ.update(request["env"])
        import airflow.settings
        from airflow.configuration import conf
        # Read once at import: the command's own folder, as a fresh process would read it.
        airflow.settings.DAGS_FOLDER = os.path.expanduser(conf.get_mandatory_value("core", "dags_folder"))
        sys.argv = ["airflow", *request["argv"]]
        from airflow.__main__ import main
        try:
            code = main() or 0  # as the `airflow` script's sys.exit(main())
        except SystemExit as exc:  # as the interpreter ends on it: a message is printed, exit 1
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, int) and exc.code is not None:
                print(exc.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - reported as a fresh process would: a traceback, exit 1
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    serve()
