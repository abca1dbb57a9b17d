"""What the staging table's constraints cost the server per row.

The PostgreSQL adapter's own prepare and load of one file (the batch's biggest), one load at a
time so that the server's CPU during each is that load's, in three variants, in rotating order:

- `staging`: the staging table as the product makes it: each column's NOT NULL (the target's),
  the partition's range CHECK, the CHECK that the trailing field after each line's last
  delimiter is empty, and the target's other CHECKs;
- `none`: every one of those dropped after the prepare: what the COPY costs without any;
- `proven after`: the range CHECK and the NOT NULLs dropped after the prepare (the trailing
  field's CHECK kept: its column is dropped by the load, so it can only be checked during the
  COPY) and proven after the load by one ALTER TABLE, which checks them all in one scan of
  the table: the "validated once" alternative.

The server's CPU of each is the PostgreSQL process tree's (backends reaped by the postmaster
included), from before the load to after it (and after the proof); autovacuum is off on the
staging table so that no analyse of it falls into the next load's window.
"""
from __future__ import annotations

from pathlib import Path

from switchyard_dev.bench.common import biggest_file_set_up, postmaster_pid, reset_schema, say, spread

CONSTRAINTS_SCHEMA = "bench_constraints"
VARIANTS = ("staging", "none", "proven after")


def _constraints(cur, staging: str) -> tuple[list[tuple[str, str]], list[str]]:
    """The staging table's CHECK constraints (name, definition) and its NOT NULL columns."""
    cur.execute("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = to_regclass(%s) AND contype = 'c' ORDER BY conname", (staging,))
    checks = list(cur.fetchall())
    cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
                "AND NOT attisdropped AND attnotnull ORDER BY attnum", (staging,))
    return checks, [r[0] for r in cur.fetchall()]


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _drop(cur, staging: str, checks: list[tuple[str, str]], not_null: list[str]) -> None:
    parts = [f"DROP CONSTRAINT {_q(name)}" for name, _ in checks]
    parts += [f"ALTER COLUMN {_q(c)} DROP NOT NULL" for c in not_null]
    if parts:
        cur.execute(f"ALTER TABLE {staging} {', '.join(parts)}")


def _prove(cur, staging: str, checks: list[tuple[str, str]], not_null: list[str]) -> None:
    """All of them in one ALTER TABLE: PostgreSQL checks a command's new constraints in one scan."""
    parts = [f"ADD CONSTRAINT {_q(name)} {definition}" for name, definition in checks]
    parts += [f"ALTER COLUMN {_q(c)} SET NOT NULL" for c in not_null]
    if parts:
        cur.execute(f"ALTER TABLE {staging} {', '.join(parts)}")


def one_load(adapter, stream, path: Path, variant: str) -> dict:
    """Prepare, adjust the constraints for the variant, load (and prove), the server's CPU around it."""
    import psycopg

    from switchyard_dev import cputime
    adapter.prepare(stream)
    staging = adapter.qualified(adapter.staging_schema, stream.staging_table)
    root = {"postgres": postmaster_pid()}
    with psycopg.connect(adapter.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"ALTER TABLE {staging} SET (autovacuum_enabled = false)")
        checks, not_null = _constraints(cur, staging)
        # The trailing field's column: the load drops it, so it can only be checked in the COPY.
        columns = {c.name for c in adapter.spec.table(stream.table).columns}
        eol = [(n, d) for n, d in checks if n.endswith("_eol")]
        proven = [c for c in checks if c not in eol], [c for c in not_null if c in columns]
        if variant == "none":
            _drop(cur, staging, checks, not_null)
        elif variant == "proven after":
            _drop(cur, staging, *proven)
        during_checks, during_not_null = _constraints(cur, staging)
    before = cputime.snapshot(root)
    result = adapter.load(stream, path)
    loaded = cputime.snapshot(root)
    proof_seconds = proof_cpu = None
    if variant == "proven after":
        import time
        started = time.monotonic()
        with psycopg.connect(adapter.uri, autocommit=True) as conn, conn.cursor() as cur:
            _prove(cur, staging, *proven)
        proof_seconds = time.monotonic() - started
        proof_cpu = cputime.delta(loaded, cputime.snapshot(root))["postgres"]
    load_cpu = cputime.delta(before, loaded)["postgres"]
    return {"variant": variant, "rows": result.rows, "load_seconds": round(result.seconds, 3),
            "server_cpu_load": round(load_cpu, 3), "server_cpu_proof": proof_cpu,
            "proof_seconds": None if proof_seconds is None else round(proof_seconds, 3),
            "server_cpu": round(load_cpu + (proof_cpu or 0.0), 3),
            "checks": [n for n, _ in checks], "not_null_columns": len(proven[1]),
            # What the table had while the COPY ran.
            "checks_during_load": [n for n, _ in during_checks], "not_null_during_load": len(during_not_null)}


def run_constraints(uri: str, folder: Path, files: list[dict], repeat: int) -> dict:
    """The three variants on the batch's biggest file, `repeat` rounds in rotating order."""
    adapter, stream, path = biggest_file_set_up(uri, folder, files, CONSTRAINTS_SCHEMA)
    biggest = files[0]
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    try:
        for r in range(repeat):
            order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
            for variant in order:
                x = one_load(adapter, stream, path, variant)
                runs[variant].append(x)
                proof = (f" + proof {x['server_cpu_proof']:.2f} CPU s in {x['proof_seconds']:.2f} s"
                         if x["server_cpu_proof"] is not None else "")
                print(f"    round {r + 1} {variant:<13} {x['rows']:,} rows, load {x['load_seconds']:.2f} s, "
                      f"server {x['server_cpu_load']:.2f} CPU s{proof}", flush=True)
    finally:
        reset_schema(uri, CONSTRAINTS_SCHEMA, adapter.staging_schema, create=False)
    rows = runs["none"][0]["rows"]
    out: dict = {"table": stream.table, "stream": stream.stream, "rows": rows, "bytes": biggest["bytes"],
                 "rounds": repeat, "checks": runs["staging"][0]["checks"],
                 "not_null_columns": runs["staging"][0]["not_null_columns"], "variants": {}}
    for variant, rs in runs.items():
        out["variants"][variant] = {
            "server_cpu": spread([x["server_cpu"] for x in rs]),
            "load_seconds": spread([x["load_seconds"] for x in rs]),
            "server_cpu_proof": spread([x["server_cpu_proof"] for x in rs]) if variant == "proven after" else None,
            # Paired with the same round's `none`: the constraints' own cost, per million rows.
            "added_cpu_per_million_rows": spread([(x["server_cpu"] - n["server_cpu"]) / rows * 1e6
                                                  for x, n in zip(rs, runs["none"])]),
        }
    return out


def print_constraints(result: dict) -> None:
    say(f"what the staging table's constraints cost the server: {result['table']} stream {result['stream']}, "
        f"{result['rows']:,} rows, {result['rounds']} rounds in rotating order, one load at a time")
    print(f"    constraints: {result['not_null_columns']} NOT NULL columns; CHECKs {', '.join(result['checks'])}")
    print(f"    {'variant':<14}{'server CPU s':>22}{'load s':>22}{'added CPU s per M rows':>30}")
    for variant, v in result["variants"].items():
        cpu, wall, added = v["server_cpu"], v["load_seconds"], v["added_cpu_per_million_rows"]
        print(f"    {variant:<14}{_cell(cpu):>22}{_cell(wall):>22}{_cell(added, 3):>30}")
    none = result["variants"]["none"]["server_cpu"]["median"]
    for variant in ("staging", "proven after"):
        v = result["variants"][variant]["server_cpu"]["median"]
        print(f"    {variant}: x{v / none:.3f} the server CPU of the same load without constraints", flush=True)


def _cell(s: dict, digits: int = 2) -> str:
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"
