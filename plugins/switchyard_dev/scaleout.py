"""Remote workers on this machine: Airflow's Edge executor with two sources, for the demo, the
tests and the benchmark.

`make demo EXECUTOR=edge` runs what a scaled-out deployment runs (docs/deployment.md), on
loopback: the scheduler, dag-processor, triggerer and api-server with their metadata in the
embedded PostgreSQL (a database of its own per Airflow home; the Edge executor's job fetch
needs `FOR UPDATE SKIP LOCKED`, which SQLite lacks), `[core] executor = LocalExecutor,
EdgeExecutor` (prepare, validate and switch on LocalExecutor, the loads on the workers), and
one Edge worker per source, each serving its own queue only and reading its own data root,
which holds only its source's stream files. No broker: Edge workers pull their jobs from the
api-server over HTTP.

Workers are started and stopped like the services (`switchyard services stop` stops them, before
the api-server they talk to); their pid files and logs are in the Airflow home.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Iterable

import yaml

from switchyard_dev import local
# The workers' pid files and sessions are the local services' bookkeeping (local.py).
from switchyard_dev.local import session_pids, signal_session, stop_workers, worker_pid, workers  # noqa: F401

EXECUTORS = ("local", "edge")
EDGE_EXECUTOR = "airflow.providers.edge3.executors.EdgeExecutor"
# What the DAG names as the loads' executor (SWITCHYARD_LOAD_EXECUTOR): the class name.
EDGE = "EdgeExecutor"
SOURCES = ("source_a", "source_b")


def metadata_database() -> str:
    """The Airflow home's metadata database in the embedded server (local.metadata_database)."""
    return local.metadata_database()


def ensure_metadata_database(pg) -> str:
    """The home's metadata database (created if missing); its SQLAlchemy URI for Airflow."""
    return local.ensure_metadata_database(pg)[0]


def drop_metadata_database(pg) -> None:
    import psycopg
    with psycopg.connect(pg.uri("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{metadata_database()}" WITH (FORCE)')
    (local.airflow_home() / ".migrated").unlink(missing_ok=True)  # what it stood for is gone


def edge_settings(metadata_uri: str, heartbeat_timeout: int = 60) -> dict[str, str]:
    """The Airflow settings of a central site with Edge workers, on loopback.

    - `[core] executor`: LocalExecutor first (the default: every step the DAG does not route)
      and the Edge executor (the loads, SWITCHYARD_LOAD_EXECUTOR).
    - `[edge] api_url`: where workers call in (the api-server's Edge API, enabled here).
    - Short poll and heartbeat intervals: a demo's loads last seconds, not hours.
    - `[scheduler] task_instance_heartbeat_timeout`: a task whose worker died (no heartbeat for
      this long) fails and, with retries left, is queued again for another worker of its queue.
    """
    return {
        "AIRFLOW__CORE__EXECUTOR": f"LocalExecutor,{EDGE_EXECUTOR}",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_uri,
        "AIRFLOW__EDGE__API_ENABLED": "True",
        "AIRFLOW__EDGE__API_URL": f"{local.api_url()}/edge_worker/v1/rpcapi",
        "AIRFLOW__EDGE__JOB_POLL_INTERVAL": "1",
        "AIRFLOW__EDGE__HEARTBEAT_INTERVAL": "5",
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(heartbeat_timeout),
        "SWITCHYARD_LOAD_EXECUTOR": EDGE,
    }


# --- the batch, split over the sources ----------------------------------------------------------
def split_streams(streams: int, sources: Iterable[str] = SOURCES) -> dict[str, list[int]]:
    """Streams 1..n over the sources in contiguous runs: 4 streams over two sources -> 1-2, 3-4."""
    names = list(sources)
    out: dict[str, list[int]] = {name: [] for name in names}
    for k in range(1, streams + 1):
        out[names[(k - 1) * len(names) // streams]].append(k)
    return {name: ks for name, ks in out.items() if ks}


def spec_with_sources(spec_name: str, sources: dict[str, list[int]], folder: Path) -> str:
    """The built-in spec with `sources` added, as a file (same name, so the same DAG id)."""
    from switchyard.core.spec import spec_file
    raw = yaml.safe_load(spec_file(spec_name).read_text())
    raw["sources"] = {name: list(ks) for name, ks in sources.items()}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{raw['name']}-sources.yaml"
    path.write_text("# Generated: the built-in spec with the local workers' sources.\n"
                    + yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def distribute(generated: Path, batch: str, spec, central_root: Path, source_roots: dict[str, Path]) -> None:
    """Lay a generated batch out as the sources hold it: each source's root gets its own streams'
    files only (hard links), and the central data root gets the manifest alone (what the
    scheduler's side plans from; the producer would write it there)."""
    from switchyard.core.batch import MANIFEST, read_manifest
    manifest = read_manifest(generated, spec)
    for root in [central_root, *source_roots.values()]:
        shutil.rmtree(root / batch, ignore_errors=True)
    for entry in manifest.entries:
        source = spec.source_of(entry.stream)
        if source is None:
            raise ValueError(f"stream {entry.stream} has no source in {spec.source}")
        dst = source_roots[source] / batch / entry.file
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(generated / entry.file, dst)
        except OSError:
            shutil.copy2(generated / entry.file, dst)
    (central_root / batch).mkdir(parents=True, exist_ok=True)
    shutil.copy2(generated / MANIFEST, central_root / batch / MANIFEST)


# --- workers ------------------------------------------------------------------------------------
def worker_name(source: str) -> str:
    """The local worker of a source: worker_a for source_a."""
    return "worker_" + source.removeprefix("source_")


def start_worker(env: dict[str, str], name: str, queues: Iterable[str], data_root: Path,
                 concurrency: int = 2) -> int:
    """An Edge worker named `name` serving `queues` only (a worker started without queues would
    serve every queue), reading batches under `data_root`. Its TIs' hostname is `name`."""
    pid = worker_pid(name)
    if pid:
        return pid
    logs = local.airflow_home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    wenv = dict(env, SWITCHYARD_DATA_ROOT=str(data_root))
    queues = list(queues)
    if not queues:
        raise ValueError("a worker needs its queues: without one it serves every queue")
    cmd = [local.airflow_bin(), "edge", "worker", "--queues", ",".join(queues), "--edge-hostname", name,
           "--concurrency", str(concurrency), "--pid", str(local.airflow_home() / f"worker-{name}.edge.pid")]
    out = open(logs / f"worker-{name}.out", "ab")
    proc = subprocess.Popen(cmd, env=wenv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                            cwd=str(local.PROJECT))
    local.worker_pidfile(name).write_text(f"{proc.pid} {','.join(queues)} {data_root}\n")
    return proc.pid


def kill_worker(name: str) -> int:
    """SIGKILL the worker and everything it started (its task supervisors and task processes), as
    if its machine died; the pid it had."""
    pid = worker_pid(name)
    if pid is None:
        raise RuntimeError(f"worker {name} is not running")
    signal_session(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (local._alive(pid) or session_pids(pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pid


def wait_for_workers(names: Iterable[str], timeout: float = 120) -> None:
    """Until every named worker has registered with the central site and is idle or running."""
    api = local.Api()
    wanted = set(names)
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = {w["worker_name"]: w["state"] for w in api.get("/edge_worker/ui/worker")["workers"]}
        except Exception:  # noqa: BLE001 - not up yet
            found = {}
        if all(found.get(n) in ("idle", "running") for n in wanted):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Edge workers not ready in {timeout:.0f}s: {found} (logs: "
                               f"{local.airflow_home() / 'logs'}/worker-*.out)")
        time.sleep(1)


# --- a whole site: central services and workers -------------------------------------------------
def site_env(pg, streams: int, extra: dict[str, str], heartbeat_timeout: int = 60) -> dict[str, str]:
    """The environment of a central site with Edge workers (metadata database created)."""
    env = local.airflow_env(streams=streams, extra={
        **edge_settings(ensure_metadata_database(pg), heartbeat_timeout=heartbeat_timeout), **extra})
    local.migrate(env)
    return env


def start_site(env: dict[str, str], streams: int, spec: str, pool_slots: int,
               worker_roots: dict[str, tuple[str, Path]], concurrency: int = 2,
               dag_id: str = "switchyard_tpch", timeout: float = 240) -> local.Api:
    """Start the services and one Edge worker per entry of `worker_roots` (name -> (queue, data
    root)), set the load pool, wait for the workers and the parsed DAG, unpause it."""
    local.airflow("pools", "set", env.get("SWITCHYARD_POOL", "switchyard_loads"), str(pool_slots), "bulk loads",
                  env=env)
    local.start_services(env, streams, spec)
    api = local.Api()
    api.wait_ready()
    for name, (queue, root) in worker_roots.items():
        start_worker(env, name, [queue], root, concurrency=concurrency)
    wait_for_workers(worker_roots, timeout=timeout)
    deadline = time.monotonic() + timeout
    while not api.exists(f"/api/v2/dags/{dag_id}"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the DAG {dag_id} was not parsed in {timeout:.0f}s")
        time.sleep(1)
    api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": False})
    return api


def task_instances(api: local.Api, dag_id: str, run_id: str) -> list[dict]:
    """The run's task instances as Airflow's metadata has them (hostname, queue, executor,
    pool, try number, start and end)."""
    from urllib.parse import quote
    return api.get_all(f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances", "task_instances")


def try_history(api: local.Api, dag_id: str, run_id: str, task_id: str) -> list[dict]:
    """Every try of one task instance (an earlier try's hostname and state too)."""
    from urllib.parse import quote
    out = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{quote(task_id, safe='')}"
                  f"/tries")
    return out["task_instances"]


def max_overlap(spans: Iterable[tuple[str, str]]) -> int:
    """The most intervals (ISO start, ISO end) running at one moment; an end at the very moment
    of a start comes first (the slot was free again)."""
    from datetime import datetime
    events = []
    for start, end in spans:
        events.append((datetime.fromisoformat(start.replace("Z", "+00:00")), 1))
        events.append((datetime.fromisoformat(end.replace("Z", "+00:00")), -1))
    most = now = 0
    for _, step in sorted(events):
        now += step
        most = max(most, now)
    return most
