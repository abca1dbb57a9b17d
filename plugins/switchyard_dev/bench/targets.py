"""The project's targets against a run's figures, in each shape, and the bounds reported beside
them: what the same end state (the floor with the target's unique indexes) and the DAG run's own
CPU work allow at best."""
from __future__ import annotations

import statistics

from switchyard_dev.bench.common import _cpus, _r
from switchyard_dev.bench.floor import UNIQUE_FLOOR, unique_floor_cost
from switchyard_dev.bench.own_airflow import airflow_cpu_total

# Each shape's end-to-end target (set for scale 10, 8 streams): the DAG against the floor that
# reaches the same end state (the floor with the target's unique indexes), as that floor's wall
# time over the DAG run's (the DAG's rows/s over that floor's). The COPY-only floor's ratio is
# reported beside it, with no target of its own.
SHAPE_TARGETS = {"laptop": 0.8, "production": 0.95}
# Airflow's CPU per task run in the laptop DAG run over the empty graph's (worker variant), at most.
AIRFLOW_PER_TASK_TARGET = 1.3
# The server's CPU seconds in each shape's DAG run over those of its floor with the target's
# unique indexes, at most.
SERVER_CPU_TARGET = 1.05
# A small batch (the `small` part): its DAG run's wall time, a task per step, at most (seconds).
SMALL_BATCH_TARGET = 10.0


def _target(name: str, target: str, measured: float | None, ok: bool | None, how: str) -> dict:
    return {"name": name, "target": target, "measured": measured,
            "met": None if measured is None or ok is None else bool(ok), "how": how}


def targets(result: dict) -> list[dict]:
    """The feature's targets against this run's figures; met is None where not measured."""
    out = []
    floor, loader, dag = result.get("floor") or {}, result.get("loader") or {}, result.get("dag") or {}
    cores = (result.get("machine") or {}).get("cpus") or result["slots"]
    ratio = _r(loader["rows_per_s"] / floor["rows_per_s"]) if loader and floor else None
    out.append(_target("loader alone / floor, per stream", ">= 0.95", ratio, ratio is not None and ratio >= 0.95,
                       f"rows/s of {result['slots']} loader processes over {result['slots']} raw COPY sessions"))
    ok_dag = dag.get("state") == "success"
    if dag:
        out += shape_targets("laptop", result, result["scale"], result["streams"])
        out.append(server_cpu_target("laptop", result))
        out.append(airflow_per_task_target(result))
        out.append(airflow_per_task_parts(result))
    ov = dag.get("task_overhead_median") if ok_dag else None
    out.append(_target("median per-task overhead, seconds", "< 1", ov, ov is not None and ov < 1,
                       f"median over {dag.get('group_tasks', 0)} prepare/load/validate/switch tasks of wall minus "
                       f"reported work; GX import counted as overhead"))
    li = (dag.get("lineitem") or {}) if ok_dag else {}
    per_core = _r(li["rows_per_s"] / cores, 1) if li.get("rows_per_s") else None
    out.append(_target("lineitem rows/s per core, end to end", ">= 500,000", per_core,
                       per_core is not None and per_core >= 500_000,
                       f"lineitem rows over first lineitem task start to last lineitem switch end, / {cores} cores"))
    for p in result.get("parse") or []:
        med = p["dag_file_seconds"].get("median")
        out.append(_target(f"DAG parse, {p['streams']} streams ({p['tasks']} tasks), seconds", "< 2",
                           _r(med), med is not None and med < 2,
                           f"median of {p['rounds']} fresh processes importing the DAG file "
                           f"(airflow.sdk imported first, as in the dag-processor)"))
    if result["streams"] >= 56 and dag:
        out.append(_target(f"a run with {result['streams']} streams completes", "success",
                           None, None, f"run state: {dag.get('state')}"))
        out[-1]["measured"] = dag.get("state")
        out[-1]["met"] = ok_dag
    return out


def shape_targets(shape: str, section: dict, scale: float, streams: int) -> list[dict]:
    """The shape's end-to-end ratios: the COPY-only floor's (reported, no target), then the
    target, the DAG against the floor with the same end state (where that floor ran)."""
    floor, dag = section.get("floor") or {}, section.get("dag") or {}
    want = SHAPE_TARGETS[shape]
    ok = dag.get("state") == "success" and dag.get("wall_seconds") and floor.get("wall_seconds")
    ratio = _r(floor["wall_seconds"] / dag["wall_seconds"]) if ok else None
    defined = scale >= 10 and streams >= 8
    where = ("server, Airflow and clients on all cores" if shape == "laptop" else
             f"server on CPU {_cpus(section.get('server_cpus') or [])}, Airflow and clients on CPU "
             f"{_cpus(section.get('other_cpus') or [])}")
    # The COPY-only floor's ratio stays the table's headline, with no target of its own: the
    # target is against the floor that reaches the DAG's end state.
    out = [_target(f"floor / makespan, {shape} shape", "reported, no target (COPY-only floor)", ratio, None,
                   f"floor wall over the DAG run's wall, {where} (scale {scale:g}, {streams} streams); "
                   f"the target is the next row's, against the same end state")]
    # The target: the floor that reaches the same end state as the DAG's staging tables (the data
    # and the target's unique index) over the DAG's wall, i.e. the DAG's rows/s over that floor's.
    indexed = section.get("floor_unique") or {}
    if indexed:
        ratio = _r(indexed["wall_seconds"] / dag["wall_seconds"]) if ok else None
        out.append(_target(f"{UNIQUE_FLOOR} / makespan, {shape} shape", f">= {want}, same end state", ratio,
                           (ratio >= want) if ratio is not None and defined else None,
                           f"DAG / same-end-state floor: wall of the floor's sessions each building its table's "
                           f"unique index after its COPY (the same end state as the DAG's staging tables: the "
                           f"data and the target's unique index) over the DAG run's wall, {where} (scale "
                           f"{scale:g}, {streams} streams"
                           + ("" if defined else "; set for scale 10, 8 streams: reported, not judged") + ")"))
    return out


def server_cpu_target(shape: str, section: dict) -> dict:
    """The server's (PostgreSQL tree's) CPU seconds during the DAG run over those during the floor
    with the target's unique indexes, in the same shape: what the DAG's statements add to the work
    the same end state needs (the plan, the staging tables, the checks, the switches, the publish)."""
    dag = section.get("dag") or {}
    dag_cpu = (dag.get("cpu_seconds") or {}).get("postgres") if dag.get("state") == "success" else None
    floor_cpu = ((section.get("floor_unique") or {}).get("cpu_seconds") or {}).get("postgres")
    ratio = _r(dag_cpu / floor_cpu) if dag_cpu is not None and floor_cpu else None
    return _target(f"server CPU, DAG / same-end-state floor, {shape} shape", f"<= {SERVER_CPU_TARGET}", ratio,
                   ratio is not None and ratio <= SERVER_CPU_TARGET,
                   f"the PostgreSQL tree's CPU seconds during the DAG run ({dag_cpu if dag_cpu is not None else '-'}) "
                   f"over those during the {UNIQUE_FLOOR} ({floor_cpu if floor_cpu is not None else '-'})")


def empty_graph_per_task(graph: dict | None) -> float | None:
    """The empty graph's Airflow CPU per task, worker variant (steps in task processes, as the
    DAG's): the median over its successful runs."""
    runs = [r["airflow_cpu_per_task"] for r in ((graph or {}).get("runs") or {}).get("worker") or []
            if r.get("state") == "success" and r.get("airflow_cpu_per_task")]
    return statistics.median(runs) if runs else None


def airflow_per_task_target(result: dict) -> dict:
    """Real steps against empty ones: Airflow's CPU per task run in the laptop DAG run over the
    empty graph's Airflow CPU per task (worker variant). Judged only when both ran."""
    dag = result.get("dag") or {}
    cpu, n = dag.get("cpu_seconds") or {}, dag.get("tasks_run") or 0
    real = airflow_cpu_total(cpu) / n if cpu and n and dag.get("state") == "success" else None
    empty = empty_graph_per_task(result.get("graph"))
    ratio = _r(real / empty) if real is not None and empty else None
    return _target("Airflow CPU per task, real / empty steps", f"<= {AIRFLOW_PER_TASK_TARGET}", ratio,
                   ratio is not None and ratio <= AIRFLOW_PER_TASK_TARGET,
                   f"Airflow's CPU per task run in the laptop DAG run ({_r(real, 4) if real is not None else '-'}, "
                   f"{n} tasks ran) over the empty graph's per task, worker variant "
                   f"({_r(empty, 4) if empty is not None else 'not run'}); judged only when both ran")


def airflow_per_task_parts(result: dict) -> dict:
    """The same ratio with two parts of the real run's Airflow CPU set apart, reported without a
    target: what Airflow spends idle for every second the run lasts beyond the empty graph's
    (the graph part's idle rate x each run's wall), and the loads' reading and sending of their
    files, which any client does (the COPY-only floor's clients' CPU, laptop shape). What is
    left per task is what Airflow and Switchyard's own code cost per real step."""
    dag, graph = result.get("dag") or {}, result.get("graph") or {}
    cpu, n = dag.get("cpu_seconds") or {}, dag.get("tasks_run") or 0
    rate = (graph.get("idle") or {}).get("airflow_cpu_per_second")
    clients = ((result.get("floor") or {}).get("cpu_seconds") or {}).get("clients")
    empty = [r for r in (graph.get("runs") or {}).get("worker") or []
             if r.get("state") == "success" and r.get("tasks") and r.get("wall_seconds")]
    ratio = real = empty_rest = None
    if cpu and n and dag.get("state") == "success" and rate is not None and clients is not None and empty:
        real = (airflow_cpu_total(cpu) - rate * dag["wall_seconds"] - clients) / n
        empty_rest = statistics.median((r["airflow_cpu_seconds"] - rate * r["wall_seconds"]) / r["tasks"]
                                       for r in empty)
        ratio = _r(real / empty_rest) if empty_rest > 0 else None
    return _target("  the same, the run's length and the files' reading set apart", "reported, no target", ratio,
                   None,
                   f"(Airflow CPU - idle rate {rate if rate is not None else '-'} x wall - the floor's clients' "
                   f"{clients if clients is not None else '-'} CPU s) per task ({_r(real, 4) if real is not None else '-'}) "
                   f"over (the empty graph's Airflow CPU - idle rate x its wall) per task "
                   f"({_r(empty_rest, 4) if empty_rest is not None else '-'})")


def small_target(small: dict) -> dict:
    """The small batch's target: the median DAG run wall, a task per step, at most 10 s; the
    `tasks: single` median reported beside it."""
    default = ((small.get("shapes") or {}).get("per-step") or {}).get("wall_seconds") or {}
    single = ((small.get("shapes") or {}).get("single") or {}).get("wall_seconds") or {}
    med = default.get("median")
    ok = med is not None and all(r.get("state") == "success" for r in (small.get("runs") or []))
    return _target(f"small batch ({small.get('rows', 0):,} rows, {small.get('files', 0)} files), run wall, s",
                   f"<= {SMALL_BATCH_TARGET:g} (a task per step)", _r(med, 2), ok and med <= SMALL_BATCH_TARGET,
                   f"median of {default.get('n', 0)} DAG runs' wall (run start to end), a task per step; "
                   f"tasks: single {single.get('median', '-')} s (median of {single.get('n', 0)})")


def growth_target(growth: dict) -> dict:
    """The growth block's target row: the laptop target (DAG / same-end-state floor) at the
    largest scale measured, judged where that is scale 10 with 8 streams or more."""
    points = [p for p in growth.get("points") or [] if p.get("ratio") is not None]
    if not points:
        return _target("DAG / same-end-state floor at the largest scale, laptop shape",
                       f">= {SHAPE_TARGETS['laptop']} at scale 10, 8 streams", None, None, "no DAG run succeeded")
    last = max(points, key=lambda p: p["scale"])
    defined = last["scale"] >= 10 and growth["streams"] >= 8
    return _target(f"DAG / same-end-state floor at scale {last['scale']:g}, laptop shape",
                   f">= {SHAPE_TARGETS['laptop']} at scale 10, 8 streams", last["ratio"],
                   (last["ratio"] >= SHAPE_TARGETS["laptop"]) if defined else None,
                   f"the largest scale of the growth runs ({growth['streams']} streams)"
                   + ("" if defined else "; set for scale 10, 8 streams: reported, not judged"))


def reach_line(shape: str, section: dict) -> str | None:
    """What the shape's end-to-end ratios can be at all here: no DAG whose staging tables end with
    the target's unique indexes does less than the floor that builds them, so floor / that floor
    bounds its COPY-only ratio, whatever its schedule and Airflow's cost; where the empty graph ran,
    Airflow's cost for steps that do nothing lowers both bounds. The target, DAG / same-end-state
    floor, is judged against the bound in its own terms (that floor's wall over the shortest run)."""
    cost = unique_floor_cost(section.get("floor"), section.get("floor_unique"))
    if not cost:
        return None
    ceiling = cost["ratio_to_floor"]
    how = f"floor / {UNIQUE_FLOOR} = {ceiling:.3f}"
    # Where the empty graph ran beside it (the laptop shape), Airflow's cost for steps that do
    # nothing comes on top of that work: the most generous of its runs' bounds.
    graph = [b["floor_over_makespan_at_most"] for runs in
             ((section.get("graph") or {}).get("end_state_bounds") or {}).values()
             for b in runs if b.get("floor_over_makespan_at_most")]
    if graph and max(graph) < ceiling:
        ceiling = max(graph)
        how += f"; with Airflow's cost for steps that do nothing, {ceiling:.3f}"
    # The same bound against the same-end-state floor: its wall over the shortest run.
    same = ceiling * cost["with_indexes_wall_seconds"] / cost["floor_wall_seconds"]
    want = SHAPE_TARGETS[shape]
    verdict = "within reach" if same >= want else "out of reach on this machine"
    return (f"the same end state allows at most {how} (COPY-only); DAG / same-end-state floor at most "
            f"{same:.3f} (wanted {want}: {verdict})")


def work_bound(result: dict, shape: str) -> dict | None:
    """The shortest run the DAG's own work allows in this shape: its CPU seconds spread over the
    cores that did it with none ever idle (no schedule of the same work is shorter), and the
    floor ratio that run would have. Laptop: the machine's CPU over all its cores. Production:
    the server's CPU over its cores, or everything else over the others, whichever is longer.
    `reached`: the DAG's ratio over that ceiling (1.0: the run was as short as its work)."""
    section = result if shape == "laptop" else result.get("production")
    dag = (section or {}).get("dag") or {}
    cpu = dag.get("cpu_seconds") or {}
    if not cpu.get("machine") or not dag.get("wall_seconds") or dag.get("state") != "success":
        return None
    if shape == "laptop":
        cores = (result.get("machine") or {}).get("cpus") or result["slots"]
        parts = {"the machine's cores": (cpu["machine"], cores)}
    else:
        server, other = len(section["server_cpus"]), len(section["other_cpus"])
        parts = {"the server's cores": (cpu.get("postgres") or 0.0, server),
                 "Airflow's cores": (cpu["machine"] - (cpu.get("postgres") or 0.0), other)}
    by, (work, cores) = max(parts.items(), key=lambda item: item[1][0] / item[1][1])
    bound = work / cores
    floor = section["floor"]["wall_seconds"]
    return {"bound_by": by, "cpu_seconds": round(work, 1), "cores": cores, "bound_seconds": round(bound, 2),
            "dag_seconds": dag["wall_seconds"], "ceiling": round(floor / bound, 3),
            "ratio": round(floor / dag["wall_seconds"], 3), "reached": round(bound / dag["wall_seconds"], 3)}
