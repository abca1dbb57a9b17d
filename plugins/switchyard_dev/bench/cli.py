"""`make bench`: Switchyard's throughput side by side with the floor and with the usual ways.

One command, one machine, one batch, measured in the same run:

1. floor: the batch's files loaded by as many raw `COPY ... FREEZE` sessions as the pool
   has slots (psycopg, no Airflow): what the server allows. Text format, the fastest raw
   COPY that is byte-exact for this data (TPC-H holds no backslash; the floor checks each
   chunk and refuses a file with one). Where the DAG runs, the floor with the target's unique
   indexes follows it: each session builds its table's unique index (the spec's `unique`)
   after its COPY, in the same transaction, the DAG's staging tables' end state;
2. loader alone: the adapter's own prepare + load per file, one process per slot;
3. end to end: the DAG through the real scheduler, LocalExecutor and the pool, with the
   task overhead taken from the Airflow API (task wall time minus reported work);
4. peers: what a user writes with stock Airflow (PostgresHook.insert_rows, pandas
   to_sql, PostgresHook.copy_expert), on a sample, extrapolated.

It measures two shapes: laptop (the server, Airflow and the clients share every core) and
production (the server pinned to CPUs of its own, Airflow and the clients to the others; its
floor taken in the same shape with one COPY session per server CPU), side by side, each
against its own floor and with Airflow's CPU per service. `--pool-sizes` adds DAG runs with
other load pools (the target's COPY slot guard keeps one COPY per slot whatever the pool).
Each load's fixed cost is reported part by part (task start, plan pull, connection lookup,
connect, slot wait, lease, release, task end).

It also times the DAG file's parse for 56 and 96 streams in fresh processes, and checks
the figures against the project's targets (a `targets` block per shape in the output and the JSON).
Task overhead is a task's wall time minus the work it reports; importing Great
Expectations counts as overhead, not as validation work.

The `small` part (not in the default parts: each change of spec restarts the benchmark's
Airflow, a few minutes on 2 cores) writes a small extract of a user's own (one table,
`readings`: 35,000 rows in 10 files, bench/readings.yaml) into the data folder and runs the DAG on
it a task per step and with `tasks: single`, 3 rounds each in rotating order: the target is the
first's median run wall. `--scales 1,3,10` runs instead, at each scale, the floor with the
target's unique indexes and the DAG (laptop shape), and fits the DAG's seconds over the GB.

`--levers` adds side-by-side measurements of the options that move these numbers: COPY
FREEZE or not, three ways of handling TPC-H's trailing '|', server-side `COPY FROM
'<file>'` against client streaming, one tablespace per session in its own directory, the
bulk-load server settings against PostgreSQL's defaults, validation with every
expectation scanning against the key proven by the staging table's constraints, the
scheduler preloading Great Expectations, the DAG's priority weights, and (a measuring device
that switches the checks off) validation by the unique index alone. Each is repeated
(`--repeat`, `--dag-repeat`) in rotating order: the spread is reported next to the
median, because a shared machine is noisy.

The end-to-end part runs an Airflow of its own (own home, port and schema), so a
running demo Airflow and its schema are left alone; it is stopped at the end unless
`--keep-airflow` is given. Results: `.switchyard/bench/<timestamp>/bench.json` and PNGs.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from switchyard_dev.bench.common import (
    _cpus,
    batch_files,
    load_average,
    machine,
    output_dir,
    say,
)
from switchyard_dev.bench.dag_levers import (
    DAG_LEVERS,
    DEFAULT_DAG_LEVERS,
    run_dag_levers,
)
from switchyard_dev.bench.dag_parse import parse_seconds
from switchyard_dev.bench.dag_run import run_dag
from switchyard_dev.bench.floor import (
    UNIQUE_FLOOR,
    print_unique_floor,
    run_floor,
    run_unique_floor,
    unique_floor_cost,
)
from switchyard_dev.bench.levers import run_copy_levers, run_validation_lever
from switchyard_dev.bench.loader import run_loader
from switchyard_dev.bench.own_airflow import stop_bench_airflows
from switchyard_dev.bench.peers import output_to, run_peers
from switchyard_dev.bench.report import report
from switchyard_dev.bench.shapes import (
    SHAPES,
    parse_pool_size,
    run_pool_sizes,
    run_production,
)
from switchyard_dev.bench.targets import (
    growth_target,
    server_cpu_target,
    shape_targets,
    small_target,
    targets,
)


def run(scale: float, streams: int, slots: int | None = None, parts: tuple[str, ...] = ("floor", "loader", "dag",
        "graph", "peers", "parse"), levers: bool = False, repeat: int = 3, peer_seconds: float = 15.0, out: Path | None = None,
        keep_airflow: bool = False, preload: bool = True, plot: bool = True, dag_repeat: int | None = None,
        dag_levers: tuple[str, ...] = DEFAULT_DAG_LEVERS, lever_parts: tuple[str, ...] = ("copy", "validation", "dag"),
        graph_repeat: int = 1, shapes: tuple[str, ...] | None = None, server_cpus: str | None = None,
        pool_sizes: tuple[str, ...] = (), pool_repeat: int = 1, unique_floor: bool = True,
        small_rounds: int = 3, small_rows: int | None = None) -> dict:
    """The benchmark; `unique_floor`: also the floor with the target's unique indexes, in each
    shape whose DAG runs (right after that shape's floor); `small_rounds`, `small_rows`: the
    `small` part's rounds per shape and rows (default 35,000)."""
    from switchyard.core.batch import data_root
    from switchyard.core.datagen import generate_tpch
    from switchyard.core.spec import load_spec

    from switchyard_dev import affinity
    from switchyard_dev.demo import batch_name
    from switchyard_dev.embedded import EmbeddedPostgres
    spec = load_spec("tpch")
    slots = slots or os.cpu_count() or 1
    cpus = affinity.all_cpus()
    if shapes is None:
        shapes = SHAPES if len(cpus) >= 2 else ("laptop",)
    unknown = [x for x in shapes if x not in SHAPES]
    if unknown:
        raise ValueError(f"shapes {unknown}: known {', '.join(SHAPES)}")
    server_set, other_set = (affinity.split(cpus) if server_cpus is None else
                             (affinity.parse_cpus(server_cpus), cpus - affinity.parse_cpus(server_cpus)))
    if "production" in shapes and (not server_set or not other_set or not server_set <= cpus):
        raise ValueError(f"--server-cpus {server_cpus}: CPUs of this machine ({_cpus(cpus)}), leaving one for the rest")
    out = output_dir(out)
    result: dict[str, Any] = {"format": "switchyard-bench/1",
                              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              "command": " ".join(["python -m switchyard_dev.bench", *sys.argv[1:]]),
                              "machine": machine(), "scale": scale, "streams": streams, "slots": slots,
                              "shapes": list(shapes),
                              "load_average": {"start": load_average()}}
    say("embedded PostgreSQL")
    pg = EmbeddedPostgres()
    uri = pg.start()
    say(f"TPC-H batch, scale {scale:g}, {streams} streams")
    name = batch_name(scale, streams)
    folder = data_root() / name
    t0 = time.monotonic()
    manifest = generate_tpch(folder, spec, scale, streams)
    files = batch_files(folder, manifest, spec)
    result["batch"] = {"name": name, "folder": str(folder), "files": len(files),
                       "rows": sum(f["rows"] for f in files), "bytes": sum(f["bytes"] for f in files),
                       "generate_or_reuse_seconds": round(time.monotonic() - t0, 2)}
    print(f"    {folder}: {len(files)} files, {result['batch']['rows']:,} rows, "
          f"{result['batch']['bytes'] / 1e6:,.1f} MB", flush=True)
    try:
        say(f"laptop shape (everything on all cores): floor, {slots} raw COPY FREEZE sessions")
        result["floor"] = run_floor(uri, files, slots)
        print(f"    {result['floor']['rows_per_s']:,.0f} rows/s in {result['floor']['wall_seconds']:.2f} s", flush=True)
        result["load_average"]["after_floor"] = load_average()
        if unique_floor and ("dag" in parts or "graph" in parts) and "laptop" in shapes:
            say(f"laptop shape: {UNIQUE_FLOOR}, {slots} sessions (each file's COPY FREEZE, then its table's "
                f"unique index, in one transaction)")
            result["floor_unique"] = run_unique_floor(uri, files, slots)
            result["unique_floor_cost"] = unique_floor_cost(result["floor"], result["floor_unique"])
            print_unique_floor(result["floor_unique"])
            result["load_average"]["after_floor_unique"] = load_average()
        if "loader" in parts and "laptop" in shapes:
            say(f"Switchyard loader alone: PostgresAdapter prepare + load, {slots} processes")
            result["loader"] = run_loader(uri, folder, files, slots)
            print(f"    {result['loader']['rows_per_s']:,.0f} rows/s in {result['loader']['wall_seconds']:.2f} s",
                  flush=True)
            result["load_average"]["after_loader"] = load_average()
        if "peers" in parts:
            say(f"peers: stock Airflow ways on a lineitem sample (about {peer_seconds:g} s each; "
                f"their log: {out / 'peers.log'})")
            with output_to(out / "peers.log"):
                result["peers"] = run_peers(uri, files, slots, peer_seconds)
        if levers:
            # Before Airflow starts: its idle services take CPU from the COPY sessions.
            result["levers"] = {}
            if "copy" in lever_parts:
                say(f"levers: COPY variants and server settings, {repeat} rounds")
                result["levers"]["copy"] = run_copy_levers(uri, files, slots, repeat, folder)
            if "validation" in lever_parts:
                say(f"levers: validation, all expectations scanning vs the key proven by constraints, {repeat} rounds")
                result["levers"]["validation"] = run_validation_lever(uri, folder, files, repeat)
            if "constraints" in lever_parts:
                from switchyard_dev.bench.constraints import print_constraints, run_constraints
                say(f"levers: the staging table's constraints, {max(repeat, 3)} rounds")
                result["levers"]["constraints"] = run_constraints(uri, folder, files, max(repeat, 3))
                print_constraints(result["levers"]["constraints"])
            if "guard" in lever_parts:
                from switchyard_dev.bench.value_guard import print_value_guard, run_value_guard
                say(f"levers: the loads' value guard, {max(repeat, 3)} rounds")
                result["levers"]["guard"] = run_value_guard(uri, folder, files, max(repeat, 3))
                print_value_guard(result["levers"]["guard"])
        if "dag" in parts and "laptop" in shapes:
            from switchyard_dev.demo import default_pool_size
            result["pool"] = default_pool_size(slots)
            say(f"Switchyard end to end: the DAG through the scheduler, LocalExecutor, {slots} COPY slots, "
                f"pool of {result['pool']}")
            result["dag"] = run_dag(uri, pg, name, streams, slots, preload=preload)
            result["load_average"]["after_dag"] = load_average()
            if pool_sizes:
                result["pool_sizes"] = run_pool_sizes(uri, pg, name, streams, slots,
                                                      [parse_pool_size(x, slots) for x in pool_sizes],
                                                      result["pool"], result["dag"], pool_repeat,
                                                      floor=result["floor"])
                result["load_average"]["after_pool_sizes"] = load_average()
            if levers and "dag" in lever_parts:
                rounds = repeat if dag_repeat is None else dag_repeat
                say(f"levers: DAG runs (GX preload, priority weights), {rounds} rounds")
                result["levers"]["dag"] = run_dag_levers(uri, pg, name, streams, slots, rounds, dag_levers)
        if "production" in shapes and ("dag" in parts or "floor" in parts):
            production_levers = dag_levers if levers and "dag" in lever_parts else ()
            result["production"] = run_production(uri, pg, files, name, streams, server_set, other_set, parts,
                                                  preload, list(pool_sizes), pool_repeat, unique_floor,
                                                  production_levers, repeat if dag_repeat is None else dag_repeat)
            result["load_average"]["after_production"] = load_average()
        if "remote" in parts:  # the loads on two Edge workers beside LocalExecutor alone
            from switchyard_dev.bench.remote import run_remote
            result["remote"] = run_remote(uri, pg, name, folder, streams, slots)
        if "graph" in parts:
            from switchyard_dev.bench.graph import run_graphs
            say("the DAG's graph with steps that do nothing: in task processes, then in the triggerer")
            result["graph"] = run_graphs(uri, pg, streams, slots, result.get("floor"), graph_repeat,
                                         end_state=result.get("floor_unique"))
            result["load_average"]["after_graph"] = load_average()
        if "small" in parts:
            from switchyard_dev.bench.small import ROWS, run_small
            result["small"] = run_small(uri, pg, slots, small_rounds, small_rows or ROWS, preload=preload)
            result["small"]["targets"] = [small_target(result["small"])]
            result["load_average"]["after_small"] = load_average()
        if "parse" in parts:
            say("DAG parse time: the DAG file imported in fresh processes for 56 and 96 streams")
            result["parse"] = [parse_seconds(n) for n in (56, 96)]
    finally:
        if not keep_airflow and ("dag" in parts or "graph" in parts or "remote" in parts or "small" in parts):
            stop_bench_airflows()
    result["load_average"]["end"] = load_average()
    result["targets"] = targets(result)
    if result.get("production"):
        result["production"]["targets"] = [*shape_targets("production", result["production"], scale, streams),
                                            server_cpu_target("production", result["production"])]
    report(result, out, plot)
    return result


def run_scales(scales: list[float], streams: int, slots: int | None = None, out: Path | None = None,
               keep_airflow: bool = False, preload: bool = True) -> dict:
    """`--scales`: how the cost grows (growth.py), in one invocation, laptop shape."""
    from switchyard_dev.bench.growth import run_growth
    from switchyard_dev.bench.report import growth_report
    from switchyard_dev.embedded import EmbeddedPostgres
    slots = slots or os.cpu_count() or 1
    out = output_dir(out)
    result: dict[str, Any] = {"format": "switchyard-bench/1",
                              "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                              "command": " ".join(["python -m switchyard_dev.bench", *sys.argv[1:]]),
                              "machine": machine(), "scales": sorted(scales), "streams": streams, "slots": slots,
                              "shapes": ["laptop"], "load_average": {"start": load_average()}}
    say("embedded PostgreSQL")
    pg = EmbeddedPostgres()
    uri = pg.start()
    try:
        result["growth"] = run_growth(uri, pg, scales, streams, slots, preload=preload)
    finally:
        if not keep_airflow:
            stop_bench_airflows()
    result["load_average"]["end"] = load_average()
    result["growth"]["targets"] = [growth_target(result["growth"])]
    growth_report(result, out)
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m switchyard_dev.bench", description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--slots", type=int, help="concurrent loads (default: the pool size, one per core)")
    p.add_argument("--parts", default="floor,loader,dag,graph,peers,parse",
                   help="comma-separated subset of floor,loader,dag,graph,peers,parse,remote,small (the floor always "
                        "runs; remote: the loads on two Edge workers beside LocalExecutor alone, not by default; "
                        "small: a small extract of one table, 35,000 rows in 10 files, through the DAG a task per "
                        "step and with `tasks: single`, --small-rounds each in rotating order, target: the first's "
                        "median run wall <= 10 s; not by default, as each change of spec restarts the benchmark's "
                        "Airflow: a few minutes on 2 cores)")
    p.add_argument("--small-rounds", type=int, default=3, help="the small part's DAG runs per shape (default 3)")
    p.add_argument("--small-rows", type=int, default=None, help="the small part's rows (default 35,000), in 10 files")
    p.add_argument("--scales", default=None,
                   help="comma-separated TPC-H scales, e.g. 1,3,10: instead of the parts, at each scale the floor "
                        "with the target's unique indexes and the DAG (laptop shape, --streams streams), each "
                        "scale's ratio, and a least-squares fit of the DAG run's seconds as fixed + per GB x GB "
                        "(the fixed part over the task runs: per task); --scale is not used")
    p.add_argument("--graph-repeat", type=int, default=1,
                   help="runs of each empty graph (worker, triggerer), in rotating order (default 1)")
    p.add_argument("--levers", action="store_true", help="also measure the levers (COPY options, settings, "
                   "GX preload, priority weights)")
    p.add_argument("--repeat", type=int, default=3, help="rounds per lever (default 3)")
    p.add_argument("--dag-repeat", type=int, help="rounds of the DAG levers (default: --repeat); each is a DAG run")
    p.add_argument("--lever-parts", default="copy,validation,dag",
                   help="which levers: copy,validation,constraints,guard,dag (constraints: what the staging "
                        "table's constraints cost the server per row, one load at a time; guard: what the loads' "
                        "value guard costs the client per MB, one load at a time; neither in the default)")
    p.add_argument("--dag-levers", default=";".join(DEFAULT_DAG_LEVERS),
                   help="';'-separated DAG configurations, the first is the reference; known: " + "; ".join(DAG_LEVERS))
    p.add_argument("--peer-seconds", type=float, default=15.0,
                   help="target seconds per peer sample (default 15: their rates are steady after a few "
                        "seconds, and four peers at a minute each would double the default run)")
    p.add_argument("--shapes", default=None,
                   help="comma-separated: laptop (everything on all cores), production (the server on CPUs of "
                        "its own, Airflow and the clients on the others); default both (laptop only on 1 CPU); the laptop floor always runs")
    p.add_argument("--server-cpus", default=None,
                   help="the production shape's server CPUs, e.g. 0 or 0-3 (default: the first half, 0 on 2 CPUs)")
    p.add_argument("--pool-sizes", default="",
                   help="also run the DAG with these load pools, in each shape, e.g. 'slots,slots+1,2xslots' "
                        "(the default pool's run is reused)")
    p.add_argument("--pool-repeat", type=int, default=1, help="rounds of the pool sizes (default 1)")
    p.add_argument("--no-preload", action="store_true", help="end-to-end run without the scheduler's GX preload")
    p.add_argument("--no-unique-floor", action="store_true",
                   help="skip the floor with the target's unique indexes (by default it runs in each shape whose "
                        "DAG runs, right after that shape's floor: the DAG is judged against it too)")
    p.add_argument("--keep-airflow", action="store_true", help="leave the benchmark's Airflow running")
    p.add_argument("--no-plot", action="store_true")
    p.add_argument("--out", type=Path, help="results folder (default .switchyard/bench)")
    a = p.parse_args(argv)
    if a.scales:
        scales = [float(x) for x in a.scales.split(",") if x.strip()]
        if len(set(scales)) < 2:
            p.error("--scales: at least two distinct scales (a fit needs two points)")
        growth = run_scales(scales, a.streams, a.slots, a.out, a.keep_airflow, not a.no_preload)["growth"]
        return 1 if any(x["dag_state"] != "success" for x in growth["points"]) else 0
    parts = tuple(x.strip() for x in a.parts.split(",") if x.strip())
    result = run(a.scale, a.streams, a.slots, parts, a.levers, a.repeat, a.peer_seconds, a.out,
                 a.keep_airflow, not a.no_preload, not a.no_plot, a.dag_repeat,
                 tuple(x.strip() for x in a.dag_levers.split(";") if x.strip()),
                 tuple(x.strip() for x in a.lever_parts.split(",") if x.strip()), a.graph_repeat,
                 tuple(x.strip() for x in a.shapes.split(",") if x.strip()) if a.shapes else None, a.server_cpus,
                 tuple(x.strip() for x in a.pool_sizes.split(",") if x.strip()), a.pool_repeat,
                 unique_floor=not a.no_unique_floor, small_rounds=a.small_rounds, small_rows=a.small_rows)
    dags = [result.get("dag"), (result.get("production") or {}).get("dag"), *(result.get("small") or {}).get("runs", [])]
    return 1 if any(d and d.get("state") != "success" for d in dags) else 0
