"""The `switchyard` command: its help covers every argument, the product's commands never need
the development tooling, and the Airflow plugin is registered exactly once."""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from switchyard import cli

ROOT = Path(__file__).resolve().parents[2]


def _parsers(parser: argparse.ArgumentParser, path: str = "switchyard"):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def _development_commands(sub) -> None:
    """The development tooling's commands, as its entry points add them (installed or not)."""
    from switchyard_dev import commands
    for register in (commands.register_airflow, commands.register_db, commands.register_demo,
                     commands.register_screenshots, commands.register_services):
        register(sub)


def test_every_argument_of_every_command_has_help():
    parser = cli.build_parser(extensions=False)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    _development_commands(sub)
    missing = []
    commands = dict(_parsers(parser))
    assert {"switchyard generate", "switchyard plan", "switchyard pool", "switchyard config",
            "switchyard demo", "switchyard db", "switchyard services"} <= set(commands)
    for path, p in commands.items():
        for action in p._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    for action in sub._choices_actions:
        if not (action.help or "").strip():
            missing.append(f"switchyard {action.dest} (the command itself)")
    assert not missing, missing


def test_python_dash_m_switchyard_runs_the_same_command():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "plugins"), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-m", "switchyard", "plan", "--scale", "0.01", "--streams", "2",
                          "--tables", "orders"], env=env, capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr
    assert "-- Switchyard load plan: spec tpch, 2 streams, target postgres" in out.stdout
    assert "ATTACH PARTITION" in out.stdout


def test_plan_names_the_schema_it_writes_into_from_the_dags_settings_file(tmp_path):
    """A shell without SWITCHYARD_SCHEMA plans into the schema the DAG's settings file gives,
    and the plan's first line says which."""
    (tmp_path / "switchyard.env").write_text("SWITCHYARD_SCHEMA=meters\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHYARD_")}
    env.update(AIRFLOW_HOME=str(tmp_path),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "plugins"), os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-m", "switchyard", "plan", "--scale", "0.01", "--streams", "2",
                          "--tables", "orders"], env=env, capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("-- Switchyard load plan: spec tpch, 2 streams, target postgres, schema meters\n")
    assert 'CREATE TABLE IF NOT EXISTS "meters"."orders"' in out.stdout


def test_plan_and_pool_take_the_local_airflows_dag_settings_from_a_shell_naming_none(monkeypatch, tmp_path):
    """A shell in the checkout names no Airflow (no AIRFLOW_HOME): `switchyard plan` plans the
    spec into the schema the local Airflow's DAG is built with, as a DBA reviewing its T-SQL
    expects, and `pool sync` sets the DAG's pools, not the built-in DAG's."""
    for name in ("AIRFLOW_HOME", "SWITCHYARD_SETTINGS_FILE", "SWITCHYARD_SCHEMA", "SWITCHYARD_SPEC",
                 "SWITCHYARD_POOL", "SWITCHYARD_CONN_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path))
    (tmp_path / "switchyard.env").write_text("SWITCHYARD_SPEC=shop\nSWITCHYARD_SCHEMA=payroll\n"
                                             "SWITCHYARD_POOL=payroll_loads\nSWITCHYARD_CONN_ID=payroll_dw\n")
    plan = cli.build_parser().parse_args(["plan", "--target", "postgres"])
    assert (plan.spec, plan.schema) == ("shop", "payroll")
    pool = cli.build_parser().parse_args(["pool", "sync"])
    assert (pool.pool, pool.conn_id) == ("payroll_loads", "payroll_dw")


def test_the_product_parser_builds_without_the_development_tooling(monkeypatch):
    # An installation of the product alone: no `switchyard.commands` entry points at all.
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    parser = cli.build_parser()
    names = {name for path, _ in _parsers(parser) for name in [path.split()[-1]]}
    assert {"generate", "plan", "pool", "config"} <= names and "demo" not in names


def test_a_broken_extension_leaves_the_product_commands(monkeypatch, capsys):
    class Broken:
        name, value = "broken", "nowhere:register"

        def load(self):
            raise ImportError("No module named 'nowhere'")

    monkeypatch.setattr(cli, "entry_points", lambda group: [Broken()] if group == cli.COMMANDS_GROUP else [])
    parser = cli.build_parser()
    assert parser.parse_args(["plan", "--scale", "1", "--streams", "2"]).func is cli.cmd_plan
    assert "command 'broken' from nowhere:register is unavailable" in capsys.readouterr().err


def test_config_prints_the_settings_in_effect(monkeypatch, capsys, tmp_path):
    # An Airflow home of its own: no DAG settings file (the checkout's own says otherwise).
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("SWITCHYARD_STREAMS", "9")
    monkeypatch.setenv("SWITCHYARD_BENCH_AIRFLOW_PORT", "28191")
    monkeypatch.delenv("SWITCHYARD_AIRFLOW_LOG_PORT", raising=False)
    monkeypatch.delenv("SWITCHYARD_POOL_SLOTS", raising=False)
    assert cli.main(["config"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "SWITCHYARD_STREAMS=9" in lines
    # The local stack's settings too (the development tooling's): set, default, or derived.
    assert "SWITCHYARD_BENCH_AIRFLOW_PORT=28191" in lines and "SWITCHYARD_AIRFLOW_LOG_PORT=8793" in lines
    assert f"SWITCHYARD_AIRFLOW_HOME={tmp_path / 'airflow'}" in lines
    assert any(line.startswith("# SWITCHYARD_POOL_SLOTS unset: ") for line in lines)


def test_config_and_runs_read_the_local_airflows_settings_file_from_any_shell(monkeypatch, capsys, tmp_path):
    """A shell in the checkout names no Airflow: `switchyard config` prints, and `switchyard runs`
    names batches by, the settings the local Airflow's processes read from its settings file."""
    from switchyard_dev.runs import batch_of
    monkeypatch.delenv("AIRFLOW_HOME", raising=False)
    monkeypatch.delenv("SWITCHYARD_SETTINGS_FILE", raising=False)
    monkeypatch.delenv("SWITCHYARD_BATCH_FORMAT", raising=False)
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path))
    (tmp_path / "switchyard.env").write_text("SWITCHYARD_BATCH_FORMAT=%Y-%m-%dT%H%M\n")
    assert cli.main(["config"]) == 0
    assert "SWITCHYARD_BATCH_FORMAT=%Y-%m-%dT%H%M" in capsys.readouterr().out.splitlines()
    assert batch_of({"logical_date": "2026-11-30T11:05:00Z"}) == "2026-11-30T1105"


def test_switchyard_runs_says_why_a_finished_run_ended_from_its_note():
    """The run's note, as the product writes it: its refusal's line, cut; none for a run that
    loaded its batch."""
    from switchyard.airflow.run_notes import run_note
    from switchyard_dev.runs import table
    refused = run_note({"totals": {"rows": 0, "bytes": 0, "switched": 0, "groups": 2}, "groups": [],
                        "plan_error": "AirflowFailException: pre-flight refused the batch before any load; nothing "
                                      "was changed:\n- m.meters: holds batch 2026-11-01, newer than this batch "
                                      "2026-09-01: in replace mode loading it would put the table back"},
                       "failed", "Switchyard: batch 2026-09-01", "/report")
    loaded = run_note({"totals": {"rows": 10, "bytes": 100, "switched": 2, "groups": 2}, "groups": []},
                      "success", "Switchyard: batch 2026-10-01", "/report")
    lines = table(None, [{"dag_id": "d", "dag_run_id": "backfill__2026-09-01", "state": "failed", "note": refused},
                         {"dag_id": "d", "dag_run_id": "backfill__2026-10-01", "state": "success", "note": loaded}],
                  describe=False)
    assert lines[0].endswith("failed   Refused before any load, nothing changed: m.meters: holds batch 2026-11-01, "
                             "newer than this batch 2026-09-01: in replace mode loading it would put the table..."), lines
    assert lines[1].endswith("success"), lines


def test_the_airflow_plugin_is_registered_once():
    """By the package's `airflow.plugins` entry point, and not again from the plugins folder
    (its .airflowignore keeps Airflow out of the package's files)."""
    ours = [e for e in entry_points(group="airflow.plugins") if e.value.startswith("switchyard.")]
    if not ours:
        pytest.skip("the switchyard package is not installed in this Python (make installs it)")
    assert [e.value for e in ours] == ["switchyard.airflow.plugin:SwitchyardReportsPlugin"]
    from airflow._shared.plugins_manager.plugins_manager import _load_plugins_from_plugin_directory
    found, errors = _load_plugins_from_plugin_directory(plugins_folder=str(ROOT / "plugins"))
    assert [p.name for p in found] == [] and errors == {}


def _switchyard(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, **(env or {}),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT / "plugins"), os.environ.get("PYTHONPATH")])))
    return subprocess.run([sys.executable, "-m", "switchyard", *args], env=env, capture_output=True, text=True,
                          timeout=120, cwd=str(ROOT))


def test_plan_of_a_spec_without_rules_comes_from_its_batch_manifest(tmp_path):
    refused = _switchyard("plan", "--spec", "shop")
    assert refused.returncode != 0
    assert "--batch" in refused.stderr and "shop.yaml" in refused.stderr and "Traceback" not in refused.stderr
    made = _switchyard("generate", "--spec", "shop", "--scale", "0.001", "--streams", "3",
                       env={"SWITCHYARD_DATA_ROOT": str(tmp_path)})
    assert made.returncode == 0, made.stderr
    batch = tmp_path / "shop-sf0.001-s3"
    manifest = json.loads((batch / "manifest.json").read_text())
    for target in ("postgres", "mssql"):
        out = _switchyard("plan", "--spec", "shop", "--batch", str(batch), "--target", target, "--schema", "shop")
        assert out.returncode == 0, out.stderr
        assert f"-- Switchyard load plan: spec shop, 3 streams, target {target}" in out.stdout
        # Every stream's date range from the manifest reaches the plan (its staging CHECKs).
        for entry in manifest["files"]:
            if entry["table"] == "orders" and entry["rows"]:
                assert str(entry["key_min"]) in out.stdout and str(entry["key_max"]) in out.stdout
    missing = _switchyard("plan", "--spec", "shop", "--batch", str(tmp_path / "nope"))
    assert missing.returncode != 0 and f"{tmp_path / 'nope'}: no such batch folder" in missing.stderr
    # A batch name under the data root, as `check` and `manifest` take it.
    named = _switchyard("plan", "--spec", "shop", "--batch", "shop-sf0.001-s3", "--target", "postgres",
                        env={"SWITCHYARD_DATA_ROOT": str(tmp_path)})
    assert named.returncode == 0 and "3 streams, target postgres" in named.stdout, named.stderr


def test_the_readme_spec_example_is_a_valid_spec(tmp_path):
    """The spec a user copies from the README reads, with its format, key, nullability,
    uniqueness and declared expectation as the README describes them."""
    import re
    from pathlib import Path
    from switchyard.core.spec import load_spec
    from switchyard.observability.validation import check_spec_expectations
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", readme, flags=re.S)
    assert len(blocks) == 1
    path = tmp_path / "sales.yaml"
    path.write_text(blocks[0], encoding="utf-8")
    spec = load_spec(str(path))
    orders = spec.table("orders")
    assert (orders.key, orders.unique) == ("order_date", ("order_id", "order_date"))
    assert [c.name for c in orders.columns if c.nullable] == ["coupon"]
    assert (orders.format.quoting, orders.format.header_lines, orders.format.null_marker,
            orders.format.line_end) == ("csv", 1, "", "crlf")
    assert check_spec_expectations(spec) == 1


@pytest.mark.parametrize("rest, dag_id", [
    (["dags", "test", "switchyard_tpch", "-c", '{"batch": "b"}'], "switchyard_tpch"),
    (["dags", "test", "-c", '{"batch": "b"}', "switchyard_tpch", "2026-11-27"], "switchyard_tpch"),
    (["dags", "test", "-B", "dags-folder", "--use-executor", "switchyard_tpch"], "switchyard_tpch"),
    (["dags", "test", "--mark-success-pattern", "setup", "--show-dagrun", "d"], "d"),
    (["dags", "test", "-h"], None),
    (["dags", "trigger", "switchyard_tpch"], None),
    (["tasks", "test", "switchyard_tpch", "stats"], None),
])
def test_the_airflow_wrapper_finds_the_dag_of_a_test_run(rest, dag_id):
    """`switchyard airflow dags test DAG_ID` pauses that DAG beside a running scheduler; no other command."""
    from switchyard_dev.dag_test import dag_of
    assert dag_of(rest) == dag_id


@pytest.mark.parametrize("rest, when", [
    (["dags", "test", "switchyard_tpch"], None),
    (["dags", "test", "switchyard_tpch", "2026-11-30"], "2026-11-30"),
    (["dags", "test", "-c", "{}", "switchyard_tpch", "2026-11-30T03:00:00+00:00"], "2026-11-30T03:00:00+00:00"),
    (["dags", "trigger", "switchyard_tpch", "2026-11-30"], None),
])
def test_the_airflow_wrapper_finds_the_logical_date_of_a_test_run(rest, when):
    """The date whose run `airflow dags test` would delete, as the command line gives it."""
    from switchyard_dev.dag_test import logical_date_of
    assert logical_date_of(rest) == when


def test_runs_says_where_it_looked_when_the_api_server_it_was_told_of_does_not_answer(tmp_path, monkeypatch, capsys):
    """The api-server's pid file says it runs, but on another port than this shell's (another
    SWITCHYARD_AIRFLOW_PORT): a message that says where it looked, not a URLError traceback."""
    import os
    from switchyard_dev import local
    from switchyard_dev.commands import cmd_runs
    from helpers import free_port
    home = tmp_path / "airflow"
    home.mkdir()
    (home / "api-server.pid").write_text(str(os.getpid()))     # a live process: "it runs"
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(home))
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_PORT", str(free_port()))
    assert local.service_pid("api-server") == os.getpid()
    assert cmd_runs(argparse.Namespace(action="list", dag_id=None, run_id=None, limit=10)) == 1
    out = capsys.readouterr().out
    assert f"the local Airflow's api-server did not answer on {local.api_url()}" in out
    assert "set SWITCHYARD_AIRFLOW_PORT as when it was started" in out


def test_a_command_whose_reader_goes_away_ends_quietly():
    """`switchyard runs | head -1`: the reader of the output closes the pipe before the command
    is done writing. The command ends without a traceback (a broken pipe is a ConnectionError:
    `runs` took it for the api-server not answering, and said so into the closed pipe)."""
    command = [str(Path(sys.executable).with_name("switchyard")), "config"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    said = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and said == "", said[-2000:]


@pytest.mark.parametrize("command", [("db", "start"), ("services", "start")])
def test_a_local_stack_on_a_taken_port_is_refused_in_one_line_leaving_nothing_behind(tmp_path, command):
    """Another program on the embedded PostgreSQL's port: the command says so in one line, names the
    setting to change, and neither initialises a server nor starts a service (no traceback)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = _switchyard(*command, env={"SWITCHYARD_STATE_DIR": str(tmp_path / "state"),
                                         "SWITCHYARD_AIRFLOW_HOME": str(tmp_path / "state" / "airflow"),
                                         "SWITCHYARD_PG_PORT": str(port)})
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr.strip() == (f"switchyard {command[0]}: port {port} on 127.0.0.1 is taken by another program; "
                                  f"set SWITCHYARD_PG_PORT to a free port")
    assert not list((tmp_path / "state").rglob("PG_VERSION"))
    assert not list((tmp_path / "state").rglob("*.pid"))


class _TaskInstances:
    """The api-server's answer about one run's task instances (scripted, as the api-server gives it)."""

    def __init__(self, states: dict[str, str]):
        self.states = states

    def get_all(self, path: str, key: str) -> list[dict]:
        assert path.endswith("/taskInstances") and key == "task_instances"
        return [{"task_id": task, "state": state, **self.more.get(task, {})} for task, state in self.states.items()]

    def get(self, path: str) -> dict:
        """An XCom entry a task wrote (`xcom`: '<task_id>/<key>' -> value); 404 for any other."""
        import urllib.error
        task_id, key = path.split("/taskInstances/")[1].split("/xcomEntries/")
        if f"{task_id}/{key}" not in self.xcom:
            raise urllib.error.HTTPError(path, 404, "Not Found", None, None)
        return {"key": key, "value": self.xcom[f"{task_id}/{key}"]}

    more: dict[str, dict] = {}
    xcom: dict[str, object] = {}


def test_runs_says_a_deferred_wait_has_no_triggerer_to_end_it(monkeypatch):
    """A run's wait for its batch is deferred to the triggerer: with the triggerer down, the batch's
    arrival goes unseen and the run waits out its hours. `switchyard runs` says so."""
    from switchyard_dev import local
    from switchyard_dev.runs import what_it_does
    run = {"dag_id": "switchyard_evt", "dag_run_id": "manual__1", "state": "running", "conf": {"batch": "b"}}
    waiting = _TaskInstances({"setup.wait_for_batch": "deferred", "setup.plan": None})
    monkeypatch.setattr(local, "running_services", lambda: {"scheduler": 1})
    assert what_it_does(waiting, run) == (
        "is waiting for batch b (the triggerer is not running, and only it ends a deferred wait: the batch's "
        "arrival goes unseen until `switchyard services start` starts it again)")
    monkeypatch.setattr(local, "running_services", lambda: {"scheduler": 1, "triggerer": 2})
    assert what_it_does(waiting, run) == "is waiting for batch b"


def test_runs_says_a_run_whose_plan_waits_for_its_retry_has_loaded_nothing():
    """A run whose setup.plan waits for another run's lease is not `loading`: nothing is loaded yet."""
    from switchyard_dev.runs import what_it_does
    run = {"dag_id": "switchyard_evt", "dag_run_id": "backfill__2026-11-16", "state": "running",
           "conf": {"batch": "2026-11-16"}}
    waiting = _TaskInstances({"setup.wait_for_batch": "success", "setup.plan": "up_for_retry",
                              "events_1.prepare": None})
    assert what_it_does(waiting, run) == (
        "waits to plan batch 2026-11-16: setup.plan waits for its retry, nothing loaded yet (another run holds the "
        "target's run lease, or the target did not answer: the task's log says which)")
    loading = _TaskInstances({"setup.wait_for_batch": "success", "setup.plan": "success",
                              "events_1.prepare": "running"})
    assert what_it_does(loading, run) == "is loading batch 2026-11-16: 1 task running (events_1.prepare)"


def test_runs_says_what_a_plan_put_off_waits_for_and_a_publish_on_its_retry():
    """A plan up for reschedule waits for the DAG's earlier run (runs load in date order), which it
    names; a publish on a later try waits, most often, behind a reader of the tables; and a DAG of
    its own settings file names its batch as its wait said, not as the home's settings would."""
    from switchyard_dev.runs import what_it_does
    run = {"dag_id": "payroll", "dag_run_id": "backfill__2026-03-01", "state": "running",
           "logical_date": "2026-03-01T05:00:00Z", "conf": {}}
    put_off = _TaskInstances({"setup.wait_for_batch": "success", "setup.plan": "up_for_reschedule"})
    put_off.xcom = {"setup.plan/earlier_run": {"run_id": "backfill__2026-02-01", "logical_date": "2026-02-01 05:00:00+00:00"},
                    "setup.wait_for_batch/batch": "payroll/2026-03"}
    assert what_it_does(put_off, run) == (
        "waits to plan batch payroll/2026-03, nothing loaded yet: the DAG's earlier run backfill__2026-02-01 (dated "
        "2026-02-01 05:00:00) is running, and a DAG's runs load in date order; its plan looks again every few seconds")
    publishing = _TaskInstances({"setup.wait_for_batch": "success", "setup.plan": "success",
                                 "publish_batch": "running"})
    publishing.more = {"publish_batch": {"try_number": 2}}
    publishing.xcom = {"setup.wait_for_batch/batch": "payroll/2026-03"}
    assert what_it_does(publishing, run).startswith(
        "is publishing batch payroll/2026-03: publish_batch is on its try 2, the earlier one failed, most often "
        "behind a long-running reader of the batch's tables")
    publishing.more = {"publish_batch": {"try_number": 1}}
    assert what_it_does(publishing, run) == "is loading batch payroll/2026-03: 1 task running (publish_batch)"


def test_runs_says_a_plan_waits_to_take_over_the_lease_of_a_run_that_ended():
    """After `switchyard runs fail` (or the UI's mark failed), the next run's plan waits
    SWITCHYARD_LEASE_TAKEOVER_SECONDS before it takes the ended run's lease: `switchyard runs` says
    so, for whom and until when, from what the plan wrote (operators.LEASE_WAIT), not
    `1 task running (setup.plan)`; once that time is past it says what the run does."""
    from datetime import datetime, timedelta, timezone
    from switchyard_dev.runs import what_it_does
    run = {"dag_id": "switchyard_evt", "dag_run_id": "manual__2", "state": "running", "conf": {"batch": "b"}}
    until = datetime.now(timezone.utc) + timedelta(seconds=50)
    planning = _TaskInstances({"setup.wait_for_batch": "success", "setup.plan": "running"})
    planning.xcom = {"setup.plan/lease_wait": {"holder": "switchyard_evt/manual__1", "state": "failed",
                                               "until": until.isoformat()}}
    assert what_it_does(planning, run) == (
        f"waits to plan batch b, nothing loaded yet: the target's run lease is held by the failed run "
        f"switchyard_evt/manual__1: taken over at {until:%H:%M:%S} UTC unless a step of that run still runs and "
        f"renews it (SWITCHYARD_LEASE_TAKEOVER_SECONDS)")
    planning.xcom = {"setup.plan/lease_wait": {"holder": "switchyard_evt/manual__1", "state": "failed",
                                               "until": (until - timedelta(minutes=2)).isoformat()}}
    assert what_it_does(planning, run) == "is loading batch b: 1 task running (setup.plan)"
    planning.xcom = {}
    assert what_it_does(planning, run) == "is loading batch b: 1 task running (setup.plan)"


def test_runs_names_a_queue_whose_tasks_no_worker_has_taken():
    """A source's Edge worker that stopped (or none started for its queue) leaves the source's tasks
    queued and the run `running`, with nothing in Airflow's UI to say why: past a minute,
    `switchyard runs` names the queue, how long, and the tasks."""
    from datetime import datetime, timedelta, timezone
    from switchyard_dev.runs import what_it_does
    run = {"dag_id": "switchyard_sales", "dag_run_id": "manual__1", "state": "running", "conf": {"batch": "b"}}
    long_ago = (datetime.now(timezone.utc) - timedelta(minutes=10, seconds=5)).isoformat()
    just_now = datetime.now(timezone.utc).isoformat()
    stuck = _TaskInstances({"setup.wait_for_batch": "success", "setup.plan": "success", "sales_3.load": "success",
                            "files_on_source_b_as_loaded": "queued", "sales_4.load": "queued"})
    stuck.more = {"files_on_source_b_as_loaded": {"queue": "source_b", "queued_when": long_ago},
                  "sales_4.load": {"queue": "default", "queued_when": just_now}}
    assert what_it_does(stuck, run) == (
        "is loading batch b (3/5 tasks done); 1 task queued on queue 'source_b' for 10 min "
        "(files_on_source_b_as_loaded): no worker of that queue has taken them (`switchyard services status` lists "
        "the workers)")


def test_an_edge_worker_is_refused_beside_a_local_airflow_without_the_edge_executor(monkeypatch, capsys, tmp_path):
    """`switchyard airflow edge worker` with the local services stopped (or on LocalExecutor alone):
    a worker there could parse no DAG that routes to it and would take no job. It is refused,
    saying which stack runs the Edge executor."""
    monkeypatch.setenv("SWITCHYARD_AIRFLOW_HOME", str(tmp_path / "airflow"))
    assert cli.main(["airflow", "edge", "worker", "--queues", "source_a"]) == 2
    err = capsys.readouterr().err
    assert "does not run the Edge executor (its services are stopped)" in err and "make demo EXECUTOR=edge" in err


def test_db_psql_passes_psqls_own_options_and_other_actions_take_none(capsys):
    """`switchyard db psql -c 'SELECT 1'` runs the statement (psql's options after the action);
    another action with arguments is refused, not run with them dropped."""
    args = cli.build_parser().parse_args(["db", "psql", "-c", "SELECT 1", "--no-align"])
    assert (args.action, args.psql_args) == ("psql", ["-c", "SELECT 1", "--no-align"])
    assert cli.main(["db", "status", "now"]) == 2
    assert "switchyard db status: takes no arguments (now)" in capsys.readouterr().err


def test_runs_clear_names_the_cleared_tasks_the_dag_no_longer_has():
    """A run made before its spec changed (a table's `tasks: single` taken away) holds task
    instances of the DAG's earlier shape: `switchyard runs clear` clears what Airflow clears and
    names the ones the DAG no longer has, rather than listing them as if they were today's."""
    from switchyard_dev.runs import clear

    class Api:
        """The api-server's answers (scripted, as it gives them) about one ended run."""
        posted: list[dict] = []

        def get(self, path: str) -> dict:
            if path.endswith("/dagRuns/manual__1"):
                return {"state": "success"}
            assert path.endswith("/tasks")
            return {"tasks": [{"task_id": t} for t in ("nation_1.prepare", "nation_1.load", "nation_1.validate",
                                                       "nation_1.switch", "stats")]}

        def post(self, path: str, body: dict) -> dict:
            self.posted.append(body)
            return {"task_instances": [{"task_id": "nation_1.steps"}, {"task_id": "stats"}]}

    cleared, gone = clear(Api(), "switchyard_tpch", "manual__1", ["nation_1"])
    assert Api.posted[0]["task_ids"] == ["nation_1.prepare", "nation_1.load", "nation_1.validate", "nation_1.switch"]
    assert cleared == ["nation_1.steps", "stats"] and gone == ["nation_1.steps"]


def test_runs_says_a_run_dated_in_the_future_waits_for_its_date_not_for_its_batch():
    """A run triggered with a logical date in the future (the trigger form's date field): Airflow's
    scheduler starts none of its tasks before that date, and later runs queue behind it.
    `switchyard runs` says so, and how to end it, rather than that it waits for its batch."""
    from switchyard_dev.runs import what_it_does
    run = {"dag_id": "switchyard_retail", "dag_run_id": "manual__2099-12-14T03:00:00+00:00", "state": "running",
           "logical_date": "2099-12-14T03:00:00Z", "conf": {}}
    pending = _TaskInstances({"setup.wait_for_batch": None, "setup.plan": None})
    assert what_it_does(pending, run) == (
        "waits for its logical date, 2099-12-14 03:00 UTC: Airflow starts no task of a run before its logical date, "
        "and later runs of the DAG queue behind it; `switchyard runs fail switchyard_retail "
        "manual__2099-12-14T03:00:00+00:00` ends it")
    # Dated today, the same tasks not started yet: it waits for its batch, as before.
    now = {**run, "logical_date": "2020-01-01T00:00:00Z", "conf": {"batch": "2020-01-01"}}
    assert what_it_does(pending, now).startswith("is waiting for batch 2020-01-01")


def test_runs_says_a_backfills_queued_runs_wait_their_turn_not_which_queued():
    """A backfill's queued runs behind a queued run: said as the DAG's other queued runs, one at a
    time, where each was said as `<run>, which queued`; the DAG paused (a new DAG's backfill), the
    pause, which holds them all (they were said to queue behind each other)."""
    from switchyard_dev.runs import why_queued

    class Api:
        paused = False

        def get(self, path: str) -> dict:
            assert path == "/api/v2/dags/d"
            return {"dag_id": "d", "is_paused": self.paused}

        def get_all(self, path: str, key: str) -> list[dict]:
            assert "dagRuns?state=running&state=queued" in path and key == "dag_runs"
            return [{"dag_id": "d", "dag_run_id": f"backfill__2026-10-2{k}", "state": "queued",
                     "run_after": f"2026-10-2{k}"} for k in (1, 2, 3)]

    assert why_queued(Api(), "d", "backfill__2026-10-23") == [
        "the DAG's other queued runs (backfill__2026-10-21, backfill__2026-10-22): its runs go one at a time"]
    Api.paused = True
    assert why_queued(Api(), "d", "backfill__2026-10-23") == [
        "the pause of the DAG d: the scheduler starts none of its runs, backfills included "
        "(`switchyard airflow dags unpause d`)"]
