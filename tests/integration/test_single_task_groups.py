"""Tables whose groups run their four steps in one task (`tasks: single`), through the real DAG
(`airflow dags test`) on the embedded PostgreSQL: the same data, checks and outcome as the
four tasks, and a failed check still leaves the table as it was."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from helpers import LATER_STEPS_CHECK, copy_batch, edit_manifest, fingerprint, line_count, partition_oids, partitions, run_dag
from switchyard.core.spec import spec_file

SINGLE = ("customer", "region")  # a partitioned table and an unpartitioned one
TABLES = ["orders", "customer", "region"]  # orders keeps a task per step beside them


def single_spec(folder: Path) -> str:
    raw = yaml.safe_load(spec_file("tpch").read_text())
    raw["name"] = "tpch_single"
    for name in SINGLE:
        raw["tables"][name]["tasks"] = "single"
    path = folder / "tpch_single.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def run_single(pg_uri, data_root, schema, batch: str, folder: Path, runs: Path):
    """The DAG with SINGLE as one-task groups, over TABLES; it must succeed."""
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": batch, "tables": TABLES}, runs, spec=single_spec(folder))
    assert run.returncode == 0, run.output[-4000:]
    return run


def test_single_task_groups_load_exactly_what_the_four_tasks_load(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, folder = tpch_batch
    run = run_single(pg_uri, data_root, schema, name, tmp_path, tmp_path / "runs")

    loaded = fingerprint(pg_uri, schema, TABLES)
    for table in TABLES:
        files = sorted((folder / table).glob("*.tbl"))
        assert loaded[table][0] == sum(line_count(f) for f in files), table
    assert len(partitions(pg_uri, schema, "customer")) == 3

    groups = {g["group"]: g for g in run.stats["groups"]}
    assert run.stats["failed_groups"] == []
    for gid in ("customer_1", "customer_2", "customer_3", "region_1", "orders_1"):
        g = groups[gid]
        assert g["outcome"] == "switched" and g["validation"] == "passed", gid
        assert g["states"] == {"prepare": "success", "load": "success", "validate": "success",
                               "switch": "success"}, gid
        # Each step's span, one after the other, as the report's Gantt chart draws them.
        spans = [g["steps"][step] for step in ("prepare", "load", "validate", "switch")]
        assert all(a["ended"] <= b["started"] for a, b in zip(spans, spans[1:])), gid
    assert sum(g["rows"] for g in groups.values() if g["table"] == "customer") == loaded["customer"][0]
    assert run.stats["tables"]["customer"]["partitions"] == 3
    # One task per group: the steps' logs name the group's task `steps`.
    assert "customer_2.steps" in run.output and "customer_2.load" not in run.output

    # The same batch with a task per step gives the same contents.
    again = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": TABLES}, tmp_path / "runs-four")
    assert again.returncode == 0, again.output[-4000:]
    assert "customer_2.load" in again.output
    assert fingerprint(pg_uri, schema, TABLES) == loaded


def test_a_failed_check_in_a_single_task_keeps_the_table_whole(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, folder = tpch_batch
    run_single(pg_uri, data_root, schema, name, tmp_path, tmp_path / "runs")
    before = fingerprint(pg_uri, schema, TABLES)
    oids = partition_oids(pg_uri, schema, "customer")

    bad_name = "bad-rowcount-single"
    bad = copy_batch(folder, data_root / bad_name)
    rows = next(e["rows"] for e in json.loads((bad / "manifest.json").read_text())["files"]
                if e["table"] == "customer" and e["stream"] == 2)
    edit_manifest(bad, "customer", 2, rows=rows + 1)
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": bad_name, "tables": TABLES}, tmp_path / "runs2",
                  spec=single_spec(tmp_path), extra_env=LATER_STEPS_CHECK)
    assert run.returncode != 0

    groups = {g["group"]: g for g in run.stats["groups"]}
    failed = groups["customer_2"]
    assert failed["outcome"] == "failed at validate" and failed["validation"] == "failed"
    assert failed["states"]["prepare"] == failed["states"]["load"] == "success"
    assert failed["states"]["switch"] is None
    assert f"expected {rows + 1}, observed {rows}" in run.output
    assert "table customer, stream 2" in run.output
    assert set(failed["errors"]) == {"validate"}
    # The batch's other groups validated and were held back; customer and orders are as they
    # were, not one partition replaced: a batch goes in whole.
    assert groups["customer_1"]["outcome"] == groups["customer_3"]["outcome"] == "held back"
    assert groups["orders_1"]["outcome"] == "held back"
    assert run.stats["tables_kept"] == sorted(TABLES)
    assert fingerprint(pg_uri, schema, TABLES) == before
    assert partition_oids(pg_uri, schema, "customer") == oids
