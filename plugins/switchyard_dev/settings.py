"""The development tooling's SWITCHYARD_* variables: declared here (the configuration reference
shows them, through the `switchyard.settings` entry point) and read here.

They configure the local servers the demo and the tests start, and the benchmark's levers;
the product never reads them.
"""
from __future__ import annotations

import os

from switchyard.settings import Setting, _bool, _choice, _path, _positive_int

LOCAL = "Local development: `make demo`, `make test`, the embedded server"
BENCH = "Benchmark only (`make bench`)"
TESTS = "Tests"

SETTINGS = (
    Setting("SWITCHYARD_PG_PORT", "pg_port", int, 54329,
            "Port of the embedded PostgreSQL on 127.0.0.1.", LOCAL, "port"),
    Setting("SWITCHYARD_AIRFLOW_HOME", "airflow_home", _path, None,
            "The local Airflow's home (logs, generated secrets, the DAG's settings file `switchyard.env`). "
            "Its services take their Airflow settings from the environment `switchyard` starts them with, "
            "which wins over `airflow.cfg`: a new home's `airflow.cfg` says so in a few comment lines instead "
            "of listing Airflow's defaults (a SQLite database, port 8080) that no service of it uses; "
            "`switchyard airflow config get-value <section> <key>` prints a setting in effect. An option "
            "written into it applies where that environment sets none.",
            LOCAL, "path", "`<state dir>/airflow`"),
    Setting("SWITCHYARD_AIRFLOW_DATABASE", "airflow_database", _choice("postgres", "sqlite"), "postgres",
            "The local Airflow's metadata database. `postgres`: a database of its own per Airflow home in "
            "the embedded PostgreSQL (the scheduler, the api-server and a backfill write at once); "
            "`sqlite`: a file in the home (one writer at a time: `airflow backfill create` can fail with "
            "\"database is locked\" while the services run).", LOCAL, "postgres | sqlite"),
    Setting("SWITCHYARD_AIRFLOW_PORT", "airflow_port", int, 28080,
            "Port of the local Airflow's api-server (the UI) on 127.0.0.1.", LOCAL, "port"),
    Setting("SWITCHYARD_AIRFLOW_LOG_PORT", "airflow_log_port", int, 8793,
            "Port of the local Airflow's task log server (`[logging] worker_log_server_port`; the "
            "scheduler serves its tasks' logs there). Two Airflows on one machine need different ones. "
            "Airflow's log servers listen on every interface (Airflow 3 sets no host for them), unlike the "
            "api-server and the embedded PostgreSQL (127.0.0.1); they serve a log only to a request "
            "signed with the home's secret key.",
            LOCAL, "port"),
    Setting("SWITCHYARD_AIRFLOW_TRIGGER_LOG_PORT", "airflow_trigger_log_port", int, 8794,
            "Port of the local triggerer's log server (`[logging] trigger_log_server_port`).", LOCAL, "port"),
    Setting("SWITCHYARD_PARALLELISM", "parallelism", _positive_int, 16,
            "The local Airflow's `[core] parallelism`: task processes at once (a LocalExecutor "
            "worker can stay busy up to one heartbeat interval after its task ended).", LOCAL, "integer"),
    Setting("SWITCHYARD_POOL_SLOTS", "pool_slots", _positive_int, None,
            "Size of the demo's load pool.", LOCAL, "integer",
            "what `switchyard pool sync` sets: cores x `SWITCHYARD_POOL_PER_SLOT`"),
    Setting("SWITCHYARD_BENCH_AIRFLOW_PORT", "bench_airflow_port", int, 28090,
            "Port of the benchmark's own Airflow.", BENCH, "port"),
    Setting("SWITCHYARD_BENCH_DEFAULTS_PG_PORT", "bench_defaults_pg_port", int, None,
            "Port of the benchmark's second embedded server, with PostgreSQL's default settings "
            "(the peers' baseline).", BENCH, "port", "a free port"),
    Setting("SWITCHYARD_PRELOAD_DAG", "preload_dag", _bool, True,
            "`0`: the scheduler preloads the third-party modules but neither Switchyard's nor the DAG "
            "(a benchmark lever).", BENCH, "0 | 1"),
    Setting("SWITCHYARD_PRELOAD_CALLS", "preload_calls", str, "",
            "Further DAG builders the scheduler calls once when it preloads, as `module:function,...` "
            "(the benchmark's empty graphs).", BENCH, "text"),
    Setting("SWITCHYARD_FLAT_PRIORITIES", "flat_priorities", _bool, False,
            "`1`: every task at the same priority weight (a benchmark lever against the spec's weights).",
            BENCH, "0 | 1"),
    Setting("SWITCHYARD_BENCH_INDEX_ONLY", "bench_index_only", _bool, False,
            "`1`: the benchmark's Airflow validates by building the target's unique index alone, no other "
            "check (the `preload, index only` lever: a measuring device that switches the checks off).",
            BENCH, "0 | 1"),
    Setting("SWITCHYARD_BENCH_SESSION_PER_USE", "bench_session_per_use", _bool, False,
            "`1`: the benchmark's Airflow gives every use of a step's connection a session of its own, as "
            "before the steps kept one (the `preload, a session per use` lever).",
            BENCH, "0 | 1"),
    Setting("SWITCHYARD_BENCH_RENDERED_CONN_ID", "bench_rendered_conn_id", _bool, False,
            "`1`: the benchmark's Airflow renders the steps' target connection from a template field "
            "(`{{ params.conn_id }}`), as before they read it from the run's params (the `preload, the "
            "connection rendered` lever).", BENCH, "0 | 1"),
    Setting("SWITCHYARD_BENCH_PLUGINS_PER_TASK", "bench_plugins_per_task", _bool, False,
            "`1`: the benchmark's Airflow preloads without Airflow's task-side plugins, so each task "
            "process loads them itself, as before the preload loaded them (the `preload, Airflow's "
            "plugins per task` lever).", BENCH, "0 | 1"),
    Setting("SWITCHYARD_BENCH_NO_VALUE_GUARD", "bench_no_value_guard", _bool, False,
            "`1`: the benchmark's Airflow leaves the loads' value guard out, every record no longer read "
            "for a field the server would change (the `preload, no value guard` lever: a measuring "
            "device, never a way to run).", BENCH, "0 | 1"),
    Setting("SWITCHYARD_BENCH_CONTROL_NICE", "bench_control_nice", int, 0,
            "A niceness (1-19) for the benchmark's Airflow processes that send no file: the API server, "
            "the DAG processor, the triggerer and every task but the loads (the `preload, control plane "
            "niced` lever); 0 leaves them as they are.", BENCH, "0-19", "0"),
    Setting("SWITCHYARD_MSSQL_URI", "mssql_uri", str, None,
            "A real SQL Server for the contract suite (`mssql+pyodbc://...`); without it those tests "
            "skip.", TESTS, "URI", "unset"),
    Setting("SWITCHYARD_UPDATE_GOLDEN", "update_golden", _bool, False,
            "`1`: the rendered-SQL tests rewrite their golden files instead of comparing.", TESTS, "0 | 1"),
)
_BY_VARIABLE = {s.variable: s for s in SETTINGS}


def value(variable: str):
    """The variable's value in this process's environment, parsed; its default when unset."""
    s = _BY_VARIABLE[variable]
    text = os.environ.get(variable, "")
    return s.parse(text) if text.strip() else s.default
