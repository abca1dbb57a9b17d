"""Renders a load spec into an Airflow DAG: setup, one task group per (table, stream), stats.

The rendering is separate from the operators that run: this module only decides the
graph (which groups, which pool, which priorities); it imports nothing heavy, because
every task process imports the DAG file again.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Asset, Param, TaskGroup

from switchyard.airflow.operators import (GroupStepsOperator, LoadOperator, PlanBatchOperator, PrepareOperator,
                                          PublishBatchOperator, PublishOperator, SourceFilesOperator, StatsOperator,
                                          SwitchOperator, ValidateOperator, WaitForBatchSensor)
from switchyard import settings
from switchyard.core.spec import LoadSpec, load_spec
from switchyard.graph import Graph, GraphSettings, build_graph

DOC = """
### Switchyard: parallel, validated, partition-switched loads

The record-load method as a DAG: the batch is split into **streams** (one file per table
per stream, each one contiguous key range); every **(table, stream)** task group loads its
file into its own staging table and switches it in as one partition of the big table:

1. **prepare**: a fresh staging table on the stream's filegroup / tablespace, with a
   CHECK constraint equal to its partition's key range;
2. **load**: bulk load of the file into the staging table (PostgreSQL `COPY ... FREEZE`;
   SQL Server `BULK INSERT ... TABLOCK` or TDS bulk copy), in the pool `{pool}` whose
   size is the target's scheduler count: one load per core. Long loads log their progress
   (rows, MB, MB/s, percent of the file) every few seconds. {routing}
3. **validate**: Great Expectations on the staging table: row count equals the manifest,
   key not null, key range inside the partition. A failure stops the group here and its
   table keeps its previous data, whole;
4. **switch**: the validated staging table joins its table's next version (PostgreSQL:
   `ATTACH PARTITION` to it). **publish_batch** then moves every table of the batch in, in
   one transaction (the spec's `publish: batch`, the default; each table's `mode`: **replace**
   the table, or **append** the batch's own partitions with retention): readers see the
   previous batch or this one, across tables, never a mix. A failed group leaves every table
   as it was. With `publish: table`, each table's last switch moves that table in on its own.

A table whose spec says `tasks: single` runs each group's four steps, in this order, in one
task, **steps** (for small tables, whose loads are shorter than a task's start).

`setup` waits for the batch's `manifest.json`, plans the partitions and creates what is
missing. **publish** updates one Asset per table, `switchyard://<connection>/<schema>/<table>`,
once all of that table's partitions are switched in: schedule downstream DAGs on it.
**stats** runs whatever happened upstream: it writes `stats.json` and the run report
(its **Run report** button; per-stream throughput, stragglers, charts, validation) and one
row per load into the target's `switchyard.load_stats` table.

**Params** (trigger form):

| param | meaning |
|---|---|
| *Batch* | folder of the batch under the data root; empty: the run's logical date, `YYYY-MM-DD` (`SWITCHYARD_BATCH_FORMAT`) |
| *Tables* | the tables to load; the other groups are skipped |
| *Put back replace tables* | load into replace tables that hold a newer batch (off: refused before any load) |
| *Target connection* | Airflow connection of the target (PostgreSQL or SQL Server) |

This DAG has task groups for up to **{streams} streams** per table (`SWITCHYARD_STREAMS`); a
batch brings each table in as many streams as its manifest lists, and unused groups skip.
`setup.plan` checks the batch against the target before any load (pre-flight).
"""


def _default(name: str):
    return next(s.default for s in settings.SETTINGS if s.field == name)


@dataclass(frozen=True)
class DagConfig:
    """The DAG's shape and its steps' common options; defaults are the settings' (settings.py)."""

    dag_id: str = _default("dag_id")
    spec: str = _default("spec")
    streams: int = _default("streams")
    conn_id: str = _default("conn_id")
    schema: str = _default("schema")
    pool: str = _default("pool")
    # The prepares' own pool (None: the default pool); see the prepare task below.
    prepare_pool: str | None = _default("prepare_pool")
    schedule: str | None = _default("schedule")
    # The schedule's time zone (an IANA name): its cron is read there.
    timezone: str = _default("timezone")
    start_date: datetime | None = _default("start_date")
    catchup: bool = _default("catchup")
    batch_wait_seconds: int = _default("batch_wait_seconds")
    batch_poke_seconds: float = _default("batch_poke_seconds")
    max_active_tasks: int = _default("max_active_tasks")
    # The loads' priority order: see planner.load_priorities.
    load_order: str = _default("load_order")
    # The executor of the loads (None: the default executor); see graph.routing.
    load_executor: str | None = _default("load_executor")
    lock_timeout_seconds: int = 60
    lease_retries: int = _default("lease_retries")
    lease_retry_seconds: float = _default("lease_retry_seconds")
    tags: tuple[str, ...] = field(default=("switchyard",))
    # The DAG's own settings file (dag_from_settings_file), which its tasks read again for the
    # settings they use as they run (the batch's name); None: the one the environment names.
    settings_file: str | None = None

    @classmethod
    def from_env(cls, **overrides) -> "DagConfig":
        """From the settings in effect (the DAG's settings file, else the SWITCHYARD_* environment),
        with `overrides`."""
        return cls.from_settings(settings.get(), **overrides)

    @classmethod
    def from_settings(cls, current: settings.Settings, **overrides) -> "DagConfig":
        """From `current`, with `overrides`. An environment variable that contradicts the settings
        file stops here: the DAG would otherwise differ from the one the other Airflow processes
        build from the file."""
        if current.conflicts:
            raise settings.SettingsError(
                f"this environment contradicts the DAG's settings file {current.settings_file}: "
                f"{'; '.join(current.conflicts)}. Every Airflow process builds the DAG from that file: unset "
                f"the variable here, or change the file (and let the dag-processor parse it again)")
        values = {name: getattr(current, name) for name in (
            "dag_id", "spec", "streams", "conn_id", "schema", "pool", "prepare_pool", "batch_wait_seconds", "batch_poke_seconds",
            "max_active_tasks", "schedule", "timezone", "start_date", "catchup", "lease_retries", "lease_retry_seconds", "load_executor",
            "load_order")}
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class StepOperators:
    """The operator class of each node of the graph. The rendering does not depend on them:
    the benchmark renders the same graph with steps that do nothing, to measure what the
    graph alone costs Airflow (switchyard_dev/bench/graph.py)."""
    wait: type = WaitForBatchSensor
    plan: type = PlanBatchOperator
    # The batch's files on a source's workers, checked there (the spec's `sources`).
    source_files: type = SourceFilesOperator
    prepare: type = PrepareOperator
    load: type = LoadOperator
    validate: type = ValidateOperator
    switch: type = SwitchOperator
    # A group's four steps in one task, for the tables whose spec says `tasks: single`.
    steps: type = GroupStepsOperator
    # Every table of the batch in, in one transaction (the spec's `publish: batch`).
    publish_batch: type = PublishBatchOperator
    publish: type = PublishOperator
    stats: type = StatsOperator


def _params(spec: LoadSpec, config: DagConfig) -> dict[str, Param]:
    return {
        # "null" in the type: the trigger form marks a param required unless it may be empty,
        # and an empty batch is meaningful (the run's date).
        "batch": Param(
            "", type=["string", "null"], title="Batch",
            description="Folder of the batch under the data root (e.g. 2026-11-21 or tpch/sf1). "
                        "Empty: the run's logical date as YYYY-MM-DD (SWITCHYARD_BATCH_FORMAT).",
            pattern=r"^$|^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)*$",
            section="What to load"),
        "tables": Param(
            list(spec.table_names), type="array", title="Tables",
            description="Tables to load; the others' task groups are skipped.",
            items={"type": "string", "enum": list(spec.table_names)}, examples=list(spec.table_names),
            minItems=1, uniqueItems=True, section="What to load"),
        # A backfill or rerun of an older date would put a replace table back behind the newer
        # batch it holds; the pre-flight refuses that unless the run asks for it.
        "replace_newer": Param(
            False, type="boolean", title="Put back replace tables",
            description="Load this batch into replace tables that hold a newer batch, putting them back to "
                        "this one (off: such a run is refused before any load).",
            section="What to load"),
        "conn_id": Param(
            config.conn_id, type="string", title="Target connection",
            description="Airflow connection id of the target (PostgreSQL or SQL Server).",
            pattern=r"^[A-Za-z0-9_.-]+$", section="Where to load"),
    }


def build_dag(config: DagConfig | None = None, operators: StepOperators = StepOperators()) -> DAG:
    """The DAG of `config` (default: the settings in effect): its graph (switchyard/graph.py)
    rendered with `operators`."""
    config = config or DagConfig.from_env()
    spec = load_spec(config.spec)
    graph = build_graph(spec, GraphSettings(
        streams=config.streams, pool=config.pool, prepare_pool=config.prepare_pool,
        load_executor=config.load_executor, load_order=config.load_order, conn_id=config.conn_id,
        schema=config.schema, batch_wait_seconds=config.batch_wait_seconds,
        batch_poke_seconds=config.batch_poke_seconds, lease_retries=config.lease_retries,
        lease_retry_seconds=config.lease_retry_seconds,
        start_date=config.start_date.isoformat() if config.start_date else None,
        settings_file=config.settings_file))
    with DAG(
        dag_id=config.dag_id,
        schedule=_schedule(config),
        # No start date for Airflow unless catchup counts from it: Airflow gives every task the
        # DAG's, and a run dated before a task's start date (a manual trigger, whose form proposes
        # now, or `dags test <date>`) gets no instance of that task: with none, the run ended
        # `success` having loaded nothing. SWITCHYARD_START_DATE goes to the schedule instead
        # (schedule.CronFromStartDate: no scheduled run dated before it), and the setup's wait
        # holds off a scheduled run dated before it all the same (WaitForBatchSensor.not_before).
        start_date=config.start_date if config.catchup else None,
        catchup=config.catchup,
        # Two runs of one DAG interleaving their switches could leave a partition from each;
        # runs (manual, nightly, backfill) go one at a time.
        max_active_runs=1,
        max_active_tasks=config.max_active_tasks,
        doc_md=DOC.format(pool=config.pool, streams=config.streams, routing=_routing_doc(spec, config)),
        tags=list(config.tags),
        default_args={"retries": 1, "retry_delay": timedelta(seconds=10)},
    ) as dag:
        common = {"spec": config.spec, "schema": config.schema, "lock_timeout_seconds": config.lock_timeout_seconds}
        if config.settings_file:
            common["settings_file"] = config.settings_file
        render(graph, operators, common=common)
    # The params go on once the tasks are made. Airflow gives every operator made in a DAG a deep
    # copy of the DAG's params and serializes each copy with its task: at 96 streams, serializing
    # the DAG (which the dag-processor does at every parse) took 5.4 CPU s with the copies and
    # 0.3 without, and they were 3.3 of its 4.6 MB. No task here declares params of its own, and
    # a task's template context merges the DAG's params with the run's conf whatever the task
    # holds; the trigger form reads the DAG's. Setting them runs Airflow's own check of them.
    dag.params = _params(spec, config)
    return dag


def _schedule(config: DagConfig) -> Any:
    """The DAG's schedule: the cron expression in the schedule's time zone, from the start date
    where one is set and catchup is off (with catchup on, the DAG's start date bounds the
    scheduler's runs already)."""
    if config.schedule is None:
        return None
    if config.start_date is None or config.catchup:
        from airflow.timetables.trigger import CronTriggerTimetable
        # What Airflow makes of a cron string, in the time zone asked for instead of its default's.
        return CronTriggerTimetable(config.schedule, timezone=config.timezone)
    from switchyard.airflow.schedule import CronFromStartDate
    return CronFromStartDate(config.schedule, timezone=config.timezone, start=config.start_date)


def render(graph: Graph, operators: StepOperators, common: dict[str, Any]) -> None:
    """The one place a node of the graph becomes an Airflow operator, in the DAG being made: each
    in its task group (made at its first node), then each after its upstream tasks or groups."""
    groups: dict[str, TaskGroup] = {}
    made: dict[str, Any] = {}
    for node in graph.nodes:
        if node.group and node.group not in groups:
            groups[node.group] = TaskGroup(node.group, tooltip=graph.groups[node.group])
        options = dict(node.options)
        if "retry_delay_seconds" in options:
            options["retry_delay"] = timedelta(seconds=options.pop("retry_delay_seconds"))
        if "asset" in options:
            options["outlets"] = [table_asset(*options.pop("asset"))]
        made[node.id] = getattr(operators, node.kind)(
            task_id=node.task_id, task_group=groups.get(node.group), **options, **(common if node.common else {}))
    for node in graph.nodes:
        for up in node.upstream:
            (groups[up] if up in groups else made[up]) >> made[node.id]


def _routing_doc(spec: LoadSpec, config: DagConfig) -> str:
    where = "; ".join(f"streams {', '.join(map(str, ks))} on queue `{name}`" for name, ks in spec.sources.items())
    if config.load_executor:
        return (f"Loads run on the `{config.load_executor}` workers" + (f" ({where})" if where else "")
                + ", each reading its file under its own data root; the other steps run here;")
    return f"Loads are routed by source ({where});" if where else "Loads run beside the other steps;"


# The DAG built from the environment, by configuration: see dag_from_env.
_BUILT: dict[DagConfig, DAG] = {}


def dag_from_env() -> DAG:
    """The DAG file's DAG, built once per process and configuration.

    Every Airflow task process imports the DAG file to find its task, which builds all the
    run's operators (about 0.1 s per task at 8 streams, most of a small task's work). The
    scheduler builds it once before LocalExecutor forks its workers (switchyard/preload.py),
    so a task process forked from it finds the DAG built. The configuration (the
    environment) is the key; a changed spec file or changed code is handled by the preload,
    which forgets what it built when Switchyard's files change on disk.
    """
    config = DagConfig.from_env()
    dag = _BUILT.get(config)
    if dag is None:
        dag = _BUILT[config] = build_dag(config)
    return dag


# The settings every DAG of its own names (dag_from_settings_file): without them it would take
# the built-in DAG's id, spec and schema.
OWN_DAG_SETTINGS = ("SWITCHYARD_DAG_ID", "SWITCHYARD_SPEC", "SWITCHYARD_SCHEMA")


def dag_from_settings_file(path: str | Path) -> DAG:
    """The DAG its own settings file describes: one DAG file per extract in one Airflow, e.g.

        dag = dag_from_settings_file(Path(__file__).with_name("payroll.env"))

    `path` is absolute (each Airflow process has its own working folder) and names at least the
    DAG's id, spec and schema. Its tasks read the same file again for what they use as they run
    (the batch a run names by its date: SWITCHYARD_BATCH_FORMAT, _TIMEZONE, _SCHEDULE). Built once
    per process and version of the file, like dag_from_env's."""
    from switchyard.airflow.preload import forget_changed_code
    if forget_changed_code():
        # A task process forked from a scheduler that preloaded Switchyard before its files changed:
        # the DAG built by the modules as they are on disk now (the built-in DAG file does the same).
        from importlib import import_module
        return import_module("switchyard.airflow.dag_factory").dag_from_settings_file(path)
    path = Path(path)
    if not path.is_absolute():
        raise settings.SettingsError(
            f"{path}: give the DAG's settings file as an absolute path (e.g. Path(__file__).with_name("
            f"{path.name!r})): each Airflow process reads a relative one from its own working folder")
    current = settings.get(path)
    missing = [v for v in OWN_DAG_SETTINGS if v not in settings.read_settings_file(path)]
    if missing:
        raise settings.SettingsError(
            f"{path}: a DAG's own settings file names {', '.join(OWN_DAG_SETTINGS)}; it lacks {', '.join(missing)} "
            f"(the defaults are the built-in DAG's, whose id, spec or schema this DAG would share)")
    config = DagConfig.from_settings(current, settings_file=str(path))
    dag = _BUILT.get(config)
    if dag is None:
        dag = _BUILT[config] = build_dag(config)
    return dag


def table_asset(conn_id: str, schema: str, table: str) -> Asset:
    """The Asset of a target table, e.g. switchyard://switchyard_target/tpch/orders: schedule on it."""
    return Asset(f"switchyard://{conn_id}/{schema}/{table}", group="switchyard")
