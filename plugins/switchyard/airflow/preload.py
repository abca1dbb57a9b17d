"""Heavy imports paid once, in the scheduler, instead of once per task process.

LocalExecutor forks its worker processes from the scheduler, and on Linux each worker
starts every task with a bare `os.fork()` (no exec). Whatever the scheduler has imported
is therefore already in each task process, in memory pages shared copy-on-write. The
validate tasks import Great Expectations, which otherwise costs each of them 4-5 s of
CPU and about 250 MB; the loads import the driver and the Postgres hook.

The project's `airflow_local_settings.py` (in `local_settings/` beside this file, put on
PYTHONPATH by `local.airflow_env`) calls `preload()` when Airflow initialises. Only the
scheduler acts on it: the api-server, the dag-processor and CLI commands never run
tasks, and a task process forked from a preloaded worker finds everything imported.

Airflow's task-side plugins are loaded once there too (the plugin list, the listeners'
manager and the macros that every task process otherwise builds: about 11 ms of CPU each,
in a process forked from a scheduler that has loaded Airflow's plugins for itself). Airflow
documents the same for its own forked tasks: a plugin's change reaches them when the
scheduler restarts
(https://airflow.apache.org/docs/apache-airflow/stable/administration-and-deployment/plugins.html,
"When are plugins (re)loaded?").

Switchyard's own modules are preloaded too, and the DAG is built once (the task process
finds it built: `dag_factory.dag_from_env`), because importing the DAG file rebuilds every
operator of the run, which was most of a small task's CPU; the SQL templates are compiled
once too. A long-lived scheduler must not
hand task processes code as it was when it started, though: the preload notes when
Switchyard's files (code and specs) last changed, and the DAG file calls
`forget_changed_code()` first, which drops the preloaded Switchyard modules in a task
process that finds them changed on disk, so it imports them as they are now.

`SWITCHYARD_PRELOAD=0` turns it off. The benchmark also measures the preload without
Switchyard's modules and the DAG (`modules=MODULES`) and has further DAGs built (`calls`),
from its own local settings (switchyard_dev/bench/local_settings/).
"""
from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

from switchyard.targets.registry import preload_modules

_ENGINE_MODULES, _ENGINE_PACKAGES = preload_modules()

# Imported by every task process itself, after the fork, when nothing else is: the task
# runner's parse (the version, the local DAG bundle) and the operator's template environment
# (jinja2's extensions). About 5 ms of CPU per task process (`python -m switchyard_dev.bench.task_start`).
TASK_PROCESS_IMPORTS = (
    "airflow.version",
    "airflow.dag_processing.bundles.local",
    "jinja2.ext",
)
MODULES = (
    "great_expectations",
    "great_expectations.expectations",
    "great_expectations.data_context.types.base",
    "sqlalchemy",
    # The loads' value guard's automaton (core/value_guard.py): about 7 ms a load task otherwise.
    "re2",
    # Each target engine's driver and Airflow hook (targets/registry.py).
    *_ENGINE_MODULES,
    "airflow.sdk.execution_time.task_runner",
    *TASK_PROCESS_IMPORTS,
    # Imported by each LocalExecutor worker for its first task (about 20 ms each).
    "airflow.sdk.execution_time.supervisor",
)
# Switchyard's own: the DAG's modules and what its tasks import when they run.
OWN_MODULES = (
    "switchyard.airflow.dag_factory",
    "switchyard.airflow.operators",
    *_ENGINE_PACKAGES,
    "switchyard.observability.validation",
    "switchyard.observability.progress",
    "switchyard.observability.stats",
    "switchyard.observability.report",
)
PACKAGE = Path(__file__).resolve().parents[1]  # plugins/switchyard: every layer

# What the preload cost and when, for the benchmark and for anyone reading the scheduler log.
report: dict = {}


def enabled() -> bool:
    from switchyard.settings import get
    return get().preload


# An Edge worker forks its task processes too (`airflow edge worker`; loads only, see
# graph.routing): it preloads what a load needs, without Great Expectations.
WORKER_MODULES = tuple(m for m in MODULES if not m.startswith("great_expectations")) + tuple(
    m for m in OWN_MODULES if m != "switchyard.observability.validation")


def is_scheduler(argv: list[str] | None = None) -> bool:
    argv = sys.argv if argv is None else argv
    return len(argv) >= 2 and Path(argv[0]).name == "airflow" and argv[1] == "scheduler"


def is_edge_worker(argv: list[str] | None = None) -> bool:
    argv = sys.argv if argv is None else argv
    return len(argv) >= 3 and Path(argv[0]).name == "airflow" and argv[1:3] == ["edge", "worker"]


def code_stamp() -> tuple:
    """When Switchyard's files last changed: its modules and specs, and the configured spec."""
    from switchyard.core.spec import spec_file
    from switchyard.settings import get
    files = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.yaml"), spec_file(get().spec)]
    stamps = []
    for path in files:
        try:
            st = path.stat()
            stamps.append((str(path), st.st_mtime_ns, st.st_size))
        except OSError:
            stamps.append((str(path), None, None))
    return tuple(sorted(stamps))


def preload(argv: list[str] | None = None, modules: tuple[str, ...] | None = None,
            calls: tuple[str, ...] = (), task_plugins: bool = True) -> dict:
    """Import `modules` (default: the third-party ones and Switchyard's) and build the DAG if this
    process is the scheduler and preloading is on; then call each of `calls` ("module:function",
    further DAGs to build once, like the real one). `task_plugins`: load Airflow's task-side
    plugins too (`load_task_plugins`)."""
    worker = is_edge_worker(argv)
    if not enabled() or not (is_scheduler(argv) or worker):
        return {"preloaded": []}
    if modules is None:
        modules = WORKER_MODULES if worker else MODULES + OWN_MODULES
    started = time.monotonic()
    stamp = code_stamp()
    done, failed = [], {}
    for name in modules:
        try:
            importlib.import_module(name)
            done.append(name)
        except Exception as exc:  # a missing optional library must never stop the scheduler
            failed[name] = f"{type(exc).__name__}: {exc}"
    imported = len(done)
    if task_plugins:
        try:
            load_task_plugins()
            done.append("airflow task plugins")
        except Exception as exc:  # each task process then loads them itself, as without the preload
            failed["airflow task plugins"] = f"{type(exc).__name__}: {exc}"
    dag_built = False
    if "switchyard.airflow.dag_factory" in done:
        try:
            from switchyard.airflow.dag_factory import dag_from_env
            dag_from_env()
            dag_built = True
        except Exception as exc:  # a broken DAG is the dag-processor's to report, not a reason to stop
            failed["dag"] = f"{type(exc).__name__}: {exc}"
        for extra in calls:
            try:
                module, _, function = extra.strip().partition(":")
                getattr(importlib.import_module(module), function)()
            except Exception as exc:
                failed[extra] = f"{type(exc).__name__}: {exc}"
        try:
            from switchyard.targets.templates import compile_templates
            report["sql_templates"] = compile_templates()
        except Exception as exc:  # a broken template fails its task, with the file named
            failed["sql templates"] = f"{type(exc).__name__}: {exc}"
    report.update(preloaded=done, failed=failed, dag_built=dag_built, code_stamp=stamp,
                  seconds=round(time.monotonic() - started, 3), pid=os.getpid())
    print(f"switchyard preload: {imported} modules{', Airflow task plugins' if len(done) > imported else ''}"
          f"{', the DAG' if dag_built else ''} in {report['seconds']:.2f}s"
          + (f"; not preloaded: {failed}" if failed else ""), file=sys.stderr, flush=True)
    return report


def load_task_plugins() -> None:
    """What a task process asks Airflow's task SDK for before and around its task: the plugins'
    listeners (the task runner calls their hooks at start and end) and their macros (the
    template context). Both are cached per process by the SDK (`functools.cache`), so a task
    process forked from here finds them built."""
    from airflow.sdk.listener import get_listener_manager
    from airflow.sdk.plugins_manager import integrate_macros_plugins
    get_listener_manager()
    integrate_macros_plugins()


def forget_changed_code() -> bool:
    """In a process forked from a preloaded scheduler: if Switchyard's files changed since the
    preload, drop its preloaded modules (and so the DAG built with them) so that the next
    import reads them from disk. True if it dropped them."""
    stamp = report.get("code_stamp")
    if not stamp or stamp == code_stamp():
        return False
    for name in [n for n in sys.modules if n == "switchyard" or n.startswith("switchyard.")]:
        if name != __name__:
            del sys.modules[name]
    report["code_stamp"] = None
    return True
