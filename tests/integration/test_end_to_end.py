"""The real DAG, end to end, on the embedded PostgreSQL (`airflow dags test`)."""
from __future__ import annotations

import json

from helpers import (LATER_STEPS_CHECK, copy_batch, edit_manifest, fingerprint, line_count, load_through_steps,
                     partition_oids, partitions, run_dag, run_lease)
from switchyard.core.spec import load_spec

SPEC = load_spec("tpch")


def test_full_batch_loads_and_reloads_identically(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, folder = tpch_batch
    first = run_dag(pg_uri, data_root, schema, 3, {"batch": name}, tmp_path / "runs")
    assert first.returncode == 0, first.output[-4000:]

    before = fingerprint(pg_uri, schema)
    for table in SPEC.tables:
        files = sorted((folder / table.name).glob("*.tbl"))
        assert before[table.name][0] == sum(line_count(f) for f in files), table.name
        if table.partitioned:
            assert len(partitions(pg_uri, schema, table.name)) == 3, table.name

    stats = first.stats
    assert stats is not None and stats["failed_groups"] == []
    assert stats["totals"]["switched"] == 6 * 3 + 2
    for table, t in stats["tables"].items():
        assert t["rows"] == before[table][0], table
        assert t["partitions"] == (3 if SPEC.table(table).partitioned else 1)
    switched = [g for g in stats["groups"] if g["table"] == "orders"]
    assert all(g["validation"] == "passed" and g["rows_per_s"] > 0 for g in switched)
    # Each validate task took its row count from its own load (the storage the COPY filled);
    # the counts are the files' (checked against the table above).
    for g in stats["groups"]:
        count = next(c for c in g["validation_checks"] if c["expectation"] == "expect_table_row_count_to_equal")
        assert "the load's COPY reported" in count["observed"]["proven"], (g["group"], count)

    assert run_lease(pg_uri, schema) is None, "a finished run releases the target's run lease"

    # A rerun of the finished batch: the same contents, every partition replaced (reruns of
    # reruns, and backfills of many batches: make chaos).
    for rerun in range(1, 2):
        oids = {t: partition_oids(pg_uri, schema, t) for t in ("orders", "lineitem")}
        again = run_dag(pg_uri, data_root, schema, 3, {"batch": name}, tmp_path / f"runs-{rerun}")
        assert again.returncode == 0, again.output[-4000:]
        assert fingerprint(pg_uri, schema) == before, f"rerun {rerun} changed the contents"
        assert again.stats["failed_groups"] == [] and again.stats["totals"]["switched"] == 6 * 3 + 2
        assert all(g["replaced"] for g in again.stats["groups"] if g["table"] in ("orders", "lineitem"))
        for table in ("orders", "lineitem"):
            now = partition_oids(pg_uri, schema, table)
            assert now.keys() == oids[table].keys(), table
            assert all(now[p] != oids[table][p] for p in now), f"rerun {rerun}: {table} not replaced"
        assert run_lease(pg_uri, schema) is None


def test_manifest_disagreeing_with_file_fails_validation_and_keeps_target(pg_uri, data_root, tpch_batch,
                                                                          schema, tmp_path):
    name, folder = tpch_batch
    # The good batch through the DAG's steps without Airflow (its DAG run is the test above).
    load_through_steps(pg_uri, schema, SPEC, folder, name, ["orders", "customer"])
    before = fingerprint(pg_uri, schema, ["orders", "customer"])
    assert before["orders"][0] > 0
    oids_before = partition_oids(pg_uri, schema, "orders")

    bad_name = "bad-rowcount"
    bad = copy_batch(folder, data_root / bad_name)
    entry = json.loads((bad / "manifest.json").read_text())
    rows = next(e["rows"] for e in entry["files"] if e["table"] == "orders" and e["stream"] == 2)
    edit_manifest(bad, "orders", 2, rows=rows + 1)

    run = run_dag(pg_uri, data_root, schema, 3, {"batch": bad_name, "tables": ["orders", "customer"]},
                  tmp_path / "runs2", extra_env=LATER_STEPS_CHECK)
    groups = {g["group"]: g for g in run.stats["groups"]}
    assert groups["orders_2"]["outcome"] == "failed at validate"
    assert groups["orders_2"]["validation"] == "failed"
    assert "expect_table_row_count_to_equal" in run.output
    assert f"expected {rows + 1}, observed {rows}" in run.output
    assert "table orders, stream 2" in run.output
    # The failed group switched nothing, and a batch's tables go in together: orders' other
    # groups and customer's validated but were held back, so both tables are untouched (not
    # one partition replaced).
    assert groups["orders_1"]["outcome"] == groups["orders_3"]["outcome"] == "held back"
    assert groups["customer_1"]["outcome"] == "held back"
    assert groups["lineitem_1"]["outcome"] == "skipped"
    assert run.stats["tables_kept"] == ["customer", "orders"]
    assert fingerprint(pg_uri, schema, ["orders", "customer"]) == before
    oids_after = partition_oids(pg_uri, schema, "orders")
    changed = sorted(name for name in oids_after if oids_after[name] != oids_before[name])
    assert changed == []
