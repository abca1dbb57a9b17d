"""What the DAG's task graph alone costs Airflow: the same graph with steps that do nothing.

On a small machine Airflow and the target server share the cores, so every CPU second
Airflow spends on orchestration is taken from the loads. This part of the benchmark renders
Switchyard's graph (the same groups, dependencies, pool and priority weights:
`dag_factory.build_dag`) with operators that do nothing, runs it through the benchmark's
Airflow (scheduler, LocalExecutor, the preload), and measures its wall time and the CPU
each Airflow service spent, and Airflow's CPU rate r while idle. Added to the floor's CPU it
bounds, from below, the makespan of any DAG of this shape on these cores, whatever its
steps do (see `bound`):

    makespan >= (floor's CPU + the empty graph's per-task part) / (cores - r)

A real step costs Airflow at least what an empty one does (it also reads its XComs and its
connection), and a real run loads at least the floor's rows with the same COPY; so the
bound is optimistic, and a target above it cannot be reached by changing the steps' code.

Two ways to run an empty step are measured side by side:
- "worker": a task process forked by LocalExecutor's worker, as Switchyard's steps run;
- "triggerer": the step starts and ends in the triggerer (`start_from_trigger` with a
  trigger that ends the task at once): no task process, no Execution API calls of its own.
"""
from __future__ import annotations

import inspect
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseTrigger, StartTriggerArgs, TaskSuccessEvent

MODES = ("worker", "triggerer")
DAG_FILE = "switchyard_graph.py"
# The scheduler's preload builds the empty graphs once, like the real DAG (airflow/preload.py).
PRELOAD_CALLS = {"SWITCHYARD_PRELOAD_CALLS": "switchyard_dev.bench.graph:graph_dags"}

_BASE_ARGS = frozenset(inspect.signature(BaseOperator.__init__).parameters) - {"self", "kwargs"}


def dag_id(mode: str) -> str:
    return f"switchyard_graph_{mode}"


class EmptyStep(BaseOperator):
    """A step that does nothing, in a task process of its own (Switchyard's step arguments are
    accepted and dropped). Not Airflow's EmptyOperator: the scheduler marks that one done
    without running anything, which would measure no task at all."""

    def __init__(self, **kwargs: Any):
        super().__init__(**{k: v for k, v in kwargs.items() if k in _BASE_ARGS})

    def execute(self, context: Any) -> None:
        return None

    def execute_complete(self, context: Any, event: Any = None) -> None:
        return None


class StepDoneTrigger(BaseTrigger):
    """Ends its task as soon as it runs."""

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("switchyard_dev.bench.graph.StepDoneTrigger", {})

    async def run(self) -> AsyncIterator[TaskSuccessEvent]:
        yield TaskSuccessEvent()


class EmptyTriggerStep(EmptyStep):
    """A step that starts and ends in the triggerer: no task process runs it."""

    start_from_trigger = True
    start_trigger_args = StartTriggerArgs(trigger_cls="switchyard_dev.bench.graph.StepDoneTrigger",
                                          next_method="execute_complete", trigger_kwargs={}, next_kwargs=None,
                                          timeout=None)


_BUILT: dict[Any, dict] = {}


def graph_dags() -> dict[str, Any]:
    """{dag id: DAG} of the empty graphs for the configured DAG, built once per process (the
    scheduler's preload builds them before it forks, as it does the real DAG)."""
    from dataclasses import fields

    from switchyard.airflow.dag_factory import DagConfig, StepOperators, build_dag
    key = DagConfig.from_env(schedule=None)
    if key not in _BUILT:
        built = {}
        for mode, step in (("worker", EmptyStep), ("triggerer", EmptyTriggerStep)):
            operators = StepOperators(**{f.name: step for f in fields(StepOperators)})
            dag = build_dag(DagConfig.from_env(schedule=None, dag_id=dag_id(mode)), operators)
            built[dag.dag_id] = dag
        _BUILT[key] = built
    return _BUILT[key]


# Airflow's safe-mode discovery reads a file only if it mentions both "airflow" and "dag".
_DAG_FILE_TEXT = '''"""Airflow DAGs of the benchmark (switchyard_dev/bench/graph.py): Switchyard's graph, steps doing nothing."""
from switchyard.airflow.preload import forget_changed_code

forget_changed_code()

from switchyard_dev.bench.graph import graph_dags  # noqa: E402

globals().update(graph_dags())
'''


def dag_folder() -> Path:
    """The benchmark's Airflow reads the empty graphs from a folder of their own: they never
    reach the DAG folder users deploy."""
    from switchyard_dev.bench.own_airflow import bench_airflow_home
    folder = bench_airflow_home().parent / "graph-dags"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / DAG_FILE
    if not path.exists() or path.read_text() != _DAG_FILE_TEXT:
        path.write_text(_DAG_FILE_TEXT)
    return folder


def graph_airflow(uri: str, pg, streams: int, slots: int):
    """The benchmark's Airflow reading the empty graphs, both parsed: (api, services start seconds)."""
    from switchyard.airflow.dag_factory import DagConfig, build_dag

    from switchyard_dev import demo
    from switchyard_dev.bench.own_airflow import ensure_airflow
    options = {"airflow": {"AIRFLOW__CORE__DAGS_FOLDER": str(dag_folder()), **PRELOAD_CALLS}}
    api, startup = ensure_airflow(streams, True, False, options, uri)
    demo.ensure_connection(api, pg, {"copy_slots": slots})
    demo.ensure_pool(api, demo.default_pool_size(slots))
    expected = len(build_dag(DagConfig(streams=streams)).tasks)
    for mode in MODES:
        demo.wait_for_dag(api, expected, dag_id=dag_id(mode))
    return api, startup


def idle_rate(seconds: float = 20.0) -> dict:
    """Airflow's CPU while it runs nothing (DAGs paused): what every second of a run costs at least."""
    from switchyard_dev.bench.own_airflow import AirflowCpu, airflow_cpu_total
    meter = AirflowCpu()
    time.sleep(seconds)
    cpu = meter.taken()
    return {"seconds": seconds, "cpu_seconds": cpu,
            "airflow_cpu_per_second": round(airflow_cpu_total(cpu) / seconds, 4)}


def run_graph(api, mode: str, timeout: float = 1800) -> dict:
    """One run of the empty graph in `mode`: its wall time, task count and Airflow CPU by service."""
    from switchyard_dev import demo
    from switchyard_dev.bench.own_airflow import (
        OBSERVE_EVERY,
        POLL_EVERY,
        AirflowCpu,
        _quoted,
        _ts,
        airflow_cpu_total,
    )
    if mode not in MODES:
        raise ValueError(f"graph mode {mode!r}: one of {', '.join(MODES)}")
    name = dag_id(mode)
    api.patch(f"/api/v2/dags/{name}", {"is_paused": False})
    from switchyard_dev.bench import api_calls
    meter = AirflowCpu()
    with api_calls.counting() as requests:
        run = api.post(f"/api/v2/dags/{name}/dagRuns", {"logical_date": None, "conf": {}, "note": "switchyard bench"})
        state = demo.follow(api, run["dag_run_id"], timeout, progress_every=OBSERVE_EVERY, dag_id=name,
                            poll_every=POLL_EVERY)
        cpu = meter.taken()
    api.patch(f"/api/v2/dags/{name}", {"is_paused": True})
    run = api.get(f"/api/v2/dags/{name}/dagRuns/{_quoted(run['dag_run_id'])}")
    tis = api.get_all(f"/api/v2/dags/{name}/dagRuns/{_quoted(run['dag_run_id'])}/taskInstances",
                      "task_instances")
    start, end = _ts(run.get("start_date")), _ts(run.get("end_date"))
    airflow = round(airflow_cpu_total(cpu), 2)
    return {"mode": mode, "dag_id": name, "state": state, "tasks": len(tis),
            "tasks_success": sum(1 for t in tis if t.get("state") == "success"),
            "wall_seconds": round(end - start, 3) if start and end else None,
            "cpu_seconds": cpu, "airflow_cpu_seconds": airflow, "api_requests": requests.result,
            "airflow_cpu_per_task": round(airflow / len(tis), 4) if tis else None}



def bound(floor: dict, graph: dict, idle: dict | None, cores: int, work_of: dict | None = None) -> dict:
    """The makespan bound of a DAG of this shape, and the best floor / makespan it leaves.

    Airflow's CPU in a run is taken as a part per task (the empty graph's, less what its
    services spend idle over its wall time) plus the idle rate r for every second of the run:
    makespan * cores >= work + per-task part + r * makespan. The work is the floor's (server
    and clients), or that of `work_of`: the floor with the target's unique indexes, which ends
    where the DAG ends, so that no DAG with those indexes can do less; the ratio stays against
    the floor's wall time."""
    cpu = (work_of or floor).get("cpu_seconds") or {}
    work = (cpu.get("postgres") or 0) + (cpu.get("clients") or 0)
    rate = (idle or {}).get("airflow_cpu_per_second") or 0.0
    per_task = max(0.0, graph["airflow_cpu_seconds"] - rate * (graph["wall_seconds"] or 0))
    seconds = (work + per_task) / (cores - rate) if cores > rate else None
    return {"floor_work_cpu_seconds": round(work, 2), "graph_airflow_cpu_seconds": graph["airflow_cpu_seconds"],
            "graph_per_task_part_cpu_seconds": round(per_task, 2), "idle_airflow_cpu_per_second": rate,
            "cores": cores, "makespan_at_least_seconds": round(seconds, 2) if seconds else None,
            "floor_over_makespan_at_most": round(floor["wall_seconds"] / seconds, 3) if seconds else None}


def run_graphs(uri: str, pg, streams: int, slots: int, floor: dict | None, repeat: int = 1,
               idle_seconds: float = 20.0, end_state: dict | None = None) -> dict:
    """Airflow idle, then each mode `repeat` times in rotating order, and the bound each run leaves
    with the floor's work and, given `end_state` (the floor with the target's unique indexes),
    with that work."""
    api, startup = graph_airflow(uri, pg, streams, slots)
    idle = idle_rate(idle_seconds)
    print(f"    idle: Airflow {idle['airflow_cpu_per_second']} CPU s per second", flush=True)
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    for r in range(repeat):
        order = MODES[r % len(MODES):] + MODES[:r % len(MODES)]
        for mode in order:
            result = run_graph(api, mode)
            print(f"    {mode}: {result['tasks']} tasks in {result['wall_seconds']} s, Airflow "
                  f"{result['airflow_cpu_seconds']} CPU s ({result['airflow_cpu_per_task']} per task)", flush=True)
            runs[mode].append(result)
    cores = os.cpu_count() or 1
    out: dict[str, Any] = {"cores": cores, "services_start_seconds": round(startup, 2), "idle": idle, "runs": runs}
    if floor:
        out["bounds"] = {m: [bound(floor, r, idle, cores) for r in rs] for m, rs in runs.items()}
        if end_state:
            out["end_state_bounds"] = {m: [bound(floor, r, idle, cores, work_of=end_state) for r in rs]
                                       for m, rs in runs.items()}
    return out


def graph_lines(result: dict) -> list[str]:
    """The report's lines for the empty graphs."""
    from switchyard_dev.bench.own_airflow import AIRFLOW_SERVICES
    lines = ["Empty graph (the DAG's shape, steps that do nothing): what Airflow alone costs",
             f"  idle      Airflow {result['idle']['airflow_cpu_per_second']} CPU s per second with nothing to run"]
    for mode, rs in result["runs"].items():
        for i, r in enumerate(rs):
            b = (result.get("bounds") or {}).get(mode, [None] * len(rs))[i]
            cpu = r["cpu_seconds"]
            parts = ", ".join(f"{k} {cpu.get(k)}" for k in AIRFLOW_SERVICES if cpu.get(k) is not None)
            line = (f"  {mode:9s} {r['tasks']} tasks ({r['state']}), {r['wall_seconds']} s; Airflow "
                    f"{r['airflow_cpu_seconds']} CPU s ({parts}), {r['airflow_cpu_per_task']} per task")
            lines.append(line)
            if b:
                lines.append(f"  {'':9s} with the floor's {b['floor_work_cpu_seconds']} CPU s on {b['cores']} cores "
                             f"({b['graph_per_task_part_cpu_seconds']} CPU s for the tasks, "
                             f"{b['idle_airflow_cpu_per_second']} per second of run): makespan >= "
                             f"{b['makespan_at_least_seconds']} s, floor / makespan <= {b['floor_over_makespan_at_most']}")
            e = (result.get("end_state_bounds") or {}).get(mode, [None] * len(rs))[i]
            if e:
                lines.append(f"  {'':9s} with the work of the floor with the target's unique indexes (the DAG's end "
                             f"state), {e['floor_work_cpu_seconds']} CPU s: makespan >= "
                             f"{e['makespan_at_least_seconds']} s, floor / makespan <= {e['floor_over_makespan_at_most']}")
    return lines

