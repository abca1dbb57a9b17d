"""PostgreSQL: tablespaces for filegroups, declarative range partitions, COPY FREEZE, ATTACH.

The PostgreSQL form of the record-load method:
* filegroup  -> tablespace (optional: a tablespace needs a directory the server owns);
* staging table with a trusted range CHECK -> the same, written as the partition bound
  (`key >= lower AND key < upper + one unit`: 1, 1 day or 1 microsecond for integer, date
  and timestamp keys), which lets ATTACH PARTITION skip its scan;
* the target's unique index (the spec's `unique`) -> built on the staging table during
  validation, where a duplicate fails it; ATTACH adopts it instead of building its own;
* BULK INSERT ... TABLOCK into a heap -> TRUNCATE + COPY ... FREEZE in one transaction
  (with wal_level=minimal the rows are not WAL-logged either);
* SWITCH -> ATTACH PARTITION, of each stream's staging table to the table's next version
  (a partitioned table in the staging schema); the table's last switch then moves the whole
  next version into the target in one transaction, in place of the partitions it replaces
  (replace mode: all of them; append mode: the batch's own from an earlier run), and applies
  the table's retention. Readers see the table before the batch or after it, never a mix.

Staging tables are made LIKE the target as it is (columns, types, nullability, defaults,
CHECK constraints), and a stream's switch builds the target's indexes and unique or primary
key constraints on its staging table before it attaches it, so that ATTACH attaches them
instead of building them under the table's lock.

`setup` checks the batch against the target before anything loads (pre-flight): the table's
partitioning, its columns, and (append mode) the batch's key ranges against the partitions
of other batches, recorded per partition in the control schema's `partition_batches`.

One run at a time loads a schema: a row in the control schema's `run_lease` table names
the run that holds it. Airflow's max_active_runs does not cover backfill runs (they are
counted per backfill) nor a second DAG or Airflow on the same target, and staging tables
have one name per (table, stream): two runs at once would drop each other's staging
tables and mix two batches' partitions. A lease in the target itself covers every case.
It is a row, not a session lock, because a run's steps are separate processes; it
expires when no step renews it for `lease_ttl_seconds`, so a run that died releases it.
The lease's logic is shared with SQL Server in base.py; its SQL is in lease*.sql here.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

from switchyard.core.spec import LoadSpec
from switchyard.targets.base import TargetAdapter, TargetError
from switchyard.targets.postgres.commit import PostgresCommit
from switchyard.targets.postgres.indexes import PostgresIndexes
from switchyard.targets.postgres.load import PostgresLoad
from switchyard.targets.postgres.preflight import PostgresPreflight
from switchyard.targets.postgres.session import PostgresSession
from switchyard.targets.postgres.sql import PostgresSql

# When a load releases its COPY slot: before its commit (the files' sync) or after it.
COPY_SLOT_RELEASE = ("copy", "commit")


class PostgresAdapter(PostgresSql, PostgresSession, PostgresPreflight, PostgresLoad, PostgresIndexes, PostgresCommit,
                      TargetAdapter):
    """The PostgreSQL target: its flags and how it is made (from a URI, an Airflow connection or
    for a script); each step's work is in the module of its concern (the mixins above)."""
    engine = "postgres"
    display_name = "PostgreSQL"
    templates = Path(__file__).resolve().parent / "templates"
    quote_open = quote_close = '"'
    load_names_its_storage = True
    load_stats_columns = ("backend_pid",)

    def column_type(self, column) -> str:
        from switchyard.targets.postgres.types import column_type
        return column_type(column, self.dialect)

    @classmethod
    def permanent_error(cls, exc: BaseException) -> str | None:
        from switchyard.targets.postgres.errors import permanent_error
        return permanent_error(exc)

    gx_datasource = "postgres"
    default_port = 5432

    @classmethod
    def lineage_name(cls, fields: Any, schema: str, table: str) -> str:
        # Without a database in the connection, libpq connects to the login's own.
        return f"{fields.schema or fields.login or 'postgres'}.{schema}.{table}"
    # Login, SSL and the other extras handled as Airflow does.
    airflow_hook = "airflow.providers.postgres.hooks.postgres:PostgresHook"
    # The connection's extra keys that are the adapter's (the COPY slot guard's, slots.py), not
    # the driver's: the hook hands every other extra key to psycopg, which refuses unknown ones.
    ADAPTER_EXTRAS = ("copy_slots", "copy_slot_wait_seconds", "copy_slot_release")

    @classmethod
    def from_connection(cls, spec: LoadSpec, fields: Any, hook: Callable[[], Any] | None = None,
                        **options: Any) -> "PostgresAdapter":
        """A connect callable and a SQLAlchemy URL over the provider's hook, made at first use
        (importing the provider costs a task that never connects nothing)."""
        made = []

        def the_hook():
            if not made:
                h = hook()
                h.ignored_extra_options = set(h.ignored_extra_options) | set(cls.ADAPTER_EXTRAS)
                made.append(h)
            return made[0]

        def connect():
            return the_hook().get_conn()

        def url() -> str:
            return the_hook().sqlalchemy_url.render_as_string(hide_password=False)

        slots = {key: fields.extra[key] for key in cls.ADAPTER_EXTRAS if key in fields.extra}
        if "application_name" in fields.extra:
            # The connection names its client itself (a DBA's choice): the steps keep that name.
            options.pop("session_name", None)
        return cls(spec, conn_id=fields.conn_id, connect=connect, url=url, **slots, **options)

    @classmethod
    def constraint_proofs(cls, url: str, schema: str, table: str, key: str | None, key_min: Any, key_max: Any,
                          not_null: Sequence[str], key_type: str | None = None,
                          loaded_filenode: int | None = None) -> tuple[str | None, dict[str, str], bool]:
        from switchyard.targets.postgres.proofs import constraint_proofs
        return constraint_proofs(url, schema, table, key, key_min, key_max, not_null, key_type, loaded_filenode)

    def proofs_in_session(self, schema: str, table: str, key: str | None, key_min: Any, key_max: Any,
                          not_null: Sequence[str], key_type: str | None = None,
                          loaded_filenode: int | None = None) -> tuple[str | None, dict[str, str], bool]:
        # On the step's session (keep_session), which built the unique index just before: no
        # backend to start and no SQLAlchemy engine to make for three catalog questions.
        from switchyard.targets.postgres.proofs import proofs_on
        with self.connection() as conn:
            return proofs_on(conn, schema, table, key, key_min, key_max, not_null, key_type, loaded_filenode)

    @classmethod
    def for_script(cls, spec: LoadSpec, schema: str, args: Any, ports: list[int] | None = None) -> "PostgresAdapter":
        return cls(spec, uri="postgresql://plan-only", schema=schema)

    def __init__(self, spec: LoadSpec, conn_id: str | None = None, uri: str | None = None,
                 tablespaces: dict[int, str] | None = None, connect: Callable[[], Any] | None = None,
                 url: Callable[[], str] | None = None, copy_slots: int | None = None,
                 copy_slot_wait_seconds: float = 3600.0, copy_slot_release: str = "copy", **options: Any):
        """A URI (`postgresql://...`), or `connect` (returns a new psycopg connection) with `url`
        (returns its SQLAlchemy URL): switchyard/airflow/connections.py builds those two from an
        Airflow connection, and the COPY slot settings from its extra. `conn_id` names the
        connection in messages."""
        super().__init__(spec, **options)
        if not uri and connect is None:
            raise TargetError("PostgreSQL target needs a URI or a connect callable")
        self.conn_id = conn_id
        self.uri = uri
        self._connect_callable = connect
        self._url = url
        self.tablespaces = {k: self.checked(v) for k, v in (tablespaces or {}).items()}
        # How many COPYs the server runs at once (slots.py): the connection's extra
        # {"copy_slots": N} (the server's cores), else this machine's cores (the embedded server
        # runs here); 0 turns the guard off.
        self.copy_slots = int(copy_slots) if copy_slots is not None else (os.cpu_count() or 1)
        self.copy_slot_wait_seconds = float(copy_slot_wait_seconds)
        # When a load gives its slot back (the extra's {"copy_slot_release": ...}): "copy", once
        # its COPY is done, before the commit writes the loaded files to disk and waits for
        # them; "commit", after the commit.
        if copy_slot_release not in COPY_SLOT_RELEASE:
            raise TargetError(f"copy_slot_release: {copy_slot_release!r} is not one of "
                              f"{', '.join(COPY_SLOT_RELEASE)}")
        self.copy_slot_release = copy_slot_release


