"""Which adapter serves a connection type: one line per target engine, and nothing else knows
the engines. An adapter is imported only when a connection of its type is used, so an engine
whose driver is not installed costs nothing until then.
"""
from __future__ import annotations

import importlib

from switchyard.targets.base import TargetAdapter, TargetError

# Airflow connection type -> "module:class" of its adapter.
ADAPTERS = {
    "postgres": "switchyard.targets.postgres:PostgresAdapter",
    "postgresql": "switchyard.targets.postgres:PostgresAdapter",
    "mssql": "switchyard.targets.mssql:MssqlAdapter",
}
# The engines' own names (an adapter's `engine`), in the order tools list them.
ENGINES = ("postgres", "mssql")


def adapter_class(conn_type: str) -> type[TargetAdapter]:
    """The adapter class for an Airflow connection type (or an engine's name)."""
    try:
        module, name = ADAPTERS[conn_type].split(":")
    except KeyError:
        raise TargetError(f"no target adapter for connection type {conn_type!r} (known: "
                          f"{', '.join(ENGINES)})") from None
    return getattr(importlib.import_module(module), name)
