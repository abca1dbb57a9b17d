"""`make bench` part `remote`: the DAG end to end with its loads on two Edge workers, beside the
same DAG on LocalExecutor alone, with Airflow's CPU per service.

Both runs load the benchmark's batch into a fresh schema through a real scheduler, with the
metadata in the embedded PostgreSQL (the Edge executor needs it; LocalExecutor gets the same,
so the comparison is of the executors, not of the metadata databases):

- local: the benchmark's own Airflow (`dag_run.run_dag`, metadata lever `postgres`);
- edge: `[core] executor = LocalExecutor,EdgeExecutor`, the loads routed by the spec's
  `sources` to worker_a (queue source_a) and worker_b (source_b), each reading its own data
  root that holds only its streams' files (hard links of the batch); prepare, validate and
  switch on LocalExecutor. Same pool size, same port, its own Airflow home.

On one machine the workers add processes, not cores: what this shows is the price of the
remote path (job polling, log upload, a task process per load started by the worker) and how
the CPU moves between services, not a speed-up. `python -m switchyard_dev.bench --parts remote`.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from switchyard_dev.bench.common import postmaster_pid, reset_schema, say
from switchyard_dev.bench.dag_run import STEPS, analyse_dag, run_dag, task_record
from switchyard_dev.bench.own_airflow import (
    DAG_SCHEMA,
    OBSERVE_EVERY,
    POLL_EVERY,
    _quoted,
    bench_airflow_home,
    stop_bench_airflows,
    use_bench_airflow,
)

SIDES = ("local", "edge")


def _edge_home() -> Path:
    return bench_airflow_home().parent / "airflow-edge"


def run_edge(uri: str, pg, batch: str, folder: Path, streams: int, slots: int, timeout: float = 7200) -> dict:
    """One run of the DAG with its loads on two local Edge workers; analyse_dag's figures."""
    from switchyard.airflow.dag_factory import DagConfig, build_dag
    from switchyard.core.spec import load_spec
    from switchyard.observability.stats import stats_path

    from switchyard_dev import cputime, demo, local, scaleout
    from switchyard_dev.settings import value
    place = bench_airflow_home().parent / "scaleout"
    sources = scaleout.split_streams(streams)
    spec_path = scaleout.spec_with_sources("tpch", sources, place)
    roots = {source: place / source for source in sources}
    scaleout.distribute(folder, batch, load_spec(spec_path), place / "central", roots)
    os.environ["SWITCHYARD_AIRFLOW_HOME"] = str(_edge_home())
    os.environ["SWITCHYARD_AIRFLOW_PORT"] = str(value("SWITCHYARD_BENCH_AIRFLOW_PORT"))
    started = time.monotonic()
    env = scaleout.site_env(pg, streams, extra={
        "SWITCHYARD_SCHEMA": DAG_SCHEMA, "SWITCHYARD_SCHEDULE": "none", "SWITCHYARD_SPEC": spec_path,
        "SWITCHYARD_DATA_ROOT": str(place / "central"), "SWITCHYARD_RUNS_DIR": os.environ["SWITCHYARD_RUNS_DIR"]})
    workers = {scaleout.worker_name(s): (s, roots[s]) for s in sources}
    try:
        # The pool LocalExecutor's run gets too (run_dag): what `switchyard pool sync` sets
        # for `slots` COPY slots; the target's slot guard keeps one COPY per slot.
        pool = demo.default_pool_size(slots)
        api = scaleout.start_site(env, streams, "tpch", pool, workers, concurrency=pool)
        startup = time.monotonic() - started
        demo.ensure_connection(api, pg, {"copy_slots": slots})
        demo.ensure_pool(api, pool)
        demo.wait_for_dag(api, len(build_dag(DagConfig(streams=streams, spec=spec_path)).tasks))
        reset_schema(uri, DAG_SCHEMA, f"{DAG_SCHEMA}_staging", create=False)
        roots_cpu = {"postgres": postmaster_pid(), **{s: local.service_pid(s) for s in local.SERVICES},
                     **{name: scaleout.worker_pid(name) for name in workers}}
        before = cputime.snapshot(roots_cpu, split_children=("scheduler",))
        run_id = api.post(f"/api/v2/dags/{demo.DAG_ID}/dagRuns",
                          {"logical_date": None, "conf": {"batch": batch}, "note": "switchyard bench (edge)"})["dag_run_id"]
        state = demo.follow(api, run_id, timeout, progress_every=OBSERVE_EVERY, poll_every=POLL_EVERY)
        cpu = cputime.delta(before, cputime.snapshot(roots_cpu, split_children=("scheduler",)))
        cpu["task processes"] = cpu.pop("scheduler children", None)
        run = api.get(f"/api/v2/dags/{demo.DAG_ID}/dagRuns/{_quoted(run_id)}")
        tasks, hosts = [], {}
        for ti in scaleout.task_instances(api, demo.DAG_ID, run_id):
            step = ti["task_id"].rsplit(".", 1)[-1]
            value_ = None
            if step in STEPS and ti.get("state") == "success":
                value_ = api.get(f"/api/v2/dags/{demo.DAG_ID}/dagRuns/{_quoted(run_id)}/taskInstances/"
                                 f"{ti['task_id']}/xcomEntries/return_value").get("value")
            if step == "load":
                hosts[ti["hostname"]] = hosts.get(ti["hostname"], 0) + 1
            tasks.append(task_record(ti, step, value_))
        stats_file = stats_path(demo.DAG_ID, run_id)
        import json
        stats = json.loads(stats_file.read_text()) if stats_file.exists() else None
        reset_schema(uri, DAG_SCHEMA, f"{DAG_SCHEMA}_staging", create=False)
        return analyse_dag(run, state, tasks, slots, stats, executor="edge", loads_by_host=hosts,
                                 services_start_seconds=round(startup, 2), cpu_seconds=cpu, pool=pool,
                                 copy_slots=slots)
    finally:
        local.stop_services()
        scaleout.drop_metadata_database(pg)
        use_bench_airflow()


def demo_pool(slots: int) -> int:
    from switchyard_dev import demo
    return demo.default_pool_size(slots)


def run_remote(uri: str, pg, batch: str, folder: Path, streams: int, slots: int) -> dict:
    """LocalExecutor alone, then the loads on Edge workers: the two results and their table."""
    say(f"remote workers: the DAG on LocalExecutor alone, then its loads on two Edge workers "
        f"(metadata in PostgreSQL for both, {slots} COPY slots, pool of {demo_pool(slots)})")
    out: dict[str, Any] = {}
    out["local"] = run_dag(uri, pg, batch, streams, slots, options={"metadata": "postgres"})
    stop_bench_airflows()  # the Edge site takes the same port
    out["edge"] = run_edge(uri, pg, batch, folder, streams, slots)
    for line in remote_lines(out):
        print(line, flush=True)
    return out


SERVICES = ("scheduler", "task processes", "api-server", "dag-processor", "triggerer", "worker_a", "worker_b")


def remote_lines(result: dict) -> list[str]:
    """The two runs side by side: wall time, load window, throughput, CPU seconds per service."""
    lines = ["", "remote workers vs LocalExecutor alone (one run each; CPU seconds per service while the run ran)",
             f"  {'executor':<10} {'state':<8} {'run s':>7} {'loads s':>8} {'rows/s':>10} {'pool busy':>9} "
             + " ".join(f"{s:>14}" for s in (*SERVICES, "postgres")) + f" {'Airflow':>8}"]
    for side in SIDES:
        r = result.get(side)
        if not r:
            continue
        cpu = r.get("cpu_seconds") or {}
        airflow = sum(cpu.get(s) or 0 for s in SERVICES)
        lines.append(
            f"  {side:<10} {r['state']:<8} {r['wall_seconds'] or 0:>7.1f} {r['load_window_seconds'] or 0:>8.1f} "
            f"{r['rows_per_s'] or 0:>10,.0f} {r['pool_busy_fraction'] or 0:>9.2f} "
            + " ".join(f"{cpu[s]:>14.1f}" if cpu.get(s) is not None else f"{'-':>14}" for s in (*SERVICES, "postgres"))
            + f" {airflow:>8.1f}")
    edge = result.get("edge") or {}
    if edge.get("loads_by_host"):
        lines.append("  edge loads by worker (task instances' hostname): "
                     + ", ".join(f"{h} {n}" for h, n in sorted(edge["loads_by_host"].items())))
    for side in SIDES:
        step = ((result.get(side) or {}).get("per_step") or {}).get("load") or {}
        if step:
            lines.append(f"  {side:<10} load task: wall median {step['wall_median']} s, work median "
                         f"{step['work_median']} s, queued->start median {step['queue_wait_median']} s, "
                         f"gap after prepare median {step['start_gap_median']} s")
    return lines
