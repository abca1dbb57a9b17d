"""The PostgreSQL load's SQL, rendered from include/sql/postgres/ without a server, against a
reviewed golden file: an intended change is regenerated with
`SWITCHYARD_UPDATE_GOLDEN=1 pytest tests/unit/targets/postgres/test_postgres_sql.py` and reviewed in the diff."""
from __future__ import annotations

import os
from pathlib import Path

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
