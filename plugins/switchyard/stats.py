"""A run's statistics: per group, per table and for the whole run, written as stats.json.

Total time is the slowest stream's time, so per-stream throughput is kept next to the
totals: a straggler shows as a group far below its table's median.
"""
from __future__ import annotations

import json
import os
import re
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any

STEPS = ("prepare", "load", "validate", "switch")


def runs_dir() -> Path:
    configured = os.environ.get("SWITCHYARD_RUNS_DIR")
    if configured:
        return Path(configured).resolve()
    from .embedded import state_dir
    return state_dir() / "runs"


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


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _outcome(group: dict) -> str:
    states = group.get("states") or {}
    if group.get("switch"):
        return "switched"
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


def group_record(gid: str, group: dict) -> dict:
    load = group.get("load") or {}
    validate = group.get("validate") or {}
    switch = group.get("switch") or {}
    seconds = load.get("seconds")
    record = {
        "group": gid, "table": group["table"], "stream": group["stream"],
        "file": load.get("file"), "rows": load.get("rows"), "bytes": load.get("bytes"),
        "started": load.get("started"), "ended": load.get("ended"), "seconds": seconds,
        "mb_per_s": _rate((load.get("bytes") or 0) / 1e6, seconds),
        "rows_per_s": _rate(load.get("rows") or 0, seconds),
        "validation": None if not validate else ("passed" if validate.get("success") else "failed"),
        "validation_checks": validate.get("checks"),
        "partition": switch.get("partition"), "replaced": switch.get("replaced"),
        "switched": switch.get("switched"), "outcome": _outcome(group),
        "states": group.get("states"), "errors": group.get("errors") or {},
    }
    for key in ("backend_pid", "session_id", "scheduler_id", "cpu_id", "node_id", "port"):
        if key in load:
            record[key] = load[key]
    return record


def table_totals(records: list[dict]) -> dict[str, dict]:
    tables: dict[str, dict] = {}
    for r in records:
        t = tables.setdefault(r["table"], {"rows": 0, "bytes": 0, "partitions": 0, "groups": 0,
                                           "load_seconds": 0.0, "first_start": None, "last_end": None})
        t["groups"] += 1
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
    lines = [f"{'table':<10} {'rows':>12} {'partitions':>10} {'seconds':>8} {'MB/s':>8} {'MB/s/stream':>11}"]
    for name, t in tables.items():
        lines.append(f"{name:<10} {t['rows']:>12,} {t['partitions']:>10} {num(t['seconds'], '.2f'):>8} "
                     f"{num(t['mb_per_s'], '.1f'):>8} {num(t['mb_per_s_per_stream'], '.1f'):>11}")
    return lines


def stragglers(records: list[dict], threshold: float = 0.7) -> list[dict]:
    """Groups whose throughput is under `threshold` x the median of their table's groups."""
    out = []
    by_table: dict[str, list[dict]] = {}
    for r in records:
        if r["mb_per_s"]:
            by_table.setdefault(r["table"], []).append(r)
    for table, rs in by_table.items():
        if len(rs) < 3:
            continue
        median = statistics.median(r["mb_per_s"] for r in rs)
        for r in rs:
            if r["mb_per_s"] < threshold * median:
                entry = {"group": r["group"], "mb_per_s": r["mb_per_s"], "table_median_mb_per_s": median,
                         "ratio": round(r["mb_per_s"] / median, 2), "bytes": r["bytes"]}
                entry.update(_what_differs(r, rs, records, median))
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


def _what_differs(r: dict, table_records: list[dict], records: list[dict], median_mb_per_s: float) -> dict:
    """Why one stream may be slow: its file size, row width and concurrency against its table's median.

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
    if not notes:
        notes.append("same file size, row width and concurrency as its table's other streams: "
                     "look at this stream's source (disk, host, network) or the target's waits during its load")
    return {
        "table": r.get("table"), "stream": r.get("stream"), "seconds": r.get("seconds"),
        "rows_per_s": r.get("rows_per_s"), "table_median_rows_per_s": rows_rate_median,
        "table_median_seconds": seconds_median, "seconds_lost": lost,
        "table_median_bytes": bytes_median, "bytes_vs_median": size,
        "bytes_per_row": round(width(r), 1) if width(r) else None,
        "table_median_bytes_per_row": round(width_median, 1) if width_median else None,
        "concurrent_loads": round(overlap, 2) if overlap is not None else None,
        "table_median_concurrent_loads": round(overlap_median, 2) if overlap_median is not None else None,
        "what_differs": notes,
    }


def assemble(plan: dict, groups: dict[str, dict], context: Any) -> dict:
    records = [group_record(gid, g) for gid, g in groups.items()]
    tables = table_totals(records)
    starts = [r["started"] for r in records if r["started"]]
    ends = [r["ended"] for r in records if r["ended"]]
    makespan = (_ts(max(ends)) - _ts(min(starts))).total_seconds() if starts and ends else None
    switched = [r for r in records if r["outcome"] == "switched"]
    failed = [r["group"] for r in records if r["outcome"].startswith(("failed", "not run", "incomplete"))]
    total_rows = sum(r["rows"] or 0 for r in switched)
    total_bytes = sum(r["bytes"] or 0 for r in switched)
    ti = context["ti"]
    summary = summary_table(tables)
    return {
        "dag_id": ti.dag_id, "run_id": ti.run_id, "batch": plan.get("batch"), "batch_dir": plan.get("batch_dir"),
        "target": plan.get("target"), "schema": plan.get("schema"), "streams": plan.get("streams"),
        "generated_at": datetime.now().astimezone().isoformat(timespec="seconds"),
        "makespan_seconds": round(makespan, 3) if makespan is not None else None,
        "totals": {"rows": total_rows, "bytes": total_bytes, "groups": len(records),
                   "switched": len(switched), "failed": len(failed),
                   "mb_per_s": _rate(total_bytes / 1e6, makespan), "rows_per_s": _rate(total_rows, makespan)},
        "tables": tables, "groups": records, "failed_groups": failed,
        "stragglers": stragglers(records), "summary_lines": summary,
    }


def stats_path(dag_id: str, run_id: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id)
    return runs_dir() / dag_id / safe / "stats.json"


def write_stats(stats: dict, context: Any) -> Path:
    path = stats_path(stats["dag_id"], stats["run_id"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stats, indent=2, default=str) + "\n")
    tmp.replace(path)
    return path
