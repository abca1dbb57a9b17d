"""An Airflow connection -> the target adapter of its engine.

The one module that looks connections up through Airflow; the adapters themselves never
import Airflow. Each adapter class builds itself from the connection's fields
(`TargetAdapter.from_connection`) and, where it names one (`airflow_hook`), from its
provider's hook, made here over the connection already looked up.
"""
from __future__ import annotations

import os
from typing import Any

from switchyard.core.spec import LoadSpec
from switchyard.targets import TargetAdapter, adapter_class
from switchyard.targets.base import ConnectionFields


class ConnectionMissing(LookupError):
    """No Airflow connection of that id in any of Airflow's places."""


def get_connection(conn_id: str) -> Any:
    """The connection as a task sees it (Task SDK: environment, secrets backends, the API)."""
    from airflow.sdk import BaseHook
    return BaseHook.get_connection(conn_id)


def adapter_for(conn_id: str, spec: LoadSpec, **options: Any) -> TargetAdapter:
    """The adapter for an Airflow connection, chosen by its connection type (targets/registry.py)
    and built by the adapter class from the connection's fields, and from its provider's hook
    where the adapter names one."""
    conn = get_connection(conn_id)
    engine = adapter_class(conn.conn_type)
    return engine.from_connection(spec, _fields(conn_id, conn), hook=_hook(engine.airflow_hook, conn_id, conn),
                                  **options)


def connection_fields(conn_id: str) -> tuple[type[TargetAdapter], ConnectionFields]:
    """(the adapter class, the connection's fields) of an Airflow connection, without a connection
    to the target (lineage names tables from them)."""
    conn = get_connection(conn_id)
    return adapter_class(conn.conn_type), _fields(conn_id, conn)


def _fields(conn_id: str, conn: Any) -> ConnectionFields:
    return ConnectionFields(conn_id=conn_id, host=conn.host, port=conn.port, login=conn.login,
                            password=conn.password, schema=conn.schema,
                            extra=getattr(conn, "extra_dejson", None) or {})


def _hook(path: str | None, conn_id: str, conn: Any):
    """A factory of the provider's hook ("module:Class") over the connection already looked up:
    the adapter reuses the connection it was chosen by, one lookup (an API call from a task)."""
    if path is None:
        return None

    def make():
        import importlib
        module, name = path.split(":")
        hook_class = getattr(importlib.import_module(module), name)
        return hook_class(**{hook_class.conn_name_attr: conn_id}, connection=conn)
    return make


def bridge_connection(conn_id: str) -> None:
    """Make a connection visible to `adapter_for` outside a task.

    Outside a task, the Task SDK's lookup sees environment variables and secrets backends,
    not the metadata database that `airflow connections add/import` writes. A command that
    runs where the airflow CLI would resolves the connection the CLI's way (every backend, the
    metadata database included) and hands it on as AIRFLOW_CONN_<ID>. Raises
    ConnectionMissing when there is none.
    """
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    if variable in os.environ:
        return
    from airflow.exceptions import AirflowNotFoundException
    from airflow.models.connection import Connection
    try:
        conn = Connection.get_connection_from_secrets(conn_id)
    except AirflowNotFoundException as exc:
        raise ConnectionMissing(conn_id) from exc
    os.environ[variable] = conn.as_json()
