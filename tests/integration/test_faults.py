"""Faults on a real server: a killed load, a server restart mid-load, a reader holding a lock.

These run the adapter's code paths (the ones the operators call) in real processes
against a PostgreSQL server of their own, so restarting it disturbs nothing else. A
retry here does what Airflow's retry of the failed task does: it runs that one step
again (a retried `load` does not re-run `prepare`).
"""
from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import psycopg
import pytest

from helpers import TEST_STATE, free_port, only_streams, publish
from switchyard.core.batch import read_manifest
from switchyard_dev.embedded import EmbeddedPostgres
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.postgres import PostgresAdapter

SPEC = load_spec("tpch")
pytestmark = pytest.mark.chaos


@pytest.fixture(scope="module")
def fault_server(tmp_path_factory):
    # Not under pytest's temporary folder: pytest makes its root private (0700) at every
    # session start, which shuts out the server's own user when it runs as root.
    TEST_STATE.mkdir(parents=True, exist_ok=True)  # a fresh clone has none yet when make chaos runs first
    root = Path(tempfile.mkdtemp(prefix="faultpg-", dir=TEST_STATE))
    server = EmbeddedPostgres(root=root, port=free_port())
    server.start()
    yield server
    server.stop("immediate")
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def setup(fault_server, tpch_batch, schema):
    name, folder = tpch_batch
    plan = plan_batch(SPEC, read_manifest(folder, SPEC), ["orders"])
    adapter = PostgresAdapter(SPEC, uri=fault_server.uri(), schema=schema, lock_timeout_seconds=2)
    adapter.setup(plan)
    yield adapter, plan, folder
    with psycopg.connect(fault_server.uri(), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}_staging" CASCADE')


def _slow_feed(fifo: Path, source: Path, stop_after: int, resume: threading.Event) -> None:
    """Writes the first `stop_after` bytes of `source` into the FIFO and holds it open until
    `resume` is set (then writes the rest): a load frozen in the middle of its COPY."""
    data = source.read_bytes()
    try:
        with open(fifo, "wb") as out:
            out.write(data[:stop_after])
            out.flush()
            if resume.wait(60):
                out.write(data[stop_after:])
    except BrokenPipeError:
        pass


def _load_in_child(uri: str, schema: str, stream: dict, path: str, die_after: bool) -> None:
    from switchyard.core.planner import StreamPlan
    PostgresAdapter(SPEC, uri=uri, schema=schema).load(StreamPlan(**stream), Path(path))
    if die_after:  # the task process dies after its COPY committed, before Airflow hears of it
        os.kill(os.getpid(), signal.SIGKILL)


def _wait_for_copy(uri: str, table: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(uri, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT tuples_processed FROM pg_stat_progress_copy p "
                               "JOIN pg_class c ON c.oid = p.relid WHERE c.relname = %s", (table,)).fetchone()
            if row and row[0] > 0:
                return
            time.sleep(0.05)
    raise AssertionError(f"no COPY into {table} in progress")


def _retry_load_and_switch(adapter: PostgresAdapter, stream, path: Path) -> int:
    """What the rest of the run does: the retried load, then validate's check and the switch;
    returns the rows now in the partition."""
    result = adapter.load(stream, path)
    adapter.switch(stream)
    adapter.publish_batch([stream])  # the run's batch is this one stream
    assert result.rows == stream.rows
    return adapter.fetch(f'SELECT count(*) FROM "{adapter.schema}"."{stream.partition_table}"')[0][0]


def _frozen_feed(fifo: Path, source: Path, stop_after: int) -> tuple[Path, threading.Event]:
    """A named pipe fed with the first `stop_after` bytes of `source`, then held open: the
    load reading it freezes mid-COPY until the returned event is set."""
    os.mkfifo(fifo)
    resume = threading.Event()
    threading.Thread(target=_slow_feed, args=(fifo, source, stop_after, resume), daemon=True).start()
    return fifo, resume


def test_load_killed_mid_copy_then_retried_loads_exactly_once(fault_server, setup, tmp_path):
    adapter, plan, folder = setup
    stream = plan.stream("orders", 2)
    adapter.setup(only_streams(plan, stream))  # a batch of this one stream: its switch is the table's
    source = folder / stream.file
    adapter.prepare(stream)
    fifo, resume = _frozen_feed(tmp_path / "orders.2.fifo", source, source.stat().st_size // 2)
    ctx = multiprocessing.get_context("fork")
    child = ctx.Process(target=_load_in_child,
                        args=(fault_server.uri(), adapter.schema, stream.to_dict(), str(fifo), False))
    child.start()
    _wait_for_copy(fault_server.uri(), stream.staging_table)
    os.kill(child.pid, signal.SIGKILL)
    child.join(10)
    resume.set()
    assert child.exitcode == -signal.SIGKILL
    # Nothing of the killed load is visible: the COPY's transaction never committed.
    time.sleep(0.5)
    assert adapter.fetch(f'SELECT count(*) FROM "{adapter.staging_schema}"."{stream.staging_table}"')[0][0] == 0
    assert _retry_load_and_switch(adapter, stream, source) == stream.rows
    assert adapter.row_count("orders") == stream.rows


def test_load_killed_after_its_commit_then_retried_loads_exactly_once(fault_server, setup):
    adapter, plan, folder = setup
    stream = plan.stream("orders", 2)
    adapter.setup(only_streams(plan, stream))  # a batch of this one stream: its switch is the table's
    source = folder / stream.file
    adapter.prepare(stream)
    child = multiprocessing.get_context("fork").Process(
        target=_load_in_child, args=(fault_server.uri(), adapter.schema, stream.to_dict(), str(source), True))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    # The killed attempt committed: its rows are in staging, its trailing column dropped.
    assert adapter.fetch(f'SELECT count(*) FROM "{adapter.staging_schema}"."{stream.staging_table}"')[0][0] \
        == stream.rows
    assert _retry_load_and_switch(adapter, stream, source) == stream.rows
    assert adapter.row_count("orders") == stream.rows


def test_server_restart_mid_load_is_a_retryable_failure(fault_server, setup, tmp_path):
    adapter, plan, folder = setup
    stream = plan.stream("orders", 1)
    adapter.setup(only_streams(plan, stream))  # a batch of this one stream: its switch is the table's
    source = folder / stream.file
    adapter.prepare(stream)
    fifo, resume = _frozen_feed(tmp_path / "orders.1.fifo", source, source.stat().st_size // 3)
    errors: list[BaseException] = []

    def load():
        try:
            adapter.load(stream, fifo)
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            errors.append(exc)

    loader = threading.Thread(target=load)
    loader.start()
    _wait_for_copy(fault_server.uri(), stream.staging_table)
    fault_server.restart("immediate")
    resume.set()
    loader.join(30)
    assert len(errors) == 1 and isinstance(errors[0], TargetError)
    assert errors[0].permanent is False, "a lost server is retried, not failed for good"
    assert "connection lost while loading" in str(errors[0]), str(errors[0])
    assert _retry_load_and_switch(adapter, stream, source) == stream.rows


def test_publish_waits_a_bounded_time_for_a_reader_then_succeeds(fault_server, setup):
    adapter, plan, folder = setup
    stream = plan.stream("orders", 3)
    one = only_streams(plan, stream)
    adapter.setup(one)  # a batch of this one stream
    adapter.prepare(stream)
    adapter.load(stream, folder / stream.file)
    adapter.switch(stream)
    publish(adapter, one)  # the partition now exists; a rerun must DETACH it
    adapter.setup(one)  # the batch again
    adapter.prepare(stream)
    adapter.load(stream, folder / stream.file)

    reader = psycopg.connect(fault_server.uri())
    reader.execute(f'SELECT count(*) FROM "{adapter.schema}"."orders"')  # holds ACCESS SHARE until commit
    # The switch stages the table in the next version: it never waits for the target's readers.
    started = time.monotonic()
    assert adapter.switch(stream)["in_target"] is False
    assert time.monotonic() - started < 2
    started = time.monotonic()
    with pytest.raises(TargetError, match="waited 2s for a lock") as caught:
        publish(adapter, one)
    waited = time.monotonic() - started
    assert caught.value.permanent is False
    assert waited < 10, "the publish must give up after lock_timeout, not block readers indefinitely"
    # The failed attempt changed nothing: the old partition is still attached, the next version ready.
    assert adapter.row_count("orders") == stream.rows
    reader.commit()
    reader.close()
    result = publish(adapter, one)
    assert result["by_table"]["orders"]["removed"] == [stream.partition_table]
    assert result["attach_scan_skipped"] is True
    assert adapter.row_count("orders") == stream.rows
