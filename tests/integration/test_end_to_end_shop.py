"""The shop example end to end: the real DAG (`airflow dags test`) on the embedded PostgreSQL.

The batch is messy CSV (quotes, delimiters and line breaks inside fields, backslashes,
unicode, empty strings next to NULLs, a gzip'd table, a CRLF table, date partition keys).
What is in the files must be what is in the tables: every row of every table is compared,
all columns, with an independent reading of the files (Python's csv and gzip modules); a
field is NULL only where the file has the NULL marker in a nullable column.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import psycopg
import pytest

from helpers import copy_batch, partitions, row_hash, run_dag, table_rows
from switchyard.core.shop import generate_shop
from switchyard.core.spec import Table, load_spec

SPEC = load_spec("shop")
DAG_ID = "switchyard_shop"
STREAMS = 3
SCALE = 0.002   # about 200 customers, 800 orders, 3,000 events


@pytest.fixture(scope="module")
def shop_batch(data_root) -> tuple[str, Path]:
    name = f"shop-sf{SCALE:g}-s{STREAMS}"
    generate_shop(data_root / name, SPEC, SCALE, STREAMS)
    return name, data_root / name


def file_rows(folder: Path, table: Table) -> list[tuple]:
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    files = [e["file"] for e in sorted(manifest["files"], key=lambda e: e["stream"]) if e["table"] == table.name]
    return list(table_rows(folder, table, files))


def loaded_rows(uri: str, schema: str, table: Table) -> list[tuple]:
    columns = ", ".join(f'"{c}"' for c in table.column_names)
    with psycopg.connect(uri) as conn:
        return [tuple(r) for r in conn.execute(f'SELECT {columns} FROM "{schema}"."{table.name}"').fetchall()]


def differences(table: Table, expected: list[tuple], loaded: list[tuple], limit: int = 5) -> str:
    """What differs, by the table's unique key, field by field: for the failure message."""
    idx = [table.column_names.index(c) for c in table.unique]
    by_key = lambda rows: {tuple(r[i] for i in idx): r for r in rows}  # noqa: E731
    want, got = by_key(expected), by_key(loaded)
    lines = [f"{table.name}: {len(expected)} rows in the files, {len(loaded)} loaded"]
    missing = [k for k in want if k not in got]
    extra = [k for k in got if k not in want]
    if missing:
        lines.append(f"  not loaded: {missing[:limit]}")
    if extra:
        lines.append(f"  loaded but not in the files: {extra[:limit]}")
    shown = 0
    for key in want:
        if key in got and row_hash(want[key]) != row_hash(got[key]):
            for name, a, b in zip(table.column_names, want[key], got[key]):
                if row_hash((a,)) != row_hash((b,)):
                    lines.append(f"  {key} {name}: file {a!r}, loaded {b!r}")
            shown += 1
            if shown == limit:
                break
    return "\n".join(lines)


def assert_loaded_exactly(uri: str, schema: str, folder: Path, table: Table) -> int:
    expected = file_rows(folder, table)
    loaded = loaded_rows(uri, schema, table)
    assert len(loaded) == len(expected), differences(table, expected, loaded)
    assert Counter(map(row_hash, loaded)) == Counter(map(row_hash, expected)), differences(table, expected, loaded)
    return len(expected)


def test_shop_batch_loads_exactly_what_is_in_its_files(pg_uri, data_root, shop_batch, schema, tmp_path):
    name, folder = shop_batch
    run = run_dag(pg_uri, data_root, schema, STREAMS, {"batch": name}, tmp_path / "runs",
                  spec="shop", dag_id=DAG_ID)
    assert run.returncode == 0, run.output[-6000:]
    stats = run.stats
    assert stats is not None and stats["failed_groups"] == []
    assert stats["totals"]["switched"] == len(SPEC.tables) * STREAMS
    assert all(g["validation"] == "passed" for g in stats["groups"]), stats["groups"]

    for table in SPEC.tables:
        rows = assert_loaded_exactly(pg_uri, schema, folder, table)
        assert stats["tables"][table.name]["rows"] == rows
        assert len(partitions(pg_uri, schema, table.name)) == STREAMS, table.name

    # A few of the values a byte-exact load must keep, looked up where they are.
    with psycopg.connect(pg_uri) as conn:
        def count(sql: str, *args) -> int:
            return conn.execute(sql.format(s=f'"{schema}"'), args).fetchone()[0]
        assert count("SELECT count(*) FROM {s}.events WHERE search_query = %s", "\\N") > 0
        assert count("SELECT count(*) FROM {s}.events WHERE search_query IS NULL") > 0
        assert count("SELECT count(*) FROM {s}.customers WHERE notes = %s", "C:\\new\\table\\N") > 0
        # strpos, not LIKE: in a LIKE pattern the backslash is the escape character
        assert count("SELECT count(*) FROM {s}.customers WHERE strpos(notes, %s) > 0", "\r\n\\.\r\n") > 0
        assert count("SELECT count(*) FROM {s}.customers WHERE full_name = ''") > 0
        assert count("SELECT count(*) FROM {s}.orders WHERE ship_country = 'NA'") > 0
        assert count("SELECT count(*) FROM {s}.orders WHERE coupon_code = ''") > 0
        assert count("SELECT count(*) FROM {s}.orders WHERE coupon_code IS NULL") > 0
        # the NULL marker's text quoted in a nullable column is that text: "NA", and "" for email
        assert count("SELECT count(*) FROM {s}.orders WHERE coupon_code = 'NA'") > 0
        assert count("SELECT count(*) FROM {s}.customers WHERE email = ''") > 0
        assert count("SELECT count(*) FROM {s}.customers WHERE email IS NULL") > 0
        assert count("SELECT count(*) FROM {s}.orders WHERE gift_message LIKE %s", "%\r\n%") > 0
        # the date partitions: each stream's days, and no day in two partitions
        days = conn.execute(f'SELECT tableoid::regclass::text, min(order_date), max(order_date) '
                            f'FROM "{schema}".orders GROUP BY 1 ORDER BY 2').fetchall()
        assert len(days) == STREAMS and all(a[2] < b[1] for a, b in zip(days, days[1:]))


def test_a_row_that_breaks_a_declared_expectation_stops_its_group_only(pg_uri, data_root, shop_batch, schema,
                                                                         tmp_path):
    name, folder = shop_batch
    bad = copy_batch(folder, data_root / "shop-bad-country")
    path = bad / SPEC.file_for("customers", 2)
    text = path.read_bytes()
    # One ordinary row of stream 2 gets a country outside the spec's value set.
    line = re.search(rb"^\d+,[a-z0-9.]+@example\.com,[A-Za-z]+ [A-Za-z]+,(DE),", text, re.M)
    assert line, "an ordinary customers row to change"
    changed = text[:line.start(1)] + b"XX" + text[line.end(1):]
    path.write_bytes(changed)
    manifest = json.loads((bad / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["table"] == "customers" and entry["stream"] == 2:
            entry["bytes"] = len(changed)
    (bad / "manifest.json").write_text(json.dumps(manifest, indent=2))

    run = run_dag(pg_uri, data_root, schema, STREAMS, {"batch": bad.name, "tables": ["customers"]},
                  tmp_path / "runs", spec="shop", dag_id=DAG_ID)
    groups = {g["group"]: g for g in run.stats["groups"]}
    assert groups["customers_2"]["outcome"] == "failed at validate", groups["customers_2"]
    assert groups["customers_2"]["validation"] == "failed"
    # A table's switches go in together: the other two groups validated and were held back, so
    # the table (new in this schema) stays empty rather than holding two thirds of the batch.
    assert groups["customers_1"]["outcome"] == groups["customers_3"]["outcome"] == "held back"
    assert run.stats["tables_kept"] == ["customers"]
    assert "expect_column_values_to_be_in_set" in run.output
    assert "table customers, stream 2" in run.output
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{schema}".customers WHERE country = %s', ("XX",)).fetchone()[0] == 0
    assert len(partitions(pg_uri, schema, "customers")) == 0
