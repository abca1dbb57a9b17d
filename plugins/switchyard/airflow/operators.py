"""Airflow operators: thin wrappers that run one step of one (table, stream) on a target.

All the work is in the target adapters, the planner and the validation module; an
operator resolves its inputs (the run's plan from the setup task, the connection by
Airflow connection id), calls one step, and returns a small result for XCom. Nothing
heavy is imported at module level: every task process imports this module.
"""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from airflow.sdk import BaseOperator, BaseOperatorLink
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException, AirflowSkipException

from switchyard import settings, steps
from switchyard.graph import AS_LOADED
from switchyard.core.batch import MANIFEST, BatchError, resolve_batch
from switchyard.observability.stats import report_url
from switchyard.steps import (StepFailed, StepSkipped, ValidationFailed, now_iso, published_since_plan,
                             server_delta, server_snapshot)

log = logging.getLogger(__name__)

PLAN_TASK = "setup.plan"
WAIT_TASK = "setup.wait_for_batch"
# The setup's checks of each source's files on its workers (graph.source_check_ids).
SOURCE_FILES_TASKS = "setup.files_on_"
# The key of a switch's result that carries its group's prepare, load and validate results.
EARLIER_STEPS = "earlier_steps"


def batch_name(value: str | None, context: Any, settings_file: str | None = None) -> str:
    """The run's batch: the `batch` param, else the logical date (or, without one, the run date)
    as the DAG's settings (`settings_file`: its own, else the environment's) name its batch
    (Settings.batch_for: its date in SWITCHYARD_TIMEZONE)."""
    if value is not None and str(value).strip():
        return str(value).strip()
    return settings.get(settings_file).batch_for(context.get("logical_date") or context["dag_run"].run_after)


def refuse_a_shared_batch(value: str | None, context: Any, settings_file: str | None = None) -> None:
    """Fails the run whose batch, named by its date (no `batch` param), another run of the
    schedule names too (Settings.batch_shared): both would load one batch and the other period's
    files never. A manual run dated now names the day's batch on purpose: only the clock's
    repeated hour counts for it."""
    if value is not None and str(value).strip():
        return
    kind = getattr(context.get("dag_run"), "run_type", None)
    when = context.get("logical_date") or context["dag_run"].run_after
    why = settings.get(settings_file).batch_shared(when, scheduled=getattr(kind, "value", kind) in ("scheduled", "backfill"))
    if why:
        raise AirflowFailException(f"refused: {why}")


def keep_error(context: Any, exc: BaseException) -> None:
    """A failed task's error, kept as its `error` XCom for the run's statistics, report and note
    (a failed task pushes no return value)."""
    context["ti"].xcom_push(key="error", value=f"{type(exc).__name__}: {exc}"[:4000])


def refuse_unknown_conf(context: Any) -> None:
    """Fails the task at once (no retry) when the run's conf names a key the DAG has no param for
    (steps.unknown_conf), its error kept for the run's statistics and note."""
    unknown = steps.unknown_conf(getattr(context.get("dag_run"), "conf", None), context["dag"].params.keys())
    if unknown:
        exc = AirflowFailException(unknown)
        keep_error(context, exc)
        raise exc


class _TargetOperator(BaseOperator):
    """Common fields: which spec, which target connection and schema."""

    def __init__(self, *, spec: str = "tpch", conn_id: str | None = None,
                 schema: str = "tpch", lock_timeout_seconds: int = 60, settings_file: str | None = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        # The DAG's own settings file (one DAG among several in one Airflow); None: the one the
        # environment names. The run's batch is named as it says.
        self.settings_file = settings_file
        # None: the run's `conn_id` param (the trigger form's "Target connection"), read when
        # the task starts (pre_execute).
        self.conn_id = conn_id
        self.schema = schema
        self.lock_timeout_seconds = lock_timeout_seconds

    def pre_execute(self, context: Any) -> None:
        # The run's connection is read from its params, not rendered from a template field: a
        # task with no template field makes no rendered-fields call to Airflow's API server
        # (one request and a metadata write per task, and its history pruned each time).
        # Airflow merges the run's conf into `params` as it does for templates.
        if self.conn_id is None:
            self.conn_id = str((context.get("params") or {}).get("conn_id") or "").strip() or None
        if self.conn_id is None:
            raise AirflowFailException("no target connection: the DAG's `conn_id` param is empty")

    def load_spec(self):
        from switchyard.core.spec import load_spec
        return load_spec(self.spec)

    _lease: dict[str, Any] = {}

    def bind_run(self, context: Any) -> None:
        """Steps of this run hold the target's run lease in its name (see targets/base.py)."""
        self._lease = {
            "lease_holder": f"{context['dag_run'].dag_id}/{context['run_id']}",
            "lease_batch": batch_name((context.get("params") or {}).get("batch"), context, self.settings_file),
            "lease_ttl_seconds": settings.get().lease_ttl_seconds,
            # The DAG's batch names read as dates (the pre-flight's "holds a newer batch").
            "batch_format": settings.get(self.settings_file).batch_format,
            # The server shows the step's sessions under the task's name.
            "session_name": f"switchyard:{context['ti'].task_id}",
        }

    # The engine's adapter class once a step made one: its classifier reads driver errors.
    _engine: Any = None

    def adapter(self):
        from switchyard.airflow.connections import adapter_for
        try:
            made = adapter_for(self.conn_id, self.load_spec(), schema=self.schema,
                               lock_timeout_seconds=self.lock_timeout_seconds, **self._lease)
        except AirflowNotFoundException as exc:
            # Every retry would look it up in vain (setup.plan's retries, meant for another run's
            # lease, would wait hours) while the run looked as if it were loading.
            raise AirflowFailException(
                f"the target connection {self.conn_id!r} (the run's conn_id param) is not defined in Airflow: add "
                f"it (`airflow connections add {self.conn_id} --conn-uri ...`) or trigger the run with the conn_id "
                f"of one that is; not retried, since a retry cannot find it either") from exc
        self._engine = type(made)
        return made

    # --- lineage: only Airflow's OpenLineage provider calls these (airflow/lineage.py) -------
    # Which step's datasets the task reports (None: none), and what the step left for them: the
    # run's plan, the group's stream, the step's result.
    lineage_step: str | None = None
    _done: dict[str, Any] | None = None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return self._lineage()

    def get_openlineage_facets_on_failure(self, task_instance: Any) -> Any:
        return self._lineage()

    def _lineage(self) -> Any:
        if self.lineage_step is None or self.conn_id is None:  # None: the task ended before it had one
            from airflow.providers.openlineage.extractors.base import OperatorLineage
            return OperatorLineage()
        from switchyard.airflow.lineage import facets
        return facets(self, self.lineage_step, self._done)

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


def held_off(not_before: str | None, run_type: Any, when: datetime | None) -> str | None:
    """Why a run loads nothing: a scheduled run dated before SWITCHYARD_START_DATE (`not_before`).
    Manual runs and backfills are not bound by it. None: the run loads."""
    if not not_before or when is None or getattr(run_type, "value", run_type) != "scheduled":
        return None
    start = datetime.fromisoformat(not_before)
    if when >= start:
        return None
    return (f"a scheduled run dated {when.isoformat()}, before SWITCHYARD_START_DATE {start.isoformat()}: "
            f"no load (manual runs and backfills are not bound by it)")


# The XCom key under which a waiting run's wait_for_batch names the manifest it waits for.
WAITING_FOR = "waiting_for"
# The XCom key under which the wait of a DAG of its own settings file names the run's batch, which
# only that file says (`switchyard runs` reads it).
BATCH = "batch"
# The XCom key under which a plan names the earlier run of its DAG it waits for (wait_for_earlier_runs).
EARLIER_RUN = "earlier_run"
# How often a plan behind an earlier run looks again.
EARLIER_RUN_POKE_SECONDS = 20.0


def wait_for_earlier_runs(context: Any) -> None:
    """Puts the plan off (up for reschedule: no worker slot, no retry spent) while a run of the
    same DAG with an earlier logical date is running: a DAG's runs load in date order. The DAG
    allows one active run, but a backfill has its own limit (`--max-active-runs`, 10 by default,
    in the UI's form too), and its runs then start together and take the run lease in any order:
    a later date first, and the earlier dates' replace tables were refused as older than the batch
    they hold. Only running runs are waited for: a queued earlier run (a backfill run backwards)
    may be queued behind this one."""
    ti = context["ti"]
    try:
        earlier = ti.get_previous_dagrun(state="running")
    except Exception as exc:  # noqa: BLE001 - the lease and the pre-flight still keep the target right
        log.warning("could not ask Airflow for an earlier running run of this DAG (%s); planning now", exc)
        return
    if earlier is None:
        return
    from airflow.sdk.exceptions import AirflowRescheduleException
    log.info("run %s of this DAG, dated %s, earlier than this run, is running: this run's plan waits for it to "
             "end (runs load in date order); looking again in %g s", earlier.run_id, earlier.logical_date,
             EARLIER_RUN_POKE_SECONDS)
    ti.xcom_push(key=EARLIER_RUN, value={"run_id": earlier.run_id, "logical_date": str(earlier.logical_date)})
    raise AirflowRescheduleException(datetime.now(timezone.utc) + timedelta(seconds=EARLIER_RUN_POKE_SECONDS))


class WaitForBatchSensor(BaseOperator):
    """Waits for the batch's manifest: a nightly run whose files are late waits, then fails clearly.

    The producer writes `manifest.json` last, so its presence means the batch is complete.
    The wait is deferred to the triggerer (no worker slot is held) and bounded by `timeout`.
    """

    # not_before is a template field so that the DAG's serialized form (and the UI) carries it.
    template_fields: Sequence[str] = ("batch", "not_before")

    def __init__(self, *, batch: str = "{{ params.batch or '' }}", wait_seconds: int = 6 * 3600,
                 poke_interval: float = 60.0, not_before: str | None = None, settings_file: str | None = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.batch = batch
        # The DAG's own settings file (see _TargetOperator), which names the run's batch.
        self.settings_file = settings_file
        self.wait_seconds = wait_seconds
        self.poke_interval = poke_interval
        # SWITCHYARD_START_DATE (ISO text): a scheduled run dated before it loads nothing.
        self.not_before = not_before

    def _held_off(self, context: Any) -> str | None:
        return held_off(self.not_before, getattr(context.get("dag_run"), "run_type", None),
                        context.get("logical_date"))

    def _manifest(self, context: Any) -> Path:
        try:
            return resolve_batch(batch_name(self.batch, context, self.settings_file)) / MANIFEST
        except BatchError as exc:
            raise AirflowFailException(str(exc)) from exc

    def execute(self, context: Any) -> None:
        from switchyard.airflow.triggers import BatchReadyTrigger
        held_off = self._held_off(context)
        if held_off:
            # Every later task is skipped with it; the stats task says so and skips too.
            raise AirflowSkipException(held_off)
        # A misspelt `batch` in the conf would leave the run waiting hours for the batch the
        # run's date names: refused here, before the wait, as the plan refuses it.
        refuse_unknown_conf(context)
        refuse_a_shared_batch(self.batch, context, self.settings_file)
        manifest = self._manifest(context)
        if self.settings_file:
            context["ti"].xcom_push(key=BATCH, value=batch_name(self.batch, context, self.settings_file))
        if manifest.is_file():
            log.info("batch ready: %s", manifest)
            return
        deadline = datetime.now(timezone.utc) + timedelta(seconds=self.wait_seconds)
        log.info("waiting up to %ss for %s", self.wait_seconds, manifest)
        # The path as this worker resolved it (its SWITCHYARD_DATA_ROOT), for whoever asks what
        # the run waits for; only a run whose batch is not there yet pays for it.
        context["ti"].xcom_push(key=WAITING_FOR, value=str(manifest))
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

    lineage_step = "plan"

    # Shown rendered in the task's view: the batch and tables the run was asked for.
    template_fields: Sequence[str] = ("batch", "tables")

    def __init__(self, *, streams: int, batch: str = "{{ params.batch or '' }}",
                 tables: Any = "{{ params.tables }}", **kwargs: Any):
        super().__init__(**kwargs)
        self.streams = streams
        self.batch = batch
        self.tables = tables

    def _tables(self, spec) -> list[str]:
        return steps.chosen_tables(spec, self.tables)

    def execute(self, context: Any) -> dict:
        from airflow.sdk.exceptions import AirflowRescheduleException
        try:
            return self.plan(context)
        except AirflowRescheduleException:
            raise  # put off behind an earlier run (wait_for_earlier_runs): no error
        except Exception as exc:
            # Kept for the run's report and note: why nothing was loaded.
            keep_error(context, exc)
            raise

    def plan(self, context: Any) -> dict:
        """The batch checked whole (its manifest, its files, the DAG's groups, the declared
        expectations, then the pre-flight against the target), every problem found before one
        refusal lists them all; then the plan, with the target set up for it."""
        spec = self.load_spec()
        name = batch_name(self.batch, context, self.settings_file)
        refuse_unknown_conf(context)
        refuse_a_shared_batch(self.batch, context, self.settings_file)
        wait_for_earlier_runs(context)
        with airflow_terms(context):
            tables = self._tables(spec)
            # A boolean param: Airflow checked its type against the DAG's params.
            replace_newer = bool((context.get("params") or {}).get("replace_newer"))
            folder, plan, problems, tables, notes = steps.check_batch(spec, tables, name, self.streams,
                                                                       self.settings_file)
            from switchyard.observability.stats import task_states
            missing = steps.groups_without_tasks(plan, tables, set(task_states(context)), self.streams)
            if missing:
                raise steps.StepFailed(missing)
        self.bind_run(context)
        adapter = self.adapter()
        from switchyard.targets import LeaseHeld
        try:
            # The pre-flight (the batch's ranges against the target's partitions) is part of
            # setup: a batch its table's mode does not allow fails here, before any load, with
            # the problems found above.
            try:
                run = steps.set_up(adapter, plan, problems, name, folder, tables, replace_newer, notes)
            except LeaseHeld as held:
                if not take_over_ended_lease(context["ti"], adapter, held):
                    raise
                run = steps.set_up(adapter, plan, problems, name, folder, tables, replace_newer, notes)
            self._done = {"plan": run}
            return run
        except Exception as exc:
            self.fail_if_permanent(exc)
            raise


# The XCom key under which a plan that waits to take over an ended run's lease says so.
LEASE_WAIT = "lease_wait"

# The states of an Airflow run that has ended: none of its tasks is started again.
ENDED_RUN_STATES = ("failed", "success")


def ended_run_state(ti: Any, holder: str) -> str | None:
    """The state of the lease holder's run (`<dag_id>/<run_id>`) if Airflow reports it ended; None
    while it runs or is queued, and where this Airflow does not know it (another deployment's
    run, a lease taken outside Airflow): such a lease is only ever left to lapse."""
    dag_id, sep, run_id = holder.partition("/")
    if not sep:
        return None
    try:
        state = ti.get_dagrun_state(dag_id=dag_id, run_id=run_id)
    except Exception as exc:  # noqa: BLE001 - not found, or the API unreachable: keep waiting
        log.info("the lease holder %s is not a run this Airflow reports (%s): its lease is left to lapse",
                 holder, exc)
        return None
    state = str(getattr(state, "value", state))
    return state if state in ENDED_RUN_STATES else None


def take_over_ended_lease(ti: Any, adapter: Any, held: Any) -> bool:
    """True once the lease `held` is deleted because its run has ended (failed, marked failed, or
    succeeded without its stats task giving the lease up), so this run need not wait for the
    lease's TTL. The wait before it gives a step of that run still running when the run was
    marked failed the time Airflow takes to stop it; a renewal meanwhile (the same expiry no
    longer) keeps the lease with that run, and this run waits its turn as before."""
    state = ended_run_state(ti, held.holder)
    if state is None:
        return False
    wait = settings.get().lease_takeover_seconds
    log.warning("the run lease on the target schema is held by run %s, which Airflow reports %s; taking it "
                "over unless a step of that run renews it in the next %g s (SWITCHYARD_LEASE_TAKEOVER_SECONDS)",
                held.holder, state, wait)
    # For whoever asks what the run does meanwhile (`switchyard runs`): its plan is running, and
    # nothing else would say that it waits, for whom, and until when.
    until = datetime.now(timezone.utc) + timedelta(seconds=wait)
    ti.xcom_push(key=LEASE_WAIT, value={"holder": held.holder, "state": state, "until": until.isoformat()})
    time.sleep(wait)
    if adapter.end_lease_of(held):
        log.warning("the run lease of the %s run %s was given up: this run takes it", state, held.holder)
        return True
    log.warning("run %s renewed its lease meanwhile: a step of it is still running; this run waits its turn",
                held.holder)
    return False


@contextmanager
def airflow_terms(context: Any) -> Iterator[None]:
    """A step's outcome in Airflow's terms: StepSkipped skips the task, StepFailed fails it
    without retries (a failed validation first keeps its outcome for the run's statistics)."""
    try:
        yield
    except StepSkipped as exc:
        raise AirflowSkipException(str(exc)) from exc
    except ValidationFailed as exc:
        context["ti"].xcom_push(key="failure", value=exc.result)
        raise AirflowFailException(str(exc)) from exc
    except StepFailed as exc:
        raise AirflowFailException(str(exc)) from exc


class SourceFilesOperator(_TargetOperator):
    """The batch's files on one source's workers (the spec's `sources`), checked there before any
    load: the plan's check of the files, for the files the plan cannot see (steps.source_files);
    with `as_loaded`, before the batch's publish (`table`: before that table's switches): each file
    as its load read it (steps.source_files_as_loaded). Runs on the source's queue, as its loads
    do; reads files and the loads' results only, never the target."""

    def __init__(self, *, source: str, as_loaded: bool = False, table: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.source = source
        self.as_loaded = as_loaded
        self.table = table      # with as_loaded: that table's files, before its switches (publish: table)

    def pre_execute(self, context: Any) -> None:
        pass    # no target connection: the files alone are read

    def execute(self, context: Any) -> dict:
        plan = context["ti"].xcom_pull(task_ids=PLAN_TASK)
        if not plan:
            raise AirflowFailException("the run's plan is missing (did setup.plan run?)")
        try:
            with airflow_terms(context):
                steps.spec_as_planned(plan, self.load_spec())
                if self.as_loaded:
                    spec = self.load_spec()
                    return steps.source_files_as_loaded(plan, spec, self.source, load_of(spec, plan, context),
                                                        queue=self.queue, host=context["ti"].hostname, table=self.table)
                return steps.source_files(plan, self.load_spec(), self.source, queue=self.queue,
                                          host=context["ti"].hostname)
        except Exception as exc:
            # Kept for the run's statistics, which say why no group started.
            keep_error(context, exc)
            raise


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
            with airflow_terms(context):
                result = self.step(context)
            # Kept for the run's Gantt chart: the stats task reads every step's span.
            if isinstance(result, dict):
                result.update(step_started=started, step_ended=now_iso(),
                              cpu={"task_start": round(cpu_start, 4),
                                   "step": round(time.process_time() - cpu_start, 4)})
            if self._done is not None:
                self._done["result"] = result
            return result
        except AirflowSkipException:
            raise
        except Exception as exc:
            # Kept for the run's statistics: a failed task pushes no return value.
            keep_error(context, exc)
            if self._done is not None and isinstance(exc.__cause__, ValidationFailed):
                self._done["result"] = exc.__cause__.result
            self.fail_if_permanent(exc)
            raise

    def step(self, context: Any) -> dict:
        raise NotImplementedError

    def stream_plan(self, context: Any):
        plan = context["ti"].xcom_pull(task_ids=PLAN_TASK)
        s = steps.stream_plan(plan, self.table, self.stream)
        steps.spec_as_planned(plan, self.load_spec())
        self._done = {"plan": plan, "stream": s}
        return plan, s


class PrepareOperator(_GroupOperator):
    """Fresh staging table on the stream's filegroup, with its partition's range CHECK.

    Checks that the stream file is there before anything is created, except for a stream on a
    source (`file_on_source`: the spec's `sources`), whose file only that source's workers
    see: its load checks it there."""

    lineage_step = "prepare"

    def __init__(self, *, file_on_source: str | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.file_on_source = file_on_source

    def step(self, context: Any) -> dict:
        plan, s = self.stream_plan(context)
        return steps.prepare(self.adapter, plan, s, self.file_on_source).xcom()


class LoadOperator(_GroupOperator):
    """Bulk-loads one stream file into its staging table, logging progress on long loads.

    Every `progress_every_seconds` (default SWITCHYARD_PROGRESS_SECONDS, 5 s) the log gets
    rows, MB, MB/s and percent of the file; rows come from the server where it reports them
    (PostgreSQL: pg_stat_progress_copy).
    """

    lineage_step = "load"

    def __init__(self, *, progress_every_seconds: float | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.progress_every_seconds = progress_every_seconds

    def step(self, context: Any) -> dict:
        # The load's fixed cost part by part, in its result (`parts`): the plan's pull first.
        clock = time.monotonic()
        plan, s = self.stream_plan(context)
        return steps.load(self.adapter, plan, s, queue=self.queue, host=context["ti"].hostname,
                          progress_every_seconds=self.progress_every_seconds,
                          plan_pull=time.monotonic() - clock).xcom()


class ValidateOperator(_GroupOperator):
    """The staging table checked before its switch: row count, key range, not null, the spec's
    unique columns and declared expectations (see validation.py). The return value lists every
    check with what it expected, observed and cost (`checks`, and `cost` per kind of check)."""

    lineage_step = "validate"

    def step(self, context: Any) -> dict:
        plan, s = self.stream_plan(context)
        # The load's result is one more API call, made only where validation uses it.
        return steps.validate(self.adapter, self.load_spec(), plan, s,
                              loaded_of=lambda: context["ti"].xcom_pull(task_ids=f"{s.group_id}.load")).xcom()


class SwitchOperator(_GroupOperator):
    """Switches the validated staging table in as the stream's partition.

    Where the target commits a table's switches together (PostgreSQL), the staging table joins
    the table's next version and the table's last switch moves the whole batch in, in one
    transaction; `in_target` in the result says whether the partition is in the table now."""

    lineage_step = "switch"

    def step(self, context: Any) -> dict:
        plan, s = self.stream_plan(context)
        spec = self.load_spec()
        # The group's validation, read before the switch touches the target: a validate task
        # marked success by hand left none (steps.require_validated).
        self.validated = context["ti"].xcom_pull(task_ids=f"{s.group_id}.validate")
        steps.require_validated(self.validated, s)
        return steps.switch(self.adapter, spec, plan, s, load_of(spec, plan, context)).xcom()

    def execute(self, context: Any) -> dict:
        result = super().execute(context)
        if isinstance(result, dict):
            # The group's earlier results, returned with the switch's (`earlier_steps`): the
            # run's last tasks then read one value per group instead of four. Airflow's API
            # answers one XCom per request, and the stats task's reads come one after another
            # at the run's end, while these are made beside the other groups' steps.
            group = self.task_id.rsplit(".", 1)[0]
            result[EARLIER_STEPS] = {step: context["ti"].xcom_pull(task_ids=f"{group}.{step}")
                                     for step in ("prepare", "load")}
            result[EARLIER_STEPS]["validate"] = self.validated
        return result


def load_of(spec: Any, plan: dict, context: Any) -> Callable[[str], dict | None]:
    """A group's load result, from its load task or its one task (`tasks: single`): asked only
    for a stream file written again since the run's plan (steps.stale_loads)."""
    ti = context["ti"]

    def pull(gid: str) -> dict | None:
        if spec.table(plan["groups"][gid]["table"]).tasks == "single":
            return (ti.xcom_pull(task_ids=f"{gid}.steps") or {}).get("load")
        return ti.xcom_pull(task_ids=f"{gid}.load")
    return pull


def own_load_first(pull: Callable[[str], dict | None], gid: str, done: dict[str, Any]
                   ) -> Callable[[str], dict | None]:
    """`pull`, but group `gid`'s load result from `done`, the steps this one task ran so far: a
    task's result is pushed when it ends, so its switch would find none of its own load's and
    could not tell its file written again since that load (steps.stale_loads)."""
    return lambda asked: done.get("load") if asked == gid else pull(asked)


def a_retry(try_number: int, max_tries: int, retries: int) -> bool:
    """Whether an attempt is Airflow's retry of a failed one, not a first try nor the first try
    after the task was cleared. Clearing a task sets its max_tries to its try_number + retries
    (airflow.models.taskinstance.clear_task_instances), so a series of tries starts at
    max_tries - retries + 1, as Airflow's task runner reckons it (get_first_reschedule_date)."""
    return try_number > max_tries - retries + 1


class GroupStepsOperator(_GroupOperator):
    """A group's four steps in one task: prepare, load, validate, switch, in that order, with
    the same checks and the same outcome as the four tasks (the spec's `tasks: single`).

    For tables whose loads take a second or two, where each task's start and end cost Airflow
    more than the step's work. The task holds a load pool slot from prepare to switch (the COPY
    still waits for a slot of the target's own), and it is the group's unit of retry: a retry
    runs the steps again from prepare, which replaces an earlier attempt's staging table, except
    where that attempt's switch put the group in and its table went in whole: the retry reports
    that and succeeds (steps.switched_by_an_earlier_attempt). The result holds each step's
    result under its name; a failed attempt pushes the steps it finished and the one that
    failed (`steps_done`), for the run's statistics."""

    lineage_step = "steps"

    def __init__(self, *, file_on_source: str | None = None, progress_every_seconds: float | None = None,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.file_on_source = file_on_source
        self.progress_every_seconds = progress_every_seconds

    def step(self, context: Any) -> dict:
        clock = time.monotonic()
        plan, s = self.stream_plan(context)
        plan_pull = time.monotonic() - clock
        ti = context["ti"]
        # A retry whose earlier attempt switched the group in and died before Airflow heard of
        # it: its table went in whole, so the steps cannot run again (prepare would refuse, as it
        # refuses a group cleared by hand after its table went in). Asked on a retry only.
        if a_retry(ti.try_number, ti.max_tries, self.retries or 0) and (
                earlier := steps.switched_by_an_earlier_attempt(self.adapter, plan, s)):
            return earlier
        done: dict[str, Any] = {}
        spec = self.load_spec()
        group = (("prepare", lambda: steps.prepare(self.adapter, plan, s, self.file_on_source)),
                 ("load", lambda: steps.load(self.adapter, plan, s, queue=self.queue, host=context["ti"].hostname,
                                             progress_every_seconds=self.progress_every_seconds,
                                             plan_pull=plan_pull)),
                 ("validate", lambda: steps.validate(self.adapter, spec, plan, s, loaded=done["load"])),
                 ("switch", lambda: steps.switch(self.adapter, spec, plan, s,
                                                 own_load_first(load_of(spec, plan, context), s.group_id, done))))
        for name, run in group:
            started, cpu = now_iso(), time.process_time()
            try:
                with airflow_terms(context):
                    result = run().xcom()
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

    lineage_step = "publish_batch"

    def execute(self, context: Any) -> dict:
        plan = context["ti"].xcom_pull(task_ids=PLAN_TASK)
        if not plan:
            raise AirflowFailException("the run's plan is missing (did setup.plan run?)")
        self._done = {"plan": plan}
        self.bind_run(context)
        try:
            with airflow_terms(context):
                steps.spec_as_planned(plan, self.load_spec())
                return steps.publish_batch(self.adapter, plan, load_of(self.load_spec(), plan, context)).xcom()
        except Exception as exc:
            keep_error(context, exc)
            self.fail_if_permanent(exc)
            raise


class PublishOperator(_TargetOperator):
    """Marks a table's new data as published: its Asset gets an event once all its partitions switched.

    Runs after every switch of its table (all_success), so the event means the whole batch of
    that table is in place; a table not loaded in this run (or with a failed group) gets none.
    """

    lineage_step = "publish"

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
            done = {gid: ti.xcom_pull(task_ids=f"{gid}.switch") for gid in self.groups}
            switched = [x for x in done.values() if x]
            loads = []
            for gid, x in done.items():
                # A switch's result carries its group's load result; a group that did not
                # switch is asked for its own.
                earlier = (x or {}).get(EARLIER_STEPS)
                loads.append((earlier["load"] if earlier is not None else ti.xcom_pull(task_ids=f"{gid}.load")) or {})
        if not switched:
            # In batch mode the batch's publish task is upstream too, and it succeeds for the
            # tables the run left out: that success alone is no update of this table.
            raise AirflowSkipException(f"no stream of {self.table} was switched in this run")
        extra = {"batch": plan.get("batch"), "schema": plan.get("schema"), "table": self.table,
                 "partitions": len(switched), "rows": sum(int(x.get("rows") or 0) for x in loads),
                 "bytes": sum(int(x.get("bytes") or 0) for x in loads)}
        for outlet in self.outlets:
            context["outlet_events"][outlet].extra = extra
        # The batch's own share: in append mode the table holds earlier batches' partitions too.
        partitioned = (plan.get("groups") or {}).get(f"{self.table}_1", {}).get("partitioned", True)
        log.info("%s.%s published: batch %s, %s rows%s", extra["schema"], self.table, extra["batch"],
                 f"{extra['rows']:,}", f" in {extra['partitions']} partition{'s' if extra['partitions'] != 1 else ''}"
                 if partitioned else " (the table, replaced whole)")
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
        from switchyard.observability.stats import assemble, task_states, write_stats
        ti = context["ti"]
        states = task_states(context)
        if states.get(WAIT_TASK) == "skipped":
            # A scheduled run before SWITCHYARD_START_DATE: nothing was planned, leased or loaded.
            raise AirflowSkipException(f"{WAIT_TASK} skipped this run (its log says why): nothing was loaded")
        plan = ti.xcom_pull(task_ids=PLAN_TASK) or {}
        self.bind_run(context)
        try:
            self.adapter().release_lease()
        except Exception as exc:  # noqa: BLE001 - the lease then lapses after its TTL
            log.warning("could not release the run lease (it lapses by itself): %s", exc)

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
                **(self._single_task(gid, pull, states) if table in self.single_tables
                   else self._per_step(gid, pull, states)),
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
        # A group run again on its own after its table went in (refused at its prepare): the
        # target holds the run's batch of those tables all the same.
        something_failed = adapter is not None and any(state == "failed" for state in states.values())
        in_already = ({t for t in plan.get("tables") or [] if published_since_plan(adapter, plan, t)}
                      if something_failed else set())
        stats = assemble(plan, results, context, server=server, published=published, in_already=in_already)
        if batch:
            # How long the publish held the batch's tables locked (readers waited at most that).
            stats["publish_batch"] = {k: batch.get(k) for k in ("tables", "lock_seconds", "seconds", "published",
                                                                 "already_published", "attach_scan_skipped")}
        if plan and self.load_spec().publish == "batch" and (error := pull("publish_batch", key="error")):
            stats["publish_error"] = error
        # A source's files not as their loads read them (files_on_<source>_as_loaded): the publish
        # did not run, and this says why.
        stale = [pull(t, key="error") for t, state in states.items() if t.endswith(AS_LOADED) and state == "failed"]
        if any(stale):
            stats["publish_error"] = "; ".join(e for e in (stats.get("publish_error"), *stale) if e)
        # A source's files refused on its workers (setup.files_on_<source>): no group started.
        refused = {t: pull(t, key="error") for t, state in states.items()
                   if t.startswith(SOURCE_FILES_TASKS) and state == "failed"}
        if refused:
            stats["source_errors"] = refused
        if not plan and (error := pull(PLAN_TASK, key="error") or pull(WAIT_TASK, key="error")):
            # Why nothing was loaded: setup's own message (a refused batch, a pre-flight).
            stats["plan_error"] = error
        if not plan:
            # The batch the run was asked to load; none where its conf was refused (a misspelt
            # `batch` leaves the batch of the run's date, which nobody asked for).
            refused_conf = steps.unknown_conf(getattr(context.get("dag_run"), "conf", None),
                                              context["dag"].params.keys())
            stats["batch"] = None if refused_conf else self._lease.get("lease_batch")
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
        if not plan:
            # No plan, no groups of the batch to name: the DAG's groups it would not have had either.
            raise AirflowFailException("setup.plan did not finish: nothing was loaded and every table is as it was"
                                       + (f" ({stats['plan_error']})" if stats.get("plan_error") else "")
                                       + f" (statistics: {path}, report: {report['html']})")
        if refused:
            from switchyard.observability.report.model import sources_refused
            raise AirflowFailException(
                "the batch's files on its sources were refused before any load: nothing was loaded and every "
                f"table is as it was; {sources_refused(refused)} (statistics: {path}, report: {report['html']})")
        if stats["failed_groups"] or stats.get("held_back_groups"):
            # The last task decides the run's state: a run with a failed group is a failed run.
            failed, held = stats["failed_groups"], stats.get("held_back_groups", [])
            kept = stats.get("tables_kept") or []
            batch_mode = self.load_spec().publish == "batch"
            # Held back: validated and staged, kept out with the rest of the batch (or table).
            raise AirflowFailException(
                "; ".join(part for part in (
                    f"{len(failed)} of {stats['totals']['groups']} groups did not switch: {', '.join(failed)}"
                    if failed else "",
                    f"{len(held)} held back, validated and staged but kept out with them: {', '.join(held)}"
                    if held else "") if part)
                + (f"; {', '.join(kept)} kept {'its' if len(kept) == 1 else 'their'} previous contents, "
                   f"whole (clear the failed groups to rerun them; "
                   + ("the batch goes in, every table together, when all its groups have switched)"
                      if batch_mode else "the table goes in when all its groups have switched)")
                   if kept else "")
                + (f"; this run's batch of {', '.join(sorted(in_already))} is in the target, whole, from its earlier tasks "
                   f"(clear the whole run to load the batch again)" if in_already else "")
                # publish: table: a table's files on a source refused before its switches (why they did not run).
                + (f"; {stats['publish_error']}" if stats.get("publish_error") and not batch_mode else "")
                + f" (statistics: {path}, report: {report['html']})")
        if stats.get("publish_error"):
            raise AirflowFailException(f"the batch was not published: {stats['publish_error']} "
                                       f"(statistics: {path}, report: {report['html']})")
        return {"path": str(path), "report": str(report["html"]), "totals": stats["totals"],
                "failed_groups": stats["failed_groups"]}

    @staticmethod
    def _per_step(gid: str, pull: Any, states: dict[str, str]) -> dict:
        """A group run as four tasks: each step's result, error and state. A group whose four
        steps succeeded is read from its switch's result alone, which carries the others'."""
        from switchyard.observability.stats import STEPS
        step_states = {step: states.get(f"{gid}.{step}") for step in STEPS}
        switch = dict(pull(f"{gid}.switch") or {})
        earlier = switch.pop(EARLIER_STEPS, None)
        if earlier is not None and all(state == "success" for state in step_states.values()):
            return {**earlier, "switch": switch, "errors": {}, "states": step_states}
        return {"prepare": pull(f"{gid}.prepare"),
                "load": pull(f"{gid}.load"),
                "validate": pull(f"{gid}.validate") or pull(f"{gid}.validate", key="failure"),
                "switch": switch or None,
                "errors": {step: err for step in STEPS if (err := pull(f"{gid}.{step}", key="error"))},
                "states": step_states}

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
