"""The DAG does not depend on who parses it: with a settings file in the Airflow home, the DAG
file builds the same DAG (as Airflow serializes it, schedule included) in any environment, and
an environment that contradicts the file stops the parse with a message naming both."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from switchyard import settings

ROOT = Path(__file__).resolve().parents[2]
DAG_FILE = ROOT / "dags" / "switchyard_tpch.py"

# Parses the DAG file as the dag-processor does and prints the DAG as Airflow serializes it.
_SERIALIZE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("dagfile", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
from airflow.serialization.serialized_objects import DagSerialization
print("SERIALIZED " + json.dumps(DagSerialization.to_dict(module.dag), sort_keys=True, default=str))
"""

FILE = """# the DAG's settings
SWITCHYARD_DAG_ID=switchyard_nightly
SWITCHYARD_SCHEMA=nightly
SWITCHYARD_STREAMS=3
SWITCHYARD_SCHEDULE=0 2 * * *
SWITCHYARD_START_DATE=2026-11-20
SWITCHYARD_CATCHUP=0
"""


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SWITCHYARD_", "AIRFLOW"))}
    env.update(extra)
    return env


def _serialize(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SERIALIZE, str(DAG_FILE)], env=env, cwd=cwd, text=True,
                          capture_output=True, timeout=300)


def _dag(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("SERIALIZED "))
    return json.loads(line[len("SERIALIZED "):])


def test_the_dag_file_builds_the_same_dag_in_any_environment(tmp_path):
    home = tmp_path / "airflow"
    home.mkdir()
    (home / "switchyard.env").write_text(FILE)
    # The scheduler's environment (the values the file holds, as the services were started with),
    # and a plain shell's: no SWITCHYARD_* at all, another folder.
    services = _clean_env(AIRFLOW_HOME=str(home), SWITCHYARD_SCHEDULE="0 2 * * *", SWITCHYARD_STREAMS="3",
                          SWITCHYARD_DAG_ID="switchyard_nightly", SWITCHYARD_SCHEMA="nightly")
    shell = _clean_env(AIRFLOW_HOME=str(home))
    by_scheduler = _dag(_serialize(services, ROOT))
    by_shell = _dag(_serialize(shell, tmp_path))
    assert by_shell == by_scheduler
    dag = by_shell["dag"]
    assert dag["dag_id"] == "switchyard_nightly"
    assert dag["timetable"]["__var"]["expression"] == "0 2 * * *"
    # The file's start date holds off scheduled runs in the setup's wait; it is not the DAG's
    # start date, which Airflow would give every task (a run dated before it got none).
    assert "start_date" not in dag
    wait = next(t["__var"] for t in dag["tasks"] if t["__var"]["task_id"] == "setup.wait_for_batch")
    assert wait["not_before"] == "2026-11-20T00:00:00+00:00" and "start_date" not in wait
    assert not dag.get("catchup", False)


def test_an_environment_that_contradicts_the_file_stops_the_parse_naming_both(tmp_path):
    home = tmp_path / "airflow"
    home.mkdir()
    (home / "switchyard.env").write_text(FILE)
    # The demo's old way: a shell that says "no schedule" while the file says nightly.
    done = _serialize(_clean_env(AIRFLOW_HOME=str(home), SWITCHYARD_SCHEDULE="none"), tmp_path)
    assert done.returncode != 0
    said = done.stderr
    assert "SWITCHYARD_SCHEDULE='none'" in said and "'0 2 * * *'" in said, said[-2000:]
    assert str(home / "switchyard.env") in said


def test_without_a_file_the_environment_shapes_the_dag(tmp_path):
    env = _clean_env(AIRFLOW_HOME=str(tmp_path), SWITCHYARD_SCHEDULE="none", SWITCHYARD_DAG_ID="from_env")
    dag = _dag(_serialize(env, tmp_path))["dag"]
    assert dag["dag_id"] == "from_env" and dag["timetable"]["__type"].endswith("NullTimetable")
    # No start date unless one is set: no scheduled run before Airflow first parses the DAG.
    assert dag.get("start_date") is None


def test_the_file_holds_the_dags_settings_only(tmp_path):
    path = tmp_path / "switchyard.env"
    path.write_text("SWITCHYARD_DATA_ROOT=/elsewhere\n")
    with pytest.raises(settings.SettingsError, match="line 1.*SWITCHYARD_DATA_ROOT"):
        settings.read_settings_file(path)
    path.write_text("# comment\n\nSWITCHYARD_SCHEDULE='0 3 * * *'\n")
    read = settings.Settings.from_env({"SWITCHYARD_SETTINGS_FILE": str(path), "SWITCHYARD_SCHEDULE": "0 3 * * *"})
    assert read.schedule == "0 3 * * *" and read.conflicts == () and read.settings_file == path
    # A process's own settings stay its own: the data root comes from its environment.
    own = settings.Settings.from_env({"SWITCHYARD_SETTINGS_FILE": str(path), "SWITCHYARD_DATA_ROOT": "/data/x"})
    assert own.data_root == Path("/data/x")


def test_the_services_environment_leaves_the_dags_settings_to_the_file():
    """`services start` rewrites the settings file while the services run: a DAG setting in their
    own environment (given to the first start) would contradict the next value and stop every
    parse of the DAG; they read the file instead. Other settings stay theirs."""
    from switchyard_dev.local import dag_settings_conflicts, without_dag_settings
    env = {"SWITCHYARD_SPEC": "/a/typo.yaml", "SWITCHYARD_SCHEDULE": "0 2 * * *", "SWITCHYARD_DATA_ROOT": "/data",
           "AIRFLOW_HOME": "/h", "PATH": "/bin"}
    kept = without_dag_settings(env)
    assert kept == {"SWITCHYARD_DATA_ROOT": "/data", "AIRFLOW_HOME": "/h", "PATH": "/bin"}
    assert dag_settings_conflicts(kept) == ()


def test_the_demo_of_another_spec_does_not_take_the_last_dags_schedule(tmp_path, monkeypatch):
    """The settings file is the last DAG's: the demo of another spec (another DAG id) starts with
    no schedule and a start date of now, not that DAG's; the same DAG keeps its own. A DAG on a
    schedule is not replaced: its nightly runs would stop without a word; once its schedule is
    ended, it is."""
    from switchyard_dev import local
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path))
    for name in ("SWITCHYARD_SCHEDULE", "SWITCHYARD_START_DATE", "SWITCHYARD_DAG_ID"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "switchyard.env").write_text(FILE)
    same = local.write_dag_settings({"SWITCHYARD_DAG_ID": "switchyard_nightly", "SWITCHYARD_SCHEMA": "nightly"})
    assert (same["SWITCHYARD_SCHEDULE"], same["SWITCHYARD_START_DATE"]) == ("0 2 * * *", "2026-11-20")
    with pytest.raises(SystemExit, match=r"builds one DAG, from .*switchyard\.env: switchyard_nightly, on the "
                                         r"schedule '0 2 \* \* \*'\. The DAG switchyard_daily would replace it"):
        local.write_dag_settings({"SWITCHYARD_DAG_ID": "switchyard_daily", "SWITCHYARD_SCHEMA": "daily"})
    assert local.dag_settings()["SWITCHYARD_DAG_ID"] == "switchyard_nightly"   # the file as it was
    monkeypatch.setenv("SWITCHYARD_SCHEDULE", "none")
    monkeypatch.setenv("SWITCHYARD_TIMEZONE", "Europe/Berlin")
    monkeypatch.setenv("SWITCHYARD_BATCH_FORMAT", "%Y-%m-%dT%H%M")
    local.write_dag_settings({})     # `SWITCHYARD_SCHEDULE=none switchyard services start`
    for name in ("SWITCHYARD_SCHEDULE", "SWITCHYARD_TIMEZONE", "SWITCHYARD_BATCH_FORMAT"):
        monkeypatch.delenv(name)
    assert local.dag_settings()["SWITCHYARD_TIMEZONE"] == "Europe/Berlin"
    assert local.dag_settings()["SWITCHYARD_BATCH_FORMAT"] == "%Y-%m-%dT%H%M"
    other = local.write_dag_settings({"SWITCHYARD_DAG_ID": "switchyard_daily", "SWITCHYARD_SCHEMA": "daily"})
    assert "SWITCHYARD_TIMEZONE" not in other      # the last DAG's, with its schedule
    assert "SWITCHYARD_BATCH_FORMAT" not in other
    assert other["SWITCHYARD_SCHEDULE"] == "none" and other["SWITCHYARD_START_DATE"] != "2026-11-20"
    assert local.dag_settings()["SWITCHYARD_SCHEDULE"] == "none"
    # A schedule the shell gives still counts.
    monkeypatch.setenv("SWITCHYARD_SCHEDULE", "15 2 * * *")
    given = local.write_dag_settings({"SWITCHYARD_DAG_ID": "switchyard_weekly", "SWITCHYARD_SCHEMA": "weekly"})
    assert given["SWITCHYARD_SCHEDULE"] == "15 2 * * *"


def test_services_start_with_a_spec_of_ones_own_names_the_dag_and_schema_after_it(tmp_path, monkeypatch):
    """`SWITCHYARD_SPEC=.../billing.yaml switchyard services start`: the DAG switchyard_billing loads
    into the schema billing, as the demo names them, not the file's earlier DAG (switchyard_tpch
    into tpch, its spec swapped); a DAG id or schema the shell gives wins, and the file's own
    spec keeps the file's names."""
    from switchyard_dev import local
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path))
    for name in ("SWITCHYARD_SCHEDULE", "SWITCHYARD_START_DATE", "SWITCHYARD_DAG_ID", "SWITCHYARD_SCHEMA"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "switchyard.env").write_text("SWITCHYARD_DAG_ID=switchyard_tpch\nSWITCHYARD_SCHEMA=tpch\n"
                                             "SWITCHYARD_SPEC=tpch\n")
    spec = tmp_path / "billing.yaml"
    spec.write_text("name: billing\nfiles: '{table}/{table}.{stream}.csv'\ntables:\n  customers:\n"
                    "    partitioned: false\n    columns:\n      - {name: code, type: varchar(12)}\n")
    monkeypatch.setenv("SWITCHYARD_SPEC", str(spec))
    values = local.write_dag_settings(local.named_after_spec())
    assert (values["SWITCHYARD_DAG_ID"], values["SWITCHYARD_SCHEMA"]) == ("switchyard_billing", "billing")
    assert local.named_after_spec() == {}       # the file holds this spec now: its names stay
    monkeypatch.setenv("SWITCHYARD_SPEC", "tpch")
    monkeypatch.setenv("SWITCHYARD_SCHEMA", "tpch_test")
    assert local.named_after_spec() == {"SWITCHYARD_DAG_ID": "switchyard_tpch"}


def test_a_new_local_home_has_an_airflow_cfg_that_points_to_the_settings_in_effect(tmp_path, monkeypatch):
    """Airflow writes every option's default into a home without airflow.cfg (a SQLite database,
    port 8080), which the local services never use: a new home gets a short file saying where the
    settings come from, and Airflow reads the environment's."""
    from switchyard_dev import local
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_PORT", "28391")
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_DATABASE", "sqlite")
    env = local.airflow_env()
    cfg = tmp_path / "home" / "airflow.cfg"
    assert cfg.read_text() == local.HOME_CONFIG
    said = {}
    for section, key in (("api", "port"), ("database", "sql_alchemy_conn"), ("core", "executor"),
                         ("api", "secret_key")):
        done = subprocess.run([local.airflow_bin(), "config", "get-value", section, key], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        said[key] = done.stdout.strip()
    # The keys Airflow would make at random per process without them in the file: one for the home.
    assert said == {"port": "28391", "sql_alchemy_conn": f"sqlite:///{tmp_path / 'home' / 'airflow.db'}",
                    "executor": "LocalExecutor",
                    "secret_key": (tmp_path / "home" / "api_secret_key").read_text()}, said
    # Airflow wrote none of its defaults into it; a user's own file is never replaced.
    assert cfg.read_text() == local.HOME_CONFIG
    cfg.write_text("[core]\nload_examples = False\n")
    local.airflow_env()
    assert cfg.read_text() == "[core]\nload_examples = False\n"
