"""Routing by source: the spec's `sources` and SWITCHYARD_LOAD_EXECUTOR put each stream's load (and
only the load) on the executor and queue of the workers that hold its files."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from switchyard.airflow.dag_factory import DagConfig, build_dag
from switchyard.core.spec import SpecError, parse_spec, spec_file

TPCH = yaml.safe_load(spec_file("tpch").read_text())


def spec_with(sources, tmp_path):
    raw = dict(TPCH, sources=sources)
    path = tmp_path / "tpch.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def test_sources_name_streams_and_ranges():
    spec = parse_spec(dict(TPCH, sources={"source_a": [1, "2-3"], "source_b": ["4 - 4"]}))
    assert spec.sources == {"source_a": (1, 2, 3), "source_b": (4,)}
    assert [spec.source_of(k) for k in (1, 3, 4, 5)] == ["source_a", "source_a", "source_b", None]
    assert parse_spec(TPCH).sources == {} and parse_spec(TPCH).source_of(1) is None


@pytest.mark.parametrize("sources, message", [
    ({"source_a": [1, 2], "source_b": [2]}, "stream 2 is listed twice"),
    ({"source a": [1]}, "not a valid source name"),
    ({"source_a": []}, "a list of stream numbers"),
    ({"source_a": [0]}, "neither a stream number"),
    ({"source_a": ["3-1"]}, "neither a stream number"),
    (["source_a"], "a mapping of source"),
])
def test_bad_sources_are_refused_naming_the_entry(sources, message):
    with pytest.raises(SpecError, match=message) as err:
        parse_spec(dict(TPCH, sources=sources), source="x.yaml")
    assert "x.yaml: sources" in str(err.value)


def test_only_the_load_goes_to_the_source_queue_on_the_load_executor(tmp_path):
    spec = spec_with({"source_a": [1, 2], "source_b": [3, 4]}, tmp_path)
    dag = build_dag(DagConfig(streams=4, spec=spec, load_executor="EdgeExecutor"))
    for table, k, queue in [("orders", 1, "source_a"), ("lineitem", 2, "source_a"), ("orders", 3, "source_b"),
                            ("region", 1, "source_a")]:
        load = dag.get_task(f"{table}_{k}.load")
        assert (load.executor, load.queue, load.pool) == ("EdgeExecutor", queue, "switchyard_loads")
        for step in ("prepare", "validate", "switch"):
            task = dag.get_task(f"{table}_{k}.{step}")
            assert task.executor is None and task.queue == "default", (table, k, step)
        # The prepare step does not look for a file its host cannot see.
        assert dag.get_task(f"{table}_{k}.prepare").file_on_source == queue
    for task_id in ("setup.plan", "setup.wait_for_batch", "stats", "publish.orders"):
        assert dag.get_task(task_id).executor is None


def test_each_sources_files_are_checked_there_before_any_group_starts(tmp_path):
    """The plan cannot see a source's files: a task of the setup group on each source's queue
    checks them, after the plan and before every group's first step (a table with no load on a
    source, all its streams there empty or unlisted, has its files there checked all the same)."""
    spec = spec_with({"source_a": [1, 2], "source.b": [3, 4], "source_b": [5]}, tmp_path)
    dag = build_dag(DagConfig(streams=5, spec=spec, load_executor="EdgeExecutor"))
    checks = {"setup.files_on_source_a": "source_a", "setup.files_on_source_b": "source.b",
              "setup.files_on_source_b_2": "source_b"}
    for task_id, source in checks.items():
        task = dag.get_task(task_id)
        assert (task.source, task.queue, task.executor) == (source, source, "EdgeExecutor")
        assert task.upstream_task_ids == {"setup.plan"}
    for task in dag.tasks:
        if task.task_id.endswith((".prepare", ".steps")):
            assert set(checks) <= task.get_flat_relative_ids(upstream=True), task.task_id
    assert not [t for t in build_dag(DagConfig(streams=2)).tasks if ".files_on_" in t.task_id]


def test_each_sources_files_are_compared_there_with_what_their_loads_read_before_the_publish(tmp_path):
    """The batch's publish compares the files it sees with what their loads read; a source's files
    are compared on the source's queue, after every switch and before the publish."""
    spec = spec_with({"source_a": [1, 2], "source_b": [3, 4]}, tmp_path)
    dag = build_dag(DagConfig(streams=4, spec=spec, load_executor="EdgeExecutor"))
    checks = {"files_on_source_a_as_loaded": "source_a", "files_on_source_b_as_loaded": "source_b"}
    switches = {t.task_id for t in dag.tasks if t.task_id.endswith((".switch", ".steps"))}
    for task_id, source in checks.items():
        task = dag.get_task(task_id)
        assert (task.source, task.as_loaded, task.queue, task.executor) == (source, True, source, "EdgeExecutor")
        assert task.upstream_task_ids == switches and task.trigger_rule == "none_failed_min_one_success"
    assert set(checks) <= dag.get_task("publish_batch").upstream_task_ids
    assert not [t for t in build_dag(DagConfig(streams=2)).tasks if t.task_id.endswith("_as_loaded")]


def test_with_publish_table_each_sources_files_of_a_table_are_compared_there_before_its_switches(tmp_path):
    """`publish: table`: a table goes in at its last switch, on the central site, which cannot see
    a source's files. Each source's files of the table are compared on the source's queue after
    every validate of the table and before any switch of it; a cleared group runs them again."""
    spec = spec_with({"source_a": [1, 2], "source_b": [3]}, tmp_path)
    path = Path(spec)
    path.write_text(path.read_text() + "publish: table\n")
    dag = build_dag(DagConfig(streams=4, spec=spec, load_executor="EdgeExecutor"))
    for table in ("orders", "lineitem"):
        validates = {f"{table}_{k}.validate" for k in range(1, 5)}
        checks = {f"{table}_files_on_source_a_as_loaded": "source_a", f"{table}_files_on_source_b_as_loaded": "source_b"}
        for task_id, source in checks.items():
            task = dag.get_task(task_id)
            assert (task.source, task.table, task.as_loaded, task.queue) == (source, table, True, source)
            assert task.upstream_task_ids == validates and task.trigger_rule == "none_failed_min_one_success"
        for k in range(1, 5):
            assert dag.get_task(f"{table}_{k}.switch").upstream_task_ids == {f"{table}_{k}.validate", *checks}
    assert not [t for t in dag.tasks if t.task_id.startswith("files_on_") and t.task_id.endswith("_as_loaded")]
    assert "publish_batch" not in dag.task_ids


def test_tasks_single_with_publish_table_and_sources_is_refused(tmp_path):
    """A table of one-task groups goes in at its last group's task, on one source's worker: its
    files on other sources would go in unchecked. The spec is refused, saying what to use."""
    raw = dict(TPCH, sources={"source_a": [1], "source_b": [2]}, publish="table")
    raw["tables"] = {**raw["tables"], "nation": {**raw["tables"]["nation"], "tasks": "single"}}
    with pytest.raises(SpecError, match=r"tables nation: `tasks: single` with `publish: table` and `sources`.*"
                                        r"use `publish: batch`, or `tasks: per-step`"):
        parse_spec(raw)
    parse_spec({**raw, "publish": "batch"})


def test_without_sources_loads_use_the_executors_default_queue(tmp_path):
    dag = build_dag(DagConfig(streams=2, load_executor="EdgeExecutor"))
    load = dag.get_task("orders_2.load")
    assert load.executor == "EdgeExecutor" and load.queue == "default"
    assert dag.get_task("orders_2.prepare").file_on_source is None


def test_the_default_is_todays_dag(tmp_path):
    dag = build_dag(DagConfig(streams=2))
    assert all(t.executor is None and t.queue == "default" for t in dag.tasks)


def test_the_load_executor_setting(monkeypatch):
    monkeypatch.setenv("SWITCHYARD_LOAD_EXECUTOR", "EdgeExecutor")
    assert DagConfig.from_env().load_executor == "EdgeExecutor"
    monkeypatch.setenv("SWITCHYARD_LOAD_EXECUTOR", "none")
    assert DagConfig.from_env().load_executor is None


def test_an_edge_worker_preloads_what_a_load_needs_without_great_expectations(monkeypatch):
    from switchyard.airflow import preload
    airflow = "/venv/bin/airflow"
    assert preload.is_edge_worker([airflow, "edge", "worker", "--queues", "source_a"])
    assert not preload.is_edge_worker([airflow, "edge", "stop"]) and not preload.is_scheduler([airflow, "edge", "worker"])
    assert preload.preload([airflow, "api-server"]) == {"preloaded": []}
    assert not any(m.startswith("great_expectations") for m in preload.WORKER_MODULES)
    assert {"psycopg", "switchyard.targets.postgres", "switchyard.airflow.operators"} <= set(preload.WORKER_MODULES)
    imported = []
    monkeypatch.setattr(preload, "report", {})
    monkeypatch.setattr("switchyard.airflow.dag_factory.dag_from_env", lambda: None)
    monkeypatch.setattr(preload.importlib, "import_module", lambda name: imported.append(name))
    # Airflow's task-side plugins: an edge worker's task processes are forked too.
    monkeypatch.setattr(preload, "load_task_plugins", lambda: imported.append("<airflow task plugins>"))
    monkeypatch.setenv("SWITCHYARD_PRELOAD", "0")
    assert preload.preload([airflow, "edge", "worker"]) == {"preloaded": []} and imported == []
    monkeypatch.setenv("SWITCHYARD_PRELOAD", "1")
    report = preload.preload([airflow, "edge", "worker", "--queues", "source_a"])
    assert imported == [*preload.WORKER_MODULES, "<airflow task plugins>"] and report["dag_built"]
