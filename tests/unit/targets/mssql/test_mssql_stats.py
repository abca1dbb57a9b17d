"""Server-wide waits and latches around a run: `server_snapshot()` / `server_delta()`.

The delta is a pure function of two snapshots, tested here with literal snapshots in the
shape `MssqlAdapter.server_snapshot()` returns (the rows of sys.dm_os_wait_stats and
sys.dm_os_latch_stats); the snapshot itself is taken against a real server in
tests/contract/test_mssql_contract.py. Snapshots travel through XCom, so they go through JSON here.
"""
from __future__ import annotations

import json

from switchyard.core.spec import load_spec
from switchyard.targets.base import TargetAdapter
from switchyard.targets.mssql import IDLE_WAITS, MssqlAdapter, snapshot_delta
from switchyard.targets.postgres import PostgresAdapter

SPEC = load_spec("tpch")

BEFORE = {
    "waits": {"PAGEIOLATCH_EX": [10, 100, 5], "WRITELOG": [1, 2, 0], "LAZYWRITER_SLEEP": [50, 50_000, 0],
              "CXPACKET": [4, 40, 4]},
    "latches": {"ALLOC_FREESPACE_CACHE": [3, 30, 12], "ACCESS_METHODS_HOBT_VIRTUAL_ROOT": [1, 5, 5]},
}
AFTER = {
    "waits": {"PAGEIOLATCH_EX": [15, 400, 9], "WRITELOG": [1, 2, 0], "LAZYWRITER_SLEEP": [80, 90_000, 0],
              "BULKOP": [2, 50, 1], "IO_COMPLETION": [6, 900, 2], "CXPACKET": [4, 40, 4]},
    "latches": {"ALLOC_FREESPACE_CACHE": [9, 230, 40], "ACCESS_METHODS_HOBT_VIRTUAL_ROOT": [1, 5, 5],
                "FGCB_ADD_REMOVE": [2, 70, 50]},
}


def adapter() -> MssqlAdapter:
    return MssqlAdapter(SPEC)


def roundtrip(snapshot: dict) -> dict:
    return json.loads(json.dumps(snapshot))


def test_delta_busiest_first_with_named_fields():
    delta = adapter().server_delta(roundtrip(BEFORE), roundtrip(AFTER))
    assert delta == {
        "waits": [
            {"wait_type": "IO_COMPLETION", "wait_ms": 900, "signal_ms": 2, "waiting_tasks": 6},
            {"wait_type": "PAGEIOLATCH_EX", "wait_ms": 300, "signal_ms": 4, "waiting_tasks": 5},
            {"wait_type": "BULKOP", "wait_ms": 50, "signal_ms": 1, "waiting_tasks": 2},
        ],
        "latches": [
            {"latch_class": "ALLOC_FREESPACE_CACHE", "wait_ms": 200, "waiting_requests": 6},
            {"latch_class": "FGCB_ADD_REMOVE", "wait_ms": 70, "waiting_requests": 2},
        ],
    }
    assert json.loads(json.dumps(delta)) == delta


def test_idle_waits_never_show_and_top_cuts():
    assert "LAZYWRITER_SLEEP" in IDLE_WAITS
    delta = snapshot_delta(BEFORE, AFTER, top=1)
    assert [w["wait_type"] for w in delta["waits"]] == ["IO_COMPLETION"]
    assert [w["latch_class"] for w in delta["latches"]] == ["ALLOC_FREESPACE_CACHE"]


def test_counters_reset_in_between_count_from_zero():
    # A restart (or DBCC SQLPERF ... CLEAR) between the snapshots: the counters start over.
    after = {"waits": {"PAGEIOLATCH_EX": [2, 30, 1]}, "latches": {}}
    delta = snapshot_delta(BEFORE, after)
    assert delta["waits"] == [{"wait_type": "PAGEIOLATCH_EX", "wait_ms": 30, "signal_ms": 1, "waiting_tasks": 2}]
    assert delta["latches"] == []


def test_empty_or_missing_snapshots():
    assert snapshot_delta({}, {}) == {"waits": [], "latches": []}
    assert snapshot_delta({}, AFTER)["waits"][0]["wait_type"] == "IO_COMPLETION"


def test_snapshot_is_json_with_the_idle_waits_left_out():
    class Snapshotting(MssqlAdapter):
        def wait_stats_snapshot(self):
            return {"PAGEIOLATCH_EX": (15, 400, 9), "SLEEP_TASK": (1, 9_999, 0)}

        def latch_stats_snapshot(self):
            return {"ALLOC_FREESPACE_CACHE": (9, 230, 40)}
    snap = Snapshotting(SPEC).server_snapshot()
    assert snap == roundtrip(snap)
    assert snap == {"waits": {"PAGEIOLATCH_EX": [15, 400, 9]}, "latches": {"ALLOC_FREESPACE_CACHE": [9, 230, 40]}}


def test_base_defaults_for_engines_without_wait_counters():
    pg = PostgresAdapter(SPEC, uri="postgresql://unused")
    assert pg.server_snapshot() is None
    assert pg.server_delta({}, {}) == {}
    assert PostgresAdapter.server_snapshot is TargetAdapter.server_snapshot


# --- how a load was logged -----------------------------------------------------------------------
# SCRIPTED DMV ANSWERS: what LOAD_SAMPLE_SQL's log columns (sys.dm_tran_database_transactions,
# sys.dm_db_partition_stats) would show, once a second, for a load of ~140-byte rows in
# batches of 100,000 (about 58 rows per 8-KB page).
from switchyard.targets.mssql.dmv import LogSample, load_logging, log_ratios  # noqa: E402


def samples(log_bytes_per_page: float, batches: int = 3, looks: int = 3) -> list[LogSample]:
    out = []
    for b in range(batches):
        for k in range(1, looks + 1):
            rows = b * 100_000 + k * 25_000
            pages = rows // 58
            in_txn = pages - (b * 100_000) // 58
            out.append(LogSample(1000 + b, int(in_txn * log_bytes_per_page), in_txn, rows, pages))
    return out


def test_a_minimally_logged_load_is_told_from_a_fully_logged_one():
    minimal = load_logging(samples(log_bytes_per_page=120), 100_000, "SIMPLE")
    assert minimal["logging"] == "minimal" and minimal["logging_basis"].startswith("measured")
    assert minimal["log_ratio"] < 0.05
    full = load_logging(samples(log_bytes_per_page=9000), 100_000, "FULL")
    assert full["logging"] == "full" and full["log_ratio"] > 1
    assert "logging_note" not in minimal and "logging_note" not in full


def test_measured_logging_that_contradicts_the_rules_is_reported():
    odd = load_logging(samples(log_bytes_per_page=9000), 100_000, "BULK_LOGGED")
    assert odd["logging"] == "full" and "where the rules say minimal" in odd["logging_note"]


def test_without_usable_samples_the_rules_decide_and_say_so():
    fast = load_logging([], 100_000, "BULK_LOGGED")
    assert fast["logging"] == "minimal" and fast["logging_basis"].startswith("rules (BULK_LOGGED recovery")
    assert load_logging([], 100_000, "FULL")["logging"] == "full"
    assert load_logging([], 100_000, None)["logging"] == "unknown"
    # One look per transaction: the rows past the last full batch give the transaction's share.
    one = [LogSample(7, 40_000 * 140 * 2, 40_000, 140_000, 140_000 // 58)]
    assert log_ratios(one, 100_000) and load_logging(one, 100_000, "FULL")["logging"] == "full"
    # A look between batches (no open transaction) says nothing.
    assert log_ratios([LogSample(None, None, None, 200_000, 3448)], 100_000) == []


def test_the_sampling_queries_parse():
    from switchyard.targets.mssql.dmv import BULK_SESSION_SQL, LOAD_SAMPLE_SQL, SESSION_STATS_SQL
    from test_mssql_tsql import sqlfluff_parses
    for sql in (LOAD_SAMPLE_SQL, BULK_SESSION_SQL, SESSION_STATS_SQL):
        assert sqlfluff_parses(sql.replace("?", "@p")), sql
