"""setup on PostgreSQL: the pre-flight (every table of the batch against the target as the catalog
has it), then the missing objects and each partitioned table's next version and planned partitions."""
from __future__ import annotations

import logging
import re

from switchyard.core.planner import LoadPlan, StreamPlan, TablePlan
from switchyard.core.spec import Table
from switchyard.targets.base import TargetError
from switchyard.targets.commit import discarded_note

log = logging.getLogger(__name__)

_BOUND = re.compile(r"^FOR VALUES FROM \((.+)\) TO \((.+)\)$")


class PostgresPreflight:
    """setup and what it reads from the catalog: the tables' shape, partitions and plans."""

    # --- steps --------------------------------------------------------------------------
    def setup(self, plan: LoadPlan, problems: list[str] = (), replace_newer: bool = False) -> list[str]:
        """The run lease, then (one transaction) the pre-flight, missing objects, and for each
        partitioned table its next version and this run's planned partitions. Returns the
        pre-flight's notes; raises a permanent TargetError with every problem it found and the
        batch's own `problems` (found before: files, manifest), creating nothing.
        `replace_newer`: a replace table holding a newer batch is put back to this one."""
        with self.connection() as conn:
            # Concurrent runs creating the same objects would race on IF NOT EXISTS; an
            # advisory lock around setup makes it one at a time. The lease is taken first
            # and committed on its own, so a run that must wait creates nothing.
            if self.lease_holder:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_xact_lock(hashtext('switchyard.setup'))")
                    for stmt in self.render("lease.sql"):
                        cur.execute(stmt)
                    self.check_lease(self._claim(cur))
            import psycopg
            try:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SELECT pg_advisory_xact_lock(hashtext('switchyard.setup'))")
                    # Date and timestamp bounds are read as the server prints them: in ISO.
                    cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
                    checks = self.preflight(cur, plan, problems, replace_newer)
                    # The table brought in line with the spec, as its on_spec_change allows
                    # (the pre-flight refused everything else), before setup.sql's IF NOT EXISTS.
                    for stmt in self.spec_changes:
                        try:
                            cur.execute(stmt)
                        except (psycopg.errors.CheckViolation, psycopg.errors.NotNullViolation) as exc:
                            # SET NOT NULL and ADD CONSTRAINT read every row: one the spec no
                            # longer allows fails the statement, and the transaction with it.
                            raise TargetError(
                                f"setup: on_spec_change could not bring the table in line: {stmt} failed: "
                                f"{exc.diag.message_primary}: the table holds rows the spec no longer allows; "
                                f"nothing was changed (change those rows, or the spec back)", permanent=True) from exc
                    for stmt in self.setup_sql(plan):
                        cur.execute(stmt)
                    discarded = [note for table_plan in plan.tables if table_plan.table.partitioned
                                 for note in self._plan_next(cur, table_plan)]
                    for table_plan in plan.tables:
                        if not table_plan.table.partitioned:
                            # An earlier run's staged table that never went in: this run loads its own.
                            cur.execute(f"DROP TABLE IF EXISTS "
                                        f"{self.qualified(self.staging_schema, self.next_table(table_plan.table.name))}")
            except psycopg.errors.UniqueViolation as exc:
                # The target's unique index, created on a table loaded before it existed.
                raise TargetError(
                    f"setup: the target already holds duplicates of a unique key, so its unique index "
                    f"cannot be built: {exc.diag.message_primary} ({exc.diag.message_detail}); remove the "
                    f"duplicates or drop the table, or declare the table without `unique` in the spec",
                    permanent=True) from exc
        notes = [n for c in checks for n in c.notes] + self.spec_notes + discarded
        # Each note once: what was discarded as a warning, the rest as information.
        for note in notes:
            (log.warning if note in discarded else log.info)("pre-flight: %s", note)
        return notes

    def preflight(self, cur, plan: LoadPlan, batch_problems: list[str] = (), replace_newer: bool = False) -> list:
        """Each table of the plan against the target as it is; TargetError (permanent) listing
        every problem, with the batch's own (`batch_problems`), before anything is created or
        loaded."""
        from switchyard.core.preflight import check_table, newer_in_place
        checks, problems = [], list(batch_problems)
        self.spec_changes, self.spec_notes = [], []
        for table_plan in plan.tables:
            table = table_plan.table
            where = f"{self.schema}.{table.name}"
            shape = self._target_shape(cur, table.name)
            if shape is not None:
                problems += self._shape_problems(table, shape, where)
                problems += self._spec_differences(cur, table, shape, where)
                problems += self._referenced_by(cur, shape["oid"], where)
            # Partitioned on another key than the spec's (refused above): its bounds are not
            # values of the spec's key, and are not read as such.
            same_key = shape is not None and shape["partitioned"] and not self._shape_problems(table, shape, where)
            existing = self._target_partitions(cur, table.name) if same_key else None
            problems += self._unwritable_partitions(existing or [], where)
            if shape is not None and existing is None:
                existing = []  # the table is there (an unpartitioned one has no partitions)
            emptied = shape is not None and not shape["partitioned"] and any(s.rows == 0 for s in table_plan.streams)
            check = check_table(table, list(table_plan.streams), self.lease_batch or "", existing, where,
                                kind=self.key_kind(table), key_type=self.key_type(table.name),
                                holds_rows=not emptied or self._holds_rows(cur, table.name))
            if shape is not None:
                # A partition's batch came with it; an unpartitioned table's is the control table's one row.
                in_place = ([p.batch for p in existing] if shape["partitioned"]
                            else self._recorded_batches(cur, table.name).values())
                more, said = newer_in_place(table, self.lease_batch or "", in_place, where, replace_newer,
                                            self.batch_format)
                check.problems += more
                check.notes += said
            checks.append(check)
            problems += check.problems
        if problems:
            raise TargetError("pre-flight refused the batch before any load; nothing was changed:\n- "
                              + "\n- ".join(problems), permanent=True)
        self.spec_notes += self._left_out_of_the_spec(cur, plan)
        return checks

    def _left_out_of_the_spec(self, cur, plan: LoadPlan) -> list[str]:
        """A note for each table of the schema that Switchyard loaded (the control table records
        its batches) and the spec no longer has: renamed in the spec, the old table stays."""
        from switchyard.core.preflight import no_longer_in_the_spec
        control = self.qualified(self.control_schema, "partition_batches")
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (control,))
        if not cur.fetchone()[0]:
            return []
        cur.execute(f"SELECT table_name, array_agg(DISTINCT batch) FROM {control} WHERE target_schema = %s "
                    f"AND to_regclass(quote_ident(target_schema) || '.' || quote_ident(table_name)) IS NOT NULL "
                    f"GROUP BY table_name ORDER BY table_name", (self.schema,))
        return [no_longer_in_the_spec(f"{self.schema}.{name}", batches, plan.spec.source)
                for name, batches in cur.fetchall() if name not in plan.spec.table_names]

    def _target_shape(self, cur, table: str) -> dict | None:
        """The target table as the catalog has it: partitioned on which columns, and its columns."""
        cur.execute(
            "SELECT c.oid, c.relkind, pt.partstrat, "
            "       (SELECT array_agg(a.attname::text ORDER BY k.ord) FROM unnest(pt.partattrs::int2[]) "
            "        WITH ORDINALITY AS k(attnum, ord) LEFT JOIN pg_attribute a "
            "        ON a.attrelid = c.oid AND a.attnum = k.attnum) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_partitioned_table pt ON pt.partrelid = c.oid "
            "WHERE n.nspname = %s AND c.relname = %s", (self.schema, table))
        row = cur.fetchone()
        if row is None:
            return None
        oid, relkind, strategy, key_columns = row
        cur.execute("SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef, attgenerated <> '' "
                    "FROM pg_attribute WHERE attrelid = %s AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
                    (oid,))
        columns = {name: {"type": t, "not_null": nn, "default": d, "generated": g}
                   for name, t, nn, d, g in cur.fetchall()}
        return {"oid": oid, "relkind": relkind, "partitioned": relkind == "p", "strategy": strategy,
                "key": list(key_columns or []), "columns": columns}

    def _unwritable_partitions(self, partitions: list, where: str) -> list[str]:
        """Partitions the publish could not name when a batch replaces or retires them, refused
        before any load rather than by the publish after every load: one in another schema (the
        publish detaches and drops those of the table's schema), and one whose name is not written
        into SQL (lower-case letters, digits and _, a letter or _ first: names are checked, not
        escaped)."""
        problems = []
        for p in partitions:
            if p.schema != self.schema:
                problems.append(f"{where}: partition {p.schema}.{p.name} lives in another schema: the publish "
                                f"detaches and drops or archives the partitions of {self.schema}; move it there "
                                f"(ALTER TABLE ... SET SCHEMA) or detach it")
            else:
                try:
                    self.checked(p.name)
                except TargetError:
                    problems.append(f"{where}: partition {p.name!r}: a name Switchyard does not write into SQL "
                                    f"(lower-case letters, digits and _, a letter or _ first), which the publish "
                                    f"must when a batch replaces or retires it; rename it (ALTER TABLE ... RENAME TO)")
        return problems

    def _referenced_by(self, cur, oid: int, where: str) -> list[str]:
        """Foreign keys of other tables that reference the table: the publish takes its rows out
        (an unpartitioned table's DELETE; a partitioned one's DETACH and DROP of the partitions a
        batch replaces or retires), which such a key refuses after every load, or, ON DELETE
        CASCADE or SET NULL, answers by changing the other table's rows. Refused before any load."""
        cur.execute("SELECT c.conname::text, c.conrelid::regclass::text, c.confdeltype FROM pg_constraint c "
                    "WHERE c.contype = 'f' AND c.confrelid = %s AND c.conrelid <> %s AND c.conparentid = 0 "
                    "ORDER BY 1", (oid, oid))
        actions = {"c": "ON DELETE CASCADE would delete its rows that reference them",
                   "n": "ON DELETE SET NULL would empty its columns that reference them",
                   "d": "ON DELETE SET DEFAULT would change its rows that reference them"}
        return [f"{where} is referenced by foreign key {name} of {other}: the publish takes the table's rows out "
                f"(DELETE, or DETACH and DROP of the partitions a batch replaces), which "
                + (f"{actions[action]}" if action in actions else "the key refuses")
                + f"; drop {name} for the load and add it back after, or leave {where} out of this run"
                for name, other, action in cur.fetchall()]

    def _shape_problems(self, table, shape: dict, where: str) -> list[str]:
        problems = []
        if table.partitioned and not shape["partitioned"]:
            problems.append(f"{where} exists but is not partitioned (the spec partitions it by range on "
                            f"{table.key}): rename or drop it, or declare the table partitioned: false")
        elif table.partitioned and (shape["strategy"] != "r" or shape["key"] != [table.key]):
            problems.append(f"{where} is partitioned by {'range' if shape['strategy'] == 'r' else 'list or hash'} "
                            f"on ({', '.join(c or '<expression>' for c in shape['key'])}), the spec by range on "
                            f"{table.key}: rename or drop it, or change the spec's key")
        elif not table.partitioned and shape["partitioned"]:
            problems.append(f"{where} is partitioned, the spec declares it partitioned: false: rename or drop "
                            f"it, or change the spec")
        return problems

    def _spec_differences(self, cur, table: Table, shape: dict, where: str) -> list[str]:
        """The table against the spec (core/spec_diff.py): the problems that refuse the batch;
        the statements its on_spec_change runs (`spec_changes`) and the notes (`spec_notes`)."""
        from switchyard.core.spec_diff import compare, reconcile
        from switchyard.targets.postgres import spec_change
        our_unique = self.index_name(table.name)
        existing = spec_change.existing_table(cur, self.qualified(self.schema, table.name), shape, our_unique)
        needed = spec_change.needed(cur, self, self.columns(table), self.length_checks(table),
                                    our_unique if table.unique else None,
                                    [c for c in shape["columns"] if c not in table.column_names])
        differences = compare(table, existing, needed, spec_change.Statements(self, table))
        problems, notes, statements = reconcile(table, differences, where)
        self.spec_changes += statements
        self.spec_notes += notes
        return problems

    def _target_partitions(self, cur, table: str, schema: str | None = None) -> list:
        """The table's partitions now, with their bounds and the batch each one is recorded to."""
        from switchyard.core.preflight import Partition, parse_bound_value
        kind = self.key_kind(self.spec.table(table))
        cur.execute(
            "SELECT n.nspname::text, c.relname::text, pg_get_expr(c.relpartbound, c.oid) "
            "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE i.inhparent = to_regclass(%s) ORDER BY c.relname",
            (self.qualified(schema or self.schema, table),))
        rows = cur.fetchall()
        recorded = self._recorded_batches(cur, table) if schema is None else {}
        out = []
        for nsp, name, bound in rows:
            found = _BOUND.match(bound or "")
            if bound == "DEFAULT" or not found:
                out.append(Partition(name=name, lower=None, upper=None, schema=nsp, default=True,
                                     batch=recorded.get(name)))
                continue
            out.append(Partition(name=name, lower=parse_bound_value(found[1], kind),
                                 upper=parse_bound_value(found[2], kind), batch=recorded.get(name), schema=nsp))
        return out

    def _holds_rows(self, cur, table: str) -> bool:
        """Whether the table holds a row: one row read, under the run lease (no other run writes it)."""
        cur.execute(f"SELECT EXISTS (SELECT 1 FROM {self.qualified(self.schema, table)})")
        return bool(cur.fetchone()[0])

    def _recorded_batches(self, cur, table: str) -> dict[str, str]:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (self.qualified(self.control_schema, "partition_batches"),))
        if not cur.fetchone()[0]:
            return {}
        cur.execute(f"SELECT partition_name, batch FROM {self.qualified(self.control_schema, 'partition_batches')} "
                    f"WHERE target_schema = %s AND table_name = %s", (self.schema, table))
        return dict(cur.fetchall())

    def _plan_next(self, cur, table_plan: TablePlan) -> list[str]:
        """The table's next version, empty, and this run's planned partitions of it. Another
        run's next version still waiting there (a run with a failed group) is discarded, and
        said so: returns that note."""
        table = table_plan.table
        params = {"schema": self.schema, "table": table.name}
        notes = []
        pending = self.planned(cur, table.name)
        others = {(p["run"], p["batch"]) for p in pending.values() if p["run"] != (self.lease_holder or "")}
        if others:
            cur.execute("SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                        "WHERE i.inhparent = to_regclass(%s) ORDER BY 1",
                        (self.qualified(self.staging_schema, self.next_table(table.name)),))
            held = [r[0] for r in cur.fetchall()]
            for run, batch in sorted(others):
                notes.append(discarded_note(f"{self.schema}.{table.name}", batch, run, held, self.lease_batch))
        for stmt in self.render("next_table.sql", table=table.name, key=table.key,
                                next_table=self.next_table(table.name)):
            cur.execute(stmt, params if "%(" in stmt else None)
        rows = [(self.schema, table.name, s.staging_table, s.partition_table, s.stream, self.lease_batch or "",
                 str(s.lower), str(s.upper), s.rows, self.lease_holder or "")
                for s in table_plan.streams if not s.empty]
        if rows:
            cur.executemany(
                f"INSERT INTO {self.qualified(self.control_schema, 'planned_partitions')} (target_schema, "
                f"table_name, staging_table, partition_name, stream, batch, key_min, key_max, rows_planned, run, "
                f"planned_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, now())", rows)
        return notes

    def _existing_partition(self, cur, stream: StreamPlan) -> tuple[str, list[str]] | None:
        """(bound, [parent schema, parent name]) of the partition that has this stream's name
        now, if there is one."""
        cur.execute(
            "SELECT pg_get_expr(c.relpartbound, c.oid), c.relispartition, "
            "       (SELECT ARRAY[pn.nspname::text, p.relname::text] FROM pg_inherits i "
            "        JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace pn ON pn.oid = p.relnamespace "
            "        WHERE i.inhrelid = c.oid) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s",
            (self.schema, stream.partition_table))
        row = cur.fetchone()
        if row is None:
            return None
        bound, is_partition, parent = row
        if not is_partition:
            raise TargetError(f"{self.schema}.{stream.partition_table} exists but is not a partition of "
                              f"{self.schema}.{stream.table}; rename or drop it")
        return bound, parent

    # --- the table's next version and its commit -------------------------------------------
    def _next_bounds(self, cur, table: str) -> dict[str, str]:
        """Staging table -> the bound it is attached to the table's next version with (server text)."""
        cur.execute("SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
                    "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(%s)",
                    (self.qualified(self.staging_schema, self.next_table(table)),))
        return dict(cur.fetchall())

    def partitions(self, table: str) -> list[str]:
        """Names of the table's partitions (none when the table does not exist)."""
        rows = self.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = to_regclass(%s) ORDER BY 1", (self.qualified(self.schema, table),))
        return [r[0] for r in rows]

    def row_count(self, table: str) -> int:
        return self.fetch(f"SELECT count(*) FROM {self.qualified(self.schema, table)}")[0][0]
