"""A run's report for people: report.html (one self-contained page) and report.md, next to stats.json.

The record load was saved by reading per-stream throughput and spotting the one slow
stream, so the report leads with that: streams sorted slowest first against their table's
median, the stragglers with what differs about them, and the charts that show the long
tail (aggregate write rate over the run, a Gantt of the loads). Everything is computed
from stats.json alone, and a partial run (failed groups, loads without timings) still
renders. Charts are inline SVG built here: the page loads nothing from anywhere. The page and
the Markdown are Jinja templates (templates/) rendered from the one model.
"""
from __future__ import annotations

from pathlib import Path

from switchyard.observability.report.charts import CHART_FILES, charts
from switchyard.observability.report.model import build
from switchyard.observability.report.render import html, markdown

__all__ = ["CHART_FILES", "build", "write_report"]


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
    paths["html"] = _write(out_dir / "report.html", html(model, svgs))
    paths["markdown"] = _write(out_dir / "report.md", markdown(model, {k: CHART_FILES[k] for k in svgs}))
    return paths
