"""A run's report for people: report.html (one self-contained page) and report.md, next to stats.json.

The record load was saved by reading per-stream throughput and spotting the one slow
stream, so the report leads with that: streams sorted slowest first against their table's
median, the stragglers with what differs about them, and the charts that show the long
tail (aggregate write rate over the run, a Gantt of the loads). Everything is computed
from stats.json alone, and a partial run (failed groups, loads without timings) still
renders. Charts are inline SVG built here: the page loads nothing from anywhere.
"""
from __future__ import annotations

import html
import math
import statistics
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

from switchyard.observability.stats import MEASURABLE_SECONDS, NEGLIGIBLE_SHARE, stragglers

THRESHOLD = 0.7
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7")
SLOW = "#d62728"
FAILED = "#7f7f7f"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
CHART_FILES = {"throughput": "report-throughput.svg", "streams": "report-streams.svg",
               "gantt": "report-gantt.svg"}


# --- numbers people can read -------------------------------------------------------------

def _int(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, (int, float)) else "–"


def _rate(value: Any) -> str:
    """A rate with as many decimals as it needs to not read as zero."""
    if not isinstance(value, (int, float)):
        return "–"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    if abs(value) >= 1:
        return f"{value:,.2f}"
    return f"{value:.{1 - int(math.floor(math.log10(abs(value))))}f}"


def _secs(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "–"
    if value >= 3600:
        return f"{int(value // 3600)} h {int(value % 3600 // 60):02d} min"
    if value >= 120:
        return f"{int(value // 60)} min {value % 60:04.1f} s"
    return f"{value:,.2f} s" if value < 10 else f"{value:,.1f} s"


def _bytes(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "–"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:,.2f} {unit}"
    return f"{value:,.0f} B"


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, (int, float)) else "–"


def _ts(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _plain(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f"{_plain(value[0])} .. {_plain(value[1])}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    return str(value)


# --- what the report shows, computed once for both formats -------------------------------

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
    """Top waits of the run (SQL Server wait-stats deltas), under the names sys.dm_os_wait_stats uses too."""
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
    validation = {"passed": 0, "failed": 0, "not run": 0}
    for r in records:
        validation[r.get("validation") if r.get("validation") in ("passed", "failed") else "not run"] += 1
    origin, steps = _rate_series(records)
    return {
        "stats": stats, "records": records, "streams": _streams(records, flagged),
        "stragglers": flagged_list, "validation": validation, "failed_checks": _failed_checks(records),
        "not_switched": [r for r in records if r.get("outcome") != "switched"],
        "untimed": [r for r in records if not (_ts(r.get("started")) and _ts(r.get("ended")))],
        "rate_origin": origin, "rate_steps": steps, "waits": _waits(stats),
        "peak_mb_per_s": max((s[2] for s in steps), default=None),
    }


# --- SVG charts ---------------------------------------------------------------------------

def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _nice_step(span: float, ticks: int = 6) -> float:
    if span <= 0:
        return 1.0
    raw = span / ticks
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _ticks(top: float, ticks: int = 6) -> list[float]:
    step = _nice_step(top, ticks)
    return [i * step for i in range(int(top / step + 1e-9) + 1)]


def _svg(width: int, height: int, body: Iterable[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{_esc(label)}" '
            f'font-family="{_esc(FONT)}" font-size="12">'
            f'<title>{_esc(label)}</title>'
            f'<rect width="{width}" height="{height}" fill="#fff"/>' + "".join(body) + "</svg>")


def _table_colours(records: list[dict]) -> dict[str, str]:
    names = list(dict.fromkeys(r.get("table") for r in records))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def throughput_svg(model: dict, width: int = 960, height: int = 300) -> str | None:
    """Aggregate MB/s of the running loads over the run, with the count of loads running."""
    steps = model["rate_steps"]
    if not steps:
        return None
    left, right, top, bottom = 64, 56, 20, 44
    w, h = width - left - right, height - top - bottom
    t_end = steps[-1][1] or 1.0
    peak = max(s[2] for s in steps) or 1.0
    y_ticks = _ticks(peak * 1.05, 5)
    y_top = y_ticks[-1] if y_ticks[-1] >= peak else y_ticks[-1] + _nice_step(peak, 5)
    most = max(s[3] for s in steps) or 1
    x = lambda t: left + w * t / t_end  # noqa: E731
    y = lambda v: top + h * (1 - v / y_top)  # noqa: E731
    yc = lambda n: top + h * (1 - n / most)  # noqa: E731
    body = []
    for v in _ticks(y_top, 5):
        body.append(f'<line x1="{left}" x2="{left + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e5e5"/>'
                    f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" fill="#555">{v:,g}</text>')
    for t in _ticks(t_end, 8):
        if t <= t_end:
            body.append(f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{top + h}" y2="{top + h + 4}" stroke="#555"/>'
                        f'<text x="{x(t):.1f}" y="{top + h + 17}" text-anchor="middle" fill="#555">{t:,g}</text>')
    area = [f"{x(steps[0][0]):.2f},{y(0):.2f}"]
    loads = []
    for a, b, rate, n in steps:
        area += [f"{x(a):.2f},{y(rate):.2f}", f"{x(b):.2f},{y(rate):.2f}"]
        loads += [f"{x(a):.2f},{yc(n):.2f}", f"{x(b):.2f},{yc(n):.2f}"]
    area.append(f"{x(steps[-1][1]):.2f},{y(0):.2f}")
    body.append(f'<polygon class="rate" points="{" ".join(area)}" fill="#4e79a7" fill-opacity="0.35" '
                f'stroke="#4e79a7" stroke-width="1.5"/>')
    body.append(f'<polyline class="loads" points="{" ".join(loads)}" fill="none" stroke="#f28e2b" '
                f'stroke-width="1.2" stroke-dasharray="4 3"/>')
    for a, b, rate, n in steps:  # hover targets: the exact figures of each interval
        body.append(f'<rect x="{x(a):.2f}" y="{top}" width="{max(x(b) - x(a), 0.5):.2f}" height="{h}" '
                    f'fill="transparent"><title>{_rate(a)}–{_rate(b)} s: {_rate(rate)} MB/s, '
                    f'{n} load{"s" if n != 1 else ""} running</title></rect>')
    for n in sorted({0, most, (most + 1) // 2}):
        body.append(f'<text x="{left + w + 6}" y="{yc(n) + 4:.1f}" fill="#b86a1b">{n}</text>')
    body.append(f'<line x1="{left}" x2="{left + w}" y1="{top + h}" y2="{top + h}" stroke="#555"/>'
                f'<text x="{left + w / 2}" y="{height - 6}" text-anchor="middle" fill="#333">seconds since the '
                f'first load started</text>'
                f'<text transform="translate(14 {top + h / 2}) rotate(-90)" text-anchor="middle" '
                f'fill="#2f5d8a">MB/s (all loads)</text>'
                f'<text transform="translate({width - 10} {top + h / 2}) rotate(90)" text-anchor="middle" '
                f'fill="#b86a1b">loads running</text>')
    return _svg(width, height, body, "Aggregate input MB/s of all running loads over the run")


def streams_svg(model: dict, width: int = 960) -> str | None:
    """Each stream's MB/s as a share of its table's median: the slow one is the short red bar."""
    rows = [r for r in model["streams"] if r["vs_median"] is not None]
    if not rows:
        return None
    order = list(dict.fromkeys(r.get("table") for r in model["records"]))
    rows.sort(key=lambda r: (order.index(r.get("table")), r.get("stream") or 0))
    colours = _table_colours(model["records"])
    dense = len(rows) > 80
    left, right, top = 110, 150, 28
    bar, gap, size = (7, 2, 9) if dense else (14, 4, 12)
    w = width - left - right
    height = top + len(rows) * (bar + gap) + 36
    top_ratio = max(1.5, max(r["vs_median"] for r in rows) * 1.05)
    x = lambda v: left + w * v / top_ratio  # noqa: E731
    body = [f'<text x="{left}" y="16" fill="#333">MB/s of each load relative to its table\'s median '
            f'(1 = median; red: under {THRESHOLD:.0%}; grey, dashed: did not switch)</text>']
    for v in _ticks(top_ratio, 6):
        body.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top - 4}" y2="{height - 30}" stroke="#eee"/>'
                    f'<text x="{x(v):.1f}" y="{height - 16}" text-anchor="middle" fill="#555">{v:g}</text>')
    for v, dash, label in ((1.0, "", "median"), (THRESHOLD, "4 3", f"{THRESHOLD:.0%}")):
        body.append(f'<line x1="{x(v):.1f}" x2="{x(v):.1f}" y1="{top - 4}" y2="{height - 30}" stroke="#333" '
                    f'stroke-dasharray="{dash}"/>')
    for i, r in enumerate(rows):
        yy = top + i * (bar + gap)
        colour = SLOW if r["straggler"] else FAILED if not r["ok"] else colours.get(r.get("table"), PALETTE[0])
        outline = ' stroke="#000" stroke-dasharray="2 2"' if not r["ok"] else ""
        body.append(f'<text x="{left - 6}" y="{yy + bar - 1 if dense else yy + bar - 3}" text-anchor="end" '
                    f'font-size="{size}" fill="#333">{_esc(r.get("group"))}</text>'
                    f'<rect class="stream-bar" data-group="{_esc(r.get("group"))}" x="{left}" y="{yy}" '
                    f'width="{x(r["vs_median"]) - left:.2f}" height="{bar}" fill="{colour}"{outline}>'
                    f'<title>{_esc(r.get("group"))}: {_rate(r["rate"])} MB/s, {_pct(r["vs_median"])} of the '
                    f'table median {_rate(r["median"])} MB/s</title></rect>'
                    f'<text x="{left + w + 6}" y="{yy + bar - 1 if dense else yy + bar - 3}" font-size="{size}" '
                    f'fill="{SLOW if r["straggler"] else "#333"}">'
                    f'{_rate(r["rate"])} MB/s ({_pct(r["vs_median"])})</text>')
    return _svg(width, height, body, "Per-stream throughput against the table median")


TEXTURED = ("prepare", "validate", "switch")
SEPARATOR = ' stroke="#fff" stroke-width="0.5"'  # a thin line between one step's bar and the next
GANTT_TEXTURES = (
    '<defs>'
    '<pattern id="sy-prepare" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
    '<line x1="0" y1="0" x2="0" y2="6" stroke="#fff" stroke-width="2"/></pattern>'
    '<pattern id="sy-validate" width="5" height="5" patternUnits="userSpaceOnUse">'
    '<circle cx="2.5" cy="2.5" r="1.1" fill="#fff"/></pattern>'
    '<pattern id="sy-switch" width="6" height="6" patternUnits="userSpaceOnUse">'
    '<path d="M0 0 L6 6 M6 0 L0 6" stroke="#fff" stroke-width="1.2"/></pattern>'
    '</defs>')


def gantt_svg(model: dict, width: int = 960) -> str | None:
    """One bar per group for its load (or its steps, when stats carry step times), on the run's clock."""
    rows = []
    for r in model["records"]:
        start, end = _ts(r.get("started")), _ts(r.get("ended"))
        _, spans = _step_times(r)
        if (start and end) or spans:
            rows.append((r, start, end, spans))
    if not rows:
        return None
    origin = _run_origin(model["records"])
    ends = [t for r, s, e, spans in rows for t in [e, _ts(r.get("switched"))] + [p[1] for p in spans.values()] if t]
    t_end = max((max(ends) - origin).total_seconds(), 1e-3)
    rows.sort(key=lambda row: (row[1] or min(p[0] for p in row[3].values()), row[0].get("group") or ""))
    colours = _table_colours(model["records"])
    dense = len(rows) > 80
    bar, gap = (7, 2) if dense else (14, 4)
    has_steps = any(spans for _, _, _, spans in rows)
    left, right, top = 110, 40, 54 if has_steps else 34
    w = width - left - right
    height = top + len(rows) * (bar + gap) + 40
    x = lambda t: left + w * (t - origin).total_seconds() / t_end  # noqa: E731
    shades = {"prepare": 0.35, "load": 1.0, "validate": 0.6, "switch": 0.8}
    legend = [(name, colour) for name, colour in colours.items()] + [("straggler", SLOW), ("did not switch", FAILED)]
    # The steps differ by texture as well as shade (readable in grey print and without colour vision):
    # prepare hatched, load solid, validate dotted, switch cross-hatched.
    body = [GANTT_TEXTURES]
    lx = left
    for name, colour in legend:
        body.append(f'<rect x="{lx}" y="6" width="12" height="12" fill="{colour}"/>'
                    f'<text x="{lx + 16}" y="16" fill="#333">{_esc(name)}</text>')
        lx += 30 + 7 * len(str(name))
    if has_steps:
        lx = left
        for step in ("prepare", "load", "validate", "switch"):
            body.append(f'<rect class="gantt-legend-step" data-step="{step}" x="{lx}" y="26" width="22" height="12" '
                        f'fill="#4e79a7" fill-opacity="{shades[step]}" stroke="#333" stroke-width="0.5"/>'
                        + (f'<rect x="{lx}" y="26" width="22" height="12" fill="url(#sy-{step})"/>'
                           if step in TEXTURED else "")
                        + f'<text x="{lx + 27}" y="36" fill="#333">{step}</text>')
            lx += 40 + 7 * len(step)
    for t in _ticks(t_end, 8):
        if t <= t_end:
            xx = left + w * t / t_end
            body.append(f'<line x1="{xx:.1f}" x2="{xx:.1f}" y1="{top - 6}" y2="{height - 34}" stroke="#eee"/>'
                        f'<text x="{xx:.1f}" y="{height - 20}" text-anchor="middle" fill="#555">{t:,g}</text>')
    key = ("bars: prepare, load, validate, switch" if has_steps
           else "bar: load; line to ◆: until switched (validate, switch, task start-up)")
    body.append(f'<text x="{left + w / 2}" y="{height - 4}" text-anchor="middle" fill="#333">'
                f'seconds since the run\'s first {"step" if has_steps else "load"} started · {_esc(key)}</text>')
    for i, (r, start, end, spans) in enumerate(rows):
        yy = top + i * (bar + gap)
        slow = r.get("group") in {s["group"] for s in model["stragglers"]}
        failed = r.get("outcome") != "switched"
        colour = FAILED if failed else SLOW if slow else colours.get(r.get("table"), PALETTE[0])
        if not dense or i % 2 == 0 or slow or failed:
            body.append(f'<text x="{left - 6}" y="{yy + bar - 2}" text-anchor="end" '
                        f'font-size="{9 if dense else 12}" fill="{SLOW if slow or failed else "#333"}">'
                        f'{_esc(r.get("group"))}</text>')
        tip = (f'{r.get("group")}: load {_secs(r.get("seconds"))}, {_bytes(r.get("bytes"))}, '
               f'{_rate(_load_rate(r))} MB/s; {r.get("outcome")}')
        segments = sorted(spans.items(), key=lambda kv: kv[1][0]) if spans else [("load", (start, end))]
        outline = ' stroke="#000" stroke-dasharray="2 2"' if failed else ""
        for step, (s0, s1) in segments:
            bw = max(x(s1) - x(s0), 1.0)
            body.append(f'<rect class="gantt-bar" data-group="{_esc(r.get("group"))}" data-step="{_esc(step)}" '
                        f'x="{x(s0):.2f}" y="{yy}" width="{bw:.2f}" height="{bar}" fill="{colour}" '
                        f'fill-opacity="{shades.get(step, 0.7)}"{outline or SEPARATOR}>'
                        f'<title>{_esc(tip)} [{_esc(step)}]</title></rect>')
            if spans and step in TEXTURED:
                body.append(f'<rect class="gantt-texture" data-step="{_esc(step)}" x="{x(s0):.2f}" y="{yy}" '
                            f'width="{bw:.2f}" height="{bar}" fill="url(#sy-{step})" pointer-events="none"/>')
        switched = _ts(r.get("switched"))
        if switched and not spans and end:
            xs, ym = x(switched), yy + bar / 2
            body.append(f'<line x1="{x(end):.2f}" x2="{xs:.2f}" y1="{ym}" y2="{ym}" stroke="#999"/>'
                        f'<path d="M{xs:.2f} {ym - 4} l4 4 l-4 4 l-4 -4 z" fill="#555">'
                        f'<title>{_esc(r.get("group"))} switched at +{_rate((switched - origin).total_seconds())} s'
                        f'</title></path>')
    return _svg(width, height, body, "Gantt chart of the loads of every task group")


def charts(model: dict) -> dict[str, str]:
    out = {"throughput": throughput_svg(model), "streams": streams_svg(model), "gantt": gantt_svg(model)}
    return {k: v for k, v in out.items() if v}


# --- HTML ---------------------------------------------------------------------------------

CSS = """
:root { --ink:#1f2328; --muted:#59636e; --line:#d8dee4; --bad:#d62728; --good:#1a7f37; --warn:#9a6700; }
* { box-sizing: border-box; }
body { font-family: %s; color: var(--ink); margin: 0; background: #f6f8fa; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 24px 64px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.sub { color: var(--muted); margin: 0 0 16px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; }
.card b { display: block; font-size: 20px; } .card span { color: var(--muted); font-size: 12px; }
.status { padding: 10px 14px; border-radius: 6px; margin: 12px 0; font-weight: 600; }
.status.ok { background: #dafbe1; color: var(--good); } .status.bad { background: #ffebe9; color: var(--bad); }
.status.warn { background: #fff8c5; color: var(--warn); }
table { border-collapse: collapse; width: 100%%; background: #fff; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f4; } td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.slow td { background: #fff0ef; } tr.slow td:first-child { border-left: 4px solid var(--bad); }
tr.failed td { background: #f3f3f3; } tr.failed td:first-child { border-left: 4px solid #555; }
.tag { display: inline-block; padding: 0 6px; border-radius: 10px; font-size: 11px; font-weight: 600; }
.tag.slow { background: var(--bad); color: #fff; } .tag.failed { background: #555; color: #fff; }
.tag.ok { background: #dafbe1; color: var(--good); }
.chart { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 8px; overflow-x: auto; }
.chart svg { display: block; max-width: 100%%; height: auto; }
.note { color: var(--muted); font-size: 13px; } code { font-size: 12px; }
ul.why { margin: 0; padding-left: 18px; }
""" % FONT


def _th(*cols: str) -> str:
    return "<tr>" + "".join(f'<th class="n">{_esc(c[1:])}</th>' if c.startswith("#") else f"<th>{_esc(c)}</th>"
                            for c in cols) + "</tr>"


def _td(value: str, num: bool = False) -> str:
    return f'<td class="n">{value}</td>' if num else f"<td>{value}</td>"


def _header_facts(model: dict) -> list[tuple[str, str]]:
    s, tot = model["stats"], model["stats"].get("totals") or {}
    return [("makespan: first load start to last load end", _secs(s.get("makespan_seconds"))),
            ("steps: first step start to last step end (the Gantt chart)", _secs(s.get("steps_seconds"))),
            ("rows", _int(tot.get("rows"))),
            ("input", _bytes(tot.get("bytes"))), ("rows/s over the makespan", _int(tot.get("rows_per_s"))),
            ("MB/s over the makespan", _rate(tot.get("mb_per_s"))), ("peak MB/s", _rate(model["peak_mb_per_s"])),
            ("groups switched", f'{_int(tot.get("switched"))} / {_int(tot.get("groups"))}'),
            ("streams", _int(s.get("streams")))] + (
        # The batch's publish: every table locked at once, for this long (readers' longest wait).
        [("tables locked by the publish", _secs((s.get("publish_batch") or {}).get("lock_seconds")))]
        if (s.get("publish_batch") or {}).get("lock_seconds") is not None else [])


def _status(model: dict) -> tuple[str, str]:
    bad, n = model["not_switched"], len(model["records"])
    major = model["stragglers"]
    stats = model["stats"]
    if stats.get("plan_error"):
        return "bad", f"refused before any load, nothing changed: {stats['plan_error']}"
    if stats.get("publish_error"):
        return "bad", f"the batch was not published, every table kept its contents: {stats['publish_error']}"
    if bad:
        return "bad", f"{len(bad)} of {n} groups did not switch: " + ", ".join(r["group"] for r in bad)
    if major:
        return "warn", (f"all {n} groups switched; {len(major)} straggler{'s' if len(major) > 1 else ''}: "
                        + ", ".join(x["group"] for x in major))
    return "ok", f"all {n} groups switched, no stragglers"


def _straggler_why(s: dict) -> list[str]:
    out = list(s.get("what_differs") or [])
    if s.get("bytes_vs_median") is not None:
        out.append(f"file {_bytes(s.get('bytes'))} vs table median {_bytes(s.get('table_median_bytes'))}")
    return out


def _html(model: dict, svgs: dict[str, str]) -> str:
    s = model["stats"]
    title = f"Switchyard run {s.get('run_id', '?')}"
    kind, status = _status(model)
    p = [f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
         f'<meta name="viewport" content="width=device-width, initial-scale=1">'
         f'<title>{_esc(title)}</title><style>{CSS}</style></head><body><main>',
         f'<h1>{_esc(s.get("dag_id", "?"))} · {_esc(s.get("run_id", "?"))}</h1>',
         f'<p class="sub">batch <code>{_esc(s.get("batch") or "–")}</code> · target {_esc(s.get("target") or "–")}'
         f' (schema {_esc(s.get("schema") or "–")}) · {_esc(s.get("streams") or "–")} streams · generated '
         f'{_esc(s.get("generated_at") or "–")}</p>',
         f'<div class="status {kind}" id="status">{_esc(status)}</div><div class="cards">']
    p += [f'<div class="card"><b>{_esc(v)}</b><span>{_esc(k)}</span></div>' for k, v in _header_facts(model)]
    p.append("</div>")
    head, sections = p, {}
    p = sections['stragglers'] = []
    p.append('<h2 id="stragglers">Long tail: stragglers</h2>')
    if model["stragglers"]:
        p.append(f'<p class="note">Loads under {THRESHOLD:.0%} of their table\'s median MB/s (tables with at '
                 f'least 2 loads) that cost the run at least {NEGLIGIBLE_SHARE:.0%} of its makespan and '
                 f'{MEASURABLE_SECONDS:g} s (less is a task start\'s own noise in Airflow). The run '
                 f'takes as long as its slowest stream; "time lost" is this load\'s time beyond what its '
                 f'bytes take at the table\'s median rate.</p><table>')
        p.append(_th("group", "#MB/s", "#table median", "#share", "#seconds", "#time lost", "what differs"))
        for x in model["stragglers"]:
            tag = '<span class="tag slow">slow</span>'
            why = "".join(f"<li>{_esc(w)}</li>" for w in _straggler_why(x))
            p.append(f'<tr class="slow"><td>{_esc(x["group"])} {tag}</td>'
                     + _td(_rate(x.get("mb_per_s")), True) + _td(_rate(x.get("table_median_mb_per_s")), True)
                     + _td(_pct(x.get("ratio")), True) + _td(_secs(x.get("seconds")), True)
                     + _td(_secs(x.get("seconds_lost")), True) + f'<td><ul class="why">{why}</ul></td></tr>')
        p.append("</table>")
    else:
        p.append(f'<p class="note">No load ran under {THRESHOLD:.0%} of its table\'s median MB/s at a cost of '
                 f'{NEGLIGIBLE_SHARE:.0%} of the makespan and {MEASURABLE_SECONDS:g} s or more.</p>')
    if "streams" in svgs:
        p.append(f'<div class="chart" id="chart-streams">{svgs["streams"]}</div>')

    p = sections['throughput'] = []
    p.append('<h2 id="throughput">Throughput over the run</h2>')
    if "throughput" in svgs:
        p.append('<p class="note">Aggregate input MB/s of all loads running at each moment (each load\'s bytes '
                 'spread evenly over its start..end; blue, left axis) and the number of loads running '
                 '(orange dashes, right axis). Gaps are time between loads: task start-up and queueing.</p>')
        p.append(f'<div class="chart" id="chart-throughput">{svgs["throughput"]}</div>')
    else:
        p.append('<p class="note">No load has timings: nothing to chart.</p>')

    p = sections['gantt'] = []
    p.append('<h2 id="gantt">Task groups over time</h2>')
    if "gantt" in svgs:
        p.append(f'<div class="chart" id="chart-gantt">{svgs["gantt"]}</div>')
    if model["untimed"]:
        p.append(f'<p class="note">Without load timings (not charted): '
                 f'{_esc(", ".join(r.get("group", "?") for r in model["untimed"]))}.</p>')

    p = sections['validation'] = []
    p.append('<h2 id="validation">Validation and failures</h2>')
    v = model["validation"]
    p.append(f'<p>{v["passed"]} passed · <b style="color:var(--bad)">{v["failed"]} failed</b> · '
             f'{v["not run"]} not run</p>' if v["failed"] else
             f'<p>{v["passed"]} passed · 0 failed · {v["not run"]} not run</p>')
    if model["failed_checks"]:
        p.append("<table>" + _th("group", "expectation", "column", "expected", "observed", "file"))
        for c in model["failed_checks"]:
            p.append(f'<tr class="failed"><td>{_esc(c["group"])} <span class="tag failed">failed</span></td>'
                     f'<td>{_esc(c.get("expectation"))}</td><td>{_esc(c.get("column") or "–")}</td>'
                     f'<td class="n">{_esc(_plain(c.get("expected")))}</td>'
                     f'<td class="n">{_esc(_plain(c.get("observed")))}</td><td><code>{_esc(c.get("file") or "–")}'
                     f'</code></td></tr>')
        p.append("</table>")
    if model["not_switched"]:
        p.append("<h3>Groups that did not switch</h3><table>" + _th("group", "outcome", "steps", "error"))
        for r in model["not_switched"]:
            states = ", ".join(f"{k} {v or '–'}" for k, v in (r.get("states") or {}).items())
            errors = "; ".join(f"{k}: {v}" for k, v in (r.get("errors") or {}).items())
            p.append(f'<tr class="failed"><td>{_esc(r.get("group"))}</td><td>{_esc(r.get("outcome"))}</td>'
                     f'<td>{_esc(states or "–")}</td><td>{_esc(errors or "–")}</td></tr>')
        p.append("</table>")

    p = sections['tables'] = []
    p.append('<h2 id="tables">Tables</h2><table>')
    p.append(_th("table", "#rows", "#input", "#partitions", "#groups", "#seconds", "#MB/s", "#MB/s per stream",
                 "#rows/s"))
    for name, t in (s.get("tables") or {}).items():
        p.append(f"<tr><td>{_esc(name)}</td>" + _td(_int(t.get("rows")), True) + _td(_bytes(t.get("bytes")), True)
                 + _td(_int(t.get("partitions")), True) + _td(_int(t.get("groups")), True)
                 + _td(_secs(t.get("seconds")), True) + _td(_rate(_table_rate(t)), True)
                 + _td(_rate(_stream_rate(t)), True) + _td(_int(t.get("rows_per_s")), True) + "</tr>")
    p.append('</table><p class="note">seconds: from the table\'s first load start to its last load end; MB/s per '
             'stream: the rate of one load while it runs.</p>')

    p = sections['streams'] = []
    p.append('<h2 id="streams">Streams, slowest first</h2><table>')
    p.append(_th("group", "#MB/s", "#share of median", "#rows/s", "#seconds", "#input", "#rows", "outcome"))
    for r in model["streams"]:
        cls = "failed" if not r["ok"] else "slow" if r["straggler"] else ""
        tag = (' <span class="tag failed">failed</span>' if not r["ok"] else
               ' <span class="tag slow">slow</span>' if r["straggler"] else "")
        p.append(f'<tr class="{cls}" data-group="{_esc(r.get("group"))}"><td>{_esc(r.get("group"))}{tag}</td>'
                 + _td(_rate(r["rate"]), True) + _td(_pct(r["vs_median"]), True) + _td(_int(r["rows_rate"]), True)
                 + _td(_secs(r.get("seconds")), True) + _td(_bytes(r.get("bytes")), True)
                 + _td(_int(r.get("rows")), True) + _td(_esc(r.get("outcome"))) + "</tr>")
    p.append("</table>")

    p = sections['where'] = []
    placed = _placed(model["records"])
    if placed:
        p.append('<h2 id="where">Where each load ran and how it was logged (SQL Server)</h2><p class="note">'
                 'The scheduler, CPU and NUMA node of each load\'s session (sys.dm_exec_requests, '
                 'sys.dm_os_schedulers) and the port it came in on; minimal logging measured from the session\'s '
                 'log bytes against the pages it wrote (sys.dm_tran_database_transactions), or, where no sample '
                 'fell inside a transaction, by the recovery model\'s rules.</p><table>')
        p.append(_th("group", "#port", "#session", "#scheduler", "#node", "#CPU", "logged", "how we know"))
        for r in placed:
            p.append(f'<tr><td>{_esc(r.get("group"))}</td>' + "".join(
                _td(_esc("–" if r.get(k) is None else r.get(k)), True)
                for k in ("port", "session_id", "scheduler_id", "node_id", "cpu_id"))
                + _td(_esc(r.get("logging") or "–")) + _td(_esc(_logging_basis(r))) + "</tr>")
        p.append("</table>")

    p = sections['waits'] = []
    if model["waits"]:
        total = sum(w["wait_ms"] or 0 for w in model["waits"]) or 1
        p.append('<h2 id="waits">Top waits (SQL Server)</h2><p class="note">Deltas of '
                 '<code>sys.dm_os_wait_stats</code> over the run. Signal time is time spent waiting for a '
                 'scheduler after the resource was ready (CPU pressure).</p><table>')
        p.append(_th("wait type", "#wait ms", "#share", "#signal ms", "#waiting tasks"))
        for w in model["waits"][:20]:
            p.append(f'<tr><td><code>{_esc(w["wait_type"])}</code></td>' + _td(_int(w["wait_ms"]), True)
                     + _td(_pct((w["wait_ms"] or 0) / total), True) + _td(_int(w["signal_ms"]), True)
                     + _td(_int(w["waiting_tasks"]), True) + "</tr>")
        p.append("</table>")

    # A run with failures leads with them; otherwise the long tail comes first.
    p = sections['preflight'] = []
    if s.get("preflight"):
        p.append('<h2 id="preflight">Before any load: what setup found and did</h2><p class="note">The '
                 'pre-flight\'s notes: a spec change it reconciled (<code>on_spec_change</code>), what it '
                 'said about the target, another run\'s groups it discarded.</p><ul>')
        p += [f"<li>{_esc(n)}</li>" for n in s["preflight"]]
        p.append("</ul>")
    order = ["preflight", "stragglers", "throughput", "gantt", "validation", "tables", "streams", "where", "waits"]
    if model["not_switched"] or model["failed_checks"]:
        order.remove("validation")
        order.insert(0, "validation")
    p = head + [line for name in order for line in sections[name]]
    p.append("</main></body></html>\n")
    return "\n".join(p)


def _placed(records: list[dict]) -> list[dict]:
    """The loads whose target said where they ran or how they were logged (SQL Server), by group."""
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


# --- Markdown -----------------------------------------------------------------------------

def _md_cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _md_table(head: list[str], rows: list[list[Any]]) -> list[str]:
    align = ["---:" if h.startswith("#") else "---" for h in head]
    out = ["| " + " | ".join(h.lstrip("#") for h in head) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def _markdown(model: dict, chart_files: dict[str, str]) -> str:
    s = model["stats"]
    kind, status = _status(model)
    mark = {"ok": "OK", "warn": "WARNING", "bad": "FAILED"}[kind]
    m = [f"# {s.get('dag_id', '?')} · {s.get('run_id', '?')}", "",
         f"batch `{s.get('batch') or '–'}` · target {s.get('target') or '–'} (schema {s.get('schema') or '–'}) · "
         f"{s.get('streams') or '–'} streams · generated {s.get('generated_at') or '–'}", "",
         f"**{mark}: {status}**", ""]
    m += _md_table([k for k, _ in _header_facts(model)], [[v for _, v in _header_facts(model)]])
    head, sections = m, {}

    m = sections["stragglers"] = ["## Long tail: stragglers", ""]
    if model["stragglers"]:
        m += [f"Loads under {THRESHOLD:.0%} of their table's median MB/s that cost the run at least "
              f"{NEGLIGIBLE_SHARE:.0%} of its makespan and {MEASURABLE_SECONDS:g} s. Time lost: this load's time beyond "
              f"what its bytes take at the table's median rate.", ""]
        m += _md_table(["group", "#MB/s", "#table median", "#share", "#seconds", "#time lost", "what differs"],
                       [[f"**{x['group']}** (SLOW)", _rate(x.get("mb_per_s")),
                         _rate(x.get("table_median_mb_per_s")), _pct(x.get("ratio")), _secs(x.get("seconds")),
                         _secs(x.get("seconds_lost")), "; ".join(_straggler_why(x)) or "–"]
                        for x in model["stragglers"]])
    else:
        m += [f"No load ran under {THRESHOLD:.0%} of its table's median MB/s at a cost of "
              f"{NEGLIGIBLE_SHARE:.0%} of the makespan and {MEASURABLE_SECONDS:g} s or more.", ""]
    if "streams" in chart_files:
        m += [f"![Per-stream MB/s against the table median]({chart_files['streams']})", ""]

    m = sections["charts"] = ["## Throughput over the run", ""]
    if "throughput" in chart_files:
        m += ["Aggregate input MB/s of all running loads (each load's bytes spread over its start..end), and "
              "the number of loads running.", "", f"![Aggregate MB/s over the run]({chart_files['throughput']})", ""]
    else:
        m += ["No load has timings: nothing to chart.", ""]
    m += ["## Task groups over time", ""]
    if "gantt" in chart_files:
        m += [f"![Gantt chart of the loads]({chart_files['gantt']})", ""]
    if model["untimed"]:
        m += ["Without load timings (not charted): " + ", ".join(r.get("group", "?") for r in model["untimed"]), ""]

    v = model["validation"]
    m = sections["validation"] = ["## Validation and failures", "", f"{v['passed']} passed · **{v['failed']} failed** · {v['not run']} not run", ""]
    if model["failed_checks"]:
        m += _md_table(["group", "expectation", "column", "expected", "observed", "file"],
                       [[f"**{c['group']}** (FAILED)", c.get("expectation"), c.get("column") or "–",
                         _plain(c.get("expected")), _plain(c.get("observed")), f"`{c.get('file') or '–'}`"]
                        for c in model["failed_checks"]])
    if model["not_switched"]:
        m += ["### Groups that did not switch", ""]
        m += _md_table(["group", "outcome", "steps", "error"],
                       [[r.get("group"), r.get("outcome"),
                         ", ".join(f"{k} {v or '–'}" for k, v in (r.get("states") or {}).items()) or "–",
                         "; ".join(f"{k}: {e}" for k, e in (r.get("errors") or {}).items()) or "–"]
                        for r in model["not_switched"]])

    m = sections["tables"] = ["## Tables", ""]
    m += _md_table(["table", "#rows", "#input", "#partitions", "#groups", "#seconds", "#MB/s", "#MB/s per stream",
                    "#rows/s"],
                   [[name, _int(t.get("rows")), _bytes(t.get("bytes")), _int(t.get("partitions")),
                     _int(t.get("groups")), _secs(t.get("seconds")), _rate(_table_rate(t)),
                     _rate(_stream_rate(t)), _int(t.get("rows_per_s"))]
                    for name, t in (s.get("tables") or {}).items()])
    m += ["## Streams, slowest first", ""]
    m += _md_table(["group", "#MB/s", "#share of median", "#rows/s", "#seconds", "#input", "#rows", "outcome"],
                   [[r.get("group") + (" **FAILED**" if not r["ok"] else " **SLOW**" if r["straggler"] else ""),
                     _rate(r["rate"]), _pct(r["vs_median"]), _int(r["rows_rate"]), _secs(r.get("seconds")),
                     _bytes(r.get("bytes")), _int(r.get("rows")), r.get("outcome")] for r in model["streams"]])
    placed = _placed(model["records"])
    if placed:
        m += ["## Where each load ran and how it was logged (SQL Server)", ""]
        m += _md_table(["group", "#port", "#session", "#scheduler", "#node", "#CPU", "logged", "how we know"],
                       [[r.get("group")] + ["–" if r.get(k) is None else r.get(k)
                                            for k in ("port", "session_id", "scheduler_id", "node_id", "cpu_id")]
                        + [r.get("logging") or "–", _logging_basis(r)] for r in placed])
    if model["waits"]:
        total = sum(w["wait_ms"] or 0 for w in model["waits"]) or 1
        m += ["## Top waits (SQL Server)", "", "Deltas of `sys.dm_os_wait_stats` over the run.", ""]
        m += _md_table(["wait type", "#wait ms", "#share", "#signal ms", "#waiting tasks"],
                       [[f"`{w['wait_type']}`", _int(w["wait_ms"]), _pct((w["wait_ms"] or 0) / total),
                         _int(w["signal_ms"]), _int(w["waiting_tasks"])] for w in model["waits"][:20]])
    m = sections["preflight"] = []
    if s.get("preflight"):
        m += ["## Before any load: what setup found and did", ""] + [f"- {n}" for n in s["preflight"]] + [""]
    order = ["preflight", "stragglers", "charts", "validation", "tables"]
    if model["not_switched"] or model["failed_checks"]:
        order = ["preflight", "validation", "stragglers", "charts", "tables"]
    return "\n".join(head + [line for name in order for line in sections[name]])


# --- entry point --------------------------------------------------------------------------

def _write(path: Path, text: str) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path


def write_report(stats: dict, out_dir: Path) -> dict[str, Path]:
    """Writes report.html, report.md and the charts' SVG files into out_dir; returns their paths by name."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model = build(stats)
    svgs = charts(model)
    paths: dict[str, Path] = {}
    for name, svg in svgs.items():
        paths[f"{name}_svg"] = _write(out_dir / CHART_FILES[name], '<?xml version="1.0" encoding="UTF-8"?>\n' + svg)
    for name, file in CHART_FILES.items():  # a chart of an earlier run must not stand in for this one's
        if name not in svgs and (out_dir / file).exists():
            (out_dir / file).unlink()
    paths["html"] = _write(out_dir / "report.html", _html(model, svgs))
    paths["markdown"] = _write(out_dir / "report.md", _markdown(model, {k: CHART_FILES[k] for k in svgs}) + "\n")
    return paths
