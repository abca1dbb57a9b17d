"""The run lease and the idempotent switch, through the adapter API, on the embedded PostgreSQL.

The lease's logic (claim, renew before each step, LeaseHeld, release) is shared by both
adapters in targets/base.py; these tests run it on a real server. The SQL Server side runs
the same logic in tests/test_mssql_contract.py when a server is given.
"""
from __future__ import annotations

import time
from dataclasses import replace

import psycopg
import pytest

from switchyard.core.batch import read_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec
from switchyard.targets import LeaseHeld, TargetError
from switchyard.targets.postgres import PostgresAdapter
from helpers import fingerprint, partition_oids, publish

SPEC = load_spec("tpch")
# The batch's tables go in together at its publish (the default), or each with its last switch.
BY_PUBLISH = {"batch": SPEC, "table": replace(SPEC, publish="table")}


@pytest.fixture
def plan(tpch_batch):
    name, folder = tpch_batch
    return plan_batch(SPEC, read_manifest(folder, SPEC), ["orders", "nation"]), folder


@pytest.fixture
def run(pg_uri, schema):
    """An adapter bound to a run, as the operators make them; the schema's lease row goes afterwards."""
    def make(holder: str | None, ttl: int = 60, spec=SPEC) -> PostgresAdapter:
        return PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_holder=holder,
                               lease_batch=f"batch-of-{holder}", lease_ttl_seconds=ttl)
    yield make
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('switchyard.run_lease')").fetchone()[0]:
            conn.execute("DELETE FROM switchyard.run_lease WHERE target_schema = %s", (schema,))


def test_a_second_run_waits_and_a_lapsed_lease_is_taken_over(run, plan, schema):
    plan, folder = plan
    stream = plan.stream("orders", 1)
    a, b = run("dag/run-a"), run("dag/run-b")
    a.setup(plan)
    holder, batch, acquired, expires = a.lease()
    assert (holder, batch) == ("dag/run-a", "batch-of-dag/run-a")

    # Another run is refused at setup and at every step, as retryable, and told who holds it.
    with pytest.raises(LeaseHeld) as refused:
        b.setup(plan)
    assert refused.value.permanent is False
    message = str(refused.value)
    assert f"target schema {schema} is being loaded by run dag/run-a (batch batch-of-dag/run-a, since" in message
    assert message.endswith(
        f"if that run is dead: DELETE FROM \"switchyard\".\"run_lease\" WHERE target_schema = '{schema}'")
    with pytest.raises(LeaseHeld):
        b.prepare(stream)
    assert b.lease()[0] == "dag/run-a"

    # The holder's steps renew it: same acquisition, later expiry.
    time.sleep(0.05)
    a.prepare(stream)
    renewed = a.lease()
    assert renewed[0] == "dag/run-a" and renewed[2] == acquired and renewed[3] > expires

    # Released by its holder only; then the next run takes it.
    b.release_lease()
    assert a.lease()[0] == "dag/run-a"
    a.release_lease()
    assert a.lease() is None

    # A lease nobody renews lapses: a run that died does not block the next one.
    dead = run("dag/run-dead", ttl=1)
    dead.setup(plan)
    assert dead.lease()[0] == "dag/run-dead"
    with pytest.raises(LeaseHeld):
        b.hold_lease()
    time.sleep(1.5)
    b.prepare(stream)
    holder, batch, acquired_b, _ = b.lease()
    assert (holder, batch) == ("dag/run-b", "batch-of-dag/run-b")
    # ... and the dead run, should it wake up, has lost it.
    with pytest.raises(LeaseHeld, match="being loaded by run dag/run-b"):
        dead.load(stream, folder / stream.file)


@pytest.mark.parametrize("mode", ["batch", "table"])
def test_a_retried_switch_finds_it_done_and_changes_nothing(run, plan, schema, pg_uri, mode):
    plan, folder = plan
    adapter = run("dag/run-a", spec=BY_PUBLISH[mode])
    adapter.setup(plan)
    orders = [plan.stream("orders", k) for k in (1, 2, 3)]
    for s in (*orders, plan.stream("nation", 1)):
        adapter.prepare(s)
        adapter.load(s, folder / s.file)
        first = adapter.switch(s)
        assert not first.get("already_switched")
        before = fingerprint(pg_uri, schema, [s.table])
        oids = partition_oids(pg_uri, schema, s.table) if s.partitioned else None

        # The switch committed; its task died before reporting. Airflow retries the switch.
        again = adapter.switch(s)
        assert again["already_switched"] is True, again
        assert again["partition"] == first["partition"]
        assert fingerprint(pg_uri, schema, [s.table]) == before
        # `publish: table`: the table's batch goes in whole with its last switch (orders_3 here);
        # `publish: batch`: every table at the batch's publish. Until then the table keeps what
        # it had (nothing).
        whole = mode == "table" and (s.table == "nation" or s.stream == 3)
        assert first.get("in_target", True) is whole and again.get("in_target", True) is whole
        table_streams = orders if s.table == "orders" else [s]
        assert before[s.table][0] == (sum(t.rows for t in table_streams) if whole else 0)
        if s.partitioned:
            assert partition_oids(pg_uri, schema, s.table) == oids
    published = publish(adapter, plan)
    if mode == "batch":
        assert published["tables"] == ["nation", "orders"] and not published["already_published"]
        after = fingerprint(pg_uri, schema, ["orders", "nation"])
        # The publish committed; its task died before reporting. Airflow retries it.
        assert publish(adapter, plan)["already_published"] is True
        assert fingerprint(pg_uri, schema, ["orders", "nation"]) == after
    assert fingerprint(pg_uri, schema, ["orders"])["orders"][0] == sum(t.rows for t in orders)
    assert fingerprint(pg_uri, schema, ["nation"])["nation"][0] == plan.stream("nation", 1).rows


def test_a_switch_with_nothing_to_switch_fails_clearly(run, plan, schema):
    plan, folder = plan
    adapter = run("dag/run-a")
    adapter.setup(plan)
    s = plan.stream("orders", 3)  # never prepared: no staging table, no partition
    with pytest.raises(TargetError) as caught:
        adapter.switch(s)
    assert caught.value.permanent is True
    assert str(caught.value) == (
        f"switch of orders_3: nothing to switch: the staging table {schema}_staging.orders_3 does not "
        f"exist and no partition of {schema}.orders for keys {s.lower}..{s.upper} is in place; rerun the "
        f"group from prepare")
    assert adapter.partitions("orders") == []


@pytest.mark.parametrize("mode", ["batch", "table"])
def test_a_group_run_again_from_prepare_after_its_switch(run, plan, schema, pg_uri, mode):
    """What a retried one-task group (`tasks: single`) does, and a cleared group: its steps
    again from prepare. Once its switch had attached the staging table to the table's next
    version (the table not in yet), the rerun replaces it; once the batch was published (or,
    `publish: table`, the table's last switch had moved the table in), the rerun's switch
    refuses, permanently, and the table keeps the batch."""
    plan, folder = plan
    adapter = run("dag/run-a", spec=BY_PUBLISH[mode])
    adapter.setup(plan)
    orders = [plan.stream("orders", k) for k in (1, 2, 3)]

    def group(s):
        adapter.prepare(s)
        adapter.load(s, folder / s.file)
        return adapter.switch(s)

    assert group(orders[0]).get("in_target") is False
    again = group(orders[0])  # attached, then the task failed before reporting: retried whole
    assert again.get("in_target") is False and not again.get("already_switched")
    assert fingerprint(pg_uri, schema, ["orders"])["orders"][0] == 0  # readers still see nothing
    group(orders[1])
    assert group(orders[2]).get("in_target") is (mode == "table")
    if mode == "batch":
        adapter.publish_batch(list(plan.table("orders").streams))
    whole = fingerprint(pg_uri, schema, ["orders"])
    assert whole["orders"][0] == sum(s.rows for s in orders)
    oids = partition_oids(pg_uri, schema, "orders")

    # The table's batch is in: a group of it cannot switch alone any more.
    with pytest.raises(TargetError, match="has no switch of this run pending") as refused:
        group(orders[2])
    assert refused.value.permanent is True
    assert fingerprint(pg_uri, schema, ["orders"]) == whole
    assert partition_oids(pg_uri, schema, "orders") == oids
