"""What a task process's start costs, part by part, in a process preloaded as the scheduler is.

    python -m switchyard_dev.bench.task_start

LocalExecutor forks each task from a worker that is itself a fork of the scheduler, so a
task starts with everything the preload imported, in copy-on-write pages. Each part below
runs in a fresh child of such a process, the way a task process meets it first; its cost is
the child's CPU time beyond a child that only exits. Medians of `ROUNDS` forks.
"""
from __future__ import annotations

import gc
import importlib
import os
import statistics
import sys
import time
from collections.abc import Callable

ROUNDS = 15


def preloaded(modules: tuple[str, ...]) -> float:
    """Import `modules`, load Airflow's plugins as the scheduler does for itself, and freeze the
    collector as LocalExecutor does before it forks; resident MB."""
    for name in modules:
        importlib.import_module(name)
    from airflow import plugins_manager
    plugins_manager.ensure_plugins_loaded()  # the scheduler's own (its listeners, timetables)
    gc.freeze()
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def forked(work: Callable[[], object], rounds: int = ROUNDS) -> tuple[float, float]:
    """Median CPU milliseconds of fork in the parent, and of the child doing `work` then exiting."""
    parent, child = [], []
    for _ in range(rounds):
        started = time.process_time()
        pid = os.fork()
        if pid == 0:
            work()
            os._exit(0)
        parent.append(time.process_time() - started)
        child.append(sum(os.wait4(pid, 0)[2][:2]))  # the child's user + system time
    return statistics.median(parent) * 1e3, statistics.median(child) * 1e3


def parts() -> list[tuple[str, Callable[[], object], str]]:
    """(part, what the child does, when Airflow pays it). Airflow's own internals, named as
    Airflow 3.3 has them: this measures them; of them, Switchyard calls only the listeners'
    manager, in the scheduler's preload (switchyard/airflow/preload.py)."""
    from airflow.sdk.api.client import Client
    from airflow.sdk.execution_time.comms import ToTask
    from airflow.sdk.listener import get_listener_manager
    from airflow.sdk.log import configure_logging
    from pydantic import TypeAdapter
    return [
        ("the task runner's logging set-up", lambda: configure_logging(
            json_output=True, output=open(os.devnull, "wb")), "per task"),
        ("the SDK's plugin load and listeners' manager", get_listener_manager,
         "once, in the scheduler's preload; per task without it"),
        ("the message channel's validator", lambda: TypeAdapter(ToTask), "per task"),
        ("the Execution API client's TLS context", lambda: Client(
            base_url="http://127.0.0.1:1/execution/", token="-"), "once per LocalExecutor worker"),
    ]


def main() -> None:
    from switchyard_dev import local
    # Airflow's settings as the local Airflow's task processes have them (its plugins folder,
    # no example plugins), before anything imports Airflow.
    os.environ.update({k: v for k, v in local.airflow_env().items() if k.startswith("AIRFLOW")})
    from switchyard.airflow.preload import MODULES, OWN_MODULES, TASK_PROCESS_IMPORTS
    if len(sys.argv) > 1 and sys.argv[1] == "--without-task-imports":
        # A scheduler preloaded without them: what each task process paid to import them itself.
        preloaded(tuple(m for m in (*MODULES, *OWN_MODULES) if m not in TASK_PROCESS_IMPORTS))
        _, bare = forked(lambda: None)
        _, child = forked(lambda: [importlib.import_module(m) for m in TASK_PROCESS_IMPORTS])
        print(f"importing {', '.join(TASK_PROCESS_IMPORTS)} in the task process: +{child - bare:.1f} ms")
        return
    resident = preloaded((*MODULES, *OWN_MODULES))
    parent, bare = forked(lambda: None)
    print(f"fork and exit of the preloaded process ({resident:.0f} MB resident): "
          f"{parent:.1f} ms in the parent, {bare:.1f} ms in the child")
    for name, work, paid in parts():
        print(f"{name}: +{forked(work)[1] - bare:.1f} ms ({paid})")


if __name__ == "__main__":
    main()
