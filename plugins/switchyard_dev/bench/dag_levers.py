"""The DAG levers: the DAG run once per configuration (the preload, the priority weights, the
spec's options, Airflow's and the steps' settings) and round, in rotating order, each against
the first named."""
from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from switchyard_dev.bench.common import _median, _r, say, spread
from switchyard_dev.bench.dag_run import run_dag
from switchyard_dev.bench.index_only import checks_ran
from switchyard_dev.bench.own_airflow import airflow_cpu_total

# TPC-H's tables whose loads per stream are shorter than a task's start (at scale 10 with 8
# streams: 12,500 to 250,000 rows, 0.05-0.3 s of COPY); partsupp, orders, lineitem are not.
SMALL_TABLES = ("supplier", "customer", "part", "nation", "region")


# The OpenLineage provider's settings for lineage on: every event to a file by its file transport.
LINEAGE_TO_A_FILE = {
    "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "append": True, "log_file_path": str(
        Path(tempfile.gettempdir()) / "switchyard-bench-lineage.jsonl")}),
    "AIRFLOW__OPENLINEAGE__NAMESPACE": "switchyard-bench"}


# The DAG levers: (preload, flat priorities, other settings). The first named is the reference.
DAG_LEVERS = {
    "no preload": (False, False, {}),
    "preload": (True, False, {}),
    "preload, flat priorities": (True, True, {}),
    # Great Expectations and the driver preloaded, but each task process builds the DAG itself.
    "preload, not the DAG": (True, False, {"preload_dag": False}),
    "preload, validation full": (True, False, {"validation": "full"}),
    # The row count through Great Expectations (SWITCHYARD_VALIDATION=constraints) against the
    # default that takes the load's COPY count while the staging table is the storage it filled.
    "preload, rows counted": (True, False, {"validation": "constraints"}),
    "preload, without unique, small tables in one task, rows counted": (True, False, {
        "without_unique": True, "single_tables": SMALL_TABLES, "validation": "constraints"}),
    # The same spec with no `unique` declared: no unique index on the target, none built on
    # the staging tables. Side by side with "preload", what uniqueness costs end to end.
    "preload, without unique": (True, False, {"without_unique": True}),
    # The small tables' groups (their loads shorter than a task's start at scale 10) as one task
    # each (the spec's `tasks: single`), against a task per step: what the tasks cost end to end.
    "preload, small tables in one task": (True, False, {"single_tables": SMALL_TABLES}),
    # Both spec options together (no unique keys, the small tables in one task each).
    "preload, without unique, small tables in one task": (True, False, {"without_unique": True,
                                                                       "single_tables": SMALL_TABLES}),
    # The prepares in a pool of their own, as big as the load pool, so that they do not take the
    # run's task slots from the loads whose staging tables are ready; alone and with both spec options.
    "preload, prepare pool": (True, False, {"airflow": {"SWITCHYARD_PREPARE_POOL": "switchyard_prepares"}}),
    "preload, without unique, small tables in one task, prepare pool": (True, False, {
        "without_unique": True, "single_tables": SMALL_TABLES,
        "airflow": {"SWITCHYARD_PREPARE_POOL": "switchyard_prepares"}}),
    # A measuring device that switches the checks off: each validate task builds the target's
    # unique index (what the target needs anyway) and runs no other check (no row count, no
    # proofs, no declared expectations). Side by side with "preload", what the default checks
    # other than uniqueness cost end to end. The benchmark's own Airflow only, never the product.
    "preload, index only": (True, False, {"index_only": True}),
    # A measuring device that leaves the loads' value guard out (core/value_guard.py: every record
    # read for a field the server would change): side by side with "preload", what it costs end
    # to end. The benchmark's own Airflow only, never the product.
    "preload, no value guard": (True, False, {"no_value_guard": True}),
    # The loads by the spec's weights alone (SWITCHYARD_LOAD_ORDER), against the default order
    # that pairs each big load with a small one.
    "preload, biggest first": (True, False, {"airflow": {"SWITCHYARD_LOAD_ORDER": "biggest-first"}}),
    # The steps' statements (index builds, row counts) with the server's parallel workers
    # (SWITCHYARD_STEP_PARALLELISM=server) against the default, serial.
    "preload, server's parallel workers": (True, False, {"airflow": {"SWITCHYARD_STEP_PARALLELISM": "server"}}),
    "preload, parallelism 4": (True, False, {"parallelism": 4}),
    # The scheduler's idle sleep local.airflow_env shortens, back at Airflow's default (with the
    # default heartbeat of 5 s, Airflow's own latencies).
    "preload, idle sleep 1 s": (True, False, {"airflow": {"AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "1"}}),
    # Airflow's metadata in a database of the embedded PostgreSQL instead of a SQLite file.
    "preload, metadata in PostgreSQL": (True, False, {"metadata": "postgres"}),
    # A heartbeat a second (one API call and one metadata write per running task and second)
    # with 8 LocalExecutor workers, the local Airflow's settings before the defaults of 5 s and
    # 16 workers (local.py); and each of the two changes alone.
    "preload, heartbeat 1 s, parallelism 8": (True, False, {"parallelism": 8, "airflow": {
        "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1"}}),
    "preload, heartbeat 1 s": (True, False, {"airflow": {"AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "1"}}),
    "preload, parallelism 8": (True, False, {"parallelism": 8}),
    # The COPY slot held through the load's commit (the connection's copy_slot_release), against
    # the default that releases it before the commit writes the loaded files to disk.
    "preload, slot through the commit": (True, False, {"connection_extra": {"copy_slot_release": "commit"}}),
    # Airflow's processes that send no file (the API server, the DAG processor, the triggerer and
    # every task but the loads) at niceness 10: the loads' COPY clients first on a shared core.
    "preload, control plane niced": (True, False, {"airflow": {"SWITCHYARD_BENCH_CONTROL_NICE": "10"}}),
    # The target's connection also in the environment of Airflow's services (AIRFLOW_CONN_<ID>),
    # where each task finds it before asking the API server: one API call less per task.
    "preload, connection from the environment": (True, False, {"connection_env": True}),
    # Each use of a step's connection a session of its own, as before the steps kept one session
    # for their statements (steps.session): what the server's extra backends cost.
    "preload, a session per use": (True, False, {"session_per_use": True}),
    # The steps' target connection rendered from a template field (`{{ params.conn_id }}`), as
    # before they read it from the run's params: a rendered-fields call to the API server per task.
    "preload, the connection rendered": (True, False, {"rendered_conn_id": True}),
    # Airflow's task-side plugins (listeners, macros) loaded by each task process, as before the
    # preload loaded them once in the scheduler.
    "preload, Airflow's plugins per task": (True, False, {"plugins_per_task": True}),
    # Lineage on (docs/lineage.md): every task's OpenLineage events written by the provider's file
    # transport, against "preload" with the provider installed and off (no transport).
    "preload, lineage to a file": (True, False, {"airflow": LINEAGE_TO_A_FILE}),
    # The same, with the provider emitting each event from a thread of the task process instead
    # of a forked process it waits for (its `execute_in_thread`).
    "preload, lineage to a file, in a thread": (True, False, {"airflow": {
        **LINEAGE_TO_A_FILE, "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True"}}),
}


DEFAULT_DAG_LEVERS = ("no preload", "preload", "preload, flat priorities")


def run_dag_levers(uri: str, pg, batch: str, streams: int, slots: int, repeat: int,
                   names: tuple[str, ...] = DEFAULT_DAG_LEVERS,
                   before_run: Callable[[], Any] | None = None) -> dict:
    unknown = [n for n in names if n not in DAG_LEVERS]
    if unknown:
        raise ValueError(f"unknown DAG levers {unknown}; known: {', '.join(DAG_LEVERS)}")
    configs = {name: DAG_LEVERS[name] for name in names}
    runs: dict[str, list[dict]] = {name: [] for name in configs}
    names = list(configs)
    for r in range(repeat):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            preload, flat, options = configs[name]
            say(f"levers: DAG run, {name} (round {r + 1})")
            result = run_dag(uri, pg, batch, streams, slots, preload=preload, flat_priorities=flat, options=options,
                             before_run=before_run)
            compact = compact_dag(result)
            compact["checks"] = checks_ran(result, bool(options.get("index_only")))
            runs[name].append(compact)
            cost = result.get("validation_cost_seconds") or {}
            print(f"    {name}: {result['wall_seconds']} s, validate overhead "
                  f"{result['per_step'].get('validate', {}).get('overhead_median')} s; validation work "
                  f"{sum(cost.values()):.2f} s (" + (", ".join(f"{k} {v:.2f}" for k, v in cost.items()) or "none")
                  + ")", flush=True)
            if not compact["checks"]["as_intended"]:
                print(f"    WARNING: lever {name!r} did not take effect: {compact['checks']['why']}; its figures "
                      f"do not measure it", flush=True)
    out = {}
    base = runs[names[0]]
    for name, rs in runs.items():
        out[name] = {
            "wall_seconds": spread([x["wall_seconds"] for x in rs]),
            "reference": names[0],
            "ratio_to_reference": spread([x["wall_seconds"] / b["wall_seconds"] for x, b in zip(rs, base)]),
            "validate_overhead_median": spread([x["validate_overhead"] for x in rs]),
            "validate_gx_import_median": spread([x["validate_gx_import"] for x in rs]),
            "bare_task_overhead_median": spread([x["bare_overhead"] for x in rs]),
            "task_overhead_median": spread([x["task_overhead"] for x in rs]),
            "efficiency_run": spread([x["efficiency_run"] for x in rs]),
            "pool_busy": spread([x["pool_busy"] for x in rs]),
            "airflow_cpu_seconds": spread([airflow_cpu_total(x["cpu_seconds"] or {}) for x in rs]),
            "server_cpu_seconds": spread([(x["cpu_seconds"] or {}).get("postgres") for x in rs]),
            "server_sessions": spread([x.get("server_sessions") for x in rs]),
            "tail_seconds": spread([x.get("tail_seconds") for x in rs]),
            "validation_work_seconds": spread([x["validation_work"] for x in rs]),
            # False: some round's validate tasks did not run the checks the lever says (see runs' `checks`).
            "in_effect": all(x["checks"]["as_intended"] for x in rs),
            "runs": rs,
        }
    return out


def compact_dag(result: dict) -> dict:
    steps = result["per_step"]
    return {"wall_seconds": result["wall_seconds"], "state": result["state"],
            "validate_overhead": steps.get("validate", {}).get("overhead_median"),
            "validate_gx_import": steps.get("validate", {}).get("gx_import_median"),
            "bare_overhead": _median([steps.get(s, {}).get("overhead_median") for s in ("prepare", "switch")]),
            "load_overhead": steps.get("load", {}).get("overhead_median"),
            "efficiency_run": result["efficiency_run"].get("efficiency"),
            "task_overhead": result.get("task_overhead_median"),
            "validate_gx_preloaded": steps.get("validate", {}).get("gx_preloaded"),
            "efficiency_loads": result["efficiency_loads"].get("efficiency"),
            "pool_busy": result.get("pool_busy_fraction"), "cpu_seconds": result.get("cpu_seconds"),
            "server_sessions": result.get("server_sessions"),
            "head_seconds": result.get("head_seconds"), "tail_seconds": result.get("tail_seconds"),
            "validation_cost": result.get("validation_cost_seconds"),
            "validation_work": _r(sum((result.get("validation_cost_seconds") or {}).values()), 3),
            "priority_weights": result.get("priority_weights"), "run_id": result["run_id"],
            # Each load's fixed cost part by part (task start, the plan's pull, the connection's
            # lookup, ...): where a lever that removes one part shows it took effect.
            "load_fixed_cost": result.get("load_fixed_cost")}
