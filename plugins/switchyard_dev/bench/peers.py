"""The peers: what a user writes with stock Airflow (PostgresHook.insert_rows, pandas to_sql,
PostgresHook.copy_expert), each measured as one session on a sample of lineitem, its rate
extrapolated to as many sessions as there are slots."""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from switchyard_dev.bench.common import reset_schema

PEER_SCHEMA = "bench_peers"


PEER_CONN_ID = "switchyard_bench_peer"


def _sample_lines(path: str, n: int) -> list[bytes]:
    out = []
    with open(path, "rb") as fh:
        for line in fh:
            out.append(line)
            if len(out) >= n:
                break
    return out


def _peer_table(uri: str, columns: list[tuple[str, str]]) -> str:
    import psycopg
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{PEER_SCHEMA}"')
        conn.execute(f'DROP TABLE IF EXISTS "{PEER_SCHEMA}"."sample"')
        conn.execute(f'CREATE TABLE "{PEER_SCHEMA}"."sample" ({", ".join(f"{n} {t}" for n, t in columns)})')
    return f"{PEER_SCHEMA}.sample"


def peer_insert_rows(uri: str, lines: list[bytes], columns, executemany: bool) -> float:
    from airflow.providers.postgres.hooks.postgres import PostgresHook
    table = _peer_table(uri, columns)
    started = time.monotonic()
    rows = [tuple(line.decode().rstrip("\n").rstrip("|").split("|")) for line in lines]
    PostgresHook(postgres_conn_id=PEER_CONN_ID).insert_rows(
        table, rows, target_fields=[n for n, _ in columns], commit_every=1000, executemany=executemany)
    return time.monotonic() - started


def peer_to_sql(uri: str, lines: list[bytes], columns) -> float:
    import io

    import pandas as pd
    from sqlalchemy import create_engine
    _peer_table(uri, columns)
    engine = create_engine(uri.replace("postgresql://", "postgresql+psycopg://", 1))
    names = [n for n, _ in columns]
    started = time.monotonic()
    dates = [n for n, t in columns if t == "date"]
    frame = pd.read_csv(io.BytesIO(b"".join(lines)), sep="|", header=None, names=names + ["_eol"],
                        usecols=names, parse_dates=dates)
    frame.to_sql("sample", engine, schema=PEER_SCHEMA, if_exists="append", index=False)
    seconds = time.monotonic() - started
    engine.dispose()
    return seconds


def peer_copy_expert(uri: str, path: str, columns) -> float:
    """The hook's COPY (one session, no FREEZE): the stock way that does use COPY."""
    import psycopg
    from airflow.providers.postgres.hooks.postgres import PostgresHook
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{PEER_SCHEMA}"')
        conn.execute(f'DROP TABLE IF EXISTS "{PEER_SCHEMA}"."sample"')
        conn.execute(f'CREATE TABLE "{PEER_SCHEMA}"."sample" '
                     f'({", ".join(f"{n} {t}" for n, t in columns)}, eol text)')
    started = time.monotonic()
    PostgresHook(postgres_conn_id=PEER_CONN_ID).copy_expert(
        f"COPY {PEER_SCHEMA}.sample FROM STDIN (FORMAT text, DELIMITER '|')", path)
    return time.monotonic() - started


def run_peers(uri: str, files: list[dict], slots: int, seconds_each: float) -> list[dict]:
    """Each peer on a sample of lineitem sized to take about `seconds_each`, as one session."""
    os.environ[f"AIRFLOW_CONN_{PEER_CONN_ID.upper()}"] = uri
    big = next(f for f in files if f["table"] == "lineitem")
    columns = big["columns"]
    avg_line = big["bytes"] / big["rows"]
    peers = {
        "PostgresHook.insert_rows": lambda lines: peer_insert_rows(uri, lines, columns, executemany=False),
        "PostgresHook.insert_rows(executemany)": lambda lines: peer_insert_rows(uri, lines, columns, True),
        "pandas read_csv + to_sql": lambda lines: peer_to_sql(uri, lines, columns),
    }
    out = []
    for name, fn in peers.items():
        probe_rows = 20000
        probe = fn(_sample_lines(big["path"], probe_rows))
        n = int(min(big["rows"], max(probe_rows, seconds_each * probe_rows / max(probe, 1e-6))))
        seconds = fn(_sample_lines(big["path"], n))
        out.append(peer_record(name, n, n * avg_line, seconds, slots))
    seconds = peer_copy_expert(uri, big["path"], columns)
    out.append(peer_record("PostgresHook.copy_expert", big["rows"], big["bytes"], seconds, slots))
    reset_schema(uri, PEER_SCHEMA, create=False)
    return out


@contextmanager
def output_to(path: Path):
    """This process's stdout and stderr into a file: insert_rows logs a line per commit."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "ab") as fh:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def peer_record(name: str, rows: int, nbytes: float, seconds: float, slots: int) -> dict:
    # One session measured; the batch rate assumes `slots` such sessions scale perfectly,
    # which flatters the peers.
    return {"name": name, "sample_rows": rows, "sample_seconds": round(seconds, 3),
            "session_rows_per_s": round(rows / seconds, 1), "session_mb_per_s": round(nbytes / 1e6 / seconds, 3),
            "rows_per_s": round(slots * rows / seconds, 1), "mb_per_s": round(slots * nbytes / 1e6 / seconds, 3),
            "extrapolated": True, "sessions": slots}
