"""What every part of the benchmark shares: medians and spreads, jobs in parallel processes and
their summary, schemas made afresh, the batch's files, the machine's facts, the results folder."""
from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any


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


def _r(value: float | None, digits: int = 3) -> float | None:
    return round(value, digits) if value is not None else None


def _cpus(cpus) -> str:
    return ",".join(str(c) for c in sorted(cpus))


def postmaster_pid() -> int | None:
    """The embedded PostgreSQL's postmaster: its process tree is the server's CPU."""
    from switchyard_dev.embedded import EmbeddedPostgres
    try:
        return int((EmbeddedPostgres().pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


# --- the batch ---------------------------------------------------------------------------------
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


# --- jobs in parallel processes -----------------------------------------------------------------
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


# --- the server's schemas -----------------------------------------------------------------------
def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def reset_schema(uri: str, *schemas: str, create: bool = True) -> None:
    import psycopg
    with psycopg.connect(uri, autocommit=True) as conn:
        for s in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{s}" CASCADE')
            if create:
                conn.execute(f'CREATE SCHEMA "{s}"')


def biggest_file_set_up(uri: str, folder: Path, files: list[dict], schema: str):
    """(adapter, stream, path): the PostgreSQL adapter set up in a schema of its own (emptied first)
    for the batch's biggest file (`files[0]`), to load it one load at a time."""
    from switchyard.core.batch import read_manifest, resolve_file
    from switchyard.core.planner import plan_batch
    from switchyard.core.spec import load_spec
    from switchyard.targets.postgres import PostgresAdapter
    spec = load_spec("tpch")
    plan = plan_batch(spec, read_manifest(folder, spec))
    stream = plan.stream(files[0]["table"], files[0]["stream"])
    adapter = PostgresAdapter(spec, uri=uri, schema=schema)
    reset_schema(uri, schema, adapter.staging_schema, create=False)
    adapter.setup(plan)
    return adapter, stream, resolve_file(folder, stream.file)


# --- the machine and the results ----------------------------------------------------------------
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


def load_average() -> dict:
    """The machine's load when a figure was taken: the machine may be shared."""
    one, five, fifteen = os.getloadavg()
    return {"time": datetime.now(timezone.utc).isoformat(timespec="seconds"), "1min": round(one, 2),
            "5min": round(five, 2), "15min": round(fifteen, 2)}


def output_dir(base: Path | None = None) -> Path:
    from switchyard_dev.embedded import state_dir
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    out = (base or state_dir() / "bench") / stamp
    out.mkdir(parents=True, exist_ok=True)
    return out
