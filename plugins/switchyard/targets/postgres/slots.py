"""The COPY slot guard: never more concurrent COPYs into a PostgreSQL target than it has slots.

The record-load method runs one load per server core. Airflow's pool caps the *tasks* that
load, but a load task also spends time starting, connecting and reporting, during which its
pool slot keeps the server idle. The guard moves the cap to the server itself, around the COPY
alone: a load takes one of `slots` advisory locks just before its COPY and gives it back right
after it, before or after the commit (`release` below). The pool can then admit more load
tasks than the server has cores, so one task's start-up overlaps another's COPY, and the
server still never runs more COPYs than slots.

The commit of a COPY FREEZE into a table created in its transaction, with `wal_level=minimal`,
writes the table's files to disk and waits for them (no WAL was written for them): seconds of
I/O for a big file, during which the session uses no CPU. Released before the commit, the slot
goes to the next load while this one's files are synced.

Session-level advisory locks (`pg_try_advisory_lock(namespace, slot)`, and while all are
taken a bounded blocking `pg_advisory_lock` on one of them) are what makes it safe:
the server releases them when the session ends, so a load whose process is killed (SIGKILL, a
lost worker) frees its slot as soon as its connection closes; no row is left behind to clean up.
Locks are per database: loads into one database share its slots.
"""
from __future__ import annotations

import random
import time
from contextlib import contextmanager
from typing import Any, Iterator

# The first key of every slot lock: a constant no other application is likely to use with the
# two-key form (0x53594344, "SYCD"). The second key is the slot number.
NAMESPACE = 0x53594344
# While every slot is taken, a load waits *in the server* for one slot (a blocking advisory
# lock, bounded by a lock timeout of this many seconds), then looks at all of them again: a
# slot freed while the load waits on it is handed over at once (no polling gap, which would
# leave the server's core idle between two COPYs), and one freed elsewhere is found within
# this bound.
BLOCK_SECONDS = 0.25


class NoSlot(TimeoutError):
    """Every slot stayed taken for the whole wait."""


def try_slot(conn: Any, slots: int) -> int | None:
    """Take a free slot (0-based) on this connection's session, or None when all are taken.

    Slots are tried from a random start so that waiting loads do not all contend for slot 0.
    The lock outlives the transaction that took it (a session lock); the transaction is
    committed here so that the load's own transaction starts clean (COPY FREEZE needs its
    table truncated in the load's transaction, and a load must never run inside a leftover
    transaction that closing the connection would roll back)."""
    start = random.randrange(slots)
    try:
        with conn.cursor() as cur:
            for i in range(slots):
                slot = (start + i) % slots
                cur.execute("SELECT pg_try_advisory_lock(%s::int, %s::int)", (NAMESPACE, slot))
                if cur.fetchone()[0]:
                    return slot
        return None
    finally:
        conn.commit()


def wait_slot(conn: Any, slots: int, seconds: float) -> int | None:
    """Wait up to `seconds` in the server for one slot, chosen at random; the slot, or None.

    The lock timeout is the transaction's own (SET LOCAL): the load's statements keep theirs.
    A timed-out wait rolls its transaction back; a granted lock is a session lock and
    outlives the commit."""
    import psycopg
    slot = random.randrange(slots)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET LOCAL lock_timeout = '{max(1, int(seconds * 1000))}ms'")
            cur.execute("SELECT pg_advisory_lock(%s::int, %s::int)", (NAMESPACE, slot))
        conn.commit()
        return slot
    except psycopg.errors.LockNotAvailable:
        conn.rollback()
        return None


def _unlock(conn: Any, slot: int) -> None:
    # Not transactional: the session lock goes when this runs, whatever the transaction does.
    with conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_unlock(%s::int, %s::int)", (NAMESPACE, slot))


def release_slot(conn: Any, slot: int) -> None:
    _unlock(conn, slot)
    conn.commit()


@contextmanager
def copy_slot(conn: Any, slots: int, wait_seconds: float) -> Iterator[dict]:
    """Hold one of `slots` COPY slots on `conn` (autocommit or between transactions) for the
    block. Yields {"slot", "waited_seconds", "release"}; raises NoSlot after `wait_seconds`.
    `release()` gives the slot back at once, also inside the block's transaction (an advisory
    session lock is not transactional: the unlock takes effect when it runs, and the
    transaction's commit or rollback does not undo it); the slot is released at the end of
    the block otherwise. slots <= 0: no guard (the block runs at once)."""
    info: dict = {"slot": None, "waited_seconds": 0.0, "release": lambda: None}
    if slots <= 0:
        yield info
        return
    started = time.monotonic()
    while (slot := try_slot(conn, slots)) is None:
        left = wait_seconds - (time.monotonic() - started)
        if left <= 0:
            raise NoSlot(f"all {slots} COPY slots of the target stayed taken for {wait_seconds:.0f}s")
        slot = wait_slot(conn, slots, min(BLOCK_SECONDS, left))
        if slot is not None:
            break
    released = False

    def release() -> None:
        nonlocal released
        if not released:
            _unlock(conn, slot)  # inside the block's transaction: no commit here
            released = True

    info.update(slot=slot, waited_seconds=round(time.monotonic() - started, 4), release=release)
    try:
        yield info
    finally:
        if not released:
            released = True
            try:
                release_slot(conn, slot)
            except Exception:  # noqa: BLE001 - a broken connection lost its session, and the lock with it
                pass

