"""The requests Airflow's API server answered while a part ran, by kind, from its access log.

Each task process talks to Airflow only through the API server (the Task SDK's Execution
API): its start, its heartbeats, its XCom reads and writes, its connection lookups, its end.
Counting those requests per task run, in the DAG's run and in the empty graph's, says which of
Airflow's per-task costs real steps add (a plan's read, a connection lookup, a result written,
the heartbeats of a longer task) and which every task pays anyway. The benchmark's own polling
(the public REST API) is counted apart. The counts are exact, where the wall time's spread on
a shared machine hides small differences.
"""
from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

# uvicorn's access line as Airflow's api-server logs it (one per request, when it finished).
_REQUEST = re.compile(r"request finished .*?duration_us=(\d+) .*?method=(\w+) path=(\S+)")

# Execution API requests by what a task does with them; the first pattern that matches names it.
KINDS = (
    ("start", "PATCH", re.compile(r"^/execution/task-instances/[^/]+/run$")),
    ("end", "PATCH", re.compile(r"^/execution/task-instances/[^/]+/state$")),
    ("heartbeat", "PUT", re.compile(r"^/execution/task-instances/[^/]+/heartbeat$")),
    ("XCom read", "GET", re.compile(r"^/execution/xcoms/")),
    ("XCom write", "POST", re.compile(r"^/execution/xcoms/")),
    ("connection", "GET", re.compile(r"^/execution/connections/")),
)
OTHER_EXECUTION = "other Execution API"
POLLING = "the benchmark's polling (REST API)"


def log_file() -> Path:
    from switchyard_dev import local
    return local.airflow_home() / "logs" / "api-server.out"


def kind_of(method: str, path: str) -> str:
    for name, verb, pattern in KINDS:
        if method == verb and pattern.search(path):
            return name
    return OTHER_EXECUTION if path.startswith("/execution/") else POLLING


def count(lines: Iterator[str]) -> dict:
    """{kind: {"requests": n, "server_seconds": s}} of the access lines among `lines` (the
    seconds each request took in the server, its wait for a core included)."""
    out: dict[str, dict] = {}
    for line in lines:
        found = _REQUEST.search(line)
        if not found:
            continue
        kind = kind_of(found.group(2), found.group(3).split("?")[0])
        entry = out.setdefault(kind, {"requests": 0, "server_seconds": 0.0})
        entry["requests"] += 1
        entry["server_seconds"] = round(entry["server_seconds"] + int(found.group(1)) / 1e6, 3)
    return out


class Calls:
    result: dict | None = None


@contextmanager
def counting() -> Iterator[Calls]:
    """`with counting() as c: ...` then `c.result`: the API server's requests in between, by kind
    (from the log's end when it started; none when there is no log)."""
    calls = Calls()
    path = log_file()
    start = path.stat().st_size if path.exists() else 0
    yield calls
    if not path.exists():
        calls.result = {}
        return
    with path.open("rb") as fh:
        fh.seek(start)
        calls.result = count(line.decode("utf-8", "replace") for line in fh)


def own_requests(calls: dict) -> dict[str, int]:
    """The tasks' own requests by kind: the benchmark's polling left out."""
    return {k: v["requests"] for k, v in calls.items() if k != POLLING}


def per_task(calls: dict | None, tasks: int) -> dict:
    """The tasks' own requests per task run, by kind, and in all."""
    if not calls or not tasks:
        return {}
    own = own_requests(calls)
    out = {k: round(n / tasks, 2) for k, n in own.items()}
    out["all"] = round(sum(own.values()) / tasks, 2)
    return out


def lines(real: dict | None, real_tasks: int, empty: dict | None, empty_tasks: int) -> list[str]:
    """The report's rows: each kind's requests per task run in the DAG run and the empty graph."""
    mine, theirs = per_task(real, real_tasks), per_task(empty, empty_tasks)
    if not mine:
        return []
    out = [f"Airflow API requests per task run (the tasks' own, from the API server's log; the DAG run's "
           f"{real_tasks} tasks" + (f", the empty graph's {empty_tasks}" if theirs else "") + ")",
           f"  {'kind':24s} {'DAG run':>8s} {'empty graph':>12s}"]
    for kind in [k for k, *_ in KINDS] + [OTHER_EXECUTION, "all"]:
        if kind in mine or kind in theirs:
            other = f"{theirs[kind]:12.2f}" if kind in theirs else f"{'-':>12s}"
            out.append(f"  {kind:24s} {mine.get(kind, 0.0):8.2f} {other}")
    polled = (real or {}).get(POLLING, {}).get("requests")
    if polled:
        out.append(f"  and {polled} requests of the benchmark's own polling during the DAG run (not per task)")
    return out
