"""A run's statistics: per group, per table and for the whole run, written as stats.json.

Total time is the slowest stream's time, so per-stream throughput is kept next to the
totals: a straggler shows as a group far below its table's median.
"""
from __future__ import annotations

import json
import re
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

STEPS = ("prepare", "load", "validate", "switch")


def runs_dir() -> Path:
    from switchyard.settings import runs_dir
    return runs_dir()


def task_states(context: Any) -> dict[str, str]:
    """{task_id: state} of this run's task instances, through the Task SDK (no ORM in tasks)."""
    ti = context["ti"]
    try:
        raw = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id])
    except Exception:  # an older API server: stats still come from XComs
        return {}
    states = raw.get(ti.run_id, raw) if isinstance(raw, dict) else {}
    return {k: (str(v.value) if hasattr(v, "value") else str(v)) if v is not None else None
            for k, v in states.items()}


def single_task_states(state: str | None, done: dict) -> dict[str, str | None]:
    """The four steps' states of a group run as one task (the spec's `tasks: single`), from the
    task's state and the steps it finished (`done`, with `failed_step` after a failure): the
    finished steps succeeded, the failed one has the task's state, the ones after it never ran."""
    failed = done.get("failed_step")
    if not failed and not any(step in done for step in STEPS):
        return {step: state for step in STEPS}  # skipped, upstream failed, never ran
    current = failed or next((step for step in STEPS if step not in done), None)
    return {step: state if step == current else "success" if step in done else None for step in STEPS}


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _outcome(group: dict, table_switched: bool = True) -> str:
    states = group.get("states") or {}
    if group.get("switch"):
        # Validated and attached to the table's next version, which never went in: another
        # group of the table did not switch, so the table kept its previous contents.
        return "switched" if table_switched else "held back"
    for step in STEPS:
        state = states.get(step)
        if state in ("failed", "upstream_failed"):
            return f"failed at {step}" if state == "failed" else "not run (upstream failed)"
        if state == "skipped":
            return "skipped"
    for step in STEPS:
        if states.get(step) in ("running", "queued", "scheduled", "up_for_retry", None):
            return f"incomplete at {step}"
    return "unknown"


def _rate(amount: float, seconds: float | None) -> float | None:
    return round(amount / seconds, 1) if seconds else None


# Where on the server a load ran and what it cost there, as the target adapters report it
# (PostgreSQL: the backend; SQL Server: session, scheduler, CPU, NUMA node, port, I/O, CPU time,
# and how the load was logged: minimal or full, measured or by the recovery model's rules).
LOAD_DETAILS = ("backend_pid", "session_id", "scheduler_id", "cpu_id", "node_id", "port", "local_tcp_port",
                "reads", "writes", "cpu_time_ms", "mode", "load_path", "recovery_model", "logging",
                "logging_basis", "log_ratio", "logging_note")


def switched_tables(groups: dict[str, dict]) -> set[str]:
    """Tables whose batch is in the target: a switch of theirs reports its partition in place
    (`in_target`; a target whose every switch is final reports none and counts as in)."""
    return {g["table"] for g in groups.values()
            if g.get("switch") and (g["switch"].get("in_target") is not False)}


def group_record(gid: str, group: dict, table_switched: bool = True) -> dict:
    load = group.get("load") or {}
    validate = group.get("validate") or {}
    switch = group.get("switch") or {}
    seconds = load.get("seconds")
    record = {
        "group": gid, "table": group["table"], "stream": group["stream"],
        "file": load.get("file") or group.get("planned_file"), "rows": load.get("rows"), "bytes": load.get("bytes"),
        "started": load.get("started"), "ended": load.get("ended"), "seconds": seconds,
        "mb_per_s": _rate((load.get("bytes") or 0) / 1e6, seconds),
        "rows_per_s": _rate(load.get("rows") or 0, seconds),
        "validation": None if not validate else ("passed" if validate.get("success") else "failed"),
        "validation_checks": validate.get("checks"),
        # Seconds per kind of check (row_count, key_range, not_null, unique, declared).
        "validation_cost": validate.get("cost"),
        "partition": switch.get("partition"), "replaced": switch.get("replaced"),
        "attach_scan_skipped": switch.get("attach_scan_skipped"),
        "indexes_built": switch.get("indexes_built"),
        "switched": switch.get("switched"), "outcome": _outcome(group, table_switched),
        "states": group.get("states"), "errors": group.get("errors") or {},
    }
    for key in LOAD_DETAILS:
        if key in load:
            record[key] = load[key]
    # Each step's span, and its task process's CPU seconds before the step and in it.
    steps = {step: {"started": (group.get(step) or {}).get("step_started"),
                    "ended": (group.get(step) or {}).get("step_ended"),
                    "cpu": (group.get(step) or {}).get("cpu")}
             for step in STEPS if (group.get(step) or {}).get("step_started")}
    if steps:
        record["steps"] = steps
    return record


def table_totals(records: list[dict]) -> dict[str, dict]:
    tables: dict[str, dict] = {}
    for r in records:
        t = tables.setdefault(r["table"], {"rows": 0, "bytes": 0, "partitions": 0, "groups": 0, "skipped": 0,
                                           "load_seconds": 0.0, "first_start": None, "last_end": None})
        t["groups"] += 1
        t["skipped"] += r["outcome"] == "skipped"
        if r["outcome"] == "switched":
            t["rows"] += r["rows"] or 0
            t["bytes"] += r["bytes"] or 0
            t["partitions"] += 1
            t["load_seconds"] += r["seconds"] or 0.0
        if r["started"]:
            t["first_start"] = min(filter(None, [t["first_start"], r["started"]]))
            t["last_end"] = max(filter(None, [t["last_end"], r["ended"]]))
    for t in tables.values():
        wall = ((_ts(t["last_end"]) - _ts(t["first_start"])).total_seconds()
                if t["first_start"] and t["last_end"] else None)
        t["seconds"] = round(wall, 3) if wall is not None else None
        t["mb_per_s"] = _rate(t["bytes"] / 1e6, wall)
        t["rows_per_s"] = _rate(t["rows"], wall)
        # Throughput of one load while it runs: what a stream achieves, queueing aside.
        t["load_seconds"] = round(t["load_seconds"], 3)
        t["mb_per_s_per_stream"] = _rate(t["bytes"] / 1e6, t["load_seconds"])
    return tables


def summary_table(tables: dict[str, dict]) -> list[str]:
    """Per table: rows, partitions, wall seconds of its loads, MB/s over that wall time and per stream."""
    def num(value, fmt):
        return format(value, fmt) if value is not None else "-"
    w = name_width(tables)
    lines = [f"{'table':<{w}} {'rows':>12} {'partitions':>10} {'seconds':>8} {'MB/s':>8} {'MB/s/stream':>11}"]
    for name, t in tables.items():
        if t.get("groups") and t.get("skipped") == t["groups"]:
            # Not "0 rows": the table was not touched and keeps what it holds (an optional table
            # the batch leaves out, a run dated before the start date); the run's notes say why.
            lines.append(f"{name:<{w}} {'-':>12} {'-':>10} {'-':>8} {'-':>8} {'-':>11}  not loaded by this run: "
                         f"its groups were skipped")
            continue
        lines.append(f"{name:<{w}} {t['rows']:>12,} {t['partitions']:>10} {num(t['seconds'], '.2f'):>8} "
                     f"{num(t['mb_per_s'], '.1f'):>8} {num(t['mb_per_s_per_stream'], '.1f'):>11}")
    return lines


def name_width(tables: dict[str, dict]) -> int:
    """The summary's first column: as wide as the longest table name, at least 10."""
    return max([10, *(len(name) for name in tables)])


# A slow load that cost the run less than this share of its makespan is not worth a look;
# nor one that lost less than MEASURABLE_SECONDS: a task's start in Airflow varies by about a
# second from one task to the next, so a smaller loss cannot be told from scheduling noise.
NEGLIGIBLE_SHARE = 0.01
MEASURABLE_SECONDS = 1.0


def stragglers(records: list[dict], threshold: float = 0.7, waits: list[dict] | None = None,
               makespan: float | None = None) -> list[dict]:
    """Groups whose throughput is under `threshold` x the median of their table's groups.

    With the run's `makespan`, a slow load is a straggler only where it cost the run something
    measurable: its lost time (its time beyond its bytes at the table's median rate) at least
    MEASURABLE_SECONDS and at least NEGLIGIBLE_SHARE of the makespan. A 0.24 s load, or a 0.07 s loss in a
    15 s run, is no straggler, however low its rate.

    A table of two loads counts too: the median of two is their mean, so one is flagged only
    when it ran under 54% of the other's rate (0.7 x the mean); a pair that far apart costs
    the run as much as a straggler among many. One load alone has nothing to compare with.
    `waits`, the server's top waits over the run where the target has them, go into each
    straggler's notes: they are server-wide, not the stream's own.
    """
    out = []
    by_table: dict[str, list[dict]] = {}
    for r in records:
        if r["mb_per_s"]:
            by_table.setdefault(r["table"], []).append(r)
    for table, rs in by_table.items():
        if len(rs) < 2:
            continue
        median = statistics.median(r["mb_per_s"] for r in rs)
        for r in rs:
            if r["mb_per_s"] < threshold * median:
                entry = {"group": r["group"], "mb_per_s": r["mb_per_s"], "table_median_mb_per_s": median,
                         "ratio": round(r["mb_per_s"] / median, 2), "bytes": r["bytes"]}
                entry.update(_what_differs(r, rs, records, median, waits))
                lost = entry.get("seconds_lost")
                if makespan and lost is not None and lost < max(MEASURABLE_SECONDS, NEGLIGIBLE_SHARE * makespan):
                    continue
                out.append(entry)
    return out


def _overlap_loads(r: dict, records: list[dict]) -> float | None:
    """Mean number of other loads running while `r` loaded: contention the stream had to share."""
    start, end = _ts(r.get("started")), _ts(r.get("ended"))
    if not start or not end or end <= start:
        return None
    busy = 0.0
    for other in records:
        if other is r:
            continue
        o_start, o_end = _ts(other.get("started")), _ts(other.get("ended"))
        if o_start and o_end:
            busy += max(0.0, (min(end, o_end) - max(start, o_start)).total_seconds())
    return busy / (end - start).total_seconds()


def _cpu_share(t: dict) -> float | None:
    """Share of a load's wall time its server session spent on CPU (SQL Server: sys.dm_exec_sessions)."""
    if t.get("cpu_time_ms") is None or not t.get("seconds"):
        return None
    return t["cpu_time_ms"] / 1000.0 / t["seconds"]


def _what_differs(r: dict, table_records: list[dict], records: list[dict], median_mb_per_s: float,
                  waits: list[dict] | None = None) -> dict:
    """Why one stream may be slow: its file size, row width, read rate, CPU share and concurrency
    against its table's median, and the server's waits where the target reports them.

    When none of these differ, the cause lies outside the data (the record run's slow streams
    came from one fragmented source disk), and the note says where to look.
    """
    def median_of(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    def ratio(value, median):
        return round(value / median, 2) if value is not None and median else None

    bytes_median = median_of(t.get("bytes") for t in table_records)
    width = lambda t: t["bytes"] / t["rows"] if t.get("bytes") and t.get("rows") else None  # noqa: E731
    width_median = median_of(width(t) for t in table_records)
    rows_rate_median = median_of(t.get("rows_per_s") for t in table_records)
    seconds_median = median_of(t.get("seconds") for t in table_records)
    overlap = _overlap_loads(r, records)
    overlap_median = median_of(_overlap_loads(t, records) for t in table_records)
    # Time this stream cost beyond loading its bytes at its table's median rate.
    at_median = (r["bytes"] or 0) / (median_mb_per_s * 1e6) if median_mb_per_s else None
    lost = round(r["seconds"] - at_median, 3) if r.get("seconds") is not None and at_median is not None else None

    notes = []
    size = ratio(r.get("bytes"), bytes_median)
    if size is not None and size < 0.5:
        notes.append(f"small file ({size:.0%} of the table's median size): the fixed cost of a load weighs more")
    elif size is not None and size > 1.5:
        notes.append(f"large file ({size:.1f}x the table's median size)")
    row_width = ratio(width(r), width_median)
    if row_width is not None and abs(row_width - 1) > 0.2:
        notes.append(f"rows {row_width:.1f}x as wide as the table's median")
    if overlap is not None and overlap_median is not None and overlap - overlap_median >= 1:
        notes.append(f"shared the target with {overlap:.1f} other loads on average "
                     f"(table median {overlap_median:.1f})")
    cpu = _cpu_share(r)
    cpu_median = median_of(_cpu_share(t) for t in table_records)
    if cpu is not None and cpu_median is not None and cpu_median - cpu >= 0.2:
        notes.append(f"its server session was on CPU {cpu:.0%} of the load (table median {cpu_median:.0%}): "
                     f"the rest it waited, for I/O, locks or its client")
    data_alike = len(notes) == 0
    # The file is read and sent in one loop (COPY FROM STDIN, TDS bulk copy) or read by the
    # server (BULK INSERT): either way the load's input rate is the rate its file was read at.
    notes.append(f"read its file at {r['mb_per_s']:.1f} MB/s against the table's median "
                 f"{median_mb_per_s:.1f} MB/s")
    top = [w for w in (waits or []) if isinstance(w, dict) and w.get("wait_type")][:3]
    if top:
        notes.append("the server's top waits over the run (all loads): " + ", ".join(
            f"{w['wait_type']} {w.get('wait_ms') or 0:,.0f} ms" for w in top))
    if data_alike:
        notes.insert(0, "same file size, row width and concurrency as its table's other streams: "
                        "look at this stream's source (disk, host, network) or the target's waits during its load")
    return {
        "table": r.get("table"), "stream": r.get("stream"), "seconds": r.get("seconds"),
        "rows_per_s": r.get("rows_per_s"), "table_median_rows_per_s": rows_rate_median,
        "table_median_seconds": seconds_median, "seconds_lost": lost,
        "table_median_bytes": bytes_median, "bytes_vs_median": size,
        "bytes_per_row": round(width(r), 1) if width(r) else None,
        "table_median_bytes_per_row": round(width_median, 1) if width_median else None,
        "cpu_share": round(cpu, 2) if cpu is not None else None,
        "table_median_cpu_share": round(cpu_median, 2) if cpu_median is not None else None,
        "concurrent_loads": round(overlap, 2) if overlap is not None else None,
        "table_median_concurrent_loads": round(overlap_median, 2) if overlap_median is not None else None,
        "what_differs": notes,
    }


def not_loaded(plan: dict, records: list[dict]) -> list[str]:
    """Groups the run's plan loads (a stream with rows, of a table the run loads) that did not
    switch and did not fail either (skipped, or never run): rows the manifest lists that no load
    brought in. Each such group fails the run: a run that ends `success` loaded everything."""
    tables = set(plan.get("tables") or [])
    planned = plan.get("groups") or {}
    out = []
    for r in records:
        p = planned.get(r["group"])
        if not p or p["table"] not in tables or r["outcome"] in ("switched", "held back"):
            continue
        if r["outcome"].startswith(("failed", "not run", "incomplete")):
            continue  # failed already, and said so
        empty = p.get("rows") == 0 if p.get("rows") is not None else p.get("key_min") is None
        if p.get("partitioned") is False or not empty:
            out.append(r["group"])
    return out


def _covered(spans: list[tuple[datetime, datetime]]) -> float | None:
    """Seconds covered by at least one of `spans` (start, end); None for none."""
    if not spans:
        return None
    total, (start, end) = 0.0, sorted(spans)[0]
    for s, e in sorted(spans)[1:]:
        if s > end:
            total, start = total + (end - start).total_seconds(), s
        end = max(end, e)
    return total + (end - start).total_seconds()


def assemble(plan: dict, groups: dict[str, dict], context: Any, server: dict | None = None,
             published: set[str] | None = None, in_already: set[str] = frozenset()) -> dict:
    """The run's statistics; `server` holds what the target saw over the run (SQL Server: the
    deltas of its wait and latch statistics, `{"waits": [...], "latches": [...]}`); `published`,
    where the batch goes in as a whole (the spec's `publish: batch`), the tables its publish
    moved in (none when it did not run); `in_already`, the tables the target holds this run's
    batch of by an earlier attempt of its tasks (a group run again on its own after them)."""
    server = server or {}
    waits = list(server.get("waits") or [])
    in_target = (switched_tables(groups) if published is None else set(published)) | set(in_already)
    records = [group_record(gid, g, g["table"] in in_target) for gid, g in groups.items()]
    missing = set(not_loaded(plan, records))
    for r in records:
        if r["group"] in missing:
            r["outcome"] = "not loaded (its rows are in the manifest)"
    tables = table_totals(records)
    starts = [r["started"] for r in records if r["started"]]
    ends = [r["ended"] for r in records if r["ended"]]
    makespan = (_ts(max(ends)) - _ts(min(starts))).total_seconds() if starts and ends else None
    # The time some load was copying: the makespan without the time between a run's loads and a
    # load run again later on its own (a group cleared after a fix, minutes or hours after).
    loading = _covered([(_ts(r["started"]), _ts(r["ended"])) for r in records if r["started"] and r["ended"]])
    # The groups' steps, first prepare to last switch: the span of the report's Gantt chart.
    spans = [(_ts(s["started"]), _ts(s["ended"])) for r in records for s in (r.get("steps") or {}).values()
             if s.get("started") and s.get("ended")]
    steps_seconds = (max(e for _, e in spans) - min(b for b, _ in spans)).total_seconds() if spans else None
    switched = [r for r in records if r["outcome"] == "switched"]
    failed = [r["group"] for r in records if r["outcome"].startswith(("failed", "not run", "incomplete", "not loaded"))]
    held = [r["group"] for r in records if r["outcome"] == "held back"]
    total_rows = sum(r["rows"] or 0 for r in switched)
    total_bytes = sum(r["bytes"] or 0 for r in switched)
    ti = context["ti"]
    summary = summary_table(tables)
    return {
        "dag_id": ti.dag_id, "run_id": ti.run_id, "batch": plan.get("batch"), "batch_dir": plan.get("batch_dir"),
        "target": plan.get("target"), "schema": plan.get("schema"), "streams": plan.get("streams"),
        # What setup's pre-flight found and did about the target (a spec change it reconciled,
        # another run's groups it discarded), in its own words.
        "preflight": list(plan.get("preflight") or []),
        "generated_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        "makespan_seconds": round(makespan, 3) if makespan is not None else None,
        "loading_seconds": round(loading, 3) if loading is not None else None,
        "steps_seconds": round(steps_seconds, 3) if steps_seconds is not None else None,
        "totals": {"rows": total_rows, "bytes": total_bytes, "groups": len(records),
                   "switched": len(switched), "failed": len(failed),
                   "mb_per_s": _rate(total_bytes / 1e6, makespan), "rows_per_s": _rate(total_rows, makespan)},
        "tables": tables, "groups": records, "failed_groups": failed, "held_back_groups": held,
        # Tables whose batch did not go in: they hold what they held before the run.
        "tables_kept": sorted({r["table"] for r in records if r["outcome"] == "held back" or r["group"] in failed}
                              - in_target),
        "tables_in_already": sorted(in_already),
        "stragglers": stragglers(records, waits=waits, makespan=makespan), "summary_lines": summary,
        "waits": waits, "latches": list(server.get("latches") or []),
    }


def run_folder_name(run_id: str) -> str:
    """A run's folder under the runs directory: its run id with anything but [A-Za-z0-9._-] as _."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", run_id)


def stats_path(dag_id: str, run_id: str) -> Path:
    return runs_dir() / dag_id / run_folder_name(run_id) / "stats.json"


def report_url(dag_id: str, run_id: str, base_url: str | None = None) -> str:
    """Where the api-server serves a run's report (the switchyard_reports plugin)."""
    from urllib.parse import quote
    if base_url is None:
        from airflow.sdk.configuration import conf
        base_url = conf.get("api", "base_url", fallback="") or ""
    return f"{base_url.rstrip('/')}/switchyard/reports/{quote(dag_id)}/{quote(run_folder_name(run_id))}/report.html"


def write_stats(stats: dict, context: Any) -> Path:
    path = stats_path(stats["dag_id"], stats["run_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stats, indent=2, default=str) + "\n")
    tmp.replace(path)
    return path


# --- the control schema's load_stats table ------------------------------------------------
# A run id is unique only within its DAG: two DAGs on the same schedule get the same
# "scheduled__<time>" ids, so the DAG is part of a row's key.
LOAD_STATS_KEYS = ("dag_id", "run_id", "table_name", "stream")
LOAD_STATS_COLUMNS = ("run_id", "batch", "table_name", "stream", "file", "bytes", "rows_loaded", "started_at",
                      "ended_at", "seconds", "mb_per_s", "rows_per_s", "validation", "outcome", "dag_id", "port")


def load_stats_columns(adapter: Any) -> tuple[str, ...]:
    """The shared columns, then where a load ran as the target's engine keeps it."""
    return LOAD_STATS_COLUMNS + tuple(adapter.load_stats_columns)


def load_stats_rows(stats: dict, adapter: Any) -> list[tuple]:
    """One row per group that has a file to load (a skipped table's groups have none)."""
    columns = load_stats_columns(adapter)
    rows = []
    for r in stats.get("groups") or []:
        if r.get("outcome") == "skipped":
            continue
        values = {
            "run_id": stats["run_id"], "batch": stats.get("batch") or "", "table_name": r["table"],
            "stream": r["stream"], "file": r.get("file") or r.get("planned_file") or "",
            "bytes": r.get("bytes"), "rows_loaded": r.get("rows"), "started_at": _ts(r.get("started")),
            "ended_at": _ts(r.get("ended")), "seconds": r.get("seconds"), "mb_per_s": r.get("mb_per_s"),
            "rows_per_s": r.get("rows_per_s"), "validation": r.get("validation"), "outcome": r.get("outcome"),
            "dag_id": stats.get("dag_id") or "",
        }
        rows.append(tuple(values.get(c, r.get(c)) for c in columns))
    return rows


def write_load_stats(adapter: Any, stats: dict) -> int:
    """Upserts the run's rows into <control schema>.load_stats, all in one transaction."""
    columns = load_stats_columns(adapter)
    rows = load_stats_rows(stats, adapter)
    if not rows:
        return 0
    statement, = adapter.render("record_load_stats.sql", columns=columns, keys=LOAD_STATS_KEYS)
    with adapter.connection() as conn:
        # Both drivers (psycopg 3, pyodbc) take autocommit as a settable attribute; off, the
        # rows commit together or not at all.
        conn.autocommit = False
        cur = conn.cursor()
        cur.executemany(statement, rows)
        conn.commit()
    return len(rows)
