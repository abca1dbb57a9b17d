"""The steps of a load in plain Python: what each task of the DAG does, given the run's plan and
an adapter, with no Airflow in sight.

The operators (airflow/operators.py) find a step's inputs (the run's plan from XCom, the
target's connection, the task's queue and host), call the step, and put its outcome in
Airflow's terms: a result is the task's return value, `StepSkipped` skips the task and
`StepFailed` fails it at once, without retries (it fails the same way on every try). Any other
exception is the engine's to classify (`targets.permanent_reason`): retried unless permanent.

An adapter is passed as a callable that makes it (`connect`), because making one looks the
connection up: a step checks what it can first (a missing file) and times the lookup.
"""
from __future__ import annotations

import logging
import socket
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from switchyard import settings
from switchyard.core.batch import BatchError, resolve_batch, resolve_file, unlisted_files
from switchyard.core.planner import LoadPlan, StreamPlan
from switchyard.core.spec import LoadSpec
from switchyard.targets.base import TargetAdapter

log = logging.getLogger(__name__)

Connect = Callable[[], TargetAdapter]


@contextmanager
def session(connect: Connect) -> Iterator[TargetAdapter]:
    """The step's adapter, its statements one session where the engine allows it, closed at the
    step's end."""
    adapter = connect()
    adapter.keep_session()
    try:
        yield adapter
    finally:
        adapter.close()


class StepFailed(Exception):
    """The step cannot succeed on another try: a refused batch, a missing file, bad data."""


class ValidationFailed(StepFailed):
    """The staging table failed a check; `result` is the validation's outcome, every check in it."""

    def __init__(self, message: str, result: dict):
        super().__init__(message)
        self.result = result


class StepSkipped(Exception):
    """Nothing for this step to do in this run (a stream the batch does not have)."""


# --- what each step returns: `xcom()` is the task's return value, as the run's statistics read it
@dataclass(frozen=True)
class Prepared:
    staging_table: str      # schema.table
    file: str               # the stream file as the planning host sees it
    seconds: float

    def xcom(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Loaded:
    rows: int
    bytes: int
    seconds: float          # the bulk load's own
    started: str
    ended: str
    file: str               # the stream file this worker loaded
    host: str | None
    queue: str | None
    parts: dict[str, float]  # the load's fixed cost part by part (plan pull, connection lookup, ...)
    # The target's own account (where the load ran, the storage it filled), beside the above in XCom.
    details: dict[str, Any] = field(default_factory=dict)
    # The file as this load read it (size, modification time; None for a named pipe): the publish
    # compares the file with it (stale_loads).
    file_bytes: int | None = None
    file_mtime_ns: int | None = None

    def xcom(self) -> dict[str, Any]:
        own = {k: v for k, v in asdict(self).items() if k != "details"}
        return {**own, **self.details}


@dataclass(frozen=True)
class Validated:
    checks: dict[str, Any]  # every check with what it expected, observed and cost (a failure raises)

    def xcom(self) -> dict[str, Any]:
        return self.checks


@dataclass(frozen=True)
class Switched:
    target: dict[str, Any]  # the target's account: partition, in_target, already_switched, waiting_for, ...
    seconds: float
    switched: str

    @property
    def in_target(self) -> bool:
        """Whether readers see the stream's rows now (else its table's last switch or the batch's
        publish moves them in)."""
        return self.target.get("in_target", True)

    def xcom(self) -> dict[str, Any]:
        return {**self.target, "seconds": self.seconds, "switched": self.switched}


@dataclass(frozen=True)
class Published:
    target: dict[str, Any]  # tables, already_published, lock_seconds, by_table, ...
    published: str

    def xcom(self) -> dict[str, Any]:
        return {**self.target, "published": self.published}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


# --- setup.plan ---------------------------------------------------------------------------
def chosen_tables(spec: LoadSpec, chosen: Any) -> list[str]:
    """The run's tables: the `tables` param (a list, or its text), else every table of the spec."""
    if isinstance(chosen, str):
        import json
        text = chosen
        try:
            chosen = json.loads(text.replace("'", '"')) if text.strip() else []
        except ValueError as exc:
            raise StepFailed(f"tables: {text!r} is not a list of table names") from exc
    unknown = [t for t in chosen or [] if t not in spec.table_names]
    if unknown:
        raise StepFailed(f"tables: {', '.join(map(repr, unknown))} not in spec {spec.name!r} "
                         f"(known: {', '.join(spec.table_names)})")
    return list(chosen or spec.table_names)


def unknown_conf(conf: dict | None, params: Iterable[str]) -> str | None:
    """The run's conf keys that are no param of the DAG, said; None if there are none. Airflow
    passes such a key on without a word (it checks the params' values, not the conf's names), so
    a misspelt `tables` would load every table and a misspelt `conn_id` the DAG's default target."""
    unknown = sorted(set(conf or {}) - set(params))
    if not unknown:
        return None
    return (f"the run's conf names {', '.join(map(repr, unknown))}, no param of this DAG (its params: "
            f"{', '.join(sorted(params))}); Airflow would pass {'them' if len(unknown) > 1 else 'it'} on unread and "
            f"the run would load what the params say without {'them' if len(unknown) > 1 else 'it'}: nothing was "
            f"loaded; start the run again with the params' names")


def wider_than_the_dag(manifest, tables: list[str], streams: int, settings_path: Path) -> list[str]:
    """The tables the batch brings in more streams than the DAG has task groups for (`streams`
    per table, SWITCHYARD_STREAMS), as the one problem a run refuses the batch with. The batch's
    shape is its manifest's; the groups a batch does not use skip."""
    wider = {t: len(manifest.streams_of(t)) for t in tables if len(manifest.streams_of(t)) > streams}
    if not wider:
        return []
    return [f"{manifest.path}: the batch has " + ", ".join(f"{n} streams of {t}" for t, n in wider.items())
            + f" but this DAG has task groups for up to {streams} per table (set SWITCHYARD_STREAMS="
              f"{max(wider.values())} or more in the DAG's settings file, {settings_path}, which every Airflow "
              f"process reads as it parses the DAG)"]


class Checked(NamedTuple):
    """A batch as check_batch found it: its folder, its plan, every problem found, the run's tables
    it holds, and a note for each it leaves out (`optional: true`)."""
    folder: Path
    plan: LoadPlan
    problems: list[str]
    tables: list[str]
    notes: list[str]


def check_batch(spec: LoadSpec, tables: list[str], name: str, streams: int,
                settings_file: str | None = None) -> Checked:
    """The batch checked whole (its manifest, its files, the DAG's groups, the declared
    expectations), the run's tables it leaves out aside (optional ones). Without a plan it fails
    at once with every problem; with one, the problems go to the target's setup, which refuses
    the batch with its pre-flight's own (`set_up`). `settings_file`: the DAG's own, named in the
    advice of a batch wider than the DAG."""
    from switchyard.core.batch import check_files, read_manifest, tables_in_batch
    from switchyard.core.planner import PlanError, plan_batch
    try:
        folder = resolve_batch(name)
        manifest = read_manifest(folder, spec)
    except BatchError as exc:
        raise StepFailed(str(exc)) from exc
    tables, notes, unlisted = tables_in_batch(folder, manifest, spec, tables)
    if not tables:
        raise StepFailed(f"{manifest.path}: the batch holds none of the run's tables: " + "; ".join(notes))
    problems = wider_than_the_dag(manifest, tables, streams, Path(settings_file) if settings_file
                                  else settings.settings_file()) + unlisted
    plan = None
    try:
        plan = plan_batch(spec, manifest, tables)
    except PlanError as exc:
        problems.append(str(exc))
    problems += check_files(folder, manifest, spec, tables)
    problems += read_small_batch(folder, manifest, spec, tables)
    if any(spec.table(t).expectations for t in tables):
        # A declared expectation GX does not know (or whose kwargs do not fit) fails the run
        # here, naming the spec entry, before anything is loaded. Imports GX only then.
        from switchyard.core.spec import SpecError
        from switchyard.observability.validation import check_spec_expectations
        try:
            check_spec_expectations(spec, tables)
        except SpecError as exc:
            problems.append(str(exc))
    if plan is None:
        raise StepFailed(refusal(problems))
    return Checked(folder, plan, problems, tables, notes)


def groups_without_tasks(plan: LoadPlan, tables: list[str], task_ids: set[str], streams: int) -> str | None:
    """Why the run cannot load its plan, where groups it loads have no task in the run (`task_ids`:
    the run's tasks, as the scheduler made them): the run was made from a parse of the DAG before
    the spec gained a table (or a table's groups), and each worker's task reads the spec as it is
    now. Nothing of those groups would load, and the run could not end `success`. None when every
    group has its task, or when the run's tasks are not known (`task_ids` empty). A stream past
    the DAG's `streams` is not one of these: the batch is wider than the DAG (`check_batch`)."""
    groups = {t.split(".")[0] for t in task_ids}
    missing = [s.group_id for s in plan.all_streams()
               if task_ids and s.table in tables and not s.empty and s.stream <= streams and s.group_id not in groups]
    if not missing:
        return None
    return (f"this run has no tasks for {', '.join(missing)}: it was made from a parse of the DAG from before the "
            f"spec changed (a table or streams added since), while its tasks read the spec as it is now. Wait "
            f"until the DAG's graph shows those groups (the dag-processor parses the DAG file again within "
            f"minutes), then trigger the run again; nothing was loaded or changed")


def read_small_batch(folder: Path, manifest, spec: LoadSpec, tables: list[str], source: str | None = None
                     ) -> list[str]:
    """A small batch's files read field by field before any load (SWITCHYARD_CHECK_FIELDS_MB), as
    `switchyard check` reads them: what a server would take but not as written (a decimal it would
    round) is found here. A larger batch is left to its loads; the log says which. The streams of
    `source` only (None: the streams of no source, which the plan reads)."""
    from switchyard.core.batch import read_bytes, read_problems
    limit = settings.get().check_fields_mb
    size = read_bytes(folder, manifest, spec, tables, source)
    if not limit or size > limit * 1e6:
        log.info("fields not read before the load (%.1f MB, SWITCHYARD_CHECK_FIELDS_MB %g): the loads check them",
                 size / 1e6, limit)
        return []
    started = time.monotonic()
    found = read_problems(folder, manifest, spec, tables, source)
    log.info("every field of the batch read before any load: %.1f MB in %.2f s, %d problems", size / 1e6,
             time.monotonic() - started, len(found))
    return found


def set_up(adapter: TargetAdapter, plan: LoadPlan, problems: list[str], name: str, folder: Path,
           tables: list[str], replace_newer: bool = False, notes: list[str] = ()) -> dict:
    """The target set up for the plan (the pre-flight, which refuses the batch with `problems`
    and its own, then the missing objects); the run's plan as every later step reads it.
    Raises LeaseHeld while another run loads this schema: the task's retries are the wait.
    `replace_newer`: a replace table holding a newer batch is put back to this one. `notes`: the
    batch's own, said with the pre-flight's (the tables it leaves out)."""
    preflight = [*notes, *(adapter.setup(plan, problems, replace_newer=replace_newer) or [])]
    out = plan.to_dict()
    out.update(batch=name, batch_dir=str(folder), tables=tables, target=adapter.engine,
               schema=adapter.schema, staging_schema=adapter.staging_schema,
               control_schema=adapter.control_schema, preflight=preflight,
               # When the plan was made, by the server's clock: a group run again after its
               # batch went in (cleared on its own) is told from a run made again (`prepare`).
               planned_at=adapter.server_time().isoformat(),
               # What the plan was made with, which each later step compares (spec_as_planned).
               spec_digests=plan.spec.digests())
    note_file_times(folder, plan.spec, out["groups"])
    snapshot = server_snapshot(adapter)
    if snapshot is not None:
        # The run's first look at the server's cumulative counters (SQL Server: wait and
        # latch statistics); the stats task takes the second and reports the difference.
        out["server_snapshot"] = snapshot
    return out


def note_file_times(folder: Path, spec: LoadSpec, groups: dict[str, dict]) -> None:
    """Each stream file's modification time as the plan checked it (`file_mtime_ns`), for the
    files the plan sees (not a source's, which only its workers see; not a named pipe): a
    group's load checks a file changed after the plan again (`check_again_if_changed`)."""
    for raw in groups.values():
        if spec.source_of(raw["stream"]) is not None:
            continue
        path = resolve_file(folder, raw["file"])
        if path.is_file():
            raw["file_mtime_ns"] = path.stat().st_mtime_ns


def changed_since_plan(path: Path, s: StreamPlan) -> str | None:
    """How a stream file differs from the file the run's plan checked: not of the manifest's
    size, or (where the plan saw it) modified since. None: as planned, or a named pipe (read
    once, by the load)."""
    if not path.is_file():
        return None
    st = path.stat()
    changes = []
    if s.bytes is not None and st.st_size != s.bytes:
        changes.append(f"{st.st_size:,} bytes, the manifest says {s.bytes:,}")
    if s.file_mtime_ns is not None and st.st_mtime_ns != s.file_mtime_ns:
        changes.append(f"modified at {_stamp(st.st_mtime_ns)}, the run's plan checked it as of "
                       f"{_stamp(s.file_mtime_ns)}")
    return "; ".join(changes) or None


def check_again_if_changed(path: Path, s: StreamPlan, spec: LoadSpec) -> None:
    """A stream file written again since the run's plan checked it (a value fixed in place, then
    its group cleared) is checked again before its load, as the plan checks a file: its start
    and end, and, up to SWITCHYARD_CHECK_FIELDS_MB, every record against the plan's rows and
    key range and every field. Otherwise the load would take it past every check made before
    a load. Raises StepFailed with what is wrong (file, line, column), before anything of it is
    loaded; the rows expected stay the plan's: a fix that changes them needs the manifest
    written again and the whole run cleared."""
    from switchyard.core.batch import file_read_problems, start_problems, unended_file
    changed = changed_since_plan(path, s)
    if changed is None:
        return
    table = spec.table(s.table)
    problems = start_problems(path, table) + unended_file(path)
    limit = settings.get().check_fields_mb
    read = bool(limit) and path.stat().st_size <= limit * 1e6
    if read:
        problems += file_read_problems(path, table, s.stream, s.rows, s.typed("key_min"), s.typed("key_max"))
    if problems:
        raise StepFailed(f"{path}: changed since this run's plan checked it ({changed}) [table {s.table}, stream "
                         f"{s.stream}], and checked again: " + "; ".join(problems) + ". The rows and keys expected "
                         "are the manifest's as the run's plan read it: after a fix that changes them, write the "
                         "batch's manifest again (`switchyard manifest`) and clear the whole run "
                         "(`switchyard runs clear <dag> <run id> setup`); nothing of the file was loaded")
    log.warning("%s: changed since this run's plan checked it (%s); checked again (%s): loads as it is now",
                path, changed, "every field" if read else "its start and end; the load reads its fields")


def _stamp(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).isoformat(timespec="microseconds")


def refusal(problems: list[str]) -> str:
    """One message for every problem found in a batch before any load."""
    if len(problems) == 1:
        return f"{problems[0]}; nothing was loaded or changed"
    return ("the batch was refused before any load; nothing was changed. " + f"{len(problems)} problems:\n- "
            + "\n- ".join(problems))


def server_snapshot(adapter: Any) -> dict | None:
    """The target's cumulative server counters, where its adapter has them (else None)."""
    take = getattr(adapter, "server_snapshot", None)
    if not callable(take):
        return None
    try:
        return take()
    except Exception as exc:  # statistics must never fail a load
        log.warning("server statistics snapshot failed: %s", exc)
        return None


def server_delta(adapter: Any, before: dict | None, after: dict | None) -> dict:
    """What accrued on the server between two snapshots: {"waits": [...], "latches": [...]}."""
    delta = getattr(adapter, "server_delta", None)
    if before is None or after is None or not callable(delta):
        return {}
    try:
        return delta(before, after, top=10) or {}
    except Exception as exc:
        log.warning("server statistics delta failed: %s", exc)
        return {}


# --- a group's steps ------------------------------------------------------------------------
def spec_as_planned(plan: dict, spec: LoadSpec) -> None:
    """StepFailed where the spec this step reads differs from the one the run's plan was made
    with, for the run's tables (LoadSpec.digests): the file edited during the run, or a worker
    holding another copy. A step must not load, check or publish the batch by another spec than
    its plan's (columns in another order would load each value into another column; a mode of
    replace instead of append would replace every earlier batch). A plan without digests (made
    by an earlier version) is not compared."""
    planned = plan.get("spec_digests")
    if not planned:
        return
    now = spec.digests()
    changed = [name for name in ["", *(plan.get("tables") or [])] if now.get(name) != planned.get(name)]
    if changed:
        what = ", ".join("its own entries (publish, sources, files)" if n == "" else
                         (f"table {n}" if n in now else f"table {n} (no longer in it)") for n in changed)
        raise StepFailed(f"the spec {spec.source} changed after this run's plan was made ({what} differ): a run "
                         f"loads its batch by the spec its plan read, every step alike. Put the spec back as it was, "
                         f"or clear the whole run (from setup.plan) to load the batch by the spec as it is now")


def stream_plan(plan: dict | None, table: str, stream: int) -> StreamPlan:
    """The group's part of the run's plan; StepSkipped where the batch has nothing for it."""
    from switchyard.core.planner import group_id
    if not plan:
        raise StepFailed("the run's plan is missing (did setup.plan run?)")
    raw = plan["groups"].get(group_id(table, stream))
    if raw is None:
        if table in (plan.get("tables") or []):
            raise StepSkipped(f"{table} comes in fewer than {stream} streams in this batch")
        raise StepSkipped(f"{table} is not among this run's tables")
    s = StreamPlan(**raw)
    if s.empty:
        raise StepSkipped(f"{table} stream {stream} is empty in this batch")
    return s


def prepare(connect: Connect, plan: dict, s: StreamPlan, file_on_source: str | None = None) -> Prepared:
    """A fresh staging table with its partition's range CHECK, once the stream file is found
    (except for a stream on a source, whose file only that source's workers see)."""
    path = resolve_file(Path(plan["batch_dir"]), s.file)
    if not file_on_source and not path.is_file():
        raise StepFailed(f"{path}: stream file not found [table {s.table}, stream {s.stream}]")
    with session(connect) as adapter:
        started = time.monotonic()
        refuse_published(adapter, plan, s)
        adapter.prepare(s)
    return Prepared(staging_table=f"{plan['staging_schema']}.{s.staging_table}", file=str(path),
                    seconds=round(time.monotonic() - started, 4))


def published_since_plan(adapter: TargetAdapter, plan: dict, table: str) -> datetime | None:
    """When this run put `table` in the target after its plan was made (its switch or its
    publish, by the server's clock); None if it did not."""
    made = plan.get("planned_at")
    published = adapter.published_at(table) if made else None
    return published if published is not None and published >= datetime.fromisoformat(made) else None


def refuse_published(adapter: TargetAdapter, plan: dict, s: StreamPlan) -> None:
    """StepFailed for a group of a run whose table this run put in the target after its plan was
    made: the group was run again on its own (cleared in the UI after the run's switch or
    publish). Its table's batch went in whole and its plan was used up by it: the group's switch
    could only fail, and its statistics would say the table kept its previous contents. Refused
    before the run's lease is taken again or anything is made. A run made again from setup.plan
    has a newer plan and loads as usual."""
    published = published_since_plan(adapter, plan, s.table)
    if published is None:
        return
    where = f"{plan.get('schema') or adapter.schema}.{s.table}"
    raise StepFailed(
        f"{s.group_id}: this run put batch {plan.get('batch')} in {where} already (at {published:%Y-%m-%d %H:%M:%S}, "
        f"after its plan was made); one of its groups cannot load again on its own, since a batch goes in whole: "
        f"nothing was changed. To load the batch again, clear the whole run (setup.plan and every task after it)")


def _refuse_if_published(adapter: TargetAdapter, plan: dict, s: StreamPlan) -> None:
    """refuse_published after a step failed; any other failure of the question leaves the step's own
    error to be raised."""
    try:
        refuse_published(adapter, plan, s)
    except StepFailed as refused:
        raise refused from None         # the step's own error (a missing staging table) only misleads
    except Exception:       # noqa: BLE001 - the step's own error is the one to raise
        log.debug("%s: could not ask whether this run's batch went in", s.group_id, exc_info=True)


def switched_by_an_earlier_attempt(connect: Connect, plan: dict, s: StreamPlan) -> dict[str, dict] | None:
    """The four steps' results of a group run as one task (`tasks: single`) whose earlier attempt
    switched it in, after which this run's batch of its table went in whole: the attempt's
    process ended before Airflow heard of its success (killed, its machine lost), and Airflow
    retried the task. None where that is not so: the steps then run from prepare as usual.

    Its rows are the manifest's: the switch runs only after validation proved that count. Where
    the manifest gives none, the count went with the earlier attempt and is reported as unknown."""
    with session(connect) as adapter:
        published = published_since_plan(adapter, plan, s.table)
        found = adapter.switched_in(s) if published is not None else None
    if found is None:
        return None
    log.info("%s: switched in by an earlier attempt of this task (batch %s of %s went in whole at "
             "%s); nothing to do again%s", s.group_id, plan.get("batch"), s.table, f"{published:%Y-%m-%d %H:%M:%S}",
             "" if s.rows is not None else " (its row count went with that attempt: the manifest gives none)")
    earlier = {"by_an_earlier_attempt": True}
    return {"prepare": {**earlier, "staging_table": f"{plan['staging_schema']}.{s.staging_table}"},
            "load": {**earlier, "rows": s.rows, "bytes": s.bytes},
            "validate": {**earlier, "success": True},
            "switch": {**earlier, **found, "replaced": None, "already_switched": True,
                       "switched": published.isoformat()}}


def load(connect: Connect, plan: dict, s: StreamPlan, *, queue: str | None, host: str | None,
         progress_every_seconds: float | None = None, plan_pull: float = 0.0) -> Loaded:
    """The stream file into its staging table, with progress lines on long loads."""
    from switchyard.observability.progress import LoadProgress
    # The load's fixed cost part by part, in its result (`parts`, seconds): the plan's pull
    # from XCom, the connection's lookup, the progress sampler's setup and close; the
    # adapter adds its own (connect, lease, release) to the result's details.
    parts = {"plan_pull": plan_pull}
    path = local_file(plan, s, queue)
    clock = time.monotonic()
    adapter = connect()
    parts["connection_lookup"] = time.monotonic() - clock
    check_again_if_changed(path, s, adapter.spec)
    read_as = path.stat() if path.is_file() else None
    clock = time.monotonic()
    # The server's progress sampler connects only when a progress line is due (after
    # SWITCHYARD_PROGRESS_SECONDS): a short load never opens that side connection.
    server = adapter.server_progress(adapter.staging_schema, s.staging_table)
    progress = LoadProgress(s.group_id, progress_every_seconds, server=server)
    parts["progress_setup"] = time.monotonic() - clock
    started = now_iso()
    clock = time.monotonic()
    try:
        result = adapter.load(s, path, progress)
    except Exception:
        # A load cleared on its own (the grid's Clear from `load`) after this run's batch of its
        # table went in finds no staging table, the switch having moved it in: said as prepare says it.
        _refuse_if_published(adapter, plan, s)
        raise
    finally:
        loaded = time.monotonic()
        if server is not None:
            server.close()
        parts["progress_close"] = time.monotonic() - loaded
    parts["load_call"] = loaded - clock
    ended = now_iso()
    log.info("%s: %d rows, %.1f MB in %.2f s (%.1f MB/s, %.0f rows/s)", s.group_id, result.rows,
             result.bytes / 1e6, result.seconds, result.bytes / 1e6 / max(result.seconds, 1e-9),
             result.rows / max(result.seconds, 1e-9))
    return Loaded(rows=result.rows, bytes=result.bytes, seconds=round(result.seconds, 4), started=started,
                  ended=ended, file=str(path), host=host, queue=queue,
                  parts={k: round(v, 4) for k, v in parts.items()}, details=result.details,
                  file_bytes=read_as and read_as.st_size, file_mtime_ns=read_as and read_as.st_mtime_ns)


def source_files(plan: dict, spec: LoadSpec, source: str, *, queue: str | None, host: str | None) -> dict:
    """The batch's files on the workers of `source` (the spec's `sources`), checked there before
    any load as the plan checks the files it sees: every listed file there and of the size the
    manifest gives, its start, a file listed with 0 rows that holds records, a file of the run's
    tables there that the manifest does not list, and, for a small batch, every field. The plan
    does not see a source's files, and a table whose streams there are all empty (or all
    unlisted) has no load there: a run would leave such records out and end `success`."""
    from switchyard.core.batch import check_files
    started = time.monotonic()
    folder = resolve_batch(plan["batch"])
    where = f"host {host or socket.gethostname()}, queue {queue!r}, data root {settings.data_root()}"
    if not folder.is_dir():
        # Retried, as a load's missing file is: another worker of the queue may hold the batch.
        raise BatchError(f"{folder}: the batch's folder is not on this worker [{where}]: the workers of source "
                         f"{source!r} hold <data root>/{plan['batch']}/ with the source's stream files")
    manifest = _manifest_of(plan)
    tables = list(plan["tables"])
    problems = check_files(folder, manifest, spec, tables, source)
    problems += read_small_batch(folder, manifest, spec, tables, source)
    if problems:
        raise StepFailed(f"the batch's files on source {source!r} would not load as its manifest lists them "
                         f"[{where}]:\n- " + "\n- ".join(problems))
    mine = [e for e in manifest.entries if e.table in tables and spec.source_of(e.stream) == source]
    return {"source": source, "files": len(mine), "bytes": sum(e.bytes for e in mine), "host": host,
            "seconds": round(time.monotonic() - started, 4)}


def source_files_as_loaded(plan: dict, spec: LoadSpec, source: str, load_of: Callable[[str], dict | None], *,
                           queue: str | None, host: str | None, table: str | None = None) -> dict:
    """The batch's files on the workers of `source`, checked there before the batch's publish as
    the publish checks the files it sees (stale_loads): a stream file written again since its
    load read it would leave the target holding rows the batch no longer has, and the run would
    end `success`. `table`: that table's files only, before its switches (`publish: table`: its
    last switch puts it in)."""
    started = time.monotonic()
    where = f"host {host or socket.gethostname()}, queue {queue!r}, data root {settings.data_root()}"
    if not resolve_batch(plan["batch"]).is_dir():
        # Retried, as the setup's check is: another worker of the queue may hold the batch.
        raise BatchError(f"{resolve_batch(plan['batch'])}: the batch's folder is not on this worker [{where}]: the "
                         f"workers of source {source!r} hold <data root>/{plan['batch']}/ with the source's stream files")
    problems = stale_loads(spec, plan, {table} if table else set(plan["tables"]), load_of, source, host)
    if problems:
        raise not_published(plan["batch"], problems, f"its files on source {source!r} are not what the run loaded "
                                                     f"[{where}]", table)
    return {"source": source, "host": host, "seconds": round(time.monotonic() - started, 4),
            **({"table": table} if table else {})}


def _manifest_of(plan: dict):
    """The run's manifest as its plan holds it: each planned stream's file, bytes, rows and keys."""
    from switchyard.core.batch import Manifest, ManifestEntry
    streams = [StreamPlan(**raw) for raw in plan["groups"].values()]
    return Manifest(spec=plan.get("spec", ""), streams=max((s.stream for s in streams), default=1),
                    entries=tuple(ManifestEntry(table=s.table, stream=s.stream, file=s.file, bytes=s.bytes,
                                                rows=s.rows, key_min=s.typed("key_min"), key_max=s.typed("key_max"))
                                  for s in streams))


def local_file(plan: dict, s: StreamPlan, queue: str | None) -> Path:
    """The stream file under this process's data root (SWITCHYARD_DATA_ROOT).

    The load is the one step that may run on another machine (a worker of the stream's
    source, see graph.routing): it finds the batch under its own root, not at the
    path the planning host saw. Beside the scheduler both are the same folder."""
    batch_dir = resolve_batch(plan["batch"])
    path = resolve_file(batch_dir, s.file)
    if not path.exists() or path.is_dir():  # a named pipe is a file to load, too
        # Retried: another worker of the queue may hold the file (a retry goes to any of them).
        raise BatchError(f"{path}: stream file not found on this worker [table {s.table}, stream {s.stream}; "
                         f"host {socket.gethostname()}, queue {queue!r}, data root "
                         f"{settings.data_root()}]: its source's workers must hold "
                         f"<data root>/{plan['batch']}/{s.file} (the spec's sources say which queue)")
    return path


def validate(connect: Connect, spec: LoadSpec, plan: dict, s: StreamPlan,
             loaded: dict | None = None, loaded_of: Callable[[], dict] | None = None) -> Validated:
    """The staging table checked before its switch: row count, key range, not null, the spec's
    unique columns and declared expectations (validation.py); every check with what it
    expected, observed and cost. `loaded`: the load's result where the caller has it, else
    `loaded_of` fetches it, only where it is used: the expected count when the manifest has
    none, and the COPY's count and the storage it filled, which validation takes for the
    table's row count where the target names that storage (SWITCHYARD_VALIDATION=load)."""
    from switchyard.core.spec import SpecError
    from switchyard.observability.validation import describe_failures, trust_load_default, validate_stream
    unreported = False
    with session(connect) as adapter:
        if loaded is None and loaded_of is not None and (
                s.rows is None or adapter.load_names_its_storage and trust_load_default()):
            loaded = loaded_of()
            # No result of the group's load in this run: the load task was marked success by hand.
            unreported = loaded is None
            loaded = loaded or {}
        expected_rows = s.rows
        if expected_rows is None:
            # A manifest without row counts: the count the load reported.
            expected_rows = (loaded or {}).get("rows")
        try:
            outcome = validate_stream(adapter, spec, s, expected_rows, loaded=loaded)
        except SpecError as exc:
            raise StepFailed(str(exc)) from exc
    if not outcome.success:
        name_failure_lines(outcome, Path(plan["batch_dir"]), s, spec, adapter.dialect)
    result = outcome.to_dict()
    log.info("%s: validation %s in %.2f s (GX import %.2f s); seconds per kind of check: %s", s.group_id,
             "passed" if outcome.success else "FAILED", outcome.seconds, outcome.import_seconds,
             ", ".join(f"{k} {v:.3f}" for k, v in result["cost"].items()))
    if not outcome.success:
        where = (f"table {s.table}, stream {s.stream}, file {plan['batch_dir']}/{s.file}, "
                 f"staging table {plan['staging_schema']}.{s.staging_table} (kept; nothing switched)"
                 + (f"; {s.group_id}.load left no result in this run (marked success by hand?): the checks read "
                    f"the staging table as its last load left it" if unreported else ""))
        raise ValidationFailed(describe_failures(outcome, where), result)
    return Validated(result)


def name_failure_lines(outcome: Any, folder: Path, s: StreamPlan, spec: LoadSpec, dialect: str) -> None:
    """The lines of the stream file a failed check's examples come from, read from the file where
    this process sees it (not a source's file, not a named pipe): a user fixes the file by its
    lines. A uniqueness check's duplicated keys get every line holding each (`lines` beside its
    `rows`); a declared expectation on one column (`between`, `in_set`, a regex) gets the first
    line of each example value it gives (`lines` beside `examples`)."""
    from switchyard.core.batch import lines_of_keys
    path = resolve_file(folder, s.file)
    if not path.is_file():
        return
    for check in outcome.failures():
        observed = check.observed if isinstance(check.observed, dict) else {}
        examples = observed.get("examples")
        if not examples:
            continue
        columns = [c.strip() for c in (check.column or "").split(",")]
        if check.category == "unique":
            keys = examples
        elif check.category == "declared" and len(columns) == 1 and columns[0]:
            # Each value once (the examples may repeat one): its first line.
            values = list(dict.fromkeys(v for v in examples if isinstance(v, (str, int, float))))
            keys = [{columns[0]: v, "rows": 1} for v in values]
        else:
            continue
        try:
            lines = lines_of_keys(path, spec.table(s.table), columns, keys, dialect)
        except (BatchError, KeyError, ValueError) as exc:   # the message without lines, as before
            log.warning("%s: the lines of the failed check's examples not found in %s: %s", s.group_id, path, exc)
            continue
        if check.category == "unique":
            for example, found in zip(examples, lines):
                example["lines"] = found
        else:
            first = {v: found[0] for v, found in zip(values, lines) if found}
            observed["lines"] = [first.get(v) if isinstance(v, (str, int, float)) else None for v in examples]


def require_validated(validated: dict | None, s: StreamPlan) -> None:
    """A switch puts in only a staging table its group's validation passed on in this run: a
    validate task marked success by hand (the grid's Mark as success, after it failed or never
    ran) leaves no result, and its switch would put in what no check passed, even an empty or
    half-loaded staging table, in a run that ends `success`."""
    if validated and validated.get("success"):
        return
    raise StepFailed(f"{s.group_id}: its validation has no passing result in this run ({s.group_id}.validate was "
                     f"marked success by hand, or its result is gone): the switch puts in only a staging table "
                     f"its checks passed on, and nothing was switched. Clear {s.group_id}.validate with its "
                     f"downstream tasks to check the staging table and switch it in, or clear the group's load "
                     f"first where the file was fixed")


def switch(connect: Connect, spec: LoadSpec, plan: dict, s: StreamPlan,
           load_of: Callable[[str], dict | None] = lambda gid: None) -> Switched:
    """The validated staging table in as the stream's partition (or into the table's next version,
    which the table's last switch or the batch's publish moves in whole). Where the table's last
    switch publishes it (`publish: table`), each switch first checks the table's files are what
    its loads read (refuse_stale)."""
    if spec.publish == "table":
        refuse_stale(spec, plan, {s.table}, load_of)
    # A lock wait that timed out or a server restart here is retried (a unique violation is
    # not); a retry whose earlier attempt committed finds the switch done (already_switched).
    with session(connect) as adapter:
        started = time.monotonic()
        result = adapter.switch(s)
    done = Switched(result, seconds=round(time.monotonic() - started, 4), switched=now_iso())
    name = result.get("partition") or f"{plan['schema']}.{s.table}"
    if result.get("already_switched"):
        log.info("%s: %s is in place already (an earlier attempt of this task switched it)", s.group_id, name)
    elif result.get("in_target", True):
        log.info("%s: switched in as %s%s", s.group_id, name,
                 f"; the table's batch is in whole ({result['partitions_in']} partitions"
                 + (f", replacing {', '.join(result['removed'])}" if result.get("removed") else "")
                 + (f", retired {', '.join(result['retired'])}" if result.get("retired") else "") + ")"
                 if result.get("table_switched") and "partitions_in" in result else
                 " (replacing the previous one)" if result.get("replaced") else "")
    elif spec.publish == "batch":
        log.info("%s: validated and staged in the next version of %s.%s%s; readers still see the table as "
                 "it was: the batch's publish (publish.batch) moves every table of the batch in together",
                 s.group_id, plan["schema"], s.table, f" as {name}" if s.partitioned else "")
    else:
        log.info("%s: validated and attached to the next version of %s.%s as %s; readers still see the "
                 "table as it was: the table's last switch moves its whole batch in (waiting for %s)",
                 s.group_id, plan["schema"], s.table, name, ", ".join(result.get("waiting_for") or []))
    return done


# --- the batch's publish --------------------------------------------------------------------
def stale_loads(spec: LoadSpec, plan: dict, tables: set[str], load_of: Callable[[str], dict | None],
                source: str | None = None, host: str | None = None) -> list[str]:
    """What of the batch, for `tables`, is no longer what the run's loads put in its staging
    tables: a stream file written again after its load (a producer that delivered the batch again,
    a file fixed in place whose group was not cleared), and a manifest that now lists other files
    than the plan read. Publishing would put in rows the files no longer hold, or leave out a
    file the batch now has, and end `success`.

    A file as the plan checked it (its size and modification time) is as its load read it; only a
    file changed since asks its group's load result (`load_of(group id)`, the size and time it
    read), so a run whose files did not change reads no result. Files on a source (only its
    workers see them) and named pipes (read once) are not compared; nor is a load that recorded
    no file (an earlier version's result). `source`: the streams of that source instead, read on
    `host`, one of its workers (source_files_as_loaded), the manifest left to the central site's
    check; a file loaded on another worker of the source is compared the same way (the workers may
    share the folder), its refusal saying where it was loaded."""
    folder = resolve_batch(plan["batch"])
    problems = []
    for gid, raw in plan["groups"].items():
        if raw["table"] not in tables or spec.source_of(raw["stream"]) != source:
            continue
        path = resolve_file(folder, raw["file"])
        if not path.is_file():
            continue
        st = path.stat()
        now = (st.st_size, st.st_mtime_ns)
        if raw.get("file_mtime_ns") is not None and now == (raw.get("bytes"), raw["file_mtime_ns"]):
            continue
        loaded = load_of(gid) or {}
        if loaded.get("file_mtime_ns") is None or now == (loaded.get("file_bytes"), loaded["file_mtime_ns"]):
            continue
        # On a source, a load on another worker read that worker's file: the same one where the
        # workers share a folder, a copy otherwise, compared all the same (a copy's other
        # modification time is said, never taken for an unchanged file: a rewrite of the same size
        # would go in unseen).
        elsewhere = (f" (loaded on {loaded['host']}: a copy of the batch there must keep the files' modification "
                     f"times, rsync -t)" if source is not None and loaded.get("host") not in (None, host) else "")
        problems.append(f"{path} [table {raw['table']}, stream {raw['stream']}]: {st.st_size:,} bytes modified at "
                        f"{_stamp(st.st_mtime_ns)}, written again since its load read {loaded['file_bytes']:,} bytes "
                        f"modified at {_stamp(loaded['file_mtime_ns'])}{elsewhere} into its staging table: clear group "
                        f"{gid}")
    # A stream file the plan does not have, written since it read the batch (the producer's last
    # file, late): its rows would be left out of a run that ends `success`. The run's tables only:
    # one it was not asked to load has none of its files planned.
    problems += unlisted_files(folder, _manifest_of(plan), spec, set(tables) & set(plan.get("tables") or []),
                               source, said=_written_since_plan)
    return problems + ([] if source else _manifest_changed(folder, plan, tables))


def _written_since_plan(path: Path, table: str, stream: int) -> str:
    return (f"{path}: a file of table {table} (stream {stream}) that this run's plan does not have (written after "
            f"the plan read the batch): its rows would be left out; list it in the batch's manifest "
            f"(`switchyard manifest --force`) and clear the whole run, or move it out of the batch folder")


def _manifest_changed(folder: Path, plan: dict, tables: set[str]) -> list[str]:
    """The batch's manifest, where it now lists other stream files of `tables` than the plan read,
    or other rows for one (a batch delivered again: a file more or less, or a stream the plan took
    for empty, whose group was skipped, now with rows); [] where it lists the same or is not there."""
    import json
    from switchyard.core.batch import MANIFEST
    try:
        entries = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
        listed = {e["file"]: e.get("rows") for e in entries if e["table"] in tables}
    except (OSError, ValueError, KeyError, TypeError):
        return []       # gone or unreadable: the files above are what the run can compare
    planned = {raw["file"]: raw.get("rows") for raw in plan["groups"].values() if raw["table"] in tables}
    said = [f"now lists {', '.join(sorted(set(listed) - set(planned)))}" if set(listed) - set(planned) else "",
            f"no longer lists {', '.join(sorted(set(planned) - set(listed)))}" if set(planned) - set(listed) else "",
            ", ".join(f"gives {f} {listed[f]} rows, not {planned[f]}" for f in sorted(set(listed) & set(planned))
                      if listed[f] != planned[f])]
    if not any(said):
        return []
    return [f"{folder / MANIFEST}: {'; '.join(x for x in said if x)}, since this run's plan read it: the batch was "
            f"delivered again, so the run's plan is not the batch's: clear the whole run (its setup group)"]


def refuse_stale(spec: LoadSpec, plan: dict, tables: set[str], load_of: Callable[[str], dict | None]) -> None:
    """StepFailed, before anything is published, naming each file stale_loads finds."""
    problems = stale_loads(spec, plan, tables, load_of)
    if problems:
        raise not_published(plan["batch"], problems, "the batch is not what the run loaded")


def not_published(batch: str, problems: list[str], why: str, table: str | None = None) -> StepFailed:
    """The refusal of a batch (`table`: of that table of it) whose files are not what its loads
    read: each of `problems`, and what to clear."""
    what = f"table {table} of batch {batch}: not put in, it keeps its contents" if table else (
        f"batch {batch}: not published, nothing changed")
    return StepFailed(f"{what}: {why}:\n- " + "\n- ".join(problems)
                      + "\nClear those groups (`switchyard runs clear <dag> <run id> <group>...`, or Clear with "
                      "downstream in the grid) so that they load the files as they are now, or the whole run if the "
                      "producer delivered the batch again")


def publish_batch(connect: Connect, plan: dict | None, load_of: Callable[[str], dict | None] = lambda gid: None
                  ) -> Published:
    """Every table of the run in, in one transaction (the spec's `publish: batch`), once the
    batch is checked to be what the run loaded (refuse_stale); the target refuses, changing
    nothing, when a stream the plan loads was not staged."""
    if not plan:
        raise StepFailed("the run's plan is missing (did setup.plan run?)")
    tables = set(plan.get("tables") or [])
    streams = [StreamPlan(**raw) for raw in plan["groups"].values() if raw["table"] in tables]
    with session(connect) as adapter:
        refuse_stale(adapter.spec, plan, tables, load_of)
        result = adapter.publish_batch(streams)
    if result.get("already_published"):
        log.info("batch %s: published already by an earlier attempt of this task", plan.get("batch"))
    else:
        log.info("batch %s published: %s in one transaction; the tables were locked for %.3f s",
                 plan.get("batch"), ", ".join(result["tables"]), result.get("lock_seconds") or 0.0)
    return Published(result, published=now_iso())
