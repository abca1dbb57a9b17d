"""The slot guard's hand-over rule (the guard itself runs against the real server in
tests/integration/test_copy_slots.py)."""
from __future__ import annotations

from switchyard.targets.postgres.slots import size_key, stands_back


def test_a_waiting_load_stands_back_while_shorter_ones_would_take_every_free_slot():
    # One slot, taken or just freed, one shorter load waiting: it is that load's.
    assert stands_back(slots=1, held=1, shorter=1, free_before=False)
    assert stands_back(slots=1, held=0, shorter=1, free_before=False)
    # Nobody shorter waits: compete for it.
    assert not stands_back(slots=1, held=1, shorter=0, free_before=False)
    # Two free slots, one shorter waiter: one is left over.
    assert not stands_back(slots=4, held=2, shorter=1, free_before=False)
    assert stands_back(slots=4, held=2, shorter=2, free_before=False)


def test_a_slot_free_at_two_looks_goes_to_whoever_sees_it():
    assert not stands_back(slots=2, held=1, shorter=3, free_before=True)
    # Free before but taken now: stand back again.
    assert stands_back(slots=2, held=2, shorter=3, free_before=True)


def test_sizes_are_kib_within_the_lock_keys_int4():
    assert [size_key(n) for n in (0, 1023, 1024, 5 << 20)] == [0, 0, 1, 5 << 10]
    assert size_key(1 << 50) == 2**31 - 1 and size_key(-5) == 0
