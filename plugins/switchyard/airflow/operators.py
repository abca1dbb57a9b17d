"""Airflow operators: thin wrappers that run one step of one (table, stream) on a target.

All the work is in the target adapters, the planner and the validation module; an
operator resolves its inputs (the run's plan from the setup task, the connection by
Airflow connection id), calls one step, and returns a small result for XCom. Nothing
heavy is imported at module level: every task process imports this module.
"""
from __future__ import annotations

import logging
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import BaseOperator, BaseOperatorLink
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from switchyard import settings
from switchyard.core.batch import MANIFEST, BatchError, resolve_batch, resolve_file
from switchyard.observability.stats import report_url

log = logging.getLogger(__name__)

PLAN_TASK = "setup.plan"


def batch_name(value: str | None, context: Any) -> str:
    """The run's batch: the `batch` param, else the logical date (or, without one, the run date)."""
    if value is not None and str(value).strip():
        return str(value).strip()
    when = context.get("logical_date") or context["dag_run"].run_after
    return when.strftime("%Y-%m-%d")


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class _TargetOperator(BaseOperator):
    """Common fields: which spec, which target connection and schema."""

    template_fields: Sequence[str] = ("conn_id",)

    def __init__(self, *, spec: str = "tpch", conn_id: str = "{{ params.conn_id }}",
                 schema: str = "tpch", lock_timeout_seconds: int = 60, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self.conn_id = conn_id
        self.schema = schema
        self.lock_timeout_seconds = lock_timeout_seconds

    def load_spec(self):
        from switchyard.core.spec import load_spec
        return load_spec(self.spec)

    _lease: dict[str, Any] = {}

    def bind_run(self, context: Any) -> None:
        """Steps of this run hold the target's run lease in its name (see targets/base.py)."""
        self._lease = {
            "lease_holder": f"{context['dag_run'].dag_id}/{context['run_id']}",
            "lease_batch": batch_name((context.get("params") or {}).get("batch"), context),
            "lease_ttl_seconds": settings.get().lease_ttl_seconds,
        }

    # The engine's adapter class once a step made one: its classifier reads driver errors.
    _engine: Any = None

    def adapter(self):
        from switchyard.airflow.connections import adapter_for
        made = adapter_for(self.conn_id, self.load_spec(), schema=self.schema,
                           lock_timeout_seconds=self.lock_timeout_seconds, **self._lease)
        self._engine = type(made)
        return made

    def fail_if_permanent(self, exc: BaseException) -> None:
        """Fails the task at once, past its retries, when `exc` fails the same way on every try
        (a TargetError marked permanent, or a driver error the engine classifies so: a unique
        or CHECK violation, a wrong type or length, a missing object, a refused permission).
        The retries are for what can succeed on a second try."""
        from switchyard.targets import permanent_reason
        reason = permanent_reason(self._engine, exc)
        if reason == "permanent":
            raise AirflowFailException(str(exc)) from exc
        if reason:
            raise AirflowFailException(f"{reason}, which a retry cannot fix, so the task is not retried: "
                                       f"{type(exc).__name__}: {exc}") from exc


class WaitForBatchSensor(BaseOperator):
    """Waits for the batch's manifest: a nightly run whose files are late waits, then fails clearly.

    The producer writes `manifest.json` last, so its presence means the batch is complete.
    The wait is deferred to the triggerer (no worker slot is held) and bounded by `timeout`.
    """

    template_fields: Sequence[str] = ("batch",)

    def __init__(self, *, batch: str = "{{ params.batch or '' }}", wait_seconds: int = 6 * 3600,
                 poke_interval: float = 60.0, **kwargs: Any):
        super().__init__(**kwargs)
        self.batch = batch
        self.wait_seconds = wait_seconds
        self.poke_interval = poke_interval

    def _manifest(self, context: Any) -> Path:
        try:
            return resolve_batch(batch_name(self.batch, context)) / MANIFEST
        except BatchError as exc:
            raise AirflowFailException(str(exc)) from exc

    def execute(self, context: Any) -> None:
        from datetime import timedelta
        from switchyard.airflow.triggers import BatchReadyTrigger
        manifest = self._manifest(context)
        if manifest.is_file():
            log.info("batch ready: %s", manifest)
            return
        deadline = datetime.now(timezone.utc) + timedelta(seconds=self.wait_seconds)
        log.info("waiting up to %ss for %s", self.wait_seconds, manifest)
        self.defer(trigger=BatchReadyTrigger(str(manifest), deadline.isoformat(), self.poke_interval),
                   method_name="execute_complete")

    def execute_complete(self, context: Any, event: dict | None = None) -> None:
        event = event or {}
        if event.get("status") != "ready":
            raise AirflowFailException(
                f"{event.get('manifest', self._manifest(context))}: the batch did not arrive within "
                f"{self.wait_seconds}s (its producer writes manifest.json last; is the extract late?)")
        log.info("batch ready: %s", event["manifest"])


class PlanBatchOperator(_TargetOperator):
    """Reads the manifest, checks it against the spec and this DAG, plans, creates missing objects."""

    template_fields: Sequence[str] = ("conn_id", "batch", "tables")

    def __init__(self, *, streams: int, batch: str = "{{ params.batch or '' }}",
                 tables: Any = "{{ params.tables }}", **kwargs: Any):
        super().__init__(**kwargs)
        self.streams = streams
        self.batch = batch
        self.tables = tables

    def _tables(self, spec) -> list[str]:
        chosen = self.tables
        if isinstance(chosen, str):
            import json
            try:
                chosen = json.loads(chosen.replace("'", '"')) if chosen.strip() else []
            except ValueError as exc:
                raise AirflowFailException(f"tables: {self.tables!r} is not a list of table names") from exc
        unknown = [t for t in chosen or [] if t not in spec.table_names]
        if unknown:
            raise AirflowFailException(f"tables: {', '.join(map(repr, unknown))} not in spec {spec.name!r} "
                                       f"(known: {', '.join(spec.table_names)})")
        return list(chosen or spec.table_names)

    def execute(self, context: Any) -> dict:
        try:
            return self.plan(context)
        except Exception as exc:
            # Kept for the run's report and note: why nothing was loaded.
            context["ti"].xcom_push(key="error", value=f"{type(exc).__name__}: {exc}"[:4000])
            raise

    def plan(self, context: Any) -> dict:
        """The batch checked whole (its manifest, its files, the DAG's groups, the declared
        expectations, then the pre-flight against the target), every problem found before one
        refusal lists them all; then the plan, with the target set up for it."""
        from switchyard.core.batch import check_files, read_manifest
        from switchyard.core.planner import PlanError, plan_batch
        spec = self.load_spec()
        tables = self._tables(spec)
        name = batch_name(self.batch, context)
        try:
            folder = resolve_batch(name)
            manifest = read_manifest(folder, spec)
        except BatchError as exc:
            raise AirflowFailException(str(exc)) from exc
        problems = []
        # The batch's shape is its manifest's: each table in as many streams as it lists. The
        # DAG has task groups for up to `streams` per table; the ones a batch does not use skip.
        wider = {t: len(manifest.streams_of(t)) for t in tables if len(manifest.streams_of(t)) > self.streams}
        if wider:
            problems.append(f"{manifest.path}: the batch has "
                            + ", ".join(f"{n} streams of {t}" for t, n in wider.items())
                            + f" but this DAG has task groups for up to {self.streams} per table "
                              f"(set SWITCHYARD_STREAMS={max(wider.values())} or more)")
        plan = None
        try:
            plan = plan_batch(spec, manifest, tables)
        except PlanError as exc:
            problems.append(str(exc))
        problems += check_files(folder, manifest, spec, tables)
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
            raise AirflowFailException(refusal(problems))
        self.bind_run(context)
        adapter = self.adapter()
        # Raises LeaseHeld while another run loads this schema: the task's retries are the wait.
        try:
            # The pre-flight (the batch's ranges against the target's partitions) is part of
            # setup: a batch its table's mode does not allow fails here, before any load, with
            # the problems found above.
            preflight = adapter.setup(plan, problems) or []
        except Exception as exc:
            self.fail_if_permanent(exc)
            raise
        out = plan.to_dict()
        out.update(batch=name, batch_dir=str(folder), tables=tables, target=adapter.engine,
                   schema=adapter.schema, staging_schema=adapter.staging_schema,
                   control_schema=adapter.control_schema, preflight=preflight)
        snapshot = server_snapshot(adapter)
        if snapshot is not None:
            # The run's first look at the server's cumulative counters (SQL Server: wait and
            # latch statistics); the stats task takes the second and reports the difference.
            out["server_snapshot"] = snapshot
        return out


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


class _GroupOperator(_TargetOperator):
    """A step of one (table, stream) group; reads its part of the run's plan."""

    def __init__(self, *, table: str, stream: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.table = table
        self.stream = stream

    def execute(self, context: Any) -> dict:
        started = now_iso()
        # The task process's CPU seconds so far (its start: fork, logging, plugins, API calls)
        # and in the step, kept with the result: what a task costs Airflow's side of the machine.
        cpu_start = time.process_time()
        self.bind_run(context)
        try:
            result = self.step(context)
            # Kept for the run's Gantt chart: the stats task reads every step's span.
            if isinstance(result, dict):
                result.update(step_started=started, step_ended=now_iso(),
                              cpu={"task_start": round(cpu_start, 4),
                                   "step": round(time.process_time() - cpu_start, 4)})
            return result
        except AirflowSkipException:
            raise
        except Exception as exc:
            # Kept for the run's statistics: a failed task pushes no return value.
            context["ti"].xcom_push(key="error", value=f"{type(exc).__name__}: {exc}"[:4000])
            self.fail_if_permanent(exc)
            raise

    def step(self, context: Any) -> dict:
        raise NotImplementedError

    def run_plan(self, context: Any) -> dict:
        plan = context["ti"].xcom_pull(task_ids=PLAN_TASK)
        if not plan:
            raise AirflowFailException("the run's plan is missing (did setup.plan run?)")
        return plan

    def stream_plan(self, context: Any):
        from switchyard.core.planner import StreamPlan, group_id
        plan = self.run_plan(context)
        raw = plan["groups"].get(group_id(self.table, self.stream))
        if raw is None:
            if self.table in (plan.get("tables") or []):
                raise AirflowSkipException(f"{self.table} comes in fewer than {self.stream} streams in this batch")
            raise AirflowSkipException(f"{self.table} is not among this run's tables")
        s = StreamPlan(**raw)
        if s.empty:
            raise AirflowSkipException(f"{self.table} stream {self.stream} is empty in this batch")
        return plan, s


class PrepareOperator(_GroupOperator):
    """Fresh staging table on the stream's filegroup, with its partition's range CHECK.

    Checks that the stream file is there before anything is created, except for a stream on a
    source (`file_on_source`: the spec's `sources`), whose file only that source's workers
    see: its load checks it there."""

    def __init__(self, *, file_on_source: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.file_on_source = file_on_source

    def step(self, context: Any) -> dict:
        return prepare_step(self, *self.stream_plan(context))


def prepare_step(op: _GroupOperator, plan: dict, s) -> dict:
    path = resolve_file(Path(plan["batch_dir"]), s.file)
    if not getattr(op, "file_on_source", None) and not path.is_file():
        raise AirflowFailException(f"{path}: stream file not found [table {s.table}, stream {s.stream}]")
    adapter = op.adapter()
    started = time.monotonic()
    adapter.prepare(s)
    return {"staging_table": f"{plan['staging_schema']}.{s.staging_table}", "file": str(path),
            "seconds": round(time.monotonic() - started, 4)}


class LoadOperator(_GroupOperator):
    """Bulk-loads one stream file into its staging table, logging progress on long loads.

    Every `progress_every_seconds` (default SWITCHYARD_PROGRESS_SECONDS, 5 s) the log gets
    rows, MB, MB/s and percent of the file; rows come from the server where it reports them
    (PostgreSQL: pg_stat_progress_copy).
    """

    def __init__(self, *, progress_every_seconds: float | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.progress_every_seconds = progress_every_seconds

    def step(self, context: Any) -> dict:
        # The load's fixed cost part by part, in its result (`parts`): the plan's pull first.
        clock = time.monotonic()
        plan, s = self.stream_plan(context)
        return load_step(self, context, plan, s, plan_pull=time.monotonic() - clock)


def load_step(op: _GroupOperator, context: Any, plan: dict, s, plan_pull: float = 0.0) -> dict:
    from switchyard.observability.progress import LoadProgress
    # The load's fixed cost part by part, in its result (`parts`, seconds): the plan's pull
    # from XCom, the connection's lookup, the progress sampler's setup and close; the
    # adapter adds its own (connect, lease, release) to the result's details.
    parts = {"plan_pull": plan_pull}
    path = local_file(plan, s, op.queue)
    clock = time.monotonic()
    adapter = op.adapter()
    parts["connection_lookup"] = time.monotonic() - clock
    clock = time.monotonic()
    # The server's progress sampler connects only when a progress line is due (after
    # SWITCHYARD_PROGRESS_SECONDS): a short load never opens that side connection.
    server = adapter.server_progress(adapter.staging_schema, s.staging_table)
    progress = LoadProgress(s.group_id, getattr(op, "progress_every_seconds", None), server=server)
    parts["progress_setup"] = time.monotonic() - clock
    started = now_iso()
    clock = time.monotonic()
    try:
        result = adapter.load(s, path, progress)
    except Exception as exc:
        op.fail_if_permanent(exc)   # bad data: a retry would fail the same way
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
    return {"rows": result.rows, "bytes": result.bytes, "seconds": round(result.seconds, 4),
            "started": started, "ended": ended, "file": str(path), "host": context["ti"].hostname,
            "queue": op.queue, "parts": {k: round(v, 4) for k, v in parts.items()}, **result.details}


def local_file(plan: dict, s, queue: str | None) -> Path:
    """The stream file under this process's data root (SWITCHYARD_DATA_ROOT).

    The load is the one step that may run on another machine (a worker of the stream's
    source, see dag_factory.routing): it finds the batch under its own root, not at the
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


class ValidateOperator(_GroupOperator):
    """The staging table checked before its switch: row count, key range, not null, the spec's
    unique columns and declared expectations (see validation.py). The return value lists every
    check with what it expected, observed and cost (`checks`, and `cost` per kind of check)."""

    def step(self, context: Any) -> dict:
        return validate_step(self, context, *self.stream_plan(context))


def validate_step(op: _GroupOperator, context: Any, plan: dict, s, loaded: dict | None = None) -> dict:
    """`loaded`: the load's result, where the caller has it (else it is pulled from the load's
    XCom when needed): the expected count when the manifest has none, and the COPY's count
    and the storage it filled, which validation takes for the table's row count where the
    target names that storage (SWITCHYARD_VALIDATION=load)."""
    from switchyard.core.spec import SpecError
    from switchyard.observability.validation import describe_failures, trust_load_default, validate_stream
    adapter = op.adapter()
    if loaded is None and (s.rows is None or adapter.load_names_its_storage and trust_load_default()):
        # One more API call, only where the load's result is used.
        loaded = context["ti"].xcom_pull(task_ids=f"{s.group_id}.load") or {}
    expected_rows = s.rows
    if expected_rows is None:
        # A manifest without row counts: the count the load reported.
        expected_rows = (loaded or {}).get("rows")
    try:
        outcome = validate_stream(adapter, op.load_spec(), s, expected_rows, loaded=loaded)
    except SpecError as exc:
        raise AirflowFailException(str(exc)) from exc
    result = outcome.to_dict()
    log.info("%s: validation %s in %.2f s (GX import %.2f s); seconds per kind of check: %s", s.group_id,
             "passed" if outcome.success else "FAILED", outcome.seconds, outcome.import_seconds,
             ", ".join(f"{k} {v:.3f}" for k, v in result["cost"].items()))
    if not outcome.success:
        where = (f"table {s.table}, stream {s.stream}, file {plan['batch_dir']}/{s.file}, "
                 f"staging table {plan['staging_schema']}.{s.staging_table} (kept; nothing switched)")
        context["ti"].xcom_push(key="failure", value=result)
        raise AirflowFailException(describe_failures(outcome, where))
    return result


class SwitchOperator(_GroupOperator):
    """Switches the validated staging table in as the stream's partition.

    Where the target commits a table's switches together (PostgreSQL), the staging table joins
    the table's next version and the table's last switch moves the whole batch in, in one
    transaction; `in_target` in the result says whether the partition is in the table now."""

    def step(self, context: Any) -> dict:
        return switch_step(self, *self.stream_plan(context))


def switch_step(op: _GroupOperator, plan: dict, s) -> dict:
    # A lock wait that timed out or a server restart here is retried (a unique violation is
    # not: _GroupOperator.execute); a retry whose earlier attempt committed finds the switch
    # done (already_switched).
    adapter = op.adapter()
    started = time.monotonic()
    result = adapter.switch(s)
    result["seconds"] = round(time.monotonic() - started, 4)
    result["switched"] = now_iso()
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
    elif op.load_spec().publish == "batch":
        log.info("%s: validated and staged in the next version of %s.%s%s; readers still see the table as "
                 "it was: the batch's publish (publish.batch) moves every table of the batch in together",
                 s.group_id, plan["schema"], s.table, f" as {name}" if s.partitioned else "")
    else:
        log.info("%s: validated and attached to the next version of %s.%s as %s; readers still see the "
                 "table as it was: the table's last switch moves its whole batch in (waiting for %s)",
                 s.group_id, plan["schema"], s.table, name, ", ".join(result.get("waiting_for") or []))
    return result


class GroupStepsOperator(_GroupOperator):
    """A group's four steps in one task: prepare, load, validate, switch, in that order, with
    the same checks and the same outcome as the four tasks (the spec's `tasks: single`).

    For tables whose loads take a second or two, where each task's start and end cost Airflow
    more than the step's work. The task holds a load pool slot from prepare to switch (the COPY
    still waits for a slot of the target's own), and it is the group's unit of retry: a retry
    runs the steps again from prepare, which replaces an earlier attempt's staging table. The
    result holds each step's result under its name; a failed attempt pushes the steps it
    finished and the one that failed (`steps_done`), for the run's statistics."""

    def __init__(self, *, file_on_source: str | None = None, progress_every_seconds: float | None = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.file_on_source = file_on_source
        self.progress_every_seconds = progress_every_seconds

    def step(self, context: Any) -> dict:
        clock = time.monotonic()
        plan, s = self.stream_plan(context)
        plan_pull = time.monotonic() - clock
        done: dict[str, Any] = {}
        steps = (("prepare", lambda: prepare_step(self, plan, s)),
                 ("load", lambda: load_step(self, context, plan, s, plan_pull=plan_pull)),
                 ("validate", lambda: validate_step(self, context, plan, s, loaded=done["load"])),
                 ("switch", lambda: switch_step(self, plan, s)))
        for name, run in steps:
            started, cpu = now_iso(), time.process_time()
            try:
                result = run()
            except Exception:
                context["ti"].xcom_push(key="steps_done", value={**done, "failed_step": name})
                raise
            # Each step's span and CPU, as a task of its own reports them (the report's Gantt
            # chart); the task's start is paid once, before its first step.
            result.update(step_started=started, step_ended=now_iso(),
                          cpu={"task_start": round(cpu, 4) if not done else 0.0,
                               "step": round(time.process_time() - cpu, 4)})
            done[name] = result
        return done


class PublishBatchOperator(_TargetOperator):
    """Publishes the batch: every table of the run in, in one transaction (the spec's `publish:
    batch`), once every group of the run has switched (staged its validated table).

    Runs only when no group failed (all upstream switches succeeded or skipped): a failed group
    leaves every table of the batch as it was. The target refuses, changing nothing, when a
    stream the plan loads was not staged (a group skipped or cleared), naming it and its rows."""

    def execute(self, context: Any) -> dict:
        from switchyard.core.planner import StreamPlan
        plan = context["ti"].xcom_pull(task_ids=PLAN_TASK)
        if not plan:
            raise AirflowFailException("the run's plan is missing (did setup.plan run?)")
        tables = set(plan.get("tables") or [])
        streams = [StreamPlan(**raw) for raw in plan["groups"].values() if raw["table"] in tables]
        self.bind_run(context)
        try:
            result = self.adapter().publish_batch(streams)
        except Exception as exc:
            context["ti"].xcom_push(key="error", value=f"{type(exc).__name__}: {exc}"[:4000])
            self.fail_if_permanent(exc)
            raise
        if result.get("already_published"):
            log.info("batch %s: published already by an earlier attempt of this task", plan.get("batch"))
        else:
            log.info("batch %s published: %s in one transaction; the tables were locked for %.3f s",
                     plan.get("batch"), ", ".join(result["tables"]), result.get("lock_seconds") or 0.0)
        result["published"] = now_iso()
        return result


class PublishOperator(_TargetOperator):
    """Marks a table's new data as published: its Asset gets an event once all its partitions switched.

    Runs after every switch of its table (all_success), so the event means the whole batch of
    that table is in place; a table not loaded in this run (or with a failed group) gets none.
    """

    def __init__(self, *, table: str, groups: list[str], asset_conn_id: str, single: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.table = table
        self.groups = groups
        self.asset_conn_id = asset_conn_id
        # The table's groups run their steps in one task each (the spec's `tasks: single`).
        self.single = single

    def execute(self, context: Any) -> dict:
        if self.conn_id != self.asset_conn_id:
            # The Asset names the DAG's default target; a run into another one is not its update.
            raise AirflowSkipException(f"this run loaded connection {self.conn_id!r}; the Asset of "
                                       f"{self.table} is the table behind {self.asset_conn_id!r}")
        ti = context["ti"]
        plan = ti.xcom_pull(task_ids=PLAN_TASK) or {}
        # Groups of streams the batch does not have skipped: they pushed nothing.
        if self.single:
            done = [ti.xcom_pull(task_ids=f"{gid}.steps") or {} for gid in self.groups]
            switched = [x["switch"] for x in done if x.get("switch")]
            loads = [x.get("load") or {} for x in done]
        else:
            switched = [x for gid in self.groups if (x := ti.xcom_pull(task_ids=f"{gid}.switch"))]
            loads = [ti.xcom_pull(task_ids=f"{gid}.load") or {} for gid in self.groups]
        if not switched:
            # In batch mode the batch's publish task is upstream too, and it succeeds for the
            # tables the run left out: that success alone is no update of this table.
            raise AirflowSkipException(f"no stream of {self.table} was switched in this run")
        extra = {"batch": plan.get("batch"), "schema": plan.get("schema"), "table": self.table,
                 "partitions": len(switched), "rows": sum(int(x.get("rows") or 0) for x in loads),
                 "bytes": sum(int(x.get("bytes") or 0) for x in loads)}
        for outlet in self.outlets:
            context["outlet_events"][outlet].extra = extra
        log.info("%s.%s published: %d partitions, %s rows (batch %s)", extra["schema"], self.table,
                 extra["partitions"], f"{extra['rows']:,}", extra["batch"])
        return extra


class ReportLink(BaseOperatorLink):
    """The stats task's button to the run's report, as served by the api-server."""

    name = "Run report"

    def get_link(self, operator: BaseOperator, *, ti_key: Any) -> str:
        return report_url(ti_key.dag_id, ti_key.run_id)


class StatsOperator(_TargetOperator):
    """Assembles the run's statistics from every group, whatever happened upstream.

    Writes stats.json, report.html and report.md into the run's folder, one row per load
    into the target's control table `load_stats` (one transaction, after the run: a failed
    load gets its row too), and fails the run if any group did not switch.
    """

    operator_extra_links = (ReportLink(),)

    def __init__(self, *, groups: list[tuple[str, int]], single_tables: Sequence[str] = (), **kwargs: Any):
        super().__init__(**kwargs)
        self.groups = groups
        # Tables whose groups run their steps in one task (the spec's `tasks: single`).
        self.single_tables = list(single_tables)

    def execute(self, context: Any) -> dict:
        from switchyard.observability.report import write_report
        from switchyard.observability.stats import STEPS, assemble, task_states, write_stats
        ti = context["ti"]
        plan = ti.xcom_pull(task_ids=PLAN_TASK) or {}
        self.bind_run(context)
        try:
            self.adapter().release_lease()
        except Exception as exc:  # noqa: BLE001 - the lease then lapses after its TTL
            log.warning("could not release the run lease (it lapses by itself): %s", exc)
        states = task_states(context)

        def pull(task_id: str, key: str = "return_value") -> Any:
            # One API call per XCom: ask only where the task's state says there can be one
            # (a result from a success, an error or a validation failure from a failure),
            # which at 8 streams saves some 200 calls at the end of the run.
            state = states.get(task_id)
            if states and state != ("success" if key == "return_value" else "failed"):
                return None
            return ti.xcom_pull(task_ids=task_id, key=key)

        results = {}
        for table, stream in self.groups:
            gid = f"{table}_{stream}"
            planned = (plan.get("groups") or {}).get(gid) or {}
            results[gid] = {
                "table": table, "stream": stream,
                "planned_file": str(Path(plan["batch_dir"]) / planned["file"])
                if planned.get("file") and plan.get("batch_dir") else None,
                **(self._single_task(gid, pull, states) if table in self.single_tables else {
                    "prepare": pull(f"{gid}.prepare"),
                    "load": pull(f"{gid}.load"),
                    "validate": pull(f"{gid}.validate") or pull(f"{gid}.validate", key="failure"),
                    "switch": pull(f"{gid}.switch"),
                    "errors": {step: err for step in STEPS if (err := pull(f"{gid}.{step}", key="error"))},
                    "states": {step: states.get(f"{gid}.{step}") for step in STEPS}}),
            }
        adapter = self.adapter() if plan else None
        server = {}
        if adapter is not None and plan.get("server_snapshot") is not None:
            server = server_delta(adapter, plan["server_snapshot"], server_snapshot(adapter))
        published = None
        batch = {}
        if plan and self.load_spec().publish == "batch":
            # The batch goes in whole or not at all: the tables its publish moved in, if it ran.
            batch = pull("publish_batch") or {}
            published = set(batch.get("tables") or [])
        stats = assemble(plan, results, context, server=server, published=published)
        if batch:
            # How long the publish held the batch's tables locked (readers waited at most that).
            stats["publish_batch"] = {k: batch.get(k) for k in ("tables", "lock_seconds", "seconds", "published",
                                                                 "already_published", "attach_scan_skipped")}
        if plan and self.load_spec().publish == "batch" and (error := pull("publish_batch", key="error")):
            stats["publish_error"] = error
        if not plan and (error := pull(PLAN_TASK, key="error")):
            # Why nothing was loaded: setup's own message (a refused batch, a pre-flight).
            stats["plan_error"] = error
        if not plan:
            stats["batch"] = self._lease.get("lease_batch")  # the batch the run was asked to load
        stats["publish"] = self.load_spec().publish
        if adapter is not None:
            stats["load_stats_table"] = self._record(adapter, stats)
        path = write_stats(stats, context)
        report = write_report(stats, path.parent)
        log.info("run statistics: %s", path)
        log.info("run report: %s (Markdown: %s)", report["html"], report["markdown"])
        log.info("run report in the UI: %s", report_url(ti.dag_id, ti.run_id))
        for line in stats["summary_lines"]:
            log.info(line)
        ti.xcom_push(key="stats_path", value=str(path))
        ti.xcom_push(key="report_path", value=str(report["html"]))
        if stats["failed_groups"] or stats.get("held_back_groups"):
            # The last task decides the run's state: a run with a failed group is a failed run.
            not_in = stats["failed_groups"] + stats.get("held_back_groups", [])
            kept = stats.get("tables_kept") or []
            batch_mode = self.load_spec().publish == "batch"
            raise AirflowFailException(
                f"{len(not_in)} of {stats['totals']['groups']} groups did not switch: {', '.join(not_in)}"
                + ("; setup.plan did not finish: nothing was loaded and every table is as it was"
                   + (f" ({stats['plan_error']})" if stats.get("plan_error") else "") if not plan
                   else f"; {', '.join(kept)} kept {'its' if len(kept) == 1 else 'their'} previous contents, "
                        f"whole (clear the failed groups to rerun them; "
                        + ("the batch goes in, every table together, when all its groups have switched)"
                           if batch_mode else "the table goes in when all its groups have switched)")
                   if kept else "")
                + f" (statistics: {path}, report: {report['html']})")
        if stats.get("publish_error"):
            raise AirflowFailException(f"the batch was not published: {stats['publish_error']} "
                                       f"(statistics: {path}, report: {report['html']})")
        return {"path": str(path), "report": str(report["html"]), "totals": stats["totals"],
                "failed_groups": stats["failed_groups"]}

    @staticmethod
    def _single_task(gid: str, pull: Any, states: dict[str, str]) -> dict:
        """A group run as one task: its steps' results and states as four tasks would give them."""
        from switchyard.observability.stats import single_task_states
        task = f"{gid}.steps"
        done = pull(task) or pull(task, key="steps_done") or {}
        failed = done.get("failed_step")
        error = pull(task, key="error")
        return {"prepare": done.get("prepare"), "load": done.get("load"),
                "validate": done.get("validate") or (pull(task, key="failure") if failed == "validate" else None),
                "switch": done.get("switch"),
                "errors": {failed or "prepare": error} if error else {},
                "states": single_task_states(states.get(task), done)}

    @staticmethod
    def _record(adapter: Any, stats: dict) -> dict:
        """The run's rows in <control schema>.load_stats; a target that refuses them is logged, not fatal."""
        from switchyard.observability.stats import write_load_stats
        table = f"{adapter.control_schema}.load_stats"
        try:
            rows = write_load_stats(adapter, stats)
        except Exception as exc:
            log.error("could not write %s on the target: %s", table, exc)
            return {"table": table, "rows": 0, "error": f"{type(exc).__name__}: {exc}"[:1000]}
        log.info("%s: %d rows for run %s", table, rows, stats["run_id"])
        return {"table": table, "rows": rows}
