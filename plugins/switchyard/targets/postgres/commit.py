"""switch and publish on PostgreSQL: a stream's staging table attached to its table's next version,
which the table's last switch (publish: table) or the batch's publish (publish: batch) moves into the
target in one transaction."""
from __future__ import annotations

import logging
import re
import time
from contextlib import contextmanager
from datetime import date, datetime
from typing import Any, Iterator

from switchyard.core import keys
from switchyard.core.planner import StreamPlan
from switchyard.targets.base import TargetError
from switchyard.targets.commit import CommitSession, SwitchProtocol

log = logging.getLogger(__name__)

# The commit's ACCESS EXCLUSIVE request is made in attempts of at most this long. While such a
# request waits, every new reader of the table queues behind it: it conflicts with their ACCESS
# SHARE, and PostgreSQL grants a lock only after the conflicting requests ahead of it
# (https://www.postgresql.org/docs/current/explicit-locking.html). So a request held up by a
# long reader gives up after this, back to a savepoint, the readers behind it go on, and it asks
# again after LOCK_PAUSE_SECONDS, until the step's lock_timeout_seconds have passed.
LOCK_ATTEMPT_SECONDS = 1.0
LOCK_PAUSE_SECONDS = 1.0


class PostgresCommit(SwitchProtocol):
    """The switch protocol's hooks on PostgreSQL: a stream staged by attaching it to its table's
    next version, the table's batch moved in by swapping partitions in one transaction."""

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
            # Bounds of date and timestamp keys are printed in the session's DateStyle (for this
            # transaction only: the connection may be the step's kept session).
            cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
            bound, parent = self._existing_partition(cur, stream) or (None, None)
        if bound is None or parent != [self.schema, stream.table]:
            return None
        found = re.fullmatch(r"FOR VALUES FROM \('?([^')]*)'?\) TO \('?([^')]*)'?\)", bound)
        if not found or _bound_values(stream.key_kind, found[1], found[2]) != self.bounds(stream):
            return None
        return {"partition": f"{self.schema}.{stream.partition_table}", "attach_scan_skipped": None,
                "in_target": True}

    # --- the switch protocol's hooks (targets/commit.py) --------------------------------------
    @contextmanager
    def commit_session(self, stream: StreamPlan | None, tables: list[str]) -> Iterator[CommitSession]:
        """One transaction. No lock yet: a stream's switch takes its table's next version's lock in
        switch_partition.sql, a publish every table's in publish_tables, once its checks pass."""
        session = CommitSession(cur=None)
        locked_at = None

        def notice(d) -> None:
            session.notices.append(d.message_primary or "")

        with self.connection() as conn:
            conn.add_notice_handler(notice)
            try:
                with conn.transaction(), conn.cursor() as cur:
                    session.cur = cur
                    # Bounds of date and timestamp keys are read as the server prints them: in ISO.
                    cur.execute("SET LOCAL DateStyle = 'ISO, YMD'")
                    # DEBUG1 carries PostgreSQL's word on whether each ATTACH could skip its scan.
                    cur.execute("SET LOCAL client_min_messages = debug1")
                    yield session
                    locked_at = session.locked_at
            finally:
                # The connection may be the step's kept session: the handler is this session's.
                conn.remove_notice_handler(notice)
            # The transaction's end: the locks are held until the commit is on disk.
            if locked_at is not None:
                session.held_seconds = time.monotonic() - locked_at

    def planned(self, cur, table: str) -> dict[str, dict]:
        """This table's planned partitions (setup's), by staging table name."""
        cur.execute(
            f"SELECT staging_table, partition_name, stream, batch, key_min, key_max, rows_planned, run "
            f"FROM {self.qualified(self.control_schema, 'planned_partitions')} "
            f"WHERE target_schema = %s AND table_name = %s ORDER BY stream", (self.schema, table))
        keys = ("staging_table", "partition_name", "stream", "batch", "key_min", "key_max", "rows_planned", "run")
        return {row[0]: dict(zip(keys, row)) for row in cur.fetchall()}

    def mark_staged(self, session: CommitSession, stream: StreamPlan, planned: dict[str, dict]) -> dict[str, Any]:
        """The staging table attached to the table's next version (switch_partition.sql)."""
        cur, where = session.cur, f"{self.schema}.{stream.table}"
        cur.execute("SELECT to_regclass(%s) IS NOT NULL",
                    (self.qualified(self.staging_schema, self.next_table(stream.table)),))
        if not cur.fetchone()[0]:
            raise TargetError(
                f"switch of {stream.group_id}: the next version of {where}, "
                f"{self.staging_schema}.{self.next_table(stream.table)}, is missing (dropped by hand?); "
                f"run the batch again from setup.plan", permanent=True)
        import psycopg
        attached = stream.staging_table in self._next_bounds(cur, stream.table)
        for stmt in self.render("switch_partition.sql", s=stream, attached=attached,
                                next_table=self.next_table(stream.table), **self._bound_context(stream)):
            try:
                cur.execute(stmt)
            except psycopg.errors.DatatypeMismatch as exc:
                # ATTACH refuses a table whose columns or CHECK constraints differ from the next
                # version's (ALTER TABLE, ATTACH PARTITION: "must have all the same columns as the
                # target and no more" and "all CHECK and NOT NULL constraints"). This stream's
                # staging table was made now, like the table; the next version at setup: the
                # table changed in between (a DBA's ALTER between a failed run and its clear).
                raise TargetError(
                    f"switch of {stream.group_id}: {where} changed since this run's setup ({exc.diag.message_primary}: "
                    f"its next version {self.staging_schema}.{self.next_table(stream.table)} was made by setup with "
                    f"the table as it was then). Clearing this group cannot load the batch: clear the whole run from "
                    f"setup.plan, or start a new run. {where} holds none of this batch", permanent=True) from exc
        # After the lock: the table's other switches that went before are visible now.
        bounds = self._next_bounds(cur, stream.table)
        return {"partition": f"{self.schema}.{stream.partition_table}",
                "replaced": self._existing_partition(cur, stream) is not None, "already_switched": attached,
                "waiting_for": sorted(set(planned) - set(bounds), key=lambda n: planned[n]["stream"])}

    def switch_facts(self, session: CommitSession, result: dict[str, Any]) -> dict[str, Any]:
        attaches = (0 if result["already_switched"] else 1) + result.get("partitions_in", 0)
        return {"attach_scan_skipped": _scans_skipped(session.notices, attaches)}

    def staged_streams(self, cur, table: str, planned: dict[str, dict]) -> set[str]:
        return set(self._next_bounds(cur, table))

    def next_version_exists(self, cur, table: str) -> bool:
        cur.execute("SELECT to_regclass(%s) IS NOT NULL", (self.qualified(self.staging_schema, self.next_table(table)),))
        return cur.fetchone()[0]

    def published_by(self, cur, tables: list[str], holder: str) -> bool:
        cur.execute(f"SELECT count(*) FROM {self.qualified(self.control_schema, 'partition_batches')} "
                    f"WHERE target_schema = %s AND table_name = ANY(%s) AND run = %s", (self.schema, tables, holder))
        return cur.fetchone()[0] > 0

    def published_at(self, table: str) -> datetime | None:
        return self.fetch(f"SELECT max(switched_at) FROM {self.qualified(self.control_schema, 'partition_batches')} "
                          f"WHERE target_schema = %s AND table_name = %s AND run = %s",
                          (self.schema, table, self.lease_holder or ""))[0][0]

    def server_time(self) -> datetime:
        # clock_timestamp(), not now(): the time of the statement, not of its transaction's start.
        return self.fetch("SELECT clock_timestamp()")[0][0]

    def publish_tables(self, session: CommitSession, names: list[str], loads: dict[str, list[StreamPlan]],
                       planned: dict[str, dict[str, dict]]) -> dict[str, dict]:
        """Every table locked first, then each moved in. The transaction then changes catalog
        entries only (an unpartitioned table's rows are copied: a lookup table's)."""
        cur = session.cur
        self.lock_tables(cur, names)
        session.locked_at = time.monotonic()
        return {name: self._move_in(cur, name, planned[name]) if name in planned
                else self._commit_whole(cur, loads[name][0]) for name in names if loads[name]}

    def publish_facts(self, session: CommitSession, results: dict[str, dict]) -> dict[str, Any]:
        attaches = sum(t.get("partitions_in", 0) for t in results.values())
        return {"attach_scan_skipped": _scans_skipped(session.notices, attaches)}

    def stage_whole(self, stream: StreamPlan) -> None:
        """The staging table renamed to the table's next version (`publish: batch`): the batch's
        publish replaces the table's rows with it."""
        self.execute([f"DROP TABLE IF EXISTS {self.qualified(self.staging_schema, self.next_table(stream.table))}",
                      f"ALTER TABLE {self.qualified(self.staging_schema, stream.staging_table)} "
                      f"RENAME TO {self.q(self.next_table(stream.table))}"])

    def replace_whole(self, stream: StreamPlan) -> None:
        self.execute(self.switch_sql(stream, replace_existing=True))

    def lock_timed_out(self, exc: BaseException) -> bool:
        import psycopg
        return isinstance(exc, psycopg.errors.LockNotAvailable)

    def driver_message(self, exc: BaseException) -> str | None:
        import psycopg
        return (exc.diag.message_primary or str(exc)) if isinstance(exc, psycopg.Error) else None

    def lock_wait_words(self) -> str:
        return f"waited {self.lock_timeout_seconds}s"

    def lock_tables(self, cur, names: list[str]) -> None:
        """ACCESS EXCLUSIVE on each table and its partitions, in the caller's transaction, asked
        for in attempts of LOCK_ATTEMPT_SECONDS at most, each given up back to a savepoint, until
        lock_timeout_seconds have passed (then LockNotAvailable, as one long wait would end). One
        statement takes the tables one by one in the order listed: every commit lists them in name
        order. A lock the transaction holds already is granted at once."""
        import psycopg
        statement = ("LOCK TABLE " + ", ".join(self.qualified(self.schema, n) for n in names)
                     + " IN ACCESS EXCLUSIVE MODE")
        deadline = time.monotonic() + self.lock_timeout_seconds
        while True:
            wait = max(0.001, min(LOCK_ATTEMPT_SECONDS, deadline - time.monotonic()))
            cur.execute(f"SET LOCAL lock_timeout = '{int(wait * 1000)}ms'")
            try:
                with cur.connection.transaction():
                    cur.execute(statement)
                break
            except psycopg.errors.LockNotAvailable:
                if time.monotonic() + LOCK_PAUSE_SECONDS >= deadline:
                    raise
                time.sleep(LOCK_PAUSE_SECONDS)
        # Held: the transaction's other statements wait only on what the lock does not cover.
        cur.execute(f"SET LOCAL lock_timeout = '{int(self.lock_timeout_seconds)}s'")

    def commit_table(self, cur, table: str, planned: dict[str, dict]) -> dict[str, Any]:
        """The table's batch moved in whole, in the transaction of its last switch: the table is
        locked before its partitions are read, as a partition attached in between would be missed."""
        self.lock_tables(cur, [table])
        return self._move_in(cur, table, planned)

    def _move_in(self, cur, table: str, planned: dict[str, dict]) -> dict[str, Any]:
        """The table's batch moved in whole, in the caller's transaction, which holds the table's
        lock (commit_table; the batch's publish locks every table first)."""
        from switchyard.core.preflight import Partition, retention, retired_on_arrival
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
        mine = [p for p in retired if p.batch == batch]
        if mine:
            raise TargetError(retired_on_arrival(f"{self.schema}.{table}", batch, why, len(mine), len(planned))
                              + "; nothing was switched", permanent=True)
        retire = [self._archive_names(cur, p.name) if spec_table.retire == "archive"
                  else {"name": p.name, "archived_as": None, "indexes": []} for p in retired]
        staged = [planned[name] for name in sorted(planned, key=lambda n: planned[n]["stream"])]
        # The bounds the plan gave (the ones each stream's switch attached with), rendered by `lit`.
        move = [{"staging": p["staging_table"], "partition": p["partition_name"],
                 "bound": self._bound_sql(p["lower"], p["upper_next"], key_type)} for p in staged]
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

    def _commit_whole(self, cur, stream: StreamPlan) -> dict[str, Any]:
        """An unpartitioned table's rows replaced by its next version's, in the caller's
        transaction. DELETE and INSERT keep the table itself (its grants, the views on it);
        the rows are copied under the publish's lock: a lookup table's, a few milliseconds.
        DELETE, not TRUNCATE, which is not MVCC-safe: a transaction whose snapshot is older than
        this commit (REPEATABLE READ, SERIALIZABLE, pg_dump) would find the table empty
        (https://www.postgresql.org/docs/current/mvcc-caveats.html); after DELETE it finds the
        rows it saw before. The old rows' space goes back by (auto)vacuum."""
        table = self.spec.table(stream.table)
        target = self.qualified(self.schema, table.name)
        staged = self.qualified(self.staging_schema, self.next_table(table.name))
        cols = ", ".join(self.q(c.name) for c in table.columns)
        cur.execute(f"DELETE FROM {target}")
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

    def _archive_names(self, cur, name: str) -> dict[str, Any]:
        """The names partition `name` and its indexes take in the archive schema. A table's
        indexes are relations of its schema: SET SCHEMA moves them along, and fails when the
        archive holds one of their names already (an earlier retirement of the same range, or
        a table archived and renamed since). Each index whose name is taken there is renamed
        first, to the table's archived name with the index's own suffix where it has one."""
        archived_as = self._free_name(cur, name, name, set())
        cur.execute("SELECT i.relname FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
                    "WHERE x.indrelid = to_regclass(%s) ORDER BY 1", (self.qualified(self.schema, name),))
        taken: set[str] = set()
        renames = []
        for (index,) in cur.fetchall():
            wanted = archived_as + index[len(name):] if index.startswith(name) else index
            wanted = wanted if len(wanted) <= keys.MAX_NAME else index
            new = self._free_name(cur, wanted, index, taken)
            taken.add(new)
            if new != index:
                renames.append({"index": index, "as": new})
        return {"name": name, "archived_as": archived_as, "indexes": renames}

    def _free_name(self, cur, name: str, own: str, taken: set[str]) -> str:
        """`name`, or `name_<n>`, for relation `own` of the target schema: free in the archive
        schema, free in the target schema too unless it is `own`'s name (the rename happens
        there, before the move), and not in `taken`."""
        for n in range(0, 1000):
            candidate = self.checked(name if n == 0 else f"{name[:56]}_{n}")
            if candidate in taken:
                continue
            cur.execute("SELECT to_regclass(%s) IS NULL AND (%s OR to_regclass(%s) IS NULL)",
                        (self.qualified(self.archive_schema, candidate), candidate == own,
                         self.qualified(self.schema, candidate)))
            if cur.fetchone()[0]:
                return candidate
        raise TargetError(f"{self.archive_schema}: no free name for {name}")


def _scans_skipped(notices: list[str], attaches: int) -> bool | None:
    """Whether every ATTACH proved its bound from the CHECK constraint instead of scanning: one
    notice each (None when there was none)."""
    skipped = sum("is implied by existing constraints" in n for n in notices)
    return skipped >= attaches if attaches else None


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

