"""The steps' sessions on the real embedded PostgreSQL: without parallel workers by default
(SWITCHYARD_STEP_PARALLELISM=serial), with the server's own settings on `server`; both in the
adapter's connections (the unique index build, the switch) and in the URL that Great
Expectations and the constraint proofs connect with (the row count)."""
from __future__ import annotations

import json

import psycopg
import pytest
from sqlalchemy import create_engine, text

from switchyard.core.spec import load_spec
from switchyard.targets.postgres import PostgresAdapter

SPEC = load_spec("tpch")
NAMES = ("max_parallel_maintenance_workers", "max_parallel_workers_per_gather", "synchronous_commit")
# Costs that make the planner pick a parallel scan for any table, when workers are allowed.
CHEAP_PARALLEL = ("SET min_parallel_table_scan_size = 0", "SET parallel_setup_cost = 0",
                  "SET parallel_tuple_cost = 0")


def server_defaults(uri: str) -> dict[str, str]:
    with psycopg.connect(uri) as conn:
        return {n: conn.execute(f"SELECT current_setting('{n}')").fetchone()[0] for n in NAMES}


def adapter_session(adapter: PostgresAdapter) -> dict[str, str]:
    with adapter.connection() as conn:
        return {n: conn.execute(f"SELECT current_setting('{n}')").fetchone()[0] for n in NAMES}


def url_session(adapter: PostgresAdapter, table: str) -> tuple[dict[str, str], str]:
    """The settings of a session on the adapter's SQLAlchemy URL, and its plan of count(*)."""
    engine = create_engine(adapter.sqlalchemy_url())
    try:
        with engine.connect() as conn:
            settings = {n: conn.execute(text(f"SELECT current_setting('{n}')")).scalar_one() for n in NAMES}
            for stmt in CHEAP_PARALLEL:
                conn.execute(text(stmt))
            plan = conn.execute(text(f"EXPLAIN (FORMAT JSON) SELECT count(*) FROM {table}")).scalar_one()
    finally:
        engine.dispose()
    return settings, json.dumps(plan)


@pytest.fixture
def table(pg_uri, schema):
    qualified = f'"{schema}".numbers'
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f"CREATE TABLE {qualified} AS SELECT g AS n FROM generate_series(1, 20000) g")
        conn.execute(f"ANALYZE {qualified}")
    return qualified


def test_the_steps_run_without_parallel_workers_by_default(pg_uri, schema, table, monkeypatch):
    monkeypatch.delenv("SWITCHYARD_STEP_PARALLELISM", raising=False)
    defaults = server_defaults(pg_uri)
    # The embedded server allows workers (PostgreSQL's defaults): otherwise this proves nothing.
    assert defaults["max_parallel_maintenance_workers"] != "0"
    assert defaults["max_parallel_workers_per_gather"] != "0"
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema)
    assert adapter.step_parallelism == "serial"
    assert adapter_session(adapter) == {"max_parallel_maintenance_workers": "0",
                                        "max_parallel_workers_per_gather": "0", "synchronous_commit": "on"}
    settings, plan = url_session(adapter, table)
    assert settings["max_parallel_maintenance_workers"] == "0"
    assert settings["max_parallel_workers_per_gather"] == "0"
    assert "Gather" not in plan and "Seq Scan" in plan


def test_the_servers_own_settings_on_request(pg_uri, schema, table, monkeypatch):
    monkeypatch.setenv("SWITCHYARD_STEP_PARALLELISM", "server")
    defaults = server_defaults(pg_uri)
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema)
    assert adapter.step_parallelism == "server"
    session = adapter_session(adapter)
    assert session == dict(defaults, synchronous_commit="on")
    settings, plan = url_session(adapter, table)
    assert {n: settings[n] for n in NAMES[:2]} == {n: defaults[n] for n in NAMES[:2]}
    assert "Gather" in plan


def test_a_steps_sessions_carry_its_task_name(pg_uri, schema, table):
    """The server shows each of a step's sessions under the task's name (application_name): in
    the adapter's connections and in the URL Great Expectations and the proofs connect with.
    Characters a connection string or a libpq option would have to quote become `_`."""
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, session_name="switchyard:orders_2.load")
    with adapter.connection() as conn:
        assert conn.execute("SHOW application_name").fetchone()[0] == "switchyard:orders_2.load"
    engine = create_engine(adapter.sqlalchemy_url())
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW application_name")).scalar_one() == "switchyard:orders_2.load"
    finally:
        engine.dispose()
    odd = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, session_name="my dag;x='1'\\" + "y" * 80)
    assert odd.session_name == "my_dag_x__1__" + "y" * 50
    engine = create_engine(odd.sqlalchemy_url())
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SHOW application_name")).scalar_one() == odd.session_name
    finally:
        engine.dispose()
    # Without a name (tools, tests) the server's default stays.
    with PostgresAdapter(SPEC, uri=pg_uri, schema=schema).connection() as conn:
        assert conn.execute("SHOW application_name").fetchone()[0] == "switchyard"
