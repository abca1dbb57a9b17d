"""The results: bench.json, the plots and the summary printed at the end (the table against the
floor, both shapes side by side, what the work allows, the unique indexes' cost, Airflow's CPU,
pool sizes, task overhead and each load's fixed cost, where the CPU went, the empty graph, the
DAG's parse, the targets, the levers), each part's lines made by a function of its own."""
from __future__ import annotations

import json
from pathlib import Path

from switchyard_dev.bench.common import _cpus
from switchyard_dev.bench.dag_levers import DAG_LEVERS
from switchyard_dev.bench.floor import UNIQUE_FLOOR
from switchyard_dev.bench.own_airflow import AIRFLOW_SERVICES, airflow_cpu_total
from switchyard_dev.bench.targets import reach_line, work_bound


def report(result: dict, out: Path, plot: bool = True) -> None:
    path = out / "bench.json"
    result["out_dir"] = str(out)
    if plot:
        try:
            from switchyard_dev.bench.plot import plot_all
            result["plots"] = [str(p) for p in plot_all(result, out)]
            if (result.get("production") or {}).get("floor"):
                prod = result["production"]
                shaped = dict(result, **{k: v for k, v in prod.items() if k in ("floor", "dag", "slots")},
                              floor_unique=prod.get("floor_unique"), loader=None, shape="production")
                result["plots"] += [str(p) for p in plot_all(shaped, out, suffix="-production")]
        except ImportError as exc:
            result["plots"] = []
            print(f"    no plots ({exc}; pip install matplotlib)", flush=True)
    result["work_bound"] = {shape: b for shape in ("laptop", "production") if (b := work_bound(result, shape))}
    path.write_text(json.dumps(result, indent=1, default=str) + "\n")
    b = result["batch"]
    la = result.get("load_average") or {}
    print(f"\nTPC-H scale {result['scale']:g}, {result['streams']} streams: {b['rows']:,} rows, "
          f"{b['bytes'] / 1e6:,.1f} MB; {result['slots']} slots; {result['machine'].get('cpus')} CPUs; load average "
          + ", ".join(f"{k} {v['1min']}" for k, v in la.items()) + "\n")
    for line in table_lines(result):
        print(line)
    sides = shape_lines(result)
    if sides:
        print("\nboth shapes side by side (each DAG against its own floor; Airflow = CPU s of its services "
              "during the DAG run, and that over the run's wall x the cores Airflow had)")
        for line in sides:
            print(line)
    bounds = work_bound_lines(result)
    if bounds:
        print("\nwhat each DAG run's own work allows (its CPU seconds over the cores that did them, none ever "
              "idle: no schedule\n of the same work is shorter; ceiling = floor / that; reached = that / the DAG's wall)")
        for line in bounds:
            print(line)
    indexed = unique_floor_lines(result)
    if indexed:
        print(f"\nwhat the target's unique indexes cost in the floor ({UNIQUE_FLOOR}: each session builds "
              f"its table's unique\n index after its COPY, in the same transaction; server CPU = the PostgreSQL "
              f"tree's CPU seconds during each floor,\n parallel index workers included; index builds = their "
              f"seconds in their sessions, summed)")
        for line in indexed:
            print(line)
    services = airflow_service_lines(result)
    if services:
        print("\nAirflow's CPU per service during each shape's DAG run (seconds; per task run; per second of the run)")
        for line in services:
            print(line)
    sizes = pool_size_lines(result)
    if sizes:
        print("\npool sizes (the load pool over the target's COPY slots; slot wait and fixed cost: medians per load)")
        for line in sizes:
            print(line)
    if result.get("peers"):
        print(f"(peers: one session measured on a lineitem sample, rate x{result['slots']} sessions assumed "
              f"to scale perfectly)")
    if result.get("dag"):
        print("\nper-task overhead (task wall time minus reported work; medians; n/r = no work reported, "
              "overhead = wall;\n queued = start - queued; gap = start - upstream task's end)")
        for line in overhead_lines(result["dag"]):
            print(line)
        for shape, section in (("laptop", result), ("production", result.get("production"))):
            lines = fixed_cost_lines(((section or {}).get("dag") or {}).get("load_fixed_cost") or {})
            if lines:
                print(f"\n{shape} shape: " + lines[0])
                for line in lines[1:]:
                    print(line)
    cpu = cpu_lines(result)
    if cpu:
        print("\nwhere the CPU went (CPU seconds of each process tree while the part ran; "
              "other = the rest of the machine)")
        for line in cpu:
            print(line)
    if result.get("graph"):
        from switchyard_dev.bench.graph import graph_lines
        print()
        for line in graph_lines(result["graph"]):
            print(line)
    requests = api_request_lines(result)
    if requests:
        print()
        for line in requests:
            print(line)
    if result.get("parse"):
        print("\nDAG parse (the DAG file in a fresh process; median [min, max] of rounds)")
        for p in result["parse"]:
            d, a = p["dag_file_seconds"], p["airflow_sdk_import_seconds"]
            print(f"  {p['streams']:>3} streams, {p['tasks']:>5} tasks: {d['median']:.2f} s [{d['min']:.2f}, "
                  f"{d['max']:.2f}] (+ airflow.sdk import {a['median']:.2f} s, paid once by the dag-processor)")
            if p.get("serialize_seconds"):
                z = p["serialize_seconds"]
                print(f"  {'':>3}          {'':>5}        then serialized as the dag-processor stores it: "
                      f"{z['median']:.2f} s [{z['min']:.2f}, {z['max']:.2f}], {p['serialized_mb']:.2f} MB")
    if result.get("targets"):
        print("\ntargets, laptop shape (everything on all cores)")
        for line in target_lines(result["targets"]):
            print(line)
        if reach := reach_line("laptop", result):
            print(reach)
    prod = result.get("production") or {}
    if prod.get("targets"):
        print(f"\ntargets, production shape (server on CPU {_cpus(prod['server_cpus'])}, Airflow and clients on "
              f"CPU {_cpus(prod['other_cpus'])})")
        for line in target_lines(prod["targets"]):
            print(line)
        if reach := reach_line("production", prod):
            print(reach)
    if result.get("small"):
        print("\n" + small_title(result["small"]))
        for line in small_lines(result["small"]):
            print(line)
    if result.get("levers"):
        print("\nlevers (median [min, max] over rounds)")
        for name, lv in result["levers"].get("copy", {}).items():
            r = lv["ratio_to_freeze_dummy"]
            rs = lv["rows_per_s"]
            sc = lv.get("first_scan_seconds_total") or {}
            print(f"  {name:<28} {rs['median']:>12,.0f} rows/s  x{r['median']:.3f} [{r['min']:.3f}, {r['max']:.3f}] "
                  f"of freeze_dummy" + (f"; first scan of all tables {sc['median']:.2f} s [{sc['min']:.2f}, "
                                         f"{sc['max']:.2f}]" if sc.get("n") else ""))
            if lv.get("placement"):
                print(f"    tablespace directories on one device with the data directory: "
                      f"{lv['placement']['same_device']}")
        val = result["levers"].get("validation") or {}
        if val:
            gi = val["gx_import_fresh_process"]
            print(f"  GX import in a fresh process: {gi['seconds']['median']:.2f} s, max RSS "
                  f"{gi['max_rss_mb']['median']:.0f} MB")
        for gid, lv in val.items():
            if gid == "gx_import_fresh_process":
                continue
            full, lean = lv["all four through GX"], lv["row count through GX, key proven"]
            print(f"  validate {gid:<10} ({lv['rows']:,} rows, GX imported): all four through GX "
                  f"{full['median']:.3f} s, key proven by constraints {lean['median']:.3f} s, saved "
                  f"{lv['saved_seconds']['median']:.3f} s [{lv['saved_seconds']['min']:.3f}, "
                  f"{lv['saved_seconds']['max']:.3f}]")
        for line in dag_lever_lines(result["levers"].get("dag", {})):
            print(line)
    if (prod.get("levers") or {}).get("dag"):
        print(f"\nlevers, production shape (server on CPU {_cpus(prod['server_cpus'])}; median [min, max] over rounds)")
        for line in dag_lever_lines(prod["levers"]["dag"]):
            print(line)
    print(f"\nresults: {path}")
    for p in result.get("plots", []):
        print(f"plot: {p}")


def table_lines(result: dict) -> list[str]:
    floor = result["floor"]["rows_per_s"]
    lines = [f"{'method':<52} {'rows/s':>12} {'MB/s':>8} {'wall s':>9} {'x floor':>8}"]

    def row(name: str, r: dict, wall: float | None) -> None:
        w = f"{wall:.2f}" if wall is not None else "-"
        lines.append(f"{name:<52} {r['rows_per_s']:>12,.0f} {r['mb_per_s']:>8.1f} {w:>9} "
                     f"{r['rows_per_s'] / floor:>8.3f}")

    n = result["slots"]
    row(f"floor: {n} raw COPY FREEZE sessions", result["floor"], result["floor"]["wall_seconds"])
    if result.get("floor_unique"):
        row(f"{UNIQUE_FLOOR} ({n} sessions)", result["floor_unique"], result["floor_unique"]["wall_seconds"])
    if result.get("loader"):
        row(f"Switchyard loader alone ({n} processes)", result["loader"], result["loader"]["wall_seconds"])
    dag = result.get("dag")
    if dag and dag.get("rows_per_s"):
        row("Switchyard DAG end to end (run wall)", dag, dag["wall_seconds"])
        window = {"rows_per_s": dag["load_window_rows_per_s"],
                  "mb_per_s": dag["bytes"] / 1e6 / dag["load_window_seconds"]}
        row("  first load start to last load end", window, dag["load_window_seconds"])
    for p in result.get("peers") or []:
        wall = result["batch"]["rows"] / p["rows_per_s"]
        row(f"{p['name']} (x{n}, extrap.)", p, wall)
    return lines


def shape_lines(result: dict) -> list[str]:
    """Both shapes side by side: where each part ran, the floor, the DAG and its ratio, Airflow's CPU."""
    rows = []
    for shape, section in (("laptop", result), ("production", result.get("production"))):
        if not section or not section.get("floor"):
            continue
        dag = section.get("dag") or {}
        cpu = dag.get("cpu_seconds") or {}
        air = airflow_cpu_total(cpu) if cpu else None
        done = dag.get("wall_seconds") and dag.get("state") == "success"
        ratio = section["floor"]["wall_seconds"] / dag["wall_seconds"] if done else None
        indexed = (section.get("floor_unique") or {}).get("wall_seconds")
        where = ("all" if shape == "laptop" else _cpus(section["server_cpus"]),
                 "all" if shape == "laptop" else _cpus(section["other_cpus"]))
        rows.append(f"{shape:<11} {where[0]:>10} {where[1]:>14} {section['slots']:>5} "
                    f"{(dag.get('pool') or '-')!s:>5} {section['floor']['wall_seconds']:>8.2f} "
                    + (f"{dag['wall_seconds']:>8.2f} {ratio:>8.3f}" if ratio else f"{'-':>8} {'-':>8}")
                    + (f" {indexed:>11.2f}" if indexed else f" {'-':>11}")
                    + (f" {indexed / dag['wall_seconds']:>8.3f}" if indexed and done else f" {'-':>8}")
                    + (f" {air:>9.1f} {100 * air / (dag['wall_seconds'] * len(section.get('other_cpus') or [0, 1])):>7.0f}%"
                       if air is not None and dag.get("wall_seconds") else ""))
    if not rows:
        return []
    return [f"{'shape':<11} {'server CPU':>10} {'Airflow+client':>14} {'slots':>5} {'pool':>5} {'floor s':>8} "
            f"{'DAG s':>8} {'x floor':>8} {'floor+ix s':>11} {'x fl+ix':>8} {'Airflow':>9} {'of cores':>8}", *rows]


def work_bound_lines(result: dict) -> list[str]:
    rows = []
    for shape in ("laptop", "production"):
        b = work_bound(result, shape)
        if b:
            rows.append(f"{shape:<11} {b['bound_by']:<20} {b['cpu_seconds']:>7.1f} {b['cores']:>5} "
                        f"{b['bound_seconds']:>8.2f} {b['dag_seconds']:>8.2f} {b['ceiling']:>8.3f} "
                        f"{b['ratio']:>8.3f} {100 * b['reached']:>7.0f}%")
    if not rows:
        return []
    return [f"{'shape':<11} {'bound by':<20} {'CPU s':>7} {'cores':>5} {'bound s':>8} {'DAG s':>8} "
            f"{'ceiling':>8} {'x floor':>8} {'reached':>8}", *rows]


def unique_floor_lines(result: dict) -> list[str]:
    """Per shape: the floor and the floor with the target's unique indexes, wall and server CPU
    side by side, and what the index builds took in their sessions (in all, per table)."""
    lines = []
    for shape, section in (("laptop", result), ("production", result.get("production"))):
        c = (section or {}).get("unique_floor_cost") or {}
        if not c:
            continue
        if not lines:
            lines.append(f"{'shape':<11} {'floor s':>8} {'floor+ix s':>11} {'added s':>8} {'server CPU s:':>13} "
                         f"{'floor':>6} {'floor+ix':>9} {'added':>7} {'index builds s':>15}")

        def f(v, fmt="{:.2f}"):
            return fmt.format(v) if v is not None else "-"
        lines.append(f"{shape:<11} {f(c['floor_wall_seconds']):>8} {f(c['with_indexes_wall_seconds']):>11} "
                     f"{f(c['added_wall_seconds'], '{:+.2f}'):>8} {'':>13} "
                     f"{f(c['floor_server_cpu_seconds'], '{:.1f}'):>6} "
                     f"{f(c['with_indexes_server_cpu_seconds'], '{:.1f}'):>9} "
                     f"{f(c['added_server_cpu_seconds'], '{:+.1f}'):>7} {f(c['index_builds_seconds']):>15}")
        by_table = list((((section.get("floor_unique") or {}).get("unique_index") or {}).get("by_table") or {}).items())
        if by_table:
            shown = [f"{t} {v['seconds']:.2f} / {v['copy_seconds']:.2f} s" for t, v in by_table[:3]]
            rest = by_table[3:]
            if rest:
                shown.append(f"{len(rest)} other tables {sum(v['seconds'] for _, v in rest):.2f} / "
                             f"{sum(v['copy_seconds'] for _, v in rest):.2f} s")
            lines.append(f"{'':<11} index builds / COPYs, summed over each table's files: " + "; ".join(shown))
    return lines


def airflow_service_lines(result: dict) -> list[str]:
    """Airflow's CPU per service in each shape's DAG run: seconds, per task run, per second of the run."""
    lines = []
    for shape, section in (("laptop", result), ("production", result.get("production"))):
        dag = (section or {}).get("dag") or {}
        cpu = dag.get("cpu_seconds") or {}
        if not cpu or not dag.get("wall_seconds"):
            continue
        n = dag.get("tasks_run") or 0
        if not lines:
            lines.append(f"{'shape':<11} {'service':<15} {'CPU s':>8} {'per task':>9} {'per s of run':>13}")
        for name in (*AIRFLOW_SERVICES, "postgres", "other"):
            v = cpu.get(name)
            if v is None:
                continue
            lines.append(f"{shape:<11} {name:<15} {v:>8.1f} {v / n if n else float('nan'):>9.3f} "
                         f"{v / dag['wall_seconds']:>13.3f}")
        lines.append(f"{shape:<11} {'Airflow, all':<15} {airflow_cpu_total(cpu):>8.1f} "
                     f"{airflow_cpu_total(cpu) / n if n else float('nan'):>9.3f} "
                     f"{airflow_cpu_total(cpu) / dag['wall_seconds']:>13.3f}   ({n} tasks ran)")
    return lines


def pool_size_lines(result: dict) -> list[str]:
    lines = []
    for shape, section in (("laptop", result), ("production", result.get("production"))):
        sizes = (section or {}).get("pool_sizes") or {}
        if not sizes:
            continue
        if not lines:
            lines.append(f"{'shape':<11} {'pool':>5} {'wall s (median [min, max])':>28} {'x floor':>8} "
                         f"{'pool busy':>9} {'slot wait':>9} {'fixed':>7} {'Airflow CPU s':>13}")
        for key, v in sizes.items():
            w, f = v["wall_seconds"], v["floor_ratio"]
            mark = " (default)" if v["default"] else ""

            def m(x, fmt="{:.3f}"):
                return fmt.format(x["median"]) if x.get("n") else "-"
            lines.append(f"{shape:<11} {v['pool']:>5} {m(w, '{:.1f}'):>10} [{w.get('min', 0):.1f}, "
                         f"{w.get('max', 0):.1f}]{'':>6} {m(f):>8} {m(v['pool_busy']):>9} "
                         f"{m(v['slot_wait_median']):>9} {m(v['fixed_median']):>7} "
                         f"{m(v['airflow_cpu_seconds'], '{:.1f}'):>13}{mark}")
    return lines


def api_request_lines(result: dict) -> list[str]:
    """The laptop DAG run's API requests per task run beside the empty graph's (its worker runs,
    the first that counted them)."""
    from switchyard_dev.bench import api_calls
    dag = result.get("dag") or {}
    if not dag.get("api_requests"):
        return []
    empty = next((r for r in ((result.get("graph") or {}).get("runs") or {}).get("worker", [])
                  if r.get("api_requests")), {})
    return api_calls.lines(dag["api_requests"], dag.get("tasks_run") or 0,
                           empty.get("api_requests"), empty.get("tasks") or 0)


def overhead_lines(dag: dict) -> list[str]:
    lines = [f"{'step':<16} {'tasks':>5} {'wall med':>9} {'work med':>9} {'overhead':>9} {'queued':>8} {'gap':>6} {'GX import':>9}"]
    for step, s in dag["per_step"].items():
        def f(v):
            return f"{v:.2f}" if v is not None else "-"
        work = f(s["work_median"]) if s["work_reported"] else "n/r"
        lines.append(f"{step:<16} {s['tasks']:>5} {f(s['wall_median']):>9} {work:>9} {f(s['overhead_median']):>9} "
                     f"{f(s['queue_wait_median']):>8} {f(s.get('start_gap_median')):>6} {f(s['gx_import_median']):>9}")
    cpu = [(step, s) for step, s in dag["per_step"].items() if s.get("cpu_start_median") is not None]
    if cpu:
        lines.append("task processes' CPU seconds (medians; sums): before the step (process start, logging, "
                     "plugins, the runner's API calls) / in the step")
        for step, s in cpu:
            lines.append(f"  {step:<14} {s['cpu_start_median']:.3f} / {s['cpu_step_median']:.3f}   "
                         f"sums {s['cpu_start_sum']:.2f} / {s['cpu_step_sum']:.2f}")
    for key, label in (("efficiency_run", "run"), ("efficiency_loads", "loads window")):
        e = dag[key]
        if e:
            lines.append(f"schedule efficiency ({label}): {e['efficiency']:.3f} = lower bound "
                         f"{e['lower_bound_seconds']:.2f} s (max(work {e['total_work_seconds']:.2f} s / slots, "
                         f"longest {e['longest_task_seconds']:.2f} s)) / makespan {e['makespan_seconds']:.2f} s")
    if dag.get("pool_busy_fraction") is not None:
        lines.append(f"pool busy (load task wall / slots / loads window): {dag['pool_busy_fraction']:.3f}")
    if dag.get("task_overhead_median") is not None:
        lines.append(f"median overhead over all {dag['group_tasks']} group tasks: {dag['task_overhead_median']:.2f} s")
    outside = ([f"the run's start to its first COPY {dag['head_seconds']:.2f} s"]
               if dag.get("head_seconds") is not None else []) + (
        [f"the last group task's end to the run's end (publish, Asset events, stats) {dag['tail_seconds']:.2f} s"]
        if dag.get("tail_seconds") is not None else [])
    if outside:  # a run without a successful load has no first COPY
        lines.append("outside the groups: " + "; ".join(outside))
    publish = dag.get("publish_batch") or {}
    if publish.get("lock_seconds") is not None:
        lines.append(f"the batch's publish: {len(publish.get('tables') or [])} tables in one transaction, locked "
                     f"{publish['lock_seconds']:.3f} s (the transaction {publish.get('seconds') or 0:.3f} s)")
    cost = dag.get("validation_cost_seconds") or {}
    if cost:
        total = sum(cost.values())
        work = dag.get("load_work_seconds") or 0.0
        parts = ", ".join(f"{kind} {seconds:.2f}" for kind, seconds in sorted(cost.items(), key=lambda kv: -kv[1]))
        lines.append(f"validation cost (sum of each check's work over the run's validate tasks): {total:.2f} s = "
                     f"{parts}" + (f"; {total / work:.3f} x the loads' work ({work:.2f} s)" if work else ""))
    if dag.get("server_sessions") is not None:
        ran = sum(s["tasks"] for s in dag["per_step"].values())
        lines.append(f"sessions the server opened in the target's database during the run: {dag['server_sessions']}"
                     + (f" ({dag['server_sessions'] / ran:.2f} per task run)" if ran else ""))
    v = dag["per_step"].get("validate")
    if v and v.get("gx_preloaded") is not None:
        lines.append(f"validate tasks that found GX already imported (preload): {v['gx_preloaded']} of {v['tasks']}")
    li = dag.get("lineitem") or {}
    if li:
        lines.append(f"lineitem end to end: {li['rows']:,} rows in {li['seconds']:.2f} s = {li['rows_per_s']:,.0f} rows/s "
                     f"(first lineitem task start to last lineitem switch end)")
    return lines


def fixed_cost_lines(cost: dict) -> list[str]:
    if not cost:
        return []
    lines = [f"each load's fixed cost, part by part ({cost['loads']} load tasks; seconds)",
             f"  {'part':<44} {'median':>8} {'sum':>9}"]
    for key, p in cost["parts"].items():
        lines.append(f"  {p['label']:<44} {p['median']:>8.4f} {p['total']:>9.3f}")
    if cost.get("fixed_median") is not None:
        lines.append(f"  {'fixed cost (wall - COPY - slot wait)':<44} {cost['fixed_median']:>8.4f} "
                     f"{cost['fixed_total']:>9.3f}")
    return lines


CPU_ORDER = ("postgres", "clients", "task processes", "scheduler", "api-server", "dag-processor", "triggerer",
             "other", "machine")


def cpu_lines(result: dict) -> list[str]:
    """One line per measured part: CPU seconds per process tree, and the machine's cores x wall."""
    prod = result.get("production") or {}
    parts = [(name, result.get(key)) for name, key in (("floor", "floor"), ("floor+ix", "floor_unique"),
                                                        ("loader alone", "loader"), ("DAG end to end", "dag"))]
    parts += [("floor, prod.", prod.get("floor")), ("floor+ix, prod.", prod.get("floor_unique")),
              ("DAG, prod.", prod.get("dag"))]
    parts = [(n, r) for n, r in parts if r and r.get("cpu_seconds")]
    if not parts:
        return []
    cores = (result.get("machine") or {}).get("cpus") or result["slots"]
    names = [k for k in CPU_ORDER if any(k in r["cpu_seconds"] for _, r in parts)]
    lines = [f"{'part':<16}" + "".join(f"{k:>15}" for k in names) + f"{'cores x wall':>14}"]
    for label, r in parts:
        c = r["cpu_seconds"]
        lines.append(f"{label:<16}" + "".join(f"{c[k]:>15.1f}" if c.get(k) is not None else f"{'-':>15}"
                                              for k in names) + f"{cores * r['wall_seconds']:>14.1f}")
    measured = [(label, r["autovacuum"]) for label, r in parts if r.get("autovacuum")]
    if measured:
        lines.append("of the postgres column, autovacuum (its own CPU, from the server's log; analyses / vacuums):")
        for label, a in measured:
            lines.append(f"{label:<16}{a['analyze']['cpu_seconds']:>8.2f} CPU s in {a['analyze']['count']:>3} analyses"
                         f"{a['vacuum']['cpu_seconds']:>8.2f} CPU s in {a['vacuum']['count']:>3} vacuums")
    return lines


def target_lines(rows: list[dict]) -> list[str]:
    wn = max([48, *(len(t["name"]) for t in rows)])
    ww = max([30, *(len(str(t["target"])) for t in rows)])
    lines = [f"{'target':<{wn}} {'wanted':<{ww}} {'measured':>12} {'met':>4}"]
    for t in rows:
        m = t["measured"]
        shown = "-" if m is None else (f"{m:,.3f}" if isinstance(m, float) and m < 100 else
                                       f"{m:,.0f}" if isinstance(m, (int, float)) else str(m))
        met = {True: "yes", False: "NO", None: "-"}[t["met"]]
        lines.append(f"{t['name']:<{wn}} {t['target']:<{ww}} {shown:>12} {met:>4}")
    return lines


def small_title(small: dict) -> str:
    return (f"small batch: {small['rows']:,} rows of `{small['table']}` in {small['files']} files "
            f"({small['bytes'] / 1e6:.1f} MB), the DAG a task per step and with `tasks: single`, "
            f"{small['rounds']} rounds in rotating order (run wall = the run's start to its end)")


def small_lines(small: dict) -> list[str]:
    """The small batch's runs per shape, median [min, max] wall, and its target row."""
    lines = [f"  {'shape':<10} {'runs':>4} {'tasks':>5} {'run wall s (median [min, max])':>32} {'API requests':>12}"
             f"   each run, s"]
    for shape, v in (small.get("shapes") or {}).items():
        w = v["wall_seconds"]
        each = ", ".join(f"{x['wall_seconds']}" if x["state"] == "success" else x["state"]
                         for x in small["runs"] if x["shape"] == shape)
        shown = f"{w['median']:.2f} [{w['min']:.2f}, {w['max']:.2f}]" if w.get("n") else "-"
        # The tasks' own requests to Airflow's API server in a run (median).
        requests = (v.get("api_requests") or {}).get("median")
        lines.append(f"  {shape:<10} {w.get('n', 0):>4} {v.get('tasks_run') or '-'!s:>5} {shown:>32} "
                     f"{requests if requests is not None else '-'!s:>12}   {each}")
    return lines + target_lines(small.get("targets") or [])


def growth_lines(growth: dict) -> list[str]:
    """Each scale's floor with the target's unique indexes and DAG, their ratio, and the fit."""
    lines = [f"  {'scale':>6} {'GB':>8} {'floor+ix s':>11} {'DAG s':>8} {'x fl+ix':>8} {'tasks':>6}"]
    fit = growth.get("dag_fit") or {}
    residuals = iter(fit.get("residuals_seconds") or [])
    for p in growth["points"]:
        ok = p.get("dag_state") == "success" and p.get("dag_seconds")
        lines.append(f"  {p['scale']:>6g} {p['gb']:>8.3f} {p['floor_seconds']:>11.2f} "
                     + (f"{p['dag_seconds']:>8.2f} {p['ratio']:>8.3f} {p.get('tasks_run') or '-'!s:>6}"
                        + (f"   fit residual {next(residuals):+.2f} s" if fit else "")
                        if ok else f"{'-':>8} {'-':>8} {'-':>6}   DAG run {p.get('dag_state')}"))
    if fit:
        tasks = fit["tasks_run"]
        lines.append(f"  DAG run seconds = {fit['fixed_seconds']:.2f} + {fit['per_gb_seconds']:.2f} x GB: a least-squares "
                     f"fit over {fit['points']} points" + (" (two points: a line through them, no check of its shape)"
                                                           if fit["points"] == 2 else f", R² {fit['r2']}"))
        if fit.get("per_task_seconds") is not None:
            lines.append(f"  per GB {fit['per_gb_seconds']:.2f} s; fixed {fit['fixed_seconds']:.2f} s over "
                         f"{'/'.join(str(t) for t in tasks)} task runs = {fit['per_task_seconds']:.4f} s per task"
                         + ("" if len(tasks) == 1 else " (task runs differ between scales: their median)"))
        floor = growth.get("floor_fit")
        if floor:
            lines.append(f"  beside it, {UNIQUE_FLOOR} = {floor['fixed_seconds']:.2f} + "
                         f"{floor['per_gb_seconds']:.2f} x GB (same fit)")
    else:
        lines.append(f"  no fit: {growth.get('fit_points', 0)} successful DAG run(s) at distinct scales, two needed")
    return lines + target_lines(growth.get("targets") or [])


def growth_report(result: dict, out: Path) -> None:
    """The growth runs alone (`--scales`): bench.json and the block."""
    result["out_dir"] = str(out)
    (out / "bench.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    g = result["growth"]
    scales = ", ".join(f"{p['scale']:g}" for p in g["points"])
    print(f"\nhow cost grows: {UNIQUE_FLOOR} and the DAG, laptop shape, at scales {scales}, "
          f"{g['streams']} streams, {result['slots']} slots")
    for line in growth_lines(g):
        print(line)
    print(f"\nresults: {out / 'bench.json'}")


def _server_part(lever: dict) -> str:
    """The server's CPU seconds and the sessions it opened, medians over the lever's rounds."""
    cpu = (lever.get("server_cpu_seconds") or {}).get("median")
    opened = (lever.get("server_sessions") or {}).get("median")
    return ((f"; server CPU {cpu} s" if cpu is not None else "")
            + (f"; server sessions {opened:.0f}" if opened is not None else ""))


def dag_lever_lines(levers: dict) -> list[str]:
    """The DAG levers' lines of the summary: median [min, max] wall and ratio to the reference."""
    lines = []
    for name, lv in levers.items():
        w, r = lv["wall_seconds"], lv.get("ratio_to_reference") or lv["ratio_to_no_preload"]
        v = lv["validate_overhead_median"]
        o = lv.get("task_overhead_median") or {}
        vw = (lv.get("validation_work_seconds") or {}).get("median")
        tail = (lv.get("tail_seconds") or {}).get("median")
        lines.append(f"  DAG {name:<34} {w['median']:>8.1f} s [{w['min']:.1f}, {w['max']:.1f}]  "
                     f"x{r['median']:.3f} of {lv.get('reference', 'no preload')}; validate overhead {v.get('median')} s; "
                     f"median task overhead {o.get('median')} s; pool busy {(lv.get('pool_busy') or {}).get('median')}; "
                     f"Airflow CPU {(lv.get('airflow_cpu_seconds') or {}).get('median')} s"
                     + (f"; validation work {vw} s" if vw is not None else "")
                     + _server_part(lv)
                     + (f"; the run's tail after its groups {tail} s" if tail is not None else ""))
        if DAG_LEVERS.get(name, (None, None, {}))[2].get("index_only"):
            lines.append("    (a measuring device: the checks switched off but the target's unique index; "
                         "never a way to run)")
        if lv.get("in_effect") is False:
            lines.append(f"    NOT IN EFFECT: {'; '.join(x['checks']['why'] for x in lv['runs'] if x['checks']['why'])}"
                         f": these figures do not measure the lever")
    return lines
