"""report.html and report.md: Jinja templates (`templates/`) rendered from the model. This module
builds what they show, every number already written the report's way; the templates lay it out."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

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
from switchyard.observability.report.numbers import (
    _bytes,
    _esc,
    _int,
    _pct,
    _plain,
    _rate,
    _secs,
)
from switchyard.observability.stats import MEASURABLE_SECONDS, NEGLIGIBLE_SHARE

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _escaped(value: Any) -> Markup:
    """Autoescape as html.escape writes it (&#x27;, &quot;), not as markupsafe does (&#39;, &#34;):
    the page's bytes stay what they were."""
    return value if hasattr(value, "__html__") else Markup(_esc(value))


def _md_cell(value: Any) -> str:
    """A Markdown table cell: a pipe would end the cell, a newline the row."""
    return str(value).replace("|", "\\|").replace("\n", " ")


@lru_cache(maxsize=2)
def environment(autoescape: bool) -> Environment:
    """The templates' environment: autoescaped for the page, plain for the Markdown."""
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                      autoescape=autoescape, finalize=_escaped if autoescape else None)
    env.filters["cell"] = _md_cell
    return env


def _run(stats: dict) -> dict:
    return {"dag_id": stats.get("dag_id", "?"), "run_id": stats.get("run_id", "?"),
            "batch": stats.get("batch") or "–", "target": stats.get("target") or "–",
            "schema": stats.get("schema") or "–", "streams": stats.get("streams") or "–",
            "generated_at": stats.get("generated_at") or "–"}


def _straggler(x: dict) -> dict:
    return {"group": x["group"], "why": _straggler_why(x),
            "cells": [_rate(x.get("mb_per_s")), _rate(x.get("table_median_mb_per_s")), _pct(x.get("ratio")),
                      _secs(x.get("seconds")), _secs(x.get("seconds_lost"))]}


def _failed_check(c: dict) -> dict:
    return {"group": c["group"], "expectation": c.get("expectation"), "column": c.get("column") or "–",
            "expected": _plain(c.get("expected")), "observed": _plain(c.get("observed")),
            "file": c.get("file") or "–"}


def _not_switched(r: dict) -> dict:
    states = ", ".join(f"{k} {v or '–'}" for k, v in (r.get("states") or {}).items())
    errors = "; ".join(f"{k}: {v}" for k, v in (r.get("errors") or {}).items())
    return {"group": r.get("group"), "outcome": r.get("outcome"), "states": states or "–", "errors": errors or "–"}


def _table(name: str, t: dict) -> dict:
    return {"name": name, "cells": [_int(t.get("rows")), _bytes(t.get("bytes")), _int(t.get("partitions")),
                                    _int(t.get("groups")), _secs(t.get("seconds")), _rate(_table_rate(t)),
                                    _rate(_stream_rate(t)), _int(t.get("rows_per_s"))]}


def _stream(r: dict) -> dict:
    return {"group": r.get("group"), "outcome": r.get("outcome"),
            # A skipped group (a stream the batch does not have) did not fail: its outcome says so.
            "flag": "" if r.get("outcome") == "skipped" else "failed" if not r["ok"] else "slow" if r["straggler"] else "",
            "cells": [_rate(r["rate"]), _pct(r["vs_median"]), _int(r["rows_rate"]), _secs(r.get("seconds")),
                      _bytes(r.get("bytes")), _int(r.get("rows"))]}


def _placement(r: dict) -> dict:
    return {"group": r.get("group"), "logging": r.get("logging") or "–", "basis": _logging_basis(r),
            "cells": ["–" if r.get(k) is None else r.get(k)
                      for k in ("port", "session_id", "scheduler_id", "node_id", "cpu_id")]}


def _wait_rows(waits: list[dict]) -> list[dict]:
    total = sum(w["wait_ms"] or 0 for w in waits) or 1
    return [{"type": w["wait_type"], "cells": [_int(w["wait_ms"]), _pct((w["wait_ms"] or 0) / total),
                                               _int(w["signal_ms"]), _int(w["waiting_tasks"])]}
            for w in waits[:20]]


def context(model: dict) -> dict:
    """What both templates show, from the model."""
    stats = model["stats"]
    status, status_text = _status(model)
    return {
        "run": _run(stats), "status": status, "status_text": status_text, "facts": _header_facts(model),
        "font": FONT, "threshold": f"{THRESHOLD:.0%}", "negligible_share": f"{NEGLIGIBLE_SHARE:.0%}",
        "measurable_seconds": f"{MEASURABLE_SECONDS:g}",
        "preflight": stats.get("preflight") or [],
        "stragglers": [_straggler(x) for x in model["stragglers"]],
        "untimed": [r.get("group", "?") for r in model["untimed"]],
        "validation": model["validation"],
        "failed_checks": [_failed_check(c) for c in model["failed_checks"]],
        "not_switched": [_not_switched(r) for r in model["not_switched"]],
        # A run with failures leads with them; otherwise the long tail comes first.
        "failures_first": bool(model["not_switched"] or model["failed_checks"]),
        "tables": [_table(name, t) for name, t in (stats.get("tables") or {}).items()],
        "streams": [_stream(r) for r in model["streams"]],
        "placed": [_placement(r) for r in _placed(model["records"])],
        "waits": _wait_rows(model["waits"]),
        "server": model["server"],
    }


def html(model: dict, svgs: dict[str, str]) -> str:
    """report.html, the charts inline."""
    charts = {name: Markup(svg) for name, svg in svgs.items()}  # markup charts.py built and escaped
    return environment(True).get_template("report.html.j2").render(context(model), charts=charts)


def markdown(model: dict, chart_files: dict[str, str]) -> str:
    """report.md, the charts as the files beside it."""
    return environment(False).get_template("report.md.j2").render(context(model), charts=chart_files)
