"""The benchmark's own Airflow: its home, settings and metadata database, starting and stopping
it, which DAG schema it loads, and the CPU its services use."""
from __future__ import annotations

import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from switchyard_dev.bench.common import postmaster_pid

DAG_SCHEMA = "bench"
BENCH_AIRFLOW_PORT = 28090

# How often the benchmark asks the api-server about a run it measures (seconds): see run_dag.
POLL_EVERY = 5.0

OBSERVE_EVERY = 30.0

# Airflow's processes, as the CPU accounting of a run through the benchmark's Airflow names them.
AIRFLOW_SERVICES = ("scheduler", "api-server", "task processes", "dag-processor", "triggerer")

class AirflowCpu:
    """CPU seconds of the server and of each Airflow service from construction to `taken()`."""

    def __init__(self):
        from switchyard_dev import cputime, local
        self._cputime = cputime
        self.roots = {"postgres": postmaster_pid(), **{name: local.service_pid(name) for name in local.SERVICES}}
        self.before = cputime.snapshot(self.roots, split_children=("scheduler",))

    def taken(self) -> dict[str, float]:
        cpu = self._cputime.delta(self.before, self._cputime.snapshot(self.roots, split_children=("scheduler",)))
        # Below the scheduler: LocalExecutor's workers, each supervising the task processes it forks.
        cpu["task processes"] = cpu.pop("scheduler children", None)
        return cpu

def airflow_cpu_total(cpu: dict) -> float:
    return sum(cpu.get(k) or 0 for k in AIRFLOW_SERVICES)

# The metadata database of the "metadata in PostgreSQL" lever, on the embedded server.
METADATA_DATABASE = "switchyard_bench_airflow"

def bench_airflow_home(metadata: str = "sqlite") -> Path:
    """The benchmark's Airflow home: one per metadata database (SQLite file or PostgreSQL)."""
    from switchyard_dev.embedded import state_dir
    return state_dir() / "bench" / ("airflow" if metadata == "sqlite" else f"airflow-{metadata}")

def use_bench_airflow(metadata: str = "sqlite") -> None:
    """Point this process's `local` helpers at the benchmark's own Airflow."""
    os.environ["SWITCHYARD_AIRFLOW_HOME"] = str(bench_airflow_home(metadata))
    from switchyard_dev.settings import value
    os.environ["SWITCHYARD_AIRFLOW_PORT"] = str(value("SWITCHYARD_BENCH_AIRFLOW_PORT"))
    os.environ["SWITCHYARD_RUNS_DIR"] = str(bench_airflow_home().parent / "runs")

def stop_bench_airflows() -> None:
    """Stop the benchmark's Airflow services, whichever metadata database they use."""
    from switchyard_dev import local
    for metadata in ("postgres", "sqlite"):  # sqlite last: the default stays selected
        use_bench_airflow(metadata)
        local.stop_services()

def metadata_database_url(uri: str, database: str = METADATA_DATABASE) -> tuple[str, bool]:
    """The lever's Airflow metadata database on the embedded server (created if missing: True)."""
    import psycopg
    from psycopg import sql
    from sqlalchemy.engine import make_url
    with psycopg.connect(uri, autocommit=True) as conn:  # CREATE DATABASE cannot run in a transaction
        created = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone() is None
        if created:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    url = make_url(uri).set(drivername="postgresql+psycopg2", database=database)
    return url.render_as_string(hide_password=False), created

def airflow_settings(streams: int, preload: bool, flat_priorities: bool,
                     options: dict | None = None) -> dict[str, str]:
    from switchyard.core.batch import data_root
    settings = {"SWITCHYARD_SCHEMA": DAG_SCHEMA, "SWITCHYARD_SCHEDULE": "none", "SWITCHYARD_STREAMS": str(streams),
                "SWITCHYARD_DATA_ROOT": str(data_root()), "SWITCHYARD_RUNS_DIR": os.environ["SWITCHYARD_RUNS_DIR"],
                "SWITCHYARD_PRELOAD": "1" if preload else "0",
                "SWITCHYARD_FLAT_PRIORITIES": "1" if flat_priorities else "0"}
    options = options or {}
    if options.get("parallelism"):
        # How many task processes LocalExecutor runs at once (local.py's default: 8).
        settings["AIRFLOW__CORE__PARALLELISM"] = str(options["parallelism"])
    if options.get("validation"):
        settings["SWITCHYARD_VALIDATION"] = options["validation"]
    if options.get("preload_dag") is False:
        settings["SWITCHYARD_PRELOAD_DAG"] = "0"
    if options.get("without_unique") or options.get("single_tables"):
        settings["SWITCHYARD_SPEC"] = str(spec_variant(without_unique=bool(options.get("without_unique")),
                                                       single_tables=tuple(options.get("single_tables") or ())))
    if options.get("index_only"):
        # The benchmark's local settings switch every check but the unique index off (switch_checks_off).
        settings["SWITCHYARD_BENCH_INDEX_ONLY"] = "1"
    if options.get("session_per_use"):
        # The benchmark's local settings give each use its own session (sessions.session_per_use).
        settings["SWITCHYARD_BENCH_SESSION_PER_USE"] = "1"
    if options.get("rendered_conn_id"):
        # The benchmark's local settings put the template field back (rendered.rendered_conn_id).
        settings["SWITCHYARD_BENCH_RENDERED_CONN_ID"] = "1"
    if options.get("no_value_guard"):
        # The benchmark's local settings leave the loads' value guard out (value_guard.guard_off).
        settings["SWITCHYARD_BENCH_NO_VALUE_GUARD"] = "1"
    if options.get("plugins_per_task"):
        # The benchmark's local settings preload without Airflow's task-side plugins.
        settings["SWITCHYARD_BENCH_PLUGINS_PER_TASK"] = "1"
    settings.update(options.get("airflow") or {})  # Airflow settings, as AIRFLOW__SECTION__KEY
    return settings

def spec_variant(name: str = "tpch", *, without_unique: bool = False, single_tables: tuple[str, ...] = ()) -> Path:
    """A copy of a built-in spec, in the results folder: with every table's `unique` left out,
    and/or the `single_tables` with `tasks: single` (each group's four steps in one task)."""
    import yaml
    from switchyard.core.spec import spec_file
    raw = yaml.safe_load(spec_file(name).read_text(encoding="utf-8"))
    for table_name, table in raw.get("tables", {}).items():
        if without_unique:
            table.pop("unique", None)
        if table_name in single_tables:
            table["tasks"] = "single"
    suffix = ("-without-unique" if without_unique else "") + ("-single-" + "-".join(single_tables) if single_tables else "")
    out = Path(os.environ["SWITCHYARD_RUNS_DIR"]).parent / f"{name}{suffix}.yaml"
    text = yaml.safe_dump(raw, sort_keys=False)
    # Written only when it differs: the preload counts the spec's modification time as code,
    # and task processes that find the code changed import it afresh (preload.code_stamp).
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        out.write_text(text, encoding="utf-8")
    return out

def ensure_airflow(streams: int, preload: bool, flat_priorities: bool,
                   options: dict | None = None, uri: str | None = None) -> tuple[Any, float]:
    """The benchmark's Airflow running with these settings (restarted when they differ)."""
    from switchyard_dev import local
    metadata = (options or {}).get("metadata", "sqlite")
    if metadata not in ("sqlite", "postgres"):
        raise ValueError(f"metadata database {metadata!r}: sqlite or postgres")
    use_bench_airflow("postgres" if metadata == "sqlite" else "sqlite")
    local.stop_services()  # the other home's services hold the same port
    use_bench_airflow(metadata)
    extra = airflow_settings(streams, preload, flat_priorities, options)
    # What the marker keeps: no password (a connection in the environment only as its name).
    marked = {k: ("in the environment" if k.startswith("AIRFLOW_CONN_") else v) for k, v in extra.items()}
    marked["metadata"] = metadata
    if metadata == "postgres":
        if uri is None:
            raise ValueError("the PostgreSQL metadata database needs the embedded server's URI")
        extra["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"], created = metadata_database_url(uri)
        if created:  # a new, empty database: whatever this home migrated before is gone
            (local.airflow_home() / ".migrated").unlink(missing_ok=True)
    else:  # the lever's SQLite file (the local Airflow's default is the embedded PostgreSQL)
        extra["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = f"sqlite:///{local.airflow_home() / 'airflow.db'}"
    # The benchmark's own airflow_local_settings.py: the preload with the benchmark's levers.
    env = local.airflow_env(streams=streams, extra=extra,
                            local_settings=Path(__file__).resolve().parent / "local_settings")
    local.migrate(env)
    marker = local.airflow_home() / "bench-settings.json"
    current = json.loads(marker.read_text()) if marker.exists() else None
    started = time.monotonic()
    running = all(local.service_pid(s) for s in local.SERVICES)
    if running and current != marked:
        local.stop_services()
        running = False
    if not running:
        local.stop_services()
        end_leftover_runs(env)
        local.start_services(env, streams)
        marker.write_text(json.dumps(marked))
    api = local.Api()
    api.wait_ready()
    return api, time.monotonic() - started


# Airflow's own models, in a process with the home's settings (its services stopped).
_END_LEFTOVER_RUNS = """
from airflow.models.dagrun import DagRun
from airflow.models.taskinstance import TaskInstance
from airflow.sdk import timezone
from airflow.utils.session import create_session
from airflow.utils.state import DagRunState, State, TaskInstanceState
with create_session() as session:
    for run in session.query(DagRun).filter(DagRun.state.in_([DagRunState.RUNNING, DagRunState.QUEUED])):
        print(f"    ended a run an earlier benchmark left {run.state}: {run.dag_id} {run.run_id}")
        run.state, run.end_date = DagRunState.FAILED, timezone.utcnow()
        for ti in session.query(TaskInstance).filter(TaskInstance.dag_id == run.dag_id,
                                                      TaskInstance.run_id == run.run_id):
            if ti.state not in State.finished:
                ti.state = TaskInstanceState.FAILED
"""


def end_leftover_runs(env: dict[str, str]) -> None:
    """Marks failed every run of the benchmark's Airflow that is not finished, before its
    services start: a run left by a benchmark stopped part-way, which the scheduler would
    otherwise take up again beside the next part's runs (its tasks sharing the cores and the
    metadata database with them; on SQLite its writes held the API server's requests for their
    30 s lock wait)."""
    import subprocess
    import sys
    subprocess.run([sys.executable, "-c", _END_LEFTOVER_RUNS], env=env, check=True)


def _quoted(run_id: str) -> str:
    return run_id.replace("+", "%2B").replace(":", "%3A")

def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None
