"""The run report: built from stats assembled the way the stats task assembles them.

The inputs are group results shaped like the operators' XComs (load, validate, switch,
task states), put through switchyard.observability.stats.assemble(), so the report is tested against
the real stats.json layout, including a straggler, a failed expectation, a load that
never ran, and SQL Server wait statistics.
"""
from __future__ import annotations

import re
import shutil
import tomllib
import xml.etree.ElementTree as ET
from datetime import datetime, timedelta
from fnmatch import fnmatch
from pathlib import Path

import pytest
from jinja2 import StrictUndefined

from helpers import LINEITEM_BYTES, PLAN, ROOT, T0, browser, context, group, iso
from switchyard.observability.report import build, write_report
from switchyard.observability.report.render import TEMPLATES, environment, html, markdown
from switchyard.observability.stats import assemble, stragglers

SVG = "{http://www.w3.org/2000/svg}"


T = 5  # the fixture's time unit, seconds


@pytest.fixture
def stats() -> dict:
    """4 streams; lineitem_3 loads at half the rate of its siblings (6 s lost: a straggler that
    costs the run a measurable time); orders_2 fails its row count; customer_4's load failed (no
    timings). Times in units of T seconds."""
    groups = {}
    for k in range(1, 5):
        seconds = 1.2 * T if k == 3 else 0.6 * T  # 1.5 MB/s against 3.1 MB/s
        groups[f"lineitem_{k}"] = group("lineitem", k, start=(k - 1) * 0.3 * T, seconds=seconds,
                                        nbytes=LINEITEM_BYTES, rows=150_000)
        groups[f"orders_{k}"] = group("orders", k, start=(3 + (k - 1) * 0.3) * T, seconds=0.28 * T,
                                      nbytes=4_200_000, rows=37_500, observed_rows=37_499 if k == 2 else None)
        groups[f"customer_{k}"] = group("customer", k, start=(6 + (k - 1) * 0.3) * T, seconds=0.22 * T,
                                        nbytes=600_000, rows=3_750, load_failed=(k == 4))
    return assemble(PLAN, groups, context())


@pytest.fixture
def written(stats, tmp_path) -> dict[str, Path]:
    return write_report(stats, tmp_path)


def inline_svgs(page: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", page, flags=re.S)


def bars(svg: str, cls: str) -> dict[str, float]:
    root = ET.fromstring(svg)
    return {r.get("data-group"): float(r.get("width")) for r in root.iter(f"{SVG}rect") if r.get("class") == cls}


def test_writes_html_markdown_and_charts_next_to_stats(written, tmp_path):
    assert set(written) >= {"html", "markdown", "throughput_svg", "streams_svg", "gantt_svg"}
    for path in written.values():
        assert path.parent == tmp_path and path.stat().st_size > 0
    md = written["markdown"].read_text()
    for name in ("report-throughput.svg", "report-streams.svg", "report-gantt.svg"):
        assert f"]({name})" in md


def test_html_is_self_contained(written):
    page = written["html"].read_text()
    assert "<script" not in page.lower()
    assert not re.search(r"\b(src|href)\s*=", page)
    # The only URL in the page is the SVG namespace, which names and fetches nothing.
    assert set(re.findall(r"https?://[^\s\"'<>)]+", page)) <= {"http://www.w3.org/2000/svg"}


def test_header_has_run_facts_with_units_and_separators(written, stats):
    page, md = written["html"].read_text(), written["markdown"].read_text()
    for text in (page, md):
        assert stats["run_id"] in text and "switchyard_tpch" in text and "2026-11-21" in text
        assert "postgres" in text
        assert f"{stats['totals']['rows']:,}" in text  # thousands separators
        assert "MB" in text and "rows/s" in text and "MB/s" in text
        assert f"{stats['makespan_seconds']:.1f} s" in text


def test_straggler_is_flagged_in_html_and_markdown(written):
    page, md = written["html"].read_text(), written["markdown"].read_text()
    row = re.search(r'<tr class="slow" data-group="lineitem_3">.*?</tr>', page, flags=re.S)
    assert row and "slow" in row.group(0)
    stragglers_part = page.split('<h2 id="stragglers">', 1)[1].split("</table>", 1)[0]
    assert "lineitem_3" in stragglers_part and "lineitem_1" not in stragglers_part
    assert "50%" in stragglers_part  # half its table's median rate
    assert "same file size" in stragglers_part  # what differs: nothing in the data, look at the source
    assert "**lineitem_3** (SLOW)" in md
    assert "| lineitem_3 **SLOW** |" in md
    # Slowest first: the straggler leads the switched streams in the per-stream table.
    switched = [m for m in re.findall(r'<tr class="(\w*)" data-group="(\w+)"', page) if m[0] != "failed"]
    assert switched[0] == ("slow", "lineitem_3")


def test_failed_validation_is_flagged_with_expected_and_observed(written):
    page, md = written["html"].read_text(), written["markdown"].read_text()
    failed = re.search(r'<tr class="failed"><td>orders_2 <span class="tag failed">failed</span></td>.*?</tr>',
                       page, flags=re.S)
    assert failed, "the failed expectation of orders_2 is not listed"
    assert "expect_table_row_count_to_equal" in failed.group(0)
    assert ">37,500<" in failed.group(0) and ">37,499<" in failed.group(0)
    assert "/data/batch/orders/orders.2.tbl" in failed.group(0)
    assert "failed at validate" in page and "10 passed" in page and "1 failed" in page
    assert "1 not run" in page
    assert "| **orders_2** (FAILED) | expect_table_row_count_to_equal | – | 37,500 | 37,499 |" in md
    assert "FAILED: 2 of 12 groups did not switch: orders_2, customer_4" in md
    # A run with failures leads with them.
    assert page.index('<h2 id="validation">') < page.index('<h2 id="stragglers">')
    assert md.index("## Validation and failures") < md.index("## Long tail")


def test_untimed_group_is_reported_not_charted(written):
    page = written["html"].read_text()
    error = "load: TargetError: customer.4.tbl line 17, column 3: invalid integer"
    assert error in page and error in written["markdown"].read_text()
    assert "Without load timings (not charted): customer_4" in page
    gantt = ET.fromstring(written["gantt_svg"].read_text())
    charted = {r.get("data-group") for r in gantt.iter(f"{SVG}rect") if r.get("class") == "gantt-bar"}
    assert "customer_4" not in charted and "customer_3" in charted and len(charted) == 11


def test_svgs_are_well_formed_xml(written):
    for name in ("throughput_svg", "streams_svg", "gantt_svg"):
        root = ET.parse(written[name]).getroot()
        assert root.tag == f"{SVG}svg" and float(root.get("width")) > 0 and float(root.get("height")) > 0
    inline = inline_svgs(written["html"].read_text())
    assert len(inline) == 3
    for svg in inline:
        ET.fromstring(svg)


def test_gantt_bar_lengths_follow_load_times(written):
    widths = bars(written["gantt_svg"].read_text(), "gantt-bar")
    # lineitem_3 took twice as long as lineitem_1: its bar is twice as long.
    assert widths["lineitem_3"] == pytest.approx(2 * widths["lineitem_1"], rel=0.01)
    assert widths["orders_1"] == pytest.approx(widths["lineitem_1"] * 0.28 / 0.6, rel=0.01)
    # Bars sit where their loads started, on one clock.
    root = ET.fromstring(written["gantt_svg"].read_text())
    xs = {r.get("data-group"): float(r.get("x")) for r in root.iter(f"{SVG}rect") if r.get("class") == "gantt-bar"}
    per_second = widths["lineitem_1"] / (0.6 * T)
    assert xs["orders_1"] - xs["lineitem_1"] == pytest.approx(3.0 * T * per_second, rel=0.01)


def test_stream_bars_follow_throughput(written):
    widths = bars(written["streams_svg"].read_text(), "stream-bar")
    # Half the rate, half the bar; the straggler is drawn in the alarm colour.
    assert widths["lineitem_3"] == pytest.approx(widths["lineitem_1"] / 2, rel=0.01)
    root = ET.fromstring(written["streams_svg"].read_text())
    fill = {r.get("data-group"): r.get("fill") for r in root.iter(f"{SVG}rect") if r.get("class") == "stream-bar"}
    assert fill["lineitem_3"] == "#d62728" and fill["lineitem_1"] != "#d62728"


def test_aggregate_rate_over_time_sums_the_running_loads(stats):
    model = build(stats)
    steps = model["rate_steps"]
    rate = LINEITEM_BYTES / 1e6 / (0.6 * T)
    slow = LINEITEM_BYTES / 1e6 / (1.2 * T)
    # From 0.9 T to 1.5 T the slow lineitem_3 (0.6..1.8 T) runs beside lineitem_4 (0.9..1.5 T).
    at = [s for s in steps if s[0] <= 1.0 * T < s[1]][0]
    assert at[3] == 2 and at[2] == pytest.approx(rate + slow, rel=1e-6)
    # Two full-rate loads together (0.3..0.6 T: lineitem_1 and lineitem_2) make the peak.
    assert model["peak_mb_per_s"] == pytest.approx(2 * rate, rel=1e-6)
    # The chart's integral is the bytes loaded.
    total = sum((b - a) * mb for a, b, mb, _ in steps)
    loaded = sum(r["bytes"] for r in stats["groups"] if r["started"])
    assert total == pytest.approx(loaded / 1e6, rel=1e-6)


def test_stragglers_keep_their_fields_and_add_what_differs(stats):
    found = {s["group"]: s for s in stragglers(stats["groups"])}
    assert set(found) == {"lineitem_3"}
    s = found["lineitem_3"]
    assert {"group", "mb_per_s", "table_median_mb_per_s", "ratio", "bytes"} <= set(s)
    assert s["ratio"] == pytest.approx(0.5, abs=0.02)
    assert s["bytes_vs_median"] == 1.0 and s["table"] == "lineitem" and s["stream"] == 3
    assert s["seconds_lost"] == pytest.approx(0.6 * T, abs=0.05)
    assert s["what_differs"] and "source" in s["what_differs"][0]


def test_straggler_with_a_small_file_says_so():
    groups = {f"orders_{k}": group("orders", k, start=k, seconds=0.28, nbytes=4_200_000, rows=37_500)
              for k in range(1, 4)}
    groups["orders_4"] = group("orders", 4, start=5, seconds=0.28, nbytes=700_000, rows=6_250)
    found = stragglers(assemble(PLAN, groups, context())["groups"])
    assert [s["group"] for s in found] == ["orders_4"]
    assert "small file" in found[0]["what_differs"][0]


def test_waits_section_for_sql_server_runs(stats, tmp_path):
    stats = dict(stats, target="mssql", waits=[
        {"wait_type": "PAGEIOLATCH_EX", "wait_ms": 48_210, "signal_ms": 310, "waiting_tasks": 5_120},
        {"wait_type": "WRITELOG", "wait_time_ms": 1_250_000, "signal_wait_time_ms": 9_800,
         "waiting_tasks_count": 88_000},
        {"wait_type": "SOS_SCHEDULER_YIELD", "wait_ms": 12_000, "signal_ms": 11_900, "waiting_tasks": 40_000},
    ])
    paths = write_report(stats, tmp_path)
    page, md = paths["html"].read_text(), paths["markdown"].read_text()
    assert '<h2 id="waits">Top waits (SQL Server)</h2>' in page and "## Top waits (SQL Server)" in md
    section = page.split('<h2 id="waits">', 1)[1]
    # Largest first, whichever of the DMV's column names the stats used.
    assert section.index("WRITELOG") < section.index("PAGEIOLATCH_EX") < section.index("SOS_SCHEDULER_YIELD")
    assert ">1,250,000<" in section and ">9,800<" in section and ">88,000<" in section
    assert "| `WRITELOG` | 1,250,000 | 95% | 9,800 | 88,000 |" in md


def test_no_waits_section_without_waits(written):
    assert "Top waits" not in written["html"].read_text()
    assert "Top waits" not in written["markdown"].read_text()


def test_partial_and_sparse_stats_do_not_crash(tmp_path):
    groups = {"lineitem_1": group("lineitem", 1, start=0, seconds=0.6, nbytes=LINEITEM_BYTES, rows=150_000),
              "lineitem_2": group("lineitem", 2, 0, 0, 0, 0, load_failed=True)}
    partial = assemble(PLAN, groups, context())
    paths = write_report(partial, tmp_path / "partial")
    assert "lineitem_2" in paths["html"].read_text()
    # Nothing loaded at all, no makespan: a report without charts, and no chart of an earlier run left behind.
    for g in groups.values():
        g.update(load=None, states={"prepare": "failed", "load": "upstream_failed", "validate": "upstream_failed",
                                    "switch": "upstream_failed"})
    nothing = assemble(PLAN, groups, context())
    assert nothing["makespan_seconds"] is None
    paths = write_report(nothing, tmp_path / "partial")
    assert set(paths) == {"html", "markdown"}
    assert not list((tmp_path / "partial").glob("*.svg"))
    assert "No load has timings" in paths["html"].read_text()
    # The bare minimum.
    paths = write_report({}, tmp_path / "empty")
    assert paths["html"].read_text().startswith("<!DOCTYPE html>")


def test_the_templates_render_a_minimal_model_with_nothing_undefined():
    """A name a template uses that its context lacks fails here, not in a run's stats task."""
    assert environment(True).undefined is StrictUndefined and environment(False).undefined is StrictUndefined
    model = build({})
    assert html(model, {}).startswith("<!DOCTYPE html>")
    assert markdown(model, {}).startswith("# ? · ?\n")


def test_the_templates_ship_with_the_package():
    """Package data the build leaves out is a crash where the package is installed, not in this checkout."""
    shipped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = shipped["switchyard.observability.report"]
    files = [f"templates/{p.name}" for p in TEMPLATES.iterdir()]
    assert "templates/report.html.j2" in files and "templates/report.md.j2" in files
    assert [f for f in files if not any(fnmatch(f, g) for g in patterns)] == []


def test_step_times_draw_one_segment_per_step(stats, tmp_path):
    for r in stats["groups"]:
        if r["started"]:
            start, end = datetime.fromisoformat(r["started"]), datetime.fromisoformat(r["ended"])
            r["steps"] = {"prepare": {"started": iso((start - T0).total_seconds() - 1), "ended": r["started"]},
                          "load": {"started": r["started"], "ended": r["ended"]},
                          "validate": {"started": r["ended"], "ended": (end + timedelta(seconds=1)).isoformat()}}
    svg = write_report(stats, tmp_path)["gantt_svg"].read_text()
    root = ET.fromstring(svg)
    segments = [(r.get("data-group"), r.get("data-step"), float(r.get("width")))
                for r in root.iter(f"{SVG}rect") if r.get("class") == "gantt-bar"]
    assert {s for g, s, _ in segments if g == "lineitem_1"} == {"prepare", "load", "validate"}
    load = {g: w for g, s, w in segments if s == "load"}
    assert load["lineitem_3"] == pytest.approx(2 * load["lineitem_1"], rel=0.01)


# --- in a real browser ----------------------------------------------------------------------

def test_report_renders_in_headless_chromium(written):
    driver, profile = browser()
    try:
        driver.get(written["html"].as_uri())
        assert driver.title.startswith("Switchyard run")
        errors = [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
        assert not errors, errors
        broken = driver.execute_script(
            "return Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)"
            ".map(i => i.src)")
        assert broken == []
        sizes = driver.execute_script(
            "return Array.from(document.querySelectorAll('.chart svg')).map(s => {"
            " const r = s.getBoundingClientRect(); return [s.parentElement.id, r.width, r.height]; })")
        assert {name for name, _, _ in sizes} == {"chart-streams", "chart-throughput", "chart-gantt"}
        assert all(w > 300 and h > 100 for _, w, h in sizes), sizes
        widths = driver.execute_script(
            "const w = g => document.querySelector(`#chart-gantt rect[data-group='${g}']`)"
            ".getBoundingClientRect().width; return [w('lineitem_1'), w('lineitem_3')]")
        assert widths[0] > 0 and widths[1] == pytest.approx(2 * widths[0], rel=0.05)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def test_a_short_straggler_costs_nothing_measurable_and_is_not_flagged(tmp_path):
    """The same half rate in a run of 0.2 s loads: 0.1 s lost is under a second, below what a
    task's start varies by in Airflow, however large a share of the run it is."""
    groups = {f"customer_{k}": group("customer", k, start=k * 0.3, seconds=0.1 if k != 2 else 0.2,
                                     nbytes=600_000, rows=3_750) for k in range(1, 5)}
    stats = assemble(PLAN, groups, context())
    assert stats["makespan_seconds"] < 2
    assert [s["group"] for s in stragglers(stats["groups"])] == ["customer_2"], "slow, by rate alone"
    assert stats["stragglers"] == []
    assert "no stragglers" in write_report(stats, tmp_path)["html"].read_text()


def test_a_slow_load_of_negligible_cost_is_no_straggler(tmp_path):
    """Half its siblings' rate, but 0.05 s lost in a run of several seconds: not flagged anywhere."""
    groups = {f"customer_{k}": group("customer", k, start=k * 2.0, seconds=0.05 if k != 2 else 0.1,
                                     nbytes=600_000, rows=3_750) for k in range(1, 5)}
    groups["lineitem_1"] = group("lineitem", 1, start=0, seconds=9.0, nbytes=LINEITEM_BYTES, rows=150_000)
    stats = assemble(PLAN, groups, context())
    assert stats["makespan_seconds"] == pytest.approx(9.0, abs=0.01)
    assert [s["group"] for s in stragglers(stats["groups"])] == ["customer_2"], "slow, by rate alone"
    assert stats["stragglers"] == [], "0.05 s lost is under 1% of the makespan"
    page = write_report(stats, tmp_path)["html"].read_text()
    assert "negligible" not in page and "no stragglers" in page


def test_gantt_steps_differ_by_texture_not_only_shade(stats, tmp_path):
    for r in stats["groups"]:
        if r["started"]:
            end = datetime.fromisoformat(r["ended"])
            r["steps"] = {"prepare": {"started": iso((datetime.fromisoformat(r["started"]) - T0).total_seconds() - 1),
                                      "ended": r["started"]},
                          "load": {"started": r["started"], "ended": r["ended"]},
                          "validate": {"started": r["ended"], "ended": (end + timedelta(seconds=1)).isoformat()},
                          "switch": {"started": (end + timedelta(seconds=1)).isoformat(),
                                     "ended": (end + timedelta(seconds=1.5)).isoformat()}}
    root = ET.fromstring(write_report(stats, tmp_path)["gantt_svg"].read_text())
    patterns = {p.get("id") for p in root.iter(f"{SVG}pattern")}
    assert {"sy-prepare", "sy-validate", "sy-switch"} <= patterns
    textures = {(r.get("data-step"), r.get("fill")) for r in root.iter(f"{SVG}rect") if r.get("class") == "gantt-texture"}
    assert textures == {("prepare", "url(#sy-prepare)"), ("validate", "url(#sy-validate)"),
                        ("switch", "url(#sy-switch)")}, "load is solid; every other step has its own texture"
    legend = [r.get("data-step") for r in root.iter(f"{SVG}rect") if r.get("class") == "gantt-legend-step"]
    assert legend == ["prepare", "load", "validate", "switch"]


def test_the_durations_are_labelled_with_what_they_measure(stats, tmp_path):
    stats["steps_seconds"] = 13.0
    page = write_report(stats, tmp_path)["html"].read_text()
    assert f"<b>{stats['makespan_seconds']:.1f} s</b><span>makespan: first load start to last load end</span>" in page
    assert "<b>13.0 s</b><span>steps: first step start to last step end (the Gantt chart)</span>" in page


def test_stats_carry_the_steps_span_beside_the_makespan():
    g = group("orders", 1, start=1.0, seconds=2.0, nbytes=4_200_000, rows=37_500)
    g["prepare"] = {"step_started": iso(0.0), "step_ended": iso(1.0)}
    g["load"] = dict(g["load"], step_started=iso(1.0), step_ended=iso(3.0))
    g["switch"] = dict(g["switch"], step_started=iso(4.0), step_ended=iso(4.5))
    stats = assemble(PLAN, {"orders_1": g}, context())
    assert stats["makespan_seconds"] == pytest.approx(2.0) and stats["steps_seconds"] == pytest.approx(4.5)


def test_a_refused_or_unpublished_run_says_why_in_the_report_and_the_run_note(tmp_path):
    from switchyard.airflow.run_notes import run_note
    refusal = ("AirflowFailException: the batch was refused before any load; nothing was changed. 2 problems:\n"
               "- /data/2026-01/trips/trips.2.csv: listed in the manifest (trips stream 2, 193 rows) but not found")
    stats = assemble({}, {}, context())
    stats.update(batch="2026-01", plan_error=refusal)
    page = write_report(stats, tmp_path / "refused")["html"].read_text()
    assert "refused before any load, nothing changed: AirflowFailException: the batch was refused" in page
    assert "trips.2.csv: listed in the manifest" in page and "<code>2026-01</code>" in page
    note = run_note(stats, "failed", "Switchyard: batch 2026-01", "/report")
    # The note says it once, without the exception's class: "2 problems: - ...trips.2.csv ...".
    assert "Refused before any load, nothing changed: 2 problems:\n- /data/2026-01/trips/trips.2.csv" in note, note
    assert "AirflowFailException" not in note and "nothing was changed" not in note, note
    # One problem: said as a sentence, not as a list of one.
    stats.update(plan_error="AirflowFailException: pre-flight refused the batch before any load; nothing was "
                            "changed:\n- m.meters: holds batch 2026-11-01, newer than this batch 2026-09-01")
    note = run_note(stats, "failed", "Switchyard: batch 2026-01", "/report")
    assert ("Refused before any load, nothing changed: m.meters: holds batch 2026-11-01, newer than this batch "
            "2026-09-01") in note, note
    # Refused on a source's workers: the note says so, and lists no group as failed (none started).
    groups = {"orders_1": {"table": "orders", "stream": 1, "load": None, "validate": None, "switch": None,
                           "states": dict.fromkeys(("prepare", "load", "validate", "switch"), "upstream_failed")}}
    stats = assemble({"batch": "b", "tables": ["orders"], "groups": {"orders_1": {
        "table": "orders", "stream": 1, "rows": 10, "key_min": 1, "partitioned": True}}}, groups, context())
    stats["source_errors"] = {"setup.files_on_source_a": "StepFailed: orders.3.tbl: line 1: a record, but ..."}
    note = run_note(stats, "failed", "Switchyard: batch b", "/report")
    assert "Refused before any load, nothing changed: setup.files_on_source_a: StepFailed: orders.3.tbl" in note
    assert "Did not switch" not in note, note
    # Two sources refused, the first at length: the note names both, each said in part.
    long = "StepFailed: " + "; ".join(f"orders.{k}.tbl: not in the source's folder" for k in range(1, 40))
    two = {**stats, "source_errors": {"setup.files_on_source_a": long,
                                      "setup.files_on_source_b": "StepFailed: orders.41.tbl: line 7: 3 fields, 9 wanted"}}
    said = run_note(two, "failed", "Switchyard: batch b", "/report")
    assert "setup.files_on_source_b: StepFailed: orders.41.tbl: line 7: 3 fields, 9 wanted" in said, said
    assert "setup.files_on_source_a: StepFailed: orders.1.tbl" in said and "orders.39.tbl" not in said, said
    # Nothing changed, and a table the run would have created is not in the target at all: no
    # table is said to have kept its previous contents.
    assert stats["tables_kept"] == ["orders"] and "Kept their previous contents" not in note, note
    page = write_report(stats, tmp_path / "sources")["html"].read_text()
    assert "refused before any load, nothing changed: setup.files_on_source_a: StepFailed" in page
    groups = {"orders_1": group("orders", 1, start=0, seconds=2.0, nbytes=4_200_000, rows=37_500)}
    stats = assemble({"batch": "b", "tables": ["orders"]}, groups, context(), published=set())
    stats["publish_error"] = "TargetError: publish of batch b refused; ... orders: stream 2 was not staged"
    page = write_report(stats, tmp_path / "unpublished")["html"].read_text()
    assert "the batch was not published, every table kept its contents: TargetError" in page
    assert stats["groups"][0]["outcome"] == "held back" and stats["tables_kept"] == ["orders"]
    note = run_note(stats, "failed", "Switchyard: batch b", "/report")
    assert "Not published, every table kept its contents: TargetError" in note
    # Said as of the run's end: the next run discards them.
    assert ("Held back when the run ended (validated, waiting for the batch's other groups; the next run discards "
            "them unless the failed groups are cleared first): orders_1.") in note, note
    assert note.split("\n\n")[1].startswith("0 rows, 0.0 MB in the target (37,500 rows, 4.2 MB more loaded and "
                                              "validated, held back), 0/1 groups switched"), note
    # A group run again on its own after the batch went in, refused at its prepare: the target
    # holds the run's batch all the same (its publish's result went with the clear).
    refused = {"table": "orders", "stream": 2, "load": None, "validate": None, "switch": None,
               "errors": {"prepare": "StepFailed: orders_2: this run put batch b in s.orders already"},
               "states": {"prepare": "failed", "load": "upstream_failed", "validate": "upstream_failed",
                          "switch": "upstream_failed"}}
    groups["orders_2"] = refused
    stats = assemble({"batch": "b", "tables": ["orders"]}, groups, context(), published=set(), in_already={"orders"})
    assert stats["tables_kept"] == [] and stats["tables_in_already"] == ["orders"]
    assert stats["failed_groups"] == ["orders_2"] and stats["groups"][0]["outcome"] == "switched"
    note = run_note(stats, "failed", "Switchyard: batch b", "/report")
    # Said before the figures, which count this attempt's groups only ("1/2 groups switched").
    assert note.split("\n\n")[1] == ("This run's batch is in the target, whole, from its earlier tasks: orders; a group "
                                      "run again on its own cannot load (clear the whole run to load the batch again)."), note
    assert "Kept their previous contents" not in note and "Held back" not in note, note
    # The figures say whose they are: the whole batch is in the target, these are the attempt's.
    assert note.split("\n\n")[2].startswith("This attempt's groups: "), note


def test_the_publish_lock_time_is_a_header_fact(stats, tmp_path):
    stats["publish_batch"] = {"tables": ["lineitem", "orders"], "lock_seconds": 0.042}
    page = write_report(stats, tmp_path)["html"].read_text()
    assert "<b>0.04 s</b><span>tables locked by the publish</span>" in page


def test_a_planned_stream_that_neither_switched_nor_failed_fails_the_run():
    """A stream the manifest lists with rows whose groups all skipped: rows nobody loaded."""
    plan = {"tables": ["orders"], "groups": {
        "orders_1": {"table": "orders", "stream": 1, "rows": 10, "key_min": 1, "partitioned": True},
        "orders_2": {"table": "orders", "stream": 2, "rows": 0, "key_min": None, "partitioned": True}}}
    skipped = {"table": "orders", "stream": 1, "load": None, "validate": None, "switch": None,
               "states": dict.fromkeys(("prepare", "load", "validate", "switch"), "skipped")}
    stats = assemble(plan, {"orders_1": skipped, "orders_2": dict(skipped, stream=2)}, context())
    assert stats["failed_groups"] == ["orders_1"]
    assert stats["groups"][0]["outcome"] == "not loaded (its rows are in the manifest)"
    assert stats["groups"][1]["outcome"] == "skipped"   # an empty stream: nothing to load


def test_a_run_marked_failed_during_its_publish_says_the_batch_is_in_whole_or_not_at_all():
    """Marked failed while publish_batch ran, the run has no statistics, and its COMMIT may have
    reached the server before the task was stopped: the note says the batch is in whole or not at
    all, and where the target says which; a run that never started its publish says nothing of it."""
    from switchyard.airflow.run_notes import run_note
    note = run_note(None, "failed", "Switchyard: batch b", "/report", publish_started="2026-12-01 14:29:53 UTC")
    assert ("It ended while its publish (publish_batch, started 2026-12-01 14:29:53 UTC) ran: the publish is one "
            "transaction, so the batch is in the target whole, or not at all; the target's control table "
            "switchyard.partition_batches says which batch each partition holds.") in note
    assert "It ended while its publish" not in run_note(None, "failed", "Switchyard: batch b", "/report")


def test_what_setup_did_to_the_target_is_in_the_report_and_the_run_note(tmp_path):
    from switchyard.airflow.run_notes import run_note
    ran = ('storms.tracks: unique index tracks_unique on (name, ts) was made by Switchyard from an earlier spec, '
           'which the spec no longer declares (it declares no unique columns); on_spec_change: sync ran: '
           'DROP INDEX "storms"."tracks_unique";')
    said = "storms.tracks: column old is not in the spec's files: the batch's rows get NULL in it"
    groups = {"orders_1": group("orders", 1, start=0, seconds=2.0, nbytes=4_200_000, rows=37_500)}
    stats = assemble({"batch": "2000s", "tables": ["orders"], "preflight": [ran, said]}, groups, context())
    assert stats["preflight"] == [ran, said]
    written = write_report(stats, tmp_path)
    page, md = written["html"].read_text(), written["markdown"].read_text()
    assert 'id="preflight"' in page and "on_spec_change: sync ran: DROP INDEX &quot;storms&quot;" in page
    assert f"- {ran}" in md and f"- {said}" in md
    note = run_note(stats, "success", "Switchyard: batch 2000s", "/report")
    assert 'Setup changed the target to the spec: storms.tracks: unique index tracks_unique' in note
    assert "column old" not in note       # said in the report, not a change
    # A run whose setup said nothing has no such section.
    plain = write_report(assemble({"batch": "b"}, groups, context()), tmp_path / "plain")["html"].read_text()
    assert 'id="preflight"' not in plain


def test_the_note_counts_the_time_some_load_ran_not_the_time_between_a_run_and_a_load_run_again():
    """A group cleared after a fix, its load run again 100 s after the others: the note's figure is
    the time some load was copying, with the span from the first load's start to the last's end
    beside it; loads that overlap are counted once."""
    from switchyard.airflow.run_notes import run_note
    plan = {"batch": "b", "tables": ["orders"]}
    overlapping = {f"orders_{k}": group("orders", k, start=k * 0.5, seconds=2.0, nbytes=4_200_000, rows=37_500)
                   for k in (1, 2)}
    stats = assemble(plan, overlapping, context())
    assert stats["loading_seconds"] == pytest.approx(2.5) == stats["makespan_seconds"]
    assert "2/2 groups switched in 2.5 s of loading." in run_note(stats, "success", "Switchyard: batch b", "/r")
    later = dict(overlapping, orders_2=group("orders", 2, start=100.0, seconds=1.0, nbytes=4_200_000, rows=37_500))
    stats = assemble(plan, later, context())
    assert stats["loading_seconds"] == pytest.approx(3.0) and stats["makespan_seconds"] == pytest.approx(100.5)
    note = run_note(stats, "success", "Switchyard: batch b", "/r")
    assert ("2/2 groups switched in 3.0 s of loading (100.5 s from the first load's start to the last's end)."
            in note), note


def test_the_headline_leaves_skipped_groups_out_and_names_the_held_back_apart(tmp_path):
    """A group that skipped (a stream the batch does not have) did not fail: a run that switched
    every other group leads with `all ... switched`, not FAILED naming the skipped group; a failed
    run names its failed groups, then the groups held back with them, as the run's failure does."""
    skipped = {"table": "orders", "stream": 3, "load": None, "validate": None, "switch": None,
               "states": dict.fromkeys(("prepare", "load", "validate", "switch"), "skipped")}
    plan = {"batch": "b", "tables": ["orders"], "groups": {
        f"orders_{k}": {"table": "orders", "stream": k, "rows": 37_500 if k < 3 else 0,
                        "key_min": 1 if k < 3 else None, "partitioned": True} for k in (1, 2, 3)}}
    ok = {"orders_1": group("orders", 1, start=0, seconds=2.0, nbytes=4_200_000, rows=37_500),
          "orders_2": group("orders", 2, start=0, seconds=2.0, nbytes=4_200_000, rows=37_500), "orders_3": skipped}
    from switchyard.observability.report.model import _header_facts
    model = build(assemble(plan, ok, context()))
    md = write_report(assemble(plan, ok, context()), tmp_path / "ok")["markdown"].read_text()
    assert "all 2 groups switched (1 skipped), no stragglers" in md and "FAILED" not in md, md
    # Nor is it counted as not switched, not validated or not timed.
    assert dict(_header_facts(model))["groups switched"] == "2 / 2 (1 skipped)"
    assert model["validation"] == {"passed": 2, "failed": 0, "not run": 0}
    assert model["not_switched"] == [] and model["untimed"] == []
    from switchyard_dev.demo import _progress_line
    tis = [{"task_id": f"orders_{k}.{step}", "state": "skipped" if k == 3 else "success"}
           for k in (1, 2, 3) for step in ("prepare", "load", "validate", "switch")]
    assert _progress_line(tis, 13) == "[   13s] prepare 2/2 (1 skipped) | load 2/2 (1 skipped) | validate 2/2 (1 skipped) | switch 2/2 (1 skipped)"
    bad = dict(ok, orders_2=group("orders", 2, start=0, seconds=2.0, nbytes=4_200_000, rows=37_500, load_failed=True))
    stats = assemble(plan, bad, context(), published=set())
    md = write_report(stats, tmp_path / "bad")["markdown"].read_text()
    assert ("FAILED: 1 of 3 groups did not switch: orders_2; 1 held back, validated and staged but kept out with "
            "them: orders_1") in md, md
    # The run's note says why each failed group did not switch: its step and its error.
    from switchyard.airflow.run_notes import run_note
    note = run_note(stats, "failed", "Switchyard: batch b", "/report")
    assert "Did not switch: orders_2. orders_2 at load: orders.2.tbl line 17, column 3: invalid integer." in note, note
