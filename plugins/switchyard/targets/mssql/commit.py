"""switch and publish on SQL Server: the target's indexes on the staging table, SWITCH into the
table's next version, and the table's commit (publish: table) or the batch's publish (publish:
batch) moving it into the target."""
from __future__ import annotations

import dataclasses
import logging
import time
from contextlib import contextmanager
from decimal import Decimal
from typing import Any, Iterator

from switchyard.core.planner import StreamPlan
from switchyard.targets.base import TargetError
from switchyard.targets.commit import CommitSession, SwitchProtocol
from switchyard.targets.mssql.catalog import TargetTable, shape_differences, staging_constraint_name
from switchyard.targets.mssql.errors import _message, error_numbers
from switchyard.targets.mssql.keys import KeyType
from switchyard.targets.mssql.session import drain
from switchyard.targets.mssql.window import Incoming, keys_text

log = logging.getLogger(__name__)

# A unique index build (1505) or an insert (2601, 2627) met a duplicate key.
DUPLICATE_KEY = frozenset({1505, 2601, 2627})


class MssqlCommit(SwitchProtocol):
    """The switch protocol's hooks on SQL Server: a stream marked ready under its table's commit
    lock, the table's batch moved in by SWITCH statements in one transaction (commit_table.sql)."""

    def partition_number(self, stream: StreamPlan) -> int:
        """The stream's partition now, by the table's own function (RANGE LEFT: 1 + the
        boundaries below the stream's smallest key)."""
        key = self.key(stream.table)
        with self.connection() as conn:
            target = self.read_target(conn.cursor(), stream.table)
        return 1 + sum(1 for b in target.boundaries if b < key.value(stream.lower))

    def partition_rows(self, stream: StreamPlan) -> int:
        with self.connection() as conn:
            target = self.read_target(conn.cursor(), stream.table)
        key = self.key(stream.table)
        number = 1 + sum(1 for b in target.boundaries if b < key.value(stream.lower))
        return next((p.rows for p in target.partitions if p.number == number), 0)

    def constraint_trusted(self, stream: StreamPlan) -> bool | None:
        rows = self.fetch("SELECT is_not_trusted FROM sys.check_constraints "
                          "WHERE parent_object_id = OBJECT_ID(?) AND name = ?",
                          (self.qualified(self.staging_schema, stream.staging_table), f"{stream.staging_table}_range"))
        return None if not rows else not rows[0][0]

    def staging_exists(self, stream: StreamPlan) -> bool:
        return self.fetch("SELECT OBJECT_ID(?, N'U')",
                          (self.qualified(self.staging_schema, stream.staging_table),))[0][0] is not None

    def switched_in(self, stream: StreamPlan) -> dict[str, Any] | None:
        """The stream's partition holding rows (its two boundaries in place); for an
        unpartitioned table, the table."""
        target = self.qualified(self.schema, stream.table)
        if not stream.partitioned:
            if self.spec.publish == "batch":
                # Validated and staged as the table's next version: the batch's publish moves it in.
                staged = self.fetch("SELECT OBJECT_ID(?, N'U')", (self.qualified(
                    self.staging_schema, self.next_table(stream.table)),))[0][0] is not None
                return {"partition": None, "in_target": False, "table_switched": False} if staged else None
            exists = self.fetch("SELECT OBJECT_ID(?, N'U')", (target,))[0][0] is not None
            return {"partition": None, "in_target": True} if exists else None
        statement, = self.switched_in_sql(stream)
        key = self.key(stream.table)
        rows = self.fetch(statement, (target, key.param(stream.lower, start=True), key.param(key.before(stream.lower)),
                                      key.param(stream.upper)))
        if not rows:
            return None
        number = int(rows[0][0])
        # Named as the switch that put it there named it (_stage), with its number now.
        return {"partition_number": number, "in_target": True,
                "partition": f"{self.schema}.{stream.table} keys {stream.lower}..{stream.upper}"}

    def prove_target_uniques(self, stream: StreamPlan) -> list[dict[str, Any]]:
        """The target's unique indexes (a DBA's: SQL Server makes none from the spec), checked on
        the staging table at validate: the target's indexes are built there now instead of at
        the switch (_build_target_indexes then finds them), and a duplicate fails the group's
        validation, naming the index and a few duplicated keys, before anything is published.
        The build fails at the first duplicate (Msg 1505); one GROUP BY per unique index, only
        then, finds which index and which keys. One result per unique index, as prove_unique's."""
        import pyodbc
        started = time.monotonic()
        with self.connection(stream.stream) as conn:
            cur = conn.cursor()
            if stream.partitioned:
                target = self.read_target(cur, stream.table)
            else:
                # Replaced by TRUNCATE TABLE and INSERT ... SELECT, the table's own indexes check the
                # rows at the publish; switched in, its staging table carries them from here.
                target = self.swap_target(cur, stream.table)
                if target is None:
                    return []
            uniques = [i for i in target.indexes if i.unique]
        if not uniques:
            return []
        failed = None
        try:
            self._build_target_indexes(stream, target)
        except pyodbc.Error as exc:
            if not error_numbers(exc) & DUPLICATE_KEY:
                raise
            failed = exc
        seconds = round(time.monotonic() - started, 4)
        staging = self.qualified(self.staging_schema, stream.staging_table)
        out = []
        for index in uniques:
            columns = [k for k, _ in index.keys]
            found = {"columns": columns, "index": f"{self.schema}.{index.name}", "duplicates": None,
                     "seconds": seconds}
            if failed is not None:
                found["duplicates"] = self._duplicates(staging, columns, stream.stream, _message(failed))
            out.append(found)
        return out

    def _duplicates(self, staging: str, columns: list[str], stream: int, server: str) -> dict[str, Any] | None:
        """The keys of `columns` the staging table holds more than once, a few of them, or None."""
        cols = ", ".join(self.q(c) for c in columns)
        # Names are validated identifiers (the catalog's, checked by catalog._name), quoted.
        rows = self.fetch(f"SELECT TOP (5) {cols}, COUNT_BIG(*) AS n, COUNT_BIG(*) OVER () AS keys, "
                          f"SUM(COUNT_BIG(*) - 1) OVER () AS extra FROM {staging} GROUP BY {cols} "
                          f"HAVING COUNT_BIG(*) > 1 ORDER BY {cols}", (), stream)
        if not rows:
            return None
        return {"keys": int(rows[0][-2]), "extra_rows": int(rows[0][-1]),
                "examples": [{**{c: _plain(v) for c, v in zip(columns, r)}, "rows": int(r[len(columns)])}
                             for r in rows], "server": server}

    def _build_target_indexes(self, stream: StreamPlan, target: TargetTable | None = None) -> dict[str, Any]:
        """The target's indexes on the staging table, on its filegroup with the compression its
        partition has (setup's plan), before the commit: SWITCH then finds them equal, and the
        build runs per stream, in parallel, outside the table's lock. Idempotent: a retry finds
        them built (an index's name is the target's; a constraint's, see staging_constraint_name).
        `target`: the table as the caller has just read it (prove_target_uniques), not read again."""
        started = time.monotonic()
        with self.connection(stream.stream) as conn:
            cur = conn.cursor()
            if stream.partitioned:
                target = target or self.read_target(cur, stream.table)
                mine = self.planned(cur, stream.table).get(stream.staging_table)
            else:
                target = target or self.swap_target(cur, stream.table)
                mine = None if target is None else self.whole_table_home(target)
            if mine is None or not target.indexes:
                return {"indexes_built": [], "index_seconds": 0.0}
            (indexes_sql,) = self.render("catalog_indexes.sql")
            present = {r[1] for r in cur.execute(indexes_sql, self.qualified(self.staging_schema,
                                                                             stream.staging_table)).fetchall()}
            names = {i.name: staging_constraint_name(stream.staging_table, i.name) for i in target.indexes}
            todo = [i for i in target.indexes if (names[i.name] if i.constraint else i.name) not in present]
            for stmt in self.staging_index_sql(stream, todo, mine["filegroup"], dict(mine["compression"])):
                cur.execute(stmt)
                drain(cur)
        seconds = round(time.monotonic() - started, 4)
        if todo:
            log.info("%s: built the target's %s on the staging table in %.2f s", stream.group_id,
                     ", ".join(i.name for i in todo), seconds)
        return {"indexes_built": [i.name for i in todo], "index_seconds": seconds}

    # --- the switch protocol's hooks (targets/commit.py) --------------------------------------
    @contextmanager
    def commit_session(self, stream: StreamPlan | None, tables: list[str]) -> Iterator[CommitSession]:
        """A session holding each table's commit lock (a session application lock, commit_lock.sql),
        in the order given, to its end: one switch or publish of a table at a time."""
        with self.connection(stream.stream if stream is not None else None) as conn:
            cur = conn.cursor()
            (lock,) = self.render("commit_lock.sql")
            for name in tables:
                drain(cur.execute(lock, f"switchyard.commit.{self.schema}.{name}", self.lock_timeout_seconds * 1000))
            yield CommitSession(cur=cur)

    def mark_staged(self, session: CommitSession, stream: StreamPlan, planned: dict[str, dict]) -> dict[str, Any]:
        """The stream marked ready in planned_partitions (its staging table is switched in by the
        table's commit)."""
        control = self.qualified(self.control_schema, "planned_partitions")
        session.cur.execute(f"UPDATE {control} SET ready_at = SYSUTCDATETIME() WHERE target_schema = ? AND "
                            f"table_name = ? AND staging_table = ? AND ready_at IS NULL", self.schema, stream.table,
                            stream.staging_table)
        # A retried switch whose first attempt marked the stream ready finds it so: it changes nothing.
        return {"partition": f"{self.schema}.{stream.table} keys {stream.lower}..{stream.upper}", "replaced": None,
                "already_switched": planned[stream.staging_table]["ready_at"] is not None,
                "waiting_for": [p["staging_table"] for p in planned.values()
                                if p["ready_at"] is None and p["staging_table"] != stream.staging_table]}

    def staged_streams(self, cur, table: str, planned: dict[str, dict]) -> set[str]:
        return {name for name, p in planned.items() if p["ready_at"] is not None}

    def next_version_exists(self, cur, table: str) -> bool:
        return cur.execute("SELECT OBJECT_ID(?, N'U')", self.qualified(self.staging_schema, self.next_table(table))
                           ).fetchone()[0] is not None

    def published_by(self, cur, tables: list[str], holder: str) -> bool:
        control = self.qualified(self.control_schema, "partition_batches")
        return any(cur.execute(f"SELECT COUNT(*) FROM {control} WHERE target_schema = ? AND table_name = ? "
                               f"AND run = ?", self.schema, name, holder).fetchone()[0] for name in tables)

    def published_at(self, table: str) -> Any:
        control = self.qualified(self.control_schema, "partition_batches")
        return self.fetch(f"SELECT MAX(switched_at) FROM {control} WHERE target_schema = ? AND table_name = ? "
                          f"AND run = ?", (self.schema, table, self.lease_holder or ""))[0][0]

    def server_time(self) -> Any:
        # The clock partition_batches' switched_at is written with (UTC, datetime2).
        return self.fetch("SELECT SYSUTCDATETIME()")[0][0]

    def publish_tables(self, session: CommitSession, names: list[str], loads: dict[str, list[StreamPlan]],
                       planned: dict[str, dict[str, dict]]) -> dict[str, dict]:
        """One transaction (publish_batch.sql): each table's commit steps in `publish_order`, the
        window of each partitioned table planned again from the catalog now, under the same short
        LOCK_TIMEOUT and retry on error 1222 as a table's own commit."""
        tables, results = [], {}
        for name in sorted(names, key=self.publish_order):
            if not loads[name]:
                continue
            if name in planned:
                # The transaction's first table waits for its lock at low priority (lock_step);
                # a later one's wait would hold the tables taken before it.
                context, results[name], _, _ = self._commit_plan(session.cur, name, planned[name],
                                                                 lock_first=not tables)
                tables.append({"partitioned": True, **context})
            else:
                source = self.qualified(self.staging_schema, self.next_table(name))
                tables.append(self.replace_context(loads[name][0], self.swap_target(session.cur, name, source),
                                                   lock_first=not tables))
                results[name] = {"table_switched": True, "rows": loads[name][0].rows}
        statements = self.render_publish(tables, self.lease_batch or "", self.lease_holder or "")
        # The locks are taken one table after another inside the transaction and held to its end:
        # the committed attempt's whole run is the most the batch's first table held its readers
        # (the round trip included).
        session.held_seconds = self._run_commit(session.cur, "", statements,
                                                what=f"publish of batch {self.lease_batch or ''} into {self.schema}")
        for t in tables:
            if not t["partitioned"] and t["swap"]:
                self._update_statistics(session.cur, t["table_name"])
        for name, result in results.items():
            if "partitions_in" in result:
                self._log_commit(name, result)
        return results

    def stage_whole(self, stream: StreamPlan) -> None:
        # The table's indexes on its next version first, where the publish switches it in (a
        # retry after the rename finds the next version made already).
        if self.staging_exists(stream):
            self._build_target_indexes(stream)
        self.execute(self.switch_sql(stream, replace_existing=True), stream.stream)

    def replace_whole(self, stream: StreamPlan) -> None:
        if self.staging_exists(stream):
            self._build_target_indexes(stream)
        with self.connection(stream.stream) as conn:
            cur = conn.cursor()
            target = self.swap_target(cur, stream.table,
                                      self.qualified(self.staging_schema, stream.staging_table))
            self._run_commit(cur, stream.table, self.switch_sql(stream, replace_existing=True, target=target))
            if target is not None:
                self._update_statistics(cur, stream.table)

    def _update_statistics(self, cur, table: str) -> None:
        """A table that took its next version by SWITCH: its statistics updated once, after the
        commit (update_statistics.sql). The batch is in: a failure here is said, not raised."""
        (statement,) = self.render("update_statistics.sql", table_name=table)
        try:
            drain(cur.execute(statement))
        except Exception as exc:  # noqa: BLE001 - the driver's error; the batch is in already
            log.warning("%s.%s: its statistics were not updated after the switch (%s); they describe the rows "
                        "switched out until SQL Server or a DBA updates them", self.schema, table, _message(exc))

    def swap_target(self, cur, table: str, source: str | None = None) -> TargetTable | None:
        """A table loaded whole as the catalog has it now, when its staging table is made to its
        shape and switched in (catalog.whole_table_blockers finds nothing that stops SWITCH);
        None when it is replaced by TRUNCATE TABLE and INSERT ... SELECT. With `source` (the
        staging table or next version the commit moves in): only where that was made to the
        table's shape as the table is now. Prepare decided on the table as it was then, and a
        DBA may have changed it since; the copy takes a next version of any shape."""
        target = self.read_target(cur, table)
        swap = None if target.partitioned else self.whole_swap(table, {table: target})
        if swap is None or source is None:
            return swap
        differences = shape_differences(swap, self.read_target(cur, table, qualified=source))
        if differences:
            log.info("%s.%s: its rows are copied, not switched in: %s differs from the table in %s",
                     self.schema, table, source, ", ".join(differences))
            return None
        return swap

    def lock_timed_out(self, exc: BaseException) -> bool:
        return 1222 in error_numbers(exc) or "Lock request time out" in _message(exc)

    def driver_message(self, exc: BaseException) -> str | None:
        driver = type(exc).__module__.split(".")[0] in ("pyodbc", "mssql_python")
        return _message(exc) if driver or error_numbers(exc) else None

    def lock_wait_words(self) -> str:
        return f"{self.commit_attempts} attempts each waited {self.commit_lock_wait_ms} ms"

    def _archive_name(self, cur, name: str) -> str:
        for n in range(1000):
            candidate = self.checked(_free_name(name, n))
            if cur.execute("SELECT OBJECT_ID(?, N'U')", self.qualified(self.archive_schema, candidate)
                           ).fetchone()[0] is None:
                return candidate
        raise TargetError(f"{self.archive_schema}: no free name for {name}", permanent=True)

    def commit_table(self, cur, table: str, planned: dict[str, dict]) -> dict[str, Any]:
        """The table's batch in whole: the window planned again from the catalog now (it must
        place every stream where setup planned it), then commit_table.sql, one transaction."""
        # A table's own commit: the only table of its transaction (commit_sql.lock_step).
        context, result, batch, run = self._commit_plan(cur, table, planned, lock_first=True)
        self._run_commit(cur, table, self.render("commit_table.sql", **context, batch=batch, run=run,
                                                 wait_minutes=self.wait_minutes(),
                                                 commit_lock_wait_ms=self.commit_lock_wait_ms,
                                                 commit_attempts=self.commit_attempts))
        self._log_commit(table, result)
        return result

    def _log_commit(self, table: str, result: dict[str, Any]) -> None:
        log.info("%s.%s: batch %s switched in: %d partitions%s%s", self.schema, table, result["batch"],
                 result["partitions_in"], f"; replaced {len(result['removed'])}" if result["removed"] else "",
                 f"; retired {len(result['retired'])}" if result["retired"] else "")

    def _commit_plan(self, cur, table: str, planned: dict[str, dict], *,
                     lock_first: bool) -> tuple[dict, dict[str, Any], str, str]:
        """(the table's commit_context, its result, batch, run): the window planned again from the
        catalog now, which must place every stream where setup planned it; refuses otherwise."""
        key = self.key(table)
        rows = sorted(planned.values(), key=lambda p: p["stream"])
        batch, run = rows[0]["batch"], rows[0]["run"]
        streams = [Incoming(stream=p["stream"], lower=key.value(_planned_key(p["key_min"], key)),
                            upper=key.value(_planned_key(p["key_max"], key)), filegroup=p["stream_filegroup"],
                            staging_table=p["staging_table"], rows=p["rows_planned"]) for p in rows]
        target = self.read_target(cur, table)
        wp = self.window(table, target, streams, batch)
        if not wp.ok:
            raise TargetError(f"{self.schema}.{table}: the batch cannot go in now; nothing was switched:\n- "
                              + "\n- ".join(wp.problems), permanent=True)
        moved = [f"stream {p['stream']}: planned {p['filegroup']} {p['compression']}, now {wp.placement[p['stream']]}"
                 for p in rows if wp.placement.get(p["stream"]) != (p["filegroup"], p["compression"])]
        if moved:
            raise TargetError(f"{self.schema}.{table}: the table changed since setup.plan ({'; '.join(moved)}); "
                              f"nothing was switched: run the batch again from setup.plan", permanent=True)
        # A partition retired to the archive schema takes its range's name, or `<name>_<n>` when an
        # earlier retirement took it.
        wp.steps = [dataclasses.replace(st, archive_table=self._archive_name(cur, st.archive_table))
                    if st.kind == "archive" else st for st in wp.steps]
        result = {"table_switched": True, "batch": batch, "partitions_in": len(streams),
                  "removed": [keys_text(p.lower, p.upper, key) for p in wp.removed],
                  "retired": [keys_text(p.lower, p.upper, key) for p in wp.retired]}
        return self.commit_context(table, wp, target, streams, lock_first=lock_first), result, batch, run

    def _run_commit(self, cur, table: str, statements: list[str], what: str | None = None) -> float:
        """Run the table's commit (or, `what` naming it, the batch's publish); after a lock timeout
        (error 1222: a normal-priority Sch-M request waited commit_lock_wait_ms behind a reader) or a
        deadlock with a reader (error 1205: the transaction, of low DEADLOCK_PRIORITY, was the
        victim), the whole transaction has rolled back: pause so the readers it held up go
        through, and run it again, commit_attempts times at most. Returns the seconds of the
        attempt that committed."""
        for attempt in range(1, self.commit_attempts + 1):
            began = time.monotonic()
            try:
                for stmt in statements:
                    cur.execute(stmt)
                    drain(cur)
                return time.monotonic() - began
            except Exception as exc:  # the driver's error (pyodbc.Error); anything but 1222, 1205 goes up as it is
                numbers = error_numbers(exc)
                if not numbers & {1222, 1205} or attempt == self.commit_attempts:
                    raise
                why = (f"waited {self.commit_lock_wait_ms} ms for a lock held by a reader" if 1222 in numbers
                       else "was chosen as a deadlock's victim, a reader's query going on")
                log.info("%s: the %s %s; nothing changed, attempt %d of %d in %.1f s", what or f"{self.schema}.{table}",
                         "publish" if what else "commit", why, attempt, self.commit_attempts, self.commit_pause)
                time.sleep(self.commit_pause)


def _plain(value: Any) -> Any:
    """A key value for JSON (XCom, the run's report): dates and times in ISO 8601, decimals as floats."""
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, Decimal):
        return float(value)
    return value


def _free_name(name: str, n: int) -> str:
    return name if n == 0 else f"{name[:56]}_{n}"


def _planned_key(text: str, key: KeyType) -> Any:
    """A key kept as text in planned_partitions (the plan's JSON value)."""
    return int(text) if key.kind == "integer" else text
