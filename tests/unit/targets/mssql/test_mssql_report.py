"""The run report on SQL Server: where each load ran (port, session, scheduler, node, CPU) and
how it was logged, from the load details the adapter returns, through the stats task's
assembly (switchyard.observability.stats.assemble) into the HTML and Markdown reports and the control
schema's load_stats rows. The details are what MssqlAdapter.load() returns on a server;
here they are written by hand in that shape.
"""
from __future__ import annotations

from helpers import PLAN, context, group
from switchyard.core.spec import load_spec
from switchyard.observability.report import write_report
from switchyard.observability.stats import assemble, load_stats_columns, load_stats_rows
from switchyard.targets.mssql import MssqlAdapter


def mssql_group(stream: int, **details) -> dict:
    g = group("lineitem", stream, start=stream, seconds=1.0, nbytes=18_000_000, rows=150_000)
    g["load"].pop("backend_pid")
    g["load"].update(details)
    return g


GROUPS = {
    "lineitem_1": mssql_group(1, session_id=61, scheduler_id=3, cpu_id=3, node_id=0, port=2000, local_tcp_port=2000,
                              mode="bulk_insert", recovery_model="SIMPLE", logging="minimal",
                              logging_basis="measured (12 sample(s))", log_ratio=0.0132),
    "lineitem_2": mssql_group(2, session_id=74, scheduler_id=52, cpu_id=68, node_id=1, port=2001,
                              local_tcp_port=2001, mode="bulk_insert", recovery_model="FULL", logging="full",
                              logging_basis="rules (FULL recovery, TABLOCK into an empty heap; no sample fell "
                                            "inside a transaction)"),
}


def test_the_report_says_where_each_load_ran_and_how_it_was_logged(tmp_path):
    stats = assemble({**PLAN, "target": "mssql"}, GROUPS, context())
    by_group = {r["group"]: r for r in stats["groups"]}
    assert by_group["lineitem_1"]["logging"] == "minimal" and by_group["lineitem_1"]["log_ratio"] == 0.0132
    assert by_group["lineitem_2"]["node_id"] == 1 and by_group["lineitem_2"]["recovery_model"] == "FULL"
    paths = write_report(stats, tmp_path)
    page, md = paths["html"].read_text(), paths["markdown"].read_text()
    assert '<h2 id="where">Where each load ran and how it was logged (SQL Server)</h2>' in page
    section = page.split('<h2 id="where">', 1)[1].split("</table>", 1)[0]
    assert "lineitem_1" in section and ">52<" in section and ">68<" in section and ">minimal<" in section
    assert "0.013 log bytes per data byte" in section and "rules (FULL recovery" in section
    assert "| lineitem_1 | 2000 | 61 | 3 | 0 | 3 | minimal | measured (12 sample(s)); 0.013 log bytes per data " \
           "byte |" in md
    assert "| lineitem_2 | 2001 | 74 | 52 | 1 | 68 | full | rules (FULL recovery" in md


def test_the_load_stats_rows_keep_how_each_load_was_logged():
    stats = assemble({**PLAN, "target": "mssql"}, GROUPS, context())
    adapter = MssqlAdapter(load_spec("tpch"), base_port=2000, port_count=1)
    rows = [dict(zip(load_stats_columns(adapter), r)) for r in load_stats_rows(stats, adapter)]
    assert [(r["stream"], r["scheduler_id"], r["node_id"], r["logging"], r["log_ratio"]) for r in rows] == [
        (1, 3, 0, "minimal", 0.0132), (2, 52, 1, "full", None)]


def test_no_such_section_for_postgres_runs(tmp_path):
    stats = assemble(PLAN, {"lineitem_1": group("lineitem", 1, 0, 1.0, 18_000_000, 150_000)}, context())
    paths = write_report(stats, tmp_path)
    assert 'id="where"' not in paths["html"].read_text() and "Where each load ran" not in paths["markdown"].read_text()
