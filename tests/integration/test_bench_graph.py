"""The benchmark's empty graphs: Switchyard's task graph exactly, with steps that do nothing."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from switchyard_dev.bench import graph as bench_graph
from switchyard.airflow.dag_factory import DagConfig, build_dag

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"


def _shape(dag) -> dict:
    return {t.task_id: (sorted(t.upstream_task_ids), t.pool, t.priority_weight, t.weight_rule, t.trigger_rule)
            for t in dag.tasks}


@pytest.fixture
def three_streams(monkeypatch):
    monkeypatch.setenv("SWITCHYARD_STREAMS", "3")
    bench_graph._BUILT.clear()
    yield
    bench_graph._BUILT.clear()


def test_the_empty_graphs_have_the_dags_tasks_dependencies_pool_and_weights(three_streams):
    real = build_dag(DagConfig.from_env(schedule=None))
    graphs = bench_graph.graph_dags()
    assert set(graphs) == {"switchyard_graph_worker", "switchyard_graph_triggerer"}
    for dag in graphs.values():
        assert _shape(dag) == _shape(real)
        assert len(dag.tasks) == len(real.tasks) > 20
    worker, triggerer = graphs["switchyard_graph_worker"], graphs["switchyard_graph_triggerer"]
    assert all(type(t) is bench_graph.EmptyStep and not t.start_from_trigger for t in worker.tasks)
    assert all(type(t) is bench_graph.EmptyTriggerStep and t.start_from_trigger for t in triggerer.tasks)
    # Nothing rendered, so a step costs Airflow no rendered-fields call: the bare minimum.
    assert all(not t.template_fields for t in worker.tasks)
    # Built once per configuration, as the scheduler's preload relies on.
    assert bench_graph.graph_dags() is graphs


def test_the_trigger_ends_its_task_at_once():
    from airflow.triggers.base import TaskSuccessEvent

    async def first():
        async for event in bench_graph.StepDoneTrigger().run():
            return event

    assert isinstance(asyncio.run(first()), TaskSuccessEvent)
    classpath, kwargs = bench_graph.StepDoneTrigger().serialize()
    assert classpath == bench_graph.EmptyTriggerStep.start_trigger_args.trigger_cls
    assert kwargs == {}


def test_the_dag_file_is_found_by_safe_mode_and_defines_both_graphs(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_graph, "dag_folder", lambda: tmp_path)
    text = bench_graph._DAG_FILE_TEXT
    # Airflow's safe-mode discovery skips a file that does not mention both words.
    assert "airflow" in text.lower() and "dag" in text.lower()
    path = tmp_path / bench_graph.DAG_FILE
    path.write_text(text)
    code = ("import json, runpy; g = runpy.run_path(%r); "
            "print(json.dumps({k: len(v.tasks) for k, v in g.items() if k.startswith('switchyard_graph_')}))"
            % str(path))
    env = dict(os.environ, SWITCHYARD_STREAMS="2", PYTHONPATH=str(PLUGINS), GX_ANALYTICS_ENABLED="False")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    counts = json.loads(out.stdout.strip().splitlines()[-1])
    expected = len(build_dag(DagConfig(streams=2)).tasks)
    assert counts == {"switchyard_graph_worker": expected, "switchyard_graph_triggerer": expected}


def test_the_bound_adds_the_graphs_cpu_to_the_floors_and_charges_the_idle_rate_per_second():
    floor = {"wall_seconds": 80.0, "cpu_seconds": {"postgres": 130.0, "clients": 18.0, "other": 4.0}}
    graph = {"airflow_cpu_seconds": 34.0, "wall_seconds": 20.0}
    # No idle cost: (148 + 34) / 2 cores = 91 s.
    b = bench_graph.bound(floor, graph, {"airflow_cpu_per_second": 0.0}, 2)
    assert b["makespan_at_least_seconds"] == 91.0
    assert b["floor_over_makespan_at_most"] == round(80 / 91, 3)
    # 0.1 CPU s per second idle: the graph's own 20 s of it are not per-task cost (34 - 2 = 32),
    # and every second of the run takes 0.1 of the 2 cores: (148 + 32) / 1.9.
    b = bench_graph.bound(floor, graph, {"airflow_cpu_per_second": 0.1}, 2)
    assert b["graph_per_task_part_cpu_seconds"] == 32.0
    assert b["makespan_at_least_seconds"] == round(180 / 1.9, 2)
    # The machine's other work ("other") is not the floor's work.
    assert b["floor_work_cpu_seconds"] == 148.0


def test_the_end_state_bound_takes_the_work_of_the_floor_with_indexes_and_the_floors_wall_time():
    floor = {"wall_seconds": 80.0, "cpu_seconds": {"postgres": 130.0, "clients": 18.0}}
    with_indexes = {"wall_seconds": 84.0, "cpu_seconds": {"postgres": 158.0, "clients": 18.0, "other": 9.0}}
    graph = {"airflow_cpu_seconds": 34.0, "wall_seconds": 20.0}
    b = bench_graph.bound(floor, graph, {"airflow_cpu_per_second": 0.0}, 2, work_of=with_indexes)
    # (158 + 18 + 34) / 2 cores = 105 s, against the floor's 80 s.
    assert b["floor_work_cpu_seconds"] == 176.0
    assert b["makespan_at_least_seconds"] == 105.0
    assert b["floor_over_makespan_at_most"] == round(80 / 105, 3)
