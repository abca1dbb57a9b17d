"""Airflow's local settings for the benchmark's own Airflow (first on its PYTHONPATH, in place
of switchyard/airflow/local_settings/): the product's preload, with the benchmark's levers.

SWITCHYARD_PRELOAD_DAG=0 preloads the third-party modules but neither Switchyard's nor the
DAG; SWITCHYARD_PRELOAD_CALLS names further DAG builders to call once ("module:function,...");
SWITCHYARD_FLAT_PRIORITIES=1 gives every task the same weight, to measure what the spec's
biggest-table-first weights are worth against Airflow's plain order. SWITCHYARD_BENCH_INDEX_ONLY=1
switches the validate tasks' checks off but the target's unique index (a measuring device: what
the other default checks cost end to end). SWITCHYARD_BENCH_SESSION_PER_USE=1 gives each use of
a step's connection a session of its own, as before the steps kept one.
SWITCHYARD_BENCH_RENDERED_CONN_ID=1 renders the steps' connection from a template field, as
before they read it from the run's params (applied before the preload builds the DAG).
SWITCHYARD_BENCH_PLUGINS_PER_TASK=1 leaves Airflow's task-side plugins out of the preload, so
that each task process loads them itself. SWITCHYARD_BENCH_NO_VALUE_GUARD=1 leaves the loads'
value guard out (a measuring device: what reading every record costs end to end).
"""
from switchyard_dev.settings import value

if value("SWITCHYARD_BENCH_RENDERED_CONN_ID"):
    from switchyard_dev.bench.rendered import rendered_conn_id

    rendered_conn_id()

from switchyard.airflow.preload import MODULES, preload  # noqa: E402

preload(modules=None if value("SWITCHYARD_PRELOAD_DAG") else MODULES,
        calls=tuple(c.strip() for c in value("SWITCHYARD_PRELOAD_CALLS").split(",") if c.strip()),
        task_plugins=not value("SWITCHYARD_BENCH_PLUGINS_PER_TASK"))

if value("SWITCHYARD_FLAT_PRIORITIES"):
    def task_policy(task):
        task.priority_weight = 1

if value("SWITCHYARD_BENCH_INDEX_ONLY"):
    from switchyard_dev.bench.index_only import switch_checks_off

    switch_checks_off()

if value("SWITCHYARD_BENCH_SESSION_PER_USE"):
    from switchyard_dev.bench.sessions import session_per_use

    session_per_use()

if value("SWITCHYARD_BENCH_NO_VALUE_GUARD"):
    from switchyard_dev.bench.value_guard import guard_off

    guard_off()

if value("SWITCHYARD_BENCH_CONTROL_NICE"):
    from switchyard_dev.bench.priority import nice_control_plane

    nice_control_plane(value("SWITCHYARD_BENCH_CONTROL_NICE"))
