"""The T-SQL of a table's commit and a batch's publish: the partition window each works out
(window.py) rendered as statements, and the whole plan as one script a DBA can read or run."""
from __future__ import annotations

from typing import Any, Mapping

from switchyard.core.keys import partition_name
from switchyard.core.planner import LoadPlan, StreamPlan, TablePlan
from switchyard.targets.base import TargetError
from switchyard.targets.mssql.catalog import ColumnInfo, TargetTable, staging_constraint_name, whole_table_blockers
from switchyard.targets.mssql.sql import LOCK_SUFFIX, OLD_SUFFIX
from switchyard.targets.mssql.window import Incoming, Partition, WindowPlan, keys_text, plan_window, show_key

# Steps whose Sch-M request waits at normal priority: new readers queue behind it.
NORMAL_PRIORITY_STEPS = ("truncate", "merge", "split")


class MssqlCommitSql:
    """A table's commit and a batch's publish as statements, and the plan as a script."""

    def incoming(self, table_plan: TablePlan) -> list[Incoming]:
        key = self.key(table_plan.table)
        return [Incoming(stream=s.stream, lower=key.value(s.lower), upper=key.value(s.upper), filegroup=s.filegroup,
                         staging_table=s.staging_table, rows=s.rows)
                for s in table_plan.streams if s.partitioned and not s.empty]

    def window(self, table: str, target: TargetTable, streams: list[Incoming], batch: str) -> WindowPlan:
        """What the table's commit does with this batch (window.plan_window on the catalog's answers)."""
        t = self.spec.table(table)
        key = self.key(t)
        return plan_window(f"{self.schema}.{table}", t.mode, batch, target.partitions, streams, key,
                           keep=t.keep, keep_days=t.keep_days, archive=t.retire == "archive",
                           shared_with=target.shared_with, function=target.function or "",
                           archive_name=lambda p: partition_name(table, key.after(p.lower) if p.lower is not None
                                                                 else p.upper, p.upper))

    def new_target(self, table_plan: TablePlan) -> TargetTable:
        """The table as setup creates it for this batch (no server: a plan, the script): its
        function with the batch's boundaries, every partition empty."""
        ctx = self._table_context(table_plan)
        bounds = [b["value"] for b in ctx["boundaries"]]
        fgs = ctx["scheme_filegroups"]
        edges = [None, *bounds, None]
        parts = [Partition(number=i + 1, lower=edges[i], upper=edges[i + 1], filegroup=fgs[i], rows=0,
                           compression=(("(heap)", "NONE"),)) for i in range(len(fgs))]
        return TargetTable(exists=True, partitioned=True, data_space=ctx["scheme"], function=ctx["function"],
                           scheme=ctx["scheme"], partition_column=table_plan.table.key, boundaries=bounds,
                           partitions=parts, columns=[ColumnInfo(c["name"], c["type"], c["nullable"])
                                                      for c in self.columns(table_plan.table)])

    def commit_sql(self, table_plan: TablePlan, target: TargetTable | None = None, batch: str | None = None,
                   run: str | None = None) -> list[str]:
        """The table's commit: the batch switched in whole, in one transaction (commit_table.sql).
        Without `target` (no server: the script), against the table setup creates for the batch."""
        table = table_plan.table
        if not table.partitioned:
            return []
        target = target or self.new_target(table_plan)
        streams = self.incoming(table_plan)
        batch = self.lease_batch or self.script_batch if batch is None else batch
        wp = self.window(table.name, target, streams, batch)
        if not wp.ok:
            raise TargetError("\n".join(wp.problems), permanent=True)
        return self.render_commit(table.name, wp, target, streams, batch, run if run is not None else
                                  (self.lease_holder or ""))

    def render_commit(self, table: str, wp: WindowPlan, target: TargetTable, streams: list[Incoming], batch: str,
                      run: str) -> list[str]:
        """The table's own commit, one transaction (commit_table.sql, `publish: table`)."""
        return self.render("commit_table.sql", **self.commit_context(table, wp, target, streams, lock_first=True),
                           batch=batch, run=run,
                           wait_minutes=self.wait_minutes(), commit_lock_wait_ms=self.commit_lock_wait_ms,
                           commit_attempts=self.commit_attempts)

    def commit_context(self, table: str, wp: WindowPlan, target: TargetTable, streams: list[Incoming], *,
                       lock_first: bool) -> dict:
        """What a partitioned table's commit steps (_commit_steps.sql) are rendered from: the
        window's steps, the target's shape, the control rows. `lock_first`: the table is the
        first its transaction takes, and takes it at low priority (lock_step)."""
        key = self.key(table)
        lock = self.lock_step(table, wp, target) if lock_first else None
        steps = [lock] if lock else []
        for st in wp.steps:
            d: dict[str, Any] = {"kind": st.kind, "why": st.why,
                                 "value_sql": key.literal(st.value) if st.value is not None else "NULL",
                                 "range_sql": key.boundary(st.value) if st.value is not None else "NULL"}
            if st.partition is not None:
                d.update(number=st.partition.number, rows=st.partition.rows,
                         range=keys_text(st.partition.lower, st.partition.upper, key))
            if st.kind == "split":
                d["filegroup"] = st.filegroup
            elif st.kind == "archive":
                name = self.checked(st.archive_table)
                d.update(archive=self.qualified(self.archive_schema, name), filegroup=st.filegroup,
                         heap_compression=st.compression[0][1] if st.compression else "NONE",
                         compression=dict(st.compression),
                         constraint_names={i.name: staging_constraint_name(name, i.name)
                                           for i in target.indexes if i.constraint})
            elif st.kind == "switch_in":
                d.update(stream=st.stream.stream, filegroup=st.filegroup,
                         staging=self.qualified(self.staging_schema, st.stream.staging_table),
                         range=keys_text(key.before(st.stream.lower), st.stream.upper, key))
            steps.append(d)
        records = [{"key_min": show_key(s.lower), "key_max": show_key(s.upper), "rows": s.rows} for s in streams]
        gone = sorted({show_key(p.upper) for p in [*wp.removed, *wp.retired] if p.upper is not None}
                      | {r["key_max"] for r in records})
        return {"table": f"{self.schema}.{table}", "table_name": table, "mode": self.spec.table(table).mode,
                # A SWITCH waits at low priority for the transaction's first table only: for a
                # later one it would hold the tables taken before it while it waits (a minute);
                # at normal priority the short LOCK_TIMEOUT bounds that wait.
                "low_priority": lock_first,
                "steps": steps, "function": target.function, "scheme": target.scheme,
                # The table's scheme first, then any other of its function (catalog_columns.sql).
                "schemes": [target.scheme, *sorted(set(target.function_schemes) - {target.scheme})],
                "key_column": self.spec.table(table).key, "columns": target.columns,
                "indexes": target.indexes, "records": records, "gone": gone}

    def lock_step(self, table: str, wp: WindowPlan, target: TargetTable) -> dict | None:
        """The table's Sch-M lock asked for at low priority, before a first step that would ask at
        normal priority (TRUNCATE, SPLIT, MERGE: new readers queue behind such a request, even
        NOLOCK and snapshot ones). Only SWITCH can wait at low priority, out of the lock queue
        (https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql#wait_at_low_priority),
        so an empty partition is switched out to an empty table of the target's shape on its
        filegroup, which is dropped: the table's rows and partitions stay as they are, and the
        transaction holds the lock to its COMMIT, the steps after it waiting for no reader. None
        when the first step is a SWITCH already, or no partition is empty now."""
        if not wp.steps or wp.steps[0].kind not in NORMAL_PRIORITY_STEPS:
            return None
        key = self.key(table)
        empty = next((p for p in target.partitions if p.rows == 0 and p.upper is not None), None)
        value = empty.upper if empty is not None else None
        if empty is None:
            # The last partition has no upper boundary: the key just above its lower one stands in
            # it (a table laid out by a DBA may have no other empty partition).
            empty = next((p for p in target.partitions if p.rows == 0 and p.upper is None and p.lower is not None),
                         None)
            try:
                value = key.after(empty.lower) if empty is not None else None
            except (ValueError, OverflowError):     # the lower boundary is the type's last value
                value = None
        if value is None:
            return None
        probe = self.checked(f"{table}{LOCK_SUFFIX}")
        return {"kind": "lock", "number": empty.number, "range": keys_text(empty.lower, empty.upper, key),
                "value_sql": key.literal(value), "probe": self.qualified(self.staging_schema, probe),
                "filegroup": empty.filegroup, "heap_compression": empty.compression[0][1] if empty.compression else "NONE",
                "compression": dict(empty.compression),
                "constraint_names": {i.name: staging_constraint_name(probe, i.name) for i in target.indexes
                                     if i.constraint}}

    def replace_context(self, stream: StreamPlan, target: TargetTable | None, lock_first: bool) -> dict:
        """What an unpartitioned table's replace in the batch's publish is rendered from: its next
        version switched in (_swap_steps.sql) when `target` (swap_target: the table, made to whose
        shape the next version was) is given, else its next version's rows copied into the table
        (_replace_steps.sql); either way checked against the manifest's count."""
        return {"partitioned": False, "table": f"{self.schema}.{stream.table}", "table_name": stream.table,
                "mode": "replace", "columns": self.columns(self.spec.table(stream.table)),
                "source": self.qualified(self.staging_schema, self.next_table(stream.table)), "rows": stream.rows,
                "swap": None if target is None else self.swap_context(stream.table, target, lock_first)}

    def swap_context(self, table: str, target: TargetTable, lock_first: bool) -> dict:
        """An unpartitioned table's rows switched out to `<table>__old`, an empty table made to its
        shape on its filegroup (SWITCH needs an empty target there), and its next version switched
        in: metadata only. The SWITCH out takes the table's Sch-M lock, at low priority where it
        is the transaction's first table (lock_first)."""
        old = self.checked(f"{table}{OLD_SUFFIX}")
        home = self.whole_table_home(target)
        return {"table": f"{self.schema}.{table}", "old": self.qualified(self.staging_schema, old),
                "columns": target.columns,
                "filegroup": home["filegroup"], "compression": dict(home["compression"]),
                "heap_compression": home["compression"][0][1] if home["compression"] else "NONE",
                "indexes": target.indexes, "low_priority": lock_first,
                "constraint_names": {i.name: staging_constraint_name(old, i.name) for i in target.indexes
                                     if i.constraint}}

    @staticmethod
    def whole_table_home(target: TargetTable) -> dict:
        """Where an unpartitioned table lives: its filegroup and each index's data compression,
        (index, compression) pairs, heap or clustered index first."""
        home = target.partitions[0]
        return {"filegroup": home.filegroup, "compression": home.compression}

    def whole_swap(self, table: str, targets: Mapping[str, TargetTable] | None) -> TargetTable | None:
        """The unpartitioned table its next version is switched into: `targets[table]` (the
        catalog's answers) where SWITCH can take it, or, without them (no server: the script), the
        table setup creates; None where its rows are copied instead."""
        if targets is None:
            return self.new_whole_target(table)
        target = targets.get(table)
        if target is None or not target.exists or not target.partitions:
            return None
        return None if whole_table_blockers(target, self.spec.table(table)) else target

    def new_whole_target(self, table: str) -> TargetTable:
        """An unpartitioned table as setup creates it (no server: the script): on PRIMARY, the
        spec's columns, no index."""
        return TargetTable(exists=True, data_space="PRIMARY", columns=[
            ColumnInfo(c["name"], c["type"], c["nullable"]) for c in self.columns(self.spec.table(table))],
            partitions=[Partition(number=1, lower=None, upper=None, filegroup="PRIMARY", rows=0,
                                  compression=(("(heap)", "NONE"),))])

    def publish_order(self, name: str) -> tuple[bool, str]:
        """Where a table's steps go in the batch's publish: the partitioned tables first, in name
        order, then the unpartitioned ones. Only the transaction's first table waits for its lock
        at low priority, and only a partitioned table can (by the switch of a partition); an
        unpartitioned table first would ask for its Sch-M at normal priority, with new readers
        queued behind the request. The same order in every publish of these tables."""
        return (not self.spec.table(name).partitioned, name)

    def render_publish(self, tables: list[dict], batch: str, run: str) -> list[str]:
        """Every table of the batch in one transaction (publish_batch.sql, `publish: batch`):
        `tables` in `publish_order`, each a partitioned table's `commit_context` (with
        "partitioned": True) or an unpartitioned one's `replace_context`."""
        return self.render("publish_batch.sql", tables=tables, batch=batch, run=run, wait_minutes=self.wait_minutes(),
                           commit_lock_wait_ms=self.commit_lock_wait_ms, commit_attempts=self.commit_attempts)

    def publish_sql(self, plan: LoadPlan, targets: Mapping[str, TargetTable] | None = None,
                    batch: str | None = None, run: str | None = None) -> list[str]:
        """The batch's publish: every table of the plan with a stream to load, in one transaction.
        Each partitioned table against `targets[name]` (the catalog's answers), or without it
        (no server: the script) against the table setup creates for the batch."""
        batch = self.lease_batch or self.script_batch if batch is None else batch
        run = self.lease_holder or "" if run is None else run
        tables = []
        for t in sorted(plan.tables, key=lambda t: self.publish_order(t.table.name)):
            loads = [s for s in t.streams if not s.empty]
            if not loads:
                continue
            if not t.table.partitioned:
                tables.append(self.replace_context(loads[0], self.whole_swap(t.table.name, targets),
                                                   lock_first=not tables))
                continue
            target = (targets or {}).get(t.table.name) or self.new_target(t)
            streams = self.incoming(t)
            wp = self.window(t.table.name, target, streams, batch)
            if not wp.ok:
                raise TargetError("\n".join(wp.problems), permanent=True)
            tables.append({"partitioned": True, **self.commit_context(t.table.name, wp, target, streams,
                                                                      lock_first=not tables)})
        return self.render_publish(tables, batch, run) if tables else []

    def script(self, plan: LoadPlan) -> str:
        """The whole load as T-SQL for review, in execution order, one batch per GO."""
        out = [f"-- Switchyard load plan: spec {self.spec.name}, {plan.streams} streams, target mssql, "
               f"load mode {self.load_mode}",
               f"-- database {self.database}, schema {self.schema}; {self._port_rule()}",
               f"USE {self.q(self.database)};", "GO", "", "-- objects"]

        def emit(statements: list[str]) -> None:
            for stmt in statements:
                out.append(stmt + ";")
                out.append("GO")

        emit(self.setup_sql(plan))
        for s in plan.all_streams():
            if s.empty:
                continue
            where = (f"keys {s.key_min}..{s.key_max}, filegroup {s.filegroup}" if s.partitioned
                     else "loaded whole, on PRIMARY")
            out.append(f"\n-- {s.group_id}: {s.file}, {where}, port {self.port_for(s.stream)}")
            # A table loaded whole: its staging table made to the shape setup gives the table (on
            # PRIMARY), which the switch moves it into.
            emit(self.prepare_sql(s) if s.partitioned else self.prepare_sql(s, filegroup="PRIMARY"))
            emit(self.load_sql(s))
            kind, why = self.load_path(s)
            if kind != "bulk_insert":
                # The client path: the worker reads the file (streamed, gzip decompressed on the
                # fly) and sends typed rows; nothing of it is T-SQL, so the plan says it here.
                out.append(f"-- load: TDS bulk copy from the worker of {s.file} into {self.staging_schema}."
                           f"{s.staging_table} (table lock, check constraints, batch size {self.batch_size}, "
                           f"packet size {self.packet_size}): {why}")
            emit(self.constraint_sql(s))
            emit(self.switch_sql(s, replace_existing=False,
                                 target=None if s.partitioned else self.new_whole_target(s.table)))
            if s.partitioned:
                out.append(f"-- switch: the target's indexes built on {self.staging_schema}.{s.staging_table} "
                           f"(none on a table setup made from the spec), then the stream is marked ready; "
                           + ("the batch's publish moves it in with every table of the batch"
                              if self.spec.publish == "batch" else "the table's last switch runs the table's commit"))
        if self.spec.publish == "batch":
            publish = self.publish_sql(plan)
            if publish:
                out.append("\n-- publish_batch: once every group of the run is validated and staged, every table of "
                           "the batch goes in, in one transaction")
                emit(publish)
            return "\n".join(out) + "\n"
        for t in plan.tables:
            commit = self.commit_sql(t)
            if commit:
                out.append(f"\n-- {t.table.name}: its last switch moves the batch in whole")
                emit(commit)
        return "\n".join(out) + "\n"
