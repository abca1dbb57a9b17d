"""What the report shows, computed from stats.json alone: per-stream rates against their table's
median, the stragglers, the aggregate write rate over the run, the checks that failed, the server's
waits. The HTML page, the Markdown and the charts all render this one model."""
from __future__ import annotations

import math
import statistics
from datetime import datetime
from typing import Callable

from switchyard.observability.report.numbers import _bytes, _int, _rate, _secs, _ts
from switchyard.observability.stats import stragglers

THRESHOLD = 0.7


def _load_rate(r: dict) -> float | None:
    """MB/s of one load, unrounded where bytes and seconds allow (stats.json rounds to 0.1)."""
    if r.get("bytes") and r.get("seconds"):
        return r["bytes"] / 1e6 / r["seconds"]
    return r.get("mb_per_s")


def _table_rate(t: dict) -> float | None:
    if t.get("bytes") and t.get("seconds"):
        return t["bytes"] / 1e6 / t["seconds"]
    return t.get("mb_per_s")


def _stream_rate(t: dict) -> float | None:
    """A table's MB/s per stream, unrounded where bytes and load seconds allow (tiny tables read 0.0 otherwise)."""
    if t.get("bytes") and t.get("load_seconds"):
        return t["bytes"] / 1e6 / t["load_seconds"]
    return t.get("mb_per_s_per_stream")


def _rows_rate(r: dict) -> float | None:
    if r.get("rows") and r.get("seconds"):
        return r["rows"] / r["seconds"]
    return r.get("rows_per_s")


def _streams(records: list[dict], flagged: set[str]) -> list[dict]:
    """One row per group with its rate against its table's median, slowest (relatively) first."""
    medians = {}
    for table in {r.get("table") for r in records}:
        rates = [x for x in (_load_rate(r) for r in records if r.get("table") == table) if x]
        medians[table] = statistics.median(rates) if rates else None
    rows = []
    for r in records:
        rate, median = _load_rate(r), medians.get(r.get("table"))
        rows.append({**r, "rate": rate, "rows_rate": _rows_rate(r), "median": median,
                     "vs_median": rate / median if rate and median else None,
                     "straggler": r.get("group") in flagged,
                     "ok": r.get("outcome") == "switched"})
    # Failed groups first (they cost the run most), then slowest relative to their table.
    rows.sort(key=lambda x: (x["ok"], not x["straggler"],
                             x["vs_median"] if x["vs_median"] is not None else math.inf,
                             -(x["seconds"] or 0)))
    return rows


def _rate_series(records: list[dict]) -> tuple[datetime | None, list[tuple[float, float, float, int]]]:
    """Aggregate MB/s over the run: each load's bytes spread evenly over its start..end.

    Returns the origin and steps (from_s, to_s, MB/s, loads running) of a step function.
    """
    loads = []
    for r in records:
        start, end = _ts(r.get("started")), _ts(r.get("ended"))
        if start and end and end > start and r.get("bytes") is not None:
            loads.append((start, end, r["bytes"] / 1e6 / (end - start).total_seconds()))
    if not loads:
        return None, []
    origin = min(s for s, _, _ in loads)
    edges = sorted({(t - origin).total_seconds() for s, e, _ in loads for t in (s, e)})
    spans = [((s - origin).total_seconds(), (e - origin).total_seconds(), rate) for s, e, rate in loads]
    steps = []
    for a, b in zip(edges, edges[1:]):
        mid = (a + b) / 2
        active = [rate for s, e, rate in spans if s <= mid < e]
        steps.append((a, b, sum(active), len(active)))
    return origin, steps


def _run_origin(records: list[dict]) -> datetime | None:
    times = [t for r in records for t in (_ts(r.get("started")),) + tuple(_step_times(r)[0]) if t]
    return min(times) if times else None


def _step_times(r: dict) -> tuple[list[datetime], dict[str, tuple[datetime, datetime]]]:
    """Per-step start/end when stats carry them (a `steps` mapping per group), else only the load."""
    spans = {}
    for step, t in (r.get("steps") or {}).items():
        if isinstance(t, dict):
            start, end = _ts(t.get("started") or t.get("start_date")), _ts(t.get("ended") or t.get("end_date"))
            if start and end and end >= start:
                spans[step] = (start, end)
    return [t for pair in spans.values() for t in pair], spans


def _failed_checks(records: list[dict]) -> list[dict]:
    out = []
    for r in records:
        for c in r.get("validation_checks") or []:
            if isinstance(c, dict) and not c.get("success", True):
                out.append({"group": r.get("group"), "file": r.get("file"), **c})
    return out


def _waits(stats: dict) -> list[dict]:
    """Top waits of the run (the server's wait-stats deltas, where its target keeps them), by their DMV names."""
    out = []
    for w in stats.get("waits") or []:
        if not isinstance(w, dict):
            continue
        def pick(*keys):
            return next((w[k] for k in keys if w.get(k) is not None), None)
        out.append({"wait_type": pick("wait_type", "type") or "?",
                    "wait_ms": pick("wait_ms", "wait_time_ms", "wait_ms_delta") or 0,
                    "signal_ms": pick("signal_ms", "signal_wait_time_ms", "signal_wait_ms"),
                    "waiting_tasks": pick("waiting_tasks", "waiting_tasks_count", "tasks")})
    out.sort(key=lambda w: -(w["wait_ms"] or 0))
    return out


def build(stats: dict) -> dict:
    """Everything the report shows, for the HTML and the Markdown writers alike."""
    records = [r for r in stats.get("groups") or [] if isinstance(r, dict)]
    for r in records:
        r.setdefault("outcome", "unknown")
        r.setdefault("table", str(r.get("group", "?")).rsplit("_", 1)[0])
    # Judged on unrounded rates: at 0.1 MB/s resolution a small table's streams look 50% apart.
    precise = [{**r, "mb_per_s": _load_rate(r), "rows_per_s": _rows_rate(r)} for r in records]
    makespan = stats.get("makespan_seconds")
    try:
        flagged_list = (stragglers(precise, THRESHOLD, waits=_waits(stats), makespan=makespan) if records
                        else list(stats.get("stragglers") or []))
    except (KeyError, TypeError, ValueError):  # a stats.json from an older layout
        flagged_list = list(stats.get("stragglers") or [])
    flagged_list.sort(key=lambda s: (-(s.get("seconds_lost") or 0), s.get("ratio") or 0))
    flagged = {s["group"] for s in flagged_list}
    # A skipped group (a stream the batch does not have, a table the run did not ask for) had
    # nothing to load: counted apart, never as a group that did not switch or was not checked.
    loaded = [r for r in records if r.get("outcome") != "skipped"]
    validation = {"passed": 0, "failed": 0, "not run": 0}
    for r in loaded:
        validation[r.get("validation") if r.get("validation") in ("passed", "failed") else "not run"] += 1
    origin, steps = _rate_series(records)
    return {
        "stats": stats, "records": records, "streams": _streams(records, flagged),
        "stragglers": flagged_list, "validation": validation, "failed_checks": _failed_checks(records),
        "not_switched": [r for r in loaded if r.get("outcome") != "switched"],
        "skipped": [r for r in records if r.get("outcome") == "skipped"],
        "untimed": [r for r in loaded if not (_ts(r.get("started")) and _ts(r.get("ended")))],
        "rate_origin": origin, "rate_steps": steps, "waits": _waits(stats),
        "peak_mb_per_s": max((s[2] for s in steps), default=None),
        "server": _server(stats.get("target")),
    }


def _server(target: str | None) -> str:
    """` (SQL Server)`: the run's server, after the titles of the sections only a server of its kind
    fills (where each load ran, its waits); empty where the run's target is not known."""
    from switchyard.targets import TargetError, adapter_class
    try:
        return f" ({adapter_class(target).display_name})" if target else ""
    except TargetError:  # a stats.json of an engine not installed here
        return f" ({target})"


def _header_facts(model: dict) -> list[tuple[str, str]]:
    s, tot = model["stats"], model["stats"].get("totals") or {}
    return [("makespan: first load start to last load end", _secs(s.get("makespan_seconds"))),
            ("steps: first step start to last step end (the Gantt chart)", _secs(s.get("steps_seconds"))),
            ("rows", _int(tot.get("rows"))),
            ("input", _bytes(tot.get("bytes"))), ("rows/s over the makespan", _int(tot.get("rows_per_s"))),
            ("MB/s over the makespan", _rate(tot.get("mb_per_s"))), ("peak MB/s", _rate(model["peak_mb_per_s"])),
            ("groups switched", f'{_int(tot.get("switched"))} / {_int((tot.get("groups") or 0) - len(model["skipped"]))}'
                                + (f' ({len(model["skipped"])} skipped)' if model["skipped"] else "")),
            ("streams", _int(s.get("streams")))] + (
        # The batch's publish: every table locked at once, for this long (readers' longest wait).
        [("tables locked by the publish", _secs((s.get("publish_batch") or {}).get("lock_seconds")))]
        if (s.get("publish_batch") or {}).get("lock_seconds") is not None else [])


def _status(model: dict) -> tuple[str, str]:
    n = len(model["records"])
    # A skipped group is not a failure: the run's failure and its note leave it out too.
    skipped = [r["group"] for r in model["skipped"]]
    bad = [r["group"] for r in model["not_switched"]]
    major = model["stragglers"]
    stats = model["stats"]
    if stats.get("plan_error"):
        return "bad", f"refused before any load, nothing changed: {stats['plan_error']}"
    if stats.get("source_errors"):
        return "bad", f"refused before any load, nothing changed: {sources_refused(stats['source_errors'])}"
    if stats.get("publish_error"):
        return "bad", f"{not_published(stats)}: {stats['publish_error']}"
    if bad:
        # As the run's failure says it: the failed groups, then those held back with them.
        failed, held = stats.get("failed_groups") or [], stats.get("held_back_groups") or []
        return "bad", "; ".join(part for part in (
            f"{len(failed)} of {n} groups did not switch: {', '.join(failed)}" if failed else "",
            f"{len(held)} held back, validated and staged but kept out with them: {', '.join(held)}" if held else "")
            if part) or f"{len(bad)} of {n} groups did not switch: {', '.join(bad)}"
    k = n - len(skipped)
    done = f"all {k} group{'' if k == 1 else 's'} switched" + (f" ({len(skipped)} skipped)" if skipped else "")
    if major:
        return "warn", (f"{done}; {len(major)} straggler{'s' if len(major) > 1 else ''}: "
                        + ", ".join(x["group"] for x in major))
    return "ok", f"{done}, no stragglers"


def not_published(stats: dict) -> str:
    """What a refused publish left, by the spec's `publish`: the whole batch out, or (`table`) the
    tables its refusals name."""
    if stats.get("publish", "batch") == "batch":
        return "the batch was not published, every table kept its contents"
    return "a table was not put in and kept its contents"


def sources_refused(errors: dict, cut: Callable[[str], str] = lambda said: said) -> str:
    """The refusals of the setup's checks of the sources' files (setup.files_on_<source>), one line;
    `cut` shortens each source's refusal (the run's note names every source, each said in part)."""
    return "; ".join(f"{task}: {cut(error or 'failed (its log says why)')}" for task, error in errors.items())


def _straggler_why(s: dict) -> list[str]:
    out = list(s.get("what_differs") or [])
    if s.get("bytes_vs_median") is not None:
        out.append(f"file {_bytes(s.get('bytes'))} vs table median {_bytes(s.get('table_median_bytes'))}")
    return out


def _placed(records: list[dict]) -> list[dict]:
    """The loads whose target said where they ran or how they were logged, by group."""
    keys = ("scheduler_id", "node_id", "logging")
    return sorted((r for r in records if any(r.get(k) is not None for k in keys)),
                  key=lambda r: (str(r.get("table")), r.get("stream") or 0))


def _logging_basis(r: dict) -> str:
    parts = [str(r["logging_basis"])] if r.get("logging_basis") else []
    if r.get("log_ratio") is not None:
        parts.append(f"{r['log_ratio']:.3f} log bytes per data byte")
    if r.get("logging_note"):
        parts.append(str(r["logging_note"]))
    return "; ".join(parts) or "–"
