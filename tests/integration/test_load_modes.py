"""Nightly loads through the real DAG on the embedded PostgreSQL: replace and append modes,
the pre-flight, a target a DBA changed.

* replace: a batch whose key ranges grew after a smaller one leaves the old table or the new
  one, whole (also when one group fails), and readers never see a mix;
* append: each batch adds its own partitions, a rerun replaces only its own, an overlapping
  batch is refused before any load, `keep: 3` keeps the newest three batches;
* a target with an extra index, a primary key and a CHECK constraint still switches.
"""
from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import psycopg
import pytest
import yaml

from helpers import copy_batch, edit_manifest, fingerprint, ids_batch, ids_spec, load_through_steps, partition_oids, run_dag
from switchyard.core.spec import load_spec, spec_file

SPEC = load_spec("tpch")
DAYS = ["2026-04-01", "2026-04-02", "2026-04-03", "2026-04-04"]


def files_of(batch: Path, table: str) -> list[Path]:
    manifest = json.loads((batch / "manifest.json").read_text())
    return [batch / e["file"] for e in manifest["files"] if e["table"] == table and e["rows"]]


def differs_from_files(uri: str, schema: str, table: str, files: list[Path]) -> tuple[int, int]:
    """Row by row, the target table against the stream files (read by a plain COPY into a
    scratch table of the same types, independent of Switchyard's loader): (rows only in the
    table, rows only in the files), duplicates counted."""
    with psycopg.connect(uri) as conn:
        conn.execute(f'CREATE TEMP TABLE ref (LIKE "{schema}"."{table}", eol text)')
        names = [r[0] for r in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = 'ref'::regclass AND attnum > 0 "
            "AND NOT attisdropped AND attname <> 'eol' ORDER BY attnum")]
        with conn.cursor() as cur:
            for path in files:
                with cur.copy("COPY ref FROM STDIN (FORMAT text, DELIMITER '|')") as cp:
                    cp.write(path.read_bytes())
        cols = ", ".join(f'"{n}"' for n in names)
        only_table = conn.execute(f'SELECT count(*) FROM (SELECT {cols} FROM "{schema}"."{table}" '
                                  f'EXCEPT ALL SELECT {cols} FROM ref) d').fetchone()[0]
        only_files = conn.execute(f'SELECT count(*) FROM (SELECT {cols} FROM ref '
                                  f'EXCEPT ALL SELECT {cols} FROM "{schema}"."{table}") d').fetchone()[0]
        conn.rollback()
    return only_table, only_files


def assert_table_is(uri: str, schema: str, table: str, files: list[Path]) -> None:
    assert differs_from_files(uri, schema, table, files) == (0, 0), f"{table} differs from {files}"


def control_rows(uri: str, schema: str, table: str) -> dict[str, str]:
    """partition -> batch, as switchyard.partition_batches records them."""
    with psycopg.connect(uri) as conn:
        return dict(conn.execute("SELECT partition_name, batch FROM switchyard.partition_batches "
                                 "WHERE target_schema = %s AND table_name = %s", (schema, table)).fetchall())


# --- replace ----------------------------------------------------------------------------------
class Reader(threading.Thread):
    """A reader polling the row count of some tables while a run loads them: every count it
    sees must be one batch's whole table."""

    def __init__(self, uri: str, schema: str, tables: list[str]):
        super().__init__(daemon=True)
        self.uri, self.schema, self.tables = uri, schema, tables
        self.seen: dict[str, set[int]] = {t: set() for t in tables}
        self.reads = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.uri, autocommit=True) as conn:
            while not self.stop.is_set():
                for t in self.tables:
                    self.seen[t].add(conn.execute(f'SELECT count(*) FROM "{self.schema}"."{t}"').fetchone()[0])
                self.reads += 1
                time.sleep(0.02)


@pytest.fixture(scope="module")
def grown_batch(data_root) -> tuple[str, Path]:
    """The issue's reproducer: the demo's tables at scale 0.02 in 3 streams, after 0.01 in 3."""
    from switchyard.core.datagen import generate_tpch
    name = "tpch-sf0.02-s3"
    generate_tpch(data_root / name, SPEC, 0.02, 3)
    return name, data_root / name


def test_replace_a_grown_batch_leaves_the_old_table_or_the_new_one_whole(pg_uri, data_root, tpch_batch,
                                                                          grown_batch, schema, tmp_path):
    small, small_dir = tpch_batch
    grown, grown_dir = grown_batch
    # The small batch through the DAG's steps without Airflow: the target the runs below replace.
    load_through_steps(pg_uri, schema, SPEC, small_dir, small)
    old = fingerprint(pg_uri, schema)

    # The grown batch with orders stream 2 broken (its manifest disagrees with its file): orders'
    # group fails validation, the rest validate. No other group may go in without it: the batch
    # goes in whole or not at all.
    broken = copy_batch(grown_dir, data_root / "grown-broken")
    rows = next(e["rows"] for e in json.loads((broken / "manifest.json").read_text())["files"]
                if e["table"] == "orders" and e["stream"] == 2)
    edit_manifest(broken, "orders", 2, rows=rows + 1)
    reader = Reader(pg_uri, schema, ["orders", "lineitem", "supplier"])
    reader.start()
    failed = run_dag(pg_uri, data_root, schema, 3, {"batch": "grown-broken"}, tmp_path / "runs-2")
    reader.stop.set()
    reader.join()
    assert failed.returncode != 0
    groups = {g["group"]: g for g in failed.stats["groups"]}
    assert groups["orders_2"]["outcome"] == "failed at validate"
    assert groups["orders_1"]["outcome"] == groups["orders_3"]["outcome"] == "held back"
    assert groups["lineitem_1"]["outcome"] == groups["supplier_2"]["outcome"] == "held back"
    assert failed.stats["tables_kept"] == sorted(SPEC.table_names)
    assert "kept their previous contents, whole" in failed.output
    # Every table is the small batch's, whole.
    assert fingerprint(pg_uri, schema) == old
    for table in SPEC.table_names:
        assert_table_is(pg_uri, schema, table, files_of(small_dir, table))
    # What a reader saw during the run: the old tables, never a part of the new batch.
    assert reader.reads > 10
    for table in ("orders", "lineitem", "supplier"):
        assert reader.seen[table] == {old[table][0]}, (table, reader.seen[table])

    # The fixed grown batch: every table is the grown batch's, row for row.
    again = run_dag(pg_uri, data_root, schema, 3, {"batch": grown}, tmp_path / "runs-3")
    assert again.returncode == 0, again.output[-4000:]
    for table in SPEC.table_names:
        assert_table_is(pg_uri, schema, table, files_of(grown_dir, table))
    for table in ("supplier", "orders", "lineitem"):
        assert sorted(partition_oids(pg_uri, schema, table)) == sorted(
            f"{table}_{e['key_min']}_{e['key_max']}" for e in json.loads(
                (grown_dir / "manifest.json").read_text())["files"] if e["table"] == table)
    assert _staging_tables(pg_uri, schema) == [], "the staging schema is left empty after a good run"


def _staging_tables(uri: str, schema: str) -> list[str]:
    with psycopg.connect(uri) as conn:
        return sorted(r[0] for r in conn.execute(
            "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind IN ('r', 'p')", (f"{schema}_staging",)))


# --- append -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def nightly(data_root, tmp_path_factory) -> dict:
    """Four nightly batches (successive key ranges: 3 of 12 parts each) and a spec where orders
    and lineitem append with keep: 3 (lineitem archives what falls out, orders drops it)."""
    from switchyard.core.datagen import generate_tpch_day
    raw = yaml.safe_load(spec_file("tpch").read_text())
    raw["name"] = "tpch_nightly"
    raw["tables"]["orders"].update(mode="append", keep=3)
    raw["tables"]["lineitem"].update(mode="append", keep=3, retire="archive")
    path = tmp_path_factory.mktemp("spec") / "tpch_nightly.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    spec = load_spec(str(path))
    for i, day in enumerate(DAYS):
        generate_tpch_day(data_root / day, spec, 0.01, 12, 3 * i + 1, 3)
    return {"spec": str(path), "dirs": {d: data_root / d for d in DAYS}}


def _partitions_of(batch_dir: Path, table: str) -> set[str]:
    return {f"{table}_{e['key_min']}_{e['key_max']}" for e in json.loads((batch_dir / "manifest.json").read_text())
            ["files"] if e["table"] == table and e["rows"]}


def test_append_keeps_the_last_three_batches_reruns_one_and_refuses_an_overlap(pg_uri, data_root, nightly,
                                                                              schema, tmp_path):
    env = {"SWITCHYARD_SPEC": nightly["spec"]}
    dirs = nightly["dirs"]
    tables = ["orders", "lineitem"]
    conf = lambda day: {"batch": day, "tables": tables}  # noqa: E731
    # The first batches through the DAG's steps without Airflow; the last one, whose publish
    # retires the first batch's partitions, through the DAG.
    for i, day in enumerate(DAYS):
        if day != DAYS[-1]:
            load_through_steps(pg_uri, schema, load_spec(nightly["spec"]), dirs[day], day, tables)
        else:
            run = run_dag(pg_uri, data_root, schema, 3, conf(day), tmp_path / f"runs-{day}", extra_env=env)
            assert run.returncode == 0, run.output[-4000:]
            assert run.stats["failed_groups"] == [] and run.stats["held_back_groups"] == []
        kept = DAYS[max(0, i - 2):i + 1]
        for table in tables:
            assert set(partition_oids(pg_uri, schema, table)) == set().union(
                *(_partitions_of(dirs[d], table) for d in kept)), (day, table)
            assert set(control_rows(pg_uri, schema, table).values()) == set(kept)
    # Exactly the last three batches, row for row; the first one's lineitem in the archive schema.
    for table in tables:
        assert_table_is(pg_uri, schema, table, [f for d in DAYS[1:] for f in files_of(dirs[d], table)])
    with psycopg.connect(pg_uri) as conn:
        archived = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = %s",
                                               (f"{schema}_archive",))}
    assert archived == _partitions_of(dirs[DAYS[0]], "lineitem")

    # A rerun of the middle batch replaces its own partitions and nothing else.
    middle = DAYS[2]
    before = {t: partition_oids(pg_uri, schema, t) for t in tables}
    content = fingerprint(pg_uri, schema, tables)
    rerun = run_dag(pg_uri, data_root, schema, 3, conf(middle), tmp_path / "runs-rerun", extra_env=env)
    assert rerun.returncode == 0, rerun.output[-4000:]
    for table in tables:
        now = partition_oids(pg_uri, schema, table)
        assert now.keys() == before[table].keys()
        changed = {p for p in now if now[p] != before[table][p]}
        assert changed == _partitions_of(dirs[middle], table), table
    assert fingerprint(pg_uri, schema, tables) == content
    assert all(g["replaced"] for g in rerun.stats["groups"] if g["table"] in tables)

    # A batch that overlaps another batch's partitions is refused before any load, naming both.
    copy_batch(dirs[DAYS[3]], data_root / "2026-04-05")
    before = {t: partition_oids(pg_uri, schema, t) for t in tables}
    refused = run_dag(pg_uri, data_root, schema, 3, conf("2026-04-05"), tmp_path / "runs-overlap", extra_env=env)
    assert refused.returncode != 0
    assert "pre-flight refused the batch before any load" in refused.output
    assert f"{schema}.orders: batch 2026-04-05 overlaps batch {DAYS[3]}: its stream 1" in refused.output
    assert "nothing was changed" in refused.output
    assert all(g["outcome"] in ("not run (upstream failed)", "incomplete at prepare")
               for g in refused.stats["groups"]), [g["outcome"] for g in refused.stats["groups"]]
    assert all(not g["states"].get("load") or g["states"]["load"] == "upstream_failed"
               for g in refused.stats["groups"])
    assert {t: partition_oids(pg_uri, schema, t) for t in tables} == before
    assert fingerprint(pg_uri, schema, tables) == content


# --- a target as a DBA left it -----------------------------------------------------------------
def test_a_target_with_an_extra_index_a_primary_key_and_a_check_still_switches(pg_uri, data_root, tpch_batch,
                                                                             schema, tmp_path):
    name, folder = tpch_batch
    tables = ["orders", "customer"]
    load_through_steps(pg_uri, schema, SPEC, folder, name)  # the batch in, as a DBA then finds it
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE INDEX orders_by_customer ON "{schema}".orders (o_custkey, o_orderdate)')
        conn.execute(f'ALTER TABLE "{schema}".orders ADD CONSTRAINT orders_pk PRIMARY KEY (o_orderkey)')
        conn.execute(f'ALTER TABLE "{schema}".orders ADD CONSTRAINT orders_status_known '
                     f"CHECK (o_orderstatus IN ('F', 'O', 'P'))")
    before = partition_oids(pg_uri, schema, "orders")
    again = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": tables}, tmp_path / "runs-2")
    assert again.returncode == 0, again.output[-4000:]
    now = partition_oids(pg_uri, schema, "orders")
    assert now.keys() == before.keys() and all(now[p] != before[p] for p in now)
    assert_table_is(pg_uri, schema, "orders", files_of(folder, "orders"))
    orders = [g for g in again.stats["groups"] if g["table"] == "orders"]
    assert all(g["outcome"] == "switched" for g in orders)
    # The unique indexes, the spec's and the DBA's primary key, were built on the staging tables
    # by validation already (which checks them): the switch builds only the other index.
    assert all(sorted(g["indexes_built"]) == ["orders_by_customer"] for g in orders), orders
    with psycopg.connect(pg_uri) as conn:
        # Each new partition carries the DBA's two indexes and the spec's unique index, built on its
        # staging table (the switch's names, and validation's for the unique one; not ATTACH's),
        # attached to the parent's, valid.
        for partition in now:
            rows = conn.execute(
                "SELECT c.relname, p.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_inherits h ON h.inhrelid = i.indexrelid JOIN pg_class p ON p.oid = h.inhparent "
                "WHERE i.indrelid = %s::regclass", (f'"{schema}"."{partition}"',)).fetchall()
            assert sorted(r[1] for r in rows) == ["orders_by_customer", "orders_pk", "orders_unique"], rows
            # ATTACH names what it builds <partition>_<columns>_idx / _pkey; the switch's are hashed.
            assert all(r[0].startswith(f"{partition}_") and not r[0].endswith(("_idx", "_pkey")) and r[2]
                       for r in rows), rows
        # The primary key holds across the table, the CHECK on every partition.
        assert conn.execute(f'SELECT count(*) = count(DISTINCT o_orderkey) FROM "{schema}".orders').fetchone()[0]
    # ATTACH proved every bound from the staging tables' CHECKs: no scan, in the stream's attach
    # to the next version and in the table's commit.
    assert all(g["attach_scan_skipped"] is True for g in orders), [g["attach_scan_skipped"] for g in orders]


# --- the batch's shape from its manifest ------------------------------------------------------
def test_a_batch_with_one_stream_for_small_tables_and_four_for_large_ones_loads(pg_uri, data_root, schema,
                                                                               tmp_path):
    from switchyard.core.datagen import generate_tpch_shaped
    folder = data_root / "shaped-1-and-4"
    manifest = generate_tpch_shaped(folder, SPEC, 0.01, {"orders": 4, "lineitem": 4}, default=1)
    assert manifest.streams == 4 and manifest.streams_of("supplier") == [1]
    # The DAG has groups for up to 4 streams per table; the batch decides how many each uses.
    run = run_dag(pg_uri, data_root, schema, 4, {"batch": folder.name}, tmp_path / "runs")
    assert run.returncode == 0, run.output[-4000:]
    groups = {g["group"]: g for g in run.stats["groups"]}
    for table in SPEC.tables:
        n = manifest.streams_of(table.name)[-1]
        assert_table_is(pg_uri, schema, table.name, files_of(folder, table.name))
        if table.partitioned:
            assert len(partition_oids(pg_uri, schema, table.name)) == n, table.name
            assert [groups[f"{table.name}_{k}"]["outcome"] for k in range(1, 5)] == \
                ["switched"] * n + ["skipped"] * (4 - n), table.name
        # Each table's Asset is updated, also where the batch left groups unused.
        said = f" in {n} partition{'s' if n != 1 else ''}" if table.partitioned else " (the table, replaced whole)"
        assert re.search(rf"{schema}\.{table.name} published: batch \S+, [\d,]+ rows{re.escape(said)}", run.output), \
            table.name
    assert "supplier comes in fewer than 2 streams in this batch" in run.output


def test_a_batch_wider_than_the_dag_fails_before_any_load(pg_uri, data_root, schema, tmp_path):
    from switchyard.core.datagen import generate_tpch_shaped
    folder = data_root / "shaped-wide"
    generate_tpch_shaped(folder, SPEC, 0.01, {"orders": 3}, default=1)
    run = run_dag(pg_uri, data_root, schema, 2, {"batch": folder.name, "tables": ["orders"]}, tmp_path / "runs")
    assert run.returncode != 0
    assert ("the batch has 3 streams of orders but this DAG has task groups for up to 2 per table "
            "(set SWITCHYARD_STREAMS=3 or more in the DAG's settings file, ") in run.output
    assert "switchyard.env, which every Airflow process reads as it parses the DAG)" in run.output


def test_a_range_archived_again_moves_to_the_archive_whose_names_its_indexes_had(pg_uri, schema, tmp_path):
    """Retire: archive moves a partition and its indexes (relations of its schema) to the archive
    schema. When the archive holds an index of the same name already (the same range archived
    before, the archived table renamed since), the index is renamed first: the batch goes in,
    and both archived tables keep their rows."""
    keep_one = ids_spec(tmp_path, "keep: 1\n    retire: archive")
    load_through_steps(pg_uri, schema, keep_one, ids_batch(tmp_path / "a", range(1, 11)), "2027-01-01")
    load_through_steps(pg_uri, schema, keep_one, ids_batch(tmp_path / "b", range(11, 21)), "2027-02-01")
    archive = f"{schema}_archive"
    with psycopg.connect(pg_uri) as conn:
        # A DBA keeps January under a name of their own; its index keeps the partition's.
        conn.execute(f'ALTER TABLE "{archive}"."ids_1_10" RENAME TO "ids_january"')
    # The same range again: in beside February (keep: 2 for that run), then out with the next.
    load_through_steps(pg_uri, schema, ids_spec(tmp_path, "keep: 2\n    retire: archive"),
             ids_batch(tmp_path / "c", range(1, 11)), "2027-03-01")
    load_through_steps(pg_uri, schema, keep_one, ids_batch(tmp_path / "d", range(21, 31)), "2027-04-01")
    with psycopg.connect(pg_uri) as conn:
        assert [r[0] for r in conn.execute(f'SELECT id FROM "{schema}"."ids" ORDER BY id')] == list(range(21, 31))
        indexes = dict(conn.execute("SELECT indexname, tablename FROM pg_indexes WHERE schemaname = %s",
                                    (archive,)).fetchall())
        assert indexes == {"ids_1_10_unique": "ids_january", "ids_11_20_unique": "ids_11_20",
                           "ids_1_10_unique_1": "ids_1_10"}
        for table, first in (("ids_january", 1), ("ids_1_10", 1), ("ids_11_20", 11)):
            rows = [r[0] for r in conn.execute(f'SELECT id FROM "{archive}"."{table}" ORDER BY id')]
            assert rows == list(range(first, first + 10)), table
