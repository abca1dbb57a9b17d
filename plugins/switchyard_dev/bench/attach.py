"""What ATTACH PARTITION does with the parent's indexes, measured on the embedded PostgreSQL.

`python -m switchyard_dev.bench.attach [--scale 1] [--table lineitem] [--streams 1]`

One stream of a TPC-H table is loaded through the PostgreSQL adapter (setup, prepare, load)
and switched in three ways, each into a fresh target:
1. the target has no index: the switch's ATTACH only checks the bound (proved by the CHECK);
2. the target has a primary key and one more index, the staging table none: ATTACH builds
   both on the partition, inside the table's commit, which holds the target's ACCESS
   EXCLUSIVE lock (readers wait);
3. the same target, with the switch building both on the staging table first (what
   Switchyard does): the commit's ATTACH attaches them.
Printed as JSON: load, index build and commit seconds per case.
"""
from __future__ import annotations

import argparse
import json
import time

INDEXES = {
    "lineitem": ["ALTER TABLE {t} ADD PRIMARY KEY (l_orderkey, l_linenumber)",
                 "CREATE INDEX lineitem_by_part ON {t} (l_partkey, l_suppkey)"],
    "orders": ["ALTER TABLE {t} ADD PRIMARY KEY (o_orderkey)",
               "CREATE INDEX orders_by_customer ON {t} (o_custkey, o_orderdate)"],
}


def measure(uri: str, scale: float, table: str, streams: int, schema: str = "attach_bench") -> dict:
    from dataclasses import replace

    import psycopg
    from switchyard.core.batch import data_root
    from switchyard.core.datagen import generate_tpch
    from switchyard.core.planner import plan_batch
    from switchyard.core.spec import load_spec
    from switchyard.targets.postgres import PostgresAdapter
    # Without the spec's unique keys: the target's only indexes are the ones each case gives it.
    tpch = load_spec("tpch")
    spec = replace(tpch, tables=tuple(replace(t, unique=()) for t in tpch.tables))
    folder = data_root() / f"attach-{table}-sf{scale:g}-s{streams}"
    manifest = generate_tpch(folder, spec, scale, streams, tables=[table])
    plan = plan_batch(spec, manifest, [table])
    cases = {}
    for case in ("no index on the target", "ATTACH builds the indexes", "indexes built on staging first"):
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}_staging" CASCADE')
        adapter = PostgresAdapter(spec, uri=uri, schema=schema)
        adapter.setup(plan)
        if case != "no index on the target":
            with psycopg.connect(uri, autocommit=True) as conn:
                for ddl in INDEXES[table]:
                    conn.execute(ddl.format(t=f'"{schema}"."{table}"'))
            adapter.setup(plan)  # the table's next version, made like the target as it is now
        out = {"load_seconds": 0.0, "index_seconds": 0.0, "commit_seconds": 0.0, "rows": 0}
        streams_ = [s for s in plan.table(table).streams if not s.empty]
        for s in streams_:
            adapter.prepare(s)
            loaded = adapter.load(s, folder / s.file)
            out["rows"] += loaded.rows
            out["load_seconds"] = round(out["load_seconds"] + loaded.seconds, 3)
        for s in streams_:
            if case == "indexes built on staging first":
                out["index_seconds"] += adapter._build_target_indexes(s)["index_seconds"]
            started = time.monotonic()
            result = adapter._stage(s)  # attach to the next version; the last one commits the table
            if result.get("table_switched"):
                out["commit_seconds"] = round(time.monotonic() - started, 3)
                out["attach_scan_skipped"] = result["attach_scan_skipped"]
        with psycopg.connect(uri) as conn:
            out["partition_indexes"] = sorted(r[0] for r in conn.execute(
                "SELECT c.relname FROM pg_inherits h JOIN pg_index i ON i.indrelid = h.inhrelid "
                "JOIN pg_class c ON c.oid = i.indexrelid WHERE h.inhparent = %s::regclass",
                (f'"{schema}"."{table}"',)))[:4]
        out["index_seconds"] = round(out["index_seconds"], 3)
        cases[case] = out
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}_staging" CASCADE')
    return {"table": table, "scale": scale, "streams": streams, "indexes": INDEXES[table], "cases": cases}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--table", choices=sorted(INDEXES), default="lineitem")
    parser.add_argument("--streams", type=int, default=1)
    parser.add_argument("--uri", help="target PostgreSQL (default: the embedded server)")
    args = parser.parse_args(argv)
    uri = args.uri
    if not uri:
        from switchyard_dev.embedded import EmbeddedPostgres
        uri = EmbeddedPostgres().start()
    print(json.dumps(measure(uri, args.scale, args.table, args.streams), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
