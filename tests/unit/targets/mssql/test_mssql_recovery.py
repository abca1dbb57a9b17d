"""The recovery model and the loads: detected, explained, never changed, never a broken log chain.

No SQL Server runs here. The cursor below gives SCRIPTED DMV ANSWERS: the rows RECOVERY_SQL
(sys.databases, sys.database_recovery_status, sys.database_mirroring,
sys.dm_hadr_database_replica_states, sys.availability_groups) and LAST_LOG_BACKUP_SQL
(msdb.dbo.backupset) would return for the database described, written by hand. The
adapter's own code reads them; the advice is a pure function of what it read. The same
queries against a real server run in tests/contract/test_mssql_contract.py.
"""
from __future__ import annotations

import re
from datetime import datetime

from switchyard.core.spec import load_spec
from switchyard.targets.mssql import MssqlAdapter
from switchyard.targets.mssql.recovery import LAST_LOG_BACKUP_SQL, RECOVERY_SQL, RecoveryState, recovery_advice

SPEC = load_spec("tpch")
TB = 10 ** 12


class ScriptedCursor:
    """SCRIPTED DMV ANSWERS for one database: answers exactly the recovery queries."""

    def __init__(self, row: tuple, last_log_backup: datetime | None = None, msdb_readable: bool = True):
        self.answers = {RECOVERY_SQL: row, LAST_LOG_BACKUP_SQL: (last_log_backup,)}
        self.msdb_readable = msdb_readable
        self.sent: list[str] = []
        self._row = None

    def execute(self, sql: str, *params):
        self.sent.append(sql)
        if sql == LAST_LOG_BACKUP_SQL and not self.msdb_readable:
            raise PermissionError("The SELECT permission was denied on the object 'backupset' (229)")
        self._row = self.answers[sql]
        return self

    def fetchone(self):
        return self._row


# (name, recovery_model_desc, log_reuse_wait_desc, in_availability_group, availability group,
#  replica role, synchronization_state_desc, mirrored, mirroring_role_desc, log_chain)
AG_FULL = ("warehouse", "FULL", "AVAILABILITY_REPLICA", 1, "ag_sales", "PRIMARY", "SYNCHRONIZED", 0, None, 1)
MIRRORED = ("warehouse", "FULL", "DATABASE_MIRRORING", 0, None, None, None, 1, "PRINCIPAL", 1)
FULL_CHAIN = ("warehouse", "FULL", "LOG_BACKUP", 0, None, None, None, 0, None, 1)
FULL_NO_CHAIN = ("warehouse", "FULL", "NOTHING", 0, None, None, None, 0, None, 0)
BULK_CHAIN = ("warehouse", "BULK_LOGGED", "NOTHING", 0, None, None, None, 0, None, 1)
SIMPLE = ("warehouse", "SIMPLE", "NOTHING", 0, None, None, None, 0, None, 0)


def state_of(row, **kw) -> RecoveryState:
    cursor = ScriptedCursor(row, **kw)
    state = MssqlAdapter(SPEC).recovery_state(cursor)
    assert cursor.sent[0] == RECOVERY_SQL
    return state


def advises_simple(text: str) -> bool:
    """Does the text advise switching to SIMPLE (as opposed to warning against it)?"""
    return bool(re.search(r"(switch|set|use|choose)[^.]*\bSIMPLE\b", text, re.I)) and "Never switch to SIMPLE" not in text


def test_full_recovery_database_in_an_availability_group():
    """SCRIPTED DMV ANSWERS: the primary replica of a synchronized availability database."""
    state = state_of(AG_FULL, last_log_backup=datetime(2026, 11, 23, 1, 45))
    assert (state.in_availability_group, state.availability_group, state.replica_role) == (True, "ag_sales", "PRIMARY")
    assert state.log_chain and not state.minimal_logging
    advice = recovery_advice(state, load_bytes=1 * TB)
    assert advice.minimal is False and advice.warning is True
    text = advice.text
    assert "every load is fully logged, not minimally" in text
    assert "must use the FULL recovery model; do not change it" in text
    assert "about 1.0 TB of log, all of it sent to every secondary replica" in text
    assert "log_send_queue_size" in text and "redo_queue_size" in text
    # Never advice that would take the database out of FULL.
    assert "BULK_LOGGED" not in text and not advises_simple(text) and "SET RECOVERY" not in text


def test_a_secondary_replica_is_told_to_load_on_the_primary():
    state = state_of(AG_FULL[:5] + ("SECONDARY",) + AG_FULL[6:])
    assert "connect to the primary" in recovery_advice(state).text


def test_mirrored_database_keeps_full():
    text = recovery_advice(state_of(MIRRORED)).text
    assert "Database mirroring requires the FULL recovery model; do not change it" in text
    assert "BULK_LOGGED" not in text and not advises_simple(text)


def test_full_with_a_log_chain_never_breaks_it():
    state = state_of(FULL_CHAIN, last_log_backup=datetime(2026, 11, 23, 1, 45))
    advice = recovery_advice(state, load_bytes=40 * 10 ** 9)
    assert advice.minimal is False and advice.warning
    text = advice.text
    assert "log backup chain (last log backup 2026-11-23 01:45)" in text
    assert "switch to BULK_LOGGED for the load window, which keeps the chain" in text
    assert "Never switch to SIMPLE: that breaks the log chain" in text
    assert "cannot be restored to a point in time" in text
    assert not advises_simple(text)


def test_full_without_a_chain_has_none_to_break():
    advice = recovery_advice(state_of(FULL_NO_CHAIN, msdb_readable=False))
    assert not advice.minimal and "No chain exists to break" in advice.text


def test_minimal_under_simple_and_bulk_logged_with_the_price_said():
    assert recovery_advice(state_of(SIMPLE)).minimal is True
    bulk = recovery_advice(state_of(BULK_CHAIN), load_bytes=5 * 10 ** 9)
    assert bulk.minimal and not bulk.warning
    assert "holds the extents the load wrote (about 5.0 GB)" in bulk.text


def test_the_scripted_queries_are_the_ones_the_adapter_sends_and_they_parse():
    from test_mssql_tsql import sqlfluff_parses
    assert sqlfluff_parses(RECOVERY_SQL) and sqlfluff_parses(LAST_LOG_BACKUP_SQL)
    cursor = ScriptedCursor(SIMPLE)
    MssqlAdapter(SPEC).recovery_state(cursor)
    assert cursor.sent == [RECOVERY_SQL, LAST_LOG_BACKUP_SQL]


def test_the_setup_script_says_how_loads_will_be_logged_and_changes_nothing():
    from switchyard.core.planner import plan_tpch
    setup = MssqlAdapter(SPEC).setup_sql(plan_tpch(SPEC, 0.01, 2, ["orders"]))
    check = setup[0]
    assert "replica_id IS NOT NULL" in check and "mirroring_guid IS NOT NULL" in check
    assert "last_log_backup_lsn FROM sys.database_recovery_status" in check and check.rstrip().endswith("PRINT @logging")
    assert not any("SET RECOVERY" in s for s in setup)
