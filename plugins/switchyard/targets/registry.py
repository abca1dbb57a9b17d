"""Which adapter serves a connection type: one line per target engine, and nothing else knows
the engines. An adapter is imported only when a connection of its type is used, so an engine
whose driver is not installed costs nothing until then. This module imports nothing of the
targets itself: the scheduler's preload reads it in every Airflow process.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from switchyard.targets.base import TargetAdapter

# Airflow connection type -> "module:class" of its adapter.
ADAPTERS = {
    "postgres": "switchyard.targets.postgres:PostgresAdapter",
    "postgresql": "switchyard.targets.postgres:PostgresAdapter",
    "mssql": "switchyard.targets.mssql:MssqlAdapter",
}
# The engines' own names (an adapter's `engine`), in the order tools list them.
ENGINES = ("postgres", "mssql")
# Engine -> the third-party modules its tasks import (its driver, its Airflow hook), which the
# scheduler imports once for every task process it forks, with the engine's own package
# (airflow/preload.py). SQL Server's: none, since its ODBC driver needs native libraries that a
# scheduler's host may lack.
PRELOAD = {
    "postgres": ("psycopg", "airflow.providers.postgres.hooks.postgres"),
    "mssql": (),
}


# Engines installed from other packages: an entry point in this group, named after the Airflow
# connection type (and engine) it serves, whose value is its adapter's "module:Class". A package
# of its own adds an engine without a change here.
ENTRY_POINTS = "switchyard.targets"


def installed() -> dict[str, str]:
    """Connection type -> "module:Class" of the engines other packages install."""
    from importlib.metadata import entry_points
    return {e.name: e.value for e in entry_points(group=ENTRY_POINTS) if e.name not in ADAPTERS}


def engines() -> tuple[str, ...]:
    """Every engine's name: the built-in ones, then the installed ones."""
    return ENGINES + tuple(sorted(installed()))


def adapter_class(conn_type: str) -> type[TargetAdapter]:
    """The adapter class for an Airflow connection type (or an engine's name)."""
    found = ADAPTERS.get(conn_type) or installed().get(conn_type)
    if found is None:
        from switchyard.targets.base import TargetError
        raise TargetError(f"no target adapter for connection type {conn_type!r} (known: "
                          f"{', '.join(engines())})")
    module, name = found.split(":")
    return getattr(importlib.import_module(module), name)


def preload_modules() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(third-party modules, Switchyard's engine packages) for the scheduler to import once."""
    preloaded = [engine for engine in ENGINES if PRELOAD.get(engine)]
    return (tuple(m for engine in preloaded for m in PRELOAD[engine]),
            tuple(ADAPTERS[engine].split(":")[0] for engine in preloaded))
