"""SQL Server storage, as rendered T-SQL: files pre-sized from the batch, placed per filegroup,
sane growth; the empty edge partitions on a filegroup of their own; every boundary of a
partition function created with it. No server: the statements are read back from the script.
"""
from __future__ import annotations

import math
import re

import pytest

from switchyard.core.batch import Manifest, ManifestEntry
from switchyard.core.planner import plan_batch, plan_tpch
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.mssql import MssqlAdapter

SPEC = load_spec("tpch")
MB = 1 << 20


def files_of(statements: list[str]) -> dict[str, dict]:
    """Each ADD FILE of the setup: name -> folder, size, max size, growth (MB), filegroup."""
    out = {}
    for stmt in statements:
        m = re.search(r"ADD FILE \(NAME = N'(\w+)', FILENAME = N'(.+)/[^/]+\.ndf', SIZE = (\d+)MB, "
                      r"MAXSIZE = (\w+), FILEGROWTH = (\d+)MB\) TO FILEGROUP \[(\w+)\]", stmt)
        if m:
            out[m.group(1)] = {"folder": m.group(2), "size": int(m.group(3)), "max": m.group(4),
                               "growth": int(m.group(5)), "filegroup": m.group(6)}
    return out


def manifest_plan(sizes: dict[tuple[str, int], int], streams: int = 2):
    entries = []
    for (table, k), size in sizes.items():
        lo = 1_000_000 * (k - 1) + 1
        entries.append(ManifestEntry(table, k, f"{table}/{table}.{k}.tbl", size, 1000, lo, lo + 999_999))
    return plan_batch(SPEC, Manifest(spec="tpch", streams=streams, entries=tuple(entries)),
                      sorted({t for t, _ in sizes}))


def test_files_are_sized_from_the_manifests_bytes_with_headroom():
    sizes = {("orders", 1): 900 * MB, ("lineitem", 1): 3000 * MB, ("orders", 2): 100 * MB, ("lineitem", 2): 20 * MB}
    a = MssqlAdapter(SPEC, files_per_filegroup=4, file_dirs=["/v1", "/v2"])
    files = files_of(a.setup_sql(manifest_plan(sizes)))
    # fg1 takes orders_1 and lineitem_1: 3,900 MB x 1.2 over 4 files.
    assert {files[f"fg1_{i}"]["size"] for i in range(1, 5)} == {math.ceil(3900 * 1.2 / 4)}
    # fg2's share is 30 MB a file: the 64 MB floor.
    assert {files[f"fg2_{i}"]["size"] for i in range(1, 5)} == {64}
    # Growth is the safety net: an eighth of the file in 64 MB steps, 64 MB .. 4 GB; no cap unless set.
    assert files["fg1_1"]["growth"] == 192 and files["fg2_1"]["growth"] == 64
    assert all(f["max"] == "UNLIMITED" for f in files.values())
    assert files["fg_edge_1"] == {"folder": "/v1", "size": 8, "max": "UNLIMITED", "growth": 64, "filegroup": "fg_edge"}
    # The plan says what each filegroup is sized for.
    setup = "\n".join(a.setup_sql(manifest_plan(sizes)))
    assert "-- fg1: 4 file(s) for 4.1 GB of stream files (lineitem_1, orders_1)." in setup


def test_scale_1000_in_96_streams_needs_no_autogrowth():
    """The review's case: 64 MB files growing by 256 MB meant about 40 growths per file
    during 96 concurrent loads. Planned from the generator's rules, each file now holds its
    streams' bytes with headroom before any load starts."""
    plan = plan_tpch(SPEC, 1000, 96)
    a = MssqlAdapter(SPEC, files_per_filegroup=2)
    files = files_of(a.setup_sql(plan))
    for k in range(1, 97):
        need = sum(s.bytes for s in plan.all_streams() if s.filegroup == f"fg{k}" and s.partitioned)
        assert need > 10_000 * MB
        for i in (1, 2):
            f = files[f"fg{k}_{i}"]
            assert f["size"] * MB >= need * 1.2 / 2
            assert 64 <= f["growth"] <= 4096 and f["growth"] % 64 == 0


def test_files_placed_per_filegroup_on_the_folders_given():
    sizes = {("orders", 1): 10 * MB, ("orders", 2): 10 * MB, ("orders", 3): 10 * MB}
    a = MssqlAdapter(SPEC, files_per_filegroup=2, file_dirs=["/default"],
                     file_placement="fg1=/vol1/data,/vol2/data;fg_edge=/small;*=/vol3/data")
    files = files_of(a.setup_sql(manifest_plan(sizes, streams=3)))
    assert [files["fg1_1"]["folder"], files["fg1_2"]["folder"]] == ["/vol1/data", "/vol2/data"]
    assert {files[n]["folder"] for n in ("fg2_1", "fg2_2", "fg3_1", "fg3_2")} == {"/vol3/data"}
    assert files["fg_edge_1"]["folder"] == "/small"
    # As connection extras (JSON) it is a mapping; Windows folders keep their backslashes.
    w = MssqlAdapter(SPEC, file_placement={"fg1": ["D:\\data", "E:\\data"]}, file_dirs=["F:\\data"])
    paths = re.findall(r"FILENAME = N'([^']+)'", "\n".join(w.setup_sql(manifest_plan({("orders", 1): MB}, 1))))
    assert paths == ["D:\\data\\switchyard_fg1_1.ndf", "F:\\data\\switchyard_fg_edge_1.ndf"]


def test_placement_and_sizes_are_checked():
    for bad, message in [("fg1=/v1;fg2", "not filegroup=folder"), ("FG1=/v1", "not a filegroup name"),
                         ("fg1=/v'1", "not allowed"), ("fg1=", "no folder")]:
        with pytest.raises(TargetError, match=message):
            MssqlAdapter(SPEC, file_placement=bad)
    with pytest.raises(TargetError, match="file_headroom: must be positive"):
        MssqlAdapter(SPEC, file_headroom=-1)
    capped = MssqlAdapter(SPEC, file_max_size_mb=100)
    with pytest.raises(TargetError, match="fg1_1 needs 1200 MB for this batch, over file_max_size_mb 100"):
        capped.setup_sql(manifest_plan({("orders", 1): 1000 * MB}, 1))
    small = files_of(capped.setup_sql(manifest_plan({("orders", 1): 10 * MB}, 1)))
    assert small["fg1_1"]["max"] == "100MB"


def test_a_later_batch_grows_files_up_front_by_what_they_already_hold():
    """At setup the adapter reads each file's used pages; the file grows (never shrinks) to
    that plus this batch's share, before any load: a reload holds the old partition and the
    new staging table at once."""
    plan = manifest_plan({("orders", 1): 1000 * MB}, 1)
    a = MssqlAdapter(SPEC)
    setup = a.setup_sql(plan, used_pages={"fg1_1": 1100 * 128})
    grow = next(s for s in setup if "MODIFY FILE (NAME = N'fg1_1'" in s)
    assert "IF (SELECT size FROM sys.database_files WHERE name = N'fg1_1') < 294400" in grow
    assert grow.rstrip().endswith("MODIFY FILE (NAME = N'fg1_1', SIZE = 2300MB)")
    assert "error 5039" in "\n".join(setup)


def test_empty_edge_partitions_sit_on_their_own_filegroup_and_boundaries_come_up_front():
    # Two streams with a gap between them: the gap is an empty partition on fg_edge too.
    entries = (ManifestEntry("orders", 1, "orders/orders.1.tbl", MB, 10, 1, 1000),
               ManifestEntry("orders", 2, "orders/orders.2.tbl", MB, 10, 5001, 6000))
    plan = plan_batch(SPEC, Manifest(spec="tpch", streams=2, entries=entries), ["orders"])
    setup = "\n".join(MssqlAdapter(SPEC).setup_sql(plan))
    assert "AS RANGE LEFT FOR VALUES (0, 1000, 5000, 6000)\n" in setup
    assert "TO ([fg_edge], [fg1], [fg_edge], [fg2], [fg_edge])\n" in setup
    assert "[PRIMARY]" not in setup.split("CREATE TABLE [tpch].[orders]")[0].split("-- objects")[-1]
