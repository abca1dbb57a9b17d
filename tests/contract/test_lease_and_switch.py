"""The run lease and the idempotent switch, through the adapter API, on every engine.

The lease's logic (claim, renew before each step, LeaseHeld, release) and the switch's retry
rule (a switch that finds its staging table gone and its partition in place reports it) are
the base's (targets/base.py); each engine supplies the SQL. These cases run them on a real
server of each engine (conftest.py).
"""
from __future__ import annotations

import time
from dataclasses import replace

import pytest

from switchyard.core.batch import read_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec
from switchyard.targets import LeaseHeld, TargetError
from helpers import publish

SPEC = load_spec("tpch")
# The batch's tables go in together at its publish (the default), or each with its last switch.
BY_PUBLISH = {"batch": SPEC, "table": replace(SPEC, publish="table")}


@pytest.fixture
def plan(tpch_batch, engine):
    name, folder = tpch_batch
    folder = engine.folder(folder)
    return plan_batch(SPEC, read_manifest(folder, SPEC), ["orders", "nation"]), folder


def test_a_second_run_waits_and_a_lapsed_lease_is_taken_over(engine, plan):
    plan, folder = plan
    stream = plan.stream("orders", 1)
    a, b = engine.make(SPEC, "dag/run-a"), engine.make(SPEC, "dag/run-b")
    a.setup(plan)
    holder, batch, acquired, expires = a.lease()
    assert (holder, batch) == ("dag/run-a", "batch-of-dag/run-a")

    # Another run is refused at setup and at every step, as retryable, and told who holds it.
    with pytest.raises(LeaseHeld) as refused:
        b.setup(plan)
    assert refused.value.permanent is False
    message = str(refused.value)
    assert (f"target schema {engine.schema} is being loaded by run dag/run-a (batch batch-of-dag/run-a, since"
            in message)
    assert message.endswith(f"if that run is dead: {engine.lease_release_by_hand}")
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
    dead = engine.make(SPEC, "dag/run-dead", ttl=1)
    dead.setup(plan)
    assert dead.lease()[0] == "dag/run-dead"
    with pytest.raises(LeaseHeld):
        b.hold_lease()
    time.sleep(2)
    b.prepare(stream)
    holder, batch, acquired_b, _ = b.lease()
    assert (holder, batch) == ("dag/run-b", "batch-of-dag/run-b")
    # ... and the dead run, should it wake up, has lost it.
    with pytest.raises(LeaseHeld, match="being loaded by run dag/run-b"):
        dead.load(stream, folder / stream.file)


def test_an_ended_runs_lease_goes_only_if_that_run_did_not_renew_it_since(engine, plan):
    """What setup.plan does with a lease whose run Airflow reports ended (airflow/operators.py):
    the row found is deleted only if it is still that row, never a renewed one."""
    plan, _ = plan
    stream = plan.stream("orders", 1)
    ended, b = engine.make(SPEC, "dag/run-ended"), engine.make(SPEC, "dag/run-b")
    ended.setup(plan)
    with pytest.raises(LeaseHeld) as first:
        b.setup(plan)
    assert (first.value.holder, first.value.expires_at) == ("dag/run-ended", ended.lease()[3])

    time.sleep(0.05)
    ended.prepare(stream)  # a step of it still running renews the lease: it stays
    assert b.end_lease_of(first.value) is False
    assert ended.lease()[0] == "dag/run-ended"

    with pytest.raises(LeaseHeld) as again:
        b.hold_lease()
    assert b.end_lease_of(again.value) is True
    assert b.lease() is None
    b.setup(plan)
    assert b.lease()[0] == "dag/run-b"
    with pytest.raises(LeaseHeld, match="being loaded by run dag/run-b"):
        ended.prepare(stream)


@pytest.mark.parametrize("mode", ["batch", "table"])
def test_a_retried_switch_finds_it_done_and_changes_nothing(engine, plan, mode):
    plan, folder = plan
    adapter = engine.make(BY_PUBLISH[mode], "dag/run-a")
    adapter.setup(plan)
    orders = [plan.stream("orders", k) for k in (1, 2, 3)]
    for s in (*orders, plan.stream("nation", 1)):
        adapter.prepare(s)
        adapter.load(s, folder / s.file)
        first = adapter.switch(s)
        assert not first.get("already_switched")
        before = engine.fingerprint(adapter, [s.table])
        ids = engine.partition_ids(adapter, s.table) if s.partitioned else None

        # The switch committed; its task died before reporting. Airflow retries the switch.
        again = adapter.switch(s)
        assert again["already_switched"] is True, again
        assert again["partition"] == first["partition"]
        assert engine.fingerprint(adapter, [s.table]) == before
        # `publish: table`: the table's batch goes in whole with its last switch (orders_3 here);
        # `publish: batch`: every table at the batch's publish. Until then the table keeps what
        # it had (nothing).
        whole = mode == "table" and (s.table == "nation" or s.stream == 3)
        assert first.get("in_target", True) is whole and again.get("in_target", True) is whole
        table_streams = orders if s.table == "orders" else [s]
        assert before[s.table][0] == (sum(t.rows for t in table_streams) if whole else 0)
        if s.partitioned:
            assert engine.partition_ids(adapter, s.table) == ids
    published = publish(adapter, plan)
    if mode == "batch":
        assert published["tables"] == ["nation", "orders"] and not published["already_published"]
        after = engine.fingerprint(adapter, ["orders", "nation"])
        # The publish committed; its task died before reporting. Airflow retries it.
        assert publish(adapter, plan)["already_published"] is True
        assert engine.fingerprint(adapter, ["orders", "nation"]) == after
    assert engine.fingerprint(adapter, ["orders"])["orders"][0] == sum(t.rows for t in orders)
    assert engine.fingerprint(adapter, ["nation"])["nation"][0] == plan.stream("nation", 1).rows


def test_a_switch_with_nothing_to_switch_fails_clearly(engine, plan):
    plan, folder = plan
    adapter = engine.make(SPEC, "dag/run-a")
    adapter.setup(plan)
    s = plan.stream("orders", 3)  # never prepared: no staging table, no partition
    with pytest.raises(TargetError) as caught:
        adapter.switch(s)
    assert caught.value.permanent is True
    assert str(caught.value) == (
        f"switch of orders_3: nothing to switch: the staging table {engine.schema}_staging.orders_3 does not "
        f"exist and no partition of {engine.schema}.orders for keys {s.lower}..{s.upper} is in place; rerun the "
        f"group from prepare")
    assert engine.fingerprint(adapter, ["orders"])["orders"][0] == 0


@pytest.mark.parametrize("mode", ["batch", "table"])
def test_a_group_run_again_from_prepare_after_its_switch(engine, plan, mode):
    """What a retried one-task group (`tasks: single`) does, and a cleared group: its steps
    again from prepare. Once its switch had staged it for the table's next version (the table
    not in yet), the rerun replaces it; once the batch was published (or, `publish: table`, the
    table's last switch had moved the table in), the rerun's switch refuses, permanently, and
    the table keeps the batch."""
    plan, folder = plan
    adapter = engine.make(BY_PUBLISH[mode], "dag/run-a")
    adapter.setup(plan)
    made = adapter.server_time()        # the run's plan made, by the server's clock
    assert adapter.published_at("orders") is None
    orders = [plan.stream("orders", k) for k in (1, 2, 3)]

    def group(s):
        adapter.prepare(s)
        adapter.load(s, folder / s.file)
        return adapter.switch(s)

    assert group(orders[0]).get("in_target") is False
    again = group(orders[0])  # staged, then the task failed before reporting: retried whole
    assert again.get("in_target") is False and not again.get("already_switched")
    assert engine.fingerprint(adapter, ["orders"])["orders"][0] == 0  # readers still see nothing
    group(orders[1])
    assert group(orders[2]).get("in_target") is (mode == "table")
    if mode == "batch":
        adapter.publish_batch(list(plan.table("orders").streams))
    whole = engine.fingerprint(adapter, ["orders"])
    assert whole["orders"][0] == sum(s.rows for s in orders)
    ids = engine.partition_ids(adapter, "orders")
    # When this run put the table in, on the clock its plan was made by: after the plan, before
    # a plan made now (steps.refuse_published tells a cleared group from a run made again so);
    # another run has put nothing in.
    published = adapter.published_at("orders")
    assert published is not None and made <= published <= adapter.server_time(), (made, published)
    assert engine.make(BY_PUBLISH[mode], "dag/run-b").published_at("orders") is None

    # The table's batch is in: a group of it cannot switch alone any more.
    with pytest.raises(TargetError, match="has no switch of this run pending") as refused:
        group(orders[2])
    assert refused.value.permanent is True
    assert engine.fingerprint(adapter, ["orders"]) == whole
    assert engine.partition_ids(adapter, "orders") == ids


def test_a_publish_passes_over_a_table_whose_streams_are_all_empty(engine, tpch_batch):
    """An append-mode table that brings no rows in this batch (a day without any) is in the
    run's plan and loads nothing: the batch's publish moves the other tables in and leaves that
    one as it was."""
    name, folder = tpch_batch
    folder = engine.folder(folder)
    spec = replace(SPEC, tables=tuple(replace(t, mode="append") if t.name == "customer" else t
                                      for t in SPEC.tables))
    loaded = plan_batch(spec, read_manifest(folder, spec), ["orders", "customer"])
    none = tuple(replace(s, key_min=None, key_max=None, lower=None, upper=None, rows=0)
                 for s in loaded.table("customer").streams)
    plan = replace(loaded, tables=tuple(replace(t, streams=none) if t.table.name == "customer" else t
                                        for t in loaded.tables))
    adapter = engine.make(spec, "dag/run-a")
    adapter.setup(plan)
    for s in plan.table("orders").streams:
        adapter.prepare(s)
        adapter.load(s, folder / s.file)
        adapter.switch(s)
    result = adapter.publish_batch(list(plan.all_streams()))
    assert result["already_published"] is False and sorted(result["by_table"]) == ["orders"]
    seen = engine.fingerprint(adapter, ["orders", "customer"])
    assert seen["orders"][0] == sum(s.rows for s in plan.table("orders").streams)
    assert seen["customer"][0] == 0
