"""How the cost grows with the batch: at each of several TPC-H scales (`--scales 1,3,10`), the
floor with the target's unique indexes and the DAG, laptop shape, each scale's DAG against that
floor, and a straight line through the DAG runs' seconds over the batches' gigabytes (least
squares): seconds = fixed + per-GB x GB. With the streams fixed, the DAG's task count is the same
at every scale, so the fixed part over the task runs is a per-task part. It is a fit over as many
points as scales: two points make a line whatever they hold, three or more show its residuals."""
from __future__ import annotations

import statistics
import time

from switchyard_dev.bench.common import _r, batch_files, load_average, say
from switchyard_dev.bench.dag_run import run_dag
from switchyard_dev.bench.floor import UNIQUE_FLOOR, run_unique_floor


def fit_line(xs: list[float], ys: list[float]) -> dict | None:
    """Least squares y = fixed + slope x over the points; None under two distinct x."""
    n = len(xs)
    if n < 2 or len(set(xs)) < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    fixed = my - slope * mx
    residuals = [y - (fixed + slope * x) for x, y in zip(xs, ys)]
    ss_tot = sum((y - my) ** 2 for y in ys)
    return {"points": n, "fixed": fixed, "slope": slope, "residuals": residuals,
            "r2": 1 - sum(e * e for e in residuals) / ss_tot if ss_tot else None}


def growth_summary(points: list[dict], streams: int) -> dict:
    """The fit of the DAG runs' seconds (and of the floor's, beside it) over the batches' GB."""
    done = [p for p in points if p.get("dag_state") == "success" and p.get("dag_seconds")]
    out: dict = {"streams": streams, "points": points, "fit_points": len(done)}
    dag = fit_line([p["gb"] for p in done], [p["dag_seconds"] for p in done])
    if dag:
        tasks = sorted({p["tasks_run"] for p in done if p.get("tasks_run")})
        per_task_n = statistics.median([p["tasks_run"] for p in done if p.get("tasks_run")]) if tasks else None
        out["dag_fit"] = {"points": dag["points"], "fixed_seconds": _r(dag["fixed"], 2),
                          "per_gb_seconds": _r(dag["slope"], 2), "r2": _r(dag["r2"], 4),
                          "residuals_seconds": [_r(e, 2) for e in dag["residuals"]],
                          "tasks_run": tasks,
                          "per_task_seconds": _r(dag["fixed"] / per_task_n, 4) if per_task_n else None}
    floor = fit_line([p["gb"] for p in points if p.get("floor_seconds")],
                     [p["floor_seconds"] for p in points if p.get("floor_seconds")])
    if floor:
        out["floor_fit"] = {"points": floor["points"], "fixed_seconds": _r(floor["fixed"], 2),
                            "per_gb_seconds": _r(floor["slope"], 2), "r2": _r(floor["r2"], 4)}
    return out


def run_growth(uri: str, pg, scales: list[float], streams: int, slots: int, preload: bool = True) -> dict:
    """At each scale, smallest first: the batch (generated or reused), the floor with the
    target's unique indexes, then the DAG, laptop shape (nothing pinned)."""
    from switchyard.core.batch import data_root
    from switchyard.core.datagen import generate_tpch
    from switchyard.core.spec import load_spec

    from switchyard_dev.demo import batch_name
    spec = load_spec("tpch")
    points = []
    for scale in sorted(scales):
        name = batch_name(scale, streams)
        folder = data_root() / name
        say(f"growth: TPC-H batch, scale {scale:g}, {streams} streams")
        t0 = time.monotonic()
        files = batch_files(folder, generate_tpch(folder, spec, scale, streams), spec)
        nbytes, rows = sum(f["bytes"] for f in files), sum(f["rows"] for f in files)
        print(f"    {folder}: {len(files)} files, {rows:,} rows, {nbytes / 1e6:,.1f} MB "
              f"({time.monotonic() - t0:.1f} s)", flush=True)
        say(f"growth, scale {scale:g}: {UNIQUE_FLOOR}, {slots} sessions")
        floor = run_unique_floor(uri, files, slots)
        print(f"    {floor['wall_seconds']:.2f} s", flush=True)
        say(f"growth, scale {scale:g}: the DAG, laptop shape")
        dag = run_dag(uri, pg, name, streams, slots, preload=preload)
        print(f"    {dag['state']}, {dag['wall_seconds']} s, {dag.get('tasks_run')} tasks ran", flush=True)
        ok = dag["state"] == "success" and dag.get("wall_seconds")
        points.append({"scale": scale, "batch": name, "rows": rows, "bytes": nbytes, "gb": round(nbytes / 1e9, 6),
                       "floor_seconds": floor["wall_seconds"],
                       "floor_server_cpu_seconds": (floor.get("cpu_seconds") or {}).get("postgres"),
                       "dag_state": dag["state"], "dag_seconds": dag.get("wall_seconds"),
                       "tasks_run": dag.get("tasks_run"), "dag_cpu_seconds": dag.get("cpu_seconds"),
                       "ratio": _r(floor["wall_seconds"] / dag["wall_seconds"]) if ok else None,
                       "load_average": load_average()})
    return growth_summary(points, streams)
