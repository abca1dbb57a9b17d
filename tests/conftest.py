"""Shared fixtures: the real embedded PostgreSQL, a test Airflow home, batches of real data, a
private Airflow with a real scheduler. Helpers that are not fixtures are in helpers.py."""
from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))  # also without the package installed (PYTHONPATH-only setups)
# Test modules that others import by name (SQL Server's scripted sessions and its suites' own
# queries, which the unit tests parse as T-SQL), wherever the run starts.
for folder in ("unit/targets/mssql", "contract", "integration"):
    sys.path.append(str(ROOT / "tests" / folder))
# A third target engine installed as a package of its own would be: found by its entry point.
ENGINES_DIR = ROOT / "tests" / "engines" / "flavour"
sys.path.append(str(ENGINES_DIR))

from helpers import TEST_STATE, mode_spec, private_scheduler  # noqa: E402

# With pytest-xdist (make test runs `-n auto`), each worker process is "gw0", "gw1", ...
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")

# Tests get an Airflow home of their own, so a running demo is never disturbed; each parallel
# worker its own, named after the controlling process's: a worker inherits that process's
# environment, this setting with it. In one metadata database, a test's run of the DAG would
# wait behind another worker's run of it as behind an earlier run (runs load in date order).
if WORKER:
    os.environ["SWITCHYARD_AIRFLOW_HOME"] = f"{os.environ.get('SWITCHYARD_AIRFLOW_HOME') or TEST_STATE / 'airflow'}-{WORKER}"
else:
    os.environ.setdefault("SWITCHYARD_AIRFLOW_HOME", str(TEST_STATE / "airflow"))
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")


def pytest_configure(config):
    config.addinivalue_line("markers", "mssql: needs a real SQL Server (SWITCHYARD_MSSQL_URI); skipped without one")
    config.addinivalue_line("markers", "chaos: fault injection on a real server (killed loads, restarts, lock waits)")
    # Parallel workers share one embedded PostgreSQL (every test has schemas of its own): the
    # controlling process starts it before the workers and stops it after them, if it started it.
    if not WORKER and getattr(config.option, "numprocesses", None):
        from switchyard_dev.embedded import EmbeddedPostgres
        server = EmbeddedPostgres()
        config._switchyard_server = None if server.is_running() else server
        server.start()


def pytest_unconfigure(config):
    server = getattr(config, "_switchyard_server", None)
    if server is not None:
        server.stop()
        print(f"stopped the embedded PostgreSQL the tests started (port {server.port})")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Kept on the test item, so a fixture's teardown can tell that its test failed.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture(scope="session")
def pg_uri(request):
    """The embedded PostgreSQL's URI. A server the tests started is stopped when they end; one
    that was already running (the user's) is left running."""
    from switchyard_dev.embedded import EmbeddedPostgres
    server = EmbeddedPostgres()
    was_running = server.is_running()
    yield server.start()
    if was_running or WORKER:  # a parallel worker's server is the controlling process's to stop
        return
    server.stop()
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"stopped the embedded PostgreSQL the tests started (port {server.port})")


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


@pytest.fixture
def chaos_only(request):
    """For a test that races processes or runs for minutes: `make chaos` only (pytest -m chaos)."""
    if "chaos" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("races processes against each other for minutes: runs in `make chaos` (pytest -m chaos)")


@pytest.fixture
def scheduler(request, pg_uri, data_root, schema, tmp_path, monkeypatch):
    """A private Airflow (scheduler, dag-processor, api-server, triggerer) on the nightly schedule,
    its partitioned tables in the load mode the test names (indirect parameter; default: the
    built-in spec's, replace)."""
    if "chaos" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("several minutes with a real scheduler: runs in `make chaos` (pytest -m chaos)")
    # The parameter: the load mode, or {"mode": ..., "env": {more settings of the services}}.
    param = getattr(request, "param", None)
    mode, more = (param.get("mode"), param.get("env") or {}) if isinstance(param, dict) else (param, {})
    extra = {**({"SWITCHYARD_SPEC": mode_spec(tmp_path, mode)} if mode else {}), **more}
    with private_scheduler(request, monkeypatch, pg_uri, data_root, schema, tmp_path / "runs",
                           extra_env=extra) as running:
        yield running
