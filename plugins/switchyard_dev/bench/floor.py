"""The floor: the batch's files loaded by as many raw `COPY ... FREEZE` sessions as there are
slots (psycopg, no Airflow), what the server allows. Its variants are the ways a file can reach
its table (the COPY levers compare them); one of them, the floor with the target's unique
indexes, builds each table's unique index after its COPY in the same transaction: the end state
of the DAG's staging tables."""
from __future__ import annotations

import os
from typing import Any

from switchyard_dev.bench.common import (
    _literal,
    _r,
    now,
    reset_schema,
    run_parallel,
    summarise,
)

FLOOR_SCHEMA = "bench_floor"


_CHUNK = 1 << 20


# The floor's variants: how the file reaches the table. `dummy` takes the empty field
# after each line's trailing '|'; `strip` removes that '|' while streaming instead.
VARIANTS = {
    "freeze_dummy": {"format": "text", "freeze": True, "eol": "dummy"},
    "nofreeze_dummy": {"format": "text", "freeze": False, "eol": "dummy"},
    "csv_dummy": {"format": "csv", "freeze": True, "eol": "dummy"},
    # CSV that takes every field literally (the loader's format when a NULL marker applies
    # to some columns only): quote byte 0x01, no field NULL.
    "csv_exact": {"format": "csv_exact", "freeze": True, "eol": "dummy"},
    "strip_stream": {"format": "text", "freeze": True, "eol": "strip"},
    # The server reads the file itself (COPY ... FROM '<file>'), no client streaming.
    "server_file": {"format": "text", "freeze": True, "eol": "dummy", "source": "server"},
    # One tablespace per session, each in its own directory (the record's filegroup per stream).
    "tablespaces": {"format": "text", "freeze": True, "eol": "dummy", "tablespaces": True},
    # The floor with the target's unique index: after each file's COPY, in the same session and
    # transaction, the unique index the product builds on that table's staging tables (the
    # spec's `unique` columns), so that it ends where the DAG's staging tables end: the data and
    # the target's unique index. Not a way of loading: the COPY levers leave it out.
    "freeze_unique": {"format": "text", "freeze": True, "eol": "dummy", "unique_index": True},
}


# The floor with the target's unique indexes, as the report names it.
UNIQUE_FLOOR = "floor with the target's unique indexes"


TABLESPACE_PREFIX = "bench_ts_"


def _stripped(fh):
    """The file's bytes with each line's trailing '|' removed, in chunks of whole lines."""
    carry = b""
    while chunk := fh.read(_CHUNK):
        buf = carry + chunk
        cut = buf.rfind(b"\n") + 1
        carry = buf[cut:]
        yield buf[:cut].replace(b"|\n", b"\n")
    if carry:
        yield carry[:-1] if carry.endswith(b"|") else carry


def ident(name: str) -> str:
    """A PostgreSQL identifier, quoted (a double quote inside doubled)."""
    return '"' + name.replace('"', '""') + '"'


def floor_unique_index_sql(schema: str, table: str, columns: list[str] | tuple[str, ...]) -> str:
    """The target's unique index on a floor table: the spec's unique columns, in their order, as
    the adapter builds it on a staging table (unique_index.sql), named `<table>_unique`."""
    if not columns:
        raise ValueError(f"{table}: no unique columns, no unique index")
    return (f"CREATE UNIQUE INDEX {ident(table + '_unique')} ON {ident(schema)}.{ident(table)} "
            f"({', '.join(ident(c) for c in columns)})")


def floor_one(job: tuple) -> dict:
    """One file into a fresh table by one COPY session, created in the loading transaction
    (and, for the unique-index variant, the table's unique index built after the COPY in the
    same transaction)."""
    import psycopg

    from switchyard_dev import cputime
    uri, schema, f, variant, scan = job
    v = VARIANTS[variant]
    name = f'{f["table"]}_{f["stream"]}'
    table = f"{ident(schema)}.{ident(name)}"
    cols = [f'"{n}" {t}' for n, t in f["columns"]]
    if v["eol"] == "dummy":
        cols.append('"eol" text')
    options = {"text": "FORMAT text, DELIMITER '|'", "csv": "FORMAT csv, DELIMITER '|'",
               "csv_exact": "FORMAT csv, DELIMITER '|', QUOTE E'\\x01', FORCE_NOT_NULL *"}[v["format"]]
    if v["freeze"]:
        options += ", FREEZE"
    where = f' TABLESPACE "{f["tablespace"]}"' if v.get("tablespaces") else ""
    start = now()
    with psycopg.connect(uri, application_name="switchyard-bench") as conn:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS {table}")
            cur.execute(f"CREATE TABLE {table} ({', '.join(cols)}){where}")
            if v.get("source") == "server":
                cur.execute(f"COPY {table} FROM {_literal(f['path'])} ({options})")
            else:
                with open(f["path"], "rb") as fh, cur.copy(f"COPY {table} FROM STDIN ({options})") as cp:
                    for chunk in (_stripped(fh) if v["eol"] == "strip" else iter(lambda: fh.read(_CHUNK), b"")):
                        # Text format as is is byte-exact only for data without a backslash
                        # (TPC-H's): the floor refuses other data rather than change it.
                        if v["format"] == "text" and b"\\" in chunk:
                            raise RuntimeError(f"{f['path']}: holds a backslash, which the floor's text "
                                               f"format would change")
                        cp.write(chunk)
            rows = cur.rowcount
            copied = now()
            index_seconds = index_cpu = None
            if v.get("unique_index") and f.get("unique"):
                # The index build with the settings the product's validate step gives it.
                for setting, value in product_step_settings().items():
                    cur.execute("SELECT set_config(%s, %s, true)", (setting, value))
                backend = conn.info.backend_pid
                cpu_before = cputime.process_cpu(backend)
                cur.execute(floor_unique_index_sql(schema, name, f["unique"]))
                index_seconds = round(now() - copied, 4)
                cpu_after = cputime.process_cpu(backend)
                if cpu_before is not None and cpu_after is not None:
                    index_cpu = round(cpu_after - cpu_before, 3)
        end = now()
        scan_seconds = None
        if scan:
            # The first read after a load without FREEZE sets hint bits and writes every page
            # again: a load option is only cheaper if it stays cheaper through this scan.
            conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            scan_seconds = round(now() - end, 4)
    return {"table": f["table"], "stream": f["stream"], "rows": rows, "bytes": f["bytes"], "start": start,
            "end": end, "seconds": round(end - start, 4), "scan_seconds": scan_seconds, "pid": os.getpid(),
            "copy_seconds": round(copied - start, 4), "index_seconds": index_seconds,
            "index_leader_cpu_seconds": index_cpu}


def product_step_settings() -> dict[str, str]:
    """The server settings the product's steps run with (SWITCHYARD_STEP_PARALLELISM)."""
    from switchyard.settings import get
    from switchyard.targets.postgres.session import step_settings
    return step_settings(get().step_parallelism)


def run_floor(uri: str, files: list[dict], slots: int, variant: str = "freeze_dummy", label: str = "floor",
              scan: bool = False) -> dict:
    reset_schema(uri, FLOOR_SCHEMA)
    if VARIANTS[variant].get("tablespaces"):
        files = [dict(f, tablespace=f"{TABLESPACE_PREFIX}{i % slots + 1}") for i, f in enumerate(files)]
    from switchyard_dev.bench.autovacuum import measuring
    try:
        with measuring(uri) as autovacuum:
            records, started, ended, cpu = run_parallel(
                floor_one, [(uri, FLOOR_SCHEMA, f, variant, scan) for f in files], slots)
    finally:
        reset_schema(uri, FLOOR_SCHEMA, create=False)
    bad = [r for r in records if r["rows"] != next(f["rows"] for f in files
                                                    if (f["table"], f["stream"]) == (r["table"], r["stream"]))]
    if bad:
        raise RuntimeError(f"{label}: row counts differ from the manifest for {bad[:3]}")
    extra: dict[str, Any] = {}
    if scan:
        extra["scan_seconds_total"] = round(sum(r["scan_seconds"] for r in records), 3)
        extra["load_and_scan_wall_seconds"] = round(max(r["end"] + r["scan_seconds"] for r in records) - started, 3)
    if VARIANTS[variant].get("unique_index"):
        extra["unique_index"] = index_summary(records)
    return summarise(label, records, started, ended, variant=variant, sessions=slots, cpu_seconds=cpu,
                     autovacuum=autovacuum.result, **extra)


def index_summary(records: list[dict]) -> dict:
    """What the unique-index variant's index builds took: wall seconds in their sessions and the
    CPU seconds of those sessions' own backends, in all and per table. The backend leads the
    build: the parallel workers PostgreSQL adds for a big table (max_parallel_maintenance_workers,
    as for the product's index) are other processes, not counted here; the server tree's CPU
    during the whole floor counts them (unique_floor_cost)."""
    built = [r for r in records if r.get("index_seconds") is not None]
    by_table: dict[str, dict] = {}
    for r in built:
        t = by_table.setdefault(r["table"], {"indexes": 0, "seconds": 0.0, "leader_cpu_seconds": 0.0,
                                             "copy_seconds": 0.0})
        t["indexes"] += 1
        t["seconds"] = round(t["seconds"] + r["index_seconds"], 4)
        t["copy_seconds"] = round(t["copy_seconds"] + r["copy_seconds"], 4)
        if r.get("index_leader_cpu_seconds") is not None:
            t["leader_cpu_seconds"] = round(t["leader_cpu_seconds"] + r["index_leader_cpu_seconds"], 3)
    cpu = [r["index_leader_cpu_seconds"] for r in built if r.get("index_leader_cpu_seconds") is not None]
    return {"indexes": len(built), "seconds_total": round(sum(r["index_seconds"] for r in built), 3),
            "leader_cpu_seconds_total": round(sum(cpu), 3) if cpu else None,
            "copy_seconds_total": round(sum(r["copy_seconds"] for r in records), 3),
            "by_table": dict(sorted(by_table.items(), key=lambda kv: -kv[1]["seconds"]))}


def run_unique_floor(uri: str, files: list[dict], slots: int) -> dict:
    """The floor with the target's unique indexes: the floor's sessions, each file's COPY then its
    table's unique index in the same transaction (the DAG's staging tables' end state)."""
    return run_floor(uri, files, slots, "freeze_unique", label=UNIQUE_FLOOR)


def print_unique_floor(r: dict) -> None:
    ix = r.get("unique_index") or {}
    print(f"    {r['rows_per_s']:,.0f} rows/s in {r['wall_seconds']:.2f} s; {ix.get('indexes', 0)} unique indexes, "
          f"built in {ix.get('seconds_total', 0):.2f} s in all", flush=True)


def unique_floor_cost(floor: dict | None, with_index: dict | None) -> dict:
    """The indexes' cost in the floor: the two floors' wall and server CPU seconds (the PostgreSQL
    tree's, parallel index workers included) side by side, and the index builds' own seconds."""
    if not floor or not with_index:
        return {}
    ix = with_index.get("unique_index") or {}
    cpu0, cpu1 = (floor.get("cpu_seconds") or {}).get("postgres"), (with_index.get("cpu_seconds") or {}).get("postgres")
    return {"floor_wall_seconds": floor["wall_seconds"], "with_indexes_wall_seconds": with_index["wall_seconds"],
            "added_wall_seconds": _r(with_index["wall_seconds"] - floor["wall_seconds"]),
            "floor_server_cpu_seconds": cpu0, "with_indexes_server_cpu_seconds": cpu1,
            "added_server_cpu_seconds": _r(cpu1 - cpu0, 2) if cpu0 is not None and cpu1 is not None else None,
            "index_builds_seconds": ix.get("seconds_total"),
            "index_builds_leader_cpu_seconds": ix.get("leader_cpu_seconds_total"),
            "ratio_to_floor": _r(floor["wall_seconds"] / with_index["wall_seconds"])}
