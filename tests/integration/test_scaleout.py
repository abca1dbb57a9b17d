"""Scale-out through Airflow's Edge executor, for real: a central site (scheduler, dag-processor,
triggerer, api-server; metadata in the embedded PostgreSQL; `[core] executor = LocalExecutor,
EdgeExecutor`) and Edge workers on this machine, one per source queue, each with a data root
of its own that holds only its source's stream files (the central data root holds the
manifest alone).

What is checked comes from Airflow's metadata (the task instances' hostname, queue, executor,
pool, tries, start and end), not from Switchyard's own logs, and from the target's rows against
an independent load of the batch's files.

About 4 minutes for the three on 2 cores; with a real scheduler, so in `make chaos` (pytest -m chaos).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psycopg
import pytest

from helpers import TEST_STATE, batch_fingerprint, fingerprint, free_port
from switchyard.core.datagen import generate_tpch
from switchyard.core.spec import load_spec
from switchyard_dev import local, scaleout
from switchyard_dev.embedded import EmbeddedPostgres

pytestmark = pytest.mark.chaos
DAG_ID = "switchyard_tpch"
STREAMS = 4
POOL_SLOTS = 2
SOURCES = {"source_a": [1, 2], "source_b": [3, 4]}
# A task whose worker stopped heartbeating fails after this long, then is retried (10 s later).
HEARTBEAT_TIMEOUT = 15


@pytest.fixture(scope="module")
def site(request, pg_uri):
    """The central site and workers worker_a (source_a) and worker_b (source_b); worker_a2, a
    second worker of source_a, has its data root ready but is started by the fault test."""
    if "chaos" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("a real scheduler and Edge workers, about 3 minutes: runs in `make chaos` (pytest -m chaos)")
    mp = pytest.MonkeyPatch()
    place = Path(TEST_STATE) / f"scaleout-{uuid.uuid4().hex[:8]}"
    home = place / "airflow"
    mp.setenv("SWITCHYARD_AIRFLOW_HOME", str(home))
    mp.setenv("SWITCHYARD_AIRFLOW_PORT", str(free_port(range(28192, 28200))))
    roots = {"worker_a": ("source_a", place / "source_a"), "worker_b": ("source_b", place / "source_b"),
             "worker_a2": ("source_a", place / "source_a2")}
    for _, root in roots.values():
        root.mkdir(parents=True)
    spec_path = scaleout.spec_with_sources("tpch", SOURCES, place)
    schema = f"t_{uuid.uuid4().hex[:10]}"
    pg = EmbeddedPostgres()
    env = scaleout.site_env(pg, STREAMS, heartbeat_timeout=HEARTBEAT_TIMEOUT, extra={
        "AIRFLOW_CONN_SWITCHYARD_TARGET": pg_uri, "SWITCHYARD_DATA_ROOT": str(place / "central"),
        "SWITCHYARD_SCHEMA": schema, "SWITCHYARD_RUNS_DIR": str(place / "runs"), "SWITCHYARD_SPEC": spec_path,
        "SWITCHYARD_SCHEDULE": "none"})
    started = {k: v for k, v in roots.items() if k != "worker_a2"}
    try:
        api = scaleout.start_site(env, STREAMS, "tpch", POOL_SLOTS, started)
        yield {"env": env, "api": api, "place": place, "roots": roots, "schema": schema,
               "spec": load_spec(spec_path), "pg": pg}
    finally:
        local.stop_services(timeout=10)
        if request.session.testsfailed:  # the services' and workers' logs, before the home goes
            kept = TEST_STATE / "failed" / "test_scaleout"
            shutil.rmtree(kept, ignore_errors=True)
            shutil.copytree(home / "logs", kept)
            print(f"the site's logs: {kept}")
        scaleout.drop_metadata_database(pg)
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}_staging" CASCADE')
        shutil.rmtree(place, ignore_errors=True)
        mp.undo()


def lay_out(site, batch: str, scale: float = 0.01) -> Path:
    """A generated batch, laid out over the sources; the producer's folder (for the reference)."""
    generated = site["place"] / "generated" / batch
    generate_tpch(generated, load_spec("tpch"), scale, STREAMS)
    roots = {"source_a": site["roots"]["worker_a"][1], "source_b": site["roots"]["worker_b"][1]}
    scaleout.distribute(generated, batch, site["spec"], site["place"] / "central", roots)
    # worker_a2 serves source_a too: its own root holds source_a's files.
    shutil.copytree(roots["source_a"] / batch, site["roots"]["worker_a2"][1] / batch, copy_function=os.link)
    return generated


def trigger(site, batch: str) -> str:
    run = site["api"].post(f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": {"batch": batch}})
    return run["dag_run_id"]


def wait_for_run(site, run_id: str, timeout: float = 300) -> str:
    from urllib.parse import quote
    deadline = time.monotonic() + timeout
    while True:
        state = site["api"].get(f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}")["state"]
        if state in ("success", "failed"):
            return state
        assert time.monotonic() < deadline, f"run {run_id} still {state} after {timeout:.0f}s"
        time.sleep(2)


def stream_of(task_id: str) -> int:
    return int(task_id.split(".")[0].rsplit("_", 1)[1])


def test_each_load_runs_on_its_sources_worker_within_the_pool(site, pg_uri):
    from urllib.parse import quote
    began = time.monotonic()
    generated = lay_out(site, "routed")
    run_id = trigger(site, "routed")
    assert wait_for_run(site, run_id) == "success"
    tis = scaleout.task_instances(site["api"], DAG_ID, run_id)

    loads = [t for t in tis if t["task_id"].endswith(".load")]
    assert len(loads) == 6 * STREAMS + 2 and all(t["state"] == "success" for t in loads)
    # The pool caps the loads across both workers together (each worker could run 2 at once)...
    assert scaleout.max_overlap((t["start_date"], t["end_date"]) for t in loads) <= POOL_SLOTS
    # ... and the cap was reached: loads did run side by side.
    assert scaleout.max_overlap((t["start_date"], t["end_date"]) for t in loads) == POOL_SLOTS
    for t in loads:
        queue = site["spec"].source_of(stream_of(t["task_id"]))
        # The stream's source queue, the Edge executor, the worker of that queue (the Edge
        # worker's name is the hostname its task instances report).
        assert (t["queue"], t["executor"], t["hostname"], t["pool"]) == (
            queue, "EdgeExecutor", scaleout.worker_name(queue), "switchyard_loads"), t["task_id"]
        # The load's own report agrees, and it took one of the target's COPY slots (the guard is
        # on the server: advisory locks, shared by every worker's loads).
        result = site["api"].get(f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/"
                                 f"{t['task_id']}/xcomEntries/return_value")["value"]
        assert result["host"] == t["hostname"] and result["queue"] == queue
        assert result["copy_slot"] in range(os.cpu_count() or 1), result
    # Each source's files compared on its worker with what the loads read, before the publish.
    as_loaded = {t["task_id"]: t for t in tis if t["task_id"].endswith("_as_loaded")}
    assert sorted(as_loaded) == [f"files_on_{q}_as_loaded" for q in sorted(SOURCES)]
    for q in SOURCES:
        t = as_loaded[f"files_on_{q}_as_loaded"]
        assert (t["state"], t["queue"], t["executor"], t["hostname"]) == (
            "success", q, "EdgeExecutor", scaleout.worker_name(q)), t
    workers = {scaleout.worker_name(q) for q in SOURCES}
    others = [t for t in tis if t["task_id"].rsplit(".", 1)[-1] in ("prepare", "validate", "switch", "plan")]
    assert others and all(t["hostname"] not in workers and t["executor"] in (None, "LocalExecutor")
                          and t["queue"] == "default" for t in others)


    assert fingerprint(pg_uri, site["schema"]) == batch_fingerprint(pg_uri, generated)
    print(f"routed run checked in {time.monotonic() - began:.0f} s")


def _frozen_feed(fifo: Path, source: Path, stop_after: int, done: threading.Event) -> None:
    """The first `stop_after` bytes of `source` through a named pipe, then nothing: a load that
    reads it stays in its COPY until its process dies."""
    data = source.read_bytes()
    try:
        with open(fifo, "wb") as out:
            out.write(data[:stop_after])
            out.flush()
            done.wait(300)
    except BrokenPipeError:
        pass


def test_a_dead_worker_loses_nothing(site, pg_uri):
    """SIGKILL worker_a (its whole process group: worker, supervisors, task processes) while it
    is inside lineitem_1's COPY: the task is retried on worker_a2, the other worker of source_a,
    and the target ends exactly equal to the batch."""
    began = time.monotonic()
    generated = lay_out(site, "fault")
    with psycopg.connect(pg_uri, autocommit=True) as conn:  # the fault run builds the target afresh
        conn.execute(f'DROP SCHEMA IF EXISTS "{site["schema"]}" CASCADE')
        conn.execute(f'DROP SCHEMA IF EXISTS "{site["schema"]}_staging" CASCADE')
    # On worker_a, lineitem stream 1 is a pipe that stops half-way: its load hangs in the COPY.
    frozen = site["roots"]["worker_a"][1] / "fault" / "lineitem" / "lineitem.1.tbl"
    frozen.unlink()
    os.mkfifo(frozen)
    done = threading.Event()
    source = generated / "lineitem" / "lineitem.1.tbl"
    feeder = threading.Thread(target=_frozen_feed, args=(frozen, source, source.stat().st_size // 2, done),
                              daemon=True)
    feeder.start()
    run_id = trigger(site, "fault")
    api = site["api"]
    try:
        deadline = time.monotonic() + 180
        while True:  # lineitem_1's load on worker_a, in its COPY on the server
            with psycopg.connect(pg_uri, autocommit=True) as conn:
                copying = conn.execute(
                    "SELECT count(*) FROM pg_stat_progress_copy p JOIN pg_class c ON c.oid = p.relid "
                    "WHERE c.relname = 'lineitem_1' AND p.tuples_processed > 0").fetchone()[0]
            ti = next(t for t in scaleout.task_instances(api, DAG_ID, run_id) if t["task_id"] == "lineitem_1.load")
            if copying and ti["state"] == "running" and ti["hostname"] == "worker_a":
                break
            assert time.monotonic() < deadline, f"lineitem_1.load never got into its COPY on worker_a: {ti}"
            time.sleep(0.5)
        scaleout.kill_worker("worker_a")
        killed_at = time.monotonic()
        queue, root = site["roots"]["worker_a2"]
        scaleout.start_worker(site["env"], "worker_a2", [queue], root)
        state = wait_for_run(site, run_id)
    finally:
        done.set()
    assert state == "success"
    tries = scaleout.try_history(api, DAG_ID, run_id, "lineitem_1.load")
    assert [t["hostname"] for t in tries][:1] == ["worker_a"] and tries[0]["state"] in ("failed", "up_for_retry")
    assert tries[-1]["hostname"] == "worker_a2" and tries[-1]["state"] == "success" and len(tries) >= 2
    assert all(t["queue"] == "source_a" for t in tries)
    loads = [t for t in scaleout.task_instances(api, DAG_ID, run_id) if t["task_id"].endswith(".load")]
    for t in loads:
        queue = site["spec"].source_of(stream_of(t["task_id"]))
        assert t["state"] == "success" and t["queue"] == queue, t["task_id"]
        assert t["hostname"] in ({"worker_a", "worker_a2"} if queue == "source_a" else {"worker_b"}), t["task_id"]
    assert fingerprint(pg_uri, site["schema"]) == batch_fingerprint(pg_uri, generated)
    print(f"fault run: retried on worker_a2 {time.monotonic() - killed_at:.0f} s after the kill; "
          f"test {time.monotonic() - began:.0f} s")


def test_a_worker_started_by_hand_joins_the_site_and_stops_with_it(site):
    """deployment.md's `airflow edge worker --queues ...` through `switchyard airflow`, beside the
    local site: it runs with the site's executors and Edge API (it registers with the api-server,
    idle on its queue), and `switchyard services stop` stops it with the site's own workers.
    Last in the module: it stops every worker of the site."""
    command = [str(Path(sys.executable).with_name("switchyard")), "airflow", "edge", "worker",
               "--queues", "source_hand", "--edge-hostname", "hand_w"]
    proc = subprocess.Popen(command, env=dict(os.environ, SWITCHYARD_DATA_ROOT=str(site["place"] / "hand")),
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            workers = {w["worker_name"]: w for w in site["api"].get("/edge_worker/ui/worker")["workers"]}
            if workers.get("hand_w", {}).get("state") == "idle":
                break
            assert proc.poll() is None, f"the worker ended: {proc.stdout.read()}"
            assert time.monotonic() < deadline, f"the worker never registered: {workers.get('hand_w')}"
            time.sleep(1)
        assert workers["hand_w"]["queues"] == ["source_hand"]
        assert local.hand_worker() == proc.pid     # the airflow process itself
        assert f"running (pid {proc.pid}, started by hand)" in "\n".join(local.status_lines())
        stopped = local.stop_workers(timeout=30)
        assert f"worker (pid {proc.pid}, started by hand)" in stopped
        assert proc.wait(timeout=10) is not None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
