"""The DAG's graph as plain data (switchyard/graph.py), without Airflow: what build_dag renders."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

from switchyard.core.spec import load_spec
from switchyard.graph import GraphSettings, build_graph

SPEC = load_spec("tpch")


def test_the_graph_imports_no_airflow():
    code = "import sys, switchyard.graph; print([m for m in sys.modules if m.split('.')[0] == 'airflow'])"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "[]"


def test_every_group_runs_its_steps_in_order_after_setup_and_before_the_publish():
    graph = build_graph(SPEC, GraphSettings(streams=3, pool="loads", prepare_pool="preps"))
    ids = [n.id for n in graph.nodes]
    assert ids[:2] == ["setup.wait_for_batch", "setup.plan"] and ids[-1] == "stats"
    groups = [g for g in graph.groups if g not in ("setup", "publish")]
    # lineitem (the heaviest) first; nation and region come in one stream.
    assert groups[:3] == ["lineitem_1", "lineitem_2", "lineitem_3"] and "nation_2" not in groups
    for g in groups:
        prepare, load, validate, switch = (graph.node(f"{g}.{step}") for step in ("prepare", "load", "validate",
                                                                                   "switch"))
        assert prepare.upstream == ("setup",) and prepare.options["pool"] == "preps"
        assert load.upstream == (prepare.id,) and load.options["pool"] == "loads"
        assert (validate.upstream, switch.upstream) == ((load.id,), (validate.id,))
    publish = graph.node("publish_batch")
    assert set(publish.upstream) == {f"{g}.switch" for g in groups}
    assert publish.options["trigger_rule"] == "none_failed_min_one_success"
    orders = graph.node("publish.orders")
    assert orders.upstream == ("orders_1.switch", "orders_2.switch", "orders_3.switch", "publish_batch")
    assert orders.options["asset"] == ("switchyard_target", "tpch", "orders")
    assert graph.node("stats").options["trigger_rule"] == "all_done"


def test_a_single_task_table_and_a_table_by_table_publish():
    spec = replace(SPEC, publish="table",
                   tables=tuple(replace(t, tasks="single") if t.name == "nation" else t for t in SPEC.tables))
    graph = build_graph(spec, GraphSettings(streams=2, pool="loads", load_executor="EdgeExecutor"))
    steps = graph.node("nation_1.steps")
    assert steps.upstream == ("setup",) and steps.options["pool"] == "loads"
    assert steps.options["executor"] == "EdgeExecutor" and graph.groups["nation_1"].endswith("in one task")
    assert not any(n.id == "publish_batch" for n in graph.nodes)
    assert graph.node("publish.nation").upstream == ("nation_1.steps",)
    assert graph.node("stats").options["single_tables"] == ["nation"]
