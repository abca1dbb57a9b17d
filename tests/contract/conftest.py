"""One contract suite over every engine: each case in this folder runs once per engine, through
the adapter API the DAG uses, against a real server. PostgreSQL runs always (the embedded
server); SQL Server runs when SWITCHYARD_MSSQL_URI names a server, and is skipped otherwise
(counted as skipped: the cases are listed for it all the same).

What a case needs of an engine beyond the adapter API (a fingerprint of a table, the identity of
its partitions, the statement a DBA runs for a dead run's lease, clean-up) is an `Engine` below;
a new engine joins the suite by adding one, and one line to ENGINES. `flavour` is a third engine
installed from a package of its own (tests/engines/flavour/): PostgreSQL under another name,
found by its entry point, on the same embedded server.
"""
from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Any, Callable

import pytest

from switchyard.core.spec import LoadSpec


@dataclass
class Engine:
    name: str
    # (spec, holder, ttl) -> an adapter on this engine's schema for the test, bound to a run
    make: Callable[..., Any]
    schema: str
    # The batch folder the engine's loads read (SQL Server's BULK INSERT: a folder it sees).
    folder: Callable[[Any], Any]
    # table -> (rows, an order-independent checksum of the rows)
    fingerprint: Callable[[Any, list[str]], dict]
    # partition -> the storage's identity: a switched-in partition is new storage
    partition_ids: Callable[[Any, str], dict]
    # The statement a LeaseHeld message gives for a run that is dead, for this schema.
    lease_release_by_hand: str


def postgres(request) -> Engine:
    import psycopg
    from helpers import fingerprint, partition_oids
    from switchyard.targets.postgres import PostgresAdapter
    uri = request.getfixturevalue("pg_uri")
    schema = request.getfixturevalue("schema")  # dropped after the test
    request.addfinalizer(lambda: _pg_drop_lease(psycopg, uri, schema))

    def make(spec: LoadSpec, holder: str | None = None, ttl: int = 60) -> PostgresAdapter:
        return PostgresAdapter(spec, uri=uri, schema=schema, lease_holder=holder, lease_batch=f"batch-of-{holder}",
                               lease_ttl_seconds=ttl)
    return Engine(
        name="postgres", make=make, schema=schema, folder=lambda folder: folder,
        fingerprint=lambda adapter, tables: fingerprint(uri, schema, tables),
        partition_ids=lambda adapter, table: partition_oids(uri, schema, table),
        lease_release_by_hand=f"DELETE FROM \"switchyard\".\"run_lease\" WHERE target_schema = '{schema}'")


def flavour(request) -> Engine:
    from switchyard.targets import adapter_class
    engine = postgres(request)
    uri, schema = request.getfixturevalue("pg_uri"), engine.schema
    adapter = adapter_class("flavour")  # through the registry, as a connection of its type finds it

    def make(spec: LoadSpec, holder: str | None = None, ttl: int = 60):
        return adapter(spec, uri=uri, schema=schema, lease_holder=holder, lease_batch=f"batch-of-{holder}",
                       lease_ttl_seconds=ttl)
    engine.name, engine.make = "flavour", make
    return engine


def _pg_drop_lease(psycopg, uri: str, schema: str) -> None:
    with psycopg.connect(uri, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('switchyard.run_lease')").fetchone()[0]:
            conn.execute("DELETE FROM switchyard.run_lease WHERE target_schema = %s", (schema,))


def mssql(request) -> Engine:
    uri = os.environ.get("SWITCHYARD_MSSQL_URI")
    if not uri:
        pytest.skip("SQL Server: set SWITCHYARD_MSSQL_URI=mssql://user:password@host:port/database?... to run "
                    "this case on it (tests/contract/test_mssql_contract.py's docstring)")
    from test_mssql_contract import (FINGERPRINT_SQL, LEASE_CLEANUP_SQL, PARTITION_IDS_SQL, TABLES, drop_sql,
                                     load_options, shared_batch)
    from switchyard.targets.mssql import MssqlAdapter
    schema = f"k_{uuid.uuid4().hex[:8]}"
    made: list[MssqlAdapter] = []

    def make(spec: LoadSpec, holder: str | None = None, ttl: int = 60) -> MssqlAdapter:
        made.append(MssqlAdapter(spec, uri=uri, schema=schema, lease_holder=holder, lease_batch=f"batch-of-{holder}",
                                 lease_ttl_seconds=ttl, **load_options()))
        return made[-1]

    def clean() -> None:
        if made:
            # Every table of the specs the case loaded (TPC-H's, or a spec of the case's own).
            made[0].execute(drop_sql(made[0], sorted({t for a in made for t in a.spec.table_names} | set(TABLES))))
            with made[0].connection() as conn:
                conn.cursor().execute(LEASE_CLEANUP_SQL, schema)
    request.addfinalizer(clean)
    return Engine(
        name="mssql", make=make, schema=schema, folder=lambda folder: shared_batch(folder)[1],
        fingerprint=lambda a, tables: {t: tuple(a.fetch(FINGERPRINT_SQL.format(table=a.qualified(a.schema, t)))[0])
                                       for t in tables},
        partition_ids=lambda a, table: dict(a.fetch(PARTITION_IDS_SQL, (a.qualified(a.schema, table),))),
        lease_release_by_hand=f"DELETE FROM [switchyard].[run_lease] WHERE [target_schema] = N'{schema}'")


ENGINES = {"postgres": postgres, "mssql": mssql, "flavour": flavour}


@pytest.fixture(params=[pytest.param(name, marks=[pytest.mark.mssql] if name == "mssql" else [])
                        for name in ENGINES])
def engine(request) -> Engine:
    return ENGINES[request.param](request)
