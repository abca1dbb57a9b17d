"""report.md: the same report in Markdown, the charts as files beside it."""
from __future__ import annotations

from typing import Any

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
from switchyard.observability.report.numbers import _bytes, _int, _pct, _plain, _rate, _secs
from switchyard.observability.stats import MEASURABLE_SECONDS, NEGLIGIBLE_SHARE


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
        m += [f"## Where each load ran and how it was logged{model['server']}", ""]
        m += _md_table(["group", "#port", "#session", "#scheduler", "#node", "#CPU", "logged", "how we know"],
                       [[r.get("group")] + ["–" if r.get(k) is None else r.get(k)
                                            for k in ("port", "session_id", "scheduler_id", "node_id", "cpu_id")]
                        + [r.get("logging") or "–", _logging_basis(r)] for r in placed])
    if model["waits"]:
        total = sum(w["wait_ms"] or 0 for w in model["waits"]) or 1
        m += [f"## Top waits{model['server']}", "", "Deltas of `sys.dm_os_wait_stats` over the run.", ""]
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
