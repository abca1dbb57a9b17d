"""The shapes, where the server runs (SHAPES): the production shape's part of the run, its floor,
DAG and DAG levers with the server pinned to CPUs of its own and the rest to the others; and the
DAG runs with other load pools, in either shape."""
from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from switchyard_dev.bench.common import _cpus, _r, postmaster_pid, say, spread
from switchyard_dev.bench.dag_levers import compact_dag, run_dag_levers
from switchyard_dev.bench.dag_run import run_dag
from switchyard_dev.bench.floor import (
    UNIQUE_FLOOR,
    print_unique_floor,
    run_floor,
    run_unique_floor,
    unique_floor_cost,
)
from switchyard_dev.bench.own_airflow import airflow_cpu_total

# laptop: the server, Airflow and the clients share every core (the default machine state);
# production: the server on cores of its own, Airflow and the clients on the others, each
# measured against a floor taken in the same shape (as many COPY sessions as server cores).
SHAPES = ("laptop", "production")


def parse_pool_size(text: str, slots: int) -> int:
    """'slots', 'slots+N', 'Nxslots' (N may be a fraction: rounded up), or a number of slots."""
    import math
    t = text.strip().lower().replace(" ", "").replace("*", "x")
    if t == "slots":
        return slots
    if t.startswith("slots+"):
        return slots + int(t[6:])
    if t.endswith("xslots"):
        return max(1, math.ceil(float(t[:-6]) * slots - 1e-9))
    return int(t)


def airflow_pids() -> dict[str, int | None]:
    from switchyard_dev import local
    return {name: local.service_pid(name) for name in local.SERVICES}


@contextmanager
def production_shape(server_cpus: set[int], other_cpus: set[int]):
    """The embedded server's tree on `server_cpus`; this process (the clients it forks) and the
    benchmark's Airflow services on `other_cpus`; everything back on all CPUs afterwards."""
    from switchyard_dev import affinity
    everything = affinity.all_cpus()
    pg = postmaster_pid()
    if pg is None:
        raise RuntimeError("production shape: the embedded server's postmaster is not running")
    affinity.pin(pg, server_cpus)
    affinity.pin(os.getpid(), other_cpus)
    try:
        yield lambda: [affinity.pin(pid, other_cpus) for pid in airflow_pids().values() if pid]
    finally:
        affinity.pin(os.getpid(), everything)
        for pid in [postmaster_pid(), *airflow_pids().values()]:
            if pid:
                affinity.pin(pid, everything)


def run_pool_sizes(uri: str, pg, batch: str, streams: int, slots: int, sizes: list[int], default: int,
                   default_run: dict | None, repeat: int = 1, before_run: Callable[[], Any] | None = None,
                   floor: dict | None = None) -> dict:
    """DAG runs with each pool size (the default's run reused for its first round), in rotating
    order: wall, ratio to the floor, pool busy, Airflow CPU, and the median slot wait."""
    sizes = list(dict.fromkeys(sizes))
    runs: dict[int, list[dict]] = {n: [] for n in sizes}
    for r in range(repeat):
        order = sizes[r % len(sizes):] + sizes[:r % len(sizes)]
        for n in order:
            if r == 0 and n == default and default_run is not None:
                result = default_run
            else:
                say(f"pool of {n} ({slots} COPY slots), round {r + 1}")
                result = run_dag(uri, pg, batch, streams, slots, pool=n, before_run=before_run)
            c = compact_dag(result)
            cost = result.get("load_fixed_cost") or {}
            c["slot_wait_median"] = ((cost.get("parts") or {}).get("slot_wait") or {}).get("median")
            c["fixed_median"] = cost.get("fixed_median")
            c["floor_ratio"] = (_r(floor["wall_seconds"] / result["wall_seconds"])
                                if floor and result.get("wall_seconds") and result.get("state") == "success" else None)
            runs[n].append(c)
            print(f"    pool {n}: {result['wall_seconds']} s, x{c['floor_ratio']} of the floor, "
                  f"pool busy {c['pool_busy']}", flush=True)
    return {str(n): {"pool": n, "wall_seconds": spread([x["wall_seconds"] for x in rs]),
                     "floor_ratio": spread([x["floor_ratio"] for x in rs]),
                     "pool_busy": spread([x["pool_busy"] for x in rs]),
                     "slot_wait_median": spread([x["slot_wait_median"] for x in rs]),
                     "fixed_median": spread([x["fixed_median"] for x in rs]),
                     "airflow_cpu_seconds": spread([airflow_cpu_total(x["cpu_seconds"] or {}) for x in rs]),
                     "default": n == default, "runs": rs} for n, rs in runs.items()}


def run_production(uri: str, pg, files: list[dict], batch: str, streams: int, server_cpus: set[int],
                   other_cpus: set[int], parts: tuple[str, ...], preload: bool, pool_sizes: list[str],
                   pool_repeat: int, unique_floor: bool = True, dag_levers: tuple[str, ...] = (),
                   lever_rounds: int = 0) -> dict:
    """The production shape: the floor (and, before a DAG run, the floor with the target's unique
    indexes: `unique_floor`) and the DAG with the server on `server_cpus` alone; then the DAG
    levers `dag_levers`, `lever_rounds` rounds, in the same shape."""
    from switchyard_dev import demo
    slots = len(server_cpus)
    out: dict[str, Any] = {"shape": "production", "server_cpus": sorted(server_cpus),
                           "other_cpus": sorted(other_cpus), "slots": slots,
                           "pool": demo.default_pool_size(slots)}
    with production_shape(server_cpus, other_cpus) as pin_airflow:
        say(f"production shape, server on CPU {_cpus(server_cpus)}, the rest on CPU {_cpus(other_cpus)}: "
            f"floor, {slots} raw COPY FREEZE sessions")
        out["floor"] = run_floor(uri, files, slots)
        print(f"    {out['floor']['rows_per_s']:,.0f} rows/s in {out['floor']['wall_seconds']:.2f} s", flush=True)
        if unique_floor and "dag" in parts:
            say(f"production shape: {UNIQUE_FLOOR}, {slots} sessions")
            out["floor_unique"] = run_unique_floor(uri, files, slots)
            out["unique_floor_cost"] = unique_floor_cost(out["floor"], out["floor_unique"])
            print_unique_floor(out["floor_unique"])
        if "dag" in parts:
            say(f"production shape: the DAG, {slots} COPY slots, pool of {out['pool']}")
            out["dag"] = run_dag(uri, pg, batch, streams, slots, preload=preload, before_run=pin_airflow)
            print(f"    {out['dag']['wall_seconds']} s", flush=True)
            if pool_sizes:
                out["pool_sizes"] = run_pool_sizes(
                    uri, pg, batch, streams, slots, [parse_pool_size(x, slots) for x in pool_sizes],
                    out["pool"], out["dag"], pool_repeat, pin_airflow, out["floor"])
            if dag_levers and lever_rounds:
                say(f"production shape: levers, DAG runs, {lever_rounds} rounds")
                out["levers"] = {"dag": run_dag_levers(uri, pg, batch, streams, slots, lever_rounds, dag_levers,
                                                       before_run=pin_airflow)}
    return out
