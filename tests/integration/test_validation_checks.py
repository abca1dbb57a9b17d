"""The checks a data engineer expects, on the real embedded PostgreSQL: unique keys (alone and
compound), NOT NULL columns, and expectations declared in the spec; each failure stops its
group before the switch, with the expectation, what was expected and what was observed.

Adapter-level tests first (a small spec of our own), then the TPC-H DAG with a duplicated
line in orders.1.tbl, a duplicated lineitem line and a value outside a declared range."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest

from switchyard.core.batch import MANIFEST_FORMAT, read_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.spec import SpecError, load_spec, parse_spec
from switchyard.targets.postgres import PostgresAdapter
from switchyard.observability.validation import (check_spec_expectations, describe_failures, validate_stream,
                                   validate_table)

SHOP_YAML = """
name: shop
format: {delimiter: "|", trailing_delimiter: false}
files: "{table}/{table}.{stream}.txt"
tables:
  orders:
    key: order_id
    unique: true
    columns:
      - {name: order_id, type: bigint}
      - {name: customer, type: varchar(20)}
      - {name: total, type: "numeric(10,2)"}
    expectations:
      - {type: expect_column_values_to_be_between, kwargs: {column: total, min_value: 0, max_value: 1000}}
      - {type: expect_column_values_to_match_regex, kwargs: {column: customer, regex: "^c[0-9]+$"}}
  lines:
    key: order_id
    unique: [order_id, line_no]
    columns:
      - {name: order_id, type: bigint}
      - {name: line_no, type: integer}
      - {name: qty, type: integer}
"""


def orders_rows() -> list[str]:
    return [f"{i}|c{i % 17}|{(i * 37) % 100000 / 100:.2f}" for i in range(1, 201)]


def lines_rows() -> list[str]:
    return [f"{i}|{n}|{(i + n) % 9 + 1}" for i in range(1, 201) for n in range(1, 4)]


def write_shop(folder: Path, orders: list[str], lines: list[str]) -> None:
    entries = []
    for table, rows in (("orders", orders), ("lines", lines)):
        path = folder / table / f"{table}.1.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(rows) + "\n")
        keys = [int(r.split("|", 1)[0]) for r in rows]
        entries.append({"table": table, "stream": 1, "file": f"{table}/{table}.1.txt", "bytes": path.stat().st_size,
                        "rows": len(rows), "key_min": min(keys), "key_max": max(keys)})
    (folder / "manifest.json").write_text(json.dumps(
        {"format": MANIFEST_FORMAT, "spec": "shop", "streams": 1, "files": entries}))


@pytest.fixture
def shop(tmp_path, pg_uri, schema):
    path = tmp_path / "shop.yaml"
    path.write_text(SHOP_YAML)
    spec = load_spec(str(path))
    adapter = PostgresAdapter(spec, uri=pg_uri, schema=schema)
    return spec, adapter, tmp_path


def stage(spec, adapter, folder: Path, table: str, orders: list[str], lines: list[str]):
    """Write the batch, plan it, and prepare and load the table's stream 1; its stream plan."""
    shutil.rmtree(folder, ignore_errors=True)
    write_shop(folder, orders, lines)
    plan = plan_batch(spec, read_manifest(folder, spec))
    adapter.setup(plan)
    s = plan.stream(table, 1)
    adapter.prepare(s)
    adapter.load(s, folder / s.file)
    return s


def partition_oid(uri: str, schema: str, name: str) -> int | None:
    with psycopg.connect(uri) as conn:
        return conn.execute("SELECT to_regclass(%s)::oid", (f'"{schema}"."{name}"',)).fetchone()[0]


def table_contents(uri: str, schema: str, table: str) -> list[tuple]:
    with psycopg.connect(uri) as conn:
        return conn.execute(f'SELECT * FROM "{schema}"."{table}" ORDER BY 1, 2').fetchall()


def test_a_duplicate_key_fails_validation_and_the_target_keeps_its_partition(shop, pg_uri, schema):
    spec, adapter, tmp = shop
    good = stage(spec, adapter, tmp / "b1", "orders", orders_rows(), lines_rows())
    outcome = validate_stream(adapter, spec, good)
    assert outcome.success, describe_failures(outcome, good.group_id)
    adapter.switch(good)
    adapter.publish_batch([good])  # this run's batch: the orders stream
    before = table_contents(pg_uri, schema, "orders")
    oid = partition_oid(pg_uri, schema, good.partition_table)

    rows = orders_rows()
    rows[41] = rows[40]            # line 42 replaced by a copy of line 41: same count, same key range
    bad = stage(spec, adapter, tmp / "b2", "orders", rows, lines_rows())
    assert (bad.rows, bad.key_min, bad.key_max) == (good.rows, good.key_min, good.key_max)
    outcome = validate_stream(adapter, spec, bad)
    assert not outcome.success
    [failed] = outcome.failures()
    assert (failed.expectation, failed.column, failed.expected) == (
        "expect_column_values_to_be_unique", "order_id", "no duplicates")
    assert failed.observed["duplicated_keys"] == 1 and failed.observed["extra_rows"] == 1
    assert failed.observed["examples"] == [{"order_id": 41, "rows": 2}]
    message = describe_failures(outcome, "table orders, stream 1")
    assert "expect_column_values_to_be_unique on order_id: expected no duplicates, observed" in message
    # Validation failed: nothing switched, the target is as it was.
    assert table_contents(pg_uri, schema, "orders") == before
    assert partition_oid(pg_uri, schema, good.partition_table) == oid


def test_a_duplicate_of_a_compound_unique_key_fails(shop):
    spec, adapter, tmp = shop
    # The same order_id on several lines is fine: only (order_id, line_no) is unique.
    s = stage(spec, adapter, tmp / "b1", "lines", orders_rows(), lines_rows())
    outcome = validate_stream(adapter, spec, s)
    assert outcome.success, describe_failures(outcome, s.group_id)
    unique = next(c for c in outcome.checks if c.category == "unique")
    assert unique.column == "order_id, line_no" and "unique index" in unique.observed["proven"]

    rows = lines_rows()
    rows[10] = rows[9].rsplit("|", 1)[0] + "|7"         # order 4 line 1 again (was line 2), another quantity
    s = stage(spec, adapter, tmp / "b2", "lines", orders_rows(), rows)
    outcome = validate_stream(adapter, spec, s)
    [failed] = outcome.failures()
    assert failed.expectation == "expect_compound_columns_to_be_unique"
    assert failed.column == "order_id, line_no"
    assert failed.observed["examples"] == [{"order_id": 4, "line_no": 1, "rows": 2}]


def test_great_expectations_checks_uniqueness_where_no_index_does(shop):
    """An engine without `prove_unique` (unique_result None): GX's own expectations run."""
    spec, adapter, tmp = shop
    rows = lines_rows()
    rows[10] = rows[9]
    s = stage(spec, adapter, tmp / "b1", "lines", orders_rows(), rows)
    url = adapter.sqlalchemy_url()
    out = validate_table(url, adapter.staging_schema, s.staging_table, "order_id", s.rows, s.key_min, s.key_max,
                         unique=("order_id", "line_no"))
    [failed] = out.failures()
    assert failed.expectation == "expect_compound_columns_to_be_unique" and failed.category == "unique"
    assert failed.observed["unexpected_count"] == 2
    out = validate_table(url, adapter.staging_schema, s.staging_table, "order_id", s.rows, s.key_min, s.key_max,
                         unique=("order_id",))
    [failed] = out.failures()
    assert failed.expectation == "expect_column_values_to_be_unique" and failed.observed["unexpected_count"] == 600


def test_a_declared_expectation_fails_with_a_clear_message(shop):
    spec, adapter, tmp = shop
    rows = orders_rows()
    rows[6] = "7|c7|5000.00"         # outside [0, 1000]
    rows[8] = "9|customer 9|8.00"    # does not match ^c[0-9]+$
    s = stage(spec, adapter, tmp / "b1", "orders", rows, lines_rows())
    outcome = validate_stream(adapter, spec, s)
    failed = {c.expectation: c for c in outcome.failures()}
    assert set(failed) == {"expect_column_values_to_be_between", "expect_column_values_to_match_regex"}
    between = failed["expect_column_values_to_be_between"]
    assert between.origin.endswith("shop.yaml: tables.orders.expectations[0]")
    assert between.expected == {"min_value": 0, "max_value": 1000}
    assert between.observed["unexpected_count"] == 1 and between.observed["examples"] == [5000]
    assert failed["expect_column_values_to_match_regex"].observed["examples"] == ["customer 9"]
    message = describe_failures(outcome, "table orders, stream 1")
    assert ("expect_column_values_to_be_between on total (declared in "
            f"{spec.source}: tables.orders.expectations[0]): expected {{'min_value': 0, 'max_value': 1000}}, "
            "observed {'unexpected_count': 1") in message


def test_unknown_or_unfit_declared_expectations_fail_naming_the_spec_entry():
    def spec_with(expectation: dict):
        return parse_spec({"name": "s", "tables": {"t": {"key": "k", "columns": [
            {"name": "k", "type": "bigint"}, {"name": "v", "type": "integer"}],
            "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "v"}},
                             expectation]}}}, source="s.yaml")
    with pytest.raises(SpecError, match=r"^s.yaml: tables.t.expectations\[1\].type: 'expect_column_values_to_be_purple' "
                                        r"is not a Great Expectations expectation type"):
        check_spec_expectations(spec_with({"type": "expect_column_values_to_be_purple", "kwargs": {"column": "v"}}))
    with pytest.raises(SpecError, match=r"^s.yaml: tables.t.expectations\[1\].kwargs: do not fit "
                                        r"expect_column_values_to_be_between: .*min_value and max_value cannot both be None"):
        check_spec_expectations(spec_with({"type": "expect_column_values_to_be_between", "kwargs": {"column": "v"}}))
    with pytest.raises(SpecError, match=r"expectations\[1\]: .*carry SQL text"):
        check_spec_expectations(spec_with({"type": "expect_column_values_to_be_between", "kwargs": {
            "column": "v", "min_value": 1, "row_condition": "1=1); DROP TABLE t; --"}}))
    assert check_spec_expectations(spec_with({"type": "expect_column_values_to_be_in_set",
                                              "kwargs": {"column": "v", "value_set": [1, 2]}})) == 2


def test_not_null_is_proven_by_the_staging_table_and_checked_where_it_is_not(shop, pg_uri):
    spec, adapter, tmp = shop
    s = stage(spec, adapter, tmp / "b1", "orders", orders_rows(), lines_rows())
    outcome = validate_stream(adapter, spec, s)
    not_null = {c.column: c for c in outcome.checks if c.category == "not_null"}
    assert set(not_null) == {"customer", "total"}
    assert all("NOT NULL constraint" in c.observed["proven"] for c in not_null.values())
    assert set(outcome.cost()) == {"row_count", "key_range", "not_null", "unique", "declared"}
    assert all(isinstance(v, float) and v >= 0 for v in outcome.cost().values())
    # A check without seconds of its own was proven by the query of the check before it.
    assert all(c.seconds is not None or "proven" in c.observed for c in outcome.checks)

    # A table that does not enforce NOT NULL (here: no constraint on total) gets the GX scan.
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{adapter.staging_schema}"."{s.staging_table}" ALTER COLUMN total DROP NOT NULL')
        conn.execute(f'UPDATE "{adapter.staging_schema}"."{s.staging_table}" SET total = NULL WHERE order_id = 3')
    outcome = validate_stream(adapter, spec, s)
    [failed] = outcome.failures()
    assert (failed.expectation, failed.column, failed.observed) == (
        "expect_column_values_to_not_be_null", "total", {"null_count": 1})
    assert next(c for c in outcome.checks if c.column == "customer" and c.category == "not_null").observed["proven"]


# --- the TPC-H DAG ------------------------------------------------------------------------------
def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")[:-1]


def _write(path: Path, lines: list[bytes]) -> None:
    path.write_bytes(b"\n".join(lines) + b"\n")


def test_duplicates_and_a_declared_range_fail_their_groups_before_the_switch(pg_uri, data_root, tpch_batch,
                                                                              schema, tmp_path):
    """The reproducer: a line of orders.1.tbl replaced by a copy of the line before it keeps the
    row count and the key range; it must fail validation, and the target keep its partition."""
    from helpers import run_dag
    from helpers import fingerprint, load_through_steps, partition_oids, resize_manifest
    name, folder = tpch_batch
    tables = ["orders", "lineitem", "customer"]
    spec_path = tmp_path / "tpch.yaml"
    original = Path(load_spec("tpch").source).read_text()
    declared = original.replace(
        "  customer:\n    key: c_custkey\n    unique: true\n",
        "  customer:\n    key: c_custkey\n    unique: true\n    expectations:\n"
        "      - {type: expect_column_values_to_be_between, kwargs: {column: c_acctbal, min_value: -999.99, "
        "max_value: 9999.99}}\n")
    assert declared != original
    spec_path.write_text(declared)
    env = {"SWITCHYARD_SPEC": str(spec_path)}
    # The good batch through the DAG's steps without Airflow, each group validated (the declared
    # expectation passes on every customer file): the target the bad run must leave as it is.
    load_through_steps(pg_uri, schema, load_spec(str(spec_path)), folder, name)
    before = fingerprint(pg_uri, schema, tables)
    oids_before = {t: partition_oids(pg_uri, schema, t) for t in tables}

    bad = data_root / "bad-validation"
    shutil.copytree(folder, bad)
    lines = _lines(bad / "orders" / "orders.1.tbl")
    lines[4] = lines[3]
    _write(bad / "orders" / "orders.1.tbl", lines)
    duplicated_order = int(lines[3].split(b"|")[0])
    lines = _lines(bad / "lineitem" / "lineitem.2.tbl")
    at = next(i for i in range(1, len(lines)) if lines[i].split(b"|")[0] == lines[i - 1].split(b"|")[0])
    lines[at] = lines[at - 1]
    _write(bad / "lineitem" / "lineitem.2.tbl", lines)
    lines = _lines(bad / "customer" / "customer.3.tbl")
    fields = lines[2].split(b"|")
    fields[5] = b"12345.67"
    lines[2] = b"|".join(fields)
    _write(bad / "customer" / "customer.3.tbl", lines)
    resize_manifest(bad)

    # A batch small enough to read before its loads (SWITCHYARD_CHECK_FIELDS_MB) has its repeated
    # keys named by the plan, every line, before any load (the run is refused whole).
    from switchyard import steps
    _, _, problems, *_ = steps.check_batch(load_spec(str(spec_path)), tables, "bad-validation", streams=3)
    assert any(f"orders.1.tbl: line 5: o_orderkey '{duplicated_order}', as on line 4: the table's unique columns "
               f"(o_orderkey) hold each value once" in p for p in problems), problems
    assert any("lineitem.2.tbl: line " in p and "the table's unique columns (l_orderkey, l_linenumber)" in p
               for p in problems), problems
    # A bigger batch (as here with 0 MB) is left to its loads: the validate step finds them.
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": "bad-validation", "tables": tables},
                  tmp_path / "runs-bad", extra_env={**env, "SWITCHYARD_CHECK_FIELDS_MB": "0"})
    assert run.returncode != 0
    groups = {g["group"]: g for g in run.stats["groups"]}
    assert sorted(run.stats["failed_groups"]) == ["customer_3", "lineitem_2", "orders_1"]
    for gid, needles in {
        "orders_1": ["expect_column_values_to_be_unique on o_orderkey: expected no duplicates, observed",
                     f"'o_orderkey': {duplicated_order}, 'rows': 2", "table orders, stream 1",
                     "orders/orders.1.tbl"],
        "lineitem_2": ["expect_compound_columns_to_be_unique on l_orderkey, l_linenumber: expected no duplicates",
                       "table lineitem, stream 2", "lineitem/lineitem.2.tbl"],
        "customer_3": ["expect_column_values_to_be_between on c_acctbal (declared in",
                       "tables.customer.expectations[0]): expected {'min_value': -999.99, 'max_value': 9999.99}",
                       "'examples': [12345.67]", "table customer, stream 3", "customer/customer.3.tbl"],
    }.items():
        assert groups[gid]["outcome"] == "failed at validate", groups[gid]
        errors = " ".join(groups[gid]["errors"].values())
        for needle in needles:
            assert needle in errors, f"{gid}: {needle!r} not in {errors!r}"
    # A batch goes in whole: its failed groups held every other group back, and every table
    # kept every one of the good run's partitions.
    assert all(groups[g]["outcome"] == "held back"
               for g in groups if g not in run.stats["failed_groups"] and groups[g]["table"] in tables)
    assert fingerprint(pg_uri, schema, tables) == before
    for table in tables:
        assert partition_oids(pg_uri, schema, table) == oids_before[table], table
    # The validate step reports what each kind of check cost.
    ok = groups["orders_2"]
    assert set(ok["validation_cost"]) >= {"row_count", "key_range", "not_null", "unique"}


def test_a_target_holding_duplicates_fails_setup_clearly(shop, pg_uri, schema):
    """A table loaded before it had its unique index: the pre-flight names the missing index
    (on_spec_change: fail); with sync, setup builds it, and duplicates already in the table stop
    the run there, with what to do."""
    from dataclasses import replace
    from switchyard.targets.base import TargetError
    spec, adapter, tmp = shop
    write_shop(tmp / "b1", orders_rows(), lines_rows())
    plan = plan_batch(spec, read_manifest(tmp / "b1", spec))
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".orders (order_id bigint NOT NULL, customer text NOT NULL '
                     f'CONSTRAINT customer_length CHECK (octet_length(customer) <= 20 OR char_length(customer) <= 20), '
                     f'total numeric(10,2) NOT NULL) PARTITION BY RANGE (order_id)')
        conn.execute(f'CREATE TABLE "{schema}".orders_old PARTITION OF "{schema}".orders FOR VALUES FROM (1) TO (10)')
        conn.execute(f"INSERT INTO \"{schema}\".orders VALUES (3, 'c3', 1), (3, 'c3', 2)")
    with pytest.raises(TargetError) as err:
        adapter.setup(plan)
    assert err.value.permanent
    assert (f"{schema}.orders: the spec declares unique (order_id); the table has no unique index orders_unique"
            in str(err.value)), str(err.value)
    synced = replace(spec, tables=tuple(replace(t, on_spec_change="sync") for t in spec.tables))
    with pytest.raises(TargetError) as err:
        PostgresAdapter(synced, uri=pg_uri, schema=schema).setup(replace(plan, spec=synced, tables=tuple(
            replace(t, table=synced.table(t.table.name)) for t in plan.tables)))
    assert err.value.permanent
    assert "the target already holds duplicates of a unique key" in str(err.value)
    assert "(order_id)=(3) is duplicated" in str(err.value)


def test_an_unknown_declared_expectation_fails_the_run_before_any_load(pg_uri, data_root, tpch_batch, schema,
                                                                      tmp_path):
    from helpers import run_dag
    name, _ = tpch_batch
    original = Path(load_spec("tpch").source).read_text()
    spec_path = tmp_path / "tpch.yaml"
    spec_path.write_text(original.replace(
        "  region:\n    partitioned: false\n    key: r_regionkey\n    unique: true\n",
        "  region:\n    partitioned: false\n    key: r_regionkey\n    unique: true\n    expectations:\n"
        "      - {type: expect_column_values_to_be_purple, kwargs: {column: r_name}}\n"))
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": ["region", "nation"]}, tmp_path / "runs",
                  extra_env={"SWITCHYARD_SPEC": str(spec_path)})
    assert run.returncode != 0
    assert (f"{spec_path}: tables.region.expectations[0].type: 'expect_column_values_to_be_purple' is not a "
            f"Great Expectations expectation type") in run.output
    assert run.stats is not None and run.stats["totals"]["switched"] == 0
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f'"{schema}"."region"',)).fetchone()[0] is None


def test_the_row_count_comes_from_the_load_unless_the_staging_table_was_made_again(shop):
    """Through the adapter: the load's result names the storage its COPY filled, and
    validation takes its count while the staging table is that storage. A prepare run again
    after the load (a task cleared on its own) makes a new, empty staging table: counted."""
    spec, adapter, folder = shop
    s = stage(spec, adapter, folder, "orders", orders_rows(), lines_rows())
    adapter.prepare(s)
    result = adapter.load(s, folder / s.file)
    loaded = {"rows": result.rows, **result.details}
    assert loaded["staging_filenode"]
    outcome = validate_stream(adapter, spec, s, loaded=loaded)
    assert outcome.success, describe_failures(outcome, "orders")
    count = next(c for c in outcome.checks if c.expectation == "expect_table_row_count_to_equal")
    assert count.observed["rows"] == s.rows and "COPY" in count.observed["proven"]

    adapter.prepare(s)  # the staging table made again: empty, new storage
    again = validate_stream(adapter, spec, s, loaded=loaded)
    assert not again.success
    assert [(c.expectation, c.observed) for c in again.failures()] == [("expect_table_row_count_to_equal", 0)]


CODES_YAML = """
name: codes
format: {delimiter: ",", trailing_delimiter: false, quoting: csv, header_lines: 1}
files: "{table}/{table}.{stream}.csv"
tables:
  ward:
    key: null
    partitioned: false
    unique: [code]
    columns:
      - {name: code, type: char(3)}
      - {name: name, type: varchar(30)}
"""


def _validated_ward(tmp_path, pg_uri, schema, spec_yaml: str, records: str):
    """The ward file (`records` after its header) loaded and validated through the validate step
    against `spec_yaml`; the step's ValidationFailed."""
    from switchyard import steps
    path = tmp_path / "ward.yaml"
    path.write_text(spec_yaml)
    spec = load_spec(str(path))
    folder = tmp_path / "b1"
    data = folder / "ward" / "ward.1.csv"
    data.parent.mkdir(parents=True)
    data.write_text("code,name\n" + records)
    (folder / "manifest.json").write_text(json.dumps({"format": MANIFEST_FORMAT, "spec": "codes", "streams": 1, "files": [
        {"table": "ward", "stream": 1, "file": "ward/ward.1.csv", "bytes": data.stat().st_size, "rows": 5,
         "key_min": None, "key_max": None}]}))
    adapter = PostgresAdapter(spec, uri=pg_uri, schema=schema)
    plan = plan_batch(spec, read_manifest(folder, spec))
    adapter.setup(plan)
    s = plan.stream("ward", 1)
    adapter.prepare(s)
    adapter.load(s, data)
    run = {"batch_dir": str(folder), "staging_schema": adapter.staging_schema}
    with pytest.raises(steps.ValidationFailed) as failed:
        steps.validate(lambda: adapter, spec, run, s, loaded={"rows": 5})
    return failed.value


def test_a_duplicated_key_is_named_with_the_lines_that_hold_it(tmp_path, pg_uri, schema):
    """A uniqueness failure names the lines of the stream file that hold each duplicated key, as
    the column's type compares them: `ER` and `"ER "` are one key of a char(3) column (the
    server pads both), and a quoted record over two lines is named by the line it starts on."""
    failed = _validated_ward(tmp_path, pg_uri, schema, CODES_YAML,
                             'ER,Emergency\nICU,Intensive care\n"ER ","Emergency,\nold wing"\nMAT,Maternity\n'
                             'ICU,Intensive care again\n')
    [unique] = [c for c in failed.result["checks"] if not c["success"]]
    assert unique["observed"]["examples"] == [{"code": "ER ", "rows": 2, "lines": [2, 4]},
                                              {"code": "ICU", "rows": 2, "lines": [3, 7]}], unique
    assert "'lines': [2, 4]" in str(failed) and f"file {tmp_path / 'b1'}/ward/ward.1.csv" in str(failed)


def test_a_declared_expectation_that_fails_names_the_first_line_of_each_example(tmp_path, pg_uri, schema):
    """A declared expectation on one column gives example values; the failure names the line of
    the stream file each first stands on, as the column's type compares them, so a user fixes the
    file by its line and column as with every other refusal."""
    declared_yaml = CODES_YAML.replace("    unique: [code]\n", "    expectations:\n"
                                       "      - {type: expect_column_values_to_be_in_set, kwargs: {column: code, "
                                       "value_set: [ER, ICU, MAT]}}\n")
    failed = _validated_ward(tmp_path, pg_uri, schema, declared_yaml,
                             'ER,Emergency\nXRY,"X-ray,\nbasement"\nMAT,Maternity\nOPD,Outpatients\nXRY,Again\n')
    [declared] = [c for c in failed.result["checks"] if not c["success"]]
    examples = declared["observed"]["examples"]
    assert sorted(set(examples)) == ["OPD", "XRY"], declared
    assert declared["observed"]["lines"] == [{"XRY": 3, "OPD": 6}[e] for e in examples], declared
    assert "'lines': [" in str(failed)
