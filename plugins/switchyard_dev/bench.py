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
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable
# The benchmark's own Airflow (bench_airflow.py), named here too: the other parts read them as bench.<name>.
from switchyard_dev.bench_airflow import (  # noqa: F401
    AIRFLOW_SERVICES, AirflowCpu, DAG_SCHEMA, METADATA_DATABASE, OBSERVE_EVERY, POLL_EVERY,
    _quoted, _ts, airflow_cpu_total, airflow_settings, bench_airflow_home, ensure_airflow,
    metadata_database_url, postmaster_pid, spec_variant, use_bench_airflow)

FLOOR_SCHEMA = "bench_floor"
LOADER_SCHEMA = "bench_loader"
PEER_SCHEMA = "bench_peers"
BENCH_AIRFLOW_PORT = 28090
# The settings lever's second server: SWITCHYARD_BENCH_DEFAULTS_PG_PORT, else a free port.
DEFAULTS_PG_PORT_ENV = "SWITCHYARD_BENCH_DEFAULTS_PG_PORT"
PEER_CONN_ID = "switchyard_bench_peer"
STEPS = ("prepare", "load", "validate", "switch")
_CHUNK = 1 << 20

# PostgreSQL's own defaults for what embedded.BULK_LOAD_SETTINGS changes (PostgreSQL 18).
POSTGRES_DEFAULTS = {
    "wal_level": "replica", "max_wal_senders": "10", "max_wal_size": "'1GB'",
    "checkpoint_timeout": "'5min'", "synchronous_commit": "on", "shared_buffers": "'128MB'",
    "maintenance_work_mem": "'64MB'",
}

# The floor's variants: how the file reaches the table. `dummy` takes the empty field
# after each line's trailing '|'; `strip` removes that '|' while streaming instead.
VARIANTS = {
    "freeze_dummy": {"format": "text", "freeze": True, "eol": "dummy"},
    "nofreeze_dummy": {"format": "text", "freeze": False, "eol": "dummy"},
    "csv_dummy": {"format": "csv", "freeze": True, "eol": "dummy"},
    # CSV that takes every field literally (the loader's format when a NULL marker applies
    # to some columns only): quote byte 0x01, no field NULL.
    "csv_exact": {"format": "csv_exact", "freeze": True, "eol": "dummy"},
    "strip_stream": {"format": "text", "freeze": True, "eol": "strip"},
    # The server reads the file itself (COPY ... FROM '<file>'), no client streaming.
    "server_file": {"format": "text", "freeze": True, "eol": "dummy", "source": "server"},
    # One tablespace per session, each in its own directory (the record's filegroup per stream).
    "tablespaces": {"format": "text", "freeze": True, "eol": "dummy", "tablespaces": True},
    # The floor with the target's unique index: after each file's COPY, in the same session and
    # transaction, the unique index the product builds on that table's staging tables (the
    # spec's `unique` columns), so that it ends where the DAG's staging tables end: the data and
    # the target's unique index. Not a way of loading: the COPY levers leave it out.
    "freeze_unique": {"format": "text", "freeze": True, "eol": "dummy", "unique_index": True},
}
# The floor with the target's unique indexes, as the report names it.
UNIQUE_FLOOR = "floor with the target's unique indexes"
TABLESPACE_PREFIX = "bench_ts_"


def say(text: str) -> None:
    print(f"==> {text}", flush=True)


def now() -> float:
    """Wall-clock seconds since the epoch: comparable across processes."""
    return time.time()


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(values: list[float]) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"n": 0}
    return {"n": len(values), "median": round(statistics.median(values), 4), "min": round(min(values), 4),
            "max": round(max(values), 4)}


# --- the batch ------------------------------------------------------------------------
def batch_files(folder: Path, manifest, spec) -> list[dict]:
    """The batch's non-empty files, biggest first (the order the DAG's weights ask for)."""
    from switchyard.core.batch import resolve_file
    from switchyard.targets.postgres.types import column_type
    files = [{"table": e.table, "stream": e.stream, "path": str(resolve_file(folder, e.file)),
              "bytes": e.bytes, "rows": e.rows,
              "columns": [(c.name, column_type(c)) for c in spec.table(e.table).columns],
              # The spec's unique columns (the key, or a compound key): the target's unique index.
              "unique": list(spec.table(e.table).unique)}
             for e in manifest.entries if e.rows]
    return sorted(files, key=lambda f: -f["bytes"])


def _pool(slots: int):
    import multiprocessing
    return multiprocessing.get_context("fork").Pool(slots)


def run_parallel(worker: Callable, jobs: list[tuple], slots: int) -> tuple[list[dict], float, float, dict]:
    """Jobs in `slots` processes, in the given order; (records, start, end, cpu): epoch
    seconds, and the CPU seconds of the server and of the client processes meanwhile."""
    from switchyard_dev import cputime
    roots = {"postgres": postmaster_pid(), "bench": os.getpid()}
    with _pool(slots) as pool:
        # A warm pool: process start-up is not part of a load.
        pool.map(abs, range(slots))
        before = cputime.snapshot(roots, split_children=("bench",))
        started = now()
        records = list(pool.imap_unordered(worker, jobs, chunksize=1))
        ended = now()
        pool.close()
        pool.join()  # reaped: the clients' CPU is now in this process's children's times
    cpu = cputime.delta(before, cputime.snapshot(roots, split_children=("bench",)))
    cpu["clients"] = cpu.pop("bench children", None)
    cpu.pop("bench", None)
    return records, started, ended, cpu


def summarise(name: str, records: list[dict], started: float, ended: float, **extra: Any) -> dict:
    rows = sum(r["rows"] for r in records)
    nbytes = sum(r["bytes"] for r in records)
    wall = ended - started
    return {"name": name, "rows": rows, "bytes": nbytes, "wall_seconds": round(wall, 3),
            "rows_per_s": round(rows / wall, 1), "mb_per_s": round(nbytes / 1e6 / wall, 2),
            "started": started, "ended": ended, "files": sorted(records, key=lambda r: r["start"]), **extra}


# --- 1. the floor: raw COPY sessions ---------------------------------------------------
def _stripped(fh):
    """The file's bytes with each line's trailing '|' removed, in chunks of whole lines."""
    carry = b""
    while chunk := fh.read(_CHUNK):
        buf = carry + chunk
        cut = buf.rfind(b"\n") + 1
        carry = buf[cut:]
        yield buf[:cut].replace(b"|\n", b"\n")
    if carry:
        yield carry[:-1] if carry.endswith(b"|") else carry


def ident(name: str) -> str:
    """A PostgreSQL identifier, quoted (a double quote inside doubled)."""
    return '"' + name.replace('"', '""') + '"'


def floor_unique_index_sql(schema: str, table: str, columns: list[str] | tuple[str, ...]) -> str:
    """The target's unique index on a floor table: the spec's unique columns, in their order, as
    the adapter builds it on a staging table (unique_index.sql), named `<table>_unique`."""
    if not columns:
        raise ValueError(f"{table}: no unique columns, no unique index")
    return (f"CREATE UNIQUE INDEX {ident(table + '_unique')} ON {ident(schema)}.{ident(table)} "
            f"({', '.join(ident(c) for c in columns)})")


def floor_one(job: tuple) -> dict:
    """One file into a fresh table by one COPY session, created in the loading transaction
    (and, for the unique-index variant, the table's unique index built after the COPY in the
    same transaction)."""
    import psycopg
    from switchyard_dev import cputime
    uri, schema, f, variant, scan = job
    v = VARIANTS[variant]
    name = f'{f["table"]}_{f["stream"]}'
    table = f"{ident(schema)}.{ident(name)}"
    cols = [f'"{n}" {t}' for n, t in f["columns"]]
    if v["eol"] == "dummy":
        cols.append('"eol" text')
    options = {"text": "FORMAT text, DELIMITER '|'", "csv": "FORMAT csv, DELIMITER '|'",
               "csv_exact": "FORMAT csv, DELIMITER '|', QUOTE E'\\x01', FORCE_NOT_NULL *"}[v["format"]]
    if v["freeze"]:
        options += ", FREEZE"
    where = f' TABLESPACE "{f["tablespace"]}"' if v.get("tablespaces") else ""
    start = now()
    with psycopg.connect(uri, application_name="switchyard-bench") as conn:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
            cur.execute(f"CREATE TABLE {table} ({', '.join(cols)}){where}")
            if v.get("source") == "server":
                cur.execute(f"COPY {table} FROM {_literal(f['path'])} ({options})")
            else:
                with open(f["path"], "rb") as fh, cur.copy(f"COPY {table} FROM STDIN ({options})") as cp:
                    for chunk in (_stripped(fh) if v["eol"] == "strip" else iter(lambda: fh.read(_CHUNK), b"")):
                        # Text format as is is byte-exact only for data without a backslash
                        # (TPC-H's): the floor refuses other data rather than change it.
                        if v["format"] == "text" and b"\\" in chunk:
                            raise RuntimeError(f"{f['path']}: holds a backslash, which the floor's text "
                                               f"format would change")
                        cp.write(chunk)
            rows = cur.rowcount
            copied = now()
            index_seconds = index_cpu = None
            if v.get("unique_index") and f.get("unique"):
                # The index build with the settings the product's validate step gives it.
                for setting, value in product_step_settings().items():
                    cur.execute("SELECT set_config(%s, %s, true)", (setting, value))
                backend = conn.info.backend_pid
                cpu_before = cputime.process_cpu(backend)
                cur.execute(floor_unique_index_sql(schema, name, f["unique"]))
                index_seconds = round(now() - copied, 4)
                cpu_after = cputime.process_cpu(backend)
                if cpu_before is not None and cpu_after is not None:
                    index_cpu = round(cpu_after - cpu_before, 3)
        end = now()
        scan_seconds = None
        if scan:
            # The first read after a load without FREEZE sets hint bits and writes every page
            # again: a load option is only cheaper if it stays cheaper through this scan.
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            scan_seconds = round(now() - end, 4)
    return {"table": f["table"], "stream": f["stream"], "rows": rows, "bytes": f["bytes"], "start": start,
            "end": end, "seconds": round(end - start, 4), "scan_seconds": scan_seconds, "pid": os.getpid(),
            "copy_seconds": round(copied - start, 4), "index_seconds": index_seconds,
            "index_leader_cpu_seconds": index_cpu}


def product_step_settings() -> dict[str, str]:
    """The server settings the product's steps run with (SWITCHYARD_STEP_PARALLELISM)."""
    from switchyard.settings import get
    from switchyard.targets.postgres.session import step_settings
    return step_settings(get().step_parallelism)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def reset_schema(uri: str, *schemas: str, create: bool = True) -> None:
    import psycopg
    with psycopg.connect(uri, autocommit=True) as conn:
        for s in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')
            if create:
                conn.execute(f'CREATE SCHEMA "{s}"')


def run_floor(uri: str, files: list[dict], slots: int, variant: str = "freeze_dummy", label: str = "floor",
              scan: bool = False) -> dict:
    reset_schema(uri, FLOOR_SCHEMA)
    if VARIANTS[variant].get("tablespaces"):
        files = [dict(f, tablespace=f"{TABLESPACE_PREFIX}{i % slots + 1}") for i, f in enumerate(files)]
    try:
        records, started, ended, cpu = run_parallel(
            floor_one, [(uri, FLOOR_SCHEMA, f, variant, scan) for f in files], slots)
    finally:
        reset_schema(uri, FLOOR_SCHEMA, create=False)
    bad = [r for r in records if r["rows"] != next(f["rows"] for f in files
                                                    if (f["table"], f["stream"]) == (r["table"], r["stream"]))]
    if bad:
        raise RuntimeError(f"{label}: row counts differ from the manifest for {bad[:3]}")
    extra: dict[str, Any] = {}
    if scan:
        extra["scan_seconds_total"] = round(sum(r["scan_seconds"] for r in records), 3)
        extra["load_and_scan_wall_seconds"] = round(max(r["end"] + r["scan_seconds"] for r in records) - started, 3)
    if VARIANTS[variant].get("unique_index"):
        extra["unique_index"] = index_summary(records)
    return summarise(label, records, started, ended, variant=variant, sessions=slots, cpu_seconds=cpu, **extra)


def index_summary(records: list[dict]) -> dict:
    """What the unique-index variant's index builds took: wall seconds in their sessions and the
    CPU seconds of those sessions' own backends, in all and per table. The backend leads the
    build: the parallel workers PostgreSQL adds for a big table (max_parallel_maintenance_workers,
    as for the product's index) are other processes, not counted here; the server tree's CPU
    during the whole floor counts them (unique_floor_cost)."""
    built = [r for r in records if r.get("index_seconds") is not None]
    by_table: dict[str, dict] = {}
    for r in built:
        t = by_table.setdefault(r["table"], {"indexes": 0, "seconds": 0.0, "leader_cpu_seconds": 0.0,
                                             "copy_seconds": 0.0})
        t["indexes"] += 1
        t["seconds"] = round(t["seconds"] + r["index_seconds"], 4)
        t["copy_seconds"] = round(t["copy_seconds"] + r["copy_seconds"], 4)
        if r.get("index_leader_cpu_seconds") is not None:
            t["leader_cpu_seconds"] = round(t["leader_cpu_seconds"] + r["index_leader_cpu_seconds"], 3)
    cpu = [r["index_leader_cpu_seconds"] for r in built if r.get("index_leader_cpu_seconds") is not None]
    return {"indexes": len(built), "seconds_total": round(sum(r["index_seconds"] for r in built), 3),
            "leader_cpu_seconds_total": round(sum(cpu), 3) if cpu else None,
            "copy_seconds_total": round(sum(r["copy_seconds"] for r in records), 3),
            "by_table": dict(sorted(by_table.items(), key=lambda kv: -kv[1]["seconds"]))}


def run_unique_floor(uri: str, files: list[dict], slots: int) -> dict:
    """The floor with the target's unique indexes: the floor's sessions, each file's COPY then its
    table's unique index in the same transaction (the DAG's staging tables' end state)."""
    return run_floor(uri, files, slots, "freeze_unique", label=UNIQUE_FLOOR)


def print_unique_floor(r: dict) -> None:
    ix = r.get("unique_index") or {}
    print(f"    {r['rows_per_s']:,.0f} rows/s in {r['wall_seconds']:.2f} s; {ix.get('indexes', 0)} unique indexes, "
          f"built in {ix.get('seconds_total', 0):.2f} s in all", flush=True)


def unique_floor_cost(floor: dict | None, with_index: dict | None) -> dict:
    """The indexes' cost in the floor: the two floors' wall and server CPU seconds (the PostgreSQL
    tree's, parallel index workers included) side by side, and the index builds' own seconds."""
    if not floor or not with_index:
        return {}
    ix = with_index.get("unique_index") or {}
    cpu0, cpu1 = (floor.get("cpu_seconds") or {}).get("postgres"), (with_index.get("cpu_seconds") or {}).get("postgres")
    return {"floor_wall_seconds": floor["wall_seconds"], "with_indexes_wall_seconds": with_index["wall_seconds"],
            "added_wall_seconds": _r(with_index["wall_seconds"] - floor["wall_seconds"]),
            "floor_server_cpu_seconds": cpu0, "with_indexes_server_cpu_seconds": cpu1,
            "added_server_cpu_seconds": _r(cpu1 - cpu0, 2) if cpu0 is not None and cpu1 is not None else None,
            "index_builds_seconds": ix.get("seconds_total"),
            "index_builds_leader_cpu_seconds": ix.get("leader_cpu_seconds_total"),
            "ratio_to_floor": _r(floor["wall_seconds"] / with_index["wall_seconds"])}


# --- 2. the loader alone ----------------------------------------------------------------
def loader_one(job: tuple) -> dict:
    """The adapter's own code path for one file: prepare (fresh staging table), then load."""
    from switchyard.core.planner import StreamPlan
    from switchyard.core.spec import load_spec
    from switchyard.targets.postgres import PostgresAdapter
    uri, schema, raw, path = job
    s = StreamPlan(**raw)
    adapter = PostgresAdapter(load_spec("tpch"), uri=uri, schema=schema)
    start = now()
    adapter.prepare(s)
    prepared = now()
    result = adapter.load(s, Path(path))
    end = now()
    return {"table": s.table, "stream": s.stream, "rows": result.rows, "bytes": result.bytes, "start": start,
            "end": end, "seconds": round(end - start, 4), "prepare_seconds": round(prepared - start, 4),
            "load_seconds": round(result.seconds, 4), "pid": os.getpid()}


def run_loader(uri: str, folder: Path, files: list[dict], slots: int) -> dict:
    from switchyard.core.batch import read_manifest
    from switchyard.core.planner import plan_batch
    from switchyard.core.spec import load_spec
    from switchyard.targets.postgres import PostgresAdapter
    spec = load_spec("tpch")
    plan = plan_batch(spec, read_manifest(folder, spec))
    adapter = PostgresAdapter(spec, uri=uri, schema=LOADER_SCHEMA)
    reset_schema(uri, LOADER_SCHEMA, adapter.staging_schema, create=False)
    adapter.setup(plan)
    order = {(f["table"], f["stream"]): i for i, f in enumerate(files)}
    streams = sorted((s for t in plan.tables for s in t.streams if not s.empty and (s.table, s.stream) in order),
                     key=lambda s: order[(s.table, s.stream)])
    jobs = [(uri, LOADER_SCHEMA, s.to_dict(), str(resolve(folder, s.file))) for s in streams]
    try:
        records, started, ended, cpu = run_parallel(loader_one, jobs, slots)
    finally:
        reset_schema(uri, LOADER_SCHEMA, adapter.staging_schema, create=False)
    return summarise("loader alone", records, started, ended, sessions=slots, cpu_seconds=cpu,
                     prepare_seconds_median=_median([r["prepare_seconds"] for r in records]))


def resolve(folder: Path, relative: str) -> Path:
    from switchyard.core.batch import resolve_file
    return resolve_file(folder, relative)


# --- 3. end to end through Airflow ------------------------------------------------------


def stop_bench_airflows() -> None:
    """Stop the benchmark's Airflow services, whichever metadata database they use."""
    from switchyard_dev import local
    for metadata in ("postgres", "sqlite"):  # sqlite last: the default stays selected
        use_bench_airflow(metadata)
        local.stop_services()


def run_dag(uri: str, pg, batch: str, streams: int, slots: int, preload: bool = True,
            flat_priorities: bool = False, timeout: float = 7200, options: dict | None = None,
            pool: int | None = None, before_run: Callable[[], Any] | None = None) -> dict:
    """One DAG run: the target's COPY slots (the connection's `copy_slots`) are `slots`, the
    load pool `pool` (default: what `switchyard pool sync` sets for `slots`). `before_run` is
    called once the benchmark's Airflow runs, just before the run is triggered."""
    from switchyard_dev import demo
    from switchyard.airflow.dag_factory import DagConfig, build_dag
    pool = pool or demo.default_pool_size(slots)
    api, startup = ensure_airflow(streams, preload, flat_priorities, options, uri)
    demo.ensure_connection(api, pg, {"copy_slots": slots, **(options or {}).get("connection_extra", {})})
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
                       pool=pool, copy_slots=slots)


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
    return {"name": "DAG end to end", "state": state, "run_id": run.get("dag_run_id"), "rows": rows,
            "bytes": nbytes, "wall_seconds": _r(wall), "rows_per_s": _r(rows / wall if wall else None, 1),
            "mb_per_s": _r(nbytes / 1e6 / wall if wall else None, 2), "started": run_start, "ended": run_end,
            "load_window_seconds": _r(load_span),
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


def _r(value: float | None, digits: int = 3) -> float | None:
    return round(value, digits) if value is not None else None


# --- 4. peers: what a user writes with stock Airflow -----------------------------------
def _sample_lines(path: str, n: int) -> list[bytes]:
    out = []
    with open(path, "rb") as fh:
        for line in fh:
            out.append(line)
            if len(out) >= n:
                break
    return out


def _peer_table(uri: str, columns: list[tuple[str, str]]) -> str:
    import psycopg
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{PEER_SCHEMA}"')
        conn.execute(f'DROP TABLE IF EXISTS "{PEER_SCHEMA}"."sample"')
        conn.execute(f'CREATE TABLE "{PEER_SCHEMA}"."sample" ({", ".join(f"{n} {t}" for n, t in columns)})')
    return f"{PEER_SCHEMA}.sample"


def peer_insert_rows(uri: str, lines: list[bytes], columns, executemany: bool) -> float:
    from airflow.providers.postgres.hooks.postgres import PostgresHook
    table = _peer_table(uri, columns)
    started = time.monotonic()
    rows = [tuple(line.decode().rstrip("\n").rstrip("|").split("|")) for line in lines]
    PostgresHook(postgres_conn_id=PEER_CONN_ID).insert_rows(
        table, rows, target_fields=[n for n, _ in columns], commit_every=1000, executemany=executemany)
    return time.monotonic() - started


def peer_to_sql(uri: str, lines: list[bytes], columns) -> float:
    import io
    import pandas as pd
    from sqlalchemy import create_engine
    _peer_table(uri, columns)
    engine = create_engine(uri.replace("postgresql://", "postgresql+psycopg://", 1))
    names = [n for n, _ in columns]
    started = time.monotonic()
    dates = [n for n, t in columns if t == "date"]
    frame = pd.read_csv(io.BytesIO(b"".join(lines)), sep="|", header=None, names=names + ["_eol"],
                        usecols=names, parse_dates=dates)
    frame.to_sql("sample", engine, schema=PEER_SCHEMA, if_exists="append", index=False)
    seconds = time.monotonic() - started
    engine.dispose()
    return seconds


def peer_copy_expert(uri: str, path: str, columns) -> float:
    """The hook's COPY (one session, no FREEZE): the stock way that does use COPY."""
    from airflow.providers.postgres.hooks.postgres import PostgresHook
    import psycopg
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{PEER_SCHEMA}"')
        conn.execute(f'DROP TABLE IF EXISTS "{PEER_SCHEMA}"."sample"')
        conn.execute(f'CREATE TABLE "{PEER_SCHEMA}"."sample" '
                     f'({", ".join(f"{n} {t}" for n, t in columns)}, eol text)')
    started = time.monotonic()
    PostgresHook(postgres_conn_id=PEER_CONN_ID).copy_expert(
        f"COPY {PEER_SCHEMA}.sample FROM STDIN (FORMAT text, DELIMITER '|')", path)
    return time.monotonic() - started


def run_peers(uri: str, files: list[dict], slots: int, seconds_each: float) -> list[dict]:
    """Each peer on a sample of lineitem sized to take about `seconds_each`, as one session."""
    os.environ[f"AIRFLOW_CONN_{PEER_CONN_ID.upper()}"] = uri
    big = next(f for f in files if f["table"] == "lineitem")
    columns = big["columns"]
    avg_line = big["bytes"] / big["rows"]
    peers = {
        "PostgresHook.insert_rows": lambda lines: peer_insert_rows(uri, lines, columns, executemany=False),
        "PostgresHook.insert_rows(executemany)": lambda lines: peer_insert_rows(uri, lines, columns, True),
        "pandas read_csv + to_sql": lambda lines: peer_to_sql(uri, lines, columns),
    }
    out = []
    for name, fn in peers.items():
        probe_rows = 20000
        probe = fn(_sample_lines(big["path"], probe_rows))
        n = int(min(big["rows"], max(probe_rows, seconds_each * probe_rows / max(probe, 1e-6))))
        seconds = fn(_sample_lines(big["path"], n))
        out.append(peer_record(name, n, n * avg_line, seconds, slots))
    seconds = peer_copy_expert(uri, big["path"], columns)
    out.append(peer_record("PostgresHook.copy_expert", big["rows"], big["bytes"], seconds, slots))
    reset_schema(uri, PEER_SCHEMA, create=False)
    return out


@contextmanager
def output_to(path: Path):
    """This process's stdout and stderr into a file: insert_rows logs a line per commit."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as fh:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def peer_record(name: str, rows: int, nbytes: float, seconds: float, slots: int) -> dict:
    # One session measured; the batch rate assumes `slots` such sessions scale perfectly,
    # which flatters the peers.
    return {"name": name, "sample_rows": rows, "sample_seconds": round(seconds, 3),
            "session_rows_per_s": round(rows / seconds, 1), "session_mb_per_s": round(nbytes / 1e6 / seconds, 3),
            "rows_per_s": round(slots * rows / seconds, 1), "mb_per_s": round(slots * nbytes / 1e6 / seconds, 3),
            "extrapolated": True, "sessions": slots}


# --- levers -------------------------------------------------------------------------------
def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def defaults_pg_port() -> int:
    from switchyard_dev.settings import value
    return value(DEFAULTS_PG_PORT_ENV) or free_port()


def defaults_server():
    """A second embedded PostgreSQL with PostgreSQL's default settings, for the settings lever."""
    from switchyard_dev.embedded import EmbeddedPostgres, state_dir
    pg = EmbeddedPostgres(root=state_dir() / "bench" / "pg-defaults", port=defaults_pg_port())
    fresh = not (pg.pgdata / "PG_VERSION").exists()
    pg.start()
    if fresh:
        with open(pg.pgdata / "postgresql.auto.conf", "a") as fh:
            fh.write("# the benchmark's reference: PostgreSQL's defaults (later lines win)\n")
            for key, value in POSTGRES_DEFAULTS.items():
                fh.write(f"{key} = {value}\n")
        pg.stop()
        pg.start()
    return pg


def let_server_read(folder: Path) -> None:
    """As root the embedded server runs as its own user: let it read the batch (server-side COPY)."""
    if os.geteuid() == 0:
        from switchyard_dev.embedded import _open_up
        _open_up(folder, 0o044)


def create_tablespaces(uri: str, slots: int) -> dict:
    """One tablespace per session in its own directory; where they sit (device ids) is reported."""
    import psycopg
    from switchyard_dev.embedded import OS_USER, state_dir
    base = state_dir() / "bench" / "tablespaces"
    drop_tablespaces(uri, slots)
    devices = {}
    with psycopg.connect(uri, autocommit=True) as conn:
        pgdata = conn.execute("SHOW data_directory").fetchone()[0]
        for k in range(1, slots + 1):
            d = base / str(k)
            d.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                import shutil
                shutil.chown(d, OS_USER, OS_USER)
                for parent in d.parents:
                    parent.chmod(parent.stat().st_mode | 0o011)
            conn.execute(f'CREATE TABLESPACE "{TABLESPACE_PREFIX}{k}" LOCATION {_literal(str(d))}')
            devices[str(d)] = os.stat(d).st_dev
    devices["data_directory"] = os.stat(pgdata).st_dev
    return {"directories": devices, "same_device": len(set(devices.values())) == 1}


def drop_tablespaces(uri: str, slots: int) -> None:
    import psycopg
    with psycopg.connect(uri, autocommit=True) as conn:
        for k in range(1, slots + 1):
            conn.execute(f'DROP TABLESPACE IF EXISTS "{TABLESPACE_PREFIX}{k}"')


def run_copy_levers(uri: str, files: list[dict], slots: int, repeat: int, folder: Path) -> dict:
    """The floor's variants and server settings, side by side, in rotating order."""
    let_server_read(folder)
    tablespaces = create_tablespaces(uri, slots)
    say("levers: defaults server (PostgreSQL's own settings)")
    other = defaults_server()
    try:
        cases = {name: (uri, name) for name, v in VARIANTS.items() if not v.get("unique_index")}
        cases["server_defaults"] = (other.uri(), "freeze_dummy")
        runs: dict[str, list[dict]] = {name: [] for name in cases}
        names = list(cases)
        for r in range(repeat):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                target, variant = cases[name]
                result = run_floor(target, files, slots, variant, label=name, scan=True)
                runs[name].append({k: result[k] for k in ("rows_per_s", "mb_per_s", "wall_seconds",
                                                          "scan_seconds_total", "load_and_scan_wall_seconds")})
                print(f"    round {r + 1} {name:<16} {result['rows_per_s']:>12,.0f} rows/s "
                      f"{result['wall_seconds']:7.2f} s; first scan after it {result['scan_seconds_total']:.2f} s",
                      flush=True)
    finally:
        other.stop()
        reset_schema(uri, FLOOR_SCHEMA, create=False)
        drop_tablespaces(uri, slots)
    base = runs["freeze_dummy"]
    out = {}
    for name, rs in runs.items():
        ratios = [x["rows_per_s"] / b["rows_per_s"] for x, b in zip(rs, base)]
        out[name] = {"rows_per_s": spread([x["rows_per_s"] for x in rs]),
                     "wall_seconds": spread([x["wall_seconds"] for x in rs]),
                     "ratio_to_freeze_dummy": spread(ratios), "variant": cases[name][1],
                     "first_scan_seconds_total": spread([x["scan_seconds_total"] for x in rs]),
                     "load_and_scan_wall_seconds": spread([x["load_and_scan_wall_seconds"] for x in rs]),
                     "server": "defaults" if name == "server_defaults" else "bulk-load settings"}
    out["tablespaces"]["placement"] = tablespaces
    return out


# --- validation lever ----------------------------------------------------------------------
_GX_IMPORT = """
import json, resource, time
t = time.perf_counter()
import great_expectations, great_expectations.expectations
print(json.dumps({"seconds": time.perf_counter() - t,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def gx_import_cost(rounds: int = 2) -> dict:
    """Importing GX in a fresh process: the cost every validate task pays without the preload."""
    import subprocess
    runs = [json.loads(subprocess.run([sys.executable, "-c", _GX_IMPORT], check=True, capture_output=True,
                                      text=True, env=dict(os.environ, GX_ANALYTICS_ENABLED="False"))
                       .stdout.strip().splitlines()[-1]) for _ in range(rounds)]
    return {"seconds": spread([r["seconds"] for r in runs]), "max_rss_mb": spread([r["max_rss_mb"] for r in runs])}


def run_validation_lever(uri: str, folder: Path, files: list[dict], repeat: int) -> dict:
    """GX with every expectation scanning vs GX counting rows with the key proven by constraints,
    on the biggest file of each of lineitem and orders, loaded by the adapter (GX imported first)."""
    from switchyard.core.batch import read_manifest
    from switchyard.core.planner import plan_batch
    from switchyard.core.spec import load_spec
    from switchyard.targets.postgres import PostgresAdapter
    from switchyard.observability.validation import validate_table
    spec = load_spec("tpch")
    tables = [t for t in ("lineitem", "orders") if any(f["table"] == t for f in files)]
    plan = plan_batch(spec, read_manifest(folder, spec), tables)
    adapter = PostgresAdapter(spec, uri=uri, schema=LOADER_SCHEMA)
    reset_schema(uri, LOADER_SCHEMA, adapter.staging_schema, create=False)
    adapter.setup(plan)
    chosen = [max((s for s in t.streams if not s.empty), key=lambda s: s.rows) for t in plan.tables]
    import great_expectations  # noqa: F401  (import time is not what this lever compares)
    out: dict[str, Any] = {"gx_import_fresh_process": gx_import_cost()}
    try:
        for s in chosen:
            adapter.prepare(s)
            adapter.load(s, resolve(folder, s.file))
            times: dict[str, list[float]] = {"all four through GX": [], "row count through GX, key proven": []}
            for r in range(repeat):
                for name in (list(times) if r % 2 == 0 else list(times)[::-1]):
                    o = validate_table(adapter.sqlalchemy_url(), adapter.staging_schema, s.staging_table,
                                       spec.table(s.table).key, s.rows, s.key_min, s.key_max,
                                       trust_constraints=name != "all four through GX")
                    if not o.success:
                        raise RuntimeError(f"validation lever: {s.group_id} failed validation: {o.failures()}")
                    times[name].append(o.seconds - o.import_seconds)
            full, lean = times.values()
            out[s.group_id] = {"rows": s.rows, **{k: spread(v) for k, v in times.items()},
                               "saved_seconds": spread([a - b for a, b in zip(full, lean)])}
            print(f"    {s.group_id} ({s.rows:,} rows): all four through GX {statistics.median(full):.3f} s, "
                  f"key proven {statistics.median(lean):.3f} s", flush=True)
    finally:
        reset_schema(uri, LOADER_SCHEMA, adapter.staging_schema, create=False)
    return out


# TPC-H's tables whose loads per stream are shorter than a task's start (at scale 10 with 8
# streams: 12,500 to 250,000 rows, 0.05-0.3 s of COPY); partsupp, orders, lineitem are not.
SMALL_TABLES = ("supplier", "customer", "part", "nation", "region")

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
}
DEFAULT_DAG_LEVERS = ("no preload", "preload", "preload, flat priorities")


def validate_index_only(url: str, schema: str, table: str, key: str, expected_rows: int, key_min: Any,
                        key_max: Any, engine: str = "postgres", trust_constraints: bool | None = None, *,
                        unique: Any = (), unique_result: dict | None = None, **ignored: Any):
    """`validation.validate_table` with every check switched off but the unique index's: the
    outcome reports what `prove_unique` found (validate_stream built the index before and adds
    its seconds to the outcome), and nothing else runs. The "index only" lever's stand-in."""
    from switchyard.observability.validation import ValidationOutcome, _unique_check
    checks = [_unique_check(list(unique), unique_result)] if unique and unique_result is not None else []
    return ValidationOutcome(success=all(c.success for c in checks), checks=checks, seconds=0.0, import_seconds=0.0,
                             gx_preloaded="great_expectations.expectations" in sys.modules)


def switch_checks_off() -> None:
    """The "index only" DAG lever, a measuring device (SWITCHYARD_BENCH_INDEX_ONLY=1 in the
    benchmark's own Airflow, from its local settings): every validate task of this process and
    of the task processes it forks builds the target's unique index and runs no other check."""
    from switchyard.observability import validation
    validation.validate_table = validate_index_only
    print("switchyard bench: validation checks switched off but the unique index (the 'index only' lever)",
          file=sys.stderr, flush=True)


def checks_ran(result: dict, index_only: bool) -> dict:
    """Whether a DAG run's validate tasks ran the checks the lever says: with `index_only`, each
    reports a cost of `unique` alone; without it, at least one reports another kind of check."""
    validates = [t for t in result.get("tasks") or [] if t["step"] == "validate"]
    kinds = [set(t.get("validation_cost") or {}) for t in validates]
    other = sorted(set().union(*kinds) - {"unique"}) if kinds else []
    only_unique = sum(1 for k in kinds if k == {"unique"})
    reported = sum(1 for t in validates if t.get("validation_cost") is not None)
    if index_only:
        ok = bool(validates) and only_unique == len(validates)
        why = ("" if ok else f"{len(validates) - only_unique} of {len(validates)} validate tasks reported more "
               f"than the unique index or nothing ({', '.join(other) or 'no cost reported'})")
    else:
        ok = not validates or bool(other)
        why = "" if ok else "every validate task reported the unique index alone: the checks were switched off"
    return {"index_only": index_only, "validate_tasks": len(validates), "reported": reported,
            "only_unique": only_unique, "other_kinds": other, "as_intended": ok, "why": why}


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
            "validation_cost": result.get("validation_cost_seconds"),
            "validation_work": _r(sum((result.get("validation_cost_seconds") or {}).values()), 3),
            "priority_weights": result.get("priority_weights"), "run_id": result["run_id"]}


# --- DAG parse time -------------------------------------------------------------------------
_PARSE = """
import importlib.util, json, sys, time
t0 = time.perf_counter()
import airflow.sdk  # already imported in Airflow's dag-processor: timed apart
t1 = time.perf_counter()
spec = importlib.util.spec_from_file_location("switchyard_dag_file", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
t2 = time.perf_counter()
# What the dag-processor does next with the DAG at every parse: serialize it (to compare with
# the stored version, and store it when it changed).
from airflow.serialization.serialized_objects import DagSerialization
t3 = time.perf_counter()
serialized = json.dumps(DagSerialization.to_dict(module.dag))
t4 = time.perf_counter()
print(json.dumps({"dag_file_seconds": t2 - t1, "airflow_sdk_import_seconds": t1 - t0,
                  "serialize_seconds": t4 - t3, "serialized_mb": len(serialized) / 1e6,
                  "tasks": len(module.dag.tasks)}))
"""


def dag_file() -> Path:
    return Path(__file__).resolve().parents[2] / "dags" / "switchyard_tpch.py"


def parse_seconds(streams: int, rounds: int = 3) -> dict:
    """The DAG file imported in a fresh process with SWITCHYARD_STREAMS set, `rounds` times."""
    import subprocess
    env = dict(os.environ, SWITCHYARD_STREAMS=str(streams),
               PYTHONPATH=os.pathsep.join(filter(None, [str(dag_file().parents[1] / "plugins"),
                                                        os.environ.get("PYTHONPATH")])))
    runs = []
    for _ in range(rounds):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", _PARSE, str(dag_file())], env=env, check=True,
                              capture_output=True, text=True)
        r = json.loads(done.stdout.strip().splitlines()[-1])
        r["process_seconds"] = time.perf_counter() - started
        runs.append(r)
    return {"streams": streams, "tasks": runs[0]["tasks"], "rounds": rounds,
            "dag_file_seconds": spread([r["dag_file_seconds"] for r in runs]),
            "airflow_sdk_import_seconds": spread([r["airflow_sdk_import_seconds"] for r in runs]),
            "serialize_seconds": spread([r["serialize_seconds"] for r in runs]),
            "serialized_mb": round(runs[0]["serialized_mb"], 2),
            "process_seconds": spread([r["process_seconds"] for r in runs])}


# --- targets ----------------------------------------------------------------------------------
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


def reach_line(shape: str, section: dict) -> str | None:
    """What the shape's end-to-end target can be at all here: no DAG whose staging tables end with
    the target's unique indexes does less than the floor that builds them, so floor / that floor
    bounds its ratio, whatever its schedule and Airflow's cost."""
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
    want = SHAPE_TARGETS[shape]
    verdict = "within reach" if ceiling >= want else "out of reach with the unique indexes on this machine"
    return f"the same end state allows at most {how} (wanted {want}: {verdict})"


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


# --- the report -----------------------------------------------------------------------------
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
    return lines


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
    v = dag["per_step"].get("validate")
    if v and v.get("gx_preloaded") is not None:
        lines.append(f"validate tasks that found GX already imported (preload): {v['gx_preloaded']} of {v['tasks']}")
    li = dag.get("lineitem") or {}
    if li:
        lines.append(f"lineitem end to end: {li['rows']:,} rows in {li['seconds']:.2f} s = {li['rows_per_s']:,.0f} rows/s "
                     f"(first lineitem task start to last lineitem switch end)")
    return lines


def machine() -> dict:
    import platform
    info = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    try:
        with open("/proc/meminfo") as fh:
            info["mem_gb"] = round(int(fh.readline().split()[1]) / 1e6, 1)
        with open("/proc/cpuinfo") as fh:
            info["cpu"] = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), None)
    except OSError:
        pass
    return info


def output_dir(base: Path | None = None) -> Path:
    from switchyard_dev.embedded import state_dir
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = (base or state_dir() / "bench") / stamp
    out.mkdir(parents=True, exist_ok=True)
    return out


def load_average() -> dict:
    """The machine's load when a figure was taken: the machine may be shared."""
    one, five, fifteen = os.getloadavg()
    return {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "1min": round(one, 2),
            "5min": round(five, 2), "15min": round(fifteen, 2)}


# --- shapes: where the server runs ---------------------------------------------------------
# laptop: the server, Airflow and the clients share every core (the default machine state);
# production: the server on cores of its own, Airflow and the clients on the others, each
# measured against a floor taken in the same shape (as many COPY sessions as server cores).
SHAPES = ("laptop", "production")
SHAPE_TARGETS = {"laptop": 0.7, "production": 0.9}


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


def _cpus(cpus) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def shape_targets(shape: str, section: dict, scale: float, streams: int) -> list[dict]:
    """The shape's end-to-end target: its DAG against its own floor."""
    floor, dag = section.get("floor") or {}, section.get("dag") or {}
    want = SHAPE_TARGETS[shape]
    ok = dag.get("state") == "success" and dag.get("wall_seconds") and floor.get("wall_seconds")
    ratio = _r(floor["wall_seconds"] / dag["wall_seconds"]) if ok else None
    defined = scale >= 10 and streams >= 8
    where = ("server, Airflow and clients on all cores" if shape == "laptop" else
             f"server on CPU {_cpus(section.get('server_cpus') or [])}, Airflow and clients on CPU "
             f"{_cpus(section.get('other_cpus') or [])}")
    out = [_target(f"floor / makespan, {shape} shape", f">= {want} at scale 10, 8 streams", ratio,
                   (ratio >= want) if ratio is not None and defined else None,
                   f"floor wall over the DAG run's wall, {where} (scale {scale:g}, {streams} streams"
                   + ("" if defined else "; the target is set for scale 10, 8 streams: reported, not judged") + ")")]
    # A bound reported beside the headline (which stays the COPY-only floor): the floor that
    # reaches the same end state as the DAG's staging tables, the data and the target's unique index.
    indexed = section.get("floor_unique") or {}
    if indexed:
        ratio = _r(indexed["wall_seconds"] / dag["wall_seconds"]) if ok else None
        out.append(_target(f"{UNIQUE_FLOOR} / makespan, {shape} shape", f">= {want}, same end state", ratio,
                           (ratio >= want) if ratio is not None and defined else None,
                           f"wall of the floor's sessions each building its table's unique index after its COPY "
                           f"(the same end state as the DAG's staging tables: the data and the target's unique "
                           f"index) over the DAG run's wall, {where} (scale {scale:g}, {streams} streams"
                           + ("" if defined else "; set for scale 10, 8 streams: reported, not judged") + ")"))
    return out


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


def run(scale: float, streams: int, slots: int | None = None, parts: tuple[str, ...] = ("floor", "loader", "dag",
        "graph", "peers", "parse"), levers: bool = False, repeat: int = 3, peer_seconds: float = 15.0, out: Path | None = None,
        keep_airflow: bool = False, preload: bool = True, plot: bool = True, dag_repeat: int | None = None,
        dag_levers: tuple[str, ...] = DEFAULT_DAG_LEVERS, lever_parts: tuple[str, ...] = ("copy", "validation", "dag"),
        graph_repeat: int = 1, shapes: tuple[str, ...] | None = None, server_cpus: str | None = None,
        pool_sizes: tuple[str, ...] = (), pool_repeat: int = 1, unique_floor: bool = True) -> dict:
    """The benchmark; `unique_floor`: also the floor with the target's unique indexes, in each
    shape whose DAG runs (right after that shape's floor)."""
    from switchyard.core.batch import data_root
    from switchyard.core.datagen import generate_tpch
    from switchyard_dev.demo import batch_name
    from switchyard_dev.embedded import EmbeddedPostgres
    from switchyard.core.spec import load_spec
    from switchyard_dev import affinity
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
            from switchyard_dev.bench_remote import run_remote
            result["remote"] = run_remote(uri, pg, name, folder, streams, slots)
        if "graph" in parts:
            from switchyard_dev.bench_graph import run_graphs
            say("the DAG's graph with steps that do nothing: in task processes, then in the triggerer")
            result["graph"] = run_graphs(uri, pg, streams, slots, result.get("floor"), graph_repeat,
                                         end_state=result.get("floor_unique"))
            result["load_average"]["after_graph"] = load_average()
        if "parse" in parts:
            say("DAG parse time: the DAG file imported in fresh processes for 56 and 96 streams")
            result["parse"] = [parse_seconds(n) for n in (56, 96)]
    finally:
        if not keep_airflow and ("dag" in parts or "graph" in parts or "remote" in parts):
            stop_bench_airflows()
    result["load_average"]["end"] = load_average()
    result["targets"] = targets(result)
    if result.get("production"):
        result["production"]["targets"] = shape_targets("production", result["production"], scale, streams)
    report(result, out, plot)
    return result


def report(result: dict, out: Path, plot: bool = True) -> None:
    path = out / "bench.json"
    result["out_dir"] = str(out)
    if plot:
        try:
            from switchyard_dev.bench_plot import plot_all
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
        from switchyard_dev.bench_graph import graph_lines
        print()
        for line in graph_lines(result["graph"]):
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


def dag_lever_lines(levers: dict) -> list[str]:
    """The DAG levers' lines of the summary: median [min, max] wall and ratio to the reference."""
    lines = []
    for name, lv in levers.items():
        w, r = lv["wall_seconds"], lv.get("ratio_to_reference") or lv["ratio_to_no_preload"]
        v = lv["validate_overhead_median"]
        o = lv.get("task_overhead_median") or {}
        vw = (lv.get("validation_work_seconds") or {}).get("median")
        lines.append(f"  DAG {name:<34} {w['median']:>8.1f} s [{w['min']:.1f}, {w['max']:.1f}]  "
                     f"x{r['median']:.3f} of {lv.get('reference', 'no preload')}; validate overhead {v.get('median')} s; "
                     f"median task overhead {o.get('median')} s; pool busy {(lv.get('pool_busy') or {}).get('median')}; "
                     f"Airflow CPU {(lv.get('airflow_cpu_seconds') or {}).get('median')} s"
                     + (f"; validation work {vw} s" if vw is not None else ""))
        if DAG_LEVERS.get(name, (None, None, {}))[2].get("index_only"):
            lines.append("    (a measuring device: the checks switched off but the target's unique index; "
                         "never a way to run)")
        if lv.get("in_effect") is False:
            lines.append(f"    NOT IN EFFECT: {'; '.join(x['checks']['why'] for x in lv['runs'] if x['checks']['why'])}"
                         f": these figures do not measure the lever")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m switchyard_dev.bench", description=__doc__.split("\n")[0])
    p.add_argument("--scale", type=float, default=1.0)
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--slots", type=int, help="concurrent loads (default: the pool size, one per core)")
    p.add_argument("--parts", default="floor,loader,dag,graph,peers,parse",
                   help="comma-separated subset of floor,loader,dag,graph,peers,parse,remote (the floor always "
                        "runs; remote: the loads on two Edge workers beside LocalExecutor alone, not by default)")
    p.add_argument("--graph-repeat", type=int, default=1,
                   help="runs of each empty graph (worker, triggerer), in rotating order (default 1)")
    p.add_argument("--levers", action="store_true", help="also measure the levers (COPY options, settings, "
                   "GX preload, priority weights)")
    p.add_argument("--repeat", type=int, default=3, help="rounds per lever (default 3)")
    p.add_argument("--dag-repeat", type=int, help="rounds of the DAG levers (default: --repeat); each is a DAG run")
    p.add_argument("--lever-parts", default="copy,validation,dag", help="which levers: copy,validation,dag")
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
    parts = tuple(x.strip() for x in a.parts.split(",") if x.strip())
    result = run(a.scale, a.streams, a.slots, parts, a.levers, a.repeat, a.peer_seconds, a.out,
                 a.keep_airflow, not a.no_preload, not a.no_plot, a.dag_repeat,
                 tuple(x.strip() for x in a.dag_levers.split(";") if x.strip()),
                 tuple(x.strip() for x in a.lever_parts.split(",") if x.strip()), a.graph_repeat,
                 tuple(x.strip() for x in a.shapes.split(",") if x.strip()) if a.shapes else None, a.server_cpus,
                 tuple(x.strip() for x in a.pool_sizes.split(",") if x.strip()), a.pool_repeat,
                 unique_floor=not a.no_unique_floor)
    dags = [result.get("dag"), (result.get("production") or {}).get("dag")]
    return 1 if any(d and d.get("state") != "success" for d in dags) else 0


if __name__ == "__main__":
    sys.exit(main())
