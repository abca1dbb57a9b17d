"""Heavy imports paid once, in the scheduler, instead of once per task process.

LocalExecutor forks its worker processes from the scheduler, and on Linux each worker
starts every task with a bare `os.fork()` (no exec). Whatever the scheduler has imported
is therefore already in each task process, in memory pages shared copy-on-write. The
validate tasks import Great Expectations, which otherwise costs each of them 4-5 s of
CPU and about 250 MB; the loads import the driver and the Postgres hook.

The project's `airflow_local_settings.py` (in `airflow_settings/` beside this file, put on
PYTHONPATH by `local.airflow_env`) calls `preload()` when Airflow initialises. Only the
scheduler acts on it: the api-server, the dag-processor and CLI commands never run
tasks, and a task process forked from a preloaded worker finds everything imported.

Only third-party modules are preloaded. Switchyard's own modules are not: a long-lived
scheduler would otherwise hand task processes the code as it was when it started.

`SWITCHYARD_PRELOAD=0` turns it off (the benchmark measures both ways).
"""
from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

MODULES = (
    "great_expectations",
    "great_expectations.expectations",
    "great_expectations.data_context.types.base",
    "sqlalchemy",
    "psycopg",
    "airflow.providers.postgres.hooks.postgres",
    "airflow.sdk.execution_time.task_runner",
)

# What the preload cost and when, for the benchmark and for anyone reading the scheduler log.
report: dict = {}


def enabled() -> bool:
    return os.environ.get("SWITCHYARD_PRELOAD", "1").strip().lower() not in ("0", "false", "no", "off")


def is_scheduler(argv: list[str] | None = None) -> bool:
    argv = sys.argv if argv is None else argv
    return len(argv) >= 2 and Path(argv[0]).name == "airflow" and argv[1] == "scheduler"


def preload(argv: list[str] | None = None, modules: tuple[str, ...] = MODULES) -> dict:
    """Import `modules` if this process is the scheduler and preloading is on; what it did."""
    if not enabled() or not is_scheduler(argv):
        return {"preloaded": []}
    started = time.monotonic()
    done, failed = [], {}
    for name in modules:
        try:
            importlib.import_module(name)
            done.append(name)
        except Exception as exc:  # a missing optional library must never stop the scheduler
            failed[name] = f"{type(exc).__name__}: {exc}"
    report.update(preloaded=done, failed=failed, seconds=round(time.monotonic() - started, 3), pid=os.getpid())
    print(f"switchyard preload: {len(done)} modules in {report['seconds']:.2f}s"
          + (f"; not preloaded: {failed}" if failed else ""), file=sys.stderr, flush=True)
    return report
