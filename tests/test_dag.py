"""DAG integrity: imports cleanly, no cycles, one group of four tasks per (table, stream)."""
from __future__ import annotations

import importlib.util
import time

import pytest

from switchyard.dag_factory import DagConfig, build_dag
from switchyard.spec import load_spec

ROOT_DAG = __import__("pathlib").Path(__file__).resolve().parents[1] / "dags" / "switchyard_tpch.py"


def expected_tasks(streams: int) -> int:
    spec = load_spec("tpch")
    groups = sum(streams if t.partitioned else 1 for t in spec.tables)
    return 4 * groups + 2 + 1  # setup (wait_for_batch, plan) + stats


@pytest.mark.parametrize("streams", [1, 3, 8, 56])
def test_task_count_and_no_cycles(streams):
    dag = build_dag(DagConfig(streams=streams))
    dag.check_cycle()
    assert len(dag.tasks) == expected_tasks(streams)
    assert 4 * (6 * streams + 2) + 3 == len(dag.tasks)
    group = dag.task_group_dict["orders_1"]
    assert [t.task_id for t in group] == ["orders_1.prepare", "orders_1.load", "orders_1.validate",
                                         "orders_1.switch"]
    assert dag.get_task("orders_1.load").pool == "switchyard_loads"
    assert dag.get_task("stats").trigger_rule == "all_done"
    assert dag.get_task("orders_1.prepare").upstream_task_ids == {"setup.plan"}


def test_dag_file_imports_with_the_configured_stream_count(monkeypatch):
    monkeypatch.setenv("SWITCHYARD_STREAMS", "5")
    spec = importlib.util.spec_from_file_location("switchyard_tpch_dag", ROOT_DAG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.dag.dag_id == "switchyard_tpch"
    assert len(module.dag.tasks) == expected_tasks(5)
    assert module.dag.max_active_runs == 1
    assert set(module.dag.params.keys()) == {"batch", "tables", "conn_id"}


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


def test_dag_file_parses_in_a_fresh_process_for_96_streams():
    """As Airflow's dag-processor and every task process do: the file imported, the stream
    count from the environment. The time is printed (and judged by `make bench`), not asserted."""
    from switchyard.bench import parse_seconds
    r = parse_seconds(96, rounds=1)
    assert r["tasks"] == expected_tasks(96)
    print(f"DAG file with 96 streams in a fresh process: {r['dag_file_seconds']['median']:.2f} s "
          f"(+ airflow.sdk import {r['airflow_sdk_import_seconds']['median']:.2f} s)")
