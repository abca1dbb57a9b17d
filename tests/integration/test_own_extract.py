"""A user's own extract end to end on the embedded PostgreSQL, not TPC-H: a monthly fact table
keyed by a timestamp (CSV, a header line, `NA` for NULL) in two streams, and two lookup tables
loaded whole, one keyed by a text code and one without a key.

* the lookup tables load whole and are replaced whole by the next batch;
* nothing is dropped in silence: a stream with rows but no key range, a missing file, a file of
  another size are refused before any load, every problem at once, and the target stays as it
  was; a group that never staged its table keeps the batch out;
* a batch goes in whole: a failed table keeps every table of the batch out (`publish: batch`,
  the default), or only itself (`publish: table`).
"""
from __future__ import annotations

import csv
import json
import random
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
import yaml

from helpers import LATER_STEPS_CHECK, dag_env, run_dag
from switchyard.core.batch import describe_batch, write_manifest
from switchyard.core.spec import load_spec
from switchyard_dev import dag_test

SPEC = {
    "name": "trips",
    "format": {"delimiter": ",", "trailing_delimiter": False, "quoting": "csv", "header_lines": 1,
               "null_marker": "NA"},
    "files": "{table}/{table}.{stream}.csv",
    "tables": {
        "trips": {"key": "started_at", "mode": "append", "keep": 3, "weight": 10, "unique": ["trip_id", "started_at"],
                  "columns": [{"name": "trip_id", "type": "bigint"},
                              {"name": "started_at", "type": {"postgres": "timestamp", "mssql": "datetime2(6)"}},
                              {"name": "station", "type": "varchar(8)"},
                              {"name": "minutes", "type": "integer", "nullable": True},
                              {"name": "fare", "type": {"postgres": "numeric(8,2)", "mssql": "decimal(8,2)"},
                               "nullable": True}]},
        "stations": {"partitioned": False, "key": "code",
                     "columns": [{"name": "code", "type": "varchar(8)"}, {"name": "name", "type": "varchar(60)"}]},
        "payment_types": {"partitioned": False,
                          "columns": [{"name": "label", "type": "varchar(20)"},
                                      {"name": "note", "type": "varchar(60)", "nullable": True}]},
    },
}
DAG_ID = "switchyard_trips"


def spec_file(folder: Path, **changes) -> str:
    """The spec as a file of the user's, outside the project; `changes` at its top level, or
    `trips_keep` for the fact table's retention, or `trips` for the fact table's entries."""
    raw = json.loads(json.dumps(SPEC))
    if "trips_keep" in changes:
        raw["tables"]["trips"]["keep"] = changes.pop("trips_keep")
    raw["tables"]["trips"].update(changes.pop("trips", {}))
    raw.update(changes)
    path = folder / f"trips-{abs(hash(json.dumps(raw, sort_keys=True)))}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    load_spec.cache_clear()
    return str(path)


def produce(folder: Path, month: int, stations: int = 12, rows: int = 60) -> None:
    """A producer's month of 2026: trips in two half-month files, the lookups; then the manifest."""
    rnd = random.Random(month)
    start, mid, end = datetime(2026, month, 1), datetime(2026, month, 16), datetime(2026, month + 1, 1)
    times = sorted(start + timedelta(seconds=int(rnd.random() * (end - start).total_seconds())) for _ in range(rows))
    for table in ("trips", "stations", "payment_types"):
        (folder / table).mkdir(parents=True, exist_ok=True)
    trip = month * 100000
    for k, part in ((1, [t for t in times if t < mid]), (2, [t for t in times if t >= mid])):
        with open(folder / "trips" / f"trips.{k}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["trip_id", "started_at", "station", "minutes", "fare"])
            for t in part:
                trip += 1
                w.writerow([trip, t.isoformat(sep=" "), f"ST{rnd.randint(1, stations):03d}",
                            "NA" if rnd.random() < 0.2 else rnd.randint(1, 90),
                            "NA" if rnd.random() < 0.2 else f"{rnd.uniform(0, 20):.2f}"])
    with open(folder / "stations" / "stations.1.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["code", "name"])
        w.writerows((f"ST{i:03d}", f'Station {i}, "Main" street, month {month}') for i in range(1, stations + 1))
    with open(folder / "payment_types" / "payment_types.1.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["label", "note"])
        w.writerows([("card", "NA"), ("cash", f"at the kiosk ({month})"), ("NA", "the label NA, not a NULL")])
    write_manifest(folder, describe_batch(folder, load_spec(str(folder.parent / "spec.yaml"))))


def file_rows(folder: Path, table: str) -> list[tuple]:
    """The rows a table's files hold, read with Python's csv module: NA is NULL in a nullable column."""
    nullable = [c.get("nullable", False) for c in SPEC["tables"][table]["columns"]]
    out = []
    for path in sorted((folder / table).glob("*.csv")):
        with open(path, newline="") as fh:
            records = list(csv.reader(fh))[1:]
        out += [tuple(None if (n and v == "NA") else v for v, n in zip(r, nullable)) for r in records]
    return sorted(out, key=repr)


def table_rows(uri: str, schema: str, table: str) -> list[tuple] | None:
    """The table's rows as text (None: no such table)."""
    columns = [c["name"] for c in SPEC["tables"][table]["columns"]]
    with psycopg.connect(uri) as conn:
        if conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."{table}"',)).fetchone()[0] is None:
            return None
        rows = conn.execute(f'SELECT {", ".join(f"{c}::text" for c in columns)} FROM "{schema}"."{table}"').fetchall()
    return sorted((tuple(r) for r in rows), key=repr)


@pytest.fixture
def batches(data_root, tmp_path):
    """Where this test's batches go (under the data root) and the spec, as a user keeps them."""
    root = data_root / f"trips-{tmp_path.name}"
    root.mkdir()
    (root / "spec.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def run(pg_uri, data_root, schema, tmp_path, batch: Path, spec: str, args=(), env=None):
    return run_dag(pg_uri, data_root, schema, 2, {"batch": str(batch.relative_to(data_root))}, tmp_path / "runs",
                   spec=spec, dag_id=DAG_ID, args=args, extra_env=env)



def test_lookup_tables_keyed_by_text_or_without_a_key_load_whole(pg_uri, data_root, schema, tmp_path, batches):
    spec = spec_file(tmp_path)
    jan, feb = batches / "2026-01", batches / "2026-02"
    produce(jan, 1)
    produce(feb, 2, stations=9)
    first = run(pg_uri, data_root, schema, tmp_path, jan, spec)
    assert first.returncode == 0, first.output[-4000:]
    for table in ("trips", "stations", "payment_types"):
        assert table_rows(pg_uri, schema, table) == file_rows(jan, table), table
    assert ("NA", "the label NA, not a NULL") in table_rows(pg_uri, schema, "payment_types")
    assert ("card", None) in table_rows(pg_uri, schema, "payment_types")
    second = run(pg_uri, data_root, schema, tmp_path, feb, spec)
    assert second.returncode == 0, second.output[-4000:]
    # The lookups are February's, whole; the trips both months' (append).
    assert table_rows(pg_uri, schema, "stations") == file_rows(feb, "stations")
    assert len(file_rows(feb, "stations")) == 9
    assert table_rows(pg_uri, schema, "payment_types") == file_rows(feb, "payment_types")
    assert table_rows(pg_uri, schema, "trips") == sorted(file_rows(jan, "trips") + file_rows(feb, "trips"), key=repr)
    totals = {name: t["rows"] for name, t in second.stats["tables"].items()}
    assert totals == {"trips": len(file_rows(feb, "trips")), "stations": 9, "payment_types": 3}


def test_a_run_dated_before_the_dags_start_date_runs_every_task(pg_uri, data_root, schema, tmp_path, batches, capfd):
    """The first-load guide sets SWITCHYARD_START_DATE to the first scheduled run; a manual run or a
    `dags test` dated before it (the trigger form's default date is now) loads its batch, each step
    as a task; and a batch that cannot load fails, never an empty `success`."""
    spec = spec_file(tmp_path)
    dag_id = f"{DAG_ID}_dated"      # a schedule of its own: the other tests parse DAG_ID with the nightly one
    jan = batches / "2026-01"
    produce(jan, 1)
    later = {"SWITCHYARD_START_DATE": "2030-01-01", "SWITCHYARD_SCHEDULE": "0 2 1 * *"}
    first = run_dag(pg_uri, data_root, schema, 2, {"batch": str(jan.relative_to(data_root))}, tmp_path / "runs",
                    spec=spec, dag_id=dag_id, extra_env=later, logical_date="2026-11-29T20:22:30+00:00")
    assert first.returncode == 0, first.output[-4000:]
    for table in ("trips", "stations", "payment_types"):
        assert table_rows(pg_uri, schema, table) == file_rows(jan, table), table
    assert len(first.stats["groups"]) == 4 and all(
        g["outcome"] == "switched" and set(g["steps"]) == {"prepare", "load", "validate", "switch"}
        for g in first.stats["groups"])
    # Another test run at that logical date would delete this one (Airflow's `dags test` replaces
    # the run it finds at its date): `switchyard airflow dags test` refuses it, naming the run.
    env = dag_env(pg_uri, data_root, schema, 2, tmp_path / "runs", later, spec, dag_id)
    listed = dag_test.list_runs(dag_id, env)
    for written in ("2026-11-29T20:22:30+00:00", "2026-11-29T21:22:30+01:00"):
        assert dag_test.refused_for_a_run_at_its_date(dag_id, ["dags", "test", dag_id, written], listed)
    said = capfd.readouterr().err
    assert said.count(f"of {dag_id} (success) has the logical date 2026-11-29T20:22:30+00:00, which `airflow dags "
                      f"test` would delete before its own run at that date: none was started") == 2, said
    assert not dag_test.refused_for_a_run_at_its_date(dag_id, ["dags", "test", dag_id, "2026-11-29T20:22:31Z"], listed)
    assert not dag_test.refused_for_a_run_at_its_date(dag_id, ["dags", "test", dag_id, "-c", "{}"], listed)
    # Without the local scheduler, a run left running (its process stopped) is carried on by
    # nothing: a test run would wait behind it for good. Refused, naming it and the way out.
    from sqlalchemy import create_engine, text
    metadata = create_engine(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    set_state = text("UPDATE dag_run SET state = :state WHERE dag_id = :dag AND run_id = :run")
    with metadata.begin() as conn:
        conn.execute(set_state, {"state": "running", "dag": dag_id, "run": first.stats["run_id"]})
    capfd.readouterr()
    try:
        assert dag_test.refused_behind_a_running_run(dag_id, dag_test.list_runs(dag_id, env))
        said = capfd.readouterr().err
        assert f"run {first.stats['run_id']} of {dag_id} is running" in said and "none was started" in said, said
        assert f"switchyard runs fail {dag_id} {first.stats['run_id']}" in said, said
    finally:
        with metadata.begin() as conn:
            conn.execute(set_state, {"state": "success", "dag": dag_id, "run": first.stats["run_id"]})
        metadata.dispose()
    assert not dag_test.refused_behind_a_running_run(dag_id, dag_test.list_runs(dag_id, env))
    # A test dated at a time the schedule has not reached would take that time's run: the scheduler
    # then makes none there, and that month's batch would never be loaded by the schedule.
    capfd.readouterr()
    assert dag_test.refused_for_a_future_date(dag_id, ["dags", "test", dag_id, "2030-02-01T02:00:00+00:00"], env)
    assert (f"the logical date 2030-02-01T02:00:00+00:00 is in the future, and {dag_id} runs on a schedule (0 2 1 * *)"
            in capfd.readouterr().err)
    assert not dag_test.refused_for_a_future_date(dag_id, ["dags", "test", dag_id, "2026-11-29T20:22:31Z"], env)
    assert not dag_test.refused_for_a_future_date(dag_id, ["dags", "test", dag_id, "-c", "{}"], env)
    missing = run_dag(pg_uri, data_root, schema, 2, {"batch": f"{jan.relative_to(data_root)}-not-there"},
                      tmp_path / "runs", spec=spec, dag_id=dag_id, extra_env={**later, "SWITCHYARD_BATCH_WAIT_SECONDS": "1"},
                      logical_date="2026-11-29T20:30:00+00:00")
    assert missing.returncode != 0 and "state=success" not in missing.output, missing.output[-4000:]


def test_rows_without_a_key_range_are_refused_before_any_load(pg_uri, data_root, schema, tmp_path, batches):
    """The silent drop this guards against: a stream with rows whose manifest gives no key range
    was planned as empty, its groups skipped and the run ended `success` without its rows."""
    spec = spec_file(tmp_path)
    jan = batches / "2026-01"
    produce(jan, 1)
    manifest = json.loads((jan / "manifest.json").read_text())
    entry = next(e for e in manifest["files"] if e["table"] == "trips" and e["stream"] == 2)
    entry["key_min"] = entry["key_max"] = None
    (jan / "manifest.json").write_text(json.dumps(manifest))
    result = run(pg_uri, data_root, schema, tmp_path, jan, spec)
    assert result.returncode != 0
    said = f"trips stream 2: {entry['rows']} rows but no key range (key_min, key_max)"
    assert said in result.output
    assert said in result.stats["plan_error"]
    assert result.stats["failed_groups"] and not result.stats["totals"]["switched"]
    for table in ("trips", "stations", "payment_types"):
        assert table_rows(pg_uri, schema, table) is None, f"{table} was created: the run got past its plan"


def test_a_missing_file_is_reported_with_every_other_problem_before_any_load(pg_uri, data_root, schema,
                                                                             tmp_path, batches):
    spec = spec_file(tmp_path, trips_keep=1)
    mar, jan = batches / "2026-03", batches / "2026-01"
    produce(mar, 3)
    produce(jan, 1)
    assert run(pg_uri, data_root, schema, tmp_path, mar, spec).returncode == 0
    before = {t: table_rows(pg_uri, schema, t) for t in ("trips", "stations", "payment_types")}
    (jan / "trips" / "trips.2.csv").unlink()
    with open(jan / "stations" / "stations.1.csv", "a", newline="") as fh:
        fh.write("ST999,Added after the manifest\r\n")      # the producer's line end
    result = run(pg_uri, data_root, schema, tmp_path, jan, spec)
    assert result.returncode != 0
    error = result.stats["plan_error"]
    # The three problems, in one refusal: the missing file, the file that changed, the window.
    assert f"{jan / 'trips' / 'trips.2.csv'}: listed in the manifest (trips stream 2" in error and "not found" in error
    assert f"{jan / 'stations' / 'stations.1.csv'}: " in error and "the manifest says" in error
    assert "batch " in error and "would be retired as it goes in (keep: 1 batches" in error
    # A small batch is read field by field before any load: the changed file's records too.
    assert f"{jan / 'stations' / 'stations.1.csv'}: 13 records, the manifest says 12 (stations stream 1)" in error
    assert error.count("\n- ") == 4, error
    assert {t: table_rows(pg_uri, schema, t) for t in before} == before


def test_a_decimal_the_server_would_round_is_refused_before_any_load(pg_uri, data_root, schema, tmp_path, batches):
    """`fare` is numeric(8,2): PostgreSQL would read 14.765 as 14.77 without an error. A small batch
    is read field by field in the plan: refused there, naming the file, the line and the column."""
    spec = spec_file(tmp_path)
    jan = batches / "2026-01"
    produce(jan, 1)
    path = jan / "trips" / "trips.2.csv"
    lines = path.read_text().splitlines()
    fields = lines[3].split(",")
    fields[-1] = "14.765"
    lines[3] = ",".join(fields)
    path.write_text("\n".join(lines) + "\n")
    write_manifest(jan, describe_batch(jan, load_spec(str(batches / "spec.yaml"))))
    result = run(pg_uri, data_root, schema, tmp_path, jan, spec)
    assert result.returncode != 0
    error = result.stats["plan_error"]
    assert (f"{path}: line 4, column fare: '14.765': 3 digits after the point, numeric(8,2) keeps 2: the load "
            f"would round it to another value without an error") in error, error
    for table in ("trips", "stations", "payment_types"):
        assert table_rows(pg_uri, schema, table) is None, f"{table} was created: the run got past its plan"


def test_a_failed_table_keeps_every_table_of_the_batch_out(pg_uri, data_root, schema, tmp_path, batches):
    spec = spec_file(tmp_path)
    jan, feb = batches / "2026-01", batches / "2026-02"
    produce(jan, 1)
    produce(feb, 2)
    # February's stations: one code longer than the column takes; its load fails on that line.
    path = feb / "stations" / "stations.1.csv"
    path.write_text(path.read_text().replace("ST005,", "ST005TOOLONG,"))
    write_manifest(feb, describe_batch(feb, load_spec(spec)))
    assert run(pg_uri, data_root, schema, tmp_path, jan, spec).returncode == 0
    result = run(pg_uri, data_root, schema, tmp_path, feb, spec, env=LATER_STEPS_CHECK)
    assert result.returncode != 0
    assert "value too long for type character varying(8)" in result.output
    assert result.stats["failed_groups"] == ["stations_1"]
    assert sorted(result.stats["tables_kept"]) == ["payment_types", "stations", "trips"]
    # Every table holds January's batch, whole: February's trips validated and waited, unpublished.
    for table in ("trips", "stations", "payment_types"):
        assert table_rows(pg_uri, schema, table) == file_rows(jan, table), table
    # `publish: table`: each table on its own; the trips go in, the stations keep their rows.
    per_table = spec_file(tmp_path, publish="table")
    other = f"{schema}_t"
    try:
        assert run(pg_uri, data_root, other, tmp_path, jan, per_table).returncode == 0
        result = run(pg_uri, data_root, other, tmp_path, feb, per_table, env=LATER_STEPS_CHECK)
        assert result.returncode != 0 and result.stats["failed_groups"] == ["stations_1"]
        assert table_rows(pg_uri, other, "trips") == sorted(file_rows(jan, "trips") + file_rows(feb, "trips"),
                                                            key=repr)
        assert table_rows(pg_uri, other, "payment_types") == file_rows(feb, "payment_types")
        assert table_rows(pg_uri, other, "stations") == file_rows(jan, "stations")
    finally:
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')
            conn.execute(f'DROP SCHEMA IF EXISTS "{other}_staging" CASCADE')


def test_a_stream_that_never_staged_keeps_the_batch_out(pg_uri, data_root, schema, tmp_path, batches):
    """A switch marked done without running (as `--mark-success-pattern`, or "mark success" in the
    UI, would): its rows never reached the table's next version, so the batch's publish refuses,
    naming the stream and its rows, and nothing goes in."""
    spec = spec_file(tmp_path)
    jan = batches / "2026-01"
    produce(jan, 1)
    result = run(pg_uri, data_root, schema, tmp_path, jan, spec, args=("--mark-success-pattern", r"^trips_2\.switch$"))
    assert result.returncode != 0
    rows = json.loads((jan / "manifest.json").read_text())["files"][1]["rows"]
    said = f"{schema}.trips: stream 2 ({rows:,} rows in the manifest) was not validated and switched in this run"
    assert said in result.output
    assert said in result.stats["publish_error"]
    assert table_rows(pg_uri, schema, "trips") == []
    assert table_rows(pg_uri, schema, "stations") == []


def test_a_lookup_the_batch_may_leave_out_keeps_what_it_holds(pg_uri, data_root, schema, tmp_path, batches):
    """A producer that sends payment_types only when they change: with `optional: true` a batch
    whose manifest lists no file of it loads the others, and payment_types keeps January's rows,
    the run's notes say so; without it the batch is refused before any load, naming the table."""
    plain = spec_file(tmp_path)
    optional = spec_file(tmp_path, tables={**SPEC["tables"], "payment_types": {
        **SPEC["tables"]["payment_types"], "optional": True}})
    jan, feb = batches / "2026-01", batches / "2026-02"
    produce(jan, 1)
    produce(feb, 2, stations=9)
    shutil.rmtree(feb / "payment_types")        # the producer's February: no payment types
    write_manifest(feb, describe_batch(feb, load_spec(optional)))    # `switchyard manifest` leaves it out
    assert {e["table"] for e in json.loads((feb / "manifest.json").read_text())["files"]} == {"trips", "stations"}
    assert run(pg_uri, data_root, schema, tmp_path, jan, optional).returncode == 0
    january = {t: table_rows(pg_uri, schema, t) for t in ("trips", "stations", "payment_types")}
    refused = run(pg_uri, data_root, schema, tmp_path, feb, plain)
    assert refused.returncode != 0 and "no entry for table payment_types" in refused.output, refused.output[-3000:]
    assert {t: table_rows(pg_uri, schema, t) for t in january} == january
    february = run(pg_uri, data_root, schema, tmp_path, feb, optional)
    assert february.returncode == 0, february.output[-4000:]
    assert table_rows(pg_uri, schema, "payment_types") == file_rows(jan, "payment_types")
    assert table_rows(pg_uri, schema, "stations") == file_rows(feb, "stations")
    assert table_rows(pg_uri, schema, "trips") == sorted(file_rows(jan, "trips") + file_rows(feb, "trips"), key=repr)
    assert ("payment_types: not in this batch (its manifest lists no file of it), and optional: true: this run does "
            "not load it, and it keeps what it holds") in february.stats["preflight"]
    assert {g["group"]: g["outcome"] for g in february.stats["groups"]} == {
        "trips_1": "switched", "trips_2": "switched", "stations_1": "switched", "payment_types_1": "skipped"}
    # The run's summary does not say "0 rows" of a table it left as it was.
    summary = {line.split()[0]: line for line in february.stats["summary_lines"][1:]}
    assert summary["payment_types"].split()[1:3] == ["-", "-"], february.stats["summary_lines"]
    assert summary["payment_types"].endswith("not loaded by this run: its groups were skipped")
    assert summary["stations"].split()[1] == str(len(file_rows(feb, "stations")))
    # Its file in the folder all the same, the manifest listing none: a manifest that forgot it.
    shutil.copytree(jan / "payment_types", feb / "payment_types")
    forgot = run(pg_uri, data_root, schema, tmp_path, feb, optional)
    assert forgot.returncode != 0
    assert f"{feb}/payment_types/payment_types.1.csv" in forgot.output and "the manifest does not list" in forgot.output, \
        forgot.output[-3000:]


def test_an_append_table_allowed_empty_takes_a_batch_without_its_rows(pg_uri, data_root, schema, tmp_path, batches):
    """A quiet month with no trips: the producer writes the trips files with their header only. By
    default a run refuses that (an incomplete batch looks the same); with `allow_empty: true` the
    batch adds no trips and its lookups go in. A batch in the table already, delivered again
    without its trips, is refused: its earlier trips would stay in the table."""
    plain, allowed = spec_file(tmp_path), spec_file(tmp_path, trips={"allow_empty": True})
    jan, feb = batches / "2026-01", batches / "2026-02"
    produce(jan, 1)
    produce(feb, 2, stations=9, rows=0)
    assert file_rows(feb, "trips") == []
    assert run(pg_uri, data_root, schema, tmp_path, jan, allowed).returncode == 0
    january = {t: table_rows(pg_uri, schema, t) for t in ("trips", "stations", "payment_types")}
    refused = run(pg_uri, data_root, schema, tmp_path, feb, plain)
    assert refused.returncode != 0
    assert (f"{schema}.trips: every stream of the table is empty in batch {feb.relative_to(data_root)}; in append mode "
            f"that would add nothing. If that is meant, declare allow_empty: true on the table") in refused.output
    assert {t: table_rows(pg_uri, schema, t) for t in january} == january
    quiet = run(pg_uri, data_root, schema, tmp_path, feb, allowed)
    assert quiet.returncode == 0, quiet.output[-4000:]
    assert f"{schema}.trips: every stream of the table is empty in batch {feb.relative_to(data_root)}: it adds nothing " \
           f"(allow_empty: true)" in quiet.output
    assert table_rows(pg_uri, schema, "trips") == january["trips"]
    assert table_rows(pg_uri, schema, "stations") == file_rows(feb, "stations")
    # January again, its trips files now without rows: its two partitions would stay. Refused.
    for path in (jan / "trips").glob("*.csv"):
        path.write_text(path.read_text().splitlines()[0] + "\n")
    write_manifest(jan, describe_batch(jan, load_spec(allowed)))
    again = run(pg_uri, data_root, schema, tmp_path, jan, allowed)
    assert again.returncode != 0
    assert (f"{schema}.trips: batch {jan.relative_to(data_root)} is in the table already (2 partitions), and this "
            f"delivery of it has no rows of the table") in again.output
    assert table_rows(pg_uri, schema, "trips") == january["trips"]
    assert table_rows(pg_uri, schema, "stations") == file_rows(feb, "stations")


def test_a_table_taken_out_of_the_spec_is_named_by_the_next_runs(pg_uri, data_root, schema, tmp_path, batches):
    """payment_types renamed in the spec (here: taken out): the old table stays with its last
    batch, which readers keep reading. Each later run's pre-flight names it, with the ways on."""
    jan, feb = batches / "2026-01", batches / "2026-02"
    produce(jan, 1)
    produce(feb, 2)
    assert run(pg_uri, data_root, schema, tmp_path, jan, spec_file(tmp_path)).returncode == 0
    without = spec_file(tmp_path, tables={k: v for k, v in SPEC["tables"].items() if k != "payment_types"})
    shutil.rmtree(feb / "payment_types")           # the producer's batch by the new spec
    write_manifest(feb, describe_batch(feb, load_spec(without)))
    result = run(pg_uri, data_root, schema, tmp_path, feb, without)
    assert result.returncode == 0, result.output[-4000:]
    said = (f"{schema}.payment_types: loaded by Switchyard (its newest batch {jan.relative_to(data_root)}) but no "
            f"table of the spec {without} any more: no run loads it now")
    assert any(note.startswith(said) for note in result.stats["preflight"]), result.stats["preflight"]
    assert table_rows(pg_uri, schema, "payment_types") == file_rows(jan, "payment_types")
    assert [n for n in result.stats["preflight"] if "no table of the spec" in n] == [
        n for n in result.stats["preflight"] if n.startswith(said)]      # the spec's own tables are not named
