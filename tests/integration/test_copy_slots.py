"""The COPY slot guard on a real server: never more COPYs at once than slots, and a killed
load gives its slot back.

The server itself is the witness: `pg_stat_progress_copy` lists every COPY in progress, and
is sampled all through the loads.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path

import psycopg
import pytest

from switchyard.core.batch import read_manifest
from switchyard.core.planner import StreamPlan, plan_batch
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.postgres import PostgresAdapter

SPEC = load_spec("tpch")


@pytest.fixture
def orders(pg_uri, tpch_batch, schema):
    name, folder = tpch_batch
    plan = plan_batch(SPEC, read_manifest(folder, SPEC), ["orders"])
    PostgresAdapter(SPEC, uri=pg_uri, schema=schema).setup(plan)
    return plan, folder


def _frozen_feed(fifo: Path, source: Path, resume: threading.Event) -> None:
    """Half of `source` into a named pipe, then nothing until `resume`: a COPY held open."""
    os.mkfifo(fifo)

    def feed():
        data = source.read_bytes()
        try:
            with open(fifo, "wb") as out:
                out.write(data[: len(data) // 2])
                out.flush()
                if resume.wait(60):
                    out.write(data[len(data) // 2:])
        except BrokenPipeError:
            pass
    threading.Thread(target=feed, daemon=True).start()


class CopySampler(threading.Thread):
    """The most COPYs the server ran at once into this test's staging tables."""

    def __init__(self, uri: str, staging_schema: str):
        super().__init__(daemon=True)
        self.uri, self.staging_schema = uri, staging_schema
        self.most = 0
        self.samples = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.uri, autocommit=True) as conn:
            while not self.stop.is_set():
                n = conn.execute("SELECT count(*) FROM pg_stat_progress_copy p JOIN pg_class c ON c.oid = p.relid "
                                 "JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = %s",
                                 (self.staging_schema,)).fetchone()[0]
                self.most = max(self.most, n)
                self.samples += 1
                time.sleep(0.01)


def _slots_held(conn, *, pid: int | None = None, copying_into: str | None = None) -> list[int]:
    """The backends holding a COPY slot of this database: the one with this pid, or those
    whose COPY runs into a table of the schema `copying_into`. Other tests load into the same
    database at the same time, and their loads take slots too."""
    from switchyard.targets.postgres.slots import NAMESPACE
    return [row[0] for row in conn.execute(
        "SELECT l.pid FROM pg_locks l "
        "WHERE l.locktype = 'advisory' AND l.classid = %s::oid AND l.objsubid = 2 AND l.granted "
        "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
        "AND (%s::int IS NULL OR l.pid = %s::int) "
        "AND (%s::text IS NULL OR l.pid IN (SELECT p.pid FROM pg_stat_progress_copy p "
        "JOIN pg_class c ON c.oid = p.relid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s::text))",
        (NAMESPACE, pid, pid, copying_into, copying_into)).fetchall()]


def test_two_loads_on_a_one_slot_target_never_copy_at_once(pg_uri, orders, schema, tmp_path):
    plan, folder = orders
    first, second = plan.stream("orders", 1), plan.stream("orders", 2)
    adapters = [PostgresAdapter(SPEC, uri=pg_uri, schema=schema, copy_slots=1) for _ in range(2)]
    for a, s in zip(adapters, (first, second)):
        a.prepare(s)
    sampler = CopySampler(pg_uri, adapters[0].staging_schema)
    sampler.start()
    resume = threading.Event()
    _frozen_feed(tmp_path / "orders.1.fifo", folder / first.file, resume)
    results: dict = {}
    held = threading.Thread(target=lambda: results.update(first=adapters[0].load(first, tmp_path / "orders.1.fifo")))
    held.start()
    deadline = time.monotonic() + 20
    while sampler.most < 1 and time.monotonic() < deadline:  # the first load is in its COPY
        time.sleep(0.02)
    waiting = threading.Thread(target=lambda: results.update(second=adapters[1].load(second, folder / second.file)))
    waiting.start()
    waiting.join(1.5)
    assert waiting.is_alive(), "the second load ran while the only slot was held"
    resume.set()
    held.join(30)
    waiting.join(30)
    sampler.stop.set()
    sampler.join(5)
    assert results["first"].rows == first.rows and results["second"].rows == second.rows
    assert sampler.samples > 50 and sampler.most == 1
    assert results["second"].details["copy_slot_wait_seconds"] >= 1.0
    assert {results["first"].details["copy_slot"], results["second"].details["copy_slot"]} == {0}


def _load_in_child(uri: str, schema: str, stream: dict, path: str) -> None:
    PostgresAdapter(SPEC, uri=uri, schema=schema, copy_slots=1).load(StreamPlan(**stream), Path(path))


def test_a_killed_load_frees_its_slot(pg_uri, orders, schema, tmp_path):
    plan, folder = orders
    stream = plan.stream("orders", 1)
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, copy_slots=1, copy_slot_wait_seconds=20)
    adapter.prepare(stream)
    resume = threading.Event()
    _frozen_feed(tmp_path / "orders.1.fifo", folder / stream.file, resume)
    child = multiprocessing.get_context("fork").Process(
        target=_load_in_child, args=(pg_uri, schema, stream.to_dict(), str(tmp_path / "orders.1.fifo")))
    child.start()
    # Autocommit: inside one transaction pg_stat_activity is a snapshot that never changes.
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        try:
            deadline = time.monotonic() + 20
            while (not (holders := _slots_held(conn, copying_into=adapter.staging_schema))
                   and time.monotonic() < deadline):
                time.sleep(0.05)
            assert len(holders) == 1, "the child's load holds the one slot"
            # A load that finds the slot taken waits, then says so (worth a retry, not bad data).
            impatient = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, copy_slots=1, copy_slot_wait_seconds=0.5)
            with pytest.raises(TargetError, match="COPY slots") as caught:
                impatient.load(stream, folder / stream.file)
            assert caught.value.permanent is False
        finally:
            # Killed whatever happened above: a child left alive would keep the slot.
            os.kill(child.pid, signal.SIGKILL)
            child.join(10)
            resume.set()
        assert child.exitcode == -signal.SIGKILL
        # The server ends the killed client's session, and its lock with it.
        result = adapter.load(stream, folder / stream.file)
        assert result.rows == stream.rows
        assert result.details["copy_slot_wait_seconds"] < 20
        assert _slots_held(conn, pid=holders[0]) == [], "the killed load's session kept its slot"


def test_the_slot_settings_in_a_connections_extra_reach_the_adapter_not_the_driver(pg_uri, orders, schema,
                                                                                    monkeypatch):
    """PostgresHook hands a connection's extra keys to psycopg as connection options, and psycopg
    refuses unknown ones: the guard's own keys are the adapter's and must not reach the driver."""
    import json
    from urllib.parse import urlsplit
    from switchyard.airflow.connections import adapter_for
    u = urlsplit(pg_uri)
    conn = {"conn_type": "postgres", "host": u.hostname, "port": u.port, "login": u.username,
            "password": u.password, "schema": u.path.lstrip("/"),
            "extra": {"copy_slots": 1, "copy_slot_wait_seconds": 7, "copy_slot_release": "commit",
                      "application_name": "switchyard-extra"}}
    monkeypatch.setenv("AIRFLOW_CONN_SY_SLOTS_EXTRA", json.dumps(conn))
    # The connection names its client itself: the step's own name does not replace it.
    adapter = adapter_for("sy_slots_extra", SPEC, schema=schema, session_name="switchyard:orders_1.load")
    assert (adapter.copy_slots, adapter.copy_slot_wait_seconds, adapter.copy_slot_release) == (1, 7.0, "commit")
    plan, folder = orders
    s = plan.stream("orders", 1)
    adapter.prepare(s)
    assert adapter.load(s, folder / s.file).rows == s.rows
    with adapter.connection() as c:
        assert c.execute("SHOW application_name").fetchone()[0] == "switchyard-extra", \
            "the driver's own extra keys still reach it"


@pytest.mark.parametrize("release", ["copy", "commit"])
def test_the_slot_goes_back_before_the_commit_or_after_it(pg_uri, orders, schema, monkeypatch, release):
    """`copy_slot_release`: "copy" (the default) frees the slot while the load's transaction is
    still open, so that the next load COPYs while this one's commit writes its files to disk;
    "commit" frees it after the commit. Seen from another session at the moment of release:
    the slots held, and the lock the load's TRUNCATE holds on its staging table until it ends."""
    from switchyard.targets.postgres import slots as slot_guard
    plan, folder = orders
    stream = plan.stream("orders", 1)
    kwargs = {} if release == "copy" else {"copy_slot_release": release}
    adapter = PostgresAdapter(SPEC, uri=pg_uri, schema=schema, copy_slots=1, **kwargs)
    assert adapter.copy_slot_release == release
    adapter.prepare(stream)
    seen: list[tuple[int, int]] = []
    real = slot_guard.copy_slot

    def watch(conn):
        with psycopg.connect(pg_uri, autocommit=True) as other:
            locks = other.execute(
                "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE l.pid = %s AND n.nspname = %s "
                "AND c.relname = %s AND l.mode = 'AccessExclusiveLock'",
                (conn.info.backend_pid, adapter.staging_schema, stream.staging_table)).fetchone()[0]
            seen.append((len(_slots_held(other, pid=conn.info.backend_pid)), locks))

    @slot_guard.contextmanager
    def spied(conn, slots, wait_seconds):
        with real(conn, slots, wait_seconds) as info:
            release_now = info["release"]

            def release_and_look():
                release_now()
                watch(conn)
            info["release"] = release_and_look
            yield info
        if not seen:  # released at the end of the block: after the commit
            watch(conn)

    monkeypatch.setattr(slot_guard, "copy_slot", spied)
    result = adapter.load(stream, folder / stream.file)
    assert result.rows == stream.rows
    slots_held, table_locked = seen[0]
    assert slots_held == 0
    assert table_locked == (1 if release == "copy" else 0)
    with psycopg.connect(pg_uri) as conn:
        assert conn.execute(f'SELECT count(*) FROM "{adapter.staging_schema}"."{stream.staging_table}"'
                            ).fetchone()[0] == stream.rows


def test_an_unknown_slot_release_is_refused(pg_uri, schema):
    with pytest.raises(TargetError, match="copy_slot_release"):
        PostgresAdapter(SPEC, uri=pg_uri, schema=schema, copy_slot_release="never")
