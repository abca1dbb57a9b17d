"""The levers measured before the benchmark's Airflow starts (its idle services would take CPU
from the COPY sessions): the floor's COPY variants and the bulk-load server settings against
PostgreSQL's defaults, in rotating order; validation with every expectation scanning against the
key proven by the staging table's constraints."""
from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from switchyard_dev.bench.common import _literal, reset_schema, say, spread
from switchyard_dev.bench.floor import (
    FLOOR_SCHEMA,
    TABLESPACE_PREFIX,
    VARIANTS,
    run_floor,
)
from switchyard_dev.bench.loader import LOADER_SCHEMA, resolve

# The settings lever's second server: SWITCHYARD_BENCH_DEFAULTS_PG_PORT, else a free port.
DEFAULTS_PG_PORT_ENV = "SWITCHYARD_BENCH_DEFAULTS_PG_PORT"


# PostgreSQL's own defaults for what embedded.BULK_LOAD_SETTINGS changes (PostgreSQL 18).
POSTGRES_DEFAULTS = {
    "wal_level": "replica", "max_wal_senders": "10", "max_wal_size": "'1GB'",
    "checkpoint_timeout": "'5min'", "synchronous_commit": "on", "shared_buffers": "'128MB'",
    "maintenance_work_mem": "'64MB'",
}


# --- COPY variants and server settings ---------------------------------------------------------
def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def defaults_pg_port() -> int:
    from switchyard_dev.settings import value
    return value(DEFAULTS_PG_PORT_ENV) or free_port()


def defaults_server():
    """A second embedded PostgreSQL with PostgreSQL's default settings, for the settings lever."""
    from switchyard_dev.embedded import EmbeddedPostgres, state_dir
    pg = EmbeddedPostgres(root=state_dir() / "bench" / "pg-defaults", port=defaults_pg_port())
    fresh = not (pg.pgdata / "PG_VERSION").exists()
    pg.start()
    if fresh:
        with open(pg.pgdata / "postgresql.auto.conf", "a") as fh:
            fh.write("# the benchmark's reference: PostgreSQL's defaults (later lines win)\n")
            for key, value in POSTGRES_DEFAULTS.items():
                fh.write(f"{key} = {value}\n")
        pg.stop()
        pg.start()
    return pg


def let_server_read(folder: Path) -> None:
    """As root the embedded server runs as its own user: let it read the batch (server-side COPY)."""
    if os.geteuid() == 0:
        from switchyard_dev.embedded import _open_up
        _open_up(folder, 0o044)


def create_tablespaces(uri: str, slots: int) -> dict:
    """One tablespace per session in its own directory; where they sit (device ids) is reported."""
    import psycopg

    from switchyard_dev.embedded import OS_USER, state_dir
    base = state_dir() / "bench" / "tablespaces"
    drop_tablespaces(uri, slots)
    devices = {}
    with psycopg.connect(uri, autocommit=True) as conn:
        pgdata = conn.execute("SHOW data_directory").fetchone()[0]
        for k in range(1, slots + 1):
            d = base / str(k)
            d.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                import shutil
                shutil.chown(d, OS_USER, OS_USER)
                for parent in d.parents:
                    parent.chmod(parent.stat().st_mode | 0o011)
            conn.execute(f'CREATE TABLESPACE "{TABLESPACE_PREFIX}{k}" LOCATION {_literal(str(d))}')
            devices[str(d)] = os.stat(d).st_dev
    devices["data_directory"] = os.stat(pgdata).st_dev
    return {"directories": devices, "same_device": len(set(devices.values())) == 1}


def drop_tablespaces(uri: str, slots: int) -> None:
    import psycopg
    with psycopg.connect(uri, autocommit=True) as conn:
        for k in range(1, slots + 1):
            conn.execute(f'DROP TABLESPACE IF EXISTS "{TABLESPACE_PREFIX}{k}"')


def run_copy_levers(uri: str, files: list[dict], slots: int, repeat: int, folder: Path) -> dict:
    """The floor's variants and server settings, side by side, in rotating order."""
    let_server_read(folder)
    tablespaces = create_tablespaces(uri, slots)
    say("levers: defaults server (PostgreSQL's own settings)")
    other = defaults_server()
    try:
        cases = {name: (uri, name) for name, v in VARIANTS.items() if not v.get("unique_index")}
        cases["server_defaults"] = (other.uri(), "freeze_dummy")
        runs: dict[str, list[dict]] = {name: [] for name in cases}
        names = list(cases)
        for r in range(repeat):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                target, variant = cases[name]
                result = run_floor(target, files, slots, variant, label=name, scan=True)
                runs[name].append({k: result[k] for k in ("rows_per_s", "mb_per_s", "wall_seconds",
                                                          "scan_seconds_total", "load_and_scan_wall_seconds")})
                print(f"    round {r + 1} {name:<16} {result['rows_per_s']:>12,.0f} rows/s "
                      f"{result['wall_seconds']:7.2f} s; first scan after it {result['scan_seconds_total']:.2f} s",
                      flush=True)
    finally:
        other.stop()
        reset_schema(uri, FLOOR_SCHEMA, create=False)
        drop_tablespaces(uri, slots)
    base = runs["freeze_dummy"]
    out = {}
    for name, rs in runs.items():
        ratios = [x["rows_per_s"] / b["rows_per_s"] for x, b in zip(rs, base)]
        out[name] = {"rows_per_s": spread([x["rows_per_s"] for x in rs]),
                     "wall_seconds": spread([x["wall_seconds"] for x in rs]),
                     "ratio_to_freeze_dummy": spread(ratios), "variant": cases[name][1],
                     "first_scan_seconds_total": spread([x["scan_seconds_total"] for x in rs]),
                     "load_and_scan_wall_seconds": spread([x["load_and_scan_wall_seconds"] for x in rs]),
                     "server": "defaults" if name == "server_defaults" else "bulk-load settings"}
    out["tablespaces"]["placement"] = tablespaces
    return out


# --- validation --------------------------------------------------------------------------------
_GX_IMPORT = """
import json, resource, time
t = time.perf_counter()
import great_expectations, great_expectations.expectations
print(json.dumps({"seconds": time.perf_counter() - t,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def gx_import_cost(rounds: int = 2) -> dict:
    """Importing GX in a fresh process: the cost every validate task pays without the preload."""
    import subprocess
    runs = [json.loads(subprocess.run([sys.executable, "-c", _GX_IMPORT], check=True, capture_output=True,
                                      text=True, env=dict(os.environ, GX_ANALYTICS_ENABLED="False"))
                       .stdout.strip().splitlines()[-1]) for _ in range(rounds)]
    return {"seconds": spread([r["seconds"] for r in runs]), "max_rss_mb": spread([r["max_rss_mb"] for r in runs])}


def run_validation_lever(uri: str, folder: Path, files: list[dict], repeat: int) -> dict:
    """GX with every expectation scanning vs GX counting rows with the key proven by constraints,
    on the biggest file of each of lineitem and orders, loaded by the adapter (GX imported first)."""
    from switchyard.core.batch import read_manifest
    from switchyard.core.planner import plan_batch
    from switchyard.core.spec import load_spec
    from switchyard.observability.validation import validate_table
    from switchyard.targets.postgres import PostgresAdapter
    spec = load_spec("tpch")
    tables = [t for t in ("lineitem", "orders") if any(f["table"] == t for f in files)]
    plan = plan_batch(spec, read_manifest(folder, spec), tables)
    adapter = PostgresAdapter(spec, uri=uri, schema=LOADER_SCHEMA)
    reset_schema(uri, LOADER_SCHEMA, adapter.staging_schema, create=False)
    adapter.setup(plan)
    chosen = [max((s for s in t.streams if not s.empty), key=lambda s: s.rows) for t in plan.tables]
    import great_expectations  # noqa: F401  (import time is not what this lever compares)
    out: dict[str, Any] = {"gx_import_fresh_process": gx_import_cost()}
    try:
        for s in chosen:
            adapter.prepare(s)
            adapter.load(s, resolve(folder, s.file))
            times: dict[str, list[float]] = {"all four through GX": [], "row count through GX, key proven": []}
            for r in range(repeat):
                for name in (list(times) if r % 2 == 0 else list(times)[::-1]):
                    o = validate_table(adapter.sqlalchemy_url(), adapter.staging_schema, s.staging_table,
                                       spec.table(s.table).key, s.rows, s.key_min, s.key_max,
                                       trust_constraints=name != "all four through GX")
                    if not o.success:
                        raise RuntimeError(f"validation lever: {s.group_id} failed validation: {o.failures()}")
                    times[name].append(o.seconds - o.import_seconds)
            full, lean = times.values()
            out[s.group_id] = {"rows": s.rows, **{k: spread(v) for k, v in times.items()},
                               "saved_seconds": spread([a - b for a, b in zip(full, lean)])}
            print(f"    {s.group_id} ({s.rows:,} rows): all four through GX {statistics.median(full):.3f} s, "
                  f"key proven {statistics.median(lean):.3f} s", flush=True)
    finally:
        reset_schema(uri, LOADER_SCHEMA, adapter.staging_schema, create=False)
    return out
