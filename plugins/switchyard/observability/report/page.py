"""report.html: one self-contained page, the charts inline."""
from __future__ import annotations

from switchyard.observability.report.charts import FONT
from switchyard.observability.report.model import (
    THRESHOLD,
    _header_facts,
    _logging_basis,
    _placed,
    _status,
    _straggler_why,
    _stream_rate,
    _table_rate,
)
from switchyard.observability.report.numbers import _bytes, _esc, _int, _pct, _plain, _rate, _secs
from switchyard.observability.stats import MEASURABLE_SECONDS, NEGLIGIBLE_SHARE

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
        p.append(f'<h2 id="where">Where each load ran and how it was logged{_esc(model["server"])}</h2><p class="note">'
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
        p.append(f'<h2 id="waits">Top waits{_esc(model["server"])}</h2><p class="note">Deltas of '
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
