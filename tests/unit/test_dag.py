"""DAG integrity: imports cleanly, no cycles, one group of four tasks per (table, stream), one
publish task per table carrying its Asset."""
from __future__ import annotations

import importlib.util
import re
import time

import pytest
import yaml

from switchyard.airflow.dag_factory import DagConfig, build_dag
from switchyard.core.spec import load_spec, spec_file

ROOT_DAG = __import__("pathlib").Path(__file__).resolve().parents[2] / "dags" / "switchyard_tpch.py"


def expected_tasks(streams: int) -> int:
    spec = load_spec("tpch")
    groups = sum(streams if t.partitioned else 1 for t in spec.tables)
    # setup (wait_for_batch, plan), publish_batch, publish per table, stats
    return 4 * groups + 2 + 1 + len(spec.tables) + 1


@pytest.mark.parametrize("streams", [1, 3, 8, 56])
def test_task_count_and_no_cycles(streams):
    dag = build_dag(DagConfig(streams=streams))
    dag.check_cycle()
    assert len(dag.tasks) == expected_tasks(streams)
    assert 4 * (6 * streams + 2) + 4 + 8 == len(dag.tasks)
    group = dag.task_group_dict["orders_1"]
    assert [t.task_id for t in group] == ["orders_1.prepare", "orders_1.load", "orders_1.validate",
                                         "orders_1.switch"]
    assert dag.get_task("orders_1.load").pool == "switchyard_loads"
    assert dag.get_task("stats").trigger_rule == "all_done"
    assert dag.get_task("orders_1.prepare").upstream_task_ids == {"setup.plan"}


def test_the_prepares_run_in_their_own_pool_when_one_is_set(monkeypatch):
    monkeypatch.setenv("SWITCHYARD_PREPARE_POOL", "sy_prepares")
    dag = build_dag(DagConfig.from_env(streams=2))
    prepares = [t for t in dag.tasks if t.task_id.endswith(".prepare")]
    assert prepares and {t.pool for t in prepares} == {"sy_prepares"}
    # Nothing else moves: the loads keep the load pool, the other steps the default pool.
    assert {t.pool for t in dag.tasks if t.task_id.endswith(".load")} == {"switchyard_loads"}
    assert {t.pool for t in dag.tasks if t.task_id.endswith((".validate", ".switch"))} == {"default_pool"}
    monkeypatch.setenv("SWITCHYARD_PREPARE_POOL", "none")
    assert build_dag(DagConfig.from_env(streams=2)).get_task("orders_1.prepare").pool == "default_pool"


def test_dag_file_imports_with_the_configured_stream_count(monkeypatch):
    monkeypatch.setenv("SWITCHYARD_STREAMS", "5")
    spec = importlib.util.spec_from_file_location("switchyard_tpch_dag", ROOT_DAG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.dag.dag_id == "switchyard_tpch"
    assert len(module.dag.tasks) == expected_tasks(5)
    assert module.dag.max_active_runs == 1
    assert set(module.dag.params.keys()) == {"batch", "tables", "replace_newer", "conn_id"}


def test_big_tables_start_first():
    dag = build_dag(DagConfig(streams=2))
    assert dag.get_task("lineitem_1.load").priority_weight > dag.get_task("supplier_1.load").priority_weight


@pytest.mark.parametrize("streams", [56, 96])
def test_parse_time_of_large_dags_is_reported(streams):
    start = time.perf_counter()
    dag = build_dag(DagConfig(streams=streams))
    elapsed = time.perf_counter() - start
    print(f"DAG with {streams} streams: {len(dag.tasks)} tasks built in {elapsed:.2f} s")
    assert len(dag.tasks) == expected_tasks(streams)


def test_every_table_has_an_asset_updated_after_all_its_switches():
    streams = 3
    dag = build_dag(DagConfig(streams=streams, conn_id="warehouse", schema="dw"))
    spec = load_spec("tpch")
    for table in spec.tables:
        publish = dag.get_task(f"publish.{table.name}")
        assert [a.uri for a in publish.outlets] == [f"switchyard://warehouse/dw/{table.name}"]
        n = streams if table.partitioned else 1
        assert publish.upstream_task_ids == {f"{table.name}_{k}.switch" for k in range(1, n + 1)} | {"publish_batch"}
        # Every switch that ran succeeded and one at least ran: groups of streams a batch does
        # not have skip, and the table's Asset is still updated.
        assert publish.trigger_rule == "none_failed_min_one_success"
        assert not publish.downstream_task_ids      # the stats run beside the Asset events
    # Only the publish tasks update Assets: a switch alone is not the table's new batch.
    outlets = {t.task_id for t in dag.tasks if t.outlets}
    assert outlets == {f"publish.{t.name}" for t in spec.tables}


def test_the_batch_goes_in_once_every_switch_is_done_and_before_any_asset_event(tmp_path):
    """`publish: batch` (the default): one task after every group's switch publishes every table
    together; the tables' Asset events and the stats come after it, side by side. `publish: table`: no such
    task, each table's events follow its own switches (its last switch moves it in)."""
    dag = build_dag(DagConfig(streams=2))
    batch = dag.get_task("publish_batch")
    switches = {t.task_id for t in dag.tasks if t.task_id.endswith(".switch")}
    assert batch.upstream_task_ids == switches and len(switches) == 2 * 6 + 2
    assert batch.trigger_rule == "none_failed_min_one_success"
    assert {"stats"} | {f"publish.{t}" for t in load_spec("tpch").table_names} == batch.downstream_task_ids
    # The stats read the groups and the batch's publish, not the Asset events: they run beside those.
    assert dag.get_task("stats").upstream_task_ids == switches | {"publish_batch"}
    raw = yaml.safe_load(spec_file("tpch").read_text())
    path = tmp_path / "per_table.yaml"
    path.write_text(yaml.safe_dump({**raw, "publish": "table"}))
    per_table = build_dag(DagConfig(streams=2, spec=str(path)))
    assert "publish_batch" not in per_table.task_ids
    assert per_table.get_task("publish.orders").upstream_task_ids == {"orders_1.switch", "orders_2.switch"}
    assert len(per_table.tasks) == len(dag.tasks) - 1


def test_stats_task_links_the_run_report():
    from switchyard.airflow.operators import report_url
    dag = build_dag(DagConfig(streams=1))
    assert [link.name for link in dag.get_task("stats").operator_extra_links] == ["Run report"]
    assert report_url("switchyard_tpch", "manual__2026-11-21T02:00:00+00:00", "http://x:8080/") == (
        "http://x:8080/switchyard/reports/switchyard_tpch/manual__2026-11-21T02_00_00_00_00/report.html")


def test_trigger_form_does_not_require_a_batch():
    # The UI marks a param required unless its type admits null; an empty batch means the run's date.
    batch = build_dag(DagConfig(streams=1)).params.get_param("batch")
    assert "null" in batch.schema["type"] and batch.value == ""
    assert batch.schema["section"] == "What to load" and batch.schema["title"] == "Batch"


def test_tasks_take_the_dags_params_and_the_runs_conf_without_a_copy_of_their_own():
    """Each task's context params are the DAG's merged with the run's conf, as the task runner
    builds them (process_params); the serialized DAG keeps the params once, at its level."""
    from airflow.sdk.definitions.param import process_params
    from airflow.serialization.serialized_objects import DagSerialization
    dag = build_dag(DagConfig(streams=2))
    load = dag.get_task("orders_1.load")
    assert not load.params
    assert process_params(dag, load, None, suppress_exception=False)["conn_id"] == dag.params["conn_id"]
    assert process_params(dag, load, {"conn_id": "other_target"}, suppress_exception=False)["conn_id"] == "other_target"
    with pytest.raises(Exception, match="conn_id|does not match"):
        process_params(dag, load, {"conn_id": "no spaces allowed"}, suppress_exception=False)
    assert process_params(dag, load, None, suppress_exception=False)["replace_newer"] is False
    with pytest.raises(Exception, match="replace_newer|is not of type"):
        process_params(dag, load, {"replace_newer": "yes"}, suppress_exception=False)
    serialized = DagSerialization.to_dict(dag)["dag"]
    assert [name for name, _ in serialized["params"]] == ["batch", "tables", "replace_newer", "conn_id"]
    assert not any("params" in t["__var"] for t in serialized["tasks"])


def test_dag_file_parses_in_a_fresh_process_for_96_streams():
    """As Airflow's dag-processor and every task process do: the file imported, the stream
    count from the environment. The time is printed (and judged by `make bench`), not asserted."""
    from switchyard_dev.bench.dag_parse import parse_seconds
    r = parse_seconds(96, rounds=1)
    assert r["tasks"] == expected_tasks(96)
    # Serialized once per parse and stored: the params are the DAG's, not repeated per task
    # (4.6 MB with a copy in each of the 2323 tasks).
    assert r["serialize_seconds"]["median"] > 0 and r["serialized_mb"] < 2.0
    print(f"DAG file with 96 streams in a fresh process: {r['dag_file_seconds']['median']:.2f} s "
          f"(+ airflow.sdk import {r['airflow_sdk_import_seconds']['median']:.2f} s)")


def test_the_grid_lists_the_groups_biggest_table_first():
    """Airflow's grid shows a DAG's task groups in the order they were made (topological, ties in
    order of creation): the spec's weights, biggest first, with the weights the spec gives."""
    spec = load_spec("tpch")
    assert {t.name: t.weight for t in spec.tables} == {"region": 1, "nation": 1, "supplier": 1, "customer": 4,
                                                       "part": 3, "partsupp": 15, "orders": 25, "lineitem": 100}
    dag = build_dag(DagConfig(streams=2))
    groups = [g for g in dag.task_group.children if g not in ("setup", "publish_batch", "publish", "stats")]
    assert groups[:4] == ["lineitem_1", "lineitem_2", "orders_1", "orders_2"]
    tables = list(dict.fromkeys(g.rsplit("_", 1)[0] for g in groups))
    assert tables == ["lineitem", "orders", "partsupp", "customer", "part", "region", "nation", "supplier"]
    biggest_first = build_dag(DagConfig(streams=2, load_order="biggest-first"))
    assert biggest_first.get_task("lineitem_1.load").priority_weight == 100
    assert biggest_first.get_task("nation_1.load").priority_weight == 1


def test_the_loads_pair_each_big_load_with_a_small_one():
    """The default order: the biggest remaining load, then the smallest, by the spec's weights;
    every step of a group has its load's weight."""
    dag = build_dag(DagConfig(streams=2))
    loads = sorted((t for t in dag.tasks if t.task_id.endswith(".load")), key=lambda t: -t.priority_weight)
    order = [t.task_id.split(".")[0] for t in loads]
    assert order[:6] == ["lineitem_1", "supplier_2", "lineitem_2", "supplier_1", "orders_1", "nation_1"]
    assert len({t.priority_weight for t in loads}) == len(loads)
    for t in dag.tasks:
        if t.task_id.count(".") == 1 and t.task_id.split(".")[0] in order:
            assert t.priority_weight == dag.get_task(t.task_id.split(".")[0] + ".load").priority_weight


def _spec_with(tmp_path, **tasks) -> str:
    import yaml
    from switchyard.core.spec import spec_file
    raw = yaml.safe_load(spec_file("tpch").read_text())
    for table, value in tasks.items():
        raw["tables"][table]["tasks"] = value
    path = tmp_path / "tpch.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def test_a_single_task_table_has_one_task_per_group_in_the_load_pool(tmp_path):
    dag = build_dag(DagConfig(streams=3, spec=_spec_with(tmp_path, customer="single", region="single")))
    assert [t.task_id for t in dag.task_group_dict["customer_2"]] == ["customer_2.steps"]
    steps = dag.get_task("customer_2.steps")
    assert steps.pool == "switchyard_loads" and steps.upstream_task_ids == {"setup.plan"}
    assert steps.priority_weight == build_dag(DagConfig(streams=3)).get_task("customer_2.load").priority_weight
    assert [t.task_id for t in dag.task_group_dict["region_1"]] == ["region_1.steps"]
    # The other tables keep a task per step; publish and stats know which tables are single.
    assert [t.task_id for t in dag.task_group_dict["orders_1"]][-1] == "orders_1.switch"
    publish = dag.get_task("publish.customer")
    assert publish.upstream_task_ids == {f"customer_{k}.steps" for k in (1, 2, 3)} | {"publish_batch"}
    assert publish.single
    assert not dag.get_task("publish.orders").single
    assert sorted(dag.get_task("stats").single_tables) == ["customer", "region"]
    assert len(dag.tasks) == expected_tasks(3) - 3 * (3 + 1)


def test_the_spec_names_a_wrong_tasks_value(tmp_path):
    from switchyard.core.spec import SpecError
    with pytest.raises(SpecError, match=r"tables\.customer\.tasks: 'one' is not one of per-step, single"):
        load_spec(_spec_with(tmp_path, customer="one"))


def test_a_single_tasks_state_spreads_over_its_steps_as_four_tasks_would_have_them():
    from switchyard.observability.stats import single_task_states
    assert single_task_states("success", {"prepare": {}, "load": {}, "validate": {}, "switch": {}}) == dict.fromkeys(
        ("prepare", "load", "validate", "switch"), "success")
    assert single_task_states("failed", {"prepare": {}, "load": {}, "failed_step": "validate"}) == {
        "prepare": "success", "load": "success", "validate": "failed", "switch": None}
    assert single_task_states("failed", {"failed_step": "prepare"}) == {
        "prepare": "failed", "load": None, "validate": None, "switch": None}
    assert single_task_states("skipped", {}) == dict.fromkeys(("prepare", "load", "validate", "switch"), "skipped")


def test_no_step_task_has_a_template_field(monkeypatch, tmp_path):
    monkeypatch.setenv("SWITCHYARD_RUNS_DIR", str(tmp_path))
    dag = build_dag(DagConfig(streams=2))
    rendered = {t.task_id: tuple(t.template_fields) for t in dag.tasks if t.template_fields}
    # The two setup tasks show the batch they were asked for (the wait its start date too); no
    # other task renders anything.
    assert rendered == {"setup.wait_for_batch": ("batch", "not_before"), "setup.plan": ("batch", "tables")}
    assert all(getattr(t, "conn_id", None) is None for t in dag.tasks if hasattr(t, "lock_timeout_seconds"))


def test_a_step_reads_its_connection_from_the_runs_params_when_it_starts():
    """No template field: each step takes `conn_id` from the params the task runner builds (the
    DAG's merged with the run's conf) in pre_execute, before execute."""
    import copy
    from airflow.sdk.definitions.param import process_params
    from airflow.sdk.exceptions import AirflowFailException
    dag = build_dag(DagConfig(streams=2))
    load = dag.get_task("orders_1.load")
    assert load.conn_id is None and not load.template_fields
    for conf, expected in ((None, dag.params["conn_id"]), ({"conn_id": "other_target"}, "other_target")):
        task = copy.copy(load)  # the task runner runs a copy of the DAG's task
        task.pre_execute({"params": process_params(dag, load, conf, suppress_exception=False)})
        assert task.conn_id == expected
    with pytest.raises(AirflowFailException, match="`conn_id` param is empty"):
        copy.copy(load).pre_execute({"params": {"conn_id": " "}})
    given = copy.copy(load)
    given.conn_id = "set_by_hand"
    given.pre_execute({"params": {"conn_id": "other_target"}})
    assert given.conn_id == "set_by_hand"


def test_the_start_date_holds_off_scheduled_runs_only_and_no_task_has_one(monkeypatch):
    """Airflow creates no instance of a task for a run dated before the task's start date: with the
    DAG's start date on every task, a manual run dated before it ended `success` with no task at
    all. The DAG has none; SWITCHYARD_START_DATE holds off scheduled runs in the setup's wait."""
    from datetime import datetime, timezone
    from types import SimpleNamespace
    from airflow.sdk.exceptions import AirflowSkipException
    monkeypatch.setenv("SWITCHYARD_START_DATE", "2026-12-01")
    monkeypatch.setenv("SWITCHYARD_SCHEDULE", "0 2 1 * *")
    dag = build_dag(DagConfig.from_env())
    assert dag.start_date is None and all(t.start_date is None for t in dag.tasks)
    wait = dag.get_task("setup.wait_for_batch")
    before, after = datetime(2026, 11, 1, 2, tzinfo=timezone.utc), datetime(2026, 12, 1, 2, tzinfo=timezone.utc)

    def context(run_type, when):
        return {"dag_run": SimpleNamespace(run_type=run_type), "logical_date": when, "params": {"batch": ""}}
    with pytest.raises(AirflowSkipException, match=r"before SWITCHYARD_START_DATE 2026-12-01T00:00:00\+00:00"):
        wait.execute(context("scheduled", before))
    for run_type, when in (("manual", before), ("backfill", before), ("scheduled", after)):
        assert wait._held_off(context(run_type, when)) is None, run_type
    # The run's note says why it loaded nothing, not that its statistics went missing; the
    # scheduler that writes it holds the DAG as serialized.
    from airflow.serialization.serialized_objects import DagSerialization
    from switchyard.airflow.run_notes import held_off_run, run_note
    serialized = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    run = SimpleNamespace(dag=serialized, run_type="scheduled", logical_date=before)
    note = run_note(None, "success", "Switchyard", "/report", held_off_run(run))
    assert "Nothing loaded: a scheduled run dated 2026-11-01T02:00:00+00:00, before SWITCHYARD_START_DATE" in note
    assert "No statistics" not in note
    assert "/report" not in note   # its stats task skipped: no report to link
    assert held_off_run(SimpleNamespace(dag=dag, run_type="manual", logical_date=before)) is None


def test_a_run_made_before_the_spec_gained_a_table_is_refused_at_its_plan(tmp_path):
    """A run the scheduler made from a parse of the DAG before the spec gained a table has no
    tasks for that table's groups, while its setup.plan reads the spec as it is now: the plan
    names the groups and what to do, instead of a run that fails later saying `incomplete at
    prepare`. A run of the DAG as it is now plans every group it has a task for."""
    from switchyard import steps
    from switchyard.core.datagen import generate_tpch_day
    from switchyard.core.planner import plan_batch
    spec = load_spec("tpch")
    before = tmp_path / "before.yaml"
    raw = yaml.safe_load(spec_file("tpch").read_text())
    del raw["tables"]["region"]                     # the spec the DAG was parsed from
    before.write_text(yaml.safe_dump(raw, sort_keys=False))
    old_tasks = {t.task_id for t in build_dag(DagConfig(spec=str(before), streams=2)).tasks}
    now_tasks = {t.task_id for t in build_dag(DagConfig(streams=2)).tasks}
    plan = plan_batch(spec, generate_tpch_day(tmp_path / "b", spec, 0.01, 2, 1, 2))
    said = steps.groups_without_tasks(plan, list(spec.table_names), old_tasks, 2)
    assert said.startswith("this run has no tasks for region_1: it was made from a parse of the DAG from before the "
                           "spec changed"), said
    assert steps.groups_without_tasks(plan, list(spec.table_names), now_tasks, 2) is None
    assert steps.groups_without_tasks(plan, [t for t in spec.table_names if t != "region"], old_tasks, 2) is None
    assert steps.groups_without_tasks(plan, list(spec.table_names), set(), 2) is None   # the run's tasks not known
    # A batch wider than the DAG (3 streams of a table, groups for 2) is the plan's other refusal.
    assert steps.groups_without_tasks(plan, list(spec.table_names), now_tasks - {"region_1.prepare", "region_1.load",
                                      "region_1.validate", "region_1.switch"}, 0) is None


def test_a_run_naming_a_connection_airflow_does_not_have_fails_at_once(monkeypatch):
    """A run triggered with a `conn_id` no connection has: its tasks fail at once (Airflow retries
    no AirflowFailException), saying which connection and what to do, instead of setup.plan
    waiting out the retries meant for another run's lease (24 x 5 minutes by default) while the
    run looked as if it were loading. Airflow's own lookup, outside a task: its environment and
    secrets backends."""
    from airflow.sdk.exceptions import AirflowFailException
    from switchyard.airflow.operators import PlanBatchOperator
    monkeypatch.delenv("AIRFLOW_CONN_NO_SUCH_TARGET", raising=False)
    plan = PlanBatchOperator(task_id="plan", streams=1, spec="tpch", conn_id="no_such_target", schema="s")
    with pytest.raises(AirflowFailException, match=re.escape(
            "the target connection 'no_such_target' (the run's conn_id param) is not defined in Airflow: add it "
            "(`airflow connections add no_such_target --conn-uri ...`)")):
        plan.adapter()
