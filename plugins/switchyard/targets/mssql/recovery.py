"""The database's recovery model and what it means for the loads: minimally logged or not,
and what minimal logging would cost or require here.

Minimal logging of a bulk load needs the SIMPLE or BULK_LOGGED recovery model, TABLOCK and
a heap (or an empty table); every load here takes a table lock on an empty heap, so the
recovery model decides. Switchyard never changes the recovery model and never advises one
that breaks a log backup chain: FULL -> SIMPLE ends the chain (log backups fail until the
next full or differential backup); FULL -> BULK_LOGGED keeps it. An availability database
and a mirrored one must stay in FULL recovery: there every load is fully logged, and the
advice is about the log, not the model.

The state comes from one query (RECOVERY_SQL) and, where msdb is readable, the last log
backup's time (LAST_LOG_BACKUP_SQL); `recovery_advice` is a pure function of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

# sys.databases.replica_id is set for an availability database (2012+);
# sys.dm_hadr_database_replica_states names the group and this replica's role;
# sys.database_mirroring.mirroring_guid is set for a mirrored database;
# sys.database_recovery_status.last_log_backup_lsn is NULL exactly when no log backup can be
# taken (SIMPLE, or no full backup since the chain began): non-NULL means a log chain exists.
RECOVERY_SQL = """SELECT d.name, d.recovery_model_desc, d.log_reuse_wait_desc,
       CASE WHEN d.replica_id IS NULL THEN 0 ELSE 1 END AS in_availability_group,
       ag.name AS availability_group,
       CASE WHEN hrs.is_primary_replica = 1 THEN N'PRIMARY' WHEN hrs.is_primary_replica = 0 THEN N'SECONDARY' END,
       hrs.synchronization_state_desc,
       CASE WHEN m.mirroring_guid IS NULL THEN 0 ELSE 1 END AS mirrored,
       m.mirroring_role_desc,
       CASE WHEN rs.last_log_backup_lsn IS NULL THEN 0 ELSE 1 END AS log_chain
FROM sys.databases AS d
JOIN sys.database_recovery_status AS rs ON rs.database_id = d.database_id
LEFT JOIN sys.database_mirroring AS m ON m.database_id = d.database_id
LEFT JOIN sys.dm_hadr_database_replica_states AS hrs ON hrs.database_id = d.database_id AND hrs.is_local = 1
LEFT JOIN sys.availability_groups AS ag ON ag.group_id = hrs.group_id
WHERE d.database_id = DB_ID()"""
# Best effort: msdb's backup history may not be readable by the loading login.
LAST_LOG_BACKUP_SQL = ("SELECT MAX(backup_finish_date) FROM msdb.dbo.backupset "
                       "WHERE database_name = DB_NAME() AND [type] = 'L'")


@dataclass(frozen=True)
class RecoveryState:
    database: str
    recovery_model: str                 # SIMPLE, BULK_LOGGED or FULL
    log_reuse_wait: str | None = None
    availability_group: str | None = None
    in_availability_group: bool = False
    replica_role: str | None = None     # PRIMARY, SECONDARY
    synchronization: str | None = None
    mirrored: bool = False
    mirroring_role: str | None = None
    log_chain: bool = False
    last_log_backup: datetime | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any], last_log_backup: datetime | None = None) -> "RecoveryState":
        (name, model, reuse, in_ag, ag, role, sync, mirrored, mirroring_role, chain) = row
        return cls(database=name, recovery_model=str(model).upper(), log_reuse_wait=reuse,
                   in_availability_group=bool(in_ag), availability_group=ag, replica_role=role,
                   synchronization=sync, mirrored=bool(mirrored), mirroring_role=mirroring_role,
                   log_chain=bool(chain), last_log_backup=last_log_backup)

    @property
    def minimal_logging(self) -> bool:
        """Whether a TABLOCK load into an empty heap is minimally logged under this model."""
        return self.recovery_model in ("SIMPLE", "BULK_LOGGED")


@dataclass(frozen=True)
class Advice:
    minimal: bool
    warning: bool                       # something the DBA should act on before a big load
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _size(n: int | None) -> str:
    if not n:
        return "the loaded data's size"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"about {n / size:.1f} {unit}"
    return f"about {n} bytes"


def recovery_advice(state: RecoveryState, load_bytes: int | None = None) -> Advice:
    """What the recovery model means for this batch's loads, in words a DBA acts on."""
    db, model = state.database, state.recovery_model
    volume = _size(load_bytes)
    since = (f" (last log backup {state.last_log_backup:%Y-%m-%d %H:%M})" if state.last_log_backup else "")
    if state.in_availability_group:
        lines = [f"database {db} is in availability group {state.availability_group or '(unnamed)'} "
                 f"({state.replica_role or 'role unknown'}, {state.synchronization or 'state unknown'}), recovery "
                 f"model {model}: every load is fully logged, not minimally.",
                 "An availability database must use the FULL recovery model; do not change it (SQL Server refuses "
                 "another model while the database is in the group, and leaving the group breaks the secondaries' "
                 "copies and the log chain).",
                 f"What the load costs here: {volume} of log, all of it sent to every secondary replica (watch "
                 "log_send_queue_size and redo_queue_size in sys.dm_hadr_database_replica_states); the log must hold "
                 "it until a log backup truncates the committed batches: size the log or back it up during the "
                 "load. Minimal logging would require loading into a database outside the group and moving the "
                 "data in afterwards."]
        if state.replica_role == "SECONDARY":
            lines.append("This replica is a SECONDARY: it is read-only, connect to the primary to load.")
        return Advice(minimal=False, warning=True, lines=lines)
    if state.mirrored:
        return Advice(minimal=False, warning=True, lines=[
            f"database {db} is mirrored ({state.mirroring_role or 'role unknown'}), recovery model {model}: every "
            "load is fully logged, not minimally.",
            "Database mirroring requires the FULL recovery model; do not change it.",
            f"What the load costs here: {volume} of log, all of it sent to the mirror; the log holds it until "
            "the mirror has it and a log backup truncates it."])
    if model == "SIMPLE":
        return Advice(minimal=True, warning=False, lines=[
            f"database {db}: recovery model SIMPLE: the loads (TABLOCK into empty heaps) are minimally logged. "
            "There is no log backup chain to keep."])
    if model == "BULK_LOGGED":
        lines = [f"database {db}: recovery model BULK_LOGGED: the loads (TABLOCK into empty heaps) are minimally "
                 "logged."]
        if state.log_chain:
            lines.append(f"The log backup chain continues{since}, at a price: the log backup that covers the load "
                         "cannot be restored to a point in time inside it, holds the extents the load wrote "
                         f"({volume}), and cannot be taken while a data file it needs is lost. Take a log backup "
                         "after the load, and switch back to FULL if that is the usual model.")
        return Advice(minimal=True, warning=False, lines=lines)
    # FULL, neither in an availability group nor mirrored.
    if state.log_chain:
        return Advice(minimal=False, warning=True, lines=[
            f"database {db}: recovery model FULL with a log backup chain{since}: every load is fully logged "
            f"({volume} of log between log backups).",
            "For minimally logged loads switch to BULK_LOGGED for the load window, which keeps the chain "
            f"(ALTER DATABASE [{db}] SET RECOVERY BULK_LOGGED; back to FULL after, then a log backup); the log "
            "backup covering the load then cannot be restored to a point in time inside it and holds the loaded "
            "extents. Never switch to SIMPLE: that breaks the log chain, and log backups fail until the next full "
            "or differential backup. Switchyard changes nothing: the load runs fully logged as things are."])
    return Advice(minimal=False, warning=True, lines=[
        f"database {db}: recovery model FULL, and no log backup chain yet (no full backup since it began, "
        f"sys.database_recovery_status.last_log_backup_lsn is NULL): every load is fully logged ({volume} of log).",
        "No chain exists to break: SIMPLE or BULK_LOGGED would make the loads minimally logged. If log backups "
        "are planned for this database, choose BULK_LOGGED for the load window and FULL otherwise. Switchyard "
        "changes nothing: the load runs fully logged as things are."])
