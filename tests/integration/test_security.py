"""Security: nothing from a UI Param or a batch folder reaches SQL or a path unchecked, and
the target's password never shows up in task logs or stats.json.

Two layers are tested: the DAG's Params refuse bad values before any task runs (real DAG
runs), and the code behind them refuses them again for callers that bypass the form.
"""
from __future__ import annotations

import json
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from helpers import LATER_STEPS_CHECK, copy_batch, run_dag
from switchyard.core.batch import BatchError, resolve_batch, resolve_file
from switchyard_dev.local import airflow_home
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.postgres import PostgresAdapter

SPEC = load_spec("tpch")
CANARY = "canary_security"

INJECTIONS = [
    "../../etc",
    "/etc",
    "a/../../b",
    "x'; DROP TABLE canary_security.t; --",
    'orders"; DROP TABLE canary_security.t; --',
    "orders; DROP TABLE canary_security.t",
    "$(touch /tmp/pwned)",
    "nul\x00byte",
]


@pytest.fixture
def canary(pg_uri):
    """A table an injected statement would drop."""
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {CANARY}")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {CANARY}.t (x int)")
    yield
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f"SELECT to_regclass('{CANARY}.t')").fetchone()[0] is not None, "canary dropped"


def _target_tables(uri: str, schema: str) -> list[str]:
    with psycopg.connect(uri) as conn:
        return [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,))]


@pytest.mark.parametrize("param, value", [
    ("batch", "../../etc"),
    ("batch", "x'; DROP TABLE canary_security.t; --"),
    ("tables", ['orders"; DROP TABLE canary_security.t; --']),
    ("tables", "orders; DROP TABLE canary_security.t"),
    ("conn_id", "x'; DROP TABLE canary_security.t; --"),
])
def test_an_injection_through_a_param_is_refused_before_any_task(pg_uri, data_root, tpch_batch, schema,
                                                                  tmp_path, canary, param, value):
    name, _ = tpch_batch
    conf = {"batch": name, param: value}
    run = run_dag(pg_uri, data_root, schema, 3, conf, tmp_path / "runs")
    assert run.returncode != 0
    assert "ParamValidationError" in run.output or "Invalid input for param" in run.output, run.output[-2000:]
    assert param in run.output
    assert run.stats is None, "no task may run with a refused Param"
    assert _target_tables(pg_uri, schema) == []


@pytest.mark.parametrize("value", INJECTIONS)
def test_a_batch_name_outside_the_data_root_is_refused(tmp_path, value):
    with pytest.raises(BatchError):
        resolve_batch(value, root=tmp_path)


def test_a_symlinked_batch_folder_leading_outside_the_data_root_is_refused(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "evil").symlink_to(outside)
    with pytest.raises(BatchError, match="outside the data root"):
        resolve_batch("evil", root=root)
    (root / "good").mkdir()
    assert resolve_batch("good", root=root) == (root / "good").resolve()


def test_a_stream_file_symlinked_outside_its_batch_is_refused(tmp_path):
    batch = tmp_path / "batch"
    (batch / "region").mkdir(parents=True)
    secret = tmp_path / "server-secret.txt"
    secret.write_text("not for loading\n")
    (batch / "region" / "region.1.tbl").symlink_to(secret)
    with pytest.raises(BatchError, match="outside the batch folder"):
        resolve_file(batch, "region/region.1.tbl")
    with pytest.raises(BatchError, match="outside the batch folder"):
        resolve_file(batch, "../server-secret.txt")


@pytest.mark.parametrize("value", INJECTIONS + ["Orders", "a" * 64, ""])
def test_identifiers_are_validated_before_quoting(value):
    adapter = PostgresAdapter(SPEC, uri="postgresql://unused@127.0.0.1/x")
    with pytest.raises(TargetError, match="not a valid identifier"):
        adapter.q(value)
    with pytest.raises(TargetError, match="not a valid identifier"):
        PostgresAdapter(SPEC, uri="postgresql://unused@127.0.0.1/x", schema=value)


def test_statements_split_at_line_ends_but_not_inside_a_dollar_quoted_body():
    """Each template statement is sent on its own; a PostgreSQL DO block is one statement
    whatever its body holds, and T-SQL's $PARTITION is no dollar quote."""
    from switchyard.targets.templates import split_statements
    text = ("-- a comment only\nCREATE TABLE a (x int);\n"
            "DO $body$\nBEGIN\n    UPDATE a SET x = 1;\n    EXECUTE 'SELECT 1';\nEND\n$body$;\n"
            "DO $$\nBEGIN\n    PERFORM 1;\nEND\n$$;\n"
            "SELECT $PARTITION.[pf](3);\nSELECT 2;")
    assert split_statements(text) == [
        "-- a comment only\nCREATE TABLE a (x int)",
        "DO $body$\nBEGIN\n    UPDATE a SET x = 1;\n    EXECUTE 'SELECT 1';\nEND\n$body$",
        "DO $$\nBEGIN\n    PERFORM 1;\nEND\n$$",
        "SELECT $PARTITION.[pf](3)", "SELECT 2"]


@pytest.mark.parametrize("value", [['orders"; DROP TABLE x; --'], ["orders", "../lineitem"], "orders; DROP"])
def test_the_plan_task_refuses_tables_the_spec_does_not_know(value):
    from switchyard.steps import StepFailed, chosen_tables
    # The plan task's step; its operator fails the task at once on a StepFailed (airflow_terms).
    with pytest.raises(StepFailed, match="tables: "):
        chosen_tables(SPEC, value)


def test_a_symlinked_stream_file_refuses_the_batch_before_any_load_in_a_real_run(pg_uri, data_root, tpch_batch,
                                                                                 schema, tmp_path, canary):
    name, folder = tpch_batch
    bad = copy_batch(folder, data_root / "symlinked-file")
    secret = tmp_path / "outside-the-root.tbl"
    secret.write_bytes((bad / "region" / "region.1.tbl").read_bytes())
    (bad / "region" / "region.1.tbl").unlink()
    (bad / "region" / "region.1.tbl").symlink_to(secret)
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": "symlinked-file", "tables": ["region", "nation"]},
                  tmp_path / "runs")
    assert run.returncode != 0
    # setup.plan checks every listed file before any load: the link out of the batch folder is named.
    assert f"{bad / 'region' / 'region.1.tbl'}: resolves to {secret}, outside the batch folder" in run.stats["plan_error"]
    assert run.stats["totals"]["switched"] == 0
    with psycopg.connect(pg_uri) as conn:  # nothing was created, let alone loaded
        assert conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."region"',)).fetchone()[0] is None


def _with_password(uri: str, password: str) -> str:
    parts = urlsplit(uri)
    netloc = f"{parts.username}:{password}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def test_the_connection_password_never_appears_in_logs_or_stats(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, folder = tpch_batch
    password = urlsplit(pg_uri).password
    assert password and len(password) >= 16
    started = time.time()
    # A run that works, with one group failing validation (exception texts go to stats.json) ...
    bad = copy_batch(folder, data_root / "secret-check")
    raw = json.loads((bad / "manifest.json").read_text())
    for entry in raw["files"]:
        if entry["table"] == "orders" and entry["stream"] == 2:
            entry["rows"] += 1
    (bad / "manifest.json").write_text(json.dumps(raw))
    good = run_dag(pg_uri, data_root, schema, 3, {"batch": "secret-check", "tables": ["orders", "region"]},
                   tmp_path / "runs", extra_env=LATER_STEPS_CHECK)
    assert good.stats["failed_groups"] == ["orders_2"]
    # ... and one whose connection has a wrong password (the server's refusal is logged).
    wrong = "Wr0ng-" + "s3cret-" * 3
    refused = run_dag(pg_uri, data_root, schema, 3, {"batch": "secret-check", "tables": ["region"],
                                                     "conn_id": "switchyard_other"}, tmp_path / "runs-refused",
                      extra_env={"AIRFLOW_CONN_SWITCHYARD_OTHER": _with_password(pg_uri, wrong)})
    assert refused.returncode != 0 and "password authentication failed" in refused.output
    assert "the target refused the connection switchyard_other" in refused.output, "a refused login fails at once"

    texts = {"dags test output (ok run)": good.output, "dags test output (refused run)": refused.output}
    for path in [*(tmp_path / "runs").rglob("*"), *(tmp_path / "runs-refused").rglob("*"),
                 *(airflow_home() / "logs").rglob("*")]:
        if path.is_file() and path.stat().st_mtime >= started:
            texts[str(path)] = path.read_text(errors="replace")
    assert any(p.endswith("stats.json") for p in texts) and len(texts) > 3
    for where, text in texts.items():
        assert password not in text, f"the target's password appears in {where}"
        assert wrong not in text, f"the wrong password appears in {where}"
