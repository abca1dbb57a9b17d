"""The report's charts as inline SVG built here (the page loads nothing from anywhere): the
aggregate write rate over the run, each stream's rate, a Gantt of every group's steps."""
from __future__ import annotations

import math
from typing import Iterable

from switchyard.observability.report.model import THRESHOLD, _load_rate, _run_origin, _step_times
from switchyard.observability.report.numbers import _bytes, _esc, _pct, _rate, _secs, _ts

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7")


SLOW = "#d62728"


FAILED = "#7f7f7f"


FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"


CHART_FILES = {"throughput": "report-throughput.svg", "streams": "report-streams.svg",
               "gantt": "report-gantt.svg"}


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
