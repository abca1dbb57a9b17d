"""What every target does: create objects, prepare a staging table, load it, switch it in.

Names that reach SQL come from the spec and planner (validated identifiers) and are
quoted here by the engine's own rules; key bounds are rendered by `lit` from Python values
only (int, datetime.date, datetime.datetime: see keys.py), as integer or typed date and
timestamp literals of the engine. No statement is ever built from free text.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from switchyard.core.planner import LoadPlan, StreamPlan, TablePlan
from switchyard.core.spec import IDENTIFIER, LoadSpec, SpecError, Table
from switchyard.targets.templates import environment, split_statements

if TYPE_CHECKING:
    from switchyard.targets.progress import ServerProgress

# Internal names (ours, not the spec's) may start with a letter or underscore.
_INTERNAL_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class TargetError(RuntimeError):
    """A target operation failed; the message names table, stream and file.

    `permanent` marks failures a retry cannot fix (bad data); the others (a lost
    connection, a lock wait that timed out) are worth retrying.
    """

    def __init__(self, message: str, permanent: bool = False):
        super().__init__(message)
        self.permanent = permanent


class LeaseHeld(TargetError):
    """Another run holds the target schema: worth retrying later, it is not a data fault.
    `holder` and `expires_at` are the lease row as the claim found it."""

    def __init__(self, message: str, holder: str = "", expires_at: Any = None):
        super().__init__(message)
        self.holder = holder
        self.expires_at = expires_at


@dataclass
class LoadResult:
    rows: int
    bytes: int
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)


ProgressCallback = Callable[[int, int], None]  # (bytes sent, bytes total)


@dataclass(frozen=True)
class ConnectionFields:
    """An Airflow connection's fields as an adapter reads them (switchyard/airflow/connections.py
    looks the connection up; targets never import Airflow)."""
    conn_id: str
    host: str | None = None
    port: int | None = None
    login: str | None = None
    password: str | None = None
    schema: str | None = None
    extra: dict = field(default_factory=dict)


# A session's client name: printable ASCII without spaces or the characters connection strings
# and libpq's `options` quote (`;`, `{`, `}`, `=`, a backslash, `'`), at most 63 characters
# (PostgreSQL's NAMEDATALEN - 1; SQL Server's program_name holds 128).
_SESSION_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/@+-]")


def session_label(name: str) -> str:
    """`name` made safe to travel in a connection string or a libpq option: every other
    character becomes `_`, cut to 63 characters."""
    return _SESSION_NAME_UNSAFE.sub("_", name)[:63]


class TargetAdapter(ABC):
    """One database engine. Subclasses set `engine` and implement the execution methods."""

    engine: ClassVar[str]
    # The folder of the engine's SQL templates (Jinja), in the engine's own folder:
    # `targets/<engine>/templates/` for a built-in engine, anywhere in its package for another.
    # A flavour (a subclass of an engine's adapter under a name of its own) inherits its
    # parent's, or names its own.
    templates: ClassVar[Path]
    # The spec's column types the engine reads (a column's per-target type is looked up by this
    # name): the engine's own name, unless it is a flavour of another engine, which reads the
    # other's.
    dialect: ClassVar[str | None] = None
    # How people name the engine's servers (titles of the report's sections only it fills).
    display_name: ClassVar[str]
    quote_open: ClassVar[str]
    quote_close: ClassVar[str]
    # Whether the load's result names the staging table's storage as its COPY left it
    # (`staging_filenode`), so that validation can take the COPY's row count for the table's
    # while the table is still that storage (validation.validate_table). Engines without it
    # count the rows again.
    load_names_its_storage: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        if "engine" in cls.__dict__ and cls.dialect is None:
            cls.dialect = cls.engine
        if "engine" in cls.__dict__ and not hasattr(cls, "display_name"):
            cls.display_name = cls.engine

    def __init__(self, spec: LoadSpec, schema: str = "tpch", staging_schema: str | None = None,
                 control_schema: str = "switchyard", lock_timeout_seconds: int = 60,
                 lease_holder: str | None = None, lease_batch: str = "",
                 lease_ttl_seconds: int = 1800, step_parallelism: str | None = None,
                 session_name: str | None = None, batch_format: str | None = None):
        self.spec = spec
        # How the DAG's batch names read as dates (SWITCHYARD_BATCH_FORMAT of the DAG's own
        # settings), for the pre-flight's "holds a newer batch"; None: the settings in effect.
        self.batch_format = batch_format
        # What the server shows as the client of this step's sessions (PostgreSQL's
        # application_name, SQL Server's program_name): the Airflow task, so that a DBA who sees
        # a session holding a lock or running a COPY knows which step it is.
        self.session_name = session_label(session_name) if session_name else None
        # Parallelism of the steps' own statements (SWITCHYARD_STEP_PARALLELISM): `serial`
        # while every server core runs a load, or `server`; each engine applies it its own way.
        if step_parallelism is None:
            from switchyard.settings import get
            step_parallelism = get().step_parallelism
        self.step_parallelism = step_parallelism
        # The run lease (one run at a time per target schema): who we are, for how long a
        # claim holds without being renewed. None: steps run without a lease (tools, tests).
        self.lease_holder = lease_holder
        self.lease_batch = lease_batch
        self.lease_ttl_seconds = int(lease_ttl_seconds)
        self.schema = self.checked(schema)
        self.staging_schema = self.checked(staging_schema or f"{schema}_staging")
        self.control_schema = self.checked(control_schema)
        self.lock_timeout_seconds = int(lock_timeout_seconds)

    # --- from an Airflow connection -----------------------------------------------------
    # "module:Class" of the Airflow provider's hook for this engine's connections, where the
    # adapter connects through one (its `from_connection` gets a factory of it); None: none.
    airflow_hook: ClassVar[str | None] = None

    @classmethod
    def from_connection(cls, spec: LoadSpec, fields: ConnectionFields, hook: Callable[[], Any] | None = None,
                        **options: Any) -> "TargetAdapter":
        """The adapter for an Airflow connection's fields; `hook` makes the provider's hook (the
        same one every call), where `airflow_hook` names one."""
        raise TargetError(f"connection {fields.conn_id!r}: the {cls.engine} adapter takes no Airflow connection")

    # --- how lineage tools name the engine's tables (OpenLineage's dataset naming) ----------
    # A table's namespace is "<lineage_scheme>://host:port" and its name
    # "database.schema.table" (https://openlineage.io/docs/spec/naming).
    lineage_scheme: ClassVar[str | None] = None   # default: the engine's name
    default_port: ClassVar[int | None] = None
    default_database: ClassVar[str | None] = None

    @classmethod
    def lineage_namespace(cls, fields: ConnectionFields) -> str:
        return f"{cls.lineage_scheme or cls.engine}://{fields.host or 'localhost'}:{fields.port or cls.default_port}"

    @classmethod
    def lineage_name(cls, fields: ConnectionFields, schema: str, table: str) -> str:
        """A table's name for lineage tools: the connection's database (Airflow keeps it in the
        connection's `schema` field), the schema, the table."""
        return ".".join(p for p in (fields.schema or cls.default_database, schema, table) if p)

    # --- the script, without a server --------------------------------------------------
    # Whether `switchyard plan --emit server-config / --layout` applies: the engine maps
    # ports to the server's nodes (plan_ports).
    plans_ports: ClassVar[bool] = False

    @classmethod
    def for_script(cls, spec: LoadSpec, schema: str, args: Any, ports: list[int] | None = None) -> "TargetAdapter":
        """An adapter that only writes SQL (`switchyard plan`): no connection is ever made.
        `args`: the plan command's options, for the engine's own (ports, nodes)."""
        return cls(spec, schema=schema)

    @classmethod
    def plan_arguments(cls, group: Any) -> None:
        """Options of `switchyard plan` that only this engine reads, added to its argparse group
        (SQL Server: the port plan's); none by default."""

    @classmethod
    def plan_ports(cls, args: Any) -> tuple[str, list[int]]:
        """(the server configuration's text, each stream's port) for `switchyard plan`, where
        `plans_ports`; exits with a message naming what is missing."""
        raise TargetError(f"{cls.engine} maps no ports to the server's nodes")

    # --- validation's proofs and data source --------------------------------------------
    # Great Expectations' fluent data source for the engine (`add_<kind>` of a context's
    # data_sources): what validation checks the staging table through.
    gx_datasource: ClassVar[str] = "sql"

    @classmethod
    def constraint_proofs(cls, url: str, schema: str, table: str, key: str | None, key_min: Any, key_max: Any,
                          not_null: Sequence[str], key_type: str | None = None,
                          loaded_filenode: int | None = None) -> tuple[str | None, dict[str, str], bool]:
        """(key proof, {column: not-null proof}, whether the table is still the load's storage)
        from the staging table's own constraints and catalog, without reading a row. Here: no
        key proof; a column the catalog shows NOT NULL is proven (an engine with no unenforced
        form of NOT NULL); an engine's planner may prove more (PostgreSQL: targets/postgres/proofs.py)."""
        from sqlalchemy import create_engine, inspect
        engine = create_engine(url)
        try:
            declared = {col["name"]: col.get("nullable", True) for col in inspect(engine).get_columns(table, schema)}
        finally:
            engine.dispose()
        return None, {c: f"{c} is NOT NULL in the staging table: the server refused nulls on load"
                      for c in not_null if declared.get(c) is False}, False

    def proofs_in_session(self, schema: str, table: str, key: str | None, key_min: Any, key_max: Any,
                          not_null: Sequence[str], key_type: str | None = None,
                          loaded_filenode: int | None = None) -> tuple[str | None, dict[str, str], bool]:
        """`constraint_proofs` as the validate step asks for them, on the step's own session
        where the engine can answer there; here over the adapter's SQLAlchemy URL."""
        return self.constraint_proofs(self.sqlalchemy_url(), schema, table, key, key_min, key_max, not_null,
                                      key_type, loaded_filenode)

    # --- what an error means -----------------------------------------------------------
    @classmethod
    def permanent_error(cls, exc: BaseException) -> str | None:
        """What the engine's driver error `exc` is, when a second try cannot succeed (a unique
        or CHECK violation, a value of the wrong type or length, a missing object, a refused
        permission or login): e.g. "a unique violation". None when a retry may help (a lost
        connection, a lock time-out, a deadlock, a restarting server) or the error is not the
        driver's. Each engine classifies its own errors here, once."""
        return None

    # --- SQL text -------------------------------------------------------------------
    @staticmethod
    def checked(name: str) -> str:
        if not isinstance(name, str) or not (IDENTIFIER.match(name) or _INTERNAL_IDENTIFIER.match(name)):
            raise TargetError(f"{name!r} is not a valid identifier")
        return name

    def q(self, name: str) -> str:
        """Quote an identifier; names are validated first, so quoting never needs escaping."""
        return f"{self.quote_open}{self.checked(name)}{self.quote_close}"

    def qualified(self, schema: str, name: str) -> str:
        return f"{self.q(schema)}.{self.q(name)}"

    def lit(self, value: int | date | datetime) -> str:
        """A literal for SQL text, from a Python value only: an int as an integer literal, a
        datetime.date through `date_literal`, a naive datetime.datetime through
        `timestamp_literal` (each engine writes its own typed literal). Text is refused: a key
        bound given as text is parsed first (StreamPlan.typed, keys.parse_key), so that what
        reaches the SQL is rebuilt from the value's fields."""
        if isinstance(value, bool):
            raise TargetError(f"{value!r} is not a literal value")
        if isinstance(value, int):
            return str(value)
        if isinstance(value, datetime):
            if value.tzinfo is not None:
                raise TargetError(f"{value!r}: timestamp bounds are without time zone")
            return self.timestamp_literal(value)
        if isinstance(value, date):
            return self.date_literal(value)
        raise TargetError(f"{value!r} is not an integer, date or timestamp value")

    def date_literal(self, value: date) -> str:
        """The engine's typed literal of a date, built from the value's fields."""
        raise TargetError(f"target {self.engine} has no date literal: date keys are not supported here yet")

    def timestamp_literal(self, value: datetime) -> str:
        """The engine's typed literal of a timestamp (without time zone), from its fields."""
        raise TargetError(f"target {self.engine} has no timestamp literal: timestamp keys are not "
                          f"supported here yet")

    def column_type(self, column: Any) -> str:
        """The column's type on this engine: the spec's type for its dialect, or the neutral one read
        in the engine's words (each engine's `types.py`); TargetError (permanent) where the spec gives
        none, or one that means something else here."""
        try:
            return column.sql_type(self.dialect)
        except SpecError as exc:
            raise TargetError(str(exc), permanent=True) from None

    def key_kind(self, table: Table) -> str | None:
        """integer, date or timestamp: the kind of the table's key on this engine (None: no key)."""
        from switchyard.core.spec import key_kind
        return key_kind(self.column_type(table.column(table.key))) if table.key is not None else None

    def key_type(self, table: str) -> str | None:
        """The SQL type of the table's key on this engine (its precision sets a timestamp's unit);
        None for an unpartitioned table without a key."""
        t = self.spec.table(table)
        return self.column_type(t.column(t.key)) if t.key is not None else None

    def render(self, template: str, **context: Any) -> list[str]:
        """Render the engine's `<template>` (in its `templates` folder) into its statements, in order."""
        text = environment(self.templates).get_template(template).render(
            q=self.q, qn=self.qualified, lit=self.lit, schema=self.schema,
            staging_schema=self.staging_schema, control_schema=self.control_schema,
            lock_timeout_seconds=self.lock_timeout_seconds, **context)
        return split_statements(text)

    def columns(self, table: Table) -> list[dict[str, str]]:
        return [{"name": c.name, "type": self.column_type(c)} for c in table.columns]

    # --- the generated SQL of each step (pure: no connection) ---------------------------
    @abstractmethod
    def setup_sql(self, plan: LoadPlan) -> list[str]:
        """Schemas, target tables (partitioned on their key), the control schema."""

    @abstractmethod
    def prepare_sql(self, stream: StreamPlan) -> list[str]:
        """A fresh staging table with the range CHECK constraint of its partition."""

    @abstractmethod
    def switch_sql(self, stream: StreamPlan, replace_existing: bool) -> list[str]:
        """Put the validated staging table in place of the partition (or table)."""

    def load_sql(self, stream: StreamPlan) -> list[str]:
        """The load's statements, where the load is SQL (server-side bulk load)."""
        return []

    def validate_sql(self, stream: StreamPlan) -> list[str]:
        """Statements validation runs on the staging table besides Great Expectations' queries
        (PostgreSQL: the unique index of `prove_unique`)."""
        return []

    def script(self, plan: LoadPlan) -> str:
        """The whole load as one reviewable script, in execution order."""
        out = [f"-- Switchyard load plan: spec {self.spec.name}, {plan.streams} streams, target {self.engine}, "
               f"schema {self.schema}",
               "-- objects"]
        out += [stmt + ";" for stmt in self.setup_sql(plan)]
        for s in plan.all_streams():
            if s.empty:
                continue
            out.append(f"\n-- {s.group_id}: {s.file}, " + (f"keys {s.key_min}..{s.key_max}" if s.partitioned
                                                             else "loaded whole"))
            for stmt in [*self.prepare_sql(s), *self.load_sql(s), *self.validate_sql(s),
                         *self.switch_sql(s, replace_existing=False)]:
                out.append(stmt + ";")
        for t in plan.tables:
            commit = self.commit_sql(t)
            if commit:
                out.append(f"\n-- {t.table.name}: its last switch moves the batch in whole")
                out += [stmt + ";" for stmt in commit]
        return "\n".join(out) + "\n"

    def commit_sql(self, table_plan: "TablePlan") -> list[str]:
        """Where a target commits a table's switches together: the statements the table's last
        switch runs (none where each stream's switch is final)."""
        return []

    # --- execution ----------------------------------------------------------------------
    # The steps every engine shares: renew the run lease, then the engine's own work. The
    # engine implements the hooks below (`create_staging`, `load_staging`, `switch_staging`,
    # `staging_exists`, `switched_in`, the lease's claim and release).
    @abstractmethod
    def setup(self, plan: LoadPlan, problems: list[str] = (), replace_newer: bool = False) -> list[str]:
        """The run lease, then the pre-flight (every table of the plan against the target:
        refused, permanent, with every problem and the batch's own `problems`, before anything
        is created; a replace table holding a newer batch is refused unless `replace_newer`,
        core.preflight.newer_in_place), then the missing objects. Returns the pre-flight's notes."""

    def prepare(self, stream: StreamPlan) -> None:
        """A fresh staging table with its partition's range CHECK, under this run's lease."""
        self.hold_lease()
        self.create_staging(stream)

    def load(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None = None) -> LoadResult:
        """The stream file into its staging table, under this run's lease."""
        self.hold_lease()
        return self.load_staging(stream, path, progress)

    def switch(self, stream: StreamPlan) -> dict[str, Any]:
        """The staging table in place of its partition (or table), under this run's lease.

        Idempotent: a switch commits and drops its staging table in one transaction, so a
        retried switch whose earlier attempt committed (its process died before Airflow heard
        of it) finds no staging table and the stream's partition in place, and reports that
        instead of failing. The lease makes the check safe: no other run touches this
        schema's staging tables, and a group's switch is its only step that drops them.
        """
        self.hold_lease()
        if self.staging_exists(stream):
            return self.switch_staging(stream)
        found = self.switched_in(stream)
        if found is not None:
            return {**found, "replaced": None, "already_switched": True}
        where = (f"partition of {self.schema}.{stream.table} for keys {stream.lower}..{stream.upper}"
                 if stream.partitioned else f"table {self.schema}.{stream.table}")
        raise TargetError(
            f"switch of {stream.group_id}: nothing to switch: the staging table "
            f"{self.staging_schema}.{stream.staging_table} does not exist and no {where} is in place; "
            f"rerun the group from prepare", permanent=True)

    def publish_batch(self, streams: list[StreamPlan]) -> dict[str, Any]:
        """Every table of the batch into the target in one transaction (the spec's `publish:
        batch`), once each of `streams` (the run's plan for its tables) is validated and staged;
        refuses, changing nothing, naming every stream that is not. Returns {"tables": [...],
        "already_published": bool, "lock_seconds": s, ...}."""
        raise TargetError(f"the {self.engine} target publishes table by table only: declare `publish: table` "
                          f"in the spec", permanent=True)

    @abstractmethod
    def create_staging(self, stream: StreamPlan) -> None: ...

    @abstractmethod
    def load_staging(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None) -> LoadResult: ...

    @abstractmethod
    def switch_staging(self, stream: StreamPlan) -> dict[str, Any]:
        """The switch itself; the staging table exists."""

    @abstractmethod
    def staging_exists(self, stream: StreamPlan) -> bool: ...

    @abstractmethod
    def switched_in(self, stream: StreamPlan) -> dict[str, Any] | None:
        """What a committed switch of this stream left in the target (the partition with the
        stream's bound, or the table), as the switch's result would name it; None if absent."""

    # --- the run lease: one run at a time per target schema ----------------------------
    # A row per target schema in `<control schema>.run_lease` names the run (`lease_holder`)
    # that loads it. setup takes it, every prepare, load and switch renews it, the stats task
    # releases it; it lapses after `lease_ttl_seconds` without renewal. The claim's SQL is
    # the engine's template `lease_claim.sql`: one transaction that takes the row when it is
    # free, already ours or lapsed, renews it when ours, and ends by selecting the row.
    def hold_lease(self) -> None:
        """Renew this run's lease before a step, in a short transaction of its own: holding
        the lease row locked for a whole load would serialise the run's own loads."""
        if self.lease_holder:
            self.check_lease(self.claim_lease())

    @abstractmethod
    def claim_lease(self) -> tuple:
        """Run `lease_claim.sql` in a transaction of its own; the lease row after it:
        (holder, batch, acquired_at, expires_at)."""

    def lease_params(self) -> dict[str, Any]:
        return {"schema": self.schema, "holder": self.lease_holder, "batch": self.lease_batch,
                "ttl": self.lease_ttl_seconds}

    def check_lease(self, row: tuple) -> None:
        """LeaseHeld unless the claim left the lease with this run."""
        holder, batch, acquired, expires = row
        if holder == self.lease_holder:
            return
        # The hand-run statement for a dead holder: the release template with the schema
        # written in (a validated identifier) and no holder condition.
        delete = [ln for ln in self.render("lease_release.sql", schema_literal=self.schema)[0].splitlines()
                  if not ln.lstrip().startswith("--")]
        raise LeaseHeld(
            f"target schema {self.schema} is being loaded by run {holder} (batch {batch}, since "
            f"{_utc(acquired):%Y-%m-%d %H:%M:%S} UTC); this run waits its turn. The lease lapses at "
            f"{_utc(expires):%Y-%m-%d %H:%M:%S} UTC unless that run renews it; if that run is dead: "
            f"{' '.join(' '.join(delete).split())}", holder=holder, expires_at=expires)

    def release_lease(self) -> None:
        """Give up this run's lease on the target schema (the stats task, at the run's end)."""
        if self.lease_holder:
            self.drop_lease(self.lease_holder)

    def end_lease_of(self, held: LeaseHeld) -> bool:
        """Delete the lease `held` found, if it is still that row: the same holder, not renewed
        since (its expiry unchanged). For a holder known to have ended; True if it went."""
        return self.drop_lease(held.holder, held.expires_at) > 0

    @abstractmethod
    def drop_lease(self, holder: str, expires_at: Any = None) -> int:
        """Run `lease_release.sql` for this schema and `holder` (with `expires_at`: only a row
        not renewed since it was read); the rows deleted."""

    def prove_target_uniques(self, stream: StreamPlan) -> list[dict[str, Any]]:
        """The target's unique indexes besides the spec's (a DBA's), checked on the staging table
        before the switch, each result as prove_unique's; [] where the engine checks them at
        the switch only."""
        return []

    def prove_unique(self, stream: StreamPlan) -> dict[str, Any] | None:
        """Check the table's `unique` columns on the staging table with the index the target
        keeps, where the engine does that; None where it does not (validation then asks Great
        Expectations). The result: {"columns": [...], "index": name, "seconds": s, "duplicates":
        None or {"keys": n, "extra_rows": n, "examples": [...]}}. A partitioned table's unique
        columns hold its key (the spec refuses others), so the index proves them unique across the
        table: the streams' key ranges are disjoint."""
        return None

    # --- the session: what the steps and observability ask of every engine's connection ---
    @abstractmethod
    def connection(self) -> Any:
        """A context manager: a connection to the target with the steps' session settings, idle,
        closed at its end unless it is the session keep_session keeps (the load statistics, the
        server's progress sampler use it)."""

    def keep_session(self) -> None:
        """Until close(), hand out one session again and again where the engine can (a step's
        statements one after the other); an engine without it connects each time."""

    def close(self) -> None:
        """Close what keep_session kept."""

    @abstractmethod
    def execute(self, statements: list[str]) -> None:
        """Run the statements in order on a connection of their own (one transaction where the
        engine's statements allow it)."""

    @abstractmethod
    def fetch(self, sql: str, params: tuple = ()) -> list[tuple]:
        """The rows of one query, with its parameters in the driver's style."""

    @abstractmethod
    def lease(self) -> tuple | None:
        """(holder, batch, acquired_at, expires_at) of this schema's run lease, if any."""

    @abstractmethod
    def sqlalchemy_url(self) -> str:
        """For validation with Great Expectations."""

    @abstractmethod
    def scheduler_count(self) -> int:
        """How many loads the server runs side by side at full speed: its load slots."""

    def pool_size(self, per_slot: float | None = None) -> int:
        """The Airflow load pool for this target: its load slots, or more where the target's own
        slot guard makes a load wait for a free slot (then slots x SWITCHYARD_POOL_PER_SLOT, so
        one load's task start-up overlaps another's bulk load). By default the pool is the cap:
        one load task per slot."""
        return self.scheduler_count()

    def server_snapshot(self) -> dict | None:
        """The server's cumulative wait counters now, JSON-serialisable (it travels through
        XCom); None where the engine keeps none worth comparing."""
        return None

    def server_delta(self, before: dict, after: dict, top: int = 10) -> dict:
        """What the server waited on between two `server_snapshot()`s, busiest first."""
        return {}

    # --- what observability asks of the engine --------------------------------------------
    # Where a load ran, as the engine's `<control schema>.load_stats` keeps it: the columns its
    # setup.sql adds to the shared ones, named as the load's result details name them. Each
    # adapter declares its own.
    load_stats_columns: tuple[str, ...] = ()

    def server_progress(self, schema: str, table: str) -> "ServerProgress | None":
        """A sampler of the server's own progress of a bulk load into `schema.table`, where the
        engine reports one (it has a `copy_progress.sql` template); None elsewhere."""
        from switchyard.targets.progress import ServerProgress
        if not (self.templates / "copy_progress.sql").is_file():
            return None
        return ServerProgress(self, schema, table)


def stream_rows(stream: StreamPlan) -> str:
    """`12,000 rows in the manifest`: what a stream brings, for messages."""
    return f"{stream.rows:,} rows in the manifest" if stream.rows is not None else "rows not given"


def _utc(when: datetime) -> datetime:
    """A lease time in UTC (PostgreSQL returns it in the session's zone, SQL Server naive UTC)."""
    return when.astimezone(timezone.utc) if when.tzinfo else when


# Errors of Python's own in a step's code (a value read as another type, a missing key): the
# same inputs fail the same way on every try, and a step's retries (a plan's wait for the lease:
# hours) would only hide them. OSError and its kin (a lost connection, a file being written)
# are not among them, nor Switchyard's own classes, which say themselves whether a retry helps
# (a BatchError of a worker without the batch's folder is retried: another worker may hold it).
_CODE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError, ArithmeticError, AssertionError)


def _code_error(exc: BaseException) -> bool:
    return isinstance(exc, _CODE_ERRORS) and not type(exc).__module__.startswith("switchyard")


def permanent_reason(adapter: type[TargetAdapter] | None, exc: BaseException) -> str | None:
    """Why `exc` fails the same way on every try, or None: a TargetError marked permanent says
    so itself; otherwise the engine's classifier reads the driver error it is, or wraps; an error
    of Python's own in the step's code (_CODE_ERRORS) is one too."""
    if _code_error(exc):
        return f"a {type(exc).__name__} in the step (the same on every try; the task's log shows where)"
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, TargetError) and exc.permanent:
            return "permanent"
        if isinstance(exc, SpecError):  # the spec says something no retry changes
            return "permanent"
        what = adapter.permanent_error(exc) if adapter is not None else None
        if what:
            return what
        # `raise ... from None` hides the error it was raised in: that one is not followed.
        exc = exc.__cause__ if exc.__cause__ is not None or exc.__suppress_context__ else exc.__context__
    return None
