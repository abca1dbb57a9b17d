"""The pre-flight's decisions (pure: switchyard/preflight.py), and its checks of the target's
shape on the embedded PostgreSQL, before any load."""
from __future__ import annotations

import threading
import time
from dataclasses import replace

import psycopg
import pytest

from helpers import fingerprint, only_streams, publish
from switchyard.core.batch import read_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.preflight import Partition, check_table, overlaps, retention
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.postgres import PostgresAdapter

SPEC = load_spec("tpch")


def _orders(mode: str = "append", keep: int | None = None):
    return replace(SPEC.table("orders"), mode=mode, keep=keep)


def _streams(*ranges):
    from switchyard.core.planner import StreamPlan
    return [StreamPlan(table="orders", stream=k, file=f"orders/orders.{k}.tbl", key_min=lo, key_max=hi, rows=1,
                       lower=lo, upper=hi, partition_number=k, staging_table=f"orders_{k}",
                       partition_table=f"orders_{lo}_{hi}", filegroup=f"fg{k}")
            for k, (lo, hi) in enumerate(ranges, 1)]


def _parts(batch, *ranges):
    return [Partition(name=f"orders_{lo}_{hi}", lower=lo, upper=hi + 1, batch=batch) for lo, hi in ranges]


def test_overlap_of_half_open_ranges():
    assert overlaps((1, 11), (10, 20)) and not overlaps((1, 11), (11, 20))
    assert overlaps((None, 5), (4, None)) and not overlaps((None, 5), (5, None))


def test_replace_takes_every_partition_whatever_its_bounds():
    existing = _parts("small", (1, 20000), (20001, 40000), (40001, 60000))
    check = check_table(_orders("replace"), _streams((1, 40000), (40001, 80000), (80001, 120000)), "grown",
                        existing, "tpch.orders")
    assert check.ok and check.remove == existing
    assert "replace mode: its 3 partitions (batches small) give way to this batch's 3" in check.notes[0]


def test_append_refuses_an_overlap_naming_both_batches():
    existing = _parts("2026-04-03", (1, 100), (101, 200)) + _parts("2026-04-04", (201, 300))
    check = check_table(_orders(), _streams((250, 400)), "2026-04-05", existing, "tpch.orders")
    assert not check.ok
    (problem,) = check.problems
    assert problem.startswith("tpch.orders: batch 2026-04-05 overlaps batch 2026-04-04: its stream 1 "
                              "(keys 250..400) and partition orders_201_300 (keys 201..300) of batch 2026-04-04")
    assert "ALTER TABLE tpch.orders DETACH PARTITION orders_201_300" in problem
    # A batch of several partitions: every one of them, or the batch would be half in the table.
    (problem,) = check_table(_orders(), _streams((150, 160)), "2026-04-05", existing, "tpch.orders").problems
    assert ("retire every partition of batch 2026-04-03 first (ALTER TABLE tpch.orders DETACH PARTITION orders_1_100; "
            "ALTER TABLE tpch.orders DETACH PARTITION orders_101_200)") in problem, problem


def test_append_rerun_replaces_its_own_partitions_even_with_other_bounds():
    existing = _parts("a", (1, 100)) + _parts("b", (101, 200), (201, 300)) + _parts("c", (301, 400))
    check = check_table(_orders(), _streams((101, 180), (181, 299)), "b", existing, "tpch.orders")
    assert check.ok, check.problems
    assert [p.name for p in check.remove] == ["orders_101_200", "orders_201_300"]


def test_append_refuses_an_overlap_with_an_unrecorded_partition():
    existing = [Partition(name="orders_by_hand", lower=1, upper=50, batch=None)]
    check = check_table(_orders(), _streams((40, 60)), "x", existing, "tpch.orders")
    assert "overlaps no batch (recorded to none" in check.problems[0]


def test_keep_retires_the_oldest_batches_by_key_and_refuses_a_batch_older_than_the_window():
    existing = _parts("d1", (1, 100)) + _parts("d2", (101, 200)) + _parts("d3", (201, 300))
    check = check_table(_orders(keep=3), _streams((301, 400)), "d4", existing, "tpch.orders")
    assert check.ok and check.retire_batches == ["d1"] and [p.name for p in check.retire] == ["orders_1_100"]
    # A backfill older than the three kept would be retired at once: refused.
    late = check_table(_orders(keep=3), _streams((-100, 0)), "d0", existing, "tpch.orders")
    assert late.problems[0].startswith("tpch.orders: batch d0 would be retired as it goes in (keep: 3 batches; "
                                       "retired: d0)")
    # What the commit retires once the batch is in.
    after = existing + _parts("d4", (301, 400))
    retired, why = retention(_orders(keep=3), after)
    assert [p.name for p in retired] == ["orders_1_100"] and why == "keep: 3 batches; retired: d1"
    # Said before any load: what the commit does once the batch is in, and only then.
    assert check.notes[0] == ("tpch.orders: when batch d4 goes in, and not before: keep: 3 batches; "
                              "retired: d1 (1 partitions, dropped)")


def test_a_replace_table_holding_an_append_tables_batches_is_refused_unless_sync():
    """Several batches in a table whose spec says replace: an append table's history, its spec's
    `mode: append` gone. The batch would replace all of them: refused unless on_spec_change: sync."""
    existing = _parts("d1", (1, 100)) + _parts("d2", (101, 200)) + _parts("d3", (201, 300))
    check = check_table(_orders("replace"), _streams((301, 400)), "d4", existing, "tpch.orders")
    assert check.problems == [
        "tpch.orders: holds 3 batches (d1, d2, d3), as a table in append mode does; the spec says mode: replace, so "
        "this batch would replace all of them. If the table's mode changed on purpose, set on_spec_change: sync on "
        "it for this run; otherwise put mode: append back in the spec"] and check.remove == []
    synced = check_table(replace(_orders("replace"), on_spec_change="sync"), _streams((301, 400)), "d4", existing,
                         "tpch.orders")
    assert synced.ok and synced.remove == existing
    assert synced.notes[0] == "tpch.orders: holds 3 batches (d1, d2, d3); in replace mode this batch replaces all of them " \
                              "(on_spec_change: sync)"
    # One batch held, or the same batch's partitions again: a replace table as every run leaves it.
    assert check_table(_orders("replace"), _streams((1, 400)), "d2", _parts("d1", (1, 100)), "tpch.orders").ok
    assert check_table(_orders("replace"), _streams((1, 400)), "d1", _parts("d1", (1, 100), (101, 200)),
                       "tpch.orders").ok


def test_a_table_whose_every_stream_is_empty_is_refused():
    empty = replace(_streams((1, 2))[0], key_min=None, key_max=None, lower=None, upper=None, rows=0)
    check = check_table(_orders("replace"), [empty], "b", _parts("a", (1, 100)), "tpch.orders")
    assert "every stream of the table is empty in batch b; in replace mode that would empty the table" \
        in check.problems[0]


# --- the target's shape, on the embedded PostgreSQL ------------------------------------------
@pytest.fixture
def orders_plan(tpch_batch):
    name, folder = tpch_batch
    return plan_batch(SPEC, read_manifest(folder, SPEC), ["orders"])


def _refusal(adapter, plan) -> str:
    with pytest.raises(TargetError) as caught:
        adapter.setup(plan)
    assert caught.value.permanent is True
    return str(caught.value)


def test_a_target_of_another_shape_is_refused_before_anything_is_created(pg_uri, schema, orders_plan):
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="b1")
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".orders (o_orderkey bigint NOT NULL, o_custkey bigint, '
                     f'o_note text NOT NULL)')
    message = _refusal(adapter, orders_plan)
    assert message.startswith("pre-flight refused the batch before any load; nothing was changed:")
    assert f"{schema}.orders exists but is not partitioned (the spec partitions it by range on o_orderkey)" \
        in message
    assert (f"{schema}.orders: column o_orderstatus (character(1), NOT NULL) is in the spec, not in the table: the rows "
            f"the table holds have no value for it") in message, message
    assert f"{schema}.orders: column o_totalprice (numeric(15,2), NOT NULL) is in the spec" in message
    assert (f"{schema}.orders: NOT NULL column o_note without a default is not in the spec's files: no load can "
            f"fill it") in message
    with psycopg.connect(pg_uri) as conn:  # the staging schema was not created
        assert conn.execute("SELECT to_regnamespace(%s)", (f"{schema}_staging",)).fetchone()[0] is None


def test_a_default_partition_is_refused(pg_uri, schema, orders_plan):
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="b1")
    adapter.setup(orders_plan)
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{schema}".orders_rest PARTITION OF "{schema}".orders DEFAULT')
    assert f"{schema}.orders has a DEFAULT partition (orders_rest)" in _refusal(adapter, orders_plan)


def test_an_append_batch_overlapping_another_is_refused_by_setup(pg_uri, schema, tpch_batch, orders_plan):
    _, folder = tpch_batch
    spec = replace(SPEC, tables=tuple(replace(t, mode="append") if t.name == "orders" else t for t in SPEC.tables))
    plan = replace(orders_plan, spec=spec, tables=tuple(replace(t, table=spec.table(t.table.name))
                                                       for t in orders_plan.tables))
    first = PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_batch="day-1")
    first.setup(plan)
    for s in plan.table("orders").streams:
        first.prepare(s)
        first.load(s, folder / s.file)
        first.switch(s)
    publish(first, plan)
    # Another batch with one of the same streams: refused, naming both batches.
    second = PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_batch="day-2")
    message = _refusal(second, only_streams(plan, plan.stream("orders", 2)))
    s = plan.stream("orders", 2)
    assert (f"{schema}.orders: batch day-2 overlaps batch day-1: its stream 2 (keys {s.lower}..{s.upper}) and "
            f"partition {s.partition_table}") in message


def test_another_runs_held_back_groups_are_discarded_and_said_so(pg_uri, schema, tpch_batch, orders_plan, caplog):
    _, folder = tpch_batch
    a = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="day-1", lease_holder="dag/run-a")
    a.setup(orders_plan)
    s1, s2 = orders_plan.stream("orders", 1), orders_plan.stream("orders", 2)
    for s in (s1, s2):  # stream 3 failed: these two wait in the next version
        a.prepare(s)
        a.load(s, folder / s.file)
        assert a.switch(s)["in_target"] is False
    a.release_lease()
    b = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="day-2", lease_holder="dag/run-b")
    caplog.set_level("INFO", logger="switchyard")
    notes = b.setup(orders_plan)
    assert (f"{schema}.orders: batch day-1 (run dag/run-a) never went in: its validated groups "
            f"(orders_1, orders_2) waited for the rest of its batch and are discarded now; to load batch "
            f"day-1, run it again from setup.plan") in notes
    # Logged once, as a warning.
    said = [r for r in caplog.records if "never went in" in r.getMessage()]
    assert [r.levelname for r in said] == ["WARNING"], said
    b.release_lease()
    # Run a's group, cleared afterwards, is refused: its plan is gone.
    s3 = orders_plan.stream("orders", 3)
    a.prepare(s3)
    a.load(s3, folder / s3.file)
    with pytest.raises(TargetError, match="has no switch of this run pending: its plan was made by "
                                          "run dag/run-b"):
        a.switch(s3)
    a.release_lease()


def test_a_rerun_of_the_same_batch_says_it_loads_the_batch_again(pg_uri, schema, tpch_batch, orders_plan):
    _, folder = tpch_batch
    a = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="day-1", lease_holder="dag/run-a")
    a.setup(orders_plan)
    s1 = orders_plan.stream("orders", 1)
    a.prepare(s1)
    a.load(s1, folder / s1.file)
    assert a.switch(s1)["in_target"] is False  # its other streams failed: it waits in the next version
    a.release_lease()
    again = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="day-1", lease_holder="dag/run-c")
    notes = again.setup(orders_plan)
    assert (f"{schema}.orders: batch day-1 (run dag/run-a) never went in: its validated groups (orders_1) "
            f"waited for the rest of its batch and are discarded now; this run loads batch day-1 again") in notes
    assert not any("run it again from setup.plan" in n for n in notes)
    again.release_lease()


def test_newer_is_told_by_the_dates_the_batch_format_reads_not_by_the_names_order(monkeypatch):
    from switchyard.core.preflight import newer_in_place
    monkeypatch.setenv("SWITCHYARD_BATCH_FORMAT", "%d.%m.%Y")
    lookup = replace(SPEC.table("nation"))
    problems, _ = newer_in_place(lookup, "30.12.2026", ["05.01.2027", "02.01.2027", "01.12.2026"], "s.nation")
    assert problems and problems[0].startswith("s.nation: holds batch 05.01.2027, newer than this batch 30.12.2026")
    assert newer_in_place(lookup, "06.01.2027", ["05.01.2027"], "s.nation") == ([], [])
    # A name the format does not read, on either side: no order to go by.
    assert newer_in_place(lookup, "fix-1", ["05.01.2027"], "s.nation") == ([], [])
    assert newer_in_place(lookup, "30.12.2026", ["fix-1"], "s.nation") == ([], [])
    # An append table's older batch adds its own partitions.
    assert newer_in_place(_orders("append"), "30.12.2026", ["05.01.2027"], "s.orders") == ([], [])


def _load_whole(adapter, plan, folder, replace_newer: bool = False) -> list[str]:
    notes = adapter.setup(plan, replace_newer=replace_newer)
    for s in plan.all_streams():
        adapter.prepare(s)
        adapter.load(s, folder / s.file)
        adapter.switch(s)
    publish(adapter, plan)
    adapter.release_lease()
    return notes


def _loaded_once(pg_uri: str, schema: str, tpch_batch, tables: list[str]):
    """(plan, folder): the test batch's `tables` loaded and published once, as batch tpch-a."""
    _, folder = tpch_batch
    plan = plan_batch(SPEC, read_manifest(folder, SPEC), tables)
    _load_whole(PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="tpch-a", lease_holder="dag/a"),
                plan, folder)
    return plan, folder


def test_a_replace_table_holding_a_newer_batch_is_not_put_back_unless_the_run_asks(pg_uri, schema, tpch_batch):
    """A backfill of an older date (or a rerun of one) would put replace tables back behind the
    newer batch they hold: refused before any load, and done when the run asks for it."""
    _, folder = tpch_batch
    plan = plan_batch(SPEC, read_manifest(folder, SPEC), ["orders", "nation"])
    _load_whole(PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="2026-04-03", lease_holder="dag/a"),
                plan, folder)
    before = fingerprint(pg_uri, schema, ["orders", "nation"])
    older = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="2026-04-02", lease_holder="dag/b")
    message = _refusal(older, plan)
    for table in ("orders", "nation"):
        assert (f"{schema}.{table}: holds batch 2026-04-03, newer than this batch 2026-04-02: in replace mode "
                f"loading it would put the table back to batch 2026-04-02's rows") in message, message
    assert "run with replace_newer: true" in message
    older.release_lease()
    assert fingerprint(pg_uri, schema, ["orders", "nation"]) == before
    assert control_batches(pg_uri, schema) == {"orders": {"2026-04-03"}, "nation": {"2026-04-03"}}
    # A newer date, and a batch whose name is no date (no order to go by), go in as before.
    for batch in ("2026-04-04", "tpch-again"):
        adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch=batch, lease_holder=f"dag/{batch}")
        _load_whole(adapter, plan, folder)
    # Asked for: put back, and said so.
    _load_whole(PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="2026-04-05", lease_holder="dag/c"),
                plan, folder)
    back = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="2026-04-02", lease_holder="dag/d")
    notes = _load_whole(back, plan, folder, replace_newer=True)
    assert (f"{schema}.nation: holds batch 2026-04-05, newer than this batch 2026-04-02; put back to batch "
            f"2026-04-02, as the run asks (replace_newer)") in notes
    assert control_batches(pg_uri, schema) == {"orders": {"2026-04-02"}, "nation": {"2026-04-02"}}
    assert fingerprint(pg_uri, schema, ["orders", "nation"]) == before


def test_a_reader_with_an_older_snapshot_finds_a_replaced_lookup_with_its_rows_not_empty(pg_uri, schema, tpch_batch):
    """A replace of an unpartitioned table under a REPEATABLE READ reader (a report, pg_dump)
    whose snapshot is older than the publish: the reader finds the rows its snapshot holds. After
    a TRUNCATE, which is not MVCC-safe, it would find the table empty."""
    plan, folder = _loaded_once(pg_uri, schema, tpch_batch, ["orders", "nation"])
    with psycopg.connect(pg_uri) as reader:
        reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        reader.execute("SELECT count(*) FROM pg_class").fetchone()      # its snapshot, no lock on the tables
        _load_whole(PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="tpch-b", lease_holder="dag/b"),
                    plan, folder)
        assert reader.execute(f'SELECT count(*) FROM "{schema}".nation').fetchone()[0] == 25
        reader.rollback()
    assert control_batches(pg_uri, schema)["nation"] == {"tpch-b"}


def test_a_nullable_key_on_the_target_still_attaches_without_a_scan(pg_uri, schema, tpch_batch):
    """A DBA's table may allow NULL in its key column (a range partition's key need not be NOT
    NULL), and the staging tables are made like it. The partition's constraint says the key IS
    NOT NULL, which a CHECK passing on NULL does not prove: the range CHECK says it too, so that
    ATTACH still proves the bound without scanning the rows."""
    plan, folder = _loaded_once(pg_uri, schema, tpch_batch, ["orders"])
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".orders ALTER COLUMN o_orderkey DROP NOT NULL')
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="tpch-b", lease_holder="dag/b")
    adapter.setup(plan)
    switched = []
    for s in plan.all_streams():
        adapter.prepare(s)
        adapter.load(s, folder / s.file)
        switched.append(adapter.switch(s))
    published = publish(adapter, plan)
    adapter.release_lease()
    assert all(r["attach_scan_skipped"] is True for r in switched), switched
    assert control_batches(pg_uri, schema)["orders"] == {"tpch-b"}, published


def test_readers_do_not_queue_behind_a_publish_waiting_for_a_long_reader(pg_uri, schema, tpch_batch):
    """While the publish's ACCESS EXCLUSIVE request waits for a long reader, every new reader of
    the table would queue behind it: the request gives up after a second, back to a savepoint,
    and asks again, so a reader that comes meanwhile is served while the long one still reads;
    the batch goes in once that one ends."""
    plan, folder = _loaded_once(pg_uri, schema, tpch_batch, ["orders"])
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="tpch-b", lease_holder="dag/b")
    adapter.setup(plan)
    for s in plan.all_streams():
        adapter.prepare(s)
        adapter.load(s, folder / s.file)
        adapter.switch(s)
    table = f'"{schema}".orders'
    long_reader = psycopg.connect(pg_uri)
    long_reader.execute(f"SELECT count(*) FROM {table}").fetchone()      # ACCESS SHARE, held to its end
    published: dict = {}
    publisher = threading.Thread(target=lambda: published.update(result=publish(adapter, plan)))
    publisher.start()
    try:
        time.sleep(1.5)     # the publish is asking for its lock by now
        with psycopg.connect(pg_uri) as reader:
            reader.execute("SET statement_timeout = '30s'")
            started = time.monotonic()
            rows = reader.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            waited = time.monotonic() - started
    finally:
        long_reader.rollback()
        long_reader.close()
        publisher.join(60)
    adapter.release_lease()
    # One attempt's second at most, and the long reader still reading; queued behind a request
    # that waits for it, the reader would have waited until the publish gave up.
    assert waited < 5, waited
    assert rows == sum(s.rows for s in plan.all_streams())
    assert published["result"]["by_table"]["orders"]["partitions_in"] == len(list(plan.all_streams()))
    assert control_batches(pg_uri, schema)["orders"] == {"tpch-b"}


def test_a_table_another_tables_foreign_key_references_is_refused_before_any_load(pg_uri, schema, tpch_batch):
    """The publish takes a replaced table's rows out: a foreign key of another table that
    references it would refuse that after every load, or, ON DELETE CASCADE, delete that table's
    rows with them. Refused before any load; both tables as they were."""
    plan, folder = _loaded_once(pg_uri, schema, tpch_batch, ["nation"])
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}".nation ADD PRIMARY KEY (n_nationkey)')
        conn.execute(f'CREATE TABLE "{schema}".visits (nation int REFERENCES "{schema}".nation ON DELETE CASCADE)')
        conn.execute(f'INSERT INTO "{schema}".visits SELECT n_nationkey FROM "{schema}".nation')
    before = fingerprint(pg_uri, schema, ["nation", "visits"])
    again = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="tpch-b", lease_holder="dag/b")
    message = _refusal(again, plan)
    again.release_lease()
    assert (f"{schema}.nation is referenced by foreign key visits_nation_fkey of {schema}.visits: the publish takes "
            f"the table's rows out (DELETE, or DETACH and DROP of the partitions a batch replaces), which ON DELETE "
            f"CASCADE would delete its rows that reference them") in message, message
    assert fingerprint(pg_uri, schema, ["nation", "visits"]) == before


def test_a_partition_the_publish_could_not_name_is_refused_before_any_load(pg_uri, schema, tpch_batch):
    """A partition a DBA renamed with capitals, or moved to another schema: a replace would have
    to detach and drop it, and the publish writes only names it can check. Refused before any
    load, naming it, rather than by the publish after every load."""
    plan, folder = _loaded_once(pg_uri, schema, tpch_batch, ["orders"])
    first = sorted(PostgresAdapter(SPEC, uri=pg_uri, schema=schema).partitions("orders"))[0]
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'ALTER TABLE "{schema}"."{first}" RENAME TO "Orders_Old"')
    before = fingerprint(pg_uri, schema, ["orders"])
    again = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_batch="tpch-b", lease_holder="dag/b")
    message = _refusal(again, plan)
    again.release_lease()
    assert (f"{schema}.orders: partition 'Orders_Old': a name Switchyard does not write into SQL (lower-case letters, "
            f"digits and _, a letter or _ first)") in message, message
    assert fingerprint(pg_uri, schema, ["orders"]) == before


def control_batches(uri: str, schema: str) -> dict[str, set[str]]:
    with psycopg.connect(uri) as conn:
        out: dict[str, set[str]] = {}
        for table, batch in conn.execute("SELECT table_name, batch FROM switchyard.partition_batches "
                                         "WHERE target_schema = %s", (schema,)):
            out.setdefault(table, set()).add(batch)
    return out


def test_keep_days_on_a_date_key_retires_partitions_older_than_the_window():
    from datetime import date
    events = replace(SPEC.table("orders"), mode="append", keep_days=2)
    day = lambda d: date(2026, 4, d)  # noqa: E731
    parts = [Partition(name=f"e_{d}", lower=day(d), upper=day(d + 1), batch=f"b{d}") for d in (1, 2, 3, 4)]
    retired, why = retention(events, parts)
    # The newest key is 2026-04-04; two days back from the end of the window, 04-01 and 04-02's
    # partitions hold no key inside it.
    assert [p.name for p in retired] == ["e_1", "e_2"]
    assert why == "keep_days: 2; keys before 2026-04-03 retired (b1, b2)"
    unrecorded = [replace(parts[0], batch=None)] + parts[1:]
    assert [p.name for p in retention(events, unrecorded)[0]] == ["e_2"]  # never a partition of no batch


def test_a_batch_partly_older_than_the_window_is_refused_naming_the_part():
    """keep_days retires by partition: a batch some of whose streams hold only keys older than
    the window would lose them as it goes in. Refused before any load, saying which part; the
    whole batch older than the window is refused as before."""
    from datetime import date
    from switchyard.core.planner import StreamPlan
    events = replace(SPEC.table("orders"), key="o_orderdate", mode="append", keep_days=2)
    day = lambda d: date(2026, 4, d)  # noqa: E731
    existing = [Partition(name="e_5_6", lower=day(5), upper=day(7), batch="b5")]
    streams = [StreamPlan(table="orders", stream=k, file=f"orders/orders.{k}.tbl", key_min=str(day(d)),
                          key_max=str(day(d)), rows=1, lower=str(day(d)), upper=str(day(d)), partition_number=k,
                          staging_table=f"orders_{k}", partition_table=f"orders_{d}", filegroup=f"fg{k}",
                          key_kind="date") for k, d in ((1, 1), (2, 7))]
    check = check_table(events, streams, "d1", existing, "tpch.orders", kind="date", key_type="date")
    assert check.problems == [
        "tpch.orders: batch d1 would be partly retired as it goes in (keep_days: 2; keys before 2026-04-06 retired "
        "(d1)): 1 of its 2 partitions (keys 2026-04-01..2026-04-01) hold only keys older than the window the table "
        "keeps, the others are within it, and none of it is loaded. Raise keep or keep_days, or retire the newer "
        "batches first"]
    whole = check_table(events, streams[:1], "d0", existing, "tpch.orders", kind="date", key_type="date")
    assert whole.problems[0].startswith("tpch.orders: batch d0 would be retired as it goes in (keep_days: 2; ")
