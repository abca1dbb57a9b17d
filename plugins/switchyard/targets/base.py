"""What every target does: create objects, prepare a staging table, load it, switch it in.

Names that reach SQL come from the spec and planner (validated identifiers) and are
quoted here by the engine's own rules; bounds are integers rendered as integer literals.
No statement is ever built from free text.
"""
from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, ClassVar

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from ..planner import LoadPlan, StreamPlan
from ..spec import IDENTIFIER, LoadSpec, Table

SQL_ROOT = Path(__file__).resolve().parents[3] / "include" / "sql"
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
    """Another run holds the target schema: worth retrying later, it is not a data fault."""


@dataclass
class LoadResult:
    rows: int
    bytes: int
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)


ProgressCallback = Callable[[int, int], None]  # (bytes sent, bytes total)


@lru_cache(maxsize=4)
def _jinja(engine: str) -> Environment:
    env = Environment(loader=FileSystemLoader(str(SQL_ROOT / engine)), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    return env


class TargetAdapter(ABC):
    """One database engine. Subclasses set `engine` and implement the execution methods."""

    engine: ClassVar[str]
    quote_open: ClassVar[str]
    quote_close: ClassVar[str]

    def __init__(self, spec: LoadSpec, schema: str = "tpch", staging_schema: str | None = None,
                 control_schema: str = "switchyard", lock_timeout_seconds: int = 60,
                 lease_holder: str | None = None, lease_batch: str = "",
                 lease_ttl_seconds: int = 1800):
        self.spec = spec
        # The run lease (one run at a time per target schema): who we are, for how long a
        # claim holds without being renewed. None: steps run without a lease (tools, tests).
        self.lease_holder = lease_holder
        self.lease_batch = lease_batch
        self.lease_ttl_seconds = int(lease_ttl_seconds)
        self.schema = self.checked(schema)
        self.staging_schema = self.checked(staging_schema or f"{schema}_staging")
        self.control_schema = self.checked(control_schema)
        self.lock_timeout_seconds = int(lock_timeout_seconds)

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

    @staticmethod
    def lit(value: int) -> str:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TargetError(f"{value!r} is not an integer bound")
        return str(value)

    def render(self, template: str, **context: Any) -> list[str]:
        """Render `include/sql/<engine>/<template>` into its statements, in order."""
        text = _jinja(self.engine).get_template(template).render(
            q=self.q, qn=self.qualified, lit=self.lit, schema=self.schema,
            staging_schema=self.staging_schema, control_schema=self.control_schema,
            lock_timeout_seconds=self.lock_timeout_seconds, **context)
        return split_statements(text)

    def columns(self, table: Table) -> list[dict[str, str]]:
        return [{"name": c.name, "type": c.sql_type(self.engine)} for c in table.columns]

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

    def script(self, plan: LoadPlan) -> str:
        """The whole load as one reviewable script, in execution order."""
        out = [f"-- Switchyard load plan: spec {self.spec.name}, {plan.streams} streams, target {self.engine}",
               "-- objects"]
        out += [stmt + ";" for stmt in self.setup_sql(plan)]
        for s in plan.all_streams():
            if s.empty:
                continue
            out.append(f"\n-- {s.group_id}: {s.file}, keys {s.key_min}..{s.key_max}")
            for stmt in [*self.prepare_sql(s), *self.load_sql(s), *self.switch_sql(s, replace_existing=False)]:
                out.append(stmt + ";")
        return "\n".join(out) + "\n"

    # --- execution ----------------------------------------------------------------------
    @abstractmethod
    def setup(self, plan: LoadPlan) -> None: ...

    @abstractmethod
    def prepare(self, stream: StreamPlan) -> None: ...

    @abstractmethod
    def load(self, stream: StreamPlan, path: Path, progress: ProgressCallback | None = None) -> LoadResult: ...

    @abstractmethod
    def switch(self, stream: StreamPlan) -> dict[str, Any]: ...

    def release_lease(self) -> None:
        """Give up this run's lease on the target schema, if the engine keeps one."""

    @abstractmethod
    def sqlalchemy_url(self) -> str:
        """For validation with Great Expectations."""

    @abstractmethod
    def scheduler_count(self) -> int:
        """How many loads the server runs side by side at full speed: the pool size."""

    def server_snapshot(self) -> dict | None:
        """The server's cumulative wait counters now, JSON-serialisable (it travels through
        XCom); None where the engine keeps none worth comparing."""
        return None

    def server_delta(self, before: dict, after: dict, top: int = 10) -> dict:
        """What the server waited on between two `server_snapshot()`s, busiest first."""
        return {}


def split_statements(text: str) -> list[str]:
    """Statements end with ';' at the end of a line (templates never put one inside a literal)."""
    out = []
    for part in re.split(r";[ \t]*(?:\n|$)", text):
        lines = [ln for ln in part.strip().splitlines()]
        body = "\n".join(lines).strip()
        if body and not all(ln.strip().startswith("--") or not ln.strip() for ln in lines):
            out.append(body)
    return out


def adapter_class(engine: str) -> type[TargetAdapter]:
    if engine in ("postgres", "postgresql"):
        from .postgres import PostgresAdapter
        return PostgresAdapter
    if engine == "mssql":
        from .mssql import MssqlAdapter  # type: ignore[import-not-found]
        return MssqlAdapter
    raise TargetError(f"no target adapter for connection type {engine!r} (known: postgres, mssql)")


def adapter_for(conn_id: str, spec: LoadSpec, **options: Any) -> TargetAdapter:
    """The adapter for an Airflow connection, chosen by its connection type."""
    from airflow.sdk import BaseHook
    conn = BaseHook.get_connection(conn_id)
    return adapter_class(conn.conn_type)(spec, conn_id=conn_id, **options)
