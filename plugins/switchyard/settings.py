"""Switchyard's settings: every SWITCHYARD_* variable the product reads, in one place.

Each setting is declared once below (variable, type, default, what it does); `get()` reads
the environment into a typed, frozen `Settings`, once per distinct environment (a test or a
tool that changes a variable gets the new value, nobody parses twice). The configuration
reference, docs/configuration.md, is generated from these declarations
(`switchyard config --markdown`), and a unit test fails when the two differ.

Other installed packages add their own declarations (documentation only: they read them
themselves) through the `switchyard.settings` entry-point group: an entry point names a
sequence of `Setting`s whose `section` says where they go in the reference.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, Mapping

# plugins/switchyard/settings.py -> the project folder.
PROJECT = Path(__file__).resolve().parents[2]
SETTINGS_GROUP = "switchyard.settings"

_OFF = ("0", "false", "no", "off")
_NONE = ("", "none", "off", "manual")


def _bool(text: str) -> bool:
    return text.strip().lower() not in _OFF


def _schedule(text: str) -> str | None:
    """A cron expression, or none/off/manual (or empty) for manual runs only."""
    return None if text.strip().lower() in _NONE else text.strip()


def _timezone(text: str) -> str:
    """An IANA time zone name (`Europe/Berlin`), or UTC."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    name = text.strip() or "UTC"
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not a time zone name of the IANA database (e.g. Europe/Berlin, UTC)") from None
    return name


def _batch_format(text: str) -> str:
    """A strftime pattern that names a batch folder: at least one directive, and only what a
    relative path of plain segments holds (letters, digits, `_ - . /`), no `..`."""
    import re
    pattern = text.strip()
    if "%" not in pattern or not re.fullmatch(r"[A-Za-z0-9%_./-]+", pattern) or ".." in pattern \
            or pattern.startswith("/"):
        raise ValueError(f"{pattern!r} is not a strftime pattern of a relative folder name (e.g. %Y-%m-%dT%H%M)")
    return pattern


def _optional(text: str) -> str | None:
    """A name, or none/off (or empty) for none."""
    return None if text.strip().lower() in ("", "none", "off") else text.strip()


def _path(text: str) -> Path:
    return Path(text).expanduser().resolve()


def _start_date(text: str) -> datetime | None:
    """An ISO date or date and time (UTC unless it names its offset), or none."""
    if text.strip().lower() in ("", "none", "off"):
        return None
    value = datetime.fromisoformat(text.strip())
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"{value} is not a positive whole number")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise ValueError("must be 0 or more")
    return value


def _at_least_one(text: str) -> float:
    value = float(text)
    if not value >= 1:
        raise ValueError(f"{text.strip()} is less than 1")
    return value


# The loads' priority orders (core/planner.py, load_priorities).
LOAD_ORDERS = ("interleaved", "biggest-first")


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in allowed:
            raise ValueError(f"{text!r} is none of {', '.join(allowed)}")
        return value
    parse.__doc__ = " | ".join(allowed)
    return parse


@dataclass(frozen=True)
class Setting:
    """One environment variable: how it is parsed, its default and what it does."""

    variable: str
    field: str
    parse: Callable[[str], Any]
    default: Any
    doc: str
    section: str
    type_name: str = ""
    # The default as the reference shows it, where it is derived (e.g. from another setting).
    default_text: str | None = None

    def shown_default(self) -> str:
        return self.default_text if self.default_text is not None else f"`{render(self.default)}`"


def render(value: Any) -> str:
    """A value as it would be written in the environment."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


WHERE = "Where files are"
DAG = "The DAG"
STEPS = "The steps"
SCHEDULER = "The scheduler"

# Derived defaults: None here, computed in `_read` from the settings they depend on.
SETTINGS: tuple[Setting, ...] = (
    Setting("SWITCHYARD_STATE_DIR", "state_dir", _path, None,
            "Local state: the embedded server, the local Airflow, batches and runs (unless set apart below).",
            WHERE, "path", "`.switchyard/` in the project"),
    Setting("SWITCHYARD_DATA_ROOT", "data_root", _path, None,
            "Where batches live: one folder per batch, with its `manifest.json`. A batch name never "
            "leaves this folder. Each process reads its own: on a remote worker, the worker's root, "
            "holding its source's stream files (`<root>/<batch>/...`); the load resolves its file there "
            "([deployment](deployment.md)).", WHERE, "path", "`<state dir>/data`"),
    Setting("SWITCHYARD_RUNS_DIR", "runs_dir", _path, None,
            "Each run's `stats.json` and report, in `<dag id>/<run>/`; the api-server serves the reports "
            "from here.", WHERE, "path", "`<state dir>/runs`"),
    Setting("SWITCHYARD_SETTINGS_FILE", "settings_file", _path, None,
            "The DAG's settings file: `VARIABLE=value` lines of the settings under \"The DAG\" below. "
            "Where it exists, every process reads those settings from it (the scheduler, the dag-processor, "
            "`airflow dags test` from any shell, `switchyard`), so the DAG does not depend on who parses it; "
            "an environment variable that says otherwise stops the DAG's parse with a message naming both "
            "([test runs](cli-test-runs.md)). A DAG file of its own (several extracts in one Airflow) names "
            "its own settings file, which its tasks read ([deployment](deployment.md#several-extracts-in-one-airflow)); "
            "name it here for `switchyard check` and the other commands of that DAG.", WHERE, "path",
            "`switchyard.env` in the Airflow home (`AIRFLOW_HOME`, else `~/airflow`)"),

    Setting("SWITCHYARD_DAG_ID", "dag_id", str, "switchyard_tpch", "The DAG's id.", DAG, "text"),
    Setting("SWITCHYARD_SPEC", "spec", str, "tpch",
            "The load spec the DAG is built from: a built-in name or a path to a spec file "
            "([spec reference](spec.md)).", DAG, "text"),
    Setting("SWITCHYARD_STREAMS", "streams", _positive_int, 4,
            "The most streams per table the DAG has task groups for (one per table and stream). A batch "
            "brings each table in as many streams as its manifest lists, up to this; the groups it does "
            "not use skip. A batch with more fails at `setup.plan`.", DAG, "integer"),
    Setting("SWITCHYARD_CONN_ID", "conn_id", str, "switchyard_target",
            "The target's Airflow connection (PostgreSQL or SQL Server); the trigger form can name another. "
            "Also `switchyard pool sync`'s default.", DAG, "text"),
    Setting("SWITCHYARD_SCHEMA", "schema", str, "tpch",
            "Target schema; staging tables go in `<schema>_staging`, the lease and load statistics in "
            "`switchyard`.", DAG, "identifier"),
    Setting("SWITCHYARD_POOL", "pool", str, "switchyard_loads",
            "The Airflow pool the loads run in; size it with `switchyard pool sync`.", DAG, "text"),
    Setting("SWITCHYARD_POOL_PER_SLOT", "pool_per_slot", _at_least_one, 3.0,
            "Load tasks the pool admits per COPY slot of a PostgreSQL target (its connection's "
            "`copy_slots`, by default its cores): `switchyard pool sync` sets the pool to slots x this, "
            "rounded up. The target's slot guard still runs at most one COPY per slot, taken just "
            "before it and released right after, so the extra tasks only overlap their start-up and "
            "tear-down with other loads' COPYs. `1`: one load task per slot. A SQL Server target's "
            "pool stays at its scheduler count (its scheduler claim shares a scheduler after its "
            "retries instead of waiting).", DAG, "number >= 1"),
    Setting("SWITCHYARD_PREPARE_POOL", "prepare_pool", _optional, None,
            "The Airflow pool the prepare steps run in (`switchyard pool sync` sizes it like the load "
            "pool), so that the loads whose staging tables are ready start before the later groups' "
            "prepares take the run's task slots (`SWITCHYARD_MAX_ACTIVE_TASKS`). Airflow holds back the "
            "tasks of a pool that does not exist (the run's note then names it): run `switchyard pool "
            "sync` before setting it on the DAG. `none`: no pool of their own.", DAG, "text | none"),
    Setting("SWITCHYARD_SCHEDULE", "schedule", _schedule, "0 2 * * *",
            "Cron schedule of the DAG (a nightly batch named by the run's date, `YYYY-MM-DD`: see "
            "`SWITCHYARD_BATCH_FORMAT`); `none` for manual runs only.", DAG, "cron | none"),
    Setting("SWITCHYARD_TIMEZONE", "timezone", _timezone, "UTC",
            "The time zone of the schedule's cron and of the date that names a run's batch: with "
            "`Europe/Berlin`, `30 0 * * *` runs at half past midnight in Berlin, winter and summer, and "
            "that run loads the batch of its Berlin date (`2026-10-26` for the run of 00:30 on 26 October, "
            "22:30 UTC the day before in summer time). A start date without an offset stays UTC.",
            DAG, "IANA time zone name"),
    Setting("SWITCHYARD_BATCH_FORMAT", "batch_format", _batch_format, "%Y-%m-%d",
            "The batch folder of a run without a `batch` param: its logical date (a manual run's is the "
            "moment it was triggered) in this strftime pattern. The default names a day's batch; a "
            "schedule more often than daily needs a finer one (`%Y-%m-%dT%H%M` for `*/15 * * * *`): a "
            "scheduled run or a backfill's whose name the schedule's run before or after it shares fails "
            "before its wait, saying so. With the hour in it and a `SWITCHYARD_TIMEZONE` that changes its "
            "clock, give it the zone's abbreviation too (`%Y-%m-%dT%H%M%Z`, `...T0200CEST` then "
            "`...T0200CET`): the hour the clock goes back comes twice, "
            "and a run in it fails otherwise (its two runs would name one batch).", DAG, "strftime pattern"),
    Setting("SWITCHYARD_START_DATE", "start_date", _start_date, None,
            "No scheduled load before it (ISO date or date and time, UTC unless it names its offset): the "
            "scheduler makes no run dated earlier (its first is the schedule's first time at or after it, "
            "even where Airflow would offer the schedule's latest past time: a schedule set or changed), "
            "and a scheduled run dated earlier made some other way skips its tasks, its wait for the batch "
            "saying why. Manual runs "
            "(the trigger form, `airflow dags test`) and backfills are not bound by it. It is not the "
            "DAG's `start_date` (but with `SWITCHYARD_CATCHUP=1`), which Airflow would give every task: a "
            "run dated before it got no task at all and ended `success` having loaded nothing. Without a start date the first scheduled "
            "run is the schedule's next time after Airflow first parses the DAG (or its latest, if that "
            "is less than a tenth of the interval ago: Airflow's rule) "
            "([backfills](load-modes.md#backfills)).", DAG, "date | none"),
    Setting("SWITCHYARD_CATCHUP", "catchup", _bool, False,
            "The DAG's `catchup`: `1` creates a scheduled run for every time of the schedule since the start "
            "date (or since the last scheduled run) that has none; `0`: only the latest one, so the times "
            "the scheduler was down for get no run, and their batches are never loaded unless you trigger "
            "them (the `batch` param) or backfill their dates: with append tables, whose every batch counts, "
            "`1` loads them in order once the scheduler is back. With `1` the "
            "start date is the DAG's `start_date` too, which Airflow gives every task: a run dated before "
            "it gets no task at all (date manual runs after it).", DAG, "0 | 1"),
    Setting("SWITCHYARD_BATCH_WAIT_SECONDS", "batch_wait_seconds", int, 6 * 3600,
            "How long `setup.wait_for_batch` waits for the batch's manifest (deferred: no worker slot "
            "held) before the run fails.", DAG, "seconds"),
    Setting("SWITCHYARD_BATCH_POKE_SECONDS", "batch_poke_seconds", float, 60.0,
            "How often the wait looks for the manifest.", DAG, "seconds"),
    Setting("SWITCHYARD_LOAD_EXECUTOR", "load_executor", _optional, None,
            "The Airflow executor that runs the loads (the file-reading steps), as named in "
            "`[core] executor`, e.g. `EdgeExecutor` with `[core] executor = LocalExecutor,"
            "airflow.providers.edge3.executors.EdgeExecutor`; each load goes to its stream's source "
            "queue (the spec's `sources`). Every other step stays on the default executor. `none`: "
            "the default executor runs everything. Set the same value on the workers.", DAG, "text | none"),
    Setting("SWITCHYARD_MAX_ACTIVE_TASKS", "max_active_tasks", _positive_int, 16,
            "The DAG's `max_active_tasks`: tasks of one run at once (the loads are further capped by "
            "the pool).", DAG, "integer"),
    Setting("SWITCHYARD_LOAD_ORDER", "load_order", _choice(*LOAD_ORDERS), "interleaved",
            "The loads' priority order (from the spec's table `weight`s). `interleaved`: the biggest "
            "remaining load, then the smallest, so that each small load's task start overlaps a big "
            "COPY; `biggest-first`: by weight alone.", DAG, "interleaved | biggest-first"),
    Setting("SWITCHYARD_LEASE_RETRIES", "lease_retries", int, 24,
            "Retries of `setup.plan` while another run holds the target schema's lease.", DAG, "integer"),
    Setting("SWITCHYARD_LEASE_RETRY_SECONDS", "lease_retry_seconds", float, 300.0,
            "Delay between those retries.", DAG, "seconds"),

    Setting("SWITCHYARD_LEASE_TTL_SECONDS", "lease_ttl_seconds", _positive_int, 1800,
            "A run's lease on its target schema lapses after this long without a step renewing it "
            "(a dead run frees the schema by itself).", STEPS, "seconds"),
    Setting("SWITCHYARD_LEASE_TAKEOVER_SECONDS", "lease_takeover_seconds", _non_negative_float, 60.0,
            "When the lease is held by a run Airflow reports as ended (failed, marked failed in the "
            "UI, or succeeded without its stats task giving the lease up), `setup.plan` waits this "
            "long and takes the lease over if no step of that run renewed it meanwhile, instead of "
            "waiting for the TTL. A step of that run still running when the run was marked failed "
            "is stopped by Airflow within seconds; one that renews the lease keeps it.", STEPS, "seconds"),
    Setting("SWITCHYARD_PROGRESS_SECONDS", "progress_seconds", float, 5.0,
            "Interval between a long load's progress lines in its task log.", STEPS, "seconds"),
    Setting("SWITCHYARD_VALIDATION", "validation", _choice("load", "constraints", "full"), "load",
            "What the load already proves is not checked again. `load`: the key and NOT NULL checks "
            "are proven by the staging table's validated constraints, and the row count is the "
            "count the load's COPY reported while the staging table is still the storage that COPY "
            "filled (PostgreSQL; elsewhere the rows are counted); `constraints`: the same proofs, "
            "but Great Expectations counts the rows; `full`: every expectation runs through Great "
            "Expectations.", STEPS, "load | constraints | full"),
    Setting("SWITCHYARD_CHECK_FIELDS_MB", "check_fields_mb", _non_negative_float, 16.0,
            "A batch of at most this many MB (the files of the run's tables this machine holds) is "
            "read field by field in `setup.plan`, before any load, as `switchyard check` reads it: every "
            "field against its column's type, each file's records against the manifest and its keys "
            "against its stream's range, its records' values of the table's `unique` columns against "
            "each other. What the servers would take without an error but not as "
            "written (a decimal with more digits after the point than its column's scale, a time finer "
            "than its column keeps: they round them) is refused there with the file, the line and the "
            "column. It reads about 6 MB a second on one core. A larger batch is left to its loads, "
            "which refuse a value that does not fit its column and read every record as it streams for "
            "those the servers would change (about 2 ms of CPU per MB); `0`: never read here.",
            STEPS, "MB"),
    Setting("SWITCHYARD_STEP_PARALLELISM", "step_parallelism", _choice("serial", "server"), "serial",
            "Parallelism of the steps' own statements on the target. `serial`: PostgreSQL runs the "
            "unique index builds and the row counts without parallel workers, SQL Server builds the "
            "staging tables' indexes with `MAXDOP = 1`: the loads already keep one bulk load per "
            "server core busy, and a parallel plan would only share those cores at a cost of its own; "
            "`server`: the server's settings (`max_parallel_maintenance_workers`, "
            "`max_parallel_workers_per_gather`; SQL Server's max degree of parallelism), for a server "
            "with cores to spare beside its load slots.", STEPS, "serial | server"),

    Setting("SWITCHYARD_PRELOAD", "preload", _bool, True,
            "The scheduler imports Great Expectations, the drivers and the DAG once, before it forks "
            "the task processes (LocalExecutor); an Edge worker does the same without Great "
            "Expectations (it runs loads only); `0` turns it off.", SCHEDULER, "0 | 1"),
)
VARIABLES = tuple(s.variable for s in SETTINGS)


class SettingsError(ValueError):
    """A SWITCHYARD_* variable holds a value its setting cannot take; the message names it."""


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    data_root: Path
    runs_dir: Path
    dag_id: str
    spec: str
    streams: int
    conn_id: str
    schema: str
    pool: str
    pool_per_slot: float
    prepare_pool: str | None
    schedule: str | None
    batch_format: str
    timezone: str
    batch_wait_seconds: int
    batch_poke_seconds: float
    load_executor: str | None
    max_active_tasks: int
    load_order: str
    lease_retries: int
    lease_retry_seconds: float
    lease_ttl_seconds: int
    lease_takeover_seconds: float
    progress_seconds: float
    validation: str
    check_fields_mb: float
    step_parallelism: str
    preload: bool
    settings_file: Path | None = None
    start_date: datetime | None = None
    catchup: bool = False
    # The DAG's settings an environment variable contradicts: "VARIABLE=env value (file value)".
    conflicts: tuple[str, ...] = ()

    def batch_for(self, when: datetime) -> str:
        """The batch of a run dated `when` that names none: its date as a clock in the schedule's
        time zone reads it (the run of 00:30 in Berlin loads that Berlin day's batch, not the UTC
        day before's), in SWITCHYARD_BATCH_FORMAT."""
        from zoneinfo import ZoneInfo
        return when.astimezone(ZoneInfo(self.timezone)).strftime(self.batch_format)

    def batch_shared(self, when: datetime, scheduled: bool = True) -> str | None:
        """Why the batch `batch_for(when)` names is not the run's own, or None: another run of the
        schedule names it too, and would load the same folder again (in append mode replacing
        this run's rows, or finding the next period's files missing). The clock's repeated hour
        (a run at 02:00 on the night the clock goes back, twice) for any run; for a run of the
        schedule (`scheduled`: a scheduled run or a backfill's), the schedule's times next to it,
        which a format coarser than the schedule names alike (a daily name, a run every 6 h)."""
        from zoneinfo import ZoneInfo
        zone = ZoneInfo(self.timezone)
        local = when.astimezone(zone)
        name = local.strftime(self.batch_format)
        other = local.replace(fold=1 - local.fold)
        wall = local.replace(tzinfo=None)
        # A name of the day alone is the day's batch however often it is loaded; a name with the
        # hour names each hour's batch, and the repeated hour's two batches alike.
        hourly = (wall + timedelta(hours=1)).strftime(self.batch_format) != wall.strftime(self.batch_format)
        if hourly and other.utcoffset() != local.utcoffset() and other.strftime(self.batch_format) == name:
            return (f"this run's time, {local:%Y-%m-%d %H:%M} in {self.timezone}, comes twice that night (the clock "
                    f"goes back), and SWITCHYARD_BATCH_FORMAT ({self.batch_format}) names both alike, batch {name}: "
                    f"each run would load the other's batch; give the format the zone's abbreviation (%Z, e.g. "
                    f"{self.batch_format}%Z: CEST, then CET) and the producer the same names")
        if not scheduled or not self.schedule:
            return None
        from croniter import croniter
        for near in (croniter(self.schedule, wall).get_prev(datetime), croniter(self.schedule, wall).get_next(datetime)):
            if near.replace(tzinfo=zone).strftime(self.batch_format) == name:
                return (f"the schedule ({self.schedule}) runs at {near:%Y-%m-%d %H:%M} and at {wall:%Y-%m-%d %H:%M} "
                        f"({self.timezone}), and SWITCHYARD_BATCH_FORMAT ({self.batch_format}) names both batch "
                        f"{name}: each run would load the same batch; give the format the part of the time that "
                        f"tells the runs apart (%Y-%m-%dT%H%M for a schedule of hours)")
        return None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Settings":
        """The settings of `env` (default: this process's), with the DAG's settings file it names."""
        env = os.environ if env is None else env
        return _read(tuple((v, env.get(v)) for v in VARIABLES), _file_state(settings_file(env)))


# The settings the settings file holds: those that shape the DAG (its id, spec, schema, streams,
# schedule, start date, pools...). The others are each process's own (a worker's data root).
FILE_SECTION = DAG


def names_settings_file(env: Mapping[str, str] | None = None) -> bool:
    """Whether `env` names the DAG's settings file itself (SWITCHYARD_SETTINGS_FILE)."""
    env = os.environ if env is None else env
    return bool((env.get("SWITCHYARD_SETTINGS_FILE") or "").strip())


def registered_values(env: Mapping[str, str] | None = None) -> list[tuple[Setting, str | None]]:
    """Other installed packages' settings (`registered`), each with its value in `env` (None:
    unset, its default applies)."""
    env = os.environ if env is None else env
    return [(s, (env.get(s.variable) or "").strip() or None) for s in registered()]


def settings_file(env: Mapping[str, str] | None = None) -> Path:
    """Where the DAG's settings file is: SWITCHYARD_SETTINGS_FILE, else `switchyard.env` in the
    Airflow home of `env` (AIRFLOW_HOME, else Airflow's default, `~/airflow`)."""
    env = os.environ if env is None else env
    named = (env.get("SWITCHYARD_SETTINGS_FILE") or "").strip()
    if named:
        return _path(named)
    return _path((env.get("AIRFLOW_HOME") or "").strip() or "~/airflow") / "switchyard.env"


def _file_state(path: Path) -> tuple[str, int | None]:
    """The file and its modification time (None: no such file): part of the cache key."""
    try:
        return str(path), path.stat().st_mtime_ns
    except OSError:
        return str(path), None


def read_settings_file(path: Path) -> dict[str, str]:
    """The file's `VARIABLE=value` lines (blank lines and `#` comments skipped)."""
    out: dict[str, str] = {}
    by_variable = {s.variable: s for s in SETTINGS}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        name, value = name.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        setting = by_variable.get(name)
        if not sep or setting is None or setting.section != FILE_SECTION:
            raise SettingsError(f"{path}, line {number}: {line!r}: the DAG's settings file holds "
                                f"`VARIABLE=value` lines of the DAG's settings only "
                                f"({', '.join(s.variable for s in SETTINGS if s.section == FILE_SECTION)})")
        out[name] = value
    return out


def _parse(s: Setting, text: str | None):
    if text is None or (text.strip() == "" and s.parse is not _schedule):
        return s.default
    try:
        return s.parse(text)
    except ValueError as exc:
        raise SettingsError(f"{s.variable}={text!r}: {exc}") from None


def _read(values: tuple[tuple[str, str | None], ...], file: tuple[str, int | None] | None = None) -> Settings:
    raw = dict(values)
    from_file: dict[str, str] | None = None
    if file is not None and file[1] is not None:
        try:
            from_file = read_settings_file(Path(file[0]))
        except FileNotFoundError:
            from_file = None
    out: dict[str, Any] = {}
    conflicts = []
    for s in SETTINGS:
        value = _parse(s, raw.get(s.variable))
        if from_file is not None and s.section == FILE_SECTION:
            # The file is the DAG's definition: its value (or the default) stands, and an environment
            # variable that says otherwise is a conflict the DAG's parse refuses (DagConfig.from_env).
            pinned = _parse(s, from_file.get(s.variable))
            if raw.get(s.variable) is not None and value != pinned:
                conflicts.append(f"{s.variable}={raw[s.variable]!r} (the file: {render(pinned)!r})")
            value = pinned
        out[s.field] = value
    state = out["state_dir"] or (PROJECT / ".switchyard").resolve()
    out["state_dir"] = state
    out["data_root"] = out["data_root"] or state / "data"
    out["runs_dir"] = out["runs_dir"] or state / "runs"
    out["settings_file"] = Path(file[0]) if from_file is not None else None
    out["conflicts"] = tuple(conflicts)
    return Settings(**out)


_cached = lru_cache(maxsize=32)(_read)


def get(file: str | Path | None = None) -> Settings:
    """The settings of this process's environment and the DAG's settings file (parsed once per
    distinct environment and version of the file): `file`, a DAG's own (one DAG file among
    several, `dag_factory.dag_from_settings_file`), else the one the environment names
    (`settings_file`). A DAG's own file must be there: without it every DAG setting would fall
    back to its default (another batch name, schema or spec) without a word."""
    if file is None:
        return _cached(tuple((v, os.environ.get(v)) for v in VARIABLES), _file_state(settings_file()))
    state = _file_state(Path(file))
    if state[1] is None:
        raise SettingsError(f"{file}: the DAG's settings file is not there (its DAG file names it); every "
                            f"Airflow process that parses that DAG or runs its tasks reads it")
    return _cached(tuple((v, os.environ.get(v)) for v in VARIABLES), state)


def pool_size(server_slots: int, per_slot: float | None = None) -> int:
    """The load pool's size for a target with `server_slots` load slots: slots x
    SWITCHYARD_POOL_PER_SLOT (or `per_slot`), rounded up, at least the slots."""
    import math
    factor = get().pool_per_slot if per_slot is None else per_slot
    return max(server_slots, math.ceil(server_slots * factor - 1e-9))


# The locations, as functions: what most callers want.
def state_dir() -> Path:
    return get().state_dir


def data_root() -> Path:
    return get().data_root


def runs_dir() -> Path:
    return get().runs_dir


# --- the reference ------------------------------------------------------------------------
def registered() -> list[Setting]:
    """Declarations of other installed packages (the `switchyard.settings` entry points)."""
    out: list[Setting] = []
    for entry in sorted(entry_points(group=SETTINGS_GROUP), key=lambda e: e.name):
        out.extend(entry.load())
    return out


INTRO = """# Configuration

Switchyard reads its settings from `SWITCHYARD_*` environment variables: in the environment
of the Airflow components (scheduler, workers, dag-processor, api-server), of `make`, and of
the `switchyard` command. `switchyard config` prints the values in effect.

This page is generated from `plugins/switchyard/settings.py` by `switchyard config --markdown`
(with the development tooling installed, which adds its own section); a test fails when the
two differ. Airflow's own settings (`AIRFLOW__SECTION__KEY`) are Airflow's.
"""


def markdown(extra: list[Setting] | None = None) -> str:
    """docs/configuration.md: every setting, by section, in declaration order."""
    extra = registered() if extra is None else extra
    lines = [INTRO]
    sections: dict[str, list[Setting]] = {}
    for s in (*SETTINGS, *extra):
        sections.setdefault(s.section, []).append(s)
    for title, items in sections.items():
        lines += [f"## {title}", "", "| variable | type | default | what it does |", "|---|---|---|---|"]
        for s in items:
            doc = s.doc.replace("|", "\\|").replace("\n", " ")
            kind = (s.type_name or "text").replace("|", "\\|")
            lines.append(f"| `{s.variable}` | {kind} | {s.shown_default().replace('|', chr(92) + '|')} | {doc} |")
        lines.append("")
    return "\n".join(lines)


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Settings))
