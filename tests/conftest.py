"""Shared fixtures: the real embedded PostgreSQL, a test Airflow home, batches of real data."""
from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))

# Tests get an Airflow home of their own, so a running demo is never disturbed.
TEST_STATE = ROOT / ".switchyard" / "test"
os.environ.setdefault("SWITCHYARD_AIRFLOW_HOME", str(TEST_STATE / "airflow"))
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")


def pytest_configure(config):
    config.addinivalue_line("markers", "mssql: needs a real SQL Server (SWITCHYARD_MSSQL_URI); skipped without one")
    config.addinivalue_line("markers", "chaos: fault injection on a real server (killed loads, restarts, lock waits)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Kept on the test item, so a fixture's teardown can tell that its test failed.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


def keep_service_logs(request, home: Path) -> Path | None:
    """When the test failed, copy its Airflow services' logs (the home is about to be deleted)
    to `.switchyard/test/failed/<test>/` and say where; None when it passed."""
    report = getattr(request.node, "report_call", None)
    if report is None or not report.failed:
        return None
    kept = TEST_STATE / "failed" / request.node.name
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir(parents=True)
    for log in (home / "logs").glob("*.out"):
        shutil.copy2(log, kept / log.name)
    print(f"the Airflow services' logs of this failed test: {kept}", file=sys.stderr)
    return kept


@pytest.fixture(scope="session")
def pg_uri() -> str:
    from switchyard_dev.embedded import EmbeddedPostgres
    return EmbeddedPostgres().start()


@pytest.fixture(scope="session")
def data_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    os.environ["SWITCHYARD_DATA_ROOT"] = str(root)
    return root


@pytest.fixture(scope="session")
def tpch_batch(data_root) -> tuple[str, Path]:
    """A real TPC-H batch at scale 0.01 in 3 streams, with the producer's manifest."""
    from switchyard.core.datagen import generate_tpch
    from switchyard.core.spec import load_spec
    name = "tpch-sf0.01-s3"
    generate_tpch(data_root / name, load_spec("tpch"), 0.01, 3)
    return name, data_root / name


@pytest.fixture
def schema(pg_uri):
    """A fresh target schema per test, dropped afterwards."""
    import psycopg
    name = f"t_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}_staging" CASCADE')


def copy_batch(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def edit_manifest(batch_dir: Path, table: str, stream: int, **changes) -> None:
    path = batch_dir / "manifest.json"
    raw = json.loads(path.read_text())
    for entry in raw["files"]:
        if entry["table"] == table and entry["stream"] == stream:
            entry.update(changes)
    path.write_text(json.dumps(raw, indent=2))
