"""The target connection a run is given (the trigger form's "Target connection", the `conn_id`
param of the run's conf) is the one every step uses. The steps read it from the run's params
when they start instead of rendering it from a template field, so no step task makes a
rendered-fields call to Airflow's API server (the DAG's side: tests/unit/test_dag.py)."""
from __future__ import annotations

import time
import uuid

import psycopg
import pytest
from helpers import batch_fingerprint, fingerprint, run_dag

TABLES = ["orders", "nation"]


@pytest.fixture
def other_database(pg_uri):
    """A second database on the embedded server, as a second target would be."""
    name = f"other_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield pg_uri.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_runs_connection_param_is_the_one_every_step_uses(pg_uri, other_database, data_root, tpch_batch,
                                                               schema, tmp_path):
    name, folder = tpch_batch
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": TABLES, "conn_id": "switchyard_other"},
                  tmp_path / "runs", extra_env={"AIRFLOW_CONN_SWITCHYARD_OTHER": other_database})
    assert run.returncode == 0, run.output[-3000:]
    assert run.stats["failed_groups"] == [] and run.stats["held_back_groups"] == []
    # Every row went into the run's connection's database, exactly, and its load_stats rows too...
    assert fingerprint(other_database, schema, TABLES) == batch_fingerprint(other_database, folder, TABLES)
    control, load_stats = run.stats["load_stats_table"]["table"].split(".")
    with psycopg.connect(other_database) as conn:
        recorded = conn.execute(f'SELECT count(*) FROM "{control}"."{load_stats}" WHERE run_id = %s',
                                (run.stats["run_id"],)).fetchone()[0]
    assert recorded == run.stats["load_stats_table"]["rows"] > 0
    # ... nothing into the DAG's default connection's (a step that used it would have failed or
    # left its table there).
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s",
                            (f"{schema}%",)).fetchone()[0] == 0
    # The tables' Assets name the DAG's default target: this run is no update of them.
    assert "this run loaded connection 'switchyard_other'" in run.output


def test_a_misspelt_conf_key_is_refused_before_any_load_never_passed_on_unread(pg_uri, data_root, tpch_batch,
                                                                              schema, tmp_path):
    """`conn_id` misspelt would load into the DAG's default target, `tables` misspelt every table:
    Airflow passes a conf key that is no param on unread, so the plan refuses it, naming it."""
    name, _ = tpch_batch
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "table": ["nation"], "conn-id": "switchyard_other"},
                  tmp_path / "runs")
    assert run.returncode != 0
    assert ("the run's conf names 'conn-id', 'table', no param of this DAG (its params: batch, conn_id, "
            "replace_newer, tables); Airflow would pass them on unread") in run.stats["plan_error"]
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname LIKE %s",
                            (f"{schema}%",)).fetchone()[0] == 0
    # `batch` misspelt: refused by the run's first task, before it would wait (six hours by
    # default; an hour here) for the batch the run's date names.
    started = time.monotonic()
    run = run_dag(pg_uri, data_root, schema, 3, {"bacth": name}, tmp_path / "runs-2",
                  extra_env={"SWITCHYARD_BATCH_WAIT_SECONDS": "3600"})
    assert run.returncode != 0 and time.monotonic() - started < 600
    assert "the run's conf names 'bacth', no param of this DAG" in run.stats["plan_error"], run.stats
    # The run names no batch: the one of its date is not what its conf asked for.
    assert run.stats["batch"] is None, run.stats["batch"]
