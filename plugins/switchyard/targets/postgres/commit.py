"""switch and publish on PostgreSQL: a stream's staging table attached to its table's next version,
which the table's last switch (publish: table) or the batch's publish (publish: batch) moves into the
target in one transaction."""
from __future__ import annotations

import logging
import re
import time
from datetime import date, datetime
from typing import Any

from switchyard.core import keys
from switchyard.core.planner import StreamPlan
from switchyard.targets.base import TargetError, stream_rows, unstaged_problems

log = logging.getLogger(__name__)


class PostgresCommit:
    """A stream's switch, a table's commit and a batch's publish."""

    def staging_exists(self, stream: StreamPlan) -> bool:
        return self.fetch("SELECT to_regclass(%s) IS NOT NULL",
                          (self.qualified(self.staging_schema, stream.staging_table),))[0][0]

    def switched_in(self, stream: StreamPlan) -> dict[str, Any] | None:
        """The partition named stream.partition_table, attached to the stream's table FOR
        VALUES FROM (lower) TO (upper + one unit); for an unpartitioned table, the table."""
        if not stream.partitioned:
            if self.spec.publish == "batch":
                # Validated and staged as the table's next version: the batch's publish moves it in.
                staged = self.fetch("SELECT to_regclass(%s) IS NOT NULL",
                                    (self.qualified(self.staging_schema, self.next_table(stream.table)),))
                return ({"partition": None, "attach_scan_skipped": None, "in_target": False,
                         "table_switched": False} if staged[0][0] else None)
            exists = self.fetch("SELECT to_regclass(%s) IS NOT NULL", (self.qualified(self.schema, stream.table),))
            return {"partition": None, "attach_scan_skipped": None, "in_target": True} if exists[0][0] else None
        with self.connection() as conn, conn.cursor() as cur:
            # Bounds of date and timestamp keys are printed in the session's DateStyle.
            cur.execute("SET DateStyle = 'ISO, YMD'")
            bound, parent = self._existing_partition(cur, stream) or (None, None)
        if bound is None or parent != [self.schema, stream.table]:
            return None
        found = re.fullmatch(r"FOR VALUES FROM \('?([^')]*)'?\) TO \('?([^')]*)'?\)", bound)
        if not found or _bound_values(stream.key_kind, found[1], found[2]) != self.bounds(stream):
            return None
        return {"partition": f"{self.schema}.{stream.partition_table}", "attach_scan_skipped": None,
                "in_target": True}

    def switch_staging(self, stream: StreamPlan) -> dict[str, Any]:
        """Unpartitioned: the table replaced whole. Partitioned: the target's indexes built on the
        staging table, which then joins the table's next version; the table's last switch moves
        the next version in (`in_target` says whether the partition is in the target now)."""
        import psycopg
        if stream.partitioned:
            indexes = self._build_target_indexes(stream)
            return {**self._stage(stream), **indexes}
        if self.spec.publish == "batch":
            return self._stage_whole(stream)
        try:
            self.execute(self.switch_sql(stream, replace_existing=True))
        except psycopg.errors.LockNotAvailable as exc:
            raise self._lock_error(stream) from exc
        except psycopg.Error as exc:
            raise TargetError(f"switch of {stream.group_id} into {self.schema}.{stream.table} failed: "
                              f"{exc.diag.message_primary or exc}") from exc
        return {"partition": None, "replaced": True, "attach_scan_skipped": None, "in_target": True,
                "table_switched": True}

    def _lock_error(self, stream: StreamPlan) -> TargetError:
        return TargetError(
            f"switch of {stream.group_id} into {self.schema}.{stream.table} waited "
            f"{self.lock_timeout_seconds}s for a lock (a long-running reader holds the table); "
            f"nothing was changed, retry later")

    def _stage(self, stream: StreamPlan) -> dict[str, Any]:
        import psycopg
        notices: list[str] = []
        where = f"{self.schema}.{stream.table}"
        with self.connection() as conn:
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            try:
                with conn.transaction(), conn.cursor() as cur:
                    planned = self._planned(cur, stream.table)
                    mine = planned.get(stream.staging_table)
                    holder = self.lease_holder or ""
                    if mine is None or mine["run"] != holder:
                        by = (f"run {next(iter(planned.values()))['run'] or '(no run)'} (batch "
                              f"{next(iter(planned.values()))['batch']})" if planned else "no run")
                        raise TargetError(
                            f"switch of {stream.group_id}: {where} has no switch of this run pending: its next "
                            f"version was planned by {by}. A group of an earlier run cannot switch into it; "
                            f"run this batch again from setup.plan (clear the whole run)", permanent=True)
                    if (mine["partition_name"], mine["key_min"], mine["key_max"]) != (
                            stream.partition_table, str(stream.lower), str(stream.upper)):
                        raise TargetError(
                            f"switch of {stream.group_id}: setup planned {mine['partition_name']} (keys "
                            f"{mine['key_min']}..{mine['key_max']}), this group carries {stream.partition_table}; "
                            f"run the batch again from setup.plan", permanent=True)
                    cur.execute("SELECT to_regclass(%s) IS NOT NULL",
                                (self.qualified(self.staging_schema, self.next_table(stream.table)),))
                    if not cur.fetchone()[0]:
                        raise TargetError(
                            f"switch of {stream.group_id}: the next version of {where}, "
                            f"{self.staging_schema}.{self.next_table(stream.table)}, is missing (dropped by hand?); "
                            f"run the batch again from setup.plan", permanent=True)
                    attached = stream.staging_table in self._next_bounds(cur, stream.table)
                    # Date and timestamp bounds are read as the server prints them: in ISO.
                    cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
                    # DEBUG1 carries PostgreSQL's word on whether ATTACH could skip its scan.
                    cur.execute("SET LOCAL client_min_messages = debug1")
                    for stmt in self.render("switch_partition.sql", s=stream, attached=attached,
                                            next_table=self.next_table(stream.table),
                                            **self._bound_context(stream)):
                        cur.execute(stmt)
                    # After the lock: the table's other switches that went before are visible now.
                    bounds = self._next_bounds(cur, stream.table)
                    replaced = self._existing_partition(cur, stream) is not None
                    waiting = sorted(set(planned) - set(bounds), key=lambda n: planned[n]["stream"])
                    result: dict[str, Any] = {
                        "partition": f"{self.schema}.{stream.partition_table}", "replaced": replaced,
                        "already_switched": attached, "in_target": False, "table_switched": False,
                        "waiting_for": waiting}
                    # `publish: table`: the table's last switch moves its batch in. `publish: batch`:
                    # the batch's publish moves every table in together (publish_batch).
                    if not waiting and self.spec.publish == "table":
                        result.update(self._commit_table(cur, stream.table, planned, bounds))
                        result["in_target"] = True
            except psycopg.errors.LockNotAvailable as exc:
                raise self._lock_error(stream) from exc
            except psycopg.Error as exc:
                raise TargetError(f"switch of {stream.group_id} into {where} failed: "
                                  f"{exc.diag.message_primary or exc}") from exc
        # One notice per ATTACH that proved its bound from the CHECK constraint instead of scanning.
        attaches = (0 if attached else 1) + result.get("partitions_in", 0)
        skipped = sum("is implied by existing constraints" in n for n in notices)
        result["attach_scan_skipped"] = skipped >= attaches if attaches else None
        return result

    def _commit_table(self, cur, table: str, planned: dict[str, dict], bounds: dict[str, str]) -> dict[str, Any]:
        """The table's batch moved in whole, in the caller's transaction (its last switch's)."""
        from switchyard.core.preflight import Partition, retention
        spec_table = self.spec.table(table)
        batch = next(iter(planned.values()))["batch"]
        current = self._target_partitions(cur, table)
        if spec_table.mode == "replace":
            remove = current
        else:
            remove = [p for p in current if p.batch == batch]
        incoming = {p["partition_name"] for p in planned.values()}
        kept = [p for p in current if p not in remove]
        clash = [p.name for p in kept if p.name in incoming]
        if clash:
            raise TargetError(f"{self.schema}.{table}: partition {', '.join(clash)} belongs to another batch; "
                              f"this batch would take its name. Nothing was switched; run the batch again from "
                              f"setup.plan, whose pre-flight says what differs", permanent=True)
        stray = [p for p in remove if p.schema != self.schema]
        if stray:
            raise TargetError(f"{self.schema}.{table}: partition {stray[0].schema}.{stray[0].name} lives in another "
                              f"schema; move it to {self.schema} or detach it", permanent=True)
        kind, key_type = self.key_kind(spec_table), self.key_type(table)
        for p in planned.values():
            p["lower"] = _typed(p["key_min"], kind)
            p["upper_next"] = keys.after(_typed(p["key_max"], kind), key_type)
        after = kept + [Partition(name=p["partition_name"], batch=batch, lower=p["lower"], upper=p["upper_next"])
                        for p in planned.values()]
        retired, why = retention(spec_table, after)
        if any(p.batch == batch for p in retired):
            raise TargetError(f"{self.schema}.{table}: batch {batch} would be retired as it goes in ({why}); "
                              f"nothing was switched", permanent=True)
        retire = [{"name": p.name, "archived_as": self._archive_name(cur, p.name)
                   if spec_table.retire == "archive" else None} for p in retired]
        staged = [planned[name] for name in sorted(planned, key=lambda n: planned[n]["stream"])]
        # The bounds the plan gave (the ones each stream's switch attached with), rendered by `lit`.
        move = [{"staging": p["staging_table"], "partition": p["partition_name"],
                 "bound": self._bound_sql(p["lower"], p["upper_next"])} for p in staged]
        for stmt in self.render("commit_table.sql", table=table, next_table=self.next_table(table),
                                mode=spec_table.mode, remove=[p.name for p in remove], move=move, retire=retire,
                                retention=", ".join(f"{k}: {v}" for k, v in (("keep", spec_table.keep),
                                                    ("keep_days", spec_table.keep_days)) if v is not None),
                                archive_schema=self.archive_schema
                                if spec_table.retire == "archive" else None):
            cur.execute(stmt)
        control = self.qualified(self.control_schema, "partition_batches")
        gone = [p.name for p in remove] + [p.name for p in retired]
        cur.execute(f"DELETE FROM {control} WHERE target_schema = %s AND table_name = %s "
                    f"AND partition_name = ANY(%s)", (self.schema, table, gone + sorted(incoming)))
        cur.executemany(
            f"INSERT INTO {control} (target_schema, table_name, partition_name, batch, key_min, key_max, "
            f"rows_planned, run, switched_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, now())",
            [(self.schema, table, p["partition_name"], batch, p["key_min"], p["key_max"], p["rows_planned"],
              p["run"]) for p in staged])
        cur.execute(f"DELETE FROM {self.qualified(self.control_schema, 'planned_partitions')} "
                    f"WHERE target_schema = %s AND table_name = %s", (self.schema, table))
        log.info("%s.%s: batch %s switched in: %d partitions%s%s", self.schema, table, batch, len(staged),
                 f"; replaced {', '.join(p.name for p in remove)}" if remove else "",
                 f"; {why}" + (f" (moved to {self.archive_schema})" if spec_table.retire == "archive" else " (dropped)")
                 if retired else "")
        return {"table_switched": True, "batch": batch, "partitions_in": len(staged),
                "removed": [p.name for p in remove],
                "retired": [f"{self.archive_schema}.{r['archived_as']}" if r["archived_as"] else r["name"]
                            for r in retire]}

    def _stage_whole(self, stream: StreamPlan) -> dict[str, Any]:
        """An unpartitioned table's validated staging table, renamed to the table's next version
        (`publish: batch`): the batch's publish replaces the table's rows with it."""
        import psycopg
        staged = self.qualified(self.staging_schema, stream.staging_table)
        try:
            self.execute([f"DROP TABLE IF EXISTS {self.qualified(self.staging_schema, self.next_table(stream.table))}",
                          f"ALTER TABLE {staged} RENAME TO {self.q(self.next_table(stream.table))}"])
        except psycopg.Error as exc:
            raise TargetError(f"switch of {stream.group_id}: could not stage {staged} as the next version of "
                              f"{self.schema}.{stream.table}: {exc.diag.message_primary or exc}") from exc
        return {"partition": None, "replaced": None, "already_switched": False, "in_target": False,
                "table_switched": False, "waiting_for": []}

    def publish_batch(self, streams: list[StreamPlan]) -> dict[str, Any]:
        """Every table of the batch in, in one transaction (`publish: batch`): readers see the
        previous batch or this one, across tables. `streams`: the run's plan for its tables.

        Refuses, changing nothing, unless every stream the plan loads was validated and staged
        (attached to its table's next version, or an unpartitioned table's next version made):
        a stream that produced no load is named, with its rows. Every table is locked first, in
        name order, with `lock_timeout`: a long reader delays the publish, not the other way
        round, and the transaction then changes catalog entries only (an unpartitioned table's
        rows are copied: a lookup table's). A retry whose earlier attempt committed finds
        nothing pending and this run's rows in `partition_batches`: it reports that."""
        import psycopg
        holder = self.lease_holder or ""
        by_table: dict[str, list[StreamPlan]] = {}
        for s in streams:
            by_table.setdefault(s.table, []).append(s)
        names = sorted(by_table)
        started = time.monotonic()
        notices: list[str] = []
        with self.connection() as conn:
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            try:
                with conn.transaction(), conn.cursor() as cur:
                    cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
                    cur.execute(f"SET LOCAL lock_timeout = '{int(self.lock_timeout_seconds)}s'")
                    # DEBUG1 carries PostgreSQL's word on whether each ATTACH skipped its scan.
                    cur.execute("SET LOCAL client_min_messages = debug1")
                    if not self._anything_staged(cur, names, holder) and self._published_by(cur, names, holder):
                        return {"tables": names, "already_published": True, "lock_seconds": 0.0}
                    pending, problems = self._publish_pending(cur, by_table, holder)
                    if problems:
                        raise TargetError(
                            f"publish of batch {self.lease_batch or ''} refused; no table of the batch was "
                            f"published, every table keeps its previous contents:\n- " + "\n- ".join(problems),
                            permanent=True)
                    # One statement locks every table, in this order (PostgreSQL takes them one by
                    # one in the order listed), so two publishes never wait on each other in a circle.
                    cur.execute("LOCK TABLE " + ", ".join(self.qualified(self.schema, n) for n in names)
                                + " IN ACCESS EXCLUSIVE MODE")
                    locked = time.monotonic()
                    tables = {}
                    for name in names:
                        table = self.spec.table(name)
                        if table.partitioned:
                            tables[name] = self._commit_table(cur, name, pending[name],
                                                              self._next_bounds(cur, name))
                        else:
                            tables[name] = self._commit_whole(cur, by_table[name][0])
                # The transaction's end: the locks are held until the commit is on disk.
                committed = time.monotonic()
            except psycopg.errors.LockNotAvailable as exc:
                raise TargetError(f"publish of batch {self.lease_batch or ''} waited {self.lock_timeout_seconds}s "
                                  f"for a lock on {', '.join(names)} (a long-running reader holds one); nothing "
                                  f"was published, retry later") from exc
            except psycopg.Error as exc:
                raise TargetError(f"publish of batch {self.lease_batch or ''} into {self.schema} failed: "
                                  f"{exc.diag.message_primary or exc}; nothing was published") from exc
        attaches = sum(t.get("partitions_in", 0) for t in tables.values())
        skipped = sum("is implied by existing constraints" in n for n in notices)
        return {"tables": names, "already_published": False, "by_table": tables,
                "attach_scan_skipped": skipped >= attaches if attaches else None,
                "lock_seconds": round(committed - locked, 4), "seconds": round(committed - started, 4)}

    def _publish_pending(self, cur, by_table: dict[str, list[StreamPlan]], holder: str
                         ) -> tuple[dict[str, dict], list[str]]:
        """(each partitioned table's planned partitions, every reason the batch cannot go in)."""
        pending, problems = {}, []
        for name, table_streams in sorted(by_table.items()):
            where = f"{self.schema}.{name}"
            loads = [s for s in table_streams if not s.empty]
            if not self.spec.table(name).partitioned:
                cur.execute("SELECT to_regclass(%s) IS NOT NULL",
                            (self.qualified(self.staging_schema, self.next_table(name)),))
                if not cur.fetchone()[0]:
                    problems.append(f"{where}: its stream ({stream_rows(loads[0])}) was not validated and switched in "
                                    f"this run")
                continue
            planned = {k: v for k, v in self._planned(cur, name).items() if v["run"] == holder}
            if not planned:
                if loads:
                    problems.append(f"{where}: nothing of this run is pending (planned by another run, or "
                                    f"published already)")
                continue
            attached = self._next_bounds(cur, name)
            problems += unstaged_problems(where, loads, lambda s: s.staging_table in attached,
                                          lambda s: s.staging_table in planned)
            pending[name] = planned
        return pending, problems

    def _anything_staged(self, cur, tables: list[str], holder: str) -> bool:
        """Whether any of `tables` has something of this run waiting to go in: a planned
        partition, or an unpartitioned table's next version."""
        cur.execute(f"SELECT count(*) FROM {self.qualified(self.control_schema, 'planned_partitions')} "
                    f"WHERE target_schema = %s AND table_name = ANY(%s) AND run = %s", (self.schema, tables, holder))
        if cur.fetchone()[0]:
            return True
        for name in tables:
            if not self.spec.table(name).partitioned:
                cur.execute("SELECT to_regclass(%s) IS NOT NULL",
                            (self.qualified(self.staging_schema, self.next_table(name)),))
                if cur.fetchone()[0]:
                    return True
        return False

    def _published_by(self, cur, tables: list[str], holder: str) -> bool:
        """Whether this run's publish committed already: its rows in partition_batches."""
        cur.execute(f"SELECT count(*) FROM {self.qualified(self.control_schema, 'partition_batches')} "
                    f"WHERE target_schema = %s AND table_name = ANY(%s) AND run = %s", (self.schema, tables, holder))
        return cur.fetchone()[0] > 0

    def _commit_whole(self, cur, stream: StreamPlan) -> dict[str, Any]:
        """An unpartitioned table's rows replaced by its next version's, in the caller's
        transaction. TRUNCATE and INSERT keep the table itself (its grants, the views on it);
        the rows are copied under the publish's lock: a lookup table's, a few milliseconds."""
        table = self.spec.table(stream.table)
        target = self.qualified(self.schema, table.name)
        staged = self.qualified(self.staging_schema, self.next_table(table.name))
        cols = ", ".join(self.q(c.name) for c in table.columns)
        cur.execute(f"TRUNCATE {target}")
        cur.execute(f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {staged}")
        rows = cur.rowcount
        cur.execute(f"DROP TABLE {staged}")
        control = self.qualified(self.control_schema, "partition_batches")
        cur.execute(f"DELETE FROM {control} WHERE target_schema = %s AND table_name = %s", (self.schema, table.name))
        # Recorded as a table-wide "partition" named after the table: the run that published it.
        cur.execute(f"INSERT INTO {control} (target_schema, table_name, partition_name, batch, key_min, key_max, "
                    f"rows_planned, run, switched_at) VALUES (%s, %s, %s, %s, '', '', %s, %s, now())",
                    (self.schema, table.name, table.name, self.lease_batch or "", stream.rows, self.lease_holder or ""))
        if stream.rows is not None and rows != stream.rows:
            # Validation counted the staging table; a different count now means it changed since.
            raise TargetError(f"{self.schema}.{table.name}: {rows} rows to publish, the manifest says {stream.rows}; "
                              f"nothing was published", permanent=True)
        log.info("%s: replaced whole by batch %s: %d rows", target, self.lease_batch, rows)
        return {"table_switched": True, "rows": rows}

    def _archive_name(self, cur, name: str) -> str:
        """`name` in the archive schema, or `name_<n>` when an earlier retirement took it."""
        for n in range(0, 1000):
            candidate = self.checked(name if n == 0 else f"{name[:56]}_{n}")
            cur.execute("SELECT to_regclass(%s) IS NULL", (self.qualified(self.archive_schema, candidate),))
            if cur.fetchone()[0]:
                return candidate
        raise TargetError(f"{self.archive_schema}: no free name for {name}")


def _typed(text: str, kind: str) -> keys.KeyValue:
    """A key bound kept as text in the control tables (the plan's JSON value), as a Python value."""
    return keys.parse_key(kind, int(text) if kind == "integer" else text)


def _bound_values(kind: str, lower: str, upper: str) -> tuple | None:
    """A partition bound's FROM and TO values as PostgreSQL prints them (DateStyle ISO), parsed."""
    try:
        if kind == "integer":
            return int(lower), int(upper)
        parse = date.fromisoformat if kind == "date" else datetime.fromisoformat
        return parse(lower), parse(upper)
    except ValueError:
        return None

