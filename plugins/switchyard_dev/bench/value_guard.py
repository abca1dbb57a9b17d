"""What reading every record for a field the server would change costs a load, and the DAG lever
"preload, no value guard" that leaves it out.

The PostgreSQL adapter's own prepare and load of the batch's biggest file, one load at a time,
two ways in rotating order: `guarded`, as the product loads (core/value_guard.py reads each
record as it streams to the COPY), and `unguarded`, the same load with the guard left out (this
process only: the loader's `value_guard` answers None while the variant runs). Each load reports
the client's CPU (this process: reading the file, the guard, sending the COPY), the server's (the
PostgreSQL process tree's) and its wall; the guard's cost is the client's CPU over the paired
unguarded load's, per MB of the file.

The DAG lever "preload, no value guard" (SWITCHYARD_BENCH_NO_VALUE_GUARD=1 in the benchmark's own
Airflow, from its local settings) leaves the guard out of every load of the run (`guard_off`, in
the scheduler before it forks the task processes): side by side with "preload", what the guard
costs end to end. A measuring device, never a way to run.
"""
from __future__ import annotations

import resource
import time
from contextlib import contextmanager
from pathlib import Path

from switchyard_dev.bench.common import biggest_file_set_up, postmaster_pid, reset_schema, say, spread

GUARD_SCHEMA = "bench_value_guard"
VARIANTS = ("guarded", "unguarded")


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def guard_off():
    """Every PostgreSQL load of this process (and of those it forks) without the value guard; the
    function it replaced, to put back."""
    import sys

    from switchyard.targets.postgres import load as pg_load
    kept = pg_load.value_guard
    pg_load.value_guard = lambda table, dialect: None
    print("switchyard bench: the loads' value guard left out (the 'no value guard' lever)", file=sys.stderr)
    return kept


@contextmanager
def _without_guard():
    from switchyard.targets.postgres import load as pg_load
    kept = guard_off()
    try:
        yield
    finally:
        pg_load.value_guard = kept


def one_load(adapter, stream, path: Path, variant: str) -> dict:
    from contextlib import nullcontext

    from switchyard_dev import cputime
    adapter.prepare(stream)
    root = {"postgres": postmaster_pid()}
    with _without_guard() if variant == "unguarded" else nullcontext():
        before, client = cputime.snapshot(root), _cpu()
        result = adapter.load(stream, path)
        client = _cpu() - client
    # The load's backend has exited; its CPU reaches the postmaster's tree once it is reaped.
    time.sleep(0.5)
    server = cputime.delta(before, cputime.snapshot(root))["postgres"]
    return {"variant": variant, "rows": result.rows, "load_seconds": round(result.seconds, 3),
            "client_cpu": round(client, 3), "server_cpu": round(server, 3)}


def run_value_guard(uri: str, folder: Path, files: list[dict], repeat: int) -> dict:
    """Both variants on the batch's biggest file, `repeat` rounds in rotating order."""
    adapter, stream, path = biggest_file_set_up(uri, folder, files, GUARD_SCHEMA)
    biggest = files[0]
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    try:
        for r in range(repeat):
            for variant in VARIANTS[r % 2:] + VARIANTS[:r % 2]:
                x = one_load(adapter, stream, path, variant)
                runs[variant].append(x)
                print(f"    round {r + 1} {variant:<10} {x['rows']:,} rows, load {x['load_seconds']:.2f} s, client "
                      f"{x['client_cpu']:.2f} CPU s, server {x['server_cpu']:.2f} CPU s", flush=True)
    finally:
        reset_schema(uri, GUARD_SCHEMA, adapter.staging_schema, create=False)
    mb = biggest["bytes"] / 1e6
    out: dict = {"table": stream.table, "stream": stream.stream, "rows": runs["guarded"][0]["rows"],
                 "bytes": biggest["bytes"], "rounds": repeat, "variants": {}}
    for variant, rs in runs.items():
        out["variants"][variant] = {key: spread([x[key] for x in rs])
                                    for key in ("client_cpu", "server_cpu", "load_seconds")}
    # Paired with the same round's unguarded load: the guard's own cost.
    out["added_client_ms_per_mb"] = spread([(g["client_cpu"] - u["client_cpu"]) / mb * 1e3
                                            for g, u in zip(runs["guarded"], runs["unguarded"])])
    return out


def print_value_guard(result: dict) -> None:
    say(f"what reading every record for a field the server would change costs: {result['table']} stream "
        f"{result['stream']}, {result['rows']:,} rows, {result['bytes'] / 1e6:,.1f} MB, {result['rounds']} rounds "
        f"in rotating order, one load at a time")
    print(f"    {'variant':<12}{'client CPU s':>22}{'server CPU s':>22}{'load s':>22}")
    for variant, v in result["variants"].items():
        print(f"    {variant:<12}{_cell(v['client_cpu']):>22}{_cell(v['server_cpu']):>22}{_cell(v['load_seconds']):>22}")
    added = result["added_client_ms_per_mb"]
    g, u = (result["variants"][v]["load_seconds"]["median"] for v in VARIANTS)
    print(f"    the guard: {_cell(added)} ms of the client's CPU per MB; the load's wall x{g / u:.3f} unguarded's",
          flush=True)


def _cell(s: dict, digits: int = 2) -> str:
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"
