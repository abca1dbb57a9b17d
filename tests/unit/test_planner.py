"""The planner against real tpchgen-cli output: key ranges, row counts and bounds."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from switchyard.core import tpch
from switchyard.core.batch import count_file
from switchyard.core.datagen import tpchgen_binary
from switchyard.core.planner import PlanError, plan_tpch
from switchyard.core.spec import load_spec

SPEC = load_spec("tpch")


def _generate(out: Path, scale: float, parts: int, tables: list[str], part: int | None = None) -> Path:
    if not out.exists():
        cmd = [tpchgen_binary(), "-s", repr(scale), "--parts", str(parts), "-o", str(out)]
        if part is not None:
            cmd += ["--part", str(part)]
        for t in tables:
            cmd += ["-T", t]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


@pytest.mark.parametrize("scale,streams", [(0.01, 1), (0.01, 3), (0.01, 7), (0.05, 4), (0.1, 6)])
def test_plan_matches_generated_files(tmp_path_factory, scale, streams):
    out = _generate(tmp_path_factory.mktemp("tpch") / "b", scale, streams, [])
    plan = plan_tpch(SPEC, scale, streams)
    checked = 0
    for s in plan.all_streams():
        size, rows, kmin, kmax = count_file(out / s.file)
        assert (kmin, kmax) == (s.key_min, s.key_max), f"{s.file}: keys {kmin}..{kmax}, planned {s.key_min}..{s.key_max}"
        if s.rows is not None:
            assert rows == s.rows, f"{s.file}: {rows} rows, planned {s.rows}"
        checked += 1
    assert checked == 6 * streams + 2


def test_orders_keys_are_sparse_and_bounds_contiguous():
    plan = plan_tpch(SPEC, 1, 4, tables=["orders"])
    streams = plan.table("orders").streams
    assert [(s.key_min, s.key_max) for s in streams] == [
        (1, 1_500_000), (1_500_001, 3_000_000), (3_000_001, 4_500_000), (4_500_001, 6_000_000)]
    assert [tpch.sparse_key(i) for i in (1, 7, 8, 15, 16)] == [1, 7, 32, 39, 64]
    assert plan.table("orders").boundaries == [1_500_000, 3_000_000, 4_500_000, 6_000_000]
    assert [(s.lower, s.upper) for s in streams][1] == (1_500_001, 3_000_000)


def test_lineitem_streams_split_where_tpchgen_splits_them(tmp_path):
    # At scale 1 with 4 streams tpchgen-cli cuts lineitem into 13 chunks a stream and
    # orders into 3, so lineitem stream 1 ends two orders (key 1,499,974) before orders'.
    out = _generate(tmp_path / "b", 1, 4, ["lineitem"], part=1)
    size, rows, kmin, kmax = count_file(out / "lineitem" / "lineitem.1.tbl")
    planned = plan_tpch(SPEC, 1, 4, tables=["lineitem"]).stream("lineitem", 1)
    assert (kmin, kmax) == (planned.key_min, planned.key_max) == (1, 1_499_974)


def test_dbgen_split_differs_from_tpchgen_only_in_chunking():
    dbgen = plan_tpch(SPEC, 1, 4, tables=["lineitem"], producer="dbgen").stream("lineitem", 1)
    assert dbgen.key_max == 1_500_000


def test_streams_that_do_not_divide_rows_give_the_remainder_to_the_last():
    plan = plan_tpch(SPEC, 0.01, 3, tables=["part", "supplier"])
    assert [s.rows for s in plan.table("part").streams] == [666, 666, 668]
    assert [s.rows for s in plan.table("supplier").streams] == [33, 33, 34]


def test_unpartitioned_tables_have_one_stream():
    plan = plan_tpch(SPEC, 1, 8, tables=["nation", "region"])
    assert [(s.stream, s.rows, s.lower) for s in plan.table("nation").streams] == [(1, 25, None)]
    assert plan.table("region").streams[0].partitioned is False


def test_plan_for_96_streams_at_scale_1000_is_fast():
    start = time.perf_counter()
    plan = plan_tpch(SPEC, 1000, 96)
    elapsed = time.perf_counter() - start
    orders = plan.table("orders")
    assert len(orders.streams) == 96
    assert orders.streams[-1].key_max == tpch.sparse_key(1_500_000_000)
    assert all(a.upper < b.lower for a, b in zip(orders.streams, orders.streams[1:]))
    print(f"plan of 96 streams x 8 tables at scale 1000: {elapsed * 1000:.1f} ms")


def test_overlapping_streams_are_refused():
    from switchyard.core.planner import _table_plan
    with pytest.raises(PlanError, match="stream 2: keys start at 5"):
        _table_plan(SPEC, SPEC.table("orders"), {1: (1, 10, 10), 2: (5, 20, 10)})


def test_interleaved_priorities_alternate_the_biggest_and_the_smallest_remaining():
    from switchyard.core.planner import load_priorities
    sizes = [("a", 100), ("b", 100), ("c", 25), ("d", 4), ("e", 1)]
    weights = load_priorities(sizes)
    assert sorted(weights, key=lambda k: -weights[k]) == ["a", "e", "b", "d", "c"]
    assert sorted(weights.values()) == [1, 2, 3, 4, 5]
    # Ties keep the order they were given in; one load, or none, is its own order.
    assert load_priorities([("x", 1), ("y", 1)]) == {"x": 2, "y": 1}
    assert load_priorities([("x", 7)]) == {"x": 1}
    assert load_priorities([]) == {}


def test_biggest_first_priorities_are_the_sizes():
    from switchyard.core.planner import load_priorities
    assert load_priorities([("a", 100), ("e", 1)], "biggest-first") == {"a": 100, "e": 1}
    with pytest.raises(ValueError, match="load order 'random'"):
        load_priorities([("a", 1)], "random")
