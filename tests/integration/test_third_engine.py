"""A third target engine from a package of its own (tests/engines/flavour/: PostgreSQL under the
name `flavour`, registered by an entry point): the registry finds it, the CLI offers it, and the
real DAG loads a batch through an Airflow connection of its type. Nothing in Switchyard names it."""
from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

from helpers import fingerprint, run_dag

from switchyard.targets import adapter_class, engines

ROOT = Path(__file__).resolve().parents[2]
ENGINES_DIR = ROOT / "tests" / "engines" / "flavour"  # tests/conftest.py puts it on this process's path
# The engine's package on the path of every process, as an installed package would be.
PATH = os.pathsep.join(filter(None, [str(ENGINES_DIR), str(ROOT / "plugins"), os.environ.get("PYTHONPATH")]))


def test_an_installed_engine_is_found_by_its_entry_point():
    assert engines()[-1] == "flavour" and "flavour" not in engines()[:-1]
    flavour = adapter_class("flavour")
    assert flavour.engine == "flavour" and flavour.dialect == "postgres"
    out = subprocess.run([sys.executable, "-m", "switchyard", "plan", "--target", "flavour", "--scale", "0.01",
                          "--streams", "2", "--tables", "nation"], env={**os.environ, "PYTHONPATH": PATH},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("-- Switchyard load plan: spec tpch, 2 streams, target flavour")


def test_the_dag_loads_a_batch_through_a_connection_of_its_type(pg_uri, data_root, tpch_batch, schema, tmp_path,
                                                                  monkeypatch):
    name, folder = tpch_batch
    monkeypatch.setenv("PYTHONPATH", PATH)
    run = run_dag(pg_uri.replace("postgresql://", "flavour://", 1), data_root, schema, 3,
                  {"batch": name, "tables": ["orders", "nation"]}, tmp_path / "runs")
    assert run.returncode == 0, run.output[-3000:]
    assert run.stats["target"] == "flavour"
    counts = fingerprint(pg_uri, schema, ["orders", "nation"])
    assert counts["nation"][0] == 25
    assert {t: c[0] for t, c in counts.items()} == {t: run.stats["tables"][t]["rows"] for t in counts}
    assert not run.stats["failed_groups"]
