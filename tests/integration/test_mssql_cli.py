"""The command line of the SQL Server target, run as users run it (`python -m switchyard ...`).

`plan --target mssql` writes the T-SQL of a load and the server's pinned-port settings
without a server. `pool sync` sizes the Airflow load pool from the target's own scheduler
count; it is run here for real against the embedded PostgreSQL (whose count is the core
count) and the tests' Airflow home, with the connection given both ways Airflow keeps
them: an AIRFLOW_CONN_* variable and a row in the metadata database.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from switchyard.core import tpch
from switchyard.core.planner import plan_tpch
from switchyard.core.spec import load_spec
from switchyard.targets.mssql import MssqlAdapter
from warm_airflow import airflow  # a test's own Airflow commands (tests/warm_airflow.py)

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_spec("tpch")


def switchyard(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    base = dict(os.environ)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "plugins"), base.get("PYTHONPATH")]))
    base.pop("AIRFLOW_HOME", None)  # the project's test Airflow (SWITCHYARD_AIRFLOW_HOME, set by conftest)
    base.update(env or {})
    return subprocess.run([sys.executable, "-m", "switchyard", *args], env=base, text=True,
                          capture_output=True, timeout=timeout, cwd=str(ROOT))


# --- plan --target mssql -------------------------------------------------------------------------
def test_plan_56_streams_at_scale_1000():
    out = switchyard("plan", "--target", "mssql", "--scale", "1000", "--streams", "56")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    # The same script the adapter writes, with the pinned ports of the default node count.
    plan = plan_tpch(SPEC, 1000, 56)
    assert text == MssqlAdapter(SPEC, base_port=2000, port_count=56).script(plan)
    assert "-- database switchyard, schema tpch; stream k connects to port 2000 + (k - 1) mod 56" in text
    values = [int(v) for v in re.search(r"CREATE PARTITION FUNCTION \[pf_tpch_orders\] \(bigint\) AS RANGE LEFT "
                                        r"FOR VALUES \(([^)]*)\)", text).group(1).split(", ")]
    keys = [tpch.stream_keys("orders", 1000, 56, k) for k in range(1, 57)]
    assert values == [keys[0].key_min - 1] + [k.key_max for k in keys]
    for table in SPEC.table_names:
        assert f"[tpch_staging].[{table}_1]" in text
    assert "BULK INSERT [tpch_staging].[lineitem_56]" in text and "lineitem_57" not in text
    assert re.search(r"-- orders_56: .*, filegroup fg56, port 2055\n", text)


def test_plan_96_streams_shares_64_ports():
    out = switchyard("plan", "--target", "mssql", "--scale", "1000", "--streams", "96")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "stream k connects to port 2000 + (k - 1) mod 64" in text
    assert re.search(r"-- lineitem_64: .*, port 2063\n", text)
    assert re.search(r"-- lineitem_65: .*, port 2000\n", text)
    assert re.search(r"-- lineitem_96: .*, filegroup fg96, port 2031\n", text)
    assert text.count("BULK INSERT [tpch_staging].[") == 6 * 96 + 2


def test_plan_server_config_for_96_streams_on_a_2x48_layout():
    out = switchyard("plan", "--target", "mssql", "--scale", "1000", "--streams", "96", "--emit", "server-config",
                     "--layout", "2x48")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "--    2000[0x1],2001[0x2]\n" in text
    assert "Windows setting" in text and "Linux" in text and "TCP Dynamic Ports = blank" in text
    assert '{"base_port": 2000, "port_count": 2}' in text
    assert "AFFINITY CPU =" not in text.replace("AFFINITY CPU = AUTO", "")
    # 2x48 is an assumption: said, with how to check it, and automatic soft-NUMA turned off so that
    # the node ids the port map names are the hardware nodes.
    assert "Assumed, not read: node ids 0..N-1 are the hardware NUMA nodes" in text
    assert "ALTER SERVER CONFIGURATION SET SOFTNUMA OFF;" in text
    assert "group 1, CPUs 0-47 of the group (cpu_id 64-111)" in text


def test_plan_server_config_from_a_layout_file_with_soft_numa_and_affinity(tmp_path):
    from test_mssql_server_config import TWO_BY_48
    path = tmp_path / "layout.json"
    path.write_text(json.dumps(TWO_BY_48))
    out = switchyard("plan", "--target", "mssql", "--scale", "1000", "--streams", "96", "--emit", "server-config",
                     "--layout", str(path), "--soft-numa", "2", "--base-port", "3000", "--affinity", "0-47,64-111")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.count("\\NodeConfiguration\\Node") == 48 and "3047[" in text and "3048[" not in text
    assert "\\Node24: CPUMask = 0x3, Group = 1" in text
    assert "ALTER SERVER CONFIGURATION SET PROCESS AFFINITY CPU = 0 TO 47, 64 TO 111;" in text


def test_the_sql_script_dials_the_ports_the_server_config_maps():
    args = ("plan", "--target", "mssql", "--scale", "1", "--streams", "8", "--tables", "orders", "--layout", "4x8")
    out = switchyard(*args)
    assert out.returncode == 0, out.stderr
    assert "stream k connects to port 2000 + (k - 1) mod 4" in out.stdout
    assert re.search(r"-- orders_6: .*, port 2001\n", out.stdout)


def test_plan_refuses_what_the_server_cannot_do():
    out = switchyard("plan", "--target", "mssql", "--scale", "1", "--streams", "96", "--emit", "server-config")
    assert out.returncode != 0 and "needs --layout" in out.stderr and "sys.dm_os_nodes" in out.stderr
    out = switchyard("plan", "--target", "postgres", "--scale", "1", "--streams", "4", "--emit", "server-config")
    assert out.returncode != 0 and "--target mssql" in out.stderr
    out = switchyard("plan", "--target", "mssql", "--scale", "1", "--streams", "96", "--emit", "server-config",
                     "--layout", "2x48", "--soft-numa", "1")
    assert out.returncode != 0 and "at most 64" in out.stderr
    out = switchyard("plan", "--target", "mssql", "--scale", "1", "--streams", "8", "--emit", "server-config",
                     "--layout", "2x48", "--affinity", "0-63")
    assert out.returncode != 0 and "CPU ids the layout does not have" in out.stderr


def cli_json(stdout: str):
    """The JSON line of an airflow CLI answer (warnings may print before it on stdout)."""
    return json.loads(next(line for line in reversed(stdout.splitlines()) if line.startswith("[")))


# --- pool sync ------------------------------------------------------------------------------------
@pytest.fixture
def pool_name():
    from switchyard_dev.local import airflow_env
    name = f"switchyard_test_{uuid.uuid4().hex[:8]}"
    yield name
    airflow("pools", "delete", name, env=airflow_env(), check=False)


def pool_slots(name: str) -> int | None:
    from switchyard_dev.local import airflow_env
    result = airflow("pools", "get", name, "-o", "json", env=airflow_env(), check=False)
    if result.returncode != 0:
        return None
    return int(cli_json(result.stdout)[0]["slots"])


def test_pool_sync_sets_the_pool_from_the_server(pg_uri, pool_name):
    from switchyard_dev.local import airflow_env, migrate
    from switchyard.targets.postgres import PostgresAdapter
    env = airflow_env()
    migrate(env)
    airflow("pools", "set", pool_name, "999", "stale", env=env)
    expected = PostgresAdapter(SPEC, uri=pg_uri).scheduler_count()
    assert expected != 999

    conn_id = f"sy_env_{uuid.uuid4().hex[:6]}"
    # The pool admits SWITCHYARD_POOL_PER_SLOT load tasks per server slot (default 3): the
    # target's slot guard keeps one COPY per slot, the extra tasks overlap their start-up.
    out = switchyard("pool", "sync", "--conn-id", conn_id, "--pool", pool_name,
                     env={f"AIRFLOW_CONN_{conn_id.upper()}": pg_uri})
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"{expected} schedulers -> pool {pool_name} = {3 * expected} slots" in out.stdout
    assert pool_slots(pool_name) == 3 * expected
    # The connection's copy_slots are the server's slots; a factor set apart from the default
    # is rounded up (3 x 1.5 -> 5).
    extra = '{"copy_slots": 3}'
    out = switchyard("pool", "sync", "--conn-id", conn_id, "--pool", pool_name,
                     env={f"AIRFLOW_CONN_{conn_id.upper()}": f"{pg_uri}?__extra__={extra}",
                          "SWITCHYARD_POOL_PER_SLOT": "1.5"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert pool_slots(pool_name) == 5
    # --per-slot 1: one load task per slot.
    out = switchyard("pool", "sync", "--conn-id", conn_id, "--pool", pool_name, "--per-slot", "1",
                     env={f"AIRFLOW_CONN_{conn_id.upper()}": pg_uri})
    assert f"{expected} schedulers -> pool {pool_name} = {expected} slots" in out.stdout
    assert pool_slots(pool_name) == expected


def test_pool_sync_sets_the_prepare_pool_beside_the_load_pool(pg_uri, pool_name):
    """SWITCHYARD_PREPARE_POOL set: `pool sync` gives that pool the load pool's size too."""
    from switchyard_dev.local import airflow_env, migrate
    from switchyard.targets.postgres import PostgresAdapter
    env = airflow_env()
    migrate(env)
    prepares = f"{pool_name}_prepares"
    try:
        expected = 3 * PostgresAdapter(SPEC, uri=pg_uri).scheduler_count()
        conn_id = f"sy_pp_{uuid.uuid4().hex[:6]}"
        out = switchyard("pool", "sync", "--conn-id", conn_id, "--pool", pool_name,
                         env={f"AIRFLOW_CONN_{conn_id.upper()}": pg_uri, "SWITCHYARD_PREPARE_POOL": prepares})
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"and pool {prepares} = {expected} slots" in out.stdout
        assert pool_slots(pool_name) == expected and pool_slots(prepares) == expected
        # `--prepare-pool none`: only the load pool is set.
        airflow("pools", "delete", prepares, env=env, check=False)
        out = switchyard("pool", "sync", "--conn-id", conn_id, "--pool", pool_name, "--prepare-pool", "none",
                         env={f"AIRFLOW_CONN_{conn_id.upper()}": pg_uri, "SWITCHYARD_PREPARE_POOL": prepares})
        assert out.returncode == 0 and prepares not in out.stdout and pool_slots(prepares) is None
    finally:
        airflow("pools", "delete", prepares, env=env, check=False)


def test_pool_sync_finds_a_connection_in_the_metadata_database(pg_uri, pool_name):
    """As in the docker-compose stack: `airflow connections add/import`, then `pool sync`."""
    from switchyard_dev.local import airflow_env, migrate
    env = airflow_env()
    migrate(env)
    conn_id = f"sy_db_{uuid.uuid4().hex[:6]}"
    airflow("connections", "add", conn_id, "--conn-uri", pg_uri, env=env)
    try:
        out = switchyard("pool", "sync", "--conn-id", conn_id, "--pool", pool_name)
        assert out.returncode == 0, out.stdout + out.stderr
        assert pool_slots(pool_name) == 3 * os.cpu_count()
    finally:
        airflow("connections", "delete", conn_id, env=env, check=False)


def test_pool_sync_names_a_missing_connection(pool_name):
    out = switchyard("pool", "sync", "--conn-id", "sy_missing_conn", "--pool", pool_name)
    assert out.returncode != 0 and "no Airflow connection 'sy_missing_conn'" in out.stderr
    assert pool_slots(pool_name) is None


# --- the docker-compose stack's unpause step, against this Airflow ---------------------------------
def test_the_stacks_unpause_script_unpauses_the_parsed_dag():
    """include/docker/unpause-switchyard.sh with the real airflow CLI (3.3.2): the DAG once stored."""
    from switchyard_dev.local import airflow_env, migrate
    env = airflow_env()
    migrate(env)
    airflow("dags", "reserialize", env=env, timeout=300)
    airflow("dags", "pause", "-y", "switchyard_tpch", env=env)

    def paused() -> bool:
        out = airflow("dags", "details", "switchyard_tpch", "-o", "json", env=env)
        return str(cli_json(out.stdout)[0]["is_paused"]) == "True"  # the CLI prints it as a string
    assert paused() is True
    try:
        run_env = {**env, "SWITCHYARD_UNPAUSE_ATTEMPTS": "3",
                   "PATH": os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])}
        result = subprocess.run(["bash", str(ROOT / "include" / "docker" / "unpause-switchyard.sh")],
                                env=run_env, text=True, capture_output=True, timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        assert paused() is False
        assert """airflow dags trigger switchyard_tpch -c '{"batch": "demo"}'""" in result.stdout
    finally:
        airflow("dags", "pause", "-y", "switchyard_tpch", env=env, check=False)
