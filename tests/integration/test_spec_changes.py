"""When the spec changes under a table that already holds batches, on the embedded PostgreSQL.

A user's storm-track extract: `tracks`, partitioned by a timestamp, loaded in `append` mode by
decade streams, declared `unique: [name, ts]` at first. The data proves that wrong (a batch
with duplicate pairs fails its validation); the user removes `unique`; the next run is refused
before any load (`on_spec_change: fail`, the default), naming the unique index Switchyard made
and the statement that drops it, or reconciled (`sync`); never a unique violation at the switch.
A new nullable column is refused, or added (`add_columns`); a new NOT NULL column and a retyped
one are refused under every policy. A DBA's own unique index that a batch breaks fails that
group's validation, before any switch.

Each batch runs the steps the DAG runs (setup with its pre-flight, prepare, load, validate,
switch, publish), through the adapter, against the real server.
"""
from __future__ import annotations

import json
import random
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from helpers import load_through_steps, publish
from switchyard.core.batch import MANIFEST_FORMAT, describe_batch, read_manifest, write_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.spec import parse_spec
from switchyard.observability.validation import describe_failures, validate_stream
from switchyard.targets import TargetError
from switchyard.targets.postgres import PostgresAdapter


def storms_spec(unique=True, on_spec_change="fail", gust=None, wind_type="integer") -> dict:
    columns = [{"name": "name", "type": "varchar(20)"},
               {"name": "ts", "type": {"postgres": "timestamp", "mssql": "datetime2(0)"}},
               {"name": "wind", "type": wind_type, "nullable": True}]
    if gust is not None:
        columns.append({"name": "gust", "type": "integer", "nullable": gust == "nullable"})
    table = {"key": "ts", "mode": "append", "columns": columns}
    if unique:
        table["unique"] = ["name", "ts"]
    return {"name": "storms", "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv"},
            "files": "{table}/{table}.{stream}.csv", "on_spec_change": on_spec_change, "tables": {"tracks": table}}


def produce(folder: Path, decade: int, duplicates: int = 0, gust: bool = False) -> None:
    """Tracks of two storms a day over one decade, in two streams (the decade's halves);
    `duplicates` pairs (name, ts) written twice, as the real data has them."""
    rnd = random.Random(decade)
    rows = []
    start = datetime(decade, 1, 1)
    for day in range(0, 3650, 30):
        for storm in ("Alma", "Bonnie"):
            ts = start + timedelta(days=day, hours=6 * rnd.randint(0, 3))
            rows.append([storm, ts.isoformat(sep=" "), str(rnd.randint(20, 150))] + ([str(rnd.randint(30, 200))]
                                                                                     if gust else []))
    rows += [list(r) for r in rows[:duplicates]]
    rows.sort(key=lambda r: r[1])
    (folder / "tracks").mkdir(parents=True, exist_ok=True)
    middle = datetime(decade + 5, 1, 1).isoformat(sep=" ")
    for k, part in ((1, [r for r in rows if r[1] < middle]), (2, [r for r in rows if r[1] >= middle])):
        (folder / "tracks" / f"tracks.{k}.csv").write_text("".join(",".join(r) + "\n" for r in part))


class Storms:
    """A user's project: batches under a folder of theirs, the target schema, the spec as it
    stands at each run."""

    def __init__(self, pg_uri: str, schema: str, root: Path):
        self.uri, self.schema, self.root = pg_uri, schema, root
        self.runs = 0

    def batch(self, decade: int, spec: dict, duplicates: int = 0, gust: bool = False) -> Path:
        folder = self.root / f"{decade}s"
        shutil.rmtree(folder, ignore_errors=True)
        produce(folder, decade, duplicates, gust)
        write_manifest(folder, describe_batch(folder, parse_spec(spec)))
        return folder

    def run(self, folder: Path, spec: dict) -> tuple[PostgresAdapter, list[str], list]:
        """setup (its pre-flight), then every group's prepare, load and validate; the switches
        and the publish only when every group validated (the DAG's rule). Returns the adapter,
        setup's notes and the validation outcomes."""
        loaded = parse_spec(spec)
        self.runs += 1
        plan = plan_batch(loaded, read_manifest(folder, loaded), ["tracks"])
        adapter = PostgresAdapter(loaded, uri=self.uri, schema=self.schema, lease_batch=folder.name,
                                  lease_holder=f"storms/run-{self.runs}")
        try:
            notes = adapter.setup(plan)
        except TargetError:
            adapter.release_lease()     # as the run's last task does
            raise
        outcomes = []
        try:
            for s in plan.all_streams():
                adapter.prepare(s)
                adapter.load(s, folder / s.file)
                outcomes.append(validate_stream(adapter, loaded, s))
            if all(o.success for o in outcomes):
                for s in plan.all_streams():
                    adapter.switch(s)
                publish(adapter, plan)
        finally:
            adapter.release_lease()     # the run's last task releases it, whatever failed
        return adapter, notes, outcomes

    def rows(self) -> int:
        with psycopg.connect(self.uri) as conn:
            return conn.execute(f'SELECT count(*) FROM "{self.schema}".tracks').fetchone()[0]

    def sql(self, statement: str):
        with psycopg.connect(self.uri, autocommit=True) as conn:
            return conn.execute(statement).fetchall() if statement.startswith("SELECT") else conn.execute(statement)

    def indexes(self) -> list[str]:
        return [r[0] for r in self.sql(f"SELECT indexname::text FROM pg_indexes WHERE schemaname = '{self.schema}' "
                                       f"AND tablename = 'tracks' ORDER BY 1")]

    def columns(self) -> list[str]:
        return [r[0] for r in self.sql(f"SELECT column_name::text FROM information_schema.columns WHERE "
                                       f"table_schema = '{self.schema}' AND table_name = 'tracks' "
                                       f"ORDER BY ordinal_position")]


@pytest.fixture
def storms(pg_uri, schema, tmp_path):
    yield Storms(pg_uri, schema, tmp_path / "storms")


def refused(storms: Storms, folder: Path, spec: dict) -> str:
    before = (storms.rows(), storms.indexes(), storms.columns())
    with pytest.raises(TargetError) as caught:
        storms.run(folder, spec)
    assert caught.value.permanent and "pre-flight refused the batch before any load" in str(caught.value)
    assert (storms.rows(), storms.indexes(), storms.columns()) == before     # the target stays as it was
    return str(caught.value)


def test_a_unique_key_removed_from_the_spec_is_refused_or_dropped_never_a_switch_time_violation(storms, schema):
    declared = storms_spec(unique=True)
    for decade in (1980, 1990):
        _, _, outcomes = storms.run(storms.batch(decade, declared), declared)
        assert all(o.success for o in outcomes)
    assert storms.rows() == 2 * 244 and "tracks_unique" in storms.indexes()
    # The 2000s hold duplicate pairs: the declared uniqueness catches them; nothing goes in.
    dupes = storms.batch(2000, declared, duplicates=24)
    _, _, outcomes = storms.run(dupes, declared)
    failed = [o for o in outcomes if not o.success]
    assert failed and "expect_compound_columns_to_be_unique on name, ts" in describe_failures(failed[0], "tracks")
    assert storms.rows() == 2 * 244
    # The user removes `unique`. The table keeps the index Switchyard made from the earlier spec:
    # under the default policy the run is refused before any load, naming it and the fix.
    relaxed = storms_spec(unique=False)
    message = refused(storms, storms.batch(2000, relaxed, duplicates=24), relaxed)
    assert (f"{schema}.tracks: unique index tracks_unique on (name, ts) was made by Switchyard from an earlier "
            f"spec, which the spec no longer declares (it declares no unique columns)") in message
    assert f'run: DROP INDEX "{schema}"."tracks_unique"; (or set on_spec_change: sync for tracks, which runs it)' \
        in message
    # With sync, setup drops it and the batch loads, duplicates and all, as the spec now says.
    synced = storms_spec(unique=False, on_spec_change="sync")
    _, notes, outcomes = storms.run(storms.batch(2000, synced, duplicates=24), synced)
    assert all(o.success for o in outcomes)
    assert any(f'on_spec_change: sync ran: DROP INDEX "{schema}"."tracks_unique"' in n for n in notes), notes
    assert storms.rows() == 3 * 244 + 24 and "tracks_unique" not in storms.indexes()


def test_declaring_unique_again_builds_the_index_with_sync_after_checking_the_rows(storms, schema):
    plain = storms_spec(unique=False)
    storms.run(storms.batch(1980, plain, duplicates=3), plain)
    declared = storms_spec(unique=True)
    message = refused(storms, storms.batch(1990, declared), declared)
    assert f"{schema}.tracks: the spec declares unique (name, ts); the table has no unique index tracks_unique" \
        in message
    # sync builds it over the rows the table holds: its duplicates refuse the batch, naming them.
    synced = storms_spec(unique=True, on_spec_change="sync")
    with pytest.raises(TargetError, match=r"already holds duplicates of a unique key.*Key \(name, ts\)="):
        storms.run(storms.batch(1990, synced), synced)
    assert storms.rows() == 244 + 3 and "tracks_unique" not in storms.indexes()


def test_a_new_nullable_column_is_refused_or_added_and_a_not_null_or_retyped_one_always_refused(storms, schema):
    first = storms_spec()
    for decade in (1980, 1990):
        storms.run(storms.batch(decade, first), first)
    wider = storms_spec(gust="nullable")
    message = refused(storms, storms.batch(2000, wider, gust=True), wider)
    assert (f"{schema}.tracks: column gust (integer) is in the spec, not in the table: the files carry it and no "
            f"staging table can be switched in without it; to bring the table in line, run: ALTER TABLE "
            f'"{schema}"."tracks" ADD COLUMN "gust" integer; (or set on_spec_change: add_columns') in message
    adding = storms_spec(gust="nullable", on_spec_change="add_columns")
    _, notes, outcomes = storms.run(storms.batch(2000, adding, gust=True), adding)
    assert all(o.success for o in outcomes) and storms.columns() == ["name", "ts", "wind", "gust"]
    by_decade = storms.sql(f"SELECT extract(decade FROM ts)::int, count(*), count(gust) FROM \"{schema}\".tracks "
                           f"GROUP BY 1 ORDER BY 1")
    assert by_decade == [(198, 244, 0), (199, 244, 0), (200, 244, 244)]   # earlier batches: NULL, kept
    # A retyped column is never changed by a policy: refused, with the statement, under sync too.
    retyped = storms_spec(gust="nullable", wind_type="bigint", on_spec_change="sync")
    message = refused(storms, storms.batch(2010, retyped, gust=True), retyped)
    assert (f"{schema}.tracks: column wind is integer in the table, bigint in the spec: a staging table takes the "
            f"table's types, so the loads would not be what the spec says; changing a type rewrites every partition, "
            f'which is yours to decide; to bring the table in line, run: ALTER TABLE "{schema}"."tracks" ALTER COLUMN '
            f'"wind" TYPE bigint;') in message
    assert "on_spec_change: sync for tracks" not in message
    # A new NOT NULL column: the rows the table holds have no value for it, under every policy.
    brand_new = storms_spec(gust="nullable", on_spec_change="sync")
    brand_new["tables"]["tracks"]["columns"].append({"name": "basin", "type": "char(2)"})
    message = refused(storms, storms.batch(2010, brand_new, gust=True), brand_new)
    assert (f"{schema}.tracks: column basin (character(2), NOT NULL) is in the spec, not in the table: the rows the "
            f"table holds have no value for it, so it cannot be added NOT NULL") in message


def test_a_dbas_unique_index_broken_by_a_batch_fails_its_validation_before_any_switch(storms, schema):
    plain = storms_spec(unique=False)
    storms.run(storms.batch(1980, plain), plain)
    storms.sql(f'CREATE UNIQUE INDEX tracks_dba_name_ts ON "{schema}".tracks (name, ts)')
    _, notes, outcomes = storms.run(storms.batch(1990, plain, duplicates=4), plain)
    assert any("unique index tracks_dba_name_ts on (name, ts) is not Switchyard's: each stream's staging table is "
               "checked against it before anything is published" in n for n in notes), notes
    failed = [o for o in outcomes if not o.success]
    assert failed, "the batch broke the DBA's index and still validated"
    text = describe_failures(failed[0], "tracks")
    assert (f"expect_compound_columns_to_be_unique on name, ts (declared in the target's unique index "
            f"{schema}.tracks_dba_name_ts): expected no duplicates") in text and "'duplicated_keys': " in text
    assert storms.rows() == 244 and "tracks_dba_name_ts" in storms.indexes()


def test_a_dbas_unique_index_checked_at_validate_is_kept_for_the_switch(storms, schema):
    """The index validate builds on each staging table to check a DBA's unique index is the one
    the switch needs there: kept (committed), not built a second time at the switch."""
    plain = storms_spec(unique=False)
    storms.run(storms.batch(1980, plain), plain)
    storms.sql(f'CREATE UNIQUE INDEX tracks_dba_name_ts ON "{schema}".tracks (name, ts)')
    folder = storms.batch(1990, plain)
    loaded = parse_spec(plain)
    plan = plan_batch(loaded, read_manifest(folder, loaded), ["tracks"])
    adapter = PostgresAdapter(loaded, uri=storms.uri, schema=schema, lease_batch=folder.name, lease_holder="storms/kept")
    try:
        adapter.setup(plan)
        for s in plan.all_streams():
            adapter.prepare(s)
            adapter.load(s, folder / s.file)
            assert validate_stream(adapter, loaded, s).success
            name = adapter._staging_index_name(s, "tracks_dba_name_ts")
            assert storms.sql(f"SELECT to_regclass('\"{adapter.staging_schema}\".\"{name}\"') IS NOT NULL")[0][0], name
    finally:
        adapter.release_lease()


def a_batch_breaking_a_dbas_check(storms: Storms, schema: str, spec: dict) -> tuple[Path, Path]:
    """The 1980s loaded, then a DBA's CHECK on the wind, then the 1990s with a wind no storm had
    on line 4 of stream 1's file: (the batch's folder, that file)."""
    storms.run(storms.batch(1980, spec), spec)
    storms.sql(f'ALTER TABLE "{schema}".tracks ADD CONSTRAINT tracks_dba_wind CHECK (wind <= 150)')
    folder = storms.batch(1990, spec)
    part = folder / "tracks" / "tracks.1.csv"
    lines = part.read_text().splitlines()
    lines[3] = ",".join(lines[3].split(",")[:2] + ["500"])
    part.write_text("\n".join(lines) + "\n")
    write_manifest(folder, describe_batch(folder, parse_spec(spec)))
    return folder, part


def test_a_dbas_check_constraint_broken_by_a_batch_fails_its_load_naming_the_line(storms, schema):
    plain = storms_spec(unique=False)
    folder, part = a_batch_breaking_a_dbas_check(storms, schema, plain)
    with pytest.raises(TargetError) as failed:
        storms.run(folder, plain)
    # The staging tables carry the table's CHECK constraints: the load itself refuses the row.
    text = str(failed.value)
    assert failed.value.permanent and "tracks_dba_wind" in text and f"{part}: line 4" in text, text
    # The column the CHECK reads, and the CHECK as the server keeps it (PostgreSQL names neither).
    assert f'{part}: line 4, column wind: new row for relation "tracks_1" violates check constraint ' \
           f'"tracks_dba_wind": CHECK ((wind <= 150))' in text, text
    assert storms.rows() == 244
    # A CHECK that reads two columns names both, in the constraint's order.
    storms.sql(f'ALTER TABLE "{schema}".tracks DROP CONSTRAINT tracks_dba_wind, '
               f"ADD CONSTRAINT tracks_dba_named CHECK (wind <= 150 OR name = 'Alma')")
    with pytest.raises(TargetError) as failed:
        storms.run(folder, plain)
    assert f"{part}: line 4, columns wind, name: " in str(failed.value), str(failed.value)
    assert storms.rows() == 244


def test_a_varchar_widened_or_narrowed_in_the_spec_is_refused_or_its_check_replaced_by_sync(storms, schema):
    """PostgreSQL keeps a varchar(n) as text with a length CHECK: a spec that changes n differs
    from the table in that CHECK's text, which the pre-flight compares as the server writes it.
    Left as it was, a value the spec allows would fail its load (with the spec's length in the
    message), and a narrower spec would let longer values of a big batch through."""
    first = storms_spec()
    storms.run(storms.batch(1980, first), first)
    wider = storms_spec()
    wider["tables"]["tracks"]["columns"][0]["type"] = "varchar(30)"
    folder = storms.batch(1990, wider)
    long_name = "Bonnie-" + "x" * 18      # 25 characters: the spec's 30 allow it, the table's 20 not
    for path in (folder / "tracks").glob("*.csv"):
        path.write_text(path.read_text().replace("Bonnie", long_name))
    write_manifest(folder, describe_batch(folder, parse_spec(wider)))
    message = refused(storms, folder, wider)
    assert f"{schema}.tracks: the CHECK name_length on name is CHECK (" in message
    assert "<= 20" in message and "<= 30" in message
    assert (f'to bring the table in line, run: ALTER TABLE "{schema}"."tracks" DROP CONSTRAINT "name_length", '
            f'ADD CONSTRAINT "name_length" CHECK (') in message
    assert "(or set on_spec_change: sync for tracks, which runs it)" in message
    synced = {**wider, "on_spec_change": "sync"}
    _, notes, outcomes = storms.run(folder, synced)
    assert all(o.success for o in outcomes)
    assert any("on_spec_change: sync ran: ALTER TABLE" in n and '"name_length"' in n for n in notes), notes
    assert storms.sql(f'SELECT max(char_length(name)) FROM "{schema}".tracks') == [(25,)]
    # Run again: the CHECK says what the spec says, no difference left.
    assert not any("name_length" in n for n in storms.run(folder, synced)[1])
    # Narrowed below a name the table holds: sync's ALTER checks every row and fails; nothing changed.
    narrow = storms_spec(on_spec_change="sync")
    narrow["tables"]["tracks"]["columns"][0]["type"] = "varchar(10)"
    before = storms.rows()
    with pytest.raises(TargetError, match=r'on_spec_change could not bring the table in line: ALTER TABLE .* failed: '
                                          r'check constraint "name_length" of relation ".*" is violated by some row: the '
                                          r'table holds rows the spec no longer allows; nothing was changed') as caught:
        storms.run(storms.batch(2000, narrow), narrow)
    assert caught.value.permanent
    assert storms.rows() == before
    assert "<= 30" in storms.sql(f"SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                                 f"WHERE conrelid = '\"{schema}\".tracks'::regclass AND conname = 'name_length'")[0][0]


def _lookup(folder: Path, on_spec_change: str, with_decimals: bool, rows: list[tuple]) -> tuple:
    """A text-keyed lookup replaced whole by each batch (`currencies`, unpartitioned), with or
    without its NOT NULL `decimals` column; the spec and the batch's folder."""
    columns = [{"name": "code", "type": "char(3)"}, {"name": "name", "type": "varchar(40)"}]
    columns += [{"name": "decimals", "type": "smallint"}] if with_decimals else []
    spec = parse_spec({"name": "money", "files": "{table}/{table}.{stream}.csv", "on_spec_change": on_spec_change,
                       "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1},
                       "tables": {"currencies": {"partitioned": False, "key": "code", "unique": True,
                                                 "columns": columns}}}, source="money.yaml")
    path = folder / "currencies" / "currencies.1.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(",".join(c["name"] for c in columns) + "\n"
                    + "".join(",".join(map(str, r[:len(columns)])) + "\n" for r in rows))
    (folder / "manifest.json").write_text(json.dumps({"format": MANIFEST_FORMAT, "spec": "money", "streams": 1,
        "files": [{"table": "currencies", "stream": 1, "file": "currencies/currencies.1.csv",
                   "bytes": path.stat().st_size, "rows": len(rows), "key_min": None, "key_max": None}]}))
    return spec, folder



def _currencies(pg_uri: str, schema: str) -> tuple[list, list]:
    """The lookup's columns (name, is_nullable) and its rows."""
    with psycopg.connect(pg_uri) as conn:
        shape = conn.execute("SELECT column_name::text, is_nullable::text FROM information_schema.columns WHERE "
                             "table_schema = %s AND table_name = 'currencies' ORDER BY ordinal_position",
                             (schema,)).fetchall()
        return shape, conn.execute(f'SELECT * FROM "{schema}".currencies ORDER BY 1').fetchall()


def test_a_not_null_column_added_to_a_lookup_replaced_whole_comes_with_the_batch(pg_uri, schema, tmp_path):
    """An unpartitioned table is replaced whole by every batch: a NOT NULL column the spec adds is
    added nullable by add_columns (refused with its statement under fail), takes the batch's
    values, and sync sets NOT NULL on the next run."""
    rows = [("EUR", "Euro", 2), ("JPY", "Yen", 0), ("KWD", "Dinar", 3)]
    load_through_steps(pg_uri, schema, *_lookup(tmp_path / "b1", "fail", False, rows), "2027-01-01")
    before = _currencies(pg_uri, schema)
    spec, folder = _lookup(tmp_path / "b2", "fail", True, rows)
    with pytest.raises(TargetError) as caught:
        load_through_steps(pg_uri, schema, spec, folder, "2027-02-01")
    assert (f"{schema}.currencies: column decimals (smallint, NOT NULL) is in the spec, not in the table: the table "
            f"is replaced whole by every batch: the column is added nullable") in str(caught.value)
    assert 'ADD COLUMN "decimals" smallint' in str(caught.value) and _currencies(pg_uri, schema) == before
    notes = load_through_steps(pg_uri, schema, *_lookup(tmp_path / "b3", "add_columns", True, rows), "2027-02-01")
    assert any('on_spec_change: add_columns ran: ALTER TABLE' in n and '"decimals"' in n for n in notes), notes
    shape, loaded = _currencies(pg_uri, schema)
    assert shape == [("code", "NO"), ("name", "NO"), ("decimals", "YES")]
    assert loaded == [(code, name, decimals) for code, name, decimals in rows]
    load_through_steps(pg_uri, schema, *_lookup(tmp_path / "b4", "sync", True, rows), "2027-03-01")
    assert _currencies(pg_uri, schema)[0] == [("code", "NO"), ("name", "NO"), ("decimals", "NO")]


def test_a_lookups_not_null_column_left_with_nulls_by_a_failed_run_does_not_refuse_the_next_under_sync(
        pg_uri, schema, tmp_path):
    """A run under sync adds the lookup's new NOT NULL column (nullable) at setup, then fails
    before its publish: the old rows keep NULL in it. The next run under sync is not refused by
    SET NOT NULL (its batch replaces those rows): it publishes, and the run after sets NOT NULL."""
    from switchyard.core.batch import read_manifest
    from switchyard.core.planner import plan_batch
    rows = [("EUR", "Euro", 2), ("JPY", "Yen", 0), ("KWD", "Dinar", 3)]
    load_through_steps(pg_uri, schema, *_lookup(tmp_path / "b1", "fail", False, rows), "2027-01-01")
    spec, folder = _lookup(tmp_path / "b2", "sync", True, rows)
    failed = PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_batch="2027-02-01")
    failed.setup(plan_batch(spec, read_manifest(folder, spec)))    # then the run fails at a load
    failed.release_lease()

    assert _currencies(pg_uri, schema) == ([("code", "NO"), ("name", "NO"), ("decimals", "YES")],
                                [(code, name, None) for code, name, _ in rows])
    notes = load_through_steps(pg_uri, schema, *_lookup(tmp_path / "b3", "sync", True, rows), "2027-02-01")
    assert any("column decimals is nullable in the table, NOT NULL in the spec; on_spec_change: sync ran: DO "
               in n for n in notes), notes
    assert _currencies(pg_uri, schema) == ([("code", "NO"), ("name", "NO"), ("decimals", "YES")], rows)
    load_through_steps(pg_uri, schema, *_lookup(tmp_path / "b4", "sync", True, rows), "2027-03-01")
    assert _currencies(pg_uri, schema) == ([("code", "NO"), ("name", "NO"), ("decimals", "NO")], rows)


def test_a_batch_of_the_spec_before_a_varchar_column_was_added_names_its_check_as_switchyards(storms, schema):
    """add_columns added a varchar column with its length CHECK; a batch written before it, loaded
    with the spec it was written for, is told that CHECK is Switchyard's, made with the column."""
    first = storms_spec(unique=False)
    storms.run(storms.batch(1980, first), first)
    adding = storms_spec(unique=False, gust="nullable", on_spec_change="add_columns")
    adding["tables"]["tracks"]["columns"][-1]["type"] = "varchar(8)"
    storms.run(storms.batch(1990, adding, gust=True), adding)
    assert storms.columns() == ["name", "ts", "wind", "gust"]
    _, notes, outcomes = storms.run(storms.batch(2000, first), first)
    assert all(o.success for o in outcomes)
    assert (f"{schema}.tracks: CHECK constraint gust_length on column gust is Switchyard's, made with the column by a "
            f"spec that had it: the column is not in this spec's files: the batch's rows get NULL in it, which the "
            f"CHECK lets through; both stay") in notes
    assert not [n for n in notes if "not Switchyard's" in n]
    assert storms.sql(f'SELECT count(*), count(gust) FROM "{schema}".tracks WHERE ts >= \'2000-01-01\'') == [(244, 0)]


def test_a_dbas_change_to_the_table_after_a_failed_run_is_named_when_its_group_is_cleared(storms, schema):
    """The run's failed group cleared after the DBA dropped the CHECK a row broke: the run's setup
    made the table's next version with the table as it was, so the group cannot switch into it.
    The switch says the table changed since the run's setup and that the whole run cleared from
    setup.plan loads the batch; the target stays as it was, and the run cleared so does load it."""
    plain = storms_spec(unique=False)
    folder, _ = a_batch_breaking_a_dbas_check(storms, schema, plain)
    loaded = parse_spec(plain)
    plan = plan_batch(loaded, read_manifest(folder, loaded), ["tracks"])
    adapter = PostgresAdapter(loaded, uri=storms.uri, schema=schema, lease_batch=folder.name, lease_holder="storms/kept")
    adapter.setup(plan)
    streams = list(plan.all_streams())
    try:
        for s in streams:
            adapter.prepare(s)
            if s.stream == 1:
                with pytest.raises(TargetError, match="tracks_dba_wind"):
                    adapter.load(s, folder / s.file)
            else:
                adapter.load(s, folder / s.file)
                assert validate_stream(adapter, loaded, s).success
                adapter.switch(s)
        # The DBA drops the CHECK; the user clears the failed group, as the run's note advises.
        storms.sql(f'ALTER TABLE "{schema}".tracks DROP CONSTRAINT tracks_dba_wind')
        s = streams[0]
        adapter.prepare(s)
        adapter.load(s, folder / s.file)
        assert validate_stream(adapter, loaded, s).success
        with pytest.raises(TargetError) as failed:
            adapter.switch(s)
    finally:
        adapter.release_lease()
    text = str(failed.value)
    assert failed.value.permanent, text
    assert f"{schema}.tracks changed since this run's setup" in text, text
    assert "clear the whole run from setup.plan, or start a new run" in text, text
    assert storms.rows() == 244
    # The whole run cleared from setup.plan: setup makes the next version again, as the table is now.
    adapter.setup(plan)
    try:
        for s in streams:
            adapter.prepare(s)
            adapter.load(s, folder / s.file)
            assert validate_stream(adapter, loaded, s).success
        for s in streams:
            adapter.switch(s)
        publish(adapter, plan)
    finally:
        adapter.release_lease()
    assert storms.rows() == 488


def test_a_partition_key_changed_in_the_spec_is_refused_before_any_load_never_a_crash(storms, schema):
    """The spec's key moved to another column, or retyped: the table's partitions are bounded by
    the old key, and neither server changes a partition key in place. Refused before any load,
    permanent, naming the table's key and the fix; before, the old bounds were read as the new
    key's values and setup.plan failed on a ValueError, retried for hours."""
    first = storms_spec()
    storms.run(storms.batch(1980, first), first)
    moved = storms_spec()
    moved["tables"]["tracks"]["key"] = "wind"
    moved["tables"]["tracks"]["unique"] = ["name", "wind"]
    moved["tables"]["tracks"]["columns"][2]["nullable"] = False
    folder = storms.batch(1990, first)       # in one stream: its wind values are in no order
    one = folder / "tracks" / "tracks.1.csv"
    one.write_text(one.read_text() + (folder / "tracks" / "tracks.2.csv").read_text())
    (folder / "tracks" / "tracks.2.csv").unlink()
    write_manifest(folder, describe_batch(folder, parse_spec(moved)))
    message = refused(storms, folder, moved)
    assert f"{schema}.tracks is partitioned by range on (ts), the spec by range on wind" in message
    retyped = storms_spec()
    retyped["tables"]["tracks"]["columns"][1]["type"] = {"postgres": "timestamp(0)", "mssql": "datetime2(0)"}
    message = refused(storms, storms.batch(1990, retyped), retyped)
    assert (f"{schema}.tracks: column ts, the partition key, is timestamp without time zone in the table, timestamp(0) "
            f"without time zone in the spec") in message
    assert "cannot be changed in place: keep the table's type in the spec, or create the table anew" in message
    assert "ALTER COLUMN" not in message
