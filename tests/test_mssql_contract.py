"""Contract suite against a real SQL Server, through the adapter API the DAG uses.

Runs only when SWITCHYARD_MSSQL_URI names a server, e.g. the docker-compose stack's:

    SWITCHYARD_MSSQL_URI='mssql://sa:<MSSQL_SA_PASSWORD>@127.0.0.1:2000/switchyard?port_count=4&TrustServerCertificate=yes' \
        .venv/bin/python -m pytest -m mssql tests/test_mssql_contract.py

URI: mssql://user:password@host:port/database?option=value&..., options as in
switchyard.targets.mssql.ADAPTER_OPTIONS (load_mode, server_data_root, ports or
base_port + port_count, ...) plus Encrypt / TrustServerCertificate. The database must
exist. With load_mode=bulk_insert the server must see the test's data folder:
set SWITCHYARD_MSSQL_SERVER_DATA_ROOT to where the server sees SWITCHYARD_DATA_ROOT
(a shared volume); without it the suite loads over TDS bulk copy.
"""
from __future__ import annotations

import os
import uuid

import pytest

from switchyard.batch import read_manifest
from switchyard.planner import plan_batch
from switchyard.spec import load_spec
from switchyard.validation import validate_table

URI = os.environ.get("SWITCHYARD_MSSQL_URI")
pytestmark = [
    pytest.mark.mssql,
    pytest.mark.skipif(not URI, reason="set SWITCHYARD_MSSQL_URI=mssql://user:password@host:port/database?... "
                                       "to run the SQL Server contract suite (see the module docstring)"),
]
SPEC = load_spec("tpch")
TABLES = ["orders", "lineitem", "nation"]


@pytest.fixture(scope="module")
def batch(tpch_batch):
    name, folder = tpch_batch
    manifest = read_manifest(folder, SPEC)
    return folder, manifest, plan_batch(SPEC, manifest, TABLES)


@pytest.fixture(scope="module")
def adapter(batch):
    from switchyard.targets.mssql import MssqlAdapter
    schema = f"c_{uuid.uuid4().hex[:8]}"
    options = {}
    server_root = os.environ.get("SWITCHYARD_MSSQL_SERVER_DATA_ROOT")
    if server_root:
        options.update(load_mode="bulk_insert", server_data_root=server_root)
    elif "load_mode=" not in URI:
        options["load_mode"] = "tds"
    a = MssqlAdapter(SPEC, uri=URI, schema=schema, **options)
    yield a
    # Tables, then schemas; partition functions, schemes and filegroups stay for the next run.
    drops = [f"DROP TABLE IF EXISTS {a.qualified(s, t)}" for s in (a.schema, a.staging_schema)
             for t in [*TABLES, *(f"{t}_{k}" for t in TABLES for k in range(1, 4)),
                       *(f"{t}_{k}_old" for t in TABLES for k in range(1, 4))]]
    drops += [f"DROP SCHEMA IF EXISTS {a.q(a.staging_schema)}", f"DROP SCHEMA IF EXISTS {a.q(a.schema)}"]
    a.execute(drops)


def _load_stream(adapter, folder, s):
    adapter.prepare(s)
    result = adapter.load(s, folder / s.file)
    return result


def _validate(adapter, s, rows):
    table = SPEC.table(s.table)
    return validate_table(adapter.sqlalchemy_url(), adapter.staging_schema, s.staging_table, table.key,
                          rows, s.key_min, s.key_max, engine="mssql")


def test_scheduler_count_is_positive(adapter):
    assert adapter.scheduler_count() >= 1


def test_load_validate_switch_every_stream(adapter, batch):
    folder, manifest, plan = batch
    adapter.setup(plan)
    adapter.setup(plan)  # a second setup finds everything in place
    waits_before = adapter.wait_stats_snapshot()
    for s in plan.all_streams():
        if s.empty:
            continue
        expected = manifest.entry(s.table, s.stream).rows
        result = _load_stream(adapter, folder, s)
        assert result.rows == expected, f"{s.group_id}: loaded {result.rows}, manifest says {expected}"
        assert result.details["session_id"] is not None or result.details.get("mode") == "tds"
        if s.partitioned:
            assert adapter.constraint_trusted(s) is True, f"{s.group_id}: range constraint not trusted before switch"
        outcome = _validate(adapter, s, expected)
        assert outcome.success, outcome.to_dict()
        switched = adapter.switch(s)
        assert switched["replaced"] is False
        if s.partitioned:
            # $PARTITION of both ends gives the partition the rows now sit in.
            assert adapter.partition_number(s) == s.stream + 1
            assert adapter.partition_rows(s) == expected
            n = adapter.fetch(f"SELECT COUNT_BIG(*) FROM {adapter.qualified(adapter.schema, s.table)} "
                              f"WHERE $PARTITION.{adapter.q(adapter.function_name(s.table))}({adapter.q(SPEC.table(s.table).key)}) = ?",
                              (s.stream + 1,))[0][0]
            assert n == expected
    for table in TABLES:
        total = sum(e.rows for e in manifest.entries if e.table == table)
        assert adapter.row_count(table) == total
    assert isinstance(adapter.wait_stats_snapshot(), dict) and isinstance(waits_before, dict)
    assert adapter.latch_stats_snapshot() is not None


def test_rerun_replaces_a_partition(adapter, batch):
    folder, manifest, plan = batch
    s = plan.stream("orders", 2)
    before = adapter.row_count("orders")
    _load_stream(adapter, folder, s)
    assert adapter.constraint_trusted(s) is True
    switched = adapter.switch(s)
    assert switched["replaced"] is True
    assert adapter.row_count("orders") == before
    assert adapter.partition_rows(s) == manifest.entry("orders", 2).rows
    left = adapter.fetch("SELECT COUNT(*) FROM sys.tables WHERE schema_id = SCHEMA_ID(?) AND name IN (?, ?)",
                         (adapter.staging_schema, s.staging_table, f"{s.staging_table}_old"))[0][0]
    assert left == 0


def test_rerun_of_an_unpartitioned_table_replaces_it(adapter, batch):
    folder, manifest, plan = batch
    s = plan.stream("nation", 1)
    _load_stream(adapter, folder, s)
    adapter.switch(s)
    assert adapter.row_count("nation") == 25


def test_a_bad_file_fails_naming_the_file(adapter, batch, tmp_path):
    from switchyard.targets import TargetError
    folder, manifest, plan = batch
    s = plan.stream("orders", 3)
    bad = folder / "orders" / "orders.3.bad.tbl"
    lines = (folder / s.file).read_text().splitlines(keepends=True)
    lines[4] = lines[4].replace("|O|", "|O|x", 1) if "|O|" in lines[4] else "not|a|row|\n"
    bad.write_text("".join(lines))
    try:
        adapter.prepare(s)
        with pytest.raises(TargetError, match=r"orders\.3\.bad\.tbl"):
            adapter.load(s, bad)
    finally:
        bad.unlink()
