"""Bad input, one case per (table, stream): a clear error, and the target untouched.

The good batch is loaded through the steps; then one run of a copy of the batch with a
different fault planted in each of thirteen groups, its manifest's byte sizes those of the
files as they are (what a producer that wrote bad files honestly describes; a file whose
size differs from its manifest entry, or a missing one, refuses the whole batch before any
load, see test_own_extract.py). Every faulty group must fail with an error that names the
file, the line and the column where PostgreSQL can tell, and what was expected; the
untouched groups validate and wait, and the batch goes in whole or not at all: every
partition stays the one from the good load (same table OID). A failed staging table stays for
inspection and is named in the error.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

import psycopg

from helpers import (copy_batch, edit_manifest, fingerprint, load_through_steps, partition_oids, resize_manifest,
                     run_dag)
from switchyard.core.spec import load_spec
from switchyard_dev.local import airflow_bin, airflow_env, migrate

SPEC = load_spec("tpch")
SPEC_TABLES = ["supplier", "customer", "part", "partsupp", "orders", "lineitem"]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def _write(path: Path, lines: list[bytes], final_newline: bool = True) -> None:
    path.write_bytes(b"\n".join(lines) + (b"\n" if final_newline else b""))


def _set_field(path: Path, line_no: int, field: int, value: bytes) -> None:
    lines = _lines(path)
    fields = lines[line_no - 1].split(b"|")
    fields[field] = value
    lines[line_no - 1] = b"|".join(fields)
    _write(path, lines)


def plant_faults(batch: Path) -> dict[str, list[str]]:
    """Corrupt one group per case; returns what each group's error must say."""
    f = lambda table, k: batch / table / f"{table}.{k}.tbl"  # noqa: E731
    expect: dict[str, list[str]] = {}

    # too few fields: drop c_phone from line 10
    lines = _lines(f("customer", 1))
    parts = lines[9].split(b"|")
    lines[9] = b"|".join(parts[:4] + parts[5:])
    _write(f("customer", 1), lines)
    expect["customer_1"] = ["customer.1.tbl", "line 10", "line 10 has 7 fields, the spec expects 8"]

    # too many fields: one extra field on line 7
    lines = _lines(f("customer", 2))
    lines[6] = lines[6] + b"surplus|"
    _write(f("customer", 2), lines)
    expect["customer_2"] = ["customer.2.tbl", "line 7", "line 7 has 9 fields, the spec expects 8"]

    # a non-numeric value in a numeric column
    _set_field(f("customer", 3), 5, 3, b"abc")
    expect["customer_3"] = ["customer.3.tbl", "line 5", "column c_nationkey", "'abc': not an integer (integer)"]

    # an impossible date
    _set_field(f("orders", 1), 3, 4, b"1995-02-30")
    expect["orders_1"] = ["orders.1.tbl", "line 3", "column o_orderdate", "date/time field value out of range"]

    # a string longer than its column (o_comment varchar(79))
    _set_field(f("orders", 2), 4, 8, b"x" * 100)
    expect["orders_2"] = ["orders.2.tbl", "line 4", "value too long for type character varying(79)"]

    # a key outside the stream's range
    _set_field(f("orders", 3), 6, 0, b"1")
    expect["orders_3"] = ["orders.3.tbl", "line 6, column o_orderkey", 'violates check constraint "orders_3_range"',
                          "o_orderkey must lie in 40001..60000"]

    # a last line cut in the middle, its line end written after the cut (a file cut short without
    # one is refused before any load, whatever the batch's size: the test below)
    lines = _lines(f("part", 1))
    last = len(lines)
    lines[-1] = lines[-1][: len(lines[-1]) // 2]
    _write(f("part", 1), lines)
    expect["part_1"] = ["part.1.tbl", f"line {last}", "the spec expects 9"]

    # an empty file
    f("part", 2).write_bytes(b"")
    expect["part_2"] = ["expect_table_row_count_to_equal", "observed 0", "part.2.tbl"]

    # a file in the wrong encoding (Latin-1 bytes in a UTF-8 batch)
    _set_field(f("partsupp", 1), 2, 4, "café crème".encode("latin-1"))
    expect["partsupp_1"] = ["partsupp.1.tbl", "line 2", 'invalid byte sequence for encoding "UTF8"']

    # a manifest whose row count disagrees with the file
    manifest = json.loads((batch / "manifest.json").read_text())
    rows = next(e["rows"] for e in manifest["files"] if e["table"] == "partsupp" and e["stream"] == 2)
    edit_manifest(batch, "partsupp", 2, rows=rows + 3)
    expect["partsupp_2"] = ["expect_table_row_count_to_equal", f"expected {rows + 3}, observed {rows}",
                            "partsupp.2.tbl"]

    # a manifest whose key range disagrees with the file (ends 5 keys early)
    kmax = next(e["key_max"] for e in manifest["files"] if e["table"] == "supplier" and e["stream"] == 2)
    edit_manifest(batch, "supplier", 2, key_max=kmax - 5)
    expect["supplier_2"] = ["supplier.2.tbl", 'violates check constraint "supplier_2_range"']

    # a duplicate stream file: stream 2's file is a copy of stream 1's
    f("lineitem", 2).write_bytes(f("lineitem", 1).read_bytes())
    expect["lineitem_2"] = ["lineitem.2.tbl", "line 1", 'violates check constraint "lineitem_2_range"']

    # fields the server would store changed without an error: refused by the load reading them
    _set_field(f("lineitem", 3), 8, 5, b"21168.235")
    expect["lineitem_3"] = ["lineitem.3.tbl", "line 8", "column l_extendedprice: '21168.235': 3 digits after the point"]
    _set_field(f("lineitem", 1), 4, 10, b"1996-03-13 12:00")
    expect["lineitem_1"] = ["lineitem.1.tbl", "line 4", "column l_shipdate: '1996-03-13 12:00': a time of day"]

    resize_manifest(batch)  # the producer's manifest gives the files' sizes as they are
    return expect


def test_each_bad_input_fails_its_group_only(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, folder = tpch_batch
    # The good batch, loaded through the DAG's steps without Airflow (a DAG run of it is
    # test_end_to_end.py's): the target the bad runs below must leave as it is.
    load_through_steps(pg_uri, schema, SPEC, folder, name)
    before = fingerprint(pg_uri, schema)
    oids_before = {t: partition_oids(pg_uri, schema, t) for t in SPEC_TABLES}

    bad = copy_batch(folder, data_root / "bad-input")
    expect = plant_faults(bad)
    # A batch this small is read field by field before any load (SWITCHYARD_CHECK_FIELDS_MB):
    # refused there, every fault named with its file (and line and column where a field is bad).
    refused = run_dag(pg_uri, data_root, schema, 3, {"batch": "bad-input"}, tmp_path / "runs-refused")
    assert refused.returncode != 0
    error = refused.stats["plan_error"]
    for gid in expect:
        table, stream = gid.rsplit("_", 1)
        assert f"{table}.{stream}.tbl" in error, f"{gid} not named:\n{error}"
    assert "customer.3.tbl: line 5, column c_nationkey: 'abc': not an integer (integer)" in error
    assert "orders.1.tbl: line 3, column o_orderdate: '1995-02-30': not a date" in error
    assert "partsupp.1.tbl: line 2, column" in error and "bytes that are not utf-8" in error, error
    assert fingerprint(pg_uri, schema) == before
    # The loads' own checks, for a batch too big to read first: each fault fails its group only.
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": "bad-input"}, tmp_path / "runs-bad",
                  extra_env={"SWITCHYARD_CHECK_FIELDS_MB": "0"})
    assert run.returncode != 0 or run.stats["failed_groups"], "a run with bad input must fail"
    groups = {g["group"]: g for g in run.stats["groups"]}

    assert sorted(run.stats["failed_groups"]) == sorted(expect)
    for gid, needles in expect.items():
        errors = " ".join(groups[gid]["errors"].values())
        for needle in needles:
            assert needle in errors, f"{gid}: {needle!r} not in {errors!r}"
        staging = f"staging table {schema}_staging.{gid}"
        assert staging in errors and "kept" in errors, f"{gid}: {staging} not named as kept: {errors}"

    # A batch goes in whole: every untouched group was held back (validated, staged, not
    # published), and every table kept the good run's partitions, every one of them.
    tables = {g.rsplit("_", 1)[0] for g in groups}
    ok = [g for g in groups if g not in expect]
    assert {g: groups[g]["outcome"] for g in ok} == {g: "held back" for g in ok}
    assert sorted(run.stats["tables_kept"]) == sorted(tables)
    assert fingerprint(pg_uri, schema) == before
    for table in SPEC_TABLES:
        assert partition_oids(pg_uri, schema, table) == oids_before[table], table

    # The failed staging tables are there to look at; the held-back ones wait in their tables'
    # next versions (`<table>__next`; an unpartitioned table's is its staging table renamed) for
    # a rerun of the failed groups.
    partitioned = {g for g in ok if g.rsplit("_", 1)[0] in SPEC_TABLES}
    assert _staged(pg_uri, schema) == set(expect) | partitioned | {f"{t}__next" for t in tables}

    # The next successful run of those groups replaces them: switched in, none left behind.
    fixed = run_dag(pg_uri, data_root, schema, 3, {"batch": name}, tmp_path / "runs-fixed")
    assert fixed.returncode == 0, fixed.output[-3000:]
    assert fixed.stats["failed_groups"] == []
    assert _staged(pg_uri, schema) == set()
    assert fingerprint(pg_uri, schema) == before


def _staged(uri: str, schema: str) -> set[str]:
    with psycopg.connect(uri) as conn:
        return {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (f"{schema}_staging",))}


def _logged_at(output: str, needle: str) -> datetime:
    """The timestamp of the first log line containing `needle`."""
    for line in output.splitlines():
        if needle in line:
            return datetime.fromisoformat(line.split()[0].replace("Z", "+00:00"))
    raise AssertionError(f"{needle!r} not logged")


def test_a_late_batch_is_waited_for_then_fails_clearly(pg_uri, data_root, schema, tmp_path):
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": "2031-01-01"}, tmp_path / "runs",
                  extra_env={"SWITCHYARD_BATCH_WAIT_SECONDS": "3", "SWITCHYARD_BATCH_POKE_SECONDS": "1"})
    assert run.returncode != 0, "a batch that never came must fail the run"
    assert "2031-01-01/manifest.json: the batch did not arrive within 3s" in run.output
    # The wait was deferred (no worker slot held) and lasted the configured time.
    deferred = _logged_at(run.output, "Pausing task as DEFERRED")
    woke = _logged_at(run.output, "Trigger completed")
    assert 2.9 <= (woke - deferred).total_seconds() < 30
    with psycopg.connect(pg_uri) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."orders"',)).fetchone()[0]
    assert exists is None, "nothing may be created before the batch is there"


def test_a_manifest_listing_one_file_twice_fails_the_run_before_any_load(pg_uri, data_root, tpch_batch,
                                                                          schema, tmp_path):
    name, folder = tpch_batch
    bad = copy_batch(folder, data_root / "dup-manifest")
    edit_manifest(bad, "orders", 3, file="orders/orders.2.tbl")
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": "dup-manifest"}, tmp_path / "runs")
    assert "files[" in run.output and "file orders/orders.2.tbl is listed twice" in run.output
    assert run.stats is not None and run.stats["totals"]["switched"] == 0


def test_a_batch_that_arrives_during_the_wait_is_loaded(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, folder = tpch_batch
    env = airflow_env(streams=3, extra={
        "AIRFLOW_CONN_SWITCHYARD_TARGET": pg_uri, "SWITCHYARD_DATA_ROOT": str(data_root),
        "SWITCHYARD_SCHEMA": schema, "SWITCHYARD_RUNS_DIR": str(tmp_path / "runs"),
        "SWITCHYARD_BATCH_WAIT_SECONDS": "240", "SWITCHYARD_BATCH_POKE_SECONDS": "1"})
    migrate(env)
    log = tmp_path / "run.log"
    proc = subprocess.Popen([airflow_bin(), "dags", "test", "switchyard_tpch", "-c",
                             json.dumps({"batch": "arrives-late", "tables": ["region", "nation"]})],
                            env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while "running trigger in line" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        time.sleep(2)
        # The producer writes its files, then the manifest last.
        target = data_root / "arrives-late"
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns("manifest.json"))
        shutil.copy(folder / "manifest.json", target / "manifest.json")
        assert proc.wait(300) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    output = log.read_text()
    assert "batch ready: " in output and "arrives-late/manifest.json" in output
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}"."nation"').fetchone()[0] == 25


def test_records_on_a_source_the_manifest_leaves_out_fail_the_run_before_any_load(pg_uri, data_root, tpch_batch,
                                                                                   schema, tmp_path):
    """Stream 3 lives on a source's workers (here the same folder: `dags test` runs every task
    in place). The manifest lists orders' file there with 0 rows though it holds records, so
    orders has no load on that source; the setup's task there finds it before any group starts,
    the run fails saying so, and no staging table is made, nothing loaded."""
    from switchyard_dev.scaleout import spec_with_sources
    name, folder = tpch_batch
    bad = copy_batch(folder, data_root / "zero-on-a-source")
    edit_manifest(bad, "orders", 3, rows=0, key_min=None, key_max=None)
    spec = spec_with_sources("tpch", {"source_a": [3]}, tmp_path / "spec")
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": "zero-on-a-source", "tables": ["orders"]},
                  tmp_path / "runs", spec=spec)
    assert run.returncode != 0
    said = (f"{bad / 'orders' / 'orders.3.tbl'}: line 1: a record, but the manifest lists the file with 0 rows "
            f"(orders stream 3): a run would skip the stream")
    assert said in run.stats["source_errors"]["setup.files_on_source_a"], run.stats.get("source_errors")
    assert "the batch's files on its sources were refused before any load" in run.output
    with psycopg.connect(pg_uri) as conn:
        # A stream's staging table (orders_<stream>), which its group's prepare makes.
        staged = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename ~ '^orders_[0-9]+$'",
                              (f"{schema}_staging",)).fetchone()
        table = conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."orders"',)).fetchone()[0]
        rows = conn.execute(f'SELECT count(*) FROM "{schema}".orders').fetchone()[0] if table else 0
    assert (staged[0], rows) == (0, 0)


def test_a_file_cut_short_inside_its_last_field_is_refused_before_any_load(pg_uri, data_root, tpch_batch, schema,
                                                                          tmp_path):
    """A file whose last line has no line end, cut inside the last record's last field: as many
    fields as any record, a value the load would take for the field's (a comment cut in two).
    Refused at setup.plan, naming the file and its last line, whatever the batch's size (its
    fields not read first), and nothing is made or loaded; the producer's manifest, of the cut
    file's size and its own row counts, agrees with it."""
    name, folder = tpch_batch
    cut = copy_batch(folder, data_root / "cut-short")
    path = cut / "orders" / "orders.2.tbl"
    lines = _lines(path)
    lines[-1] = lines[-1][:-12]           # inside o_comment, the last field, and its trailing `|` gone
    lines[-1] += b"|"                     # ... as a cut right after a delimiter would leave it
    _write(path, lines, final_newline=False)
    resize_manifest(cut)                  # the producer's manifest: its own row counts, the cut file's size
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": "cut-short", "tables": ["orders"]}, tmp_path / "runs-cut",
                  extra_env={"SWITCHYARD_CHECK_FIELDS_MB": "0"})
    assert run.returncode != 0
    assert (f"{path}: line {len(lines)}: the file's last line has no line end: a file cut short") in \
        run.stats["plan_error"], run.stats.get("plan_error")
    with psycopg.connect(pg_uri) as conn:    # refused before the target was set up: nothing made
        assert conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."orders"',)).fetchone()[0] is None

