"""One settings module: every SWITCHYARD_* variable the product reads is declared there, read
there only, typed, and documented in docs/configuration.md, which is generated from it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from switchyard import settings
from switchyard_dev import settings as dev_settings

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "configuration.md"
VARIABLE = re.compile(r"SWITCHYARD_[A-Z0-9_]+")


def test_the_configuration_reference_is_generated_from_the_settings():
    expected = settings.markdown(extra=list(dev_settings.SETTINGS))
    assert DOC.read_text() == expected, (
        "docs/configuration.md differs from the settings: regenerate it with `make docs` "
        "(switchyard config --markdown > docs/configuration.md)")


def test_every_variable_the_product_names_is_declared():
    declared = set(settings.VARIABLES)
    product = ROOT / "plugins" / "switchyard"
    named = {v: p for p in product.rglob("*.py") for v in VARIABLE.findall(p.read_text())}
    assert not set(named) - declared, {v: str(named[v]) for v in set(named) - declared}


def test_every_variable_the_tooling_names_is_declared():
    declared = set(settings.VARIABLES) | {s.variable for s in dev_settings.SETTINGS}
    tooling = ROOT / "plugins" / "switchyard_dev"
    named = {v: p for p in tooling.rglob("*.py") for v in VARIABLE.findall(p.read_text())}
    assert not set(named) - declared, {v: str(named[v]) for v in set(named) - declared}


def test_only_the_settings_module_reads_the_environment():
    product = ROOT / "plugins" / "switchyard"
    readers = [str(p.relative_to(product)) for p in product.rglob("*.py")
               if re.search(r"environ(?:\.get)?\(\s*[\"']SWITCHYARD_|environ\[\s*[\"']SWITCHYARD_|getenv\(\s*[\"']SWITCHYARD_",
                            p.read_text())]
    assert readers == [], readers


def test_defaults_types_and_derived_locations():
    s = settings.Settings.from_env({})
    assert s.streams == 4 and isinstance(s.streams, int)
    assert s.schedule == "0 2 * * *" and s.preload is True and s.validation == "load"
    assert s.data_root == s.state_dir / "data" and s.runs_dir == s.state_dir / "runs"
    moved = settings.Settings.from_env({"SWITCHYARD_STATE_DIR": "/tmp/sy-state", "SWITCHYARD_STREAMS": "8",
                                        "SWITCHYARD_SCHEDULE": "none", "SWITCHYARD_PRELOAD": "off",
                                        "SWITCHYARD_BATCH_POKE_SECONDS": "2.5"})
    assert moved.data_root == Path("/tmp/sy-state/data").resolve()
    assert (moved.streams, moved.schedule, moved.preload, moved.batch_poke_seconds) == (8, None, False, 2.5)
    assert settings.Settings.from_env({"SWITCHYARD_SCHEDULE": ""}).schedule is None


def test_a_bad_value_names_its_variable():
    with pytest.raises(settings.SettingsError, match=r"SWITCHYARD_STREAMS='four'"):
        settings.Settings.from_env({"SWITCHYARD_STREAMS": "four"})
    with pytest.raises(settings.SettingsError, match=r"SWITCHYARD_VALIDATION='some'.*load, constraints, full"):
        settings.Settings.from_env({"SWITCHYARD_VALIDATION": "some"})


def test_the_environment_is_read_once_per_distinct_value(monkeypatch):
    monkeypatch.setenv("SWITCHYARD_STREAMS", "5")
    first = settings.get()
    assert settings.get() is first and first.streams == 5
    monkeypatch.setenv("SWITCHYARD_STREAMS", "6")
    assert settings.get().streams == 6


def test_the_dag_config_defaults_are_the_settings_defaults(monkeypatch):
    from switchyard.airflow.dag_factory import DagConfig
    for s in settings.SETTINGS:
        monkeypatch.delenv(s.variable, raising=False)
    from_env = DagConfig.from_env()
    assert from_env == DagConfig()
    monkeypatch.setenv("SWITCHYARD_STREAMS", "7")
    monkeypatch.setenv("SWITCHYARD_POOL", "p2")
    assert (DagConfig.from_env().streams, DagConfig.from_env().pool) == (7, "p2")


def test_the_load_pool_admits_load_tasks_per_copy_slot(monkeypatch):
    """slots x SWITCHYARD_POOL_PER_SLOT, rounded up, never fewer than the slots; a PostgreSQL
    target without the slot guard (copy_slots 0) and a SQL Server target keep one per slot."""
    from switchyard.core.spec import load_spec
    from switchyard.settings import SettingsError, get, pool_size
    from switchyard.targets.postgres import PostgresAdapter
    monkeypatch.delenv("SWITCHYARD_POOL_PER_SLOT", raising=False)
    assert get().pool_per_slot == 3.0 and pool_size(1) == 3 and pool_size(2) == 6
    assert pool_size(2, 1.5) == 3 and pool_size(3, 1.5) == 5 and pool_size(2, 1) == 2
    monkeypatch.setenv("SWITCHYARD_POOL_PER_SLOT", "1.25")
    assert pool_size(4) == 5 and pool_size(1) == 2
    monkeypatch.setenv("SWITCHYARD_POOL_PER_SLOT", "0.5")
    with pytest.raises(SettingsError, match="SWITCHYARD_POOL_PER_SLOT"):
        get()
    monkeypatch.delenv("SWITCHYARD_POOL_PER_SLOT")
    spec = load_spec("tpch")
    assert PostgresAdapter(spec, uri="postgresql://x", copy_slots=3).pool_size() == 9
    guardless = PostgresAdapter(spec, uri="postgresql://x", copy_slots=0)
    assert guardless.pool_size() == guardless.scheduler_count()


def test_a_run_without_a_batch_param_names_its_batch_by_its_date_in_the_batch_format(monkeypatch):
    """A schedule more often than daily names each run's folder finer than its day, or every run
    of a day would load the day's folder."""
    from datetime import datetime, timezone
    from switchyard.airflow.operators import batch_name
    when = {"logical_date": datetime(2026, 11, 30, 3, 15, tzinfo=timezone.utc)}
    assert batch_name(None, when) == "2026-11-30"
    assert batch_name(" 2026-11-30-redo ", when) == "2026-11-30-redo"     # the param, as given
    monkeypatch.setenv("SWITCHYARD_BATCH_FORMAT", "%Y-%m-%dT%H%M")
    assert batch_name("", when) == "2026-11-30T0315"
    monkeypatch.setenv("SWITCHYARD_BATCH_FORMAT", "%Y/%m/%d")
    assert batch_name(None, when) == "2026/11/30"
    for bad in ("daily", "../%Y", "/data/%Y", "%Y %m"):
        monkeypatch.setenv("SWITCHYARD_BATCH_FORMAT", bad)
        with pytest.raises(Exception, match="SWITCHYARD_BATCH_FORMAT"):
            batch_name(None, when)


def test_switchyard_runs_names_the_batch_a_run_loads_as_the_dag_does(monkeypatch):
    from switchyard_dev.runs import batch_of
    run = {"logical_date": "2026-11-30T05:30:00Z", "conf": {}}
    assert batch_of(run) == "2026-11-30"
    monkeypatch.setenv("SWITCHYARD_BATCH_FORMAT", "%Y-%m-%dT%H%M")
    assert batch_of(run) == "2026-11-30T0530"
    assert batch_of({**run, "conf": {"batch": "b001"}}) == "b001"
