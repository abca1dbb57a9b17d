"""The steps of a load called as plain Python (switchyard/steps.py), without Airflow, on the
embedded PostgreSQL: what each task does, and the outcomes the operators put in Airflow's terms."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from switchyard import steps
from switchyard.core.batch import BatchError
from switchyard.core.spec import load_spec
from switchyard.targets.postgres import PostgresAdapter
from helpers import fingerprint

SPEC = load_spec("tpch")


def test_importing_the_steps_imports_no_airflow():
    code = ("import sys, switchyard.steps; "
            "print(sorted(m for m in sys.modules if m == 'airflow' or m.startswith('airflow.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_batch_through_every_step_without_airflow(tpch_batch, pg_uri, schema):
    name, folder = tpch_batch
    spec = replace(SPEC, publish="batch")

    def connect() -> PostgresAdapter:
        return PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_holder="plain/run-1", lease_batch=name)

    tables = steps.chosen_tables(spec, "['orders', 'nation']")
    found, plan, problems, *_ = steps.check_batch(spec, tables, name, streams=3)
    assert found == folder and problems == []
    run = steps.set_up(connect(), plan, problems, name, found, tables)
    assert run["batch"] == name and run["tables"] == ["orders", "nation"] and run["schema"] == schema
    loaded = {}
    for gid, raw in run["groups"].items():
        if raw["table"] not in tables:
            continue
        s = steps.stream_plan(run, raw["table"], raw["stream"])
        assert steps.prepare(connect, run, s).staging_table == f"{schema}_staging.{s.staging_table}"
        load = steps.load(connect, run, s, queue=None, host="here")
        assert load.rows == s.rows and load.host == "here"
        checked = steps.validate(connect, spec, run, s, loaded=load.xcom())
        assert checked.checks["success"] is True and checked.checks["checks"]
        assert steps.switch(connect, spec, run, s).in_target is False  # the batch's publish moves it in
        loaded[s.table] = loaded.get(s.table, 0) + load.rows
    assert fingerprint(pg_uri, schema, tables)["orders"][0] == 0
    published = steps.publish_batch(connect, run)
    assert published.target["tables"] == ["nation", "orders"] and not published.target["already_published"]
    counts = fingerprint(pg_uri, schema, tables)
    assert {t: counts[t][0] for t in tables} == loaded
    connect().release_lease()

    # A group run again on its own after the publish (cleared in the UI): its plan was used up by
    # the batch going in whole, so it is refused at its first step, before the run's lease is
    # taken again or its staging table made; the target holds the batch as it did.
    s = steps.stream_plan(run, "orders", 2)
    with pytest.raises(steps.StepFailed, match=rf"^orders_2: this run put batch {name} in {schema}\.orders already "
                                               r"\(at .*, after its plan was made\); .* clear the whole run"):
        steps.prepare(connect, run, s)
    assert fingerprint(pg_uri, schema, tables) == counts
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (f'"{schema}_staging"."{s.staging_table}"',)).fetchone()[0] is None
        control = connect().control_schema
        assert conn.execute(f'SELECT count(*) FROM "{control}".run_lease WHERE target_schema = %s',
                            (schema,)).fetchone()[0] == 0
    # The same cleared from its load (the grid's Clear on `load`, with downstream): said the same
    # way, not as a missing staging table. (A load renews the run's lease first, as every load
    # does; the run's last task gives it up.)
    with pytest.raises(steps.StepFailed, match=rf"^orders_2: this run put batch {name} in {schema}\.orders already"):
        steps.load(connect, run, s, queue=None, host="here")
    assert fingerprint(pg_uri, schema, tables) == counts
    connect().release_lease()
    # The whole run made again has a newer plan: its groups load as usual.
    again = steps.set_up(connect(), plan, problems, name, found, tables)
    assert steps.prepare(connect, again, s).staging_table == f"{schema}_staging.{s.staging_table}"
    connect().release_lease()


def test_a_step_refuses_a_spec_that_changed_after_the_runs_plan(tpch_batch, pg_uri, schema):
    """The spec file edited while a run is in flight (or a worker holding another copy): a step
    would load, check or publish the batch by another spec than its plan's (columns in another
    order, each value in another column; replace instead of append, every earlier batch gone).
    Each step compares the spec it reads with the plan's, for the run's tables: refused, naming
    what differs. The operators make the comparison before their step, in Airflow's terms."""
    from types import SimpleNamespace
    from switchyard.airflow.operators import PrepareOperator, PublishBatchOperator
    name, folder = tpch_batch
    tables = ["orders", "nation"]
    found, plan, problems, *_ = steps.check_batch(SPEC, tables, name, streams=3)
    run = steps.set_up(PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_holder="plain/run-1", lease_batch=name),
                       plan, problems, name, found, tables)
    PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_holder="plain/run-1").release_lease()
    steps.spec_as_planned(run, SPEC)

    def edited(table: str, **changes):
        return replace(SPEC, tables=tuple(replace(t, **changes) if t.name == table else t for t in SPEC.tables))
    columns = SPEC.table("nation").columns
    for spec, what in ((edited("nation", columns=(columns[1], columns[0], *columns[2:])), "table nation"),
                       (edited("orders", mode="append"), "table orders"),
                       (replace(SPEC, publish="table"), "its own entries (publish, sources, files)")):
        with pytest.raises(steps.StepFailed, match=rf"^the spec .* changed after this run's plan was made \({re.escape(what)} "
                                                   rf"differ\): .* clear the whole run \(from setup\.plan\)"):
            steps.spec_as_planned(run, spec)
    steps.spec_as_planned(run, edited("lineitem", mode="append"))   # not a table of this run
    steps.spec_as_planned({k: v for k, v in run.items() if k != "spec_digests"}, edited("orders", mode="append"))
    # The operators, before their step: the plan made by another spec than the one they read.
    other = {**run, "spec_digests": edited("orders", mode="append").digests()}
    context = {"ti": SimpleNamespace(xcom_pull=lambda task_ids, key="return_value": other)}
    with pytest.raises(steps.StepFailed, match=r"\(table orders differ\)"):
        PrepareOperator(task_id="orders_1.prepare", table="orders", stream=1).stream_plan(context)
    assert PrepareOperator(task_id="nation_1.prepare", table="nation", stream=1).stream_plan(
        {"ti": SimpleNamespace(xcom_pull=lambda task_ids, key="return_value": run)})[1].table == "nation"
    publish = PublishBatchOperator(task_id="publish_batch")
    publish.bind_run = lambda context: None
    with pytest.raises(Exception, match=r"\(table orders differ\)"):
        publish.execute({**context, "ti": SimpleNamespace(xcom_pull=lambda task_ids, key="return_value": other,
                                                             xcom_push=lambda **kw: None)})
    assert fingerprint(pg_uri, schema, tables)["orders"][0] == 0


def test_a_retry_after_the_groups_switch_went_in_finds_it_in_and_a_clear_is_still_refused(tpch_batch, pg_uri,
                                                                                           schema):
    """`tasks: single`, `publish: table`: a group's task whose switch put its table in and whose
    process died before Airflow heard of it is retried; the retry finds the group in place and
    reports its results, rows the manifest's. Before the table went in, a retry runs the steps
    again (None here)."""
    name, _ = tpch_batch
    spec = replace(SPEC, publish="table")

    def connect() -> PostgresAdapter:
        return PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_holder="plain/run-2", lease_batch=name)

    tables = ["orders", "nation"]
    found, plan, problems, *_ = steps.check_batch(spec, tables, name, streams=3)
    run = steps.set_up(connect(), plan, problems, name, found, tables)
    groups = [steps.stream_plan(run, g["table"], g["stream"]) for g in run["groups"].values() if g["table"] in tables]
    orders = [s for s in groups if s.table == "orders"]
    assert len(orders) == 3
    for s in groups:
        steps.prepare(connect, run, s)
        load = steps.load(connect, run, s, queue=None, host="here")
        steps.validate(connect, spec, run, s, loaded=load.xcom())
        if s == orders[-1]:
            # Every other group of orders staged, its last switch not yet: orders is not in, so
            # a retry of a staged group runs its steps again.
            assert all(steps.switched_by_an_earlier_attempt(connect, run, o) is None for o in orders)
        steps.switch(connect, spec, run, s)
    counts = fingerprint(pg_uri, schema, tables)
    # An unpartitioned table's switch under `publish: table` replaces it whole, as its retry can
    # again: the retry runs its steps (None here) and puts the same rows in.
    assert steps.switched_by_an_earlier_attempt(connect, run, steps.stream_plan(run, "nation", 1)) is None
    for s in orders:
        earlier = steps.switched_by_an_earlier_attempt(connect, run, s)
        assert earlier is not None, s.group_id
        assert set(earlier) == {"prepare", "load", "validate", "switch"}
        assert earlier["load"]["rows"] == s.rows and earlier["validate"]["success"] is True
        switch = earlier["switch"]
        assert switch["already_switched"] and switch["in_target"] and switch["by_an_earlier_attempt"]
        assert switch["partition"] == f"{schema}.{s.partition_table}", s.group_id
    assert sum(s.rows for s in orders) == counts["orders"][0]
    assert fingerprint(pg_uri, schema, tables) == counts  # asking changed nothing
    # A group cleared by hand after its table went in is still refused at its prepare.
    with pytest.raises(steps.StepFailed, match=r"^orders_2: this run put batch .* clear the whole run"):
        steps.prepare(connect, run, orders[1])
    connect().release_lease()
    # The whole run made again has a newer plan: nothing of it is in yet.
    again = steps.set_up(connect(), plan, problems, name, found, tables)
    assert steps.switched_by_an_earlier_attempt(connect, again, steps.stream_plan(again, "orders", 1)) is None
    connect().release_lease()


def test_a_sources_files_are_checked_on_its_workers_before_any_load(tpch_batch, pg_uri, schema, data_root):
    """Streams 2-4 live on a source's workers: the plan's check does not see their files, so the
    setup's task on that source checks them there, before any group's first step. A file of the
    table and source that the manifest does not list (stream 4) and a byte order mark the load
    would keep (stream 3) are both named at once, as the plan names what it sees; the fixed batch
    passes and loads."""
    name, folder = tpch_batch
    spec = replace(SPEC, publish="batch", sources={"source_a": (2, 3, 4)})
    batch = data_root / "steps-on-a-source"
    shutil.copytree(folder, batch)
    shutil.copy(batch / "orders" / "orders.3.tbl", batch / "orders" / "orders.4.tbl")
    # Of the manifest's size, so that its start is what is wrong with it.
    (batch / "orders" / "orders.3.tbl").write_bytes(b"\xef\xbb\xbf" + (folder / "orders" / "orders.3.tbl").read_bytes()[3:])

    def connect() -> PostgresAdapter:
        return PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_holder="plain/run-2", lease_batch=batch.name)

    found, plan, problems, *_ = steps.check_batch(spec, ["orders"], batch.name, streams=4)
    assert problems == [], problems      # neither is the plan's to see: both are on the source
    run = steps.set_up(connect(), plan, problems, batch.name, found, ["orders"])
    with pytest.raises(steps.StepFailed) as refused:
        steps.source_files(run, spec, "source_a", queue="source_a", host="here")
    said = str(refused.value)
    assert said.startswith("the batch's files on source 'source_a' would not load as its manifest lists them"), said
    assert (f"{batch / 'orders' / 'orders.4.tbl'}: a file of table orders (stream 4) the manifest does not list: a "
            f"run would not load it") in said
    assert re.search(r"orders.3.tbl: line 1, column o_orderkey: starts with UTF-8's byte order mark", said), said
    (batch / "orders" / "orders.4.tbl").unlink()
    (batch / "orders" / "orders.3.tbl").write_bytes((folder / "orders" / "orders.3.tbl").read_bytes())
    checked = steps.source_files(run, spec, "source_a", queue="source_a", host="here")
    # A worker without the batch's folder: retried (not a StepFailed), another worker may hold it.
    with pytest.raises(BatchError, match="the batch's folder is not on this worker"):
        steps.source_files({**run, "batch": "not-here"}, spec, "source_a", queue="source_a", host="here")
    assert (checked["files"], checked["bytes"]) == (2, sum(plan.stream("orders", k).bytes for k in (2, 3)))
    for k in (1, 2, 3):
        s = steps.stream_plan(run, "orders", k)
        steps.prepare(connect, run, s, file_on_source=spec.source_of(k))
        assert steps.load(connect, run, s, queue=spec.source_of(k), host="here").rows == s.rows
    connect().release_lease()


def test_a_table_with_no_load_on_a_source_has_its_files_there_checked(tpch_batch, pg_uri, schema, data_root):
    """A table whose streams on a source are all listed with 0 rows (stream 3), or not listed at
    all (stream 4), has no load there: its groups skip. Their records would be left out of a run
    that ends `success`; the source's files task names both, before any load."""
    from helpers import edit_manifest
    name, folder = tpch_batch
    spec = replace(SPEC, publish="batch", sources={"source_a": (3,), "source_b": (4,)})
    batch = data_root / "steps-zero-on-a-source"
    shutil.copytree(folder, batch)
    edit_manifest(batch, "orders", 3, rows=0, key_min=None, key_max=None)
    shutil.copy(batch / "orders" / "orders.3.tbl", batch / "orders" / "orders.4.tbl")

    def connect() -> PostgresAdapter:
        return PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_holder="plain/run-3", lease_batch=batch.name)

    found, plan, problems, *_ = steps.check_batch(spec, ["orders"], batch.name, streams=4)
    assert problems == [], problems      # on the sources: not the plan's to see
    run = steps.set_up(connect(), plan, problems, batch.name, found, ["orders"])
    with pytest.raises(steps.StepSkipped, match="orders stream 3 is empty in this batch"):
        steps.stream_plan(run, "orders", 3)
    with pytest.raises(steps.StepSkipped, match="orders comes in fewer than 4 streams in this batch"):
        steps.stream_plan(run, "orders", 4)
    with pytest.raises(steps.StepFailed) as refused:
        steps.source_files(run, spec, "source_a", queue="source_a", host="here")
    assert (f"{batch / 'orders' / 'orders.3.tbl'}: line 1: a record, but the manifest lists the file with 0 rows "
            f"(orders stream 3): a run would skip the stream") in str(refused.value)
    with pytest.raises(steps.StepFailed) as refused:
        steps.source_files(run, spec, "source_b", queue="source_b", host="here")
    assert (f"{batch / 'orders' / 'orders.4.tbl'}: a file of table orders (stream 4) the manifest does not list: a "
            f"run would not load it") in str(refused.value)
    assert fingerprint(pg_uri, schema, ["orders"])["orders"][0] == 0
    connect().release_lease()


def test_what_the_operators_skip_or_fail_at_once(tpch_batch, tmp_path, data_root):
    name, folder = tpch_batch
    with pytest.raises(steps.StepFailed, match=r"tables: 'ordres' not in spec 'tpch'"):
        steps.chosen_tables(SPEC, ["ordres"])
    _, plan, *_ = steps.check_batch(SPEC, ["orders"], name, streams=3)
    run = {**plan.to_dict(), "tables": ["orders"], "batch_dir": str(folder), "staging_schema": "s"}
    with pytest.raises(steps.StepSkipped, match="orders comes in fewer than 4 streams in this batch"):
        steps.stream_plan(run, "orders", 4)
    with pytest.raises(steps.StepSkipped, match="nation is not among this run's tables"):
        steps.stream_plan(run, "nation", 1)
    with pytest.raises(steps.StepFailed, match=r"the run's plan is missing"):
        steps.stream_plan(None, "orders", 1)
    # A batch whose file went missing fails at prepare, before a connection is looked up.
    missing = data_root / "steps-missing-file"
    shutil.copytree(folder, missing)
    s = steps.stream_plan(run, "orders", 2)
    (missing / s.file).unlink()

    def never():
        raise AssertionError("prepare looked the connection up for a missing file")
    with pytest.raises(steps.StepFailed, match=r"orders\.2\.tbl: stream file not found \[table orders, stream 2\]"):
        steps.prepare(never, {**run, "batch_dir": str(missing)}, s)
    # Too few task groups for the batch's streams, and the missing file: both found at once, and
    # handed to the target's setup, whose pre-flight refuses the batch with its own problems.
    _, _, problems, *_ = steps.check_batch(SPEC, ["orders"], "steps-missing-file", streams=2)
    assert len(problems) == 2, problems
    assert "this DAG has task groups for up to 2 per table" in problems[0]
    assert "orders.2.tbl" in problems[1]
    # A file of the table the manifest does not list (a producer that wrote its manifest before
    # its last file): the run would leave it out, so the batch is refused with it named.
    extra = data_root / "steps-unlisted-file"
    shutil.copytree(folder, extra)
    shutil.copy(extra / "orders" / "orders.3.tbl", extra / "orders" / "orders.4.tbl")
    _, _, problems, *_ = steps.check_batch(SPEC, ["orders"], "steps-unlisted-file", streams=4)
    assert problems == [f"{extra / 'orders' / 'orders.4.tbl'}: a file of table orders (stream 4) the manifest does "
                        f"not list: a run would not load it; list it (`switchyard manifest` writes the manifest "
                        f"from the folder's files) or move it out of the batch folder"], problems
    assert steps.check_batch(SPEC, ["lineitem"], "steps-unlisted-file", streams=4)[2] == []  # not a run's table
    # Without a plan there is nothing to set up: the refusal is the step's own.
    with pytest.raises(steps.StepFailed, match="not-a-batch"):
        steps.check_batch(SPEC, ["orders"], "not-a-batch", streams=3)


def test_a_file_listed_with_0_rows_that_holds_records_is_refused_whatever_the_batchs_size(tpch_batch, data_root,
                                                                                         monkeypatch):
    """An empty stream's group skips: a manifest entry of 0 rows for a file that holds records
    would leave them out of a run that ends `success`. The plan finds it without reading the
    batch's fields (SWITCHYARD_CHECK_FIELDS_MB 0 stands for a batch too big to read)."""
    from helpers import edit_manifest
    monkeypatch.setenv("SWITCHYARD_CHECK_FIELDS_MB", "0")
    name, folder = tpch_batch
    batch = data_root / "steps-zero-rows"
    shutil.copytree(folder, batch)
    edit_manifest(batch, "orders", 3, rows=0, key_min=None, key_max=None)
    _, plan, problems, *_ = steps.check_batch(SPEC, ["orders"], batch.name, streams=3)
    assert plan.stream("orders", 3).empty
    assert problems == [f"{batch / 'orders' / 'orders.3.tbl'}: line 1: a record, but the manifest lists the file with "
                        f"0 rows (orders stream 3): a run would skip the stream and leave the file's records out; "
                        f"write the manifest from the file (switchyard manifest)"], problems
    # An empty file listed with 0 rows is an empty stream, as before.
    (batch / "orders" / "orders.3.tbl").write_bytes(b"")
    edit_manifest(batch, "orders", 3, bytes=0)
    assert steps.check_batch(SPEC, ["orders"], batch.name, streams=3)[2] == []


def test_a_file_written_again_after_the_plan_is_checked_again_by_its_load(tpch_batch, pg_uri, schema, data_root):
    """A producer writes a stream file again in place after the run's plan checked it (a value
    fixed, then the group cleared): its load checks it again as the plan checks a file, every
    field included, before anything of it is loaded, whether its size changed or not. A fix
    that keeps the plan's rows loads; a bad value or a line taken out is refused, named."""
    name, folder = tpch_batch
    batch = data_root / "steps-written-again"
    shutil.copytree(folder, batch)
    tables = ["nation"]

    def connect() -> PostgresAdapter:
        return PostgresAdapter(SPEC, uri=pg_uri, schema=schema, lease_holder="plain/run-2", lease_batch=batch.name)

    found, plan, problems, *_ = steps.check_batch(SPEC, tables, batch.name, streams=3)
    assert problems == []
    run = steps.set_up(connect(), plan, problems, batch.name, found, tables)
    s = steps.stream_plan(run, "nation", 1)
    path = batch / s.file
    original = path.read_bytes()
    assert s.file_mtime_ns == path.stat().st_mtime_ns
    lines = original.split(b"\n")
    refused = rf"^{re.escape(str(path))}: changed since this run's plan checked it \(%s\) \[table nation, stream 1\], " \
              rf"and checked again: %s\. The rows and keys expected are the manifest's .* nothing of the file was loaded$"
    try:
        # The same size, a bad value: line 3's region key (its third field) no integer.
        fields = lines[2].split(b"|")
        fields[2] = b"X"
        path.write_bytes(b"\n".join(lines[:2] + [b"|".join(fields)] + lines[3:]))
        assert path.stat().st_size == len(original)
        steps.prepare(connect, run, s)
        with pytest.raises(steps.StepFailed, match=refused % (r"modified at .*, the run's plan checked it as of .*",
                                                              rf"{re.escape(str(path))}: line 3, column n_regionkey: .X.: not an integer \(integer\)")):
            steps.load(connect, run, s, queue=None, host="here")
        # A line taken out: the size and the records tell it.
        path.write_bytes(b"\n".join(lines[1:]))
        with pytest.raises(steps.StepFailed, match=refused % (
                rf"{len(original) - len(lines[0]) - 1:,} bytes, the manifest says {len(original):,}; modified at .*",
                r".*: 24 records, the manifest says 25 \(nation stream 1\)")):
            steps.load(connect, run, s, queue=None, host="here")
        with psycopg.connect(pg_uri) as conn:
            assert conn.execute(f'SELECT count(*) FROM "{schema}_staging"."{s.staging_table}"').fetchone()[0] == 0
        # The fix that keeps the rows (a comment's letter): checked again, and loaded as it is now.
        fields = lines[0].split(b"|")
        fields[3] = b"Z" + fields[3][1:]
        fixed = b"\n".join([b"|".join(fields)] + lines[1:])
        assert len(fixed) == len(original) and fixed != original
        path.write_bytes(fixed)
        assert steps.load(connect, run, s, queue=None, host="here").rows == s.rows == 25
        with psycopg.connect(pg_uri) as conn:
            assert conn.execute(f'SELECT n_comment FROM "{schema}_staging"."{s.staging_table}" '
                                f'WHERE n_nationkey = 0').fetchone()[0].startswith("Z")
    finally:
        connect().release_lease()


def test_a_batch_written_again_after_its_loads_is_not_published_until_they_load_it_again(tpch_batch, pg_uri,
                                                                                        schema, data_root):
    """A producer delivers the batch again while a run has it loaded in part (a failed group
    cleared after the fix): a stream file written since its load, or a manifest that now lists
    other files, refuses the batch's publish, naming them, with the target as it was; once the
    groups of those files load them again, the batch goes in with the files' rows as they are."""
    import json
    name, folder = tpch_batch
    batch = data_root / "steps-delivered-again"
    shutil.copytree(folder, batch)
    spec = replace(SPEC, publish="batch")
    tables = ["orders"]

    def connect() -> PostgresAdapter:
        return PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_holder="plain/run-3", lease_batch=batch.name)

    found, plan, problems, *_ = steps.check_batch(spec, tables, batch.name, streams=3)
    run = steps.set_up(connect(), plan, problems, batch.name, found, tables)
    loads = {}

    def through_switch(stream: int) -> None:
        s = steps.stream_plan(run, "orders", stream)
        steps.prepare(connect, run, s)
        loads[s.group_id] = steps.load(connect, run, s, queue=None, host="here").xcom()
        steps.validate(connect, spec, run, s, loaded=loads[s.group_id])
        steps.switch(connect, spec, run, s, loads.get)

    try:
        for stream in (1, 2, 3):
            through_switch(stream)
        before = fingerprint(pg_uri, schema, tables)
        # Delivered again: orders.1 written anew (a comment's letter, the same size and rows).
        path = batch / "orders" / "orders.1.tbl"
        lines = path.read_bytes().split(b"\n")
        fields = lines[0].split(b"|")
        fields[8] = b"Z" + fields[8][1:]
        path.write_bytes(b"\n".join([b"|".join(fields)] + lines[1:]))
        with pytest.raises(steps.StepFailed) as caught:
            steps.publish_batch(connect, run, loads.get)
        message = str(caught.value)
        assert message.startswith(f"batch {batch.name}: not published, nothing changed: the batch is not what the run "
                                  f"loaded:\n- {path} [table orders, stream 1]: ")
        assert "written again since its load read" in message and message.count("\n- ") == 1, message
        assert "clear group orders_1" in message
        assert fingerprint(pg_uri, schema, tables) == before
        # Its group loads it again: the batch is what the run loaded, but for a manifest that now
        # lists a file less (orders.3 gone from the delivery).
        through_switch(1)
        manifest = json.loads((batch / "manifest.json").read_text())
        kept = dict(manifest, files=[e for e in manifest["files"] if e["file"] != "orders/orders.3.tbl"])
        (batch / "manifest.json").write_text(json.dumps(kept))
        with pytest.raises(steps.StepFailed, match=r"manifest.json: no longer lists orders/orders.3.tbl, since this "
                                                   r"run's plan read it: the batch was delivered again"):
            steps.publish_batch(connect, run, loads.get)
        assert fingerprint(pg_uri, schema, tables) == before
        # Or other rows for a file (a stream the plan took for empty, its group skipped, has rows now).
        rows = steps.stream_plan(run, "orders", 3).rows
        recounted = dict(manifest, files=[dict(e, rows=rows + 1) if e["file"] == "orders/orders.3.tbl" else e
                                          for e in manifest["files"]])
        (batch / "manifest.json").write_text(json.dumps(recounted))
        with pytest.raises(steps.StepFailed, match=rf"manifest.json: gives orders/orders.3.tbl {rows + 1} rows, not "
                                                   rf"{rows}, since this run's plan read it"):
            steps.publish_batch(connect, run, loads.get)
        (batch / "manifest.json").write_text(json.dumps(manifest))
        # Or a stream file the plan does not have, written after it (the producer's late last file,
        # the manifest not written again): its rows would be left out of a run ending `success`.
        late = batch / "orders" / "orders.4.tbl"
        late.write_bytes(b"".join(lines[:1]) + b"\n")
        with pytest.raises(steps.StepFailed) as caught:
            steps.publish_batch(connect, run, loads.get)
        assert (f"- {late}: a file of table orders (stream 4) that this run's plan does not have (written after the "
                f"plan read the batch): its rows would be left out") in str(caught.value), str(caught.value)
        assert fingerprint(pg_uri, schema, tables) == before
        late.unlink()
        steps.publish_batch(connect, run, loads.get)
        with psycopg.connect(pg_uri) as conn:
            key = int(fields[0])
            assert conn.execute(f'SELECT o_comment FROM "{schema}".orders WHERE o_orderkey = %s',
                                (key,)).fetchone()[0].startswith("Z")
        assert fingerprint(pg_uri, schema, tables)["orders"][0] == sum(
            steps.stream_plan(run, "orders", k).rows for k in (1, 2, 3))
    finally:
        connect().release_lease()


def orders_set_up(tpch_batch, batch: Path, spec, pg_uri: str, schema: str):
    """A copy of the batch at `batch`, the orders table's run set up on it: (batch, connect, run)."""
    shutil.copytree(tpch_batch[1], batch)

    def connect() -> PostgresAdapter:
        return PostgresAdapter(spec, uri=pg_uri, schema=schema, lease_holder=f"plain/{batch.name}",
                               lease_batch=batch.name)

    found, plan, problems, *_ = steps.check_batch(spec, ["orders"], batch.name, streams=3)
    return batch, connect, steps.set_up(connect(), plan, problems, batch.name, found, ["orders"])


def loaded_and_validated(connect, spec, run: dict, stream: int, loads: dict):
    """The orders stream's prepare, load and validate, its load's result kept in `loads`."""
    s = steps.stream_plan(run, "orders", stream)
    steps.prepare(connect, run, s)
    loads[s.group_id] = steps.load(connect, run, s, queue=None, host="here").xcom()
    steps.validate(connect, spec, run, s, loaded=loads[s.group_id])
    return s


@pytest.mark.parametrize("rewritten", [2, 3])
def test_with_publish_table_the_switch_refuses_a_table_whose_file_was_written_again_after_its_load(
        tpch_batch, pg_uri, schema, data_root, rewritten):
    """`publish: table`: the table's last switch puts it in whole, so each switch first checks the
    table's files are what their loads read: a file written again since its load refuses it. Its
    own file too, where its group is one task (`tasks: single`), whose load result is not pushed
    before the task ends: the task's switch reads it from the steps it ran (own_load_first)."""
    from switchyard.airflow.operators import own_load_first
    spec = replace(SPEC, publish="table")
    batch, connect, run = orders_set_up(tpch_batch, data_root / f"steps-delivered-again-table-{rewritten}", spec,
                                        pg_uri, schema)
    loads = {}
    try:
        for stream in (1, 2, 3):
            s = loaded_and_validated(connect, spec, run, stream, loads)
            if stream == 3:
                path = batch / "orders" / f"orders.{rewritten}.tbl"
                path.write_bytes(path.read_bytes().replace(b"|", b"|", 1))     # written again, the same bytes
                before = fingerprint(pg_uri, schema, ["orders"])
                pushed = {gid: load for gid, load in loads.items() if gid != s.group_id}   # not its own yet
                with pytest.raises(steps.StepFailed, match=rf"{re.escape(str(path))} \[table orders, stream {rewritten}\]: "
                                                           rf".* written again since its load read .* clear group orders_{rewritten}"):
                    steps.switch(connect, spec, run, s, own_load_first(pushed.get, s.group_id, {"load": loads[s.group_id]}))
                assert fingerprint(pg_uri, schema, ["orders"]) == before
            else:
                assert steps.switch(connect, spec, run, s, loads.get).in_target is False
    finally:
        connect().release_lease()


def test_a_sources_file_written_again_after_its_load_is_found_there_before_the_publish(
        tpch_batch, pg_uri, schema, data_root):
    """The batch's publish cannot see a source's files (only its workers do): the source's check
    before the publish, on its queue, compares each of them with what its load read, and refuses
    the batch naming a file written again; the files as loaded pass."""
    spec = replace(SPEC, sources={"source_a": (2, 3)})
    batch, connect, run = orders_set_up(tpch_batch, data_root / "steps-delivered-again-on-a-source", spec,
                                        pg_uri, schema)
    loads = {}
    try:
        for stream in (1, 2, 3):
            s = loaded_and_validated(connect, spec, run, stream, loads)
            steps.switch(connect, spec, run, s, loads.get)
        checked = steps.source_files_as_loaded(run, spec, "source_a", loads.get, queue="source_a", host="here")
        assert checked["source"] == "source_a"
        path = batch / "orders" / "orders.2.tbl"
        path.write_bytes(path.read_bytes().replace(b"|", b"|", 1))     # written again, the same bytes
        with pytest.raises(steps.StepFailed, match=rf"on source 'source_a' are not what the run loaded .*\n- "
                                                   rf"{re.escape(str(path))} \[table orders, stream 2\]: .* written "
                                                   r"again since its load read .* clear group orders_2"):
            steps.source_files_as_loaded(run, spec, "source_a", loads.get, queue="source_a", host="here")
        # Checked on another worker of the source than the load's (the workers share the folder,
        # or hold copies): a rewrite of the same size is refused all the same, saying where it loaded.
        with pytest.raises(steps.StepFailed, match=rf"{re.escape(str(path))} \[table orders, stream 2\]: .* \(loaded "
                                                   r"on here: a copy of the batch there must keep the files' "
                                                   r"modification times, rsync -t\)"):
            steps.source_files_as_loaded(run, spec, "source_a", loads.get, queue="source_a", host="another")
        # With `publish: table`, one table's files there, before its switches: that table is kept out.
        with pytest.raises(steps.StepFailed, match=rf"^table orders of batch {batch.name}: not put in, it keeps its "
                                                   rf"contents: its files on source 'source_a' are not what the run "
                                                   rf"loaded .*\n- {re.escape(str(path))} \[table orders, stream 2\]"):
            steps.source_files_as_loaded(run, spec, "source_a", loads.get, queue="source_a", host="here",
                                         table="orders")
        assert steps.source_files_as_loaded(run, spec, "source_a", loads.get, queue="source_a", host="here",
                                            table="customer")["table"] == "customer"
        # The central site's publish does not read a source's files: this check is theirs.
        assert steps.stale_loads(spec, run, {"orders"}, loads.get) == []
        # A stream file of no source is the publish's to compare, not the source's check's.
        other = batch / "orders" / "orders.1.tbl"
        other.write_bytes(other.read_bytes())
        assert [p for p in steps.stale_loads(spec, run, {"orders"}, loads.get, "source_a") if "orders.1" in p] == []
        assert "orders.1.tbl" in steps.stale_loads(spec, run, {"orders"}, loads.get)[0]
    finally:
        connect().release_lease()


def test_a_validation_after_a_load_marked_success_by_hand_says_the_load_left_no_result(tpch_batch, pg_uri, schema,
                                                                                      data_root):
    """The group's load marked success by hand (its staging table made, nothing loaded): its
    validation fails on the row count and says the load left no result in this run."""
    batch, connect, run = orders_set_up(tpch_batch, data_root / "marked-load", SPEC, pg_uri, schema)
    try:
        s = steps.stream_plan(run, "orders", 1)
        steps.prepare(connect, run, s)
        with pytest.raises(steps.ValidationFailed) as failed:
            steps.validate(connect, SPEC, run, s, loaded_of=lambda: None)
        said = str(failed.value)
        assert "observed 0" in said and ("orders_1.load left no result in this run (marked success by hand?): the "
                                          "checks read the staging table as its last load left it") in said, said
        # The load's result at hand: no such word.
        steps.load(connect, run, s, queue=None, host="here")
        checked = steps.validate(connect, SPEC, run, s, loaded_of=lambda: {"rows": s.rows}).checks
        assert checked["success"] is True
    finally:
        connect().release_lease()


def test_a_switch_without_a_passing_validation_of_its_run_is_refused():
    """A validate task marked success by hand (after it failed, or with its load failed) leaves no
    result: the switch puts in only a staging table its group's checks passed on in this run, and
    fails at once saying so (the real scheduler's case: `pytest -m chaos tests/integration/test_reruns.py
    -k cleared_group`)."""
    from switchyard.core.batch import Manifest, ManifestEntry
    from switchyard.core.planner import plan_batch
    plan = plan_batch(SPEC, Manifest(spec="tpch", streams=1, entries=(
        ManifestEntry("nation", 1, "nation/nation.1.tbl", 2_224, 25, 0, 24),)), ["nation"])
    s = plan.stream("nation", 1)
    for validated in (None, {}, {"success": False, "checks": []}):
        with pytest.raises(steps.StepFailed, match=r"nation_1: its validation has no passing result in this run "
                                                   r"\(nation_1.validate was marked success by hand"):
            steps.require_validated(validated, s)
    steps.require_validated({"success": True, "checks": []}, s)
