"""The table's commit and readers: no normal-priority Sch-M request queues readers for long.

TRUNCATE TABLE ... WITH (PARTITIONS) and ALTER PARTITION FUNCTION ... SPLIT / MERGE ask for
their Sch-M lock at normal priority (only SWITCH takes WAIT_AT_LOW_PRIORITY), and readers
that come after a waiting request queue behind it. The commit takes its table first by a
low-priority SWITCH of an empty partition where it has one; its requests at normal priority run
under a short LOCK_TIMEOUT (commit_lock_wait_ms), and it runs again after a pause when it timed
out (error 1222) or was a deadlock's victim (1205), up to commit_attempts times. Checked on the rendered T-SQL (golden files) and on a SCRIPTED SESSION
(tests/unit/targets/mssql/test_mssql_window.py's ScriptedSession: catalog answers and control-table rows written
by hand) whose commit batch fails with SQL Server's lock time-out message a number of times.
"""
from __future__ import annotations

import dataclasses
import re

import pytest

from test_mssql_window import SPEC, ScriptedSession, adapter, commit_text, even, layout_of, orders_plan, scripted

# What pyodbc raises for SQL Server's error 1222 (its message ends each record with the number).
LOCK_TIMEOUT = ("HY000", "[HY000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Lock request time out period "
                         "exceeded. (1222) (SQLExecDirectW)")


# ... and for error 1205, the transaction chosen as a deadlock's victim (rolled back whole).
DEADLOCK = ("40001", "[40001] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]Transaction (Process ID 71) was "
                     "deadlocked on lock resources with another process and has been chosen as the deadlock victim. "
                     "Rerun the transaction. (1205) (SQLExecDirectW)")


class LockedSession(ScriptedSession):
    """A scripted session whose commit batch fails with `error` (a lock time-out unless said)
    `times` times first."""

    def __init__(self, a, partitions, times, error=LOCK_TIMEOUT):
        super().__init__(a, partitions)
        self.times = times
        self.error = error
        self.attempts = 0

    def execute(self, sql, *params):
        if " ".join(sql.split()).startswith("-- tpch.orders: batch"):
            self.attempts += 1
            if self.attempts <= self.times:
                raise RuntimeError(*self.error)
        return super().execute(sql, *params)


def staged(times, error=LOCK_TIMEOUT, **options):
    session = LockedSession(adapter(), layout_of({"b1": even(4)}), times, error)
    a = scripted(adapter(batch="b2", **options), session)
    a.commit_pause = 0.0
    plan = orders_plan(SPEC, even(4))
    a._plan_table(session, plan.table("orders"))
    for s in plan.table("orders").streams[:3]:
        a._stage(s)
    return a, session, plan.table("orders").streams[3]


def test_the_commit_runs_under_a_short_lock_timeout_not_the_load_timeout():
    text = commit_text(adapter(batch="x"), orders_plan(SPEC, even(4)), layout_of({"w": even(8)}))
    assert "SET LOCK_TIMEOUT 1000\n" in text and "SET LOCK_TIMEOUT 60000" not in text
    # Normal-priority Sch-M requests run under it; SWITCH keeps its low-priority wait.
    assert re.search(r"TRUNCATE TABLE \[tpch\]\.\[orders\] WITH \(PARTITIONS", text)
    assert "MERGE RANGE" in text and "SWITCH TO [tpch].[orders] PARTITION @partition\n        WITH (WAIT_AT_LOW_PRIORITY" in text
    custom = commit_text(adapter(batch="x", commit_lock_wait_ms=250), orders_plan(SPEC, even(4)), layout_of({"w": even(8)}))
    assert "SET LOCK_TIMEOUT 250\n" in custom and "reader then waits at most 250 ms per attempt" in custom


def test_a_commit_takes_its_table_at_low_priority_before_a_truncate_split_or_merge():
    """Replace mode begins with TRUNCATE (normal priority): the commit first switches an empty
    partition out, at low priority, to an empty table of the target's shape on its filegroup, and
    drops that table; no step before it locks the table, and it changes no row or partition."""
    text = commit_text(adapter(batch="x"), orders_plan(SPEC, even(4)), layout_of({"w": even(8)}))
    body = text.split("    BEGIN TRANSACTION\n", 1)[1]
    probe = "[tpch_staging].[orders__lock]"
    assert body.index(f"CREATE TABLE {probe} (") < body.index(
        f"ALTER TABLE [tpch].[orders] SWITCH PARTITION @partition TO {probe}\n"
        "        WITH (WAIT_AT_LOW_PRIORITY (MAX_DURATION = 1 MINUTES, ABORT_AFTER_WAIT = SELF))") < body.index(
        f"DROP TABLE {probe}") < body.index("TRUNCATE TABLE") < body.index("MERGE RANGE")
    # The partition was read empty before the transaction (sys.partitions' counts are
    # approximate): the probe is dropped only if it is empty, else the commit stops, rolled back.
    switched = body.index(f"SWITCH PARTITION @partition TO {probe}\n")
    check = body.index(f"IF EXISTS (SELECT 1 FROM {probe}) THROW 51013, N'tpch.orders: partition 1 held rows "
                       "when this commit took its lock, though read empty; nothing was changed', 1\n")
    assert switched < check < body.index(f"DROP TABLE {probe}")
    # The empty partition is the edge on fg_edge, checked by number as every step's partition.
    assert ") ON [fg_edge]\n" in body.split("SWITCH PARTITION @partition TO")[0]
    assert "IF @partition <> 1 THROW 51010" in body.split("SWITCH PARTITION @partition TO")[0]
    # Only the last partition (no upper boundary) empty: the probe switches it out, found by a key
    # just above its lower boundary.
    layout = layout_of({"w": even(8)})
    last = layout[-1]
    only_last = [p if p is last else (p if p.rows else dataclasses.replace(p, rows=1)) for p in layout]
    text = commit_text(adapter(batch="x"), orders_plan(SPEC, even(4)), only_last)
    assert last.upper is None and f"SWITCH PARTITION @partition TO {probe}\n" in text
    assert f"$PARTITION.[pf_tpch_orders]({last.lower + 1})" in text.split("SWITCH PARTITION @partition TO")[0]
    assert f"IF @partition <> {last.number} THROW 51010" in text.split("SWITCH PARTITION @partition TO")[0]
    # Without an empty partition the first request is at normal priority, under the short LOCK_TIMEOUT.
    full = [p if p.rows else dataclasses.replace(p, rows=1) for p in layout_of({"w": even(8)})]
    text = commit_text(adapter(batch="x"), orders_plan(SPEC, even(4)), full)
    assert "__lock" not in text and "SET LOCK_TIMEOUT 1000\n" in text


def test_a_commit_that_timed_out_on_a_lock_runs_again_and_goes_in():
    a, session, last = staged(times=3)
    result = a._stage(last)
    assert result["in_target"] and result["table_switched"]
    assert session.attempts == 4 and len(session.commits) == 1


def test_a_commit_chosen_as_a_deadlocks_victim_runs_again_and_goes_in():
    """The commit runs at DEADLOCK_PRIORITY LOW: in a deadlock with a reader SQL Server rolls the
    commit back (error 1205), the reader goes on, and the commit runs again."""
    text = commit_text(adapter(batch="x"), orders_plan(SPEC, even(4)), layout_of({"w": even(8)}))
    assert "SET LOCK_TIMEOUT 1000\nSET DEADLOCK_PRIORITY LOW\n" in text
    a, session, last = staged(times=2, error=DEADLOCK)
    result = a._stage(last)
    assert result["in_target"] and result["table_switched"]
    assert session.attempts == 3 and len(session.commits) == 1


def test_a_commit_that_keeps_timing_out_gives_up_after_its_attempts_naming_them():
    a, session, last = staged(times=100, commit_attempts=5)
    with pytest.raises(RuntimeError, match=r"\(1222\)"):
        a._stage(last)
    assert session.attempts == 5 and not session.commits


def test_another_error_is_not_retried():
    a, session, last = staged(times=0)
    original = session.execute

    def failing(sql, *params):
        if " ".join(sql.split()).startswith("-- tpch.orders: batch"):
            session.attempts += 1
            raise RuntimeError("42000", "[42000] [SQL Server]The partition function changed (51010) (SQLExecDirectW)")
        return original(sql, *params)
    session.execute = failing
    with pytest.raises(RuntimeError, match="51010"):
        a._stage(last)
    assert session.attempts == 1


def test_an_unpartitioned_tables_replace_runs_under_the_short_lock_timeout_as_the_deadlock_victim():
    from switchyard.core.planner import plan_tpch
    nation = plan_tpch(SPEC, 0.01, 1, ["nation"]).stream("nation", 1)
    statements = adapter().switch_sql(nation, replace_existing=True)
    assert statements[0].endswith("SET LOCK_TIMEOUT 1000") and statements[1] == "SET DEADLOCK_PRIORITY LOW"
    assert "TRUNCATE TABLE [tpch].[nation]" in statements[2]


class PrepareSession(ScriptedSession):
    """A scripted session that also takes a prepare: its own statements are recorded, not run."""

    def __init__(self, a, partitions):
        super().__init__(a, partitions)
        self.prepared: list[str] = []

    def execute(self, sql, *params):
        head = " ".join(sql.split())
        if head.startswith("UPDATE [switchyard].[planned_partitions] SET ready_at = NULL"):
            self.sent.append((sql, params))
            for p in self.planned:
                if p["staging_table"] == params[2]:
                    p["ready_at"] = None
            self._rows = []
            return self
        try:
            return super().execute(sql, *params)
        except AssertionError:  # not a switch's statement: one of the prepare's own
            self.prepared.append(head)
            self._rows = []
            return self


def test_a_group_prepared_again_after_its_switch_is_not_ready_and_holds_the_commit_lock_while_rebuilt():
    """SCRIPTED SESSION. A group run again from prepare (a cleared group, a `tasks: single` retry)
    after its switch marked it ready: prepare takes the table's commit lock (the one a table's
    last switch and the batch's publish take before they read what is ready), marks the stream
    not ready, and makes its staging table again under that lock; its next switch is not a retry."""
    pytest.importorskip("pyodbc", reason="prepare reads pyodbc's errors: needs unixODBC (libodbc.so.2)",
                        exc_type=ImportError)
    session = PrepareSession(adapter(), layout_of({"b1": even(4)}))
    a = scripted(adapter(batch="b2"), session)
    plan = orders_plan(SPEC, even(4))
    a._plan_table(session, plan.table("orders"))
    first, second = plan.table("orders").streams[:2]
    assert a._stage(first)["already_switched"] is False
    assert a._stage(first)["already_switched"] is True   # a retried switch changes nothing
    session.sent.clear()
    a.create_staging(first)
    sent = [" ".join(sql.split()) for sql, _ in session.sent]
    lock = next(i for i, (sql, params) in enumerate(session.sent)
                if "sp_getapplock" in sql and params[0] == "switchyard.commit.tpch.orders")
    unready = next(i for i, s in enumerate(sent) if s.startswith("UPDATE [switchyard].[planned_partitions] SET ready_at"))
    assert lock < unready and session.prepared, sent
    assert sent.index(session.prepared[0]) > unready
    assert next(p for p in session.planned if p["staging_table"] == first.staging_table)["ready_at"] is None
    assert a._stage(first)["already_switched"] is False
    # A group prepared for the first time takes no lock and changes no plan.
    session.sent.clear()
    a.create_staging(second)
    assert not any("sp_getapplock" in sql or "SET ready_at" in sql for sql, _ in session.sent)


def test_a_merge_or_split_reads_its_partitions_again_in_the_transaction():
    """The window was planned from sys.partitions' approximate counts: each MERGE and SPLIT is
    preceded, in the transaction, by a read of the partitions it touches (kept to COMMIT), and
    rows there stop the commit (THROW, rolled back) instead of moving, fully logged, under Sch-M."""
    text = commit_text(adapter(batch="x"), orders_plan(SPEC, even(4)), layout_of({"w": even(8)}))
    body = text.split("    BEGIN TRANSACTION\n", 1)[1]
    lines = body.splitlines()
    alters = [i for i, line in enumerate(lines) if "ALTER PARTITION FUNCTION" in line]
    assert any("MERGE RANGE" in lines[i] for i in alters) and any("SPLIT RANGE" in lines[i] for i in alters)
    for i in alters:
        value = lines[i].rsplit("(", 1)[1].rstrip(")")
        check = next(line for line in reversed(lines[:i]) if "THROW 51014" in line)
        assert check.startswith("    IF EXISTS (SELECT 1 FROM [tpch].[orders] WITH (HOLDLOCK) WHERE "
                                "$PARTITION.[pf_tpch_orders]([o_orderkey]) IN ("), check
        if "MERGE RANGE" in lines[i]:
            assert lines[i - 2] == f"    SET @partition = $PARTITION.[pf_tpch_orders]({value})"
            assert "IN (@partition, @partition + 1))" in check and lines[i - 1] == check
        else:
            assert f"IN ($PARTITION.[pf_tpch_orders]({value})))" in check
        # Nothing but the scheme's NEXT USED between the check and its ALTER.
        between = lines[lines.index(check) + 1:i]
        assert all(line.startswith("    ALTER PARTITION SCHEME") for line in between), between
