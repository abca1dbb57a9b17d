"""One DAG run end to end through the benchmark's own Airflow (the scheduler, LocalExecutor, the
pool), and what is read from it: each task's record from the Airflow API (its overhead is its
wall time minus the work it reports), the figures per step, each load's fixed cost part by
part, the schedule's efficiency."""
from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from switchyard_dev.bench.common import _median, _r, reset_schema
from switchyard_dev.bench.own_airflow import (
    DAG_SCHEMA,
    OBSERVE_EVERY,
    POLL_EVERY,
    AirflowCpu,
    _quoted,
    _ts,
    airflow_settings,
    ensure_airflow,
)

STEPS = ("prepare", "load", "validate", "switch")


def run_dag(uri: str, pg, batch: str, streams: int, slots: int, preload: bool = True,
            flat_priorities: bool = False, timeout: float = 7200, options: dict | None = None,
            pool: int | None = None, before_run: Callable[[], Any] | None = None) -> dict:
    """One DAG run: the target's COPY slots (the connection's `copy_slots`) are `slots`, the
    load pool `pool` (default: what `switchyard pool sync` sets for `slots`). `before_run` is
    called once the benchmark's Airflow runs, just before the run is triggered."""
    from switchyard.airflow.dag_factory import DagConfig, build_dag

    from switchyard_dev import demo
    pool = pool or demo.default_pool_size(slots)
    extra = {"copy_slots": slots, **(options or {}).get("connection_extra", {})}
    if (options or {}).get("connection_env"):
        # The connection in the services' environment too, which every task process inherits.
        options = dict(options, airflow={**options.get("airflow", {}), **demo.connection_environment(pg, extra)})
    api, startup = ensure_airflow(streams, preload, flat_priorities, options, uri)
    demo.ensure_connection(api, pg, extra)
    demo.ensure_pool(api, pool)
    run_settings = airflow_settings(streams, preload, flat_priorities, options)
    if run_settings.get("SWITCHYARD_PREPARE_POOL"):
        demo.ensure_pool(api, pool, run_settings["SWITCHYARD_PREPARE_POOL"], "Prepare tasks")
    # The DAG as the run's spec renders it (a lever may give a variant of the spec).
    spec = run_settings.get("SWITCHYARD_SPEC", DagConfig().spec)
    expected = len(build_dag(DagConfig(streams=streams, spec=spec)).tasks)
    demo.wait_for_dag(api, expected)
    weights = wait_for_weights(api, flat_priorities)
    # A fresh schema each time: every run is the same first load, no partitions to replace.
    reset_schema(uri, DAG_SCHEMA, f"{DAG_SCHEMA}_staging", create=False)
    api.patch(f"/api/v2/dags/{demo.DAG_ID}", {"is_paused": False})
    if before_run is not None:
        before_run()
    from switchyard_dev.bench.autovacuum import measuring
    from switchyard_dev.bench import api_calls
    from switchyard_dev.bench.sessions import counting
    with measuring(uri) as autovacuum, counting(uri) as server_sessions, api_calls.counting() as requests:
        cpu_meter = AirflowCpu()
        run = api.post(f"/api/v2/dags/{demo.DAG_ID}/dagRuns",
                       {"logical_date": None, "conf": {"batch": batch}, "note": "switchyard bench"})
        run_id = run["dag_run_id"]
        # The run's wall time comes from its own start and end dates, not from this polling, so
        # the benchmark asks rarely: the run state every 5 s, the task list (the api-server's
        # most expensive answer) every 30 s. Both take CPU from the run it measures.
        state = demo.follow(api, run_id, timeout, progress_every=OBSERVE_EVERY, poll_every=POLL_EVERY)
        cpu = cpu_meter.taken()
    run = api.get(f"/api/v2/dags/{demo.DAG_ID}/dagRuns/{_quoted(run_id)}")
    tis = api.get_all(f"/api/v2/dags/{demo.DAG_ID}/dagRuns/{_quoted(run_id)}/taskInstances", "task_instances")
    tasks = []
    for ti in tis:
        step = ti["task_id"].rsplit(".", 1)[-1]
        value = None
        if (step in STEPS or step == GROUP_STEPS) and ti.get("state") == "success":
            value = api.get(f"/api/v2/dags/{demo.DAG_ID}/dagRuns/{_quoted(run_id)}/taskInstances/"
                            f"{ti['task_id']}/xcomEntries/return_value").get("value")
        tasks.append(task_record(ti, step, value))
        if step == GROUP_STEPS and value:
            tasks.extend(group_step_records(ti, value))
    from switchyard.observability.stats import stats_path
    stats_file = stats_path(demo.DAG_ID, run_id)
    stats = json.loads(stats_file.read_text()) if stats_file.exists() else None
    reset_schema(uri, DAG_SCHEMA, f"{DAG_SCHEMA}_staging", create=False)
    return analyse_dag(run, state, tasks, slots, stats, preload=preload, flat_priorities=flat_priorities,
                       services_start_seconds=round(startup, 2), priority_weights=weights, cpu_seconds=cpu,
                       pool=pool, copy_slots=slots, autovacuum=autovacuum.result,
                       server_sessions=server_sessions.result, api_requests=requests.result)


# A group run as one task (the spec's `tasks: single`): its task id ends in this.
GROUP_STEPS = "steps"


def group_step_records(ti: dict, value: dict) -> list[dict]:
    """A one-task group's steps as records of their own, each spanning its step alone (their
    `in_task` names the task): the loads' rows, bytes and COPY spans and the validations'
    costs count with the other groups'. The task's start and end stay on the task's record."""
    group = ti["task_id"].rsplit(".", 1)[0]
    out = []
    for step in STEPS:
        result = value.get(step)
        if not result:
            continue
        sub = dict(ti, task_id=f"{group}.{step}", start_date=result.get("step_started"),
                   end_date=result.get("step_ended"))
        out.append(dict(task_record(sub, step, result), in_task=ti["task_id"]))
    return out


def wait_for_weights(api, flat: bool, timeout: float = 120) -> dict:
    """The parsed DAG's load weights, once they match the wanted setting (the dag-processor re-parses)."""
    from switchyard_dev import demo
    deadline = time.monotonic() + timeout
    while True:
        tasks = api.get(f"/api/v2/dags/{demo.DAG_ID}/tasks")["tasks"]
        weights = {t["task_id"]: t.get("priority_weight") for t in tasks if t["task_id"].endswith(".load")}
        flat_now = len(set(weights.values())) == 1
        if flat_now == flat or time.monotonic() > deadline:
            return {"flat": flat_now, "distinct": sorted(set(w for w in weights.values() if w is not None))}
        time.sleep(2)


def task_record(ti: dict, step: str, value: dict | None) -> dict:
    start, end = _ts(ti.get("start_date")), _ts(ti.get("end_date"))
    wall = end - start if start and end else None
    work = gx_import = preloaded = None
    if step in STEPS and value:
        work = value.get("seconds")
    if step == GROUP_STEPS and value:
        # A one-task group's work is its steps' (GX's import is overhead, as in a validate task).
        work = round(sum((value.get(s) or {}).get("seconds") or 0.0 for s in STEPS)
                     - ((value.get("validate") or {}).get("import_seconds") or 0.0), 4)
    if step == "validate" and value:
        # Importing GX is the price of a task process, not validation work: counted as overhead.
        gx_import = value.get("import_seconds")
        if work is not None and gx_import is not None:
            work = round(work - gx_import, 4)
        preloaded = value.get("gx_preloaded")
    return {"task_id": ti["task_id"], "step": step, "state": ti.get("state"), "try_number": ti.get("try_number"),
            "priority_weight": ti.get("priority_weight"), "pool": ti.get("pool"),
            "queued": _ts(ti.get("queued_when")), "start": start, "end": end,
            "wall_seconds": round(wall, 4) if wall is not None else None,
            "work_seconds": work, "gx_import_seconds": gx_import, "gx_preloaded": preloaded,
            "overhead_seconds": round(wall - work, 4) if wall is not None and work is not None else None,
            "rows": (value or {}).get("rows") if step == "load" else None,
            "bytes": (value or {}).get("bytes") if step == "load" else None,
            # The COPY itself, where the load reports when it held its slot; else the load call.
            "work_start": ((value or {}).get("copy_began_at") or _ts((value or {}).get("started")))
            if step == "load" else None,
            "work_end": ((value or {}).get("copy_ended_at") or _ts((value or {}).get("ended")))
            if step == "load" else None,
            "step_started": _ts((value or {}).get("step_started")),
            "step_ended": _ts((value or {}).get("step_ended")),
            "parts": load_parts(value) if step == "load" and value else None,
            # Seconds per kind of check (row_count, key_range, not_null, unique, declared).
            "validation_cost": (value or {}).get("cost") if step == "validate" else None,
            # The task process's CPU seconds before its step and in it (the operator's `cpu`).
            "cpu": (value or {}).get("cpu")}


# A load's fixed cost, part by part, in the order a load task pays them: (key, label).
LOAD_PARTS = (
    ("task_start", "task start (start_date to execute)"),
    ("plan_pull", "plan pull (XCom, API call)"),
    ("connection_lookup", "connection lookup (API call)"),
    ("progress_setup", "progress sampler setup"),
    ("connect", "connect (+ SET synchronous_commit)"),
    ("slot_wait", "wait for a COPY slot"),
    ("lease", "lease renewal"),
    ("copy", "COPY (the work)"),
    ("release", "slot release, close"),
    ("progress_close", "progress side connection close"),
    ("rest", "rest of execute (logging, result)"),
    ("task_end", "task end (result XCom, state, exit)"),
)


def load_parts(value: dict) -> dict:
    """The parts a load task's result reports (operators.LoadOperator, the adapter's details)."""
    parts = dict(value.get("parts") or {})
    for key, name in (("connect", "connect_seconds"), ("slot_wait", "copy_slot_wait_seconds"),
                      ("lease", "lease_seconds"), ("release", "release_seconds")):
        if value.get(name) is not None:
            parts[key] = value[name]
    parts["copy"] = value.get("seconds")
    return parts


def load_fixed_cost(tasks: list[dict]) -> dict:
    """Each load's wall time cut into its parts (LOAD_PARTS): the median over the run's loads
    and the sum, in seconds. The rest of execute is the load call's time its parts leave out."""
    rows: list[dict] = []
    for t in tasks:
        if t["step"] != "load" or t["state"] != "success" or not t.get("parts") or not t["start"]:
            continue
        p = t["parts"]
        r = {k: p.get(k) for k, _ in LOAD_PARTS if k in p}
        if t.get("step_started"):
            r["task_start"] = t["step_started"] - t["start"]
        if t.get("step_ended") and t["end"]:
            r["task_end"] = t["end"] - t["step_ended"]
        if t.get("step_started") and t.get("step_ended"):
            inside = t["step_ended"] - t["step_started"]
            known = sum(v for k, v in r.items() if v is not None and k not in ("task_start", "task_end"))
            r["rest"] = max(0.0, inside - known)
        r["wall"] = t["wall_seconds"]
        rows.append(r)
    if not rows:
        return {}
    out = {"loads": len(rows), "parts": {}}
    for key, label in (*LOAD_PARTS, ("wall", "load task wall")):
        values = [r[key] for r in rows if r.get(key) is not None]
        if values:
            out["parts"][key] = {"label": label, "median": _r(statistics.median(values), 4),
                                 "total": _r(sum(values), 3)}
    fixed = [r["wall"] - (r.get("copy") or 0) - (r.get("slot_wait") or 0) for r in rows if r.get("wall")]
    out["fixed_median"] = _r(statistics.median(fixed), 4) if fixed else None
    out["fixed_total"] = _r(sum(fixed), 3) if fixed else None
    return out


def schedule_efficiency(loads: list[dict], slots: int, makespan: float | None) -> dict:
    """max(total work / slots, longest task) over the actual makespan: 1.0 is a perfect schedule."""
    work = [t["work_seconds"] for t in loads if t["work_seconds"] is not None]
    if not work or not makespan:
        return {}
    bound = max(sum(work) / slots, max(work))
    return {"lower_bound_seconds": round(bound, 3), "makespan_seconds": round(makespan, 3),
            "efficiency": round(bound / makespan, 3), "total_work_seconds": round(sum(work), 3),
            "longest_task_seconds": round(max(work), 3)}


def analyse_dag(run: dict, state: str, tasks: list[dict], slots: int, stats: dict | None, **extra: Any) -> dict:
    run_start, run_end = _ts(run.get("start_date")), _ts(run.get("end_date"))
    wall = run_end - run_start if run_start and run_end else None
    # The loads, also those inside one-task groups; the tasks Airflow ran, without those records.
    loads = [t for t in tasks if t["step"] == "load" and t["state"] == "success"]
    tasks_only = [t for t in tasks if not t.get("in_task")]
    rows = sum(t["rows"] or 0 for t in loads)
    nbytes = sum(t["bytes"] or 0 for t in loads)
    load_span = None
    if loads:
        load_span = max(t["end"] for t in loads) - min(t["start"] for t in loads)
    # The gap from a task's upstream end to its own start: scheduler latency, queueing for
    # a slot and process start, which task wall time alone does not show.
    ends = {t["task_id"]: t["end"] for t in tasks_only}
    for t in tasks_only:
        if t["step"] in STEPS:
            group = t["task_id"].rsplit(".", 1)[0]
            i = STEPS.index(t["step"])
            up = ends.get(f"{group}.{STEPS[i - 1]}") if i else ends.get("setup.plan")
            t["start_gap_seconds"] = _r(t["start"] - up) if t["start"] and up else None
    per_step = {}
    for step in ("wait_for_batch", "plan", *STEPS, GROUP_STEPS, "stats"):
        ts = [t for t in tasks_only if t["step"] == step and t["wall_seconds"] is not None
              and t["state"] in ("success", "failed")]
        if not ts:
            continue
        per_step[step] = {
            "tasks": len(ts),
            "wall_median": _r(_median([t["wall_seconds"] for t in ts])),
            "work_median": _r(_median([t["work_seconds"] for t in ts])),
            "overhead_median": _r(_median([t["overhead_seconds"] if t["overhead_seconds"] is not None
                                           else t["wall_seconds"] for t in ts])),
            "queue_wait_median": _r(_median([t["start"] - t["queued"] for t in ts if t["queued"]])),
            "gx_import_median": _r(_median([t["gx_import_seconds"] for t in ts])),
            "start_gap_median": _r(_median([t.get("start_gap_seconds") for t in ts])),
            "gx_preloaded": (sum(1 for t in ts if t.get("gx_preloaded")) if step == "validate" else None),
            "work_reported": any(t["work_seconds"] is not None for t in ts),
            # The task process's CPU seconds before its step (fork, logging, plugins, the task
            # runner's API calls) and in the step (Switchyard's code and its client work).
            "cpu_start_median": _r(_median([(t.get("cpu") or {}).get("task_start") for t in ts])),
            "cpu_step_median": _r(_median([(t.get("cpu") or {}).get("step") for t in ts])),
            "cpu_start_sum": _r(sum((t.get("cpu") or {}).get("task_start") or 0.0 for t in ts)),
            "cpu_step_sum": _r(sum((t.get("cpu") or {}).get("step") or 0.0 for t in ts)),
        }
    pool_busy = sum(t["wall_seconds"] for t in loads) / (slots * load_span) if load_span else None
    # What the default validation costs, kind by kind, beside what the loads cost: summed over
    # the run's validate tasks, in wall seconds of each check's own work on the server.
    validation_cost: dict[str, float] = {}
    for t in tasks:
        for kind, seconds in (t.get("validation_cost") or {}).items():
            validation_cost[kind] = round(validation_cost.get(kind, 0.0) + (seconds or 0.0), 3)
    load_work = sum(t["work_seconds"] or 0.0 for t in loads)
    # Tasks that ran: an upstream-failed or skipped task has no process and no overhead.
    group_tasks = [t for t in tasks_only if t["step"] in (*STEPS, GROUP_STEPS) and t["wall_seconds"] is not None
                   and t["state"] in ("success", "failed")]
    overheads = [t["overhead_seconds"] if t["overhead_seconds"] is not None else t["wall_seconds"]
                 for t in group_tasks]
    # What the run spends outside its groups: from its start to the first COPY (the batch's wait,
    # the plan, the first prepares and load starts) and from the last group task's end to the
    # run's end (the batch's publish, the Asset events, the stats).
    copies = [t["work_start"] for t in loads if t.get("work_start")]
    head = min(copies) - run_start if copies and run_start else None
    group_ends = [t["end"] for t in group_tasks if t["end"]]
    tail = run_end - max(group_ends) if group_ends and run_end else None
    return {"name": "DAG end to end", "state": state, "run_id": run.get("dag_run_id"), "rows": rows,
            "bytes": nbytes, "wall_seconds": _r(wall), "rows_per_s": _r(rows / wall if wall else None, 1),
            "mb_per_s": _r(nbytes / 1e6 / wall if wall else None, 2), "started": run_start, "ended": run_end,
            "load_window_seconds": _r(load_span), "head_seconds": _r(head), "tail_seconds": _r(tail),
            "load_window_rows_per_s": _r(rows / load_span if load_span else None, 1),
            "per_step": per_step, "pool_busy_fraction": _r(pool_busy),
            "validation_cost_seconds": validation_cost, "load_work_seconds": _r(load_work),
            "task_overhead_median": _r(_median(overheads)), "group_tasks": len(group_tasks),
            "lineitem": table_window(tasks, "lineitem"),
            "load_fixed_cost": load_fixed_cost(tasks_only),
            "tasks_run": len([t for t in tasks_only if t["wall_seconds"] is not None
                              and t["state"] in ("success", "failed")]),
            "efficiency_run": schedule_efficiency(loads, slots, wall),
            "efficiency_loads": schedule_efficiency(loads, slots, load_span),
            "stats_makespan_seconds": (stats or {}).get("makespan_seconds"),
            # The batch's publish: how long it held every table's lock (what readers could wait).
            "publish_batch": (stats or {}).get("publish_batch"),
            "failed_groups": (stats or {}).get("failed_groups"), "tasks": tasks, **extra}


def table_window(tasks: list[dict], table: str) -> dict:
    """One table end to end: its rows over the time from its first task's start to its last
    switch's end (other tables' tasks may run meanwhile: the biggest table starts first)."""
    mine = [t for t in tasks if t["task_id"].split(".")[0].rsplit("_", 1)[0] == table
            and t["step"] in STEPS and t["start"] and t["end"]]
    rows = sum(t["rows"] or 0 for t in mine if t["step"] == "load")
    if not mine or not rows:
        return {}
    span = max(t["end"] for t in mine) - min(t["start"] for t in mine)
    return {"rows": rows, "seconds": _r(span), "rows_per_s": _r(rows / span, 1)}
