"""Every Switchyard run's note: outcome, figures and the report's link, set when the run ends;
and, when the run starts, a note naming any Airflow pool its tasks need that does not exist.

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

Airflow holds back a task whose pool does not exist and says so only in the scheduler's log
(a warning each loop): the run shows its tasks "scheduled" and nothing else. The scheduler
calls `on_dag_run_running` when it starts a run (scheduled, triggered, backfill; `airflow dags
test` ignores pools and never calls it): the listener names the missing pools on the run
and in the scheduler's log, with the command that creates them. The run goes on once they
exist, and its final note replaces that one.

Imported by every process that loads plugins, task processes included: nothing heavy at
module level.
"""
from __future__ import annotations

import json
import logging
import re
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


def run_note(stats: dict | None, state: str, title: str, report: str, held_off: str | None = None,
             publish_started: str | None = None) -> str:
    """The DAG run's note (Markdown, shown on the run in the UI): outcome, figures, the report's link.
    `held_off`: why the run loaded nothing by design (a scheduled run before the start date).
    `publish_started`: when the batch's publish started, in a run that ended without statistics
    (marked failed while it ran)."""
    link = f"[Run report]({report}) (per-stream throughput, charts, validation)."
    if not stats:
        # Still linked (the link marks the note as this run's, is_our_note), but not promised:
        # the stats task writes the report, and a run that ended before it has none.
        link = f"[Run report]({report}) (written by the run's stats task: none if the run ended before it ran)."
    marked = state == "success" and bool(stats) and not_loaded_whole(stats)
    lines = [f"**{title}**: run {'marked ' if marked else ''}{state}."]
    if marked:
        # Its stats task fails such a run: a `success` is a user's (the run or that task marked).
        lines.append("Marked success, not loaded: this run did not put its batch into the target whole (below), "
                     "and Airflow now counts its date as done (a backfill or catch-up skips it). Clear the run "
                     "(Clear in the grid) to load the batch.")
    if stats:
        tot = stats["totals"]
        span = stats.get("makespan_seconds")
        loading = stats.get("loading_seconds")
        if loading is not None and span and span - loading > 1:
            # A load run again later (a cleared group): the span holds the time between.
            span_said = f" in {loading:,.1f} s of loading ({span:,.1f} s from the first load's start to the last's end)"
        else:
            span_said = f" in {span:,.1f} s of loading" if span else ""
        groups = stats.get("groups") or []
        skipped = sum(1 for g in groups if g.get("outcome") == "skipped")
        # A skipped group of a table that loaded is a stream the batch does not have.
        loaded = {g.get("table") for g in groups if g.get("outcome") != "skipped"}
        why = ["tables not asked for"] if any(g.get("table") not in loaded for g in groups
                                               if g.get("outcome") == "skipped") else []
        if any(g.get("table") in loaded for g in groups if g.get("outcome") == "skipped"):
            why.append("streams the batch does not have")
        if stats.get("tables_in_already"):
            # Said first: the figures below count this attempt's groups only, and a group run
            # again on its own after the publish fails the run with the batch whole in the target.
            lines.append(f"This run's batch is in the target, whole, from its earlier tasks: "
                         f"{_listed(stats['tables_in_already'])}; a group run again on its own cannot load "
                         f"(clear the whole run to load the batch again).")
        # Rows of groups held back were loaded and validated, but never reached the target.
        held = [g for g in groups if g.get("outcome") == "held back"]
        lines.append(("This attempt's groups: " if stats.get("tables_in_already") else "")
                     + f"{tot['rows']:,} rows, {tot['bytes'] / 1e6:,.1f} MB"
                     + (f" in the target ({sum(g.get('rows') or 0 for g in held):,} rows, "
                        f"{sum(g.get('bytes') or 0 for g in held) / 1e6:,.1f} MB more loaded and validated, "
                        f"held back)" if held else "")
                     + f", {tot['switched']}/{tot['groups'] - skipped} groups switched"
                     + span_said
                     + (f" ({skipped} skipped: {', '.join(why)})" if skipped else "") + ".")
        if stats.get("plan_error"):
            lines.append(f"Refused before any load, nothing changed: {_cut(_said(stats['plan_error']))}")
        if stats.get("source_errors"):
            from switchyard.observability.report.model import sources_refused
            # Each source's refusal cut on its own: a long first one would hide that another refused.
            room = max(600 // len(stats["source_errors"]), 160)
            lines.append(f"Refused before any load, nothing changed: "
                         f"{sources_refused(stats['source_errors'], lambda said: _cut(said, room))}")
        changed = [n for n in stats.get("preflight") or [] if "on_spec_change:" in n and " ran: " in n]
        if changed:
            lines.append(f"Setup changed the target to the spec: {_cut('; '.join(changed))}")
        if stats.get("publish_error"):
            lead = ("Not published, every table kept its contents" if stats.get("publish", "batch") == "batch"
                    else "A table was not put in and kept its contents")
            lines.append(f"{lead}: {_cut(stats['publish_error'])}")
        refused = bool(stats.get("plan_error") or stats.get("source_errors"))
        if stats.get("failed_groups") and not refused:
            # Refused before any group started, none of them failed: the refusal says why.
            lines.append(f"Did not switch: {_listed(stats['failed_groups'])}." + _why_failed(stats))
        if stats.get("held_back_groups"):
            # Said as of the run's end: the next run of the schema discards them (its setup says
            # so), unless this run's failed groups are cleared first.
            lines.append(f"Held back when the run ended (validated, waiting for the "
                         f"{'batch' if stats.get('publish', 'batch') == 'batch' else 'table'}'s other groups; "
                         f"the next run discards them unless the failed groups are cleared first): "
                         f"{_listed(stats['held_back_groups'])}.")
        if stats.get("tables_kept") and not refused:
            # A run refused before any load says that nothing changed; a table it would have
            # created is not in the target at all, so it kept no contents.
            lines.append(f"Kept their previous contents: {_listed(stats['tables_kept'])}.")
        slow = [s["group"] for s in stats.get("stragglers") or []]
        if slow:
            lines.append(f"Stragglers: {_listed(slow)}.")
    elif held_off:
        # Its stats task skipped with the rest: there is no report to link.
        return "\n\n".join([*lines, f"Nothing loaded: {held_off}."])[:NOTE_LIMIT]
    else:
        lines.append("No statistics for this run in SWITCHYARD_RUNS_DIR: the run ended before its stats task "
                     "wrote them, or this Airflow process does not see that folder.")
        if publish_started:
            # Marked failed while its publish ran: the COMMIT may have reached the server first.
            lines.append(f"It ended while its publish (publish_batch, started {publish_started}) ran: the publish "
                         f"is one transaction, so the batch is in the target whole, or not at all; the target's "
                         f"control table switchyard.partition_batches says which batch each partition holds.")
    return _with_link("\n\n".join(lines), link)


def not_loaded_whole(stats: dict) -> bool:
    """Whether the run's statistics say its batch is not in the target whole: a refusal, a group
    that did not switch or was held back, a failed publish, a table that kept its contents."""
    return any(stats.get(k) for k in ("plan_error", "source_errors", "publish_error", "failed_groups",
                                      "held_back_groups", "tables_kept"))


# The exception's class before a task's error (keep_error), and a refusal's own lead-in, which
# the note's line says already.
_CLASS = re.compile(r"^[A-Za-z_][\w.]*(?:Exception|Error|Failed): ")
_LEAD = re.compile(r"^(?:pre-flight refused the batch|the batch was refused) before any load; "
                   r"nothing was changed[.:]?\s*")


def _said(error: str) -> str:
    """A task's error as the note says it: without the exception's class and the refusal's lead-in."""
    said = _LEAD.sub("", _CLASS.sub("", error.strip())).strip()
    # One problem is said as a sentence, not as a list of one.
    return said[2:] if said.startswith("- ") and "\n- " not in said else said


def _why_failed(stats: dict, shown: int = 3) -> str:
    """Why the first failed groups did not switch: each group's failed step and its error's telling
    line (a failed validation's first failed check, under its heading)."""
    groups = {g.get("group"): g for g in stats.get("groups") or []}
    reasons = []
    for gid in stats.get("failed_groups", [])[:shown]:
        errors = (groups.get(gid) or {}).get("errors") or {}
        step, error = next(iter(errors.items()), (None, None))
        if not error:
            continue
        lines = [line.strip() for line in _said(error).splitlines() if line.strip()]
        telling = lines[1] if lines[0].startswith("validation failed for") and len(lines) > 1 else lines[0]
        reasons.append(f"{gid} at {step}: {_cut(telling, 240)}")
    return (" " + "; ".join(reasons) + ".") if reasons else ""


def _cut(text: str, room: int = 600) -> str:
    """A refusal's message for the note: its start (the report has it whole)."""
    text = text.strip()
    return text if len(text) <= room else text[:room - 3].rstrip() + "..."


def _with_link(body: str, link: str) -> str:
    """`body`, then `link`, within the metadata column: the link is the point of the note, so
    the body gives way (cut, with "...") if the base URL is very long."""
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


def note_for(dag_id: str, run_id: str, state: str, base_url: str | None = None,
             held_off: str | None = None, publish_started: str | None = None) -> str:
    from switchyard.observability.stats import report_url
    stats = _read_stats(dag_id, run_id)
    return run_note(stats, state, headline(dag_id, stats), report_url(dag_id, run_id, base_url), held_off,
                    publish_started)


def _publish_started(dag_run: Any) -> str | None:
    """When the run's batch publish (publish_batch) started, if it did: read only for a failed run,
    whose note says so when its statistics are missing (a run marked failed during the publish)."""
    from sqlalchemy.orm import object_session
    session = object_session(dag_run)
    try:
        ti = (dag_run.get_task_instance("publish_batch", session=session) if session is not None
              else dag_run.get_task_instance("publish_batch"))
    except Exception:  # noqa: BLE001 - the note goes without it
        return None
    # A task a worker took has its host; one the run's end set failed or skipped without running
    # has a start date (that moment) and no host.
    started = getattr(ti, "start_date", None) if getattr(ti, "hostname", None) else None
    return f"{started:%Y-%m-%d %H:%M:%S} UTC" if started else None


def held_off_run(dag_run: Any) -> str | None:
    """Why `dag_run` loaded nothing by design: a scheduled run dated before the start date its
    setup's wait holds (its template field, kept in the serialized DAG the scheduler reads)."""
    from switchyard.airflow.operators import WAIT_TASK, held_off
    wait = (getattr(dag_run.dag, "task_dict", None) or {}).get(WAIT_TASK)
    return held_off(getattr(wait, "not_before", None), dag_run.run_type, dag_run.logical_date)


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
    _set_note(dag_run, note_for(dag_run.dag_id, dag_run.run_id, state, held_off=held_off_run(dag_run),
                                publish_started=_publish_started(dag_run) if state == "failed" else None))
    log.info("run %s of %s: note set with the run's figures and report link", dag_run.run_id, dag_run.dag_id)


def _set_note(dag_run: Any, note: str) -> bool:
    """Writes `note` unless the run has a note a user wrote; True if written."""
    dag_id, run_id = dag_run.dag_id, dag_run.run_id
    current = dag_run.dag_run_note
    if current is not None and not is_our_note(current.content, dag_id, run_id):
        log.info("run %s of %s keeps the note %s wrote; the report is linked from its stats task",
                 run_id, dag_id, current.user_id or "a user")
        return False
    if current is None:
        dag_run.note = (note, None)
    else:
        current.content = note
        current.user_id = None
    return True


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


def missing_pools(dag: Any, existing: set[str]) -> dict[str, list[str]]:
    """The pools the DAG's tasks are in that are not in `existing`: pool -> its task ids."""
    missing: dict[str, list[str]] = {}
    for task in dag.tasks:
        if task.pool not in existing:
            missing.setdefault(task.pool, []).append(task.task_id)
    return missing


def waiting_note(dag_id: str, run_id: str, missing: dict[str, list[str]], sync_command: str,
                 base_url: str | None = None) -> str:
    """The note of a run whose tasks wait for pools that do not exist."""
    from switchyard.observability.stats import report_url
    pools = ", ".join(f"`{name}` ({_listed(sorted(tasks))})" for name, tasks in sorted(missing.items()))
    body = (f"**{headline(dag_id, None)}**: waiting. Airflow holds back the tasks in pools that do not "
            f"exist: {pools}. `{sync_command}` creates them, sized from the target; the run then goes on.")
    return _with_link(body, f"[Run report]({report_url(dag_id, run_id, base_url)}) (once the run ends).")


def note_missing_pools(dag_run: Any) -> dict[str, list[str]]:
    """At the run's start, in the scheduler's transaction: names the pools it waits for."""
    dag = getattr(dag_run, "dag", None)
    if dag is None or not is_switchyard_dag(dag):
        return {}
    from sqlalchemy import select
    from sqlalchemy.orm import object_session
    from airflow.models.pool import Pool
    session = object_session(dag_run)
    if session is None:
        return {}
    missing = missing_pools(dag, set(session.scalars(select(Pool.pool))))
    if missing:
        command = pool_sync_command(dag, _conn_id(dag_run, dag))
        log.error("run %s of %s: Airflow will not start the tasks in pools that do not exist (%s) until "
                  "they do; `%s` creates them", dag_run.run_id, dag_run.dag_id, ", ".join(sorted(missing)),
                  command)
        _set_note(dag_run, waiting_note(dag_run.dag_id, dag_run.run_id, missing, command))
    return missing


def pool_sync_command(dag: Any, conn_id: str) -> str:
    """The `switchyard pool sync` that creates the pools of this DAG's loads (and prepares)."""
    def pool_of(*steps: str) -> str | None:
        return next((t.pool for t in dag.tasks if t.task_id.rsplit(".", 1)[-1] in steps), None)
    command = f"switchyard pool sync --conn-id {conn_id}"
    loads = pool_of("load", "steps")
    if loads:
        command += f" --pool {loads}"
    prepares = pool_of("prepare")
    if prepares and prepares not in ("default_pool", loads):
        command += f" --prepare-pool {prepares}"
    return command


def _conn_id(dag_run: Any, dag: Any) -> str:
    """The run's target connection: the trigger's choice, else the DAG's default."""
    chosen = (dag_run.conf or {}).get("conn_id")
    if chosen:
        return str(chosen)
    try:
        return str(dag.params["conn_id"])
    except Exception:  # noqa: BLE001 - a DAG without the param still gets the rest of the note
        return "<the target's connection id>"


@hookimpl
def on_dag_run_running(dag_run: Any, msg: str) -> None:
    # Inside the scheduler's loop, as the other two: nothing of ours may disturb it.
    try:
        note_missing_pools(dag_run)
    except Exception:  # noqa: BLE001
        log.exception("could not check the pools of run %s", getattr(dag_run, "run_id", "?"))


def queued_note(dag_id: str, run_id: str, blockers: list[str], commands: list[str],
                base_url: str | None = None) -> str:
    """The note of a run Airflow keeps queued behind other runs of its DAG (`max_active_runs`
    is 1: runs of one DAG go one at a time): which runs, what each waits for, what clears them.

    Airflow calls no listener while a run is queued, so whoever follows the run writes it (the
    local stack's `make demo` and `switchyard runs`); it starts like the listener's notes, so the
    run's final note replaces it."""
    from switchyard.observability.stats import report_url
    body = (f"**{headline(dag_id, None)}**: queued behind {'; '.join(blockers)}. Runs of this DAG go one "
            f"at a time (max_active_runs = 1): this run starts when "
            f"{'that one ends' if len(blockers) == 1 else 'those end'}."
            + (f" To end {'that run' if len(commands) == 1 else 'them'} now: "
               f"{'; '.join(f'`{c}`' for c in commands)}." if commands else ""))
    return _with_link(body, f"[Run report]({report_url(dag_id, run_id, base_url)}) (once the run ends).")
