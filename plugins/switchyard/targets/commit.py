"""The switch and the publish every engine runs: a stream's validated staging table staged as
part of its table's next version, the table's batch moved in whole by its last switch (`publish:
table`) or every table's at once by the batch's publish (`publish: batch`).

The order of the checks, what refuses and in which words, and which results the steps get are
decided here once; each engine supplies the hooks (its session and locks, how a stream is
marked staged, how a table's batch goes in, what its driver's errors mean) in its own
`commit.py`.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from switchyard.core.planner import StreamPlan
from switchyard.targets.base import TargetError, stream_rows


@dataclass
class CommitSession:
    """A session holding the commit locks of the tables it was opened for, in the transaction
    the commit runs in where the engine has one; `notices`: the server's messages meanwhile."""
    cur: Any
    notices: list[str] = field(default_factory=list)
    # When the publish took its last table's lock, and how long it then held the tables' readers
    # (to the commit's end): the engine sets them, each where it knows.
    locked_at: float | None = None
    held_seconds: float = 0.0


class SwitchProtocol:
    """Template methods: `switch_staging`, `_stage`, `publish_batch`. The hooks below are the
    engine's; each says what it must do."""

    # --- the engine's hooks -------------------------------------------------------------------
    def commit_session(self, stream: StreamPlan | None, tables: list[str]) -> Any:
        """A context manager yielding a CommitSession that holds the commit locks of `tables`
        (in this order), so that no other switch or publish of them runs until it ends.
        `stream`: the switch it is for (its port, where the engine pins one), or None."""
        raise NotImplementedError

    def planned(self, cur, table: str) -> dict[str, dict]:
        """Setup's planned partitions of the table, by staging table name: each with at least
        stream, batch, run, key_min and key_max (as text)."""
        raise NotImplementedError

    def mark_staged(self, session: CommitSession, stream: StreamPlan, planned: dict[str, dict]) -> dict[str, Any]:
        """Make the stream part of its table's next version (idempotent: a retry finds it so);
        returns partition, replaced, already_switched and waiting_for (the table's planned staging
        tables not staged yet, in stream order)."""
        raise NotImplementedError

    def commit_table(self, cur, table: str, planned: dict[str, dict]) -> dict[str, Any]:
        """The table's staged batch into the target whole, in the session's transaction; returns
        table_switched, batch, partitions_in, removed, retired."""
        raise NotImplementedError

    def staged_streams(self, cur, table: str, planned: dict[str, dict]) -> set[str]:
        """The staging tables of `planned` that their switch staged."""
        raise NotImplementedError

    def next_version_exists(self, cur, table: str) -> bool:
        """Whether an unpartitioned table's validated staging table waits as its next version."""
        raise NotImplementedError

    def published_by(self, cur, tables: list[str], holder: str) -> bool:
        """Whether the run `holder` published these tables already: its rows in partition_batches."""
        raise NotImplementedError

    def published_at(self, table: str) -> Any:
        """When this run (`lease_holder`) last put a batch of `table` in the target, by the server's
        clock (`server_time`'s): the latest switched_at of its rows in partition_batches; None if
        it has none."""
        raise NotImplementedError

    def server_time(self) -> Any:
        """The server's clock now, as partition_batches' switched_at reads it."""
        raise NotImplementedError

    def publish_tables(self, session: CommitSession, names: list[str], loads: dict[str, list[StreamPlan]],
                       planned: dict[str, dict[str, dict]]) -> dict[str, dict]:
        """Every table of `names` that loads something in, in one transaction: a partitioned one's
        planned partitions (`planned`), an unpartitioned one's next version; {table: result}. Sets
        the session's `held_seconds` (or `locked_at`, for the session to count to its commit)."""
        raise NotImplementedError

    def stage_whole(self, stream: StreamPlan) -> None:
        """An unpartitioned table's validated staging table made the table's next version."""
        raise NotImplementedError

    def replace_whole(self, stream: StreamPlan) -> None:
        """An unpartitioned table's rows replaced by its staging table's, in one transaction."""
        raise NotImplementedError

    def _build_target_indexes(self, stream: StreamPlan) -> dict[str, Any]:
        """The target's indexes on the staging table before its switch; indexes_built, index_seconds."""
        raise NotImplementedError

    def lock_timed_out(self, exc: BaseException) -> bool:
        """Whether the driver's error `exc` is a lock wait that ran out (nothing was changed)."""
        raise NotImplementedError

    def driver_message(self, exc: BaseException) -> str | None:
        """The server's message, where `exc` is the engine driver's error; None otherwise."""
        raise NotImplementedError

    def lock_wait_words(self) -> str:
        """How long a switch or publish waits for a lock before it gives up, in words."""
        raise NotImplementedError

    def switch_facts(self, session: CommitSession, result: dict[str, Any]) -> dict[str, Any]:
        """What the engine adds to a switch's result from its ended session (none by default)."""
        return {}

    def publish_facts(self, session: CommitSession, results: dict[str, dict]) -> dict[str, Any]:
        """What the engine adds to a publish's result from its ended session (none by default)."""
        return {}

    # --- the template methods -----------------------------------------------------------------
    def switch_staging(self, stream: StreamPlan) -> dict[str, Any]:
        """Partitioned: the target's indexes built on the staging table, outside any lock, then
        the stream staged in its table's next version (_stage). Unpartitioned: with `publish:
        batch` the staging table made the table's next version, which the batch's publish moves
        in; with `publish: table` the table's rows replaced at once."""
        what = f"switch of {stream.group_id} into {self.schema}.{stream.table}"
        with self._driver_errors(what, " (a long-running reader holds the table); nothing was changed, retry later"):
            if stream.partitioned:
                built = self._build_target_indexes(stream)
                return {**self._stage(stream), **built}
            if self.spec.publish == "batch":
                # Nothing here touches the target: no lock to wait for.
                self.stage_whole(stream)
                return {"partition": None, "replaced": None, "already_switched": False, "in_target": False,
                        "table_switched": False, "waiting_for": []}
            self.replace_whole(stream)
            return {"partition": None, "replaced": True, "attach_scan_skipped": None, "in_target": True,
                    "table_switched": True}

    def _stage(self, stream: StreamPlan) -> dict[str, Any]:
        """Stage the stream under its table's commit lock; with `publish: table` the table's last
        one commits the table's batch in the same session. One switch of a table at a time."""
        with self.commit_session(stream, [stream.table]) as session:
            planned = self.planned(session.cur, stream.table)
            self._own_plan(stream, planned)
            result: dict[str, Any] = {**self.mark_staged(session, stream, planned), "in_target": False,
                                      "table_switched": False}
            if not result["waiting_for"] and self.spec.publish == "table":
                result.update(self.commit_table(session.cur, stream.table, planned))
                result["in_target"] = True
        return {**result, **self.switch_facts(session, result)}

    def _own_plan(self, stream: StreamPlan, planned: dict[str, dict]) -> None:
        """Refuses a switch that setup's plan of this run does not hold as this stream carries it."""
        where = f"{self.schema}.{stream.table}"
        mine = planned.get(stream.staging_table)
        if mine is None or mine["run"] != (self.lease_holder or ""):
            first = next(iter(planned.values()), None)
            by = f"run {first['run'] or '(no run)'} (batch {first['batch']})" if first else "no run"
            raise TargetError(
                f"switch of {stream.group_id}: {where} has no switch of this run pending: its plan was made by "
                f"{by}. A group of an earlier run cannot switch into it; run this batch again from setup.plan "
                f"(clear the whole run)", permanent=True)
        name = mine.get("partition_name")
        if (mine["key_min"], mine["key_max"]) != (str(stream.lower), str(stream.upper)) or (
                name is not None and name != stream.partition_table):
            raise TargetError(
                f"switch of {stream.group_id}: setup planned keys {mine['key_min']}..{mine['key_max']}"
                f"{f' as {name}' if name else ''}, this group carries {stream.lower}..{stream.upper}"
                f"{f' as {stream.partition_table}' if name else ''}; run the batch again from setup.plan",
                permanent=True)

    def publish_batch(self, streams: list[StreamPlan]) -> dict[str, Any]:
        """Every table of the batch in, in one transaction (`publish: batch`): readers see the
        previous batch or this one, across tables. `streams`: the run's plan for its tables.

        Refuses, changing nothing, unless every stream the plan loads was validated and staged
        (a partitioned table's in its table's next version, an unpartitioned table's next version
        made): each stream that was not is named, with its rows in the manifest. Every table's
        commit lock is taken first, in name order, so two publishes never wait on each other in
        a circle. A retry whose earlier attempt committed finds nothing of this run pending and
        this run's rows in partition_batches: it reports that."""
        import time
        holder, batch = self.lease_holder or "", self.lease_batch or ""
        loads: dict[str, list[StreamPlan]] = {}
        for s in streams:
            loads.setdefault(s.table, []).append(s)
        loads = {name: [s for s in ss if not s.empty] for name, ss in loads.items()}
        names = sorted(loads)
        what = f"publish of batch {batch} into {self.schema}"
        started = time.monotonic()
        on = names[0] if len(names) == 1 else f"one of {', '.join(names)}"
        with self._driver_errors(what, f" on {on} (a long-running reader holds it); nothing was published, retry "
                                       f"later", "; nothing was published"):
            with self.commit_session(None, names) as session:
                planned = {n: {k: v for k, v in self.planned(session.cur, n).items() if v["run"] == holder}
                           for n in names if self.spec.table(n).partitioned}
                staged = {n: self.next_version_exists(session.cur, n) for n in names
                          if not self.spec.table(n).partitioned}
                if (not any(planned.values()) and not any(staged.values())
                        and self.published_by(session.cur, names, holder)):
                    return {"tables": names, "already_published": True, "lock_seconds": 0.0,
                            "seconds": round(time.monotonic() - started, 4), "by_table": {}}
                problems = self._publish_problems(session.cur, loads, planned, staged)
                if problems:
                    raise TargetError(f"publish of batch {batch} refused; no table of the batch was published, "
                                      f"every table keeps its previous contents:\n- " + "\n- ".join(problems),
                                      permanent=True)
                results = self.publish_tables(session, names, loads, planned)
        return {"tables": names, "already_published": False, "by_table": results,
                **self.publish_facts(session, results), "lock_seconds": round(session.held_seconds, 4),
                "seconds": round(time.monotonic() - started, 4)}

    def _publish_problems(self, cur, loads: dict[str, list[StreamPlan]], planned: dict[str, dict],
                          staged: dict[str, bool]) -> list[str]:
        """Every reason the batch cannot go in: a stream of the plan not validated and staged."""
        problems = []
        for name in sorted(loads):
            where = f"{self.schema}.{name}"
            if not loads[name]:
                continue
            if name in staged:
                if not staged[name]:
                    problems.append(f"{where}: its stream ({stream_rows(loads[name][0])}) was not validated and "
                                    f"switched in this run")
                continue
            mine = planned[name]
            if not mine:
                problems.append(f"{where}: nothing of this run is pending (planned by another run, or published "
                                f"already)")
                continue
            problems += unstaged_problems(where, loads[name], self.staged_streams(cur, name, mine), set(mine))
        return problems

    @contextmanager
    def _driver_errors(self, what: str, locked: str, failed: str = "") -> Iterator[None]:
        """The driver's errors as TargetError naming `what` failed (the driver's error kept as
        its cause, which the engine's classifier reads to tell a permanent one); a lock wait that
        ran out says so (`locked`: what follows "for a lock")."""
        try:
            yield
        except TargetError:
            raise
        except Exception as exc:
            text = self.driver_message(exc)
            if text is None:
                raise
            if self.lock_timed_out(exc):
                raise TargetError(f"{what}: {self.lock_wait_words()} for a lock{locked}") from exc
            raise TargetError(f"{what} failed: {text}{failed}") from exc


def unstaged_problems(where: str, loads: list[StreamPlan], staged: set[str], planned: set[str]) -> list[str]:
    """Why a partitioned table's batch cannot be published: the streams the plan loads whose
    staging table was not staged, and those setup did not plan (neither by staging table name)."""
    problems = []
    missing = [s for s in loads if s.staging_table in planned and s.staging_table not in staged]
    unplanned = [s for s in loads if s.staging_table not in planned]
    if missing:
        problems.append(f"{where}: stream{'s' if len(missing) > 1 else ''} "
                        f"{', '.join(f'{s.stream} ({stream_rows(s)})' for s in missing)} "
                        f"{'were' if len(missing) > 1 else 'was'} not validated and switched in this run")
    if unplanned:
        problems.append(f"{where}: stream{'s' if len(unplanned) > 1 else ''} "
                        f"{', '.join(str(s.stream) for s in unplanned)} not in setup's plan; run the batch "
                        f"again from its first step")
    return problems


def discarded_note(where: str, batch: str, run: str | None, held: list[str], this_batch: str) -> str:
    """What setup says when it discards another run's held-back groups of a table (that run's
    batch never went in). A run of the same batch loads it again; any other batch needs a run of
    its own, which the note says."""
    then = (f"this run loads batch {batch} again" if batch == this_batch
            else f"to load batch {batch}, run it again from setup.plan")
    return (f"{where}: batch {batch} (run {run or '(none)'}) never went in: its validated groups "
            f"({', '.join(held) or 'none'}) waited for the rest of its batch and are discarded now; {then}")
