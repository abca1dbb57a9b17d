"""The benchmark's floor with the target's unique indexes, its "index only" DAG lever and its
spec levers: the index's SQL, the files' unique columns from the spec, the lever's stand-in for
the checks and the test that tells whether it took effect, the reported bound, the levers' spec
variants. No timing is asserted."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from switchyard.core.datagen import generate_tpch
from switchyard.core.batch import read_manifest
from switchyard.core.spec import load_spec
from switchyard_dev.bench.common import batch_files
from switchyard_dev.bench.dag_levers import DAG_LEVERS, SMALL_TABLES
from switchyard_dev.bench.floor import VARIANTS, floor_unique_index_sql, index_summary, unique_floor_cost
from switchyard_dev.bench.index_only import checks_ran, validate_index_only
from switchyard_dev.bench.own_airflow import airflow_settings, spec_variant
from switchyard_dev.bench.report import shape_lines, target_lines, unique_floor_lines, work_bound_lines
from switchyard_dev.bench.targets import shape_targets, work_bound

ROOT = Path(__file__).resolve().parents[2]


def test_the_floors_unique_index_quotes_every_name_and_keeps_the_columns_order():
    assert floor_unique_index_sql("bench_floor", "lineitem_1", ["l_orderkey", "l_linenumber"]) == (
        'CREATE UNIQUE INDEX "lineitem_1_unique" ON "bench_floor"."lineitem_1" ("l_orderkey", "l_linenumber")')
    assert floor_unique_index_sql("s", "orders_2", ("o_orderkey",)).endswith('"s"."orders_2" ("o_orderkey")')
    # A name that needs quoting stays one identifier: case kept, a double quote doubled.
    odd = floor_unique_index_sql('My"Schema', "Part Supp_3", ["PS_PartKey", 'ps"supp'])
    assert odd == ('CREATE UNIQUE INDEX "Part Supp_3_unique" ON "My""Schema"."Part Supp_3" '
                   '("PS_PartKey", "ps""supp")')
    with pytest.raises(ValueError, match="no unique columns"):
        floor_unique_index_sql("s", "t_1", [])


def test_each_floor_file_carries_its_tables_unique_columns_from_the_spec(tmp_path):
    spec = load_spec("tpch")
    generate_tpch(tmp_path / "b", spec, 0.001, 2)
    files = batch_files(tmp_path / "b", read_manifest(tmp_path / "b", spec), spec)
    unique = {f["table"]: f["unique"] for f in files}
    assert unique["lineitem"] == ["l_orderkey", "l_linenumber"]
    assert unique["partsupp"] == ["ps_partkey", "ps_suppkey"]
    assert unique["orders"] == ["o_orderkey"] and unique["nation"] == ["n_nationkey"]
    assert all(unique[t.name] == list(t.unique) for t in spec.tables if t.name in unique)
    assert VARIANTS["freeze_unique"]["unique_index"] is True


def test_the_index_only_stand_in_reports_the_unique_index_alone():
    built = {"columns": ["l_orderkey", "l_linenumber"], "index": "s.lineitem_1_unique",
             "duplicates": None, "seconds": 0.5}
    o = validate_index_only("postgresql://x", "s", "lineitem_1", "l_orderkey", 10, 1, 7,
                                  key_type="bigint", not_null=["l_partkey"], unique=("l_orderkey", "l_linenumber"),
                                  unique_result=built, expectations=(), expectations_where="spec")
    assert o.success is True and o.cost() == {"unique": 0.5} and o.import_seconds == 0.0
    dup = dict(built, duplicates={"keys": 1, "extra_rows": 1, "examples": [], "server": "x"})
    failed = validate_index_only("u", "s", "t", "k", 10, 1, 7, unique=("k",), unique_result=dup)
    assert failed.success is False and failed.failures()[0].category == "unique"


def _validate(task_id: str, cost: dict | None) -> dict:
    return {"task_id": task_id, "step": "validate", "validation_cost": cost}


def test_the_lever_check_tells_whether_the_checks_were_switched_off():
    index_only = {"tasks": [_validate("a_1.validate", {"unique": 0.2}), _validate("b_1.validate", {"unique": 0.1}),
                            {"task_id": "a_1.load", "step": "load"}]}
    default = {"tasks": [_validate("a_1.validate", {"row_count": 0.1, "unique": 0.2}),
                         _validate("b_1.validate", {"row_count": 0.1, "key_range": 0.01})]}
    assert checks_ran(index_only, True)["as_intended"] is True
    assert checks_ran(default, False)["as_intended"] is True
    missed = checks_ran(default, True)
    assert missed["as_intended"] is False and missed["other_kinds"] == ["key_range", "row_count"]
    assert "2 of 2 validate tasks" in missed["why"]
    assert checks_ran(index_only, False)["as_intended"] is False, "a run left index-only is caught too"
    assert checks_ran({"tasks": [_validate("a_1.validate", None)]}, True)["as_intended"] is False
    assert checks_ran({"tasks": []}, True)["as_intended"] is False, "no validate task proves nothing"


def test_the_benchmarks_local_settings_switch_the_checks_off_only_when_asked(monkeypatch, tmp_path):
    probe = ("import airflow_local_settings, switchyard.observability.validation as v, "
             "switchyard_dev.bench.index_only as b; print(v.validate_table is b.validate_index_only)")
    plugins = ROOT / "plugins"
    local_settings = plugins / "switchyard_dev" / "bench" / "local_settings"
    found = {}
    for flag in ("1", "0"):
        env = dict(os.environ, SWITCHYARD_BENCH_INDEX_ONLY=flag, SWITCHYARD_PRELOAD="0", GX_ANALYTICS_ENABLED="False",
                   PYTHONPATH=os.pathsep.join([str(local_settings), str(plugins)]))
        out = subprocess.run([sys.executable, "-c", probe], env=env, check=True, capture_output=True, text=True)
        found[flag] = out.stdout.strip().splitlines()[-1]
    assert found == {"1": "True", "0": "False"}
    # The lever sets it for the benchmark's Airflow; the other levers leave it out.
    monkeypatch.setenv("SWITCHYARD_RUNS_DIR", str(tmp_path / "runs"))
    preload, flat, options = DAG_LEVERS["preload, index only"]
    assert airflow_settings(2, preload, flat, options)["SWITCHYARD_BENCH_INDEX_ONLY"] == "1"
    assert "SWITCHYARD_BENCH_INDEX_ONLY" not in airflow_settings(2, *DAG_LEVERS["preload"])


def test_the_floor_with_indexes_is_a_bound_reported_beside_the_headline():
    section = {"slots": 2, "floor": {"wall_seconds": 10.0}, "floor_unique": {"wall_seconds": 12.0},
               "dag": {"state": "success", "wall_seconds": 16.0, "pool": 4}}
    small = shape_targets("laptop", section, 1.0, 4)
    assert small[0]["name"] == "floor / makespan, laptop shape" and small[0]["measured"] == 0.625
    bound = small[1]
    assert bound["name"] == "floor with the target's unique indexes / makespan, laptop shape"
    assert bound["measured"] == 0.75 and bound["met"] is None and bound["target"] == ">= 0.8, same end state"
    assert "same end state" in bound["how"]
    big = shape_targets("production", dict(section, server_cpus=[0], other_cpus=[1]), 10.0, 8)
    assert big[1]["target"].startswith(">= 0.95") and big[1]["met"] is False and big[0]["met"] is None
    assert len(shape_targets("laptop", dict(section, floor_unique=None), 1.0, 4)) == 1
    line = shape_lines(section)[1].split()
    assert line[5:10] == ["10.00", "16.00", "0.625", "12.00", "0.750"]
    assert target_lines(small)[2].startswith("floor with the target's unique indexes / makespan, laptop")


def test_the_indexes_cost_in_the_floor_is_reported_beside_the_plain_floor():
    floor = {"wall_seconds": 10.0, "cpu_seconds": {"postgres": 15.0}}
    indexed = {"wall_seconds": 12.5, "cpu_seconds": {"postgres": 19.5},
               "unique_index": index_summary([
                   {"table": "lineitem", "index_seconds": 1.0, "index_leader_cpu_seconds": 0.9, "copy_seconds": 4.0},
                   {"table": "lineitem", "index_seconds": 1.5, "index_leader_cpu_seconds": 1.4, "copy_seconds": 4.5},
                   {"table": "orders", "index_seconds": 0.25, "index_leader_cpu_seconds": None,
                    "copy_seconds": 1.0}])}
    c = unique_floor_cost(floor, indexed)
    assert c["added_wall_seconds"] == 2.5 and c["added_server_cpu_seconds"] == 4.5 and c["ratio_to_floor"] == 0.8
    assert c["index_builds_seconds"] == 2.75 and c["index_builds_leader_cpu_seconds"] == 2.3
    assert indexed["unique_index"]["by_table"]["lineitem"] == {"indexes": 2, "seconds": 2.5,
                                                               "leader_cpu_seconds": 2.3, "copy_seconds": 8.5}
    lines = unique_floor_lines({"unique_floor_cost": c, "floor_unique": indexed})
    assert lines[1].split()[:8] == ["laptop", "10.00", "12.50", "+2.50", "15.0", "19.5", "+4.5", "2.75"]
    assert lines[2].endswith("each table's files: lineitem 2.50 / 8.50 s; orders 0.25 / 1.00 s")
    assert unique_floor_cost(floor, None) == {}


def test_the_work_bound_spreads_each_shapes_cpu_over_the_cores_that_did_it():
    result = {"slots": 2, "machine": {"cpus": 2}, "floor": {"wall_seconds": 10.0},
              "dag": {"state": "success", "wall_seconds": 20.0, "cpu_seconds": {"machine": 30.0, "postgres": 20.0}},
              "production": {"server_cpus": [0], "other_cpus": [1], "floor": {"wall_seconds": 12.0},
                             "dag": {"state": "success", "wall_seconds": 24.0,
                                     "cpu_seconds": {"machine": 30.0, "postgres": 12.0}}}}
    laptop = work_bound(result, "laptop")
    assert (laptop["bound_seconds"], laptop["ceiling"], laptop["reached"]) == (15.0, 0.667, 0.75)
    production = work_bound(result, "production")
    # The server's 12 CPU s on its core against the other 18 on theirs: the rest bounds it.
    assert production["bound_by"] == "Airflow's cores" and production["bound_seconds"] == 18.0
    assert (production["ceiling"], production["ratio"], production["reached"]) == (0.667, 0.5, 0.75)
    result["production"]["dag"]["cpu_seconds"]["postgres"] = 20.0
    assert work_bound(result, "production")["bound_by"] == "the server's cores"
    lines = work_bound_lines(result)
    assert lines[1].split()[-3:] == ["0.667", "0.500", "75%"]
    failed = dict(result, dag=dict(result["dag"], state="failed"))
    assert work_bound(failed, "laptop") is None


def test_the_spec_levers_change_only_what_they_name(tmp_path, monkeypatch):
    """The levers "without unique" and "small tables in one task", alone and together: the
    variant is the built-in spec with `unique` left out and/or the small tables' groups as one
    task, nothing else; a variant whose text has not changed is not written again (the preload
    would take a new modification time for changed code)."""
    monkeypatch.setenv("SWITCHYARD_RUNS_DIR", str(tmp_path / "runs"))
    base = {t.name: t for t in load_spec("tpch").tables}
    both = spec_variant(without_unique=True, single_tables=SMALL_TABLES)
    spec = {t.name: t for t in load_spec(str(both)).tables}
    assert list(spec) == list(base)
    for name, table in spec.items():
        assert table.unique == ()
        assert table.tasks == ("single" if name in SMALL_TABLES else "per-step")
        assert table.columns == base[name].columns and table.key == base[name].key
    assert any(t.unique for t in base.values())
    alone = {t.name: t for t in load_spec(str(spec_variant(single_tables=SMALL_TABLES))).tables}
    assert {n: t.unique for n, t in alone.items()} == {n: t.unique for n, t in base.items()}
    stamp = both.stat().st_mtime_ns
    os.utime(both, ns=(stamp - 10**9, stamp - 10**9))
    assert spec_variant(without_unique=True, single_tables=SMALL_TABLES) == both
    assert both.stat().st_mtime_ns == stamp - 10**9
    # The lever with both options runs its DAG on that variant.
    preload, flat, options = DAG_LEVERS["preload, without unique, small tables in one task"]
    assert airflow_settings(8, preload, flat, options)["SWITCHYARD_SPEC"] == str(both)
