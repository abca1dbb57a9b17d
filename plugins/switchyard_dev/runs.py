"""The runs of the local Airflow's Switchyard DAGs: which are active or queued, what holds a
queued run back, and ending a stuck run (`switchyard runs`, `switchyard services status`, and
`make demo` while it follows its run).

A Switchyard DAG runs one run at a time (`max_active_runs` = 1), so a run can sit queued
behind another run of its DAG, e.g. a scheduled run whose `setup.wait_for_batch` waits hours
for a batch nobody writes. Airflow shows that run as queued and nothing else; here it is named,
with what it waits for and the command that ends it.
"""
from __future__ import annotations

import time
import urllib.error
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

from switchyard_dev import local

ACTIVE = ("running", "queued")
# A run's first tasks are queued within a scheduler loop or two; queued longer, it is held back.
QUEUED_GRACE_SECONDS = 5.0
# Task states of a wait that has not ended.
WAITING = ("deferred", "running", "up_for_reschedule", "up_for_retry", "scheduled", "queued", "restarting")


def _q(value: str) -> str:
    return quote(value, safe="")


def fail_command(dag_id: str, run_id: str) -> str:
    return f"switchyard runs fail {dag_id} {run_id}"


def switchyard_dag_ids(api: local.Api) -> list[str]:
    """The local Airflow's DAGs tagged `switchyard` (every DAG Switchyard's factory builds), those
    whose file no longer parses too: Airflow calls them stale, and their runs wait queued."""
    return sorted(d["dag_id"] for d in _dags(api))


def _dags(api: local.Api) -> list[dict]:
    return api.get_all("/api/v2/dags?tags=switchyard&exclude_stale=false", "dags")


def import_errors(api: local.Api) -> list[str]:
    """A line per DAG file the dag-processor cannot import: the file and the error's last line (a
    spec it refuses names its key there). A DAG of such a file is not scheduled: its runs stay
    queued, with no task, until the file parses again."""
    lines = []
    for e in api.get_all("/api/v2/importErrors", "import_errors"):
        trace = [line.strip() for line in (e.get("stack_trace") or "").splitlines() if line.strip()]
        lines.append(f"{e.get('filename')}: {trace[-1] if trace else 'does not import'}")
    return lines


def say_import_errors(api: local.Api) -> list[str]:
    """What `switchyard runs` and `services status` print of import errors (none: nothing)."""
    found = import_errors(api)
    if not found:
        return []
    return (["the DAG files below do not parse: their DAGs are not scheduled and their runs stay queued until "
             "the file parses again (`switchyard airflow dags list-import-errors` has the whole error)"]
            + [f"  {line}" for line in found])


def all_runs(api: local.Api, dag_id: str) -> list[dict]:
    """Every run of `dag_id`, whatever its state or type."""
    return api.get_all(f"/api/v2/dags/{_q(dag_id)}/dagRuns", "dag_runs")


def active_runs(api: local.Api, dag_id: str | None = None) -> list[dict]:
    """Running and queued runs of `dag_id` (default: of every Switchyard DAG), oldest first."""
    ids = [dag_id] if dag_id else switchyard_dag_ids(api)
    runs = []
    for one in ids:
        runs += api.get_all(f"/api/v2/dags/{_q(one)}/dagRuns?state=running&state=queued&order_by=run_after",
                            "dag_runs")
    return sorted(runs, key=lambda r: (r.get("run_after") or "", r["dag_id"]))


def recent_runs(api: local.Api, dag_id: str | None = None, limit: int = 10) -> list[dict]:
    """The `limit` runs that ended last (success or failed), latest first: asked for by state,
    so that a backfill's queue of runs does not crowd them out."""
    ids = [dag_id] if dag_id else switchyard_dag_ids(api)
    runs = []
    for one in ids:
        runs += api.get(f"/api/v2/dags/{_q(one)}/dagRuns?state=success&state=failed&order_by=-end_date"
                        f"&limit={limit}")["dag_runs"]
    return sorted(runs, key=lambda r: r.get("end_date") or "", reverse=True)[:limit]


def _parse(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:g} h" if seconds >= 3600 else f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


def batch_of(run: dict) -> str:
    """The batch a run loads: its conf's, else its logical date as the DAG names its batch
    (Settings.batch_for, as airflow/operators.batch_name: its date in SWITCHYARD_TIMEZONE), as
    the local Airflow's processes read the settings (its settings file), whatever this shell's
    environment says."""
    from switchyard.settings import Settings
    batch = (run.get("conf") or {}).get("batch")
    if batch:
        return str(batch).strip()
    when = run.get("logical_date") or run.get("run_after") or ""
    try:
        return Settings.from_env(local.airflow_env()).batch_for(datetime.fromisoformat(when.replace("Z", "+00:00")))
    except ValueError:
        return when[:10]


def what_it_does(api: local.Api, run: dict, wait_seconds: float | None = None) -> str:
    """What an active run is doing, in a few words: waiting for its batch (how long at most),
    its running tasks, or queued itself."""
    dag_id, run_id = run["dag_id"], run["dag_run_id"]
    if run["state"] == "queued":
        return "queued"
    tis = api.get_all(f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances", "task_instances")
    wait = next((t for t in tis if t["task_id"] == "setup.wait_for_batch"), None)
    due = _parse(run.get("logical_date"))
    if due is not None and due > datetime.now(timezone.utc) and all(t.get("state") is None for t in tis):
        # A run triggered with a logical date in the future: Airflow's scheduler starts none of its
        # tasks before that date, and the DAG's later runs queue behind it.
        return (f"waits for its logical date, {due:%Y-%m-%d %H:%M} UTC: Airflow starts no task of a run before its "
                f"logical date, and later runs of the DAG queue behind it; `switchyard runs fail {dag_id} "
                f"{run_id}` ends it")
    # A DAG of its own settings file names its batch as that file says: its wait said which.
    said_batch = wait is not None and wait.get("state") is not None and _said_by(
        api, dag_id, run_id, "setup.wait_for_batch", "batch")
    batch = said_batch or batch_of(run)
    if wait is not None and (wait.get("state") in WAITING or wait.get("state") is None):
        manifest = waiting_for(api, dag_id, run_id)
        said = [manifest] if manifest else []
        if wait_seconds:
            started = _parse(wait.get("start_date"))
            until = f", until {(started + timedelta(seconds=wait_seconds)):%Y-%m-%d %H:%M} UTC" if started else ""
            said.append(f"up to {_hours(wait_seconds)}{until}")
        if wait.get("state") == "deferred" and "triggerer" not in local.running_services():
            # A deferred wait is the triggerer's to end: without it the run waits out its time.
            said.append("the triggerer is not running, and only it ends a deferred wait: the batch's arrival goes "
                        "unseen until `switchyard services start` starts it again")
        return f"is waiting for batch {batch}" + (f" ({'; '.join(said)})" if said else "")
    plan = next((t for t in tis if t["task_id"] == "setup.plan"), None)
    if plan is not None and plan.get("state") == "up_for_reschedule":
        earlier = _said_by(api, dag_id, run_id, "setup.plan", "earlier_run") or {}
        return (f"waits to plan batch {batch}, nothing loaded yet: the DAG's earlier run {earlier.get('run_id', '?')} "
                f"(dated {str(earlier.get('logical_date', '?'))[:19]}) is running, and a DAG's runs load in date "
                f"order; its plan looks again every few seconds")
    if plan is not None and plan.get("state") == "up_for_retry":
        # Its retries are mostly the wait for another run's lease on the target (LeaseHeld).
        return (f"waits to plan batch {batch}: setup.plan waits for its retry, nothing loaded yet (another "
                f"run holds the target's run lease, or the target did not answer: the task's log says which)")
    if plan is not None and plan.get("state") == "running":
        lease = lease_wait(api, dag_id, run_id)
        if lease:
            return f"waits to plan batch {batch}, nothing loaded yet: {lease}"
    running = sorted(t["task_id"] for t in tis if t.get("state") == "running")
    publish = next((t for t in tis if t["task_id"] == "publish_batch" and t.get("state") in ("running", "up_for_retry")
                    and (t.get("try_number") or 1) > 1), None)
    if publish is not None:
        # Its tries are mostly the wait for the tables' readers: the publish's short lock wait
        # gave up behind a long reader, and each try waits again (PublishBatchOperator).
        return (f"is publishing batch {batch}: publish_batch is on its try {publish['try_number']}, the earlier one "
                f"failed, most often behind a long-running reader of the batch's tables, which holds a lock the "
                f"publish needs; it goes in once the reader ends (the task's log says what it waited for)")
    if running:
        return (f"is loading batch {batch}: {len(running)} task{'' if len(running) == 1 else 's'} running "
                f"({', '.join(running[:3])}{' ...' if len(running) > 3 else ''})")
    done = sum(1 for t in tis if t.get("state") in ("success", "skipped", "failed", "upstream_failed"))
    return f"is loading batch {batch} ({done}/{len(tis)} tasks done)" + _stuck_in_queues(tis)


# How long a task may wait queued before the run's line names its queue: longer than a worker's
# pickup (the Edge executor's polls take seconds), shorter than a user's patience.
QUEUED_NAMED_AFTER = 60.0


def _stuck_in_queues(tis: list[dict], now: datetime | None = None) -> str:
    """With no task running: the queues whose tasks have waited QUEUED_NAMED_AFTER seconds or more
    for a worker, and since when. A queue no running worker takes (a source's Edge worker that
    stopped, or none started) holds its tasks queued without a word in Airflow's UI."""
    now = now or datetime.now(timezone.utc)
    waiting: dict[str, list[tuple[datetime, str]]] = {}
    for t in tis:
        since = _parse(t.get("queued_when"))
        if t.get("state") == "queued" and since and (now - since).total_seconds() >= QUEUED_NAMED_AFTER:
            waiting.setdefault(t.get("queue") or "default", []).append((since, t["task_id"]))
    said = [f"{len(tasks)} task{'' if len(tasks) == 1 else 's'} queued on queue {queue!r} for "
            f"{round((now - min(tasks)[0]).total_seconds() / 60)} min ({', '.join(sorted(i for _, i in tasks)[:3])}"
            f"{' ...' if len(tasks) > 3 else ''}): no worker of that queue has taken them (`switchyard services "
            f"status` lists the workers)" for queue, tasks in sorted(waiting.items())]
    return ("; " + "; ".join(said)) if said else ""


def _said_by(api: local.Api, dag_id: str, run_id: str, task_id: str, key: str):
    """What a task of the run said under XCom `key` while it runs; None before it said."""
    path = f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}/taskInstances/{task_id}/xcomEntries/{key}"
    try:
        return api.get(path).get("value")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def waiting_for(api: local.Api, dag_id: str, run_id: str) -> str | None:
    """The manifest a waiting run's wait_for_batch waits for, as its worker resolved the path
    (that worker's data root, which may not be this shell's); None before it said."""
    # The key is operators.WAITING_FOR, written out: importing the operators loads Airflow.
    value = _said_by(api, dag_id, run_id, "setup.wait_for_batch", "waiting_for")
    return str(value) if value else None


def lease_wait(api: local.Api, dag_id: str, run_id: str) -> str | None:
    """What a running plan waits for before it takes over the lease of a run that ended
    (operators.LEASE_WAIT, written out), in a few words; None where it said nothing."""
    said = _said_by(api, dag_id, run_id, "setup.plan", "lease_wait")
    if not isinstance(said, dict):
        return None
    until = _parse(said.get("until"))
    if until is None or until < datetime.now(timezone.utc):
        return None     # the wait is over: the plan took the lease, or fails to retry its wait
    return (f"the target's run lease is held by the {said.get('state')} run {said.get('holder')}: taken over "
            f"at {until:%H:%M:%S} UTC unless a step of that run still runs and renews it "
            f"(SWITCHYARD_LEASE_TAKEOVER_SECONDS)")


def batch_wait_seconds() -> int:
    """The DAG's batch wait as the local Airflow's processes read it (its settings file)."""
    from switchyard.settings import Settings
    return Settings.from_env(local.airflow_env()).batch_wait_seconds


def blockers(api: local.Api, dag_id: str, run_id: str) -> list[dict]:
    """The other active runs of the DAG that hold `run_id` queued: those running, else those
    queued before it."""
    others = [r for r in active_runs(api, dag_id) if r["dag_run_id"] != run_id]
    running = [r for r in others if r["state"] == "running"]
    return running or others


def why_queued(api: local.Api, dag_id: str, run_id: str, wait_seconds: float | None = None) -> list[str]:
    """Lines that say why a queued run does not start (none: nothing found that holds it)."""
    # First: the scheduler starts no run of a paused DAG, whatever else would hold it (a
    # backfill of a DAG never unpaused would otherwise read as its runs queued behind each other).
    dag = api.get(f"/api/v2/dags/{_q(dag_id)}")
    if dag.get("is_paused"):
        return [f"the pause of the DAG {dag_id}: the scheduler starts none of its runs, backfills included "
                f"(`switchyard airflow dags unpause {dag_id}`)"]
    held = blockers(api, dag_id, run_id)
    if held and all(r["state"] == "queued" for r in held):
        # None runs (a backfill's next runs): each waits its turn, which "X, which queued" said badly.
        return [f"the DAG's other queued runs ({', '.join(r['dag_run_id'] for r in held)}): its runs go one at a "
                f"time"]
    if held:
        return [f"{r['dag_run_id']}, which {what_it_does(api, r, wait_seconds)}" for r in held]
    health = api.get("/api/v2/monitor/health")
    if (health.get("scheduler") or {}).get("status") != "healthy":
        return ["the scheduler is not running (`switchyard services status`; `switchyard services start`)"]
    return []


def note_queued(api: local.Api, dag_id: str, run_id: str, reasons: list[str], commands: list[str]) -> None:
    """Set the queued run's note (switchyard.airflow.run_notes.queued_note)."""
    from switchyard.airflow.run_notes import queued_note
    note = queued_note(dag_id, run_id, reasons, commands, base_url=local.api_url())
    api.patch(f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}?update_mask=note", {"note": note})


class QueuedWatch:
    """Says, once a run has been queued a few seconds, what holds it back (and again when that
    changes), and notes it on the run. Call `check(run)` with each fresh read of the run."""

    def __init__(self, api: local.Api, dag_id: str, run_id: str, out=print):
        self.api, self.dag_id, self.run_id, self.out = api, dag_id, run_id, out
        self.since = time.monotonic()
        self.said: list[str] | None = None
        self._wait_seconds: float | None = None

    def check(self, run: dict) -> list[str] | None:
        if run["state"] != "queued" or time.monotonic() - self.since < QUEUED_GRACE_SECONDS:
            return None
        if self._wait_seconds is None:
            self._wait_seconds = batch_wait_seconds()
        reasons = why_queued(self.api, self.dag_id, self.run_id, self._wait_seconds)
        if reasons and reasons != self.said:
            held = blockers(self.api, self.dag_id, self.run_id)
            commands = [fail_command(r["dag_id"], r["dag_run_id"]) for r in held]
            self.out(f"    run {self.run_id} is queued behind " + "; ".join(reasons)
                     + (". Runs of this DAG go one at a time." if held else "."))
            for command in commands:
                self.out(f"    to end that run now: {command}")
            note_queued(self.api, self.dag_id, self.run_id, reasons, commands)
            self.said = reasons
        return reasons


def fail(api: local.Api, dag_id: str, run_id: str) -> dict:
    """Mark an active run failed (its unfinished tasks end; the next queued run of its DAG starts).
    A run that has ended is left as it is (ValueError): its record would no longer say what it
    did, a success whose batch is loaded marked failed."""
    run = api.get(f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")
    if run.get("state") not in ACTIVE:
        raise ValueError(f"{dag_id} {run_id} is {run.get('state')}, not running or queued: left as it is")
    return api.patch(f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}?update_mask=state", {"state": "failed"})


def clear(api: local.Api, dag_id: str, run_id: str, groups: list[str]) -> tuple[list[str], list[str]]:
    """Clear the tasks of `groups` (task groups such as `orders_2`, or task ids) in one run, with
    every task downstream of them, as the grid's Clear with Downstream does: (the cleared task
    ids, those of them the DAG no longer has). The run is named by its id: `airflow tasks clear`
    selects runs by their logical date, which a run triggered without one (`airflow dags
    trigger`'s default) does not have, and then clears nothing without saying so."""
    run = api.get(f"/api/v2/dags/{_q(dag_id)}/dagRuns/{_q(run_id)}")
    if run.get("state") in ACTIVE:
        raise ValueError(f"{dag_id} {run_id} is {run['state']}: clear its tasks once it has ended")
    tasks = [t["task_id"] for t in api.get(f"/api/v2/dags/{_q(dag_id)}/tasks")["tasks"]]
    unknown = [g for g in groups if not any(t == g or t.startswith(f"{g}.") for t in tasks)]
    if unknown or not groups:
        raise ValueError(f"{dag_id} has no task or task group {', '.join(unknown) or '(none named)'}; "
                         f"its groups: {', '.join(sorted({t.split('.')[0] for t in tasks if '.' in t}))}")
    chosen = [t for t in tasks if any(t == g or t.startswith(f"{g}.") for g in groups)]
    done = api.post(f"/api/v2/dags/{_q(dag_id)}/clearTaskInstances",
                    {"dag_run_id": run_id, "task_ids": chosen, "include_downstream": True, "only_failed": False,
                     "dry_run": False, "reset_dag_runs": True})
    cleared = sorted(t["task_id"] for t in done.get("task_instances") or [])
    # The run's task instances are those of the DAG as it was when the run was made: a spec changed
    # since (a table's `tasks: single` added or taken away) gives its groups other tasks now.
    return cleared, sorted(set(cleared) - set(tasks))


# How the lines of a run's note (switchyard.airflow.run_notes) that say why it ended begin.
_REASONS = ("Marked success, not loaded", "Refused before any load", "Did not switch", "Not published",
            "Nothing loaded")


def why_it_ended(run: dict, room: int = 160) -> str:
    """A finished run's reason, from its note: the first line that says why it loaded nothing or
    not everything (a refusal, the groups that did not switch, a publish that failed, a run held
    off), cut to `room` characters; '' when the note has none (a run that loaded its batch)."""
    for paragraph in (run.get("note") or "").split("\n\n"):
        text = " ".join(paragraph.split())
        if text.startswith(_REASONS):
            return text if len(text) <= room else text[:room - 3].rstrip() + "..."
    return ""


def table(api: local.Api, runs: list[dict], describe: bool = True) -> list[str]:
    """One line per run: DAG, run id, state, and what an active run does (a finished one: why it
    ended so, where its note says)."""
    if not runs:
        return []
    wait = batch_wait_seconds() if describe else None
    stale: set[str] | None = None     # the DAGs whose file does not parse, asked once, if needed
    lines = []
    for r in runs:
        if r["state"] in ACTIVE:
            what = what_it_does(api, r, wait) if describe else ""
        else:
            what = why_it_ended(r)
        if r["state"] == "queued" and describe:
            why = why_queued(api, r["dag_id"], r["dag_run_id"], wait)
            if not why and stale is None:
                stale = {d["dag_id"] for d in _dags(api) if d.get("is_stale")}
            what = ("queued behind " + "; ".join(why)) if why else (
                "queued: its DAG's file does not parse (above); the run starts when it does"
                if r["dag_id"] in stale else "queued")
        lines.append(f"{r['dag_id']:<22} {r['dag_run_id']:<48} {r['state']:<8} {what}".rstrip())
    return lines
