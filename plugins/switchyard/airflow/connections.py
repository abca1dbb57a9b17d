"""An Airflow connection -> the target adapter of its engine.

The one module that looks connections up through Airflow and builds what an adapter needs
from them; the adapters themselves never import Airflow. PostgreSQL gets a connect callable
and a SQLAlchemy URL from the provider's `PostgresHook` (login, SSL and the other extras
handled as Airflow does). SQL Server gets an endpoint (host, port, login, database, ODBC
attributes) and its adapter settings, both read from the connection's fields and extra.
"""
from __future__ import annotations

import os
from typing import Any

from switchyard.core.spec import LoadSpec
from switchyard.targets import TargetAdapter, TargetError, adapter_class


class ConnectionMissing(LookupError):
    """No Airflow connection of that id in any of Airflow's places."""


def get_connection(conn_id: str) -> Any:
    """The connection as a task sees it (Task SDK: environment, secrets backends, the API)."""
    from airflow.sdk import BaseHook
    return BaseHook.get_connection(conn_id)


def adapter_for(conn_id: str, spec: LoadSpec, **options: Any) -> TargetAdapter:
    """The adapter for an Airflow connection, chosen by its connection type."""
    conn = get_connection(conn_id)
    # The adapter reuses the connection it was chosen by: one lookup (an API call from a task).
    engine = adapter_class(conn.conn_type).engine
    if engine == "postgres":
        connect, url = _postgres(conn_id, conn)
        # The COPY slot guard's settings, from the connection's extra (targets/postgres/slots.py).
        extra = getattr(conn, "extra_dejson", None) or {}
        slots = {key: extra[key] for key in POSTGRES_ADAPTER_EXTRAS if key in extra}
        return adapter_class(engine)(spec, conn_id=conn_id, connect=connect, url=url, **slots, **options)
    if engine == "mssql":
        from switchyard.targets.mssql.settings import parse_connection
        endpoint, settings = parse_connection(host=conn.host, port=conn.port, login=conn.login,
                                              password=conn.password, schema=conn.schema,
                                              extra=getattr(conn, "extra_dejson", None) or {})
        return adapter_class(engine)(spec, conn_id=conn_id, endpoint=endpoint, connection_settings=settings,
                                     **options)
    raise TargetError(f"connection {conn_id!r}: no mapping for the {engine} engine")


# The PostgreSQL connection's extra keys that are the adapter's, not the driver's: PostgresHook
# hands every other extra key to psycopg as a connection option, which refuses unknown ones.
POSTGRES_ADAPTER_EXTRAS = ("copy_slots", "copy_slot_wait_seconds", "copy_slot_release")


def _postgres(conn_id: str, conn: Any):
    """(connect, url) over one PostgresHook, made at first use: importing the provider costs a
    task that never connects nothing, and the hook looks nothing up again."""
    hook = None

    def the_hook():
        nonlocal hook
        if hook is None:
            from airflow.providers.postgres.hooks.postgres import PostgresHook
            hook = PostgresHook(postgres_conn_id=conn_id, connection=conn)
            hook.ignored_extra_options = set(hook.ignored_extra_options) | set(POSTGRES_ADAPTER_EXTRAS)
        return hook

    def connect():
        return the_hook().get_conn()

    def url() -> str:
        return the_hook().sqlalchemy_url.render_as_string(hide_password=False)

    return connect, url


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
