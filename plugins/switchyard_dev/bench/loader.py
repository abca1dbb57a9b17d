"""The loader alone: the PostgreSQL adapter's own prepare and load for each file, one process
per slot, no Airflow."""
from __future__ import annotations

import os
from pathlib import Path

from switchyard_dev.bench.common import (
    _median,
    now,
    reset_schema,
    run_parallel,
    summarise,
)

LOADER_SCHEMA = "bench_loader"


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
