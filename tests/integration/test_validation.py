"""Validation reuses what the staging table's constraints prove, and only that.

On a real PostgreSQL table: with NOT NULL and a validated range CHECK equal to the stream's
key range, the three key expectations are proven by the planner and GX checks the row
count; whenever the constraints do not prove the range (NOT VALID, wider than the stream's
range), every expectation runs through Great Expectations and a bad key is still caught.
"""
from __future__ import annotations

import psycopg
import pytest

KEYS = list(range(101, 1101))  # 1,000 rows, keys 101..1100


@pytest.fixture
def staging(pg_uri, schema):
    """A staging-like table: key NOT NULL, range CHECK [101, 1100] like prepare.sql makes."""
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".t (k bigint NOT NULL, v text NOT NULL, '
                     f'CONSTRAINT t_range CHECK (k >= 101 AND k < 1101))')
        with conn.cursor().copy(f'COPY "{schema}".t (k, v) FROM STDIN') as cp:
            for k in KEYS:
                cp.write_row((k, "x"))
    return pg_uri.replace("postgresql://", "postgresql+psycopg://", 1), schema


def _validate(url, schema, **kw):
    from switchyard.observability.validation import validate_table
    args = dict(expected_rows=len(KEYS), key_min=101, key_max=1100)
    args.update(kw)
    return validate_table(url, schema, "t", "k", **args)


def by_name(outcome):
    return {c.expectation: c for c in outcome.checks}


def test_constraints_prove_the_key_expectations_and_gx_counts_rows(staging):
    url, schema = staging
    out = _validate(url, schema)
    assert out.success
    checks = by_name(out)
    assert checks["expect_table_row_count_to_equal"].observed == len(KEYS)
    for name in ("expect_column_values_to_not_be_null", "expect_column_min_to_be_between",
                 "expect_column_max_to_be_between"):
        assert "planner refutes" in checks[name].observed["proven"], checks[name]
    # The row count still goes through GX: a wrong count fails.
    bad = _validate(url, schema, expected_rows=len(KEYS) + 1)
    assert not bad.success
    assert [c.expectation for c in bad.failures()] == ["expect_table_row_count_to_equal"]
    # The count expected is the run's plan's: the message says where it came from, and what a
    # fix that changes a file's rows needs (a group cleared alone keeps that plan).
    from switchyard.observability.validation import describe_failures
    said = describe_failures(bad, "orders_1")
    assert (f"expect_table_row_count_to_equal: expected {len(KEYS) + 1}, observed {len(KEYS)}\n  (the rows expected "
            f"are the manifest's as the run's setup.plan read it; after a fix that changes a file's rows, write its "
            f"manifest again and clear the whole run, from setup.plan)") in said, said


def test_full_mode_runs_every_expectation_through_gx(staging):
    url, schema = staging
    checks = by_name(_validate(url, schema, trust_constraints=False))
    assert checks["expect_column_min_to_be_between"].observed == 101
    assert checks["expect_column_max_to_be_between"].observed == 1100
    assert checks["expect_column_values_to_not_be_null"].observed == {"null_count": 0}


def test_a_stream_range_narrower_than_the_constraint_is_checked_by_gx(staging):
    url, schema = staging
    out = _validate(url, schema, key_max=1099)
    assert not out.success
    failed = out.failures()
    assert [c.expectation for c in failed] == ["expect_column_max_to_be_between"]
    assert failed[0].observed == 1100


def test_a_not_valid_constraint_proves_nothing(staging, pg_uri):
    url, schema = staging
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        # Replace the range by a NOT VALID one and add a row it would reject: only a scan finds it.
        conn.execute(f'ALTER TABLE "{schema}".t DROP CONSTRAINT t_range')
        conn.execute(f'INSERT INTO "{schema}".t VALUES (5000, %s)', ("x",))
        conn.execute(f'ALTER TABLE "{schema}".t ADD CONSTRAINT t_range CHECK (k >= 101 AND k < 1101) NOT VALID')
    out = _validate(url, schema, expected_rows=len(KEYS) + 1)
    assert not out.success
    failed = out.failures()
    assert [c.expectation for c in failed] == ["expect_column_max_to_be_between"]
    assert failed[0].observed == 5000


def _filenode(uri: str, schema: str) -> int:
    with psycopg.connect(uri) as conn:
        return conn.execute("SELECT pg_relation_filenode(to_regclass(%s))", (f'"{schema}".t',)).fetchone()[0]


def test_the_load_count_is_the_row_count_while_the_table_is_the_storage_it_filled(staging, pg_uri):
    url, schema = staging
    loaded = {"rows": len(KEYS), "staging_filenode": _filenode(pg_uri, schema)}
    out = _validate(url, schema, loaded=loaded, trust_load=True)
    assert out.success
    count = by_name(out)["expect_table_row_count_to_equal"]
    assert count.observed["rows"] == len(KEYS) and "file node" in count.observed["proven"], count
    # Everything proven: Great Expectations was not asked for anything.
    assert out.import_seconds == 0.0
    # The load's count is what the check compares: one the manifest disagrees with fails.
    bad = _validate(url, schema, expected_rows=len(KEYS) + 1, loaded=loaded, trust_load=True)
    assert [(c.expectation, c.observed) for c in bad.failures()] == [("expect_table_row_count_to_equal", len(KEYS))]
    # With SWITCHYARD_VALIDATION=constraints (trust_load off) GX counts the rows.
    counted = by_name(_validate(url, schema, loaded=loaded, trust_load=False))["expect_table_row_count_to_equal"]
    assert counted.observed == len(KEYS)


def test_a_table_emptied_after_its_load_is_counted_not_taken_from_the_load(staging, pg_uri):
    url, schema = staging
    loaded = {"rows": len(KEYS), "staging_filenode": _filenode(pg_uri, schema)}
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        # TRUNCATE gives the table new storage: it is no longer what the load filled.
        conn.execute(f'TRUNCATE "{schema}".t')
    out = _validate(url, schema, loaded=loaded, trust_load=True)
    assert not out.success
    assert [(c.expectation, c.observed) for c in out.failures()] == [("expect_table_row_count_to_equal", 0)]
