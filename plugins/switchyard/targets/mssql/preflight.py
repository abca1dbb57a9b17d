"""setup on SQL Server: the pre-flight (every table of the batch against the target as the catalog
has it, with what can break a switch), then the filegroups, functions, schemes, tables and the
run's planned partitions."""
from __future__ import annotations

import logging

from switchyard.core.planner import LoadPlan, TablePlan
from switchyard.core.preflight import emptied_whole, empty_in_batch, newer_in_place, replacing_batches
from switchyard.targets.base import TargetError
from switchyard.targets.commit import discarded_note
from switchyard.targets.mssql.catalog import (
    TargetTable,
    dependency_findings,
    leftover_findings,
    shape_problems,
    target_from_catalog,
    whole_table_blockers,
    whole_table_problems,
)
from switchyard.targets.mssql.errors import _message
from switchyard.targets.mssql.recovery import recovery_advice
from switchyard.targets.mssql.session import drain
from switchyard.targets.mssql.window import compression_of

log = logging.getLogger(__name__)


class MssqlPreflight:
    """setup and what it reads from the catalog."""

    def setup(self, plan: LoadPlan, problems: list[str] = (), replace_newer: bool = False) -> list[str]:
        """The run lease, the pre-flight (every table of the batch against the target as the
        catalog has it: refused with every problem, and the batch's own `problems` found before
        it, permanent, before anything is created), the
        missing objects, and each partitioned table's plan for this run (planned_partitions).
        Returns the pre-flight's notes. `replace_newer`: a replace table holding a newer batch is
        put back to this one."""
        import pyodbc
        with self.connection() as conn:
            cur = conn.cursor()
            load_bytes = sum(s.bytes or 0 for s in plan.all_streams() if not s.empty)
            advice = recovery_advice(self.recovery_state(cur), load_bytes)
            for line in advice.lines:
                (log.warning if advice.warning else log.info)("%s", line)
            # Concurrent runs would race on the IF NOT EXISTS checks: one at a time.
            cur.execute("EXEC sp_getapplock @Resource = N'switchyard.setup', @LockMode = N'Exclusive', "
                        "@LockOwner = N'Session', @LockTimeout = ?", self.lock_timeout_seconds * 1000)
            stmt = "(reading the files' used space)"
            try:
                # The lease first, in a transaction of its own: a run that must wait creates nothing.
                if self.lease_holder:
                    for stmt in self.render("lease.sql"):
                        cur.execute(stmt)
                        drain(cur)
                    try:
                        row = self._claim(cur)
                    except pyodbc.Error as exc:
                        raise TargetError(f"claiming the run lease on {self.schema} failed: "
                                          f"{_message(exc)}") from exc
                    self.check_lease(row)
                stmt = "(pre-flight: reading the target's catalog)"
                notes = self.preflight(cur, plan, problems, replace_newer)
                # The tables brought in line with the spec, as their on_spec_change allows (the
                # pre-flight refused everything else), before setup's IF NOT EXISTS objects.
                # Each ALTER asks for the table's Sch-M, and new readers queue behind a waiting
                # request: under the commit's short LOCK_TIMEOUT a request behind a long reader
                # gives up (1222) and setup fails as retryable, the readers going on
                # (https://learn.microsoft.com/en-us/sql/t-sql/statements/set-lock-timeout-transact-sql).
                if self.spec_changes:
                    cur.execute(f"SET LOCK_TIMEOUT {int(self.commit_lock_wait_ms)}")
                    for stmt in self.spec_changes:
                        cur.execute(stmt)
                        drain(cur)
                    cur.execute("SET LOCK_TIMEOUT -1")
                for stmt in self.setup_sql(plan, used_pages=self.used_pages(cur)):
                    cur.execute(stmt)
                    drain(cur)
                stmt = "(recording this run's planned partitions)"
                for table_plan in plan.tables:
                    if table_plan.table.partitioned:
                        notes += self._plan_table(cur, table_plan)
            except pyodbc.Error as exc:
                raise TargetError(f"setup of {self.schema} failed: {_message(exc)}\nstatement:\n{stmt}") from exc
        for note in notes:
            log.info("pre-flight: %s", note)
        return notes

    def left_by_a_dropped_table(self, cur, table, where: str) -> tuple[list[str], list[str]]:
        """(problems, notes) about the partition function and scheme, by the names setup gives a new
        table's, that a table of that name dropped earlier left (catalog.leftover_findings)."""
        function, scheme = self.function_name(table.name), self.scheme_name(table.name)
        rows = [tuple(r) for r in cur.execute(self.catalog_sql(table.name)["leftover"], function, scheme).fetchall()]
        return leftover_findings(rows, where, table, self.key(table), self._key_type(table), function, scheme)

    def read_target(self, cur, table: str, qualified: str | None = None) -> TargetTable:
        """The table as the catalog has it now (the pre-flight's queries, catalog_*.sql); with
        `qualified`, that table read as one made to the spec's `table` (its staging table)."""
        sql = self.catalog_sql(table)
        name = qualified or self.qualified(self.schema, table)
        # A table loaded whole has no partition key type (its key may be text, or there is none).
        key = self.key(table) if self.spec.table(table).partitioned else None
        rows = [tuple(r) for r in cur.execute(sql["table"], name).fetchall()]
        if not rows:
            return TargetTable(exists=False)
        function_id, parameter_type, scale = rows[0][2], rows[0][6], rows[0][9]
        # A function of another type (or another datetime2 precision), or on a table the spec loads
        # whole, is refused by shape_problems; its boundaries are not read as the key's values.
        same_type = (key is not None and function_id is not None and str(parameter_type or "").lower() == key.base
                     and (key.base != "datetime2" or scale == key.digits))
        boundaries = [tuple(r) for r in cur.execute(sql["boundaries"], function_id).fetchall()] if same_type else []
        partitions = [tuple(r) for r in cur.execute(sql["partitions"], name).fetchall()]
        indexes = [tuple(r) for r in cur.execute(sql["indexes"], name).fetchall()]
        columns = [tuple(r) for r in cur.execute(sql["columns"], name).fetchall()]
        shared = ([tuple(r) for r in cur.execute(sql["shared"], function_id, name).fetchall()]
                  if function_id is not None else [])
        schemes = [r[0] for r in cur.execute(sql["schemes"], function_id).fetchall()] if function_id is not None else []
        dependencies = [tuple(r) for r in cur.execute(sql["dependencies"], name).fetchall()]
        batches = []
        if cur.execute("SELECT OBJECT_ID(?, N'U')", self.qualified(self.control_schema, "partition_batches")
                       ).fetchone()[0] is not None:
            batches = [tuple(r) for r in cur.execute(sql["batches"], self.schema, table).fetchall()]
        return target_from_catalog(key, rows, boundaries, partitions, indexes, columns, shared, batches,
                                   dependency_rows=dependencies, function_schemes=schemes)

    def client_path_problems(self, table_plan: TablePlan, where: str) -> list[str]:
        """A table whose files take the client path (load_path: gzip, a NULL marker BULK INSERT
        cannot take ...) with a column type that path has no reader for: refused here, before any
        load, rather than by its first load."""
        from switchyard.targets.mssql.rows import converter
        why = next((why for s in table_plan.streams if not s.empty
                    for path, why in [self.load_path(s)] if path == "tds"), None)
        if why is None:
            return []
        out = []
        for column in table_plan.table.columns:
            try:
                converter(self.column_type(column))
            except TargetError as exc:
                out.append(f"{where}: column {column.name}: {exc}, which this table's files take ({why}); give the "
                           f"column a type it reads, or write the files so that BULK INSERT reads them")
        return out

    def preflight(self, cur, plan: LoadPlan, batch_problems: list[str] = (), replace_newer: bool = False) -> list[str]:
        """Each table of the plan against the target as it is; TargetError (permanent) listing
        every problem, with the batch's own (`batch_problems`), before anything is created or
        loaded. Returns the notes."""
        notes, problems = [], list(batch_problems)
        self.spec_changes, self.spec_notes = [], []
        for table_plan in plan.tables:
            table = table_plan.table
            where = f"{self.schema}.{table.name}"
            problems += self.client_path_problems(table_plan, where)
            try:
                target = self.read_target(cur, table.name)
            except ValueError as exc:
                # A catalog name Switchyard would not write into T-SQL (catalog._name), read
                # before any load: refused with the others, not as a crash.
                problems.append(f"{where}: {exc}; rename it (sp_rename), or load this table another way")
                continue
            if not target.exists:
                found, said = self.left_by_a_dropped_table(cur, table, where) if table.partitioned else ([], [])
                problems += found
                notes += said
                if not found:
                    notes.append(f"{where}: new table; setup creates it"
                                 + (f" with this batch's {len(self.incoming(table_plan))} partitions on "
                                    f"{self.function_name(table.name)}" if table.partitioned else ""))
                continue
            found = shape_problems(target, where, table, self.key(table) if table.partitioned else None,
                                   self._key_type(table))
            more, said = newer_in_place(table, self.lease_batch or "", target.batches, where, replace_newer,
                                        self.batch_format)
            found += more
            notes += said
            found += self._spec_differences(target, table, where)
            if target.indexes:
                self.index_room[table.name] = 2.0
            if table.partitioned and target.partitioned:
                more, said = dependency_findings(target, where, table)
                found += more
                notes += said
            elif not table.partitioned and not target.partitioned:
                found += whole_table_problems(target, where)
                notes += self._whole_table_notes(target, table, where)
            problems += found
            if found:
                continue
            if not table.partitioned:
                problems += emptied_whole(table, table_plan.streams, where, holds_rows=target.rows != 0)
                continue
            streams = self.incoming(table_plan)
            if not streams:
                batch = self.lease_batch or ""
                more, said = empty_in_batch(table, batch, sum(p.batch == batch for p in target.partitions), where)
                problems += more
                notes += said
                continue
            if table.mode == "replace":
                more, said = replacing_batches(table, [p.batch for p in target.partitions], self.lease_batch or "",
                                               where)
                problems += more
                notes += said
                if more:
                    continue
            wp = self.window(table.name, target, streams, self.lease_batch or "")
            problems += wp.problems
            notes += wp.notes
        if problems:
            raise TargetError("pre-flight refused the batch before any load; nothing was changed:\n- "
                              + "\n- ".join(problems), permanent=True)
        return notes + self.spec_notes + self._left_out_of_the_spec(cur, plan)

    def _left_out_of_the_spec(self, cur, plan: LoadPlan) -> list[str]:
        """A note for each table of the schema that Switchyard loaded (the control table records
        its batches) and the spec no longer has: renamed in the spec, the old table stays."""
        from switchyard.core.preflight import no_longer_in_the_spec
        if cur.execute("SELECT OBJECT_ID(?, N'U')", self.qualified(self.control_schema, "partition_batches")
                       ).fetchone()[0] is None:
            return []
        (sql,) = self.render("catalog_loaded_tables.sql")
        loaded: dict[str, list[str]] = {}
        for name, batch in cur.execute(sql, self.schema).fetchall():
            loaded.setdefault(name, []).append(batch)
        return [no_longer_in_the_spec(f"{self.schema}.{name}", batches, plan.spec.source)
                for name, batches in loaded.items() if name not in plan.spec.table_names]

    @staticmethod
    def _whole_table_notes(target: TargetTable, table, where: str) -> list[str]:
        """How a table loaded whole is replaced: its staging table switched in (metadata only), or,
        where SWITCH cannot take it (catalog.whole_table_blockers), its rows copied, its readers
        waiting for the copy."""
        blockers = whole_table_blockers(target, table)
        if not blockers:
            return []
        return [f"{where}: replaced by TRUNCATE TABLE and INSERT ... SELECT, not by SWITCH: {'; '.join(blockers)}. "
                f"Its readers wait while its rows are copied, under the table's schema-modification lock; without "
                f"these its staging table would be switched in"]

    def _spec_differences(self, target: TargetTable, table, where: str) -> list[str]:
        """The table against the spec (core/spec_diff.py): the problems that refuse the batch;
        the statements its on_spec_change runs (`spec_changes`) and the notes (`spec_notes`)."""
        from switchyard.core.spec_diff import compare, reconcile
        from switchyard.targets.mssql import spec_change
        differences = compare(table, spec_change.existing_table(target), spec_change.needed(table),
                              spec_change.Statements(self, table, target))
        problems, notes, statements = reconcile(table, differences, where)
        self.spec_changes += statements
        self.spec_notes += notes
        return problems

    def _plan_table(self, cur, table_plan: TablePlan) -> list[str]:
        """This run's plan for a partitioned table: where each stream's partition will be
        (filegroup, data compression), in planned_partitions. Another run's plan still there (a
        run with a failed group) is discarded with its staging tables, and said so."""
        import json
        table = table_plan.table.name
        control = self.qualified(self.control_schema, "planned_partitions")
        notes = []
        others = cur.execute(f"SELECT DISTINCT run, batch FROM {control} WHERE target_schema = ? AND table_name = ? "
                             f"AND run <> ?", self.schema, table, self.lease_holder or "").fetchall()
        held = [r[0] for r in cur.execute(f"SELECT staging_table FROM {control} WHERE target_schema = ? AND "
                                          f"table_name = ? AND ready_at IS NOT NULL", self.schema, table).fetchall()]
        for run, batch in sorted(tuple(r) for r in others):
            notes.append(discarded_note(f"{self.schema}.{table}", batch, run, held, self.lease_batch))
        for (staging,) in cur.execute(f"SELECT staging_table FROM {control} WHERE target_schema = ? AND "
                                      f"table_name = ?", self.schema, table).fetchall():
            cur.execute(f"DROP TABLE IF EXISTS {self.qualified(self.staging_schema, self.checked(staging))}")
        cur.execute(f"DELETE FROM {control} WHERE target_schema = ? AND table_name = ?", self.schema, table)
        target = self.read_target(cur, table)
        streams = self.incoming(table_plan)
        wp = self.window(table, target, streams, self.lease_batch or "")
        if not wp.ok:  # the pre-flight passed a moment ago, under the same lock
            raise TargetError("pre-flight refused the batch before any load; nothing was changed:\n- "
                              + "\n- ".join(wp.problems), permanent=True)
        by_stream = {s.stream: s for s in table_plan.streams}
        for s in streams:
            fg, compression = wp.placement[s.stream]
            plan_s = by_stream[s.stream]
            cur.execute(f"INSERT INTO {control} (target_schema, table_name, staging_table, stream, batch, key_min, "
                        f"key_max, rows_planned, run, stream_filegroup, [filegroup], [compression], planned_at) "
                        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, SYSUTCDATETIME())",
                        self.schema, table, s.staging_table, s.stream, self.lease_batch or "", str(plan_s.lower),
                        str(plan_s.upper), s.rows, self.lease_holder or "", s.filegroup, fg,
                        json.dumps([list(c) for c in compression]))
        return notes

    def planned(self, cur, table: str) -> dict[str, dict]:
        """This table's planned partitions (setup's), by staging table name."""
        import json
        fields = ("staging_table", "stream", "batch", "key_min", "key_max", "rows_planned", "run",
                  "stream_filegroup", "filegroup", "compression", "ready_at")
        control = self.qualified(self.control_schema, "planned_partitions")
        rows = cur.execute(f"SELECT {', '.join(self.q(f) for f in fields)} FROM {control} "
                           f"WHERE target_schema = ? AND table_name = ? ORDER BY stream", self.schema, table).fetchall()
        out = {}
        for r in rows:
            d = dict(zip(fields, tuple(r)))
            # Read back from a table anyone with write access to the control schema can change:
            # each value is checked again (NONE, ROW or PAGE) before it reaches a statement's
            # DATA_COMPRESSION, which takes no parameter.
            try:
                d["compression"] = tuple((str(index), compression_of(value))
                                         for index, value in json.loads(d["compression"]))
            except ValueError as exc:
                raise TargetError(f"{control}, staging table {d['staging_table']}: {exc}; this run's setup wrote "
                                  f"NONE, ROW or PAGE: the row was changed since. Run the batch again from its "
                                  f"setup", permanent=True) from exc
            out[d["staging_table"]] = d
        return out
