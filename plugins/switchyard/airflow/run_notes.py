"""Every Switchyard run's note: outcome, figures and the report's link, set when the run ends.

A task cannot set its DAG run's note in Airflow 3.3 (the Task SDK's execution API has no
call for it), so an Airflow listener does it (registered by the switchyard_reports plugin, switchyard/airflow/plugin.py).
Airflow calls `on_dag_run_success` / `on_dag_run_failed` in the process that decided the
run's final state: the scheduler for scheduled, triggered and backfill runs (inside its
scheduling transaction, which holds the run's row locked), the api-server when a user marks
a run, and `airflow dags test` itself. Where the run comes attached to the caller's session,
the note is written through it and commits with the state change; a second session would
wait on the row lock the caller holds (or on SQLite's database lock) while the caller waits
for the listener.

A note a user wrote is kept: the listener only writes a run without a note, or one whose
note it wrote itself (a cleared and rerun run gets fresh figures).

Imported by every process that loads plugins, task processes included: nothing heavy at
module level.
"""
from __future__ import annotations

import json
import logging
from typing import Any

from airflow.listeners import hookimpl

log = logging.getLogger(__name__)

# dag_run_note.content is VARCHAR(1000) in Airflow's metadata schema.
NOTE_LIMIT = 1000
# A group list longer than this is cut in the note (the report lists every group).
MAX_LISTED = 8


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_LISTED])
    return shown + (f" and {len(names) - MAX_LISTED} more" if len(names) > MAX_LISTED else "")


def headline(dag_id: str, stats: dict | None) -> str:
    """What the run loaded: `Switchyard: batch tpch-sf0.1-s4 into postgres tpch, 4 streams`."""
    if not stats or not stats.get("batch"):
        return f"Switchyard {dag_id}"
    into = " ".join(str(p) for p in (stats.get("target"), stats.get("schema")) if p)
    return (f"Switchyard: batch {stats['batch']}" + (f" into {into}" if into else "")
            + (f", {stats['streams']} streams" if stats.get("streams") else ""))


def run_note(stats: dict | None, state: str, title: str, report: str) -> str:
    """The DAG run's note (Markdown, shown on the run in the UI): outcome, figures, the report's link."""
    link = f"[Run report]({report}) (per-stream throughput, charts, validation)."
    lines = [f"**{title}**: run {state}."]
    if stats:
        tot = stats["totals"]
        span = stats.get("makespan_seconds")
        skipped = sum(1 for g in stats.get("groups") or [] if g.get("outcome") == "skipped")
        lines.append(f"{tot['rows']:,} rows, {tot['bytes'] / 1e6:,.1f} MB, "
                     f"{tot['switched']}/{tot['groups'] - skipped} groups switched"
                     + (f" in {span:,.1f} s of loading" if span else "")
                     + (f" ({skipped} skipped: tables not asked for)" if skipped else "") + ".")
        if stats.get("failed_groups"):
            lines.append(f"Did not switch: {_listed(stats['failed_groups'])}.")
        slow = [s["group"] for s in stats.get("stragglers") or []]
        if slow:
            lines.append(f"Stragglers: {_listed(slow)}.")
    else:
        lines.append("No statistics for this run in SWITCHYARD_RUNS_DIR: the run ended before its stats task "
                     "wrote them, or this Airflow process does not see that folder.")
    body = "\n\n".join(lines)
    # The link is the point of the note: the figures give way if the base URL is very long.
    room = NOTE_LIMIT - len(link) - 2
    if len(body) > room:
        body = body[:max(room - 3, 0)].rstrip() + "..."
    return f"{body}\n\n{link}"[:NOTE_LIMIT]


def is_switchyard_dag(dag: Any) -> bool:
    """A DAG built by Switchyard's factory: its `stats` task is Switchyard's StatsOperator.

    Tags and DAG ids are the user's to change; the stats task is what writes the run's
    statistics and report, so it is what the note needs."""
    task = (getattr(dag, "task_dict", None) or {}).get("stats")
    return (task is not None and getattr(task, "task_type", None) == "StatsOperator"
            and getattr(task, "_task_module", None) == "switchyard.airflow.operators")


def is_our_note(content: str | None, dag_id: str, run_id: str) -> bool:
    """True for an empty note or one this listener wrote for this run (it links this run's report)."""
    if not content or not content.strip():
        return True
    return f"{_report_path(dag_id, run_id)})" in content and content.startswith("**Switchyard")


def _report_path(dag_id: str, run_id: str) -> str:
    from switchyard.observability.stats import report_url
    return report_url(dag_id, run_id, base_url="")


def _read_stats(dag_id: str, run_id: str) -> dict | None:
    from switchyard.observability.stats import stats_path
    path = stats_path(dag_id, run_id)
    try:
        stats = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    # Folder names flatten run ids ([^A-Za-z0-9._-] -> _): another run's file is not this run's.
    return stats if stats.get("run_id") == run_id else None


def note_for(dag_id: str, run_id: str, state: str, base_url: str | None = None) -> str:
    from switchyard.observability.stats import report_url
    stats = _read_stats(dag_id, run_id)
    return run_note(stats, state, headline(dag_id, stats), report_url(dag_id, run_id, base_url))


def annotate(dag_run: Any, state: str) -> None:
    """Sets the note of a finished Switchyard run (see the module doc for which session)."""
    try:
        dag = dag_run.dag
    except Exception:  # noqa: BLE001 - a run whose DAG is not loaded is not ours to judge
        dag = None
    if dag is None or not is_switchyard_dag(dag):
        return
    from sqlalchemy.orm import object_session
    if object_session(dag_run) is not None:
        # The scheduler's (or api-server's) open transaction: the note commits with the state.
        _write_note(dag_run, state)
        return
    # `airflow dags test` hands over a run detached from its session (its in-process task
    # runs close the thread's session) and merges it back afterwards, holding no write lock
    # meanwhile: the note goes through a short session of its own.
    from airflow import settings
    from airflow.models.dagrun import DagRun
    with settings.NonScopedSession() as own:
        attached = own.get(DagRun, dag_run.id)
        if attached is None:
            return
        _write_note(attached, state)
        own.commit()


def _write_note(dag_run: Any, state: str) -> None:
    dag_id, run_id = dag_run.dag_id, dag_run.run_id
    current = dag_run.dag_run_note
    if current is not None and not is_our_note(current.content, dag_id, run_id):
        log.info("run %s of %s keeps the note %s wrote; the report is linked from its stats task",
                 run_id, dag_id, current.user_id or "a user")
        return
    note = note_for(dag_id, run_id, state)
    if current is None:
        dag_run.note = (note, None)
    else:
        current.content = note
        current.user_id = None
    log.info("run %s of %s: note set with the run's figures and report link", run_id, dag_id)


def _safely(dag_run: Any, state: str) -> None:
    # A listener that raises would be logged by Airflow, but it runs inside the scheduler's
    # loop: nothing of ours may disturb it.
    try:
        annotate(dag_run, state)
    except Exception:  # noqa: BLE001
        log.exception("could not set the note of run %s", getattr(dag_run, "run_id", "?"))


@hookimpl
def on_dag_run_success(dag_run: Any, msg: str) -> None:
    _safely(dag_run, "success")


@hookimpl
def on_dag_run_failed(dag_run: Any, msg: str) -> None:
    _safely(dag_run, "failed")
