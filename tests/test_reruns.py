"""Two runs at once, backfills and clearing a failed group, on the embedded PostgreSQL.

Two runs of the same DAG must never interleave on one target: a backfill's runs are not
held back by max_active_runs, so the target's run lease does it (targets/postgres.py).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from airflow_run import run_dag
from conftest import copy_batch
from switchyard.local import airflow_bin, airflow_env, airflow_home, migrate
from test_end_to_end import fingerprint, line_count, run_lease

TABLES = ["orders", "customer"]


def _restamp(batch: Path, marker: bytes) -> None:
    """Same keys, same rows, other contents: every comment (the last field) becomes `marker`."""
    for table in TABLES:
        for path in (batch / table).glob("*.tbl"):
            lines = path.read_bytes().split(b"\n")[:-1]
            out = []
            for line in lines:
                fields = line.split(b"|")
                fields[-2] = marker  # fields[-1] is the empty field after the trailing '|'
                out.append(b"|".join(fields))
            path.write_bytes(b"\n".join(out) + b"\n")


def _second_airflow_home(tmp_path: Path) -> dict[str, str]:
    """A second, independent Airflow (its own metadata DB) against the same target."""
    home = tmp_path / "airflow-b"
    home.mkdir()
    shutil.copy(airflow_home() / "airflow.db", home / "airflow.db")
    return {"AIRFLOW_HOME": str(home), "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs")}


def _start(pg_uri, data_root, schema, runs_dir: Path, conf: dict, extra: dict,
           log: Path) -> subprocess.Popen:
    env = airflow_env(streams=3, extra={
        "AIRFLOW_CONN_SWITCHYARD_TARGET": pg_uri, "SWITCHYARD_DATA_ROOT": str(data_root),
        "SWITCHYARD_SCHEMA": schema, "SWITCHYARD_RUNS_DIR": str(runs_dir), **extra})
    migrate(env)
    return subprocess.Popen([airflow_bin(), "dags", "test", "switchyard_tpch", "-c", json.dumps(conf)],
                            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, text=True)


def _stats(runs_dir: Path) -> dict:
    (found,) = runs_dir.glob("switchyard_tpch/*/stats.json")
    return json.loads(found.read_text())


def test_two_runs_at_once_are_serialized_by_the_run_lease(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, folder = tpch_batch
    batch_a = copy_batch(folder, data_root / "conc-a")
    batch_b = copy_batch(folder, data_root / "conc-b")
    _restamp(batch_a, b"batch-a")
    _restamp(batch_b, b"batch-b")

    fast_retry = {"SWITCHYARD_LEASE_RETRY_SECONDS": "3", "SWITCHYARD_LEASE_RETRIES": "100"}
    migrate(airflow_env())
    home_b = _second_airflow_home(tmp_path)
    run_a = _start(pg_uri, data_root, schema, tmp_path / "runs-a",
                   {"batch": "conc-a"}, fast_retry, tmp_path / "a.log")
    # B starts once A is loading (A loads every table, so it is still busy when B asks) (a backfill next to the nightly run, in another Airflow).
    deadline = time.monotonic() + 300
    while not _staging_tables(pg_uri, schema):
        assert run_a.poll() is None and time.monotonic() < deadline, (tmp_path / "a.log").read_text()[-3000:]
        time.sleep(0.2)
    run_b = _start(pg_uri, data_root, schema, tmp_path / "runs-b",
                   {"batch": "conc-b", "tables": TABLES}, {**fast_retry, **home_b},
                   tmp_path / "b.log")
    assert run_a.wait(600) == 0, (tmp_path / "a.log").read_text()[-4000:]
    assert run_b.wait(600) == 0, (tmp_path / "b.log").read_text()[-4000:]
    a, b = _stats(tmp_path / "runs-a"), _stats(tmp_path / "runs-b")
    out_b = (tmp_path / "b.log").read_text()
    assert f"target schema {schema} is being loaded by run switchyard_tpch/{a['run_id']} (batch conc-a" in out_b

    # One after the other: B's first step started after A's last switch.
    assert a["failed_groups"] == [] and b["failed_groups"] == []
    a_last = max(g["switched"] for g in a["groups"] if g["switched"])
    b_first = min(g["started"] for g in b["groups"] if g["started"])
    assert b_first > a_last, (a_last, b_first)
    # Nothing doubled, nothing missing, nothing mixed: every row is B's, all of them are there.
    rows = {t: sum(line_count(p) for p in (folder / t).glob("*.tbl")) for t in TABLES}
    with psycopg.connect(pg_uri) as conn:
        for table, col in (("orders", "o_comment"), ("customer", "c_comment")):
            total, from_b = conn.execute(
                f'SELECT count(*), count(*) FILTER (WHERE {col} = %s) FROM "{schema}"."{table}"',
                ("batch-b",)).fetchone()
            assert total == from_b == rows[table], (table, total, from_b, rows[table])
    assert run_lease(pg_uri, schema) is None


def _staging_tables(uri: str, schema: str) -> list[str]:
    with psycopg.connect(uri) as conn:
        return [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                           (f"{schema}_staging",))]
