"""A local Airflow for Switchyard: configuration, services and a small REST client.

Everything lives under `.switchyard/` in the project (override: SWITCHYARD_STATE_DIR): the
Airflow home with its logs, generated secrets, pid files and the DAG's settings file
(`switchyard.env`, which every Airflow process and `airflow dags test` from any shell build the
DAG from). The metadata database is a database of its own per Airflow home in the embedded
PostgreSQL (SWITCHYARD_AIRFLOW_DATABASE=sqlite: a SQLite file in the home, one writer at a
time). The demo, the tests and the Makefile all take their Airflow settings from
`airflow_env()`, so they agree.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

from switchyard_dev import LocalStackError
from switchyard_dev.embedded import state_dir
from switchyard_dev.settings import value as setting

PROJECT = Path(__file__).resolve().parents[2]
SERVICES = ("scheduler", "dag-processor", "api-server", "triggerer")
ADMIN_USER = "admin"


def airflow_home() -> Path:
    return setting("SWITCHYARD_AIRFLOW_HOME") or state_dir() / "airflow"


def api_port() -> int:
    return setting("SWITCHYARD_AIRFLOW_PORT")


def api_url() -> str:
    return f"http://127.0.0.1:{api_port()}"


def _secret(name: str, make) -> str:
    path = airflow_home() / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make())
        path.chmod(0o600)
    return path.read_text().strip()


def _fernet_key() -> str:
    from cryptography.fernet import Fernet
    return Fernet.generate_key().decode()


def admin_password() -> str:
    """The UI login's password, generated once and kept in the simple auth manager's file."""
    passwords = airflow_home() / "passwords.json"
    if not passwords.exists():
        passwords.parent.mkdir(parents=True, exist_ok=True)
        passwords.write_text(json.dumps({ADMIN_USER: secrets.token_urlsafe(12)}))
        passwords.chmod(0o600)
    return json.loads(passwords.read_text())[ADMIN_USER]


# How long a write to the SQLite metadata database waits for another process's write lock
# before it fails with "database is locked" (pysqlite's default: 5 s). The scheduler, the
# dag-processor, the API server and CLI commands all write to the one file. A refused write
# fails an API request with HTTP 500, and a refused `airflow backfill create` makes Airflow
# delete the runs it had already committed, which stops a scheduler that is scheduling one
# of them. Airflow imports these by name (`[database] sql_alchemy_connect_args`).
SQLITE_LOCK_WAIT_SECONDS = 30
SQLITE_CONNECT_ARGS = {"timeout": SQLITE_LOCK_WAIT_SECONDS}
SQLITE_CONNECT_ARGS_ASYNC = {"timeout": SQLITE_LOCK_WAIT_SECONDS}
_CONNECT_ARGS_SETTINGS = {
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "switchyard_dev.local.SQLITE_CONNECT_ARGS",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": "switchyard_dev.local.SQLITE_CONNECT_ARGS_ASYNC",
}


# --- the metadata database -------------------------------------------------------------
def metadata_database() -> str:
    """The Airflow home's metadata database in the embedded server: one per home, so a test's
    private Airflow never shares the demo's."""
    return "airflow_" + hashlib.sha1(str(airflow_home()).encode()).hexdigest()[:10]


def metadata_uri() -> str:
    """The SQLAlchemy URI of the home's metadata database (SWITCHYARD_AIRFLOW_DATABASE)."""
    if setting("SWITCHYARD_AIRFLOW_DATABASE") == "sqlite":
        return f"sqlite:///{airflow_home() / 'airflow.db'}"
    from switchyard_dev.embedded import EmbeddedPostgres
    pg = EmbeddedPostgres()
    if not pg.password_file.exists():  # a server never initialised: its password is made at its start
        pg.start()
    return pg.uri(metadata_database()).replace("postgresql://", "postgresql+psycopg://", 1)


def ensure_metadata_database(pg=None) -> tuple[str, bool]:
    """The home's metadata database in the embedded server, created if missing (the server
    started if needed): (its URI for Airflow, whether it was created)."""
    import psycopg
    from switchyard_dev.embedded import EmbeddedPostgres
    pg = pg or EmbeddedPostgres()
    pg.start()
    name = metadata_database()
    with psycopg.connect(pg.uri("postgres"), autocommit=True) as conn:
        created = not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if created:
            conn.execute(f'CREATE DATABASE "{name}"')
    return pg.uri(name).replace("postgresql://", "postgresql+psycopg://", 1), created


# --- the DAG's settings file --------------------------------------------------------------
def dag_settings_file() -> Path:
    """The DAG's settings file of the local Airflow: `switchyard.env` in its home, where every
    Airflow process (and `airflow dags test` with this home) finds it (switchyard.settings)."""
    return airflow_home() / "switchyard.env"


def dag_settings() -> dict[str, str]:
    """What the local Airflow's settings file holds ({} without one)."""
    from switchyard.settings import read_settings_file
    path = dag_settings_file()
    return read_settings_file(path) if path.exists() else {}


def write_dag_settings(chosen: dict[str, str] | None = None) -> dict[str, str]:
    """Write the local Airflow's DAG settings file; what it now holds.

    Each DAG setting comes from, first to last: `chosen` (the demo's: spec, DAG id, schema,
    streams), this shell's environment, the file as it was, the local stack's defaults: no
    schedule (runs on demand; set SWITCHYARD_SCHEDULE for one) and a start date at the moment
    the file was first written (no scheduled run for a time before the stack existed). A file
    written for another DAG (the demo of another spec) keeps neither its schedule, its time zone,
    its batch names' format nor its start date: they were that DAG's."""
    from switchyard import settings
    import datetime as dt
    values = {"SWITCHYARD_SCHEDULE": "none",
              "SWITCHYARD_START_DATE": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:00+00:00")}
    before = dag_settings()
    refuse_replacing_a_scheduled_dag(before, (chosen or {}).get("SWITCHYARD_DAG_ID")
                                     or os.environ.get("SWITCHYARD_DAG_ID", "").strip() or None)
    if (chosen or {}).get("SWITCHYARD_DAG_ID") not in (None, before.get("SWITCHYARD_DAG_ID")):
        before = {k: v for k, v in before.items()
                  if k not in ("SWITCHYARD_SCHEDULE", "SWITCHYARD_START_DATE", "SWITCHYARD_TIMEZONE",
                               "SWITCHYARD_BATCH_FORMAT")}
    values.update(before)
    for s in settings.SETTINGS:
        if s.section == settings.FILE_SECTION and os.environ.get(s.variable, "").strip():
            values[s.variable] = os.environ[s.variable].strip()
    values.update({k: str(v) for k, v in (chosen or {}).items()})
    for name, value in values.items():  # each value checked before the file changes
        settings._parse(next(s for s in settings.SETTINGS if s.variable == name), value)
    text = ("# The DAG's settings, written by `switchyard demo` / `switchyard services start`. Every Airflow\n"
            "# process of this home, `airflow dags test` included, builds the DAG from these lines; an\n"
            "# environment variable that says otherwise stops the DAG's parse. Edit to change the DAG.\n"
            + "".join(f"{k}={v}\n" for k, v in sorted(values.items())))
    path = dag_settings_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return values


def refuse_replacing_a_scheduled_dag(before: dict[str, str], dag_id: str | None) -> None:
    """SystemExit where the settings file (`before`) builds a DAG on a schedule and `dag_id` is
    another: the local Airflow builds one DAG, so the other would replace it, and the nightly
    runs of the one there would stop without a word (its DAG gone from the UI). A DAG without a
    schedule is replaced (the demo of another spec): its runs stay in Airflow's history."""
    current, schedule = before.get("SWITCHYARD_DAG_ID"), (before.get("SWITCHYARD_SCHEDULE") or "none").strip()
    if not current or not dag_id or dag_id == current or schedule.lower() in ("none", ""):
        return
    raise SystemExit(
        f"the local Airflow builds one DAG, from {dag_settings_file()}: {current}, on the schedule {schedule!r}. "
        f"The DAG {dag_id} would replace it, and {current}'s scheduled runs would stop. To replace it, end its "
        f"schedule first (`SWITCHYARD_SCHEDULE=none .venv/bin/switchyard services start`, its runs stay in "
        f"Airflow's history); to keep both, run {dag_id} from a second checkout with ports of its own "
        f"(docs/deployment.md, \"Two checkouts on one machine\")")


def named_after_spec() -> dict[str, str]:
    """For `services start` with a spec in this shell that the settings file does not hold: the DAG
    id and schema named after the spec, as the demo names them (`switchyard_<name>`, `<name>`),
    unless the shell names them; {} otherwise (the file's DAG stays as it is)."""
    spec = os.environ.get("SWITCHYARD_SPEC", "").strip()
    if not spec or spec == dag_settings().get("SWITCHYARD_SPEC"):
        return {}
    from switchyard.core.spec import load_spec
    name = load_spec(spec).name
    named = {"SWITCHYARD_DAG_ID": f"switchyard_{name}", "SWITCHYARD_SCHEMA": name}
    return {k: v for k, v in named.items() if not os.environ.get(k, "").strip()}


def without_dag_settings(env: dict[str, str]) -> dict[str, str]:
    """`env` without the DAG's settings, for the services: they read them from the settings file,
    which `services start` rewrites while they run. Kept in their environment, a value given to
    the first start would contradict the file's next one and stop every parse of the DAG."""
    from switchyard import settings
    dag = {s.variable for s in settings.SETTINGS if s.section == settings.FILE_SECTION}
    return {k: v for k, v in env.items() if k not in dag}


def dag_settings_conflicts(env: dict[str, str]) -> tuple[str, ...]:
    """The DAG settings `env` contradicts its Airflow home's settings file on (none without a file)."""
    from switchyard.settings import Settings
    return Settings.from_env(env).conflicts


# The folder of the airflow_local_settings.py Airflow imports: the product's (the scheduler's preload).
LOCAL_SETTINGS = PROJECT / "plugins" / "switchyard" / "airflow" / "local_settings"


# The local home's airflow.cfg, written before Airflow would write its own: Airflow writes every
# option with its default (a SQLite database, port 8080) into a home that has none, which the
# local services never use, since the environment they are started with wins over the file.
HOME_CONFIG = """\
# The local Airflow of this checkout (`switchyard services`, `switchyard demo`, `switchyard airflow`).
# Its settings come from the environment `switchyard` starts every Airflow process with
# (AIRFLOW__<SECTION>__<KEY>, which wins over this file): the metadata database (a database of
# this home's in the embedded PostgreSQL), the API server's port (SWITCHYARD_AIRFLOW_PORT), the
# executor, the DAG and plugin folders, the log folder and the log servers' ports. A setting in
# effect, as the services see it:
#   switchyard airflow config get-value database sql_alchemy_conn
#   switchyard airflow config list
# An option added below applies where that environment sets none; the rest keep Airflow's defaults.
"""


def write_home_config(home: Path) -> None:
    """The home's airflow.cfg, where it has none (an existing one is the user's and stays)."""
    cfg = home / "airflow.cfg"
    if not cfg.exists():
        cfg.write_text(HOME_CONFIG, encoding="utf-8")


def airflow_env(streams: int | None = None, extra: dict[str, str] | None = None,
                local_settings: Path = LOCAL_SETTINGS) -> dict[str, str]:
    home = airflow_home()
    home.mkdir(parents=True, exist_ok=True)
    write_home_config(home)
    admin_password()
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": str(setting("SWITCHYARD_PARALLELISM")),
        "AIRFLOW__CORE__FERNET_KEY": _secret("fernet_key", _fernet_key),
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{api_url()}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_uri(),
        "AIRFLOW__API__PORT": str(api_port()),
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__BASE_URL": api_url(),
        "AIRFLOW__API_AUTH__JWT_SECRET": _secret("jwt_secret", lambda: secrets.token_urlsafe(32)),
        # The key the API server signs its sessions and the task log servers' tokens with: the
        # same in every process of the home (its default is a random key per process, unless
        # written into airflow.cfg, which the home's own file leaves out).
        "AIRFLOW__API__SECRET_KEY": _secret("api_secret_key", lambda: secrets.token_urlsafe(32)),
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        # The task and trigger log servers (Airflow's 8793 and 8794 by default): settings, so that two
        # local Airflows (two checkouts, or another project's) never collide.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(setting("SWITCHYARD_AIRFLOW_LOG_PORT")),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(setting("SWITCHYARD_AIRFLOW_TRIGGER_LOG_PORT")),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "GX_ANALYTICS_ENABLED": "False",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT / "plugins"), os.environ.get("PYTHONPATH")])),
    })
    # An idle scheduler loop sleeps [scheduler] scheduler_idle_sleep_time (default 1 s) before
    # it sees that a task finished and queues the next one (can be overridden from the
    # environment). [workers] min_heartbeat_interval keeps Airflow's 5 s: each running task's
    # supervisor calls the API server once per interval (a write to the metadata database),
    # and it also notices its task process's exit only at its next wake-up, so a task process
    # that closes its sockets before the kernel has torn it down keeps its LocalExecutor worker
    # busy up to 5 s more. SWITCHYARD_PARALLELISM (16) leaves workers for that: at 1 s with 8
    # workers, runs on two shared cores took 128.6 s against 121.7 s and Airflow 87.9 CPU s
    # against 78.9; with Airflow on a core of its own the two were within the spread
    # (docs/benchmarks.md, Levers).
    env.setdefault("AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME", "0.25")
    # airflow_local_settings.py: the scheduler preloads GX and the DAG for the task processes it forks.
    env["PYTHONPATH"] = os.pathsep.join([str(local_settings), env["PYTHONPATH"]])
    env.setdefault("SWITCHYARD_DATA_ROOT", str(state_dir() / "data"))
    env.setdefault("SWITCHYARD_RUNS_DIR", str(state_dir() / "runs"))
    if streams is not None:
        env["SWITCHYARD_STREAMS"] = str(streams)
    env.update(extra or {})
    # The lock wait is SQLite's own connect argument: another metadata database gets none.
    sqlite = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("sqlite")
    for key, value in _CONNECT_ARGS_SETTINGS.items():
        if sqlite:
            env.setdefault(key, value)
        elif env.get(key) == value:
            del env[key]
    return env


def cli_environment() -> dict[str, str]:
    """For `switchyard pool sync` (the `switchyard.airflow_environment` entry point): the local
    Airflow's environment, its metadata database created if needed."""
    env = airflow_env()
    migrate(env)
    return env


def airflow_bin() -> str:
    return str(Path(sys.executable).with_name("airflow"))


def airflow(*args: str, env: dict[str, str] | None = None, check: bool = True,
            capture: bool = True, timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([airflow_bin(), *args], env=env or airflow_env(), check=check, text=True,
                          capture_output=capture, timeout=timeout)


def reserialize(env: dict[str, str]) -> None:
    """The DAG files parsed now and written to the metadata database, as the dag-processor
    writes them: a DAG's new settings take effect at once instead of at its next parse. A
    parse that fails is said; the dag-processor reports it too (`services status`)."""
    done = airflow("dags", "reserialize", env=env, check=False, timeout=300)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        print("    airflow dags reserialize failed; the dag-processor takes the settings at its next parse:\n    "
              + "\n    ".join(tail))


def migrate(env: dict[str, str]) -> None:
    """Create or upgrade the metadata database (a no-op when it is current); the home's
    database in the embedded PostgreSQL is created (and the server started) if needed."""
    conn = env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")
    # The stamp names the database it stands for (a home's metadata may move between SQLite and
    # the embedded PostgreSQL); an older stamp names none: SQLite.
    database = "sqlite" if conn.startswith("sqlite") else conn.rsplit("/", 1)[-1].split("?")[0]
    created = False
    if database == metadata_database():
        created = ensure_metadata_database()[1]
    stamp = airflow_home() / ".migrated"
    recorded = stamp.read_text().split() if stamp.exists() else None
    if created or recorded is None or (recorded[1:] or ["sqlite"])[0] != database:
        airflow("db", "migrate", env=env)
        stamp.write_text(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {database}")


# --- services ------------------------------------------------------------------------
def _pidfile(service: str) -> Path:
    return airflow_home() / f"{service}.pid"


def _alive(pid: int) -> bool:
    try:
        # A service this process started and that has exited stays a zombie (and answers
        # kill 0) until it is reaped: reap it here, so stopping it does not wait for nothing.
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:  # not our child: its parent reaps it
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def left_behind(service: str) -> tuple[int, list[int]] | None:
    """(the ended pid its pid file names, the processes of its group that still run) of a service
    that ended without its group (a scheduler killed by the kernel leaves its log server and
    LocalExecutor workers, which hold its port); None otherwise. Only this home's processes: a
    group id reused by another program is not taken for it."""
    path = _pidfile(service)
    if not path.exists():
        return None
    pid = int(path.read_text().split()[0])
    if _alive(pid) or not _group_alive(pid):
        return None
    home = f"AIRFLOW_HOME={airflow_home()}".encode()
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[2]) != pid or stat[0] == "Z":
                continue
            # This home's: its environment says so, or, where Airflow retitled the process over its
            # environment (a LocalExecutor worker, the log server), an `airflow` process started in
            # this checkout, as the services are.
            ours = home in (entry / "environ").read_bytes().split(b"\0") or (
                os.readlink(entry / "cwd") == str(PROJECT)
                and (entry / "cmdline").read_bytes().split(b"\0")[0].split(b" ")[0].endswith(b"airflow"))
            if ours:
                members.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return (pid, sorted(members)) if members else None


def _end_group(pgid: int, timeout: float) -> None:
    """SIGTERM to a process group, SIGKILL to what is left of it at the deadline (an idle
    LocalExecutor worker ignores SIGTERM)."""
    def kill(sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except OSError:
            pass
    # _alive reaps the group's leader where this process started it (a zombie is still in its group).
    _term_then_kill(pgid, lambda: _alive(pgid) or _group_alive(pgid), kill, timeout)


def _term_then_kill(leader: int, left: Callable[[], Any], kill: Callable[[int], None], timeout: float) -> None:
    """SIGTERM to `leader`'s process group; at the deadline, SIGKILL (`kill`) to what `left` still
    finds of it."""
    try:
        os.killpg(leader, signal.SIGTERM)
    except OSError:
        pass
    deadline = time.monotonic() + timeout
    while left() and time.monotonic() < deadline:
        time.sleep(0.3)
    if left():
        kill(signal.SIGKILL)


def service_pid(service: str) -> int | None:
    path = _pidfile(service)
    if path.exists():
        pid = int(path.read_text().split()[0])
        if _alive(pid):
            return pid
    return None


def running_streams() -> int | None:
    """The stream count the running services were started with."""
    path = _pidfile("scheduler")
    if path.exists() and service_pid("scheduler"):
        parts = path.read_text().split()
        return int(parts[1]) if len(parts) > 1 else None
    return None


def running_spec() -> str | None:
    """The spec whose DAG the running services were started with (None: not running)."""
    path = _pidfile("scheduler")
    if path.exists() and service_pid("scheduler"):
        parts = path.read_text().split()
        return parts[2] if len(parts) > 2 else "tpch"
    return None


def running_executor() -> str | None:
    """The executor the running services were started with (local, edge; None: not running)."""
    path = _pidfile("scheduler")
    if path.exists() and service_pid("scheduler"):
        parts = path.read_text().split()
        return parts[3] if len(parts) > 3 else "local"
    return None


def running_data_root() -> Path | None:
    """The data root the running scheduler reads batches from: its SWITCHYARD_DATA_ROOT, from its
    process's environment, which it keeps until it stops (its task processes inherit it); None
    where no scheduler of a pid file runs or its environment cannot be read."""
    pid = service_pid("scheduler")
    if not pid:
        return None
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    from switchyard.settings import Settings
    env = dict(item.decode(errors="replace").split("=", 1) for item in environ if b"=" in item)
    return Settings.from_env(env).data_root.resolve()


# The port each service listens on, and the setting that moves it.
SERVICE_PORTS = {"api-server": "SWITCHYARD_AIRFLOW_PORT", "scheduler": "SWITCHYARD_AIRFLOW_LOG_PORT",
                 "triggerer": "SWITCHYARD_AIRFLOW_TRIGGER_LOG_PORT"}


def start_services(env: dict[str, str], streams: int, spec: str = "tpch") -> list[str]:
    """Start the services that do not run, with `env`; the names of those it started."""
    logs = airflow_home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    by_hand = hand_started()
    if by_hand:
        # Two schedulers of one home would both schedule; the one started by hand is used as it is.
        print(f"    already running, started by hand: "
              f"{', '.join(f'{s} (pid {p[0]})' for s, p in by_hand.items())}")
    for service, variable in SERVICE_PORTS.items():
        left = left_behind(service)
        if not service_pid(service) and left:
            raise LocalStackError(f"the local {service} (pid {left[0]}) ended without its processes: "
                                  f"{len(left[1])} of its process group still run (pids "
                                  f"{', '.join(map(str, left[1][:6]))}{' ...' if len(left[1]) > 6 else ''}), and hold "
                                  f"its port {setting(variable)}; `switchyard services stop` ends them, then start "
                                  f"again (a task they ran is failed and retried by the next scheduler)")
        if not service_pid(service) and service not in by_hand and port_in_use(setting(variable)):
            raise LocalStackError(f"port {setting(variable)} on 127.0.0.1, which the local {service} would listen on, "
                                  f"is taken by another program (another checkout's or project's Airflow?): set "
                                  f"{variable} to a free port")
    started = []
    for service in SERVICES:
        if service_pid(service) or service in by_hand:
            continue
        out = open(logs / f"{service}.out", "ab")
        proc = subprocess.Popen([airflow_bin(), service], env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=str(PROJECT))
        executor = "edge" if "EdgeExecutor" in env.get("AIRFLOW__CORE__EXECUTOR", "") else "local"
        _pidfile(service).write_text(f"{proc.pid} {streams} {spec} {executor}\n")
        started.append(service)
    return started


def stop_services(timeout: float = 30) -> list[str]:
    """Stop the services that run (remote workers first: they report to the api-server), those
    started by hand too (found by their process, `hand_started`); the names of those it stopped."""
    stopped = stop_workers()
    for service in SERVICES:
        pid = service_pid(service)
        if not pid and (left := left_behind(service)):
            stopped.append(f"what the ended {service} (pid {left[0]}) left running: {len(left[1])} processes")
            _end_group(left[0], timeout)
            _pidfile(service).unlink(missing_ok=True)
            continue
        if not pid:
            for other in hand_started().get(service, []):
                stopped.append(f"{service} (pid {other}, started by hand)")
                _stop_process(other, timeout)
            continue
        stopped.append(f"{service} (pid {pid})")
        # A service is stopped when its whole process group is gone (the scheduler's
        # LocalExecutor workers and their tasks, the api-server's workers), not only its
        # first process; what is left at the deadline is killed.
        _end_group(pid, timeout)
        _pidfile(service).unlink(missing_ok=True)
    return stopped


def _stop_process(pid: int, timeout: float) -> None:
    """SIGTERM to a service started by hand (it stops its own children), SIGKILL at the deadline."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.3)
    if _alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _service_of(pid: str) -> str | None:
    """The service a process runs if its command line is `airflow <service> ...` (as started, or as
    Airflow retitles it), else None."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").split()
    except OSError:
        return None
    for i, word in enumerate(words[:-1]):
        if (word == "airflow" or word.endswith("/airflow")) and words[i + 1] in SERVICES:
            return words[i + 1]
    return None


def hand_started() -> dict[str, list[int]]:
    """This home's Airflow services that no pid file names (started any other way, e.g.
    `switchyard airflow scheduler` in a shell): service -> pids, the topmost process of each."""
    home = str(airflow_home())
    known = {service_pid(s) for s in SERVICES}
    found: dict[int, str] = {}
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        service = _service_of(entry.name)
        if service is None:
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if f"AIRFLOW_HOME={home}".encode() in environ and stat[0] != "Z":
            found[int(entry.name)] = service
            parents[int(entry.name)] = int(stat[1])
    out: dict[str, list[int]] = {}
    for pid, service in sorted(found.items()):
        # The service's own children (its workers, a retitled subprocess) are not services.
        if parents[pid] in found or pid in known or parents[pid] in known:
            continue
        out.setdefault(service, []).append(pid)
    return out


def running_services() -> dict[str, int]:
    """Every service of this home that runs, however it was started: service -> pid."""
    out = {s: pid for s in SERVICES if (pid := service_pid(s))}
    for service, pids in hand_started().items():
        out.setdefault(service, pids[0])
    return out


def port_in_use(port: int) -> bool:
    import socket
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def status_lines() -> list[str]:
    """What `switchyard services status` prints: every service of this checkout, found by its pid
    file, its process or its port, and the ports it uses."""
    from switchyard_dev.embedded import EmbeddedPostgres
    lines = []
    by_hand = hand_started()
    ports = {"api-server": api_port(), "scheduler": setting("SWITCHYARD_AIRFLOW_LOG_PORT"),
             "triggerer": setting("SWITCHYARD_AIRFLOW_TRIGGER_LOG_PORT")}
    for service in SERVICES:
        pid = service_pid(service)
        port = ports.get(service)
        on = f" on port {port}" if port else ""
        if pid:
            state = f"running (pid {pid}){on}"
        elif by_hand.get(service):
            state = f"running (pid {', '.join(map(str, by_hand[service]))}, started by hand){on}"
        elif left := left_behind(service):
            state = (f"ended (pid {left[0]}), but {len(left[1])} processes of it still run"
                     + (f" and hold port {port}" if port and port_in_use(port) else "")
                     + ": `switchyard services stop` ends them")
        elif port and port_in_use(port):
            state = f"stopped here, but port {port} is taken (another program or checkout?)"
        else:
            state = "stopped"
        lines.append(f"{service:<20} {state}")
    if root := running_data_root():
        lines.append(f"{'data root':<20} {root} (the scheduler's, kept until it stops)")
    for name, pid in workers().items():
        lines.append(f"{'worker ' + name:<20} {'running (pid %d)' % pid if pid else 'stopped'}")
    if pid := hand_worker():
        lines.append(f"{'worker':<20} running (pid {pid}, started by hand)")
    pg = EmbeddedPostgres()
    if pg.is_running():
        pg_state = f"running on port {pg.running_port() or pg.port} ({pg.pgdata})"
    elif port_in_use(pg.port):
        pg_state = f"stopped here, but port {pg.port} is taken (another program or checkout?)"
    else:
        pg_state = "stopped"
    lines.append(f"{'embedded PostgreSQL':<20} {pg_state}")
    return lines


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False


# --- REST API --------------------------------------------------------------------------
class Api:
    """The few calls the demo needs, against the local api-server, as the admin user."""

    def __init__(self, base: str | None = None):
        self.base = base or api_url()
        self._token: str | None = None

    def _request(self, method: str, path: str, body: Any = None, auth: bool = True) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if auth:
            req.add_header("Authorization", f"Bearer {self.token()}")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                text = resp.read().decode()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise
            raise RuntimeError(f"Airflow API {method} {path}: HTTP {exc.code}: "
                               f"{exc.read().decode(errors='replace')[:1000]}") from exc

    def token(self) -> str:
        if self._token is None:
            out = self._request("POST", "/auth/token",
                                {"username": ADMIN_USER, "password": admin_password()}, auth=False)
            self._token = out["access_token"]
        return self._token

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._request("GET", "/api/v2/monitor/health", auth=False)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise LocalStackError(f"the Airflow api-server did not answer on {self.base} "
                                          f"(see {airflow_home() / 'logs' / 'api-server.out'})")
                time.sleep(1)
        self.warm_execution_api()

    def warm_execution_api(self) -> None:
        """Send the api-server its first Execution API request now (refused: no token).

        The api-server sets up its Execution API (the one task processes call) on the first
        request it gets there, about 3 s here; that first request would otherwise be the
        first task of the next run, whose start it delays by as much.
        """
        import uuid
        req = urllib.request.Request(f"{self.base}/execution/task-instances/{uuid.uuid4()}/run",
                                     data=b"{}", method="PATCH", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60):
                pass
        except (urllib.error.URLError, ConnectionError, OSError):
            pass  # 401 expected; anything else is for the next real request to report

    def get(self, path: str) -> Any:
        return self._request("GET", path)

    def get_all(self, path: str, key: str, page: int = 100) -> list:
        """Every item of a paged list (the API caps a page at 100)."""
        items: list = []
        while True:
            sep = "&" if "?" in path else "?"
            chunk = self.get(f"{path}{sep}limit={page}&offset={len(items)}")
            items.extend(chunk[key])
            if len(chunk[key]) < page or len(items) >= chunk.get("total_entries", 0):
                return items

    def post(self, path: str, body: Any) -> Any:
        return self._request("POST", path, body)

    def patch(self, path: str, body: Any) -> Any:
        return self._request("PATCH", path, body)

    def exists(self, path: str) -> bool:
        try:
            self.get(path)
            return True
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return False
            raise


# --- Edge workers started here (scaleout.py starts them), found by their pid files ---------
def worker_pidfile(name: str) -> Path:
    return airflow_home() / f"worker-{name}.pid"


def worker_pid(name: str) -> int | None:
    path = worker_pidfile(name)
    if path.exists():
        pid = int(path.read_text().split()[0])
        if _alive(pid) or session_pids(pid):
            return pid
    return None


def workers() -> dict[str, int | None]:
    """Every worker with a pid file in the Airflow home: name -> pid (None: not running)."""
    home = airflow_home()
    names = sorted(p.name[len("worker-"):-len(".pid")] for p in home.glob("worker-*.pid")
                   if not p.name.endswith(".edge.pid"))
    return {name: worker_pid(name) for name in names}


def session_pids(sid: int) -> list[int]:
    """Every process of session `sid`. A worker is started in a session of its own; the task
    supervisors it forks put themselves (and their task) in process groups of their own, so
    the worker's process group alone does not hold them."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[3]) == sid and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def signal_session(sid: int, sig: int) -> None:
    for pid in session_pids(sid):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def stop_workers(timeout: float = 20) -> list[str]:
    """Stop every worker (SIGTERM to its process group, SIGKILL at the deadline): before the
    api-server, which they report to."""
    stopped = []
    for name, pid in workers().items():
        if pid:
            stopped.append(f"worker {name} (pid {pid})")
            # The worker forwards SIGTERM to its running tasks; what is left of its session at
            # the deadline is killed.
            _term_then_kill(pid, lambda: _alive(pid) or session_pids(pid),
                            lambda sig: signal_session(pid, sig), timeout)
        worker_pidfile(name).unlink(missing_ok=True)
    pid = hand_worker()
    if pid:
        stopped.append(f"worker (pid {pid}, started by hand)")
        _stop_process(pid, timeout)     # it forwards SIGTERM to its running tasks
    return stopped


def hand_worker() -> int | None:
    """The Edge worker of this home started in a shell (`switchyard airflow edge worker --queues
    ...`, as docs/deployment.md starts one), if it runs: found by the pid file Airflow's worker
    writes in its home by default. Its process cannot show the home: the worker retitles itself
    (`airflow edge worker: <hostname>`), which overwrites its environment's place in memory too."""
    try:
        pid = int((airflow_home() / "airflow-edge-worker.pid").read_text().split()[0])
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return None
    return pid if _alive(pid) and b"edge worker" in cmdline else None
