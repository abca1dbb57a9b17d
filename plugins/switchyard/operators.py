"""Airflow operators: thin wrappers that run one step of one (table, stream) on a target.

All the work is in the target adapters, the planner and the validation module; an
operator resolves its inputs (the run's plan from the setup task, the connection by
Airflow connection id), calls one step, and returns a small result for XCom. Nothing
heavy is imported at module level: every task process imports this module.
"""
from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from .batch import MANIFEST, BatchError, resolve_batch, resolve_file

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
        from .spec import load_spec
        return load_spec(self.spec)

    def adapter(self):
        from .targets import adapter_for
        return adapter_for(self.conn_id, self.load_spec(), schema=self.schema,
                           lock_timeout_seconds=self.lock_timeout_seconds)


class WaitForBatchSensor(BaseOperator):
    """Waits for the batch's manifest: a nightly run whose files are late waits, then fails clearly.

    The producer writes `manifest.json` last, so its presence means the batch is complete.
    The wait is deferred to the triggerer (no worker slot is held) and bounded by `timeout`.
    """

    template_fields: Sequence[str] = ("batch",)

    def __init__(self, *, batch: str = "{{ params.batch }}", wait_seconds: int = 6 * 3600,
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
        from .triggers import BatchReadyTrigger
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

    def __init__(self, *, streams: int, batch: str = "{{ params.batch }}",
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
        from .batch import read_manifest
        from .planner import PlanError, plan_batch
        spec = self.load_spec()
        tables = self._tables(spec)
        name = batch_name(self.batch, context)
        try:
            folder = resolve_batch(name)
            manifest = read_manifest(folder, spec)
            if manifest.streams != self.streams:
                raise BatchError(f"{manifest.path}: the batch has {manifest.streams} streams but this DAG is "
                                 f"built for {self.streams} (set SWITCHYARD_STREAMS={manifest.streams})")
            plan = plan_batch(spec, manifest, tables)
        except (BatchError, PlanError) as exc:
            raise AirflowFailException(str(exc)) from exc
        adapter = self.adapter()
        adapter.setup(plan)
        out = plan.to_dict()
        out.update(batch=name, batch_dir=str(folder), tables=tables, target=adapter.engine,
                   schema=adapter.schema, staging_schema=adapter.staging_schema)
        return out


class _GroupOperator(_TargetOperator):
    """A step of one (table, stream) group; reads its part of the run's plan."""

    def __init__(self, *, table: str, stream: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.table = table
        self.stream = stream

    def execute(self, context: Any) -> dict:
        try:
            return self.step(context)
        except AirflowSkipException:
            raise
        except Exception as exc:
            # Kept for the run's statistics: a failed task pushes no return value.
            context["ti"].xcom_push(key="error", value=f"{type(exc).__name__}: {exc}"[:4000])
            raise

    def step(self, context: Any) -> dict:
        raise NotImplementedError

    def run_plan(self, context: Any) -> dict:
        plan = context["ti"].xcom_pull(task_ids=PLAN_TASK)
        if not plan:
            raise AirflowFailException("the run's plan is missing (did setup.plan run?)")
        return plan

    def stream_plan(self, context: Any):
        from .planner import StreamPlan, group_id
        plan = self.run_plan(context)
        raw = plan["groups"].get(group_id(self.table, self.stream))
        if raw is None:
            raise AirflowSkipException(f"{self.table} is not among this run's tables")
        s = StreamPlan(**raw)
        if s.empty:
            raise AirflowSkipException(f"{self.table} stream {self.stream} is empty in this batch")
        return plan, s


class PrepareOperator(_GroupOperator):
    """Fresh staging table on the stream's filegroup, with its partition's range CHECK."""

    def step(self, context: Any) -> dict:
        plan, s = self.stream_plan(context)
        path = resolve_file(Path(plan["batch_dir"]), s.file)
        if not path.is_file():
            raise AirflowFailException(f"{path}: stream file not found [table {s.table}, stream {s.stream}]")
        adapter = self.adapter()
        started = time.monotonic()
        adapter.prepare(s)
        return {"staging_table": f"{plan['staging_schema']}.{s.staging_table}", "file": str(path),
                "seconds": round(time.monotonic() - started, 4)}


class LoadOperator(_GroupOperator):
    """Bulk-loads one stream file into its staging table, logging progress on long loads."""

    progress_every_seconds = 5.0

    def step(self, context: Any) -> dict:
        from .targets import TargetError
        plan, s = self.stream_plan(context)
        path = resolve_file(Path(plan["batch_dir"]), s.file)
        last = [time.monotonic()]
        begun = last[0]

        def progress(sent: int, total: int) -> None:
            now = time.monotonic()
            if now - last[0] >= self.progress_every_seconds:
                last[0] = now
                mb = sent / 1e6
                log.info("%s: %.1f MB of %.1f MB (%.0f%%), %.1f MB/s", s.group_id, mb, total / 1e6,
                         100.0 * sent / max(total, 1), mb / max(now - begun, 1e-9))

        started = now_iso()
        try:
            result = self.adapter().load(s, path, progress)
        except TargetError as exc:
            if exc.permanent:  # bad data: a retry would fail the same way
                raise AirflowFailException(str(exc)) from exc
            raise
        log.info("%s: %d rows, %.1f MB in %.2f s (%.1f MB/s, %.0f rows/s)", s.group_id, result.rows,
                 result.bytes / 1e6, result.seconds, result.bytes / 1e6 / max(result.seconds, 1e-9),
                 result.rows / max(result.seconds, 1e-9))
        return {"rows": result.rows, "bytes": result.bytes, "seconds": round(result.seconds, 4),
                "started": started, "ended": now_iso(), "file": str(path), **result.details}


class ValidateOperator(_GroupOperator):
    """Great Expectations on the staging table: row count, key not null, key range."""

    def step(self, context: Any) -> dict:
        from .validation import describe_failures, validate_table
        plan, s = self.stream_plan(context)
        adapter = self.adapter()
        loaded = context["ti"].xcom_pull(task_ids=f"{s.group_id}.load") or {}
        expected_rows = s.rows if s.rows is not None else loaded.get("rows")
        outcome = validate_table(adapter.sqlalchemy_url(), adapter.staging_schema, s.staging_table,
                                 self.load_spec().table(s.table).key, expected_rows,
                                 s.key_min, s.key_max, engine=adapter.engine)
        result = outcome.to_dict()
        log.info("%s: validation %s in %.2f s (GX import %.2f s)", s.group_id,
                 "passed" if outcome.success else "FAILED", outcome.seconds, outcome.import_seconds)
        if not outcome.success:
            where = (f"table {s.table}, stream {s.stream}, file {plan['batch_dir']}/{s.file}, "
                     f"staging table {plan['staging_schema']}.{s.staging_table} (kept; nothing switched)")
            context["ti"].xcom_push(key="failure", value=result)
            raise AirflowFailException(describe_failures(outcome, where))
        return result


class SwitchOperator(_GroupOperator):
    """Switches the validated staging table in as the stream's partition, atomically."""

    def step(self, context: Any) -> dict:
        plan, s = self.stream_plan(context)
        # A TargetError here (a lock wait that timed out, a server restart) is retried.
        adapter = self.adapter()
        started = time.monotonic()
        result = adapter.switch(s)
        result["seconds"] = round(time.monotonic() - started, 4)
        result["switched"] = now_iso()
        log.info("%s: switched in as %s%s", s.group_id, result.get("partition") or f"{plan['schema']}.{s.table}",
                 " (replacing the previous one)" if result.get("replaced") else "")
        return result


class StatsOperator(_TargetOperator):
    """Assembles the run's statistics from every group, whatever happened upstream."""

    def __init__(self, *, groups: list[tuple[str, int]], **kwargs: Any):
        super().__init__(**kwargs)
        self.groups = groups

    def execute(self, context: Any) -> dict:
        from .stats import assemble, task_states, write_stats
        ti = context["ti"]
        plan = ti.xcom_pull(task_ids=PLAN_TASK) or {}
        states = task_states(context)
        results = {}
        for table, stream in self.groups:
            gid = f"{table}_{stream}"
            results[gid] = {
                "table": table, "stream": stream,
                "load": ti.xcom_pull(task_ids=f"{gid}.load"),
                "validate": ti.xcom_pull(task_ids=f"{gid}.validate")
                or ti.xcom_pull(task_ids=f"{gid}.validate", key="failure"),
                "switch": ti.xcom_pull(task_ids=f"{gid}.switch"),
                "errors": {step: err for step in ("prepare", "load", "validate", "switch")
                           if (err := ti.xcom_pull(task_ids=f"{gid}.{step}", key="error"))},
                "states": {step: states.get(f"{gid}.{step}") for step in ("prepare", "load", "validate", "switch")},
            }
        stats = assemble(plan, results, context)
        path = write_stats(stats, context)
        log.info("run statistics: %s", path)
        for line in stats["summary_lines"]:
            log.info(line)
        ti.xcom_push(key="stats_path", value=str(path))
        if stats["failed_groups"]:
            # The last task decides the run's state: a run with a failed group is a failed run.
            raise AirflowFailException(f"{len(stats['failed_groups'])} of {stats['totals']['groups']} groups "
                                       f"did not switch: {', '.join(stats['failed_groups'])} (statistics: {path})")
        return {"path": str(path), "totals": stats["totals"], "failed_groups": stats["failed_groups"]}
