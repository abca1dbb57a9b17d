"""The PostgreSQL load's SQL, rendered from targets/postgres/templates/ without a server, against a
reviewed golden file: an intended change is regenerated with
`SWITCHYARD_UPDATE_GOLDEN=1 pytest tests/unit/targets/postgres/test_postgres_sql.py` and reviewed in the diff."""
from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

import pytest

from switchyard.core.planner import plan_tpch
from switchyard.core.spec import load_spec
from switchyard.targets import adapter_class

SPEC = load_spec("tpch")
GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "postgres"
UPDATE = os.environ.get("SWITCHYARD_UPDATE_GOLDEN") == "1"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if not path.exists():
        pytest.fail(f"{path} is missing; create it with SWITCHYARD_UPDATE_GOLDEN=1 and review it")
    assert text == path.read_text(), f"{path} differs; if intended, regenerate with SWITCHYARD_UPDATE_GOLDEN=1"


def adapter(**options):
    return adapter_class("postgres")(SPEC, uri="postgresql://plan-only", **options)


def test_script_matches_golden():
    plan = plan_tpch(SPEC, 0.01, 3, tables=["region", "orders", "lineitem"])
    check_golden("region_orders_lineitem_s3.sql", adapter().script(plan))


def test_names_are_quoted_and_bounds_are_integer_literals():
    plan = plan_tpch(SPEC, 0.01, 3, tables=["orders"])
    text = adapter(schema="sales").script(plan)
    assert 'CREATE TABLE IF NOT EXISTS "sales"."orders"' in text
    stream = plan.tables[0].streams[1]
    assert f"FOR VALUES FROM ({stream.lower}) TO ({stream.upper + 1})" in text


def test_the_steps_settings_ride_in_the_urls_options_after_the_connections_own():
    from sqlalchemy.engine import make_url
    from switchyard.targets.postgres.session import step_settings, with_server_options
    serial = step_settings("serial")
    assert serial == {"max_parallel_maintenance_workers": "0", "max_parallel_workers_per_gather": "0"}
    assert step_settings("server") == {}
    plain = "postgresql+psycopg://u:p%40ss@db.example:5432/wh?sslmode=require"
    assert with_server_options(plain, {}) == plain
    url = make_url(with_server_options(plain, serial))
    assert url.query["options"] == "-c max_parallel_maintenance_workers=0 -c max_parallel_workers_per_gather=0"
    assert (url.password, url.host, url.database, url.query["sslmode"]) == ("p@ss", "db.example", "wh", "require")
    own = make_url(with_server_options(plain + "&options=-c%20search_path%3Dwh", serial))
    assert own.query["options"] == ("-c search_path=wh -c max_parallel_maintenance_workers=0 "
                                    "-c max_parallel_workers_per_gather=0")
    with pytest.raises(ValueError, match="serial or server"):
        step_settings("parallel")


# --- date and timestamp keys ------------------------------------------------------------------
KEYS_SPEC = """\
name: clicks
files: "{table}/{table}.{stream}.txt"
tables:
  daily:
    key: day
    columns:
      - {name: day, type: date}
      - {name: n, type: integer}
  hourly:
    key: at
    columns:
      - {name: at, type: "timestamp(3)"}
      - {name: n, type: integer}
"""


def keys_plan(tmp_path):
    """Two day-split streams of `daily` (date) and three hour-split streams of `hourly`
    (timestamp(3)), each ending at the last value its type holds before the next one starts."""
    import json
    from switchyard.core.batch import MANIFEST_FORMAT, read_manifest
    from switchyard.core.planner import plan_batch
    (tmp_path / "clicks.yaml").write_text(KEYS_SPEC)
    spec = load_spec(str(tmp_path / "clicks.yaml"))
    entries = [{"table": "daily", "stream": k, "key_min": f"2026-03-0{k}", "key_max": f"2026-03-0{k}"}
               for k in (1, 2)]
    entries += [{"table": "hourly", "stream": k, "key_min": f"2026-03-01T{k - 1:02d}:00:00",
                 "key_max": f"2026-03-01T{k - 1:02d}:59:59.999"} for k in (1, 2, 3)]
    batch = tmp_path / "b1"
    batch.mkdir()
    (batch / "manifest.json").write_text(json.dumps({
        "format": MANIFEST_FORMAT, "spec": "clicks", "streams": 3,
        "files": [{"file": f"{e['table']}/{e['table']}.{e['stream']}.txt", "bytes": 1000, "rows": 10, **e}
                  for e in entries]}))
    return spec, plan_batch(spec, read_manifest(batch, spec), ["daily", "hourly"])


def test_date_and_timestamp_keys_script_matches_golden(tmp_path):
    spec, plan = keys_plan(tmp_path)
    text = adapter_class("postgres")(spec, uri="postgresql://plan-only", schema="web").script(plan)
    # A day's partition runs to the next day; a timestamp(3) one to the next millisecond.
    assert "FOR VALUES FROM (DATE '2026-03-02') TO (DATE '2026-03-03')" in text
    assert "FOR VALUES FROM (TIMESTAMP '2026-03-01 01:00:00.000000') TO (TIMESTAMP '2026-03-01 02:00:00.000000')" in text
    check_golden("clicks_date_timestamp_keys_plan.sql", text)


# --- a table's commit, on scripted catalog answers ------------------------------------------------
class RecordingCursor:
    """Scripted: records every statement with its parameters; each query answers the one row
    queued for it (here only the archive's free-name checks: every name is free)."""

    def __init__(self):
        self.statements: list[str] = []
        # The lock's attempts run in a savepoint of the connection's (PostgresCommit.lock_tables).
        self.connection = SimpleNamespace(transaction=nullcontext)

    def execute(self, sql, params=None):
        self.statements.append(sql if params is None else f"{sql}\n-- parameters: {params!r}")

    def executemany(self, sql, rows):
        self.statements += [f"{sql}\n-- parameters: {r!r}" for r in rows]

    def fetchone(self):
        return (True,)

    def fetchall(self):
        """The retired partition's indexes (the archive's rename check reads them)."""
        return [("orders_b1_unique",)]


def test_an_append_tables_commit_with_keep_3_and_archive_matches_golden():
    """An append table keeping 3 batches, archiving what falls out: this batch's three streams
    move in from the next version, the oldest batch's partition goes to the archive schema, and
    the control tables record it, in the transaction of the table's last switch."""
    from dataclasses import replace as replaced
    from switchyard.core.preflight import Partition
    spec = replaced(SPEC, tables=tuple(replaced(t, mode="append", keep=3, retire="archive") if t.name == "orders"
                                       else t for t in SPEC.tables))
    a = adapter_class("postgres")(spec, uri="postgresql://plan-only", schema="sales")
    plan = plan_tpch(spec, 0.01, 3, tables=["orders"])
    earlier = [Partition(name=f"orders_b{k}", lower=(k - 4) * 1000, upper=(k - 3) * 1000, batch=f"b{k}", schema="sales")
               for k in (1, 2, 3)]
    a._target_partitions = lambda cur, table: earlier
    planned = {s.staging_table: {"staging_table": s.staging_table, "partition_name": s.partition_table,
                                 "stream": s.stream, "batch": "b4", "key_min": str(s.lower), "key_max": str(s.upper),
                                 "rows_planned": s.rows, "run": "dag/run-4"} for s in plan.table("orders").streams}
    cur = RecordingCursor()
    result = a.commit_table(cur, "orders", planned)
    assert result["retired"] == ["sales_archive.orders_b1"] and result["partitions_in"] == 3
    check_golden("orders_append_keep3_archive_commit.sql", ";\n\n".join(cur.statements) + ";\n")
