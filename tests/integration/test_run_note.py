"""Every finished Switchyard run gets a note with its figures and the report's link.

The note is set by the plugin's listener (switchyard.airflow.run_notes) in the process that ends the
run; `airflow dags test` ends its run in its own process through the same DagRun.update_state
the scheduler uses, so these real runs exercise the same path as a nightly run.
"""
from __future__ import annotations

import threading
import time
import uuid
from urllib.parse import quote

import psycopg
import pytest

from helpers import metadata_connection, run_dag
from switchyard_dev.local import api_url
from switchyard.airflow.run_notes import NOTE_LIMIT, is_our_note, run_note
from switchyard.observability.stats import report_url

DAG_ID = "switchyard_tpch"
HAND_NOTE = "Checked by hand: nation reloaded after the supplier fix. Do not rerun."


def far_logical_date(day: int) -> str:
    """A logical date no other run of the tests' home has: the home outlives a session, and a
    note the run of an earlier session left must not stand in for this run's."""
    return f"{2031 + uuid.uuid4().int % 900}-01-{day:02d}T00:00:00+00:00"


def note_of(run_id: str) -> tuple[str | None, str | None, str]:
    """(content, user_id, run state) straight from the metadata DB."""
    with metadata_connection() as db:
        row = db.execute(
            "SELECT n.content, n.user_id, r.state FROM dag_run r LEFT JOIN dag_run_note n ON n.dag_run_id = r.id "
            "WHERE r.dag_id = %s AND r.run_id = %s", (DAG_ID, run_id)).fetchone()
    assert row is not None, f"no run {run_id} in the metadata DB"
    return row


class NoteDuringRun(threading.Thread):
    """Writes a note on the run of `logical_date` while it is running, as the UI's note editor
    would (or as Switchyard did on an earlier attempt of the run)."""

    def __init__(self, logical_date: str, note, user: str | None):
        super().__init__(daemon=True)
        self.logical_date, self.note, self.user = logical_date, note, user
        self.written: str | None = None

    def run(self) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.written is None:
            try:
                with metadata_connection() as db:
                    row = db.execute("SELECT id, run_id, start_date FROM dag_run WHERE dag_id = %s AND logical_date = %s "
                                     "AND state = 'running'", (DAG_ID, self.logical_date)).fetchone()
                    if row:
                        content = self.note(row[1])
                        db.execute("INSERT INTO dag_run_note (user_id, dag_run_id, content, created_at, updated_at) "
                                   "VALUES (%s, %s, %s, %s, %s)", (self.user, row[0], content, row[2], row[2]))
                        self.written = content
            except psycopg.Error:
                pass  # a new home: its tables are not there yet (the run migrates it first)
            time.sleep(0.05)


def test_a_run_gets_a_note_with_its_figures_and_report_link(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, _ = tpch_batch
    when = far_logical_date(1)
    # A note Switchyard wrote on an earlier attempt of this run (before a clear): replaced.
    stale = NoteDuringRun(when, lambda run_id: run_note(None, "failed", "Switchyard switchyard_tpch",
                                                        report_url(DAG_ID, run_id, api_url())), None)
    stale.start()
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": ["nation", "region"]},
                  tmp_path / "runs", logical_date=when)
    stale.join(timeout=5)
    assert run.returncode == 0, run.output[-4000:]
    assert stale.written and "run failed" in stale.written, "the earlier note was not written during the run"
    stats = run.stats
    content, user, state = note_of(stats["run_id"])
    assert state == "success"
    assert content != stale.written, f"the note was not renewed; listener output:\n{run.output[-3000:]}"
    assert user is None  # written by Switchyard, not by a user
    tot = stats["totals"]
    assert tot["rows"] == 25 + 5 and tot["switched"] == 2
    assert content.startswith(f"**Switchyard: batch {name} into postgres {schema}, 3 streams**: run success.")
    skipped = tot["groups"] - 2
    assert skipped == 3 * 6
    assert f"{tot['rows']:,} rows, {tot['bytes'] / 1e6:,.1f} MB, 2/2 groups switched in " in content
    assert f" s of loading ({skipped} skipped: tables not asked for)." in content
    assert f"[Run report]({report_url(DAG_ID, stats['run_id'], api_url())})" in content


def test_a_note_written_by_hand_during_the_run_is_kept(pg_uri, data_root, tpch_batch, schema, tmp_path):
    name, _ = tpch_batch
    when = far_logical_date(2)
    hand = NoteDuringRun(when, lambda run_id: HAND_NOTE, "admin")
    hand.start()
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": ["nation"]},
                  tmp_path / "runs", logical_date=when)
    hand.join(timeout=5)
    assert run.returncode == 0, run.output[-4000:]
    assert hand.written == HAND_NOTE, "the note was not written while the run was running"
    content, user, state = note_of(run.stats["run_id"])
    assert state == "success"
    assert (content, user) == (HAND_NOTE, "admin")
    # The listener saw the finished run and left the note alone (not merely: it never ran).
    assert "keeps the note admin wrote" in run.output, run.output[-3000:]


def test_only_empty_notes_and_our_own_are_replaced():
    run_id = "scheduled__2031-01-03T02:00:00+00:00"
    ours = run_note(None, "failed", "Switchyard switchyard_tpch", report_url(DAG_ID, run_id, "http://h:1"))
    assert is_our_note(ours, DAG_ID, run_id)
    # A run without statistics has no report to promise: its link says the stats task writes it.
    assert ours.endswith("(written by the run's stats task: none if the run ended before it ran).")
    assert is_our_note(None, DAG_ID, run_id) and is_our_note("  ", DAG_ID, run_id)
    assert not is_our_note(HAND_NOTE, DAG_ID, run_id)
    # Our note of another run (copied by a user into this one) is the user's text here.
    assert not is_our_note(ours, DAG_ID, "manual__2031-01-03T02:00:00+00:00")


def test_a_note_never_exceeds_the_metadata_column_and_keeps_its_link():
    groups = [f"lineitem_{k}" for k in range(1, 97)]
    stats = {"totals": {"rows": 10**9, "bytes": 10**12, "switched": 0, "groups": 96}, "makespan_seconds": 600.0,
             "failed_groups": groups, "stragglers": [{"group": g} for g in groups]}
    link = report_url(DAG_ID, "manual__" + "x" * 200, "http://a-rather-long-host-name.example.com:8080")
    note = run_note(stats, "failed", "Switchyard: batch " + "b" * 300, link)
    assert len(note) <= NOTE_LIMIT
    assert note.endswith(f"[Run report]({link}) (per-stream throughput, charts, validation).")
    assert "and 88 more" in run_note({**stats, "stragglers": []}, "failed", "Switchyard", "http://h/r")


def _wait_run(api, run_id: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while (run := api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}"))["state"] not in (
            "success", "failed"):
        assert time.monotonic() < deadline, run["state"]
        time.sleep(2)
    return run


@pytest.mark.chaos
def test_the_scheduler_notes_a_triggered_run_and_keeps_a_user_note(pg_uri, tpch_batch, schema, scheduler):  # noqa: F811
    """The path of nightly, triggered and backfill runs: the scheduler ends the run and the
    note commits in its own transaction; a note a user wrote through the REST API stays."""
    name, _ = tpch_batch
    env, api = scheduler
    runs = {}
    for label, note in (("plain", None), ("noted", HAND_NOTE)):
        body = {"logical_date": None, "conf": {"batch": name, "tables": ["nation"]}}
        if note:
            body["note"] = note
        runs[label] = api.post(f"/api/v2/dags/{DAG_ID}/dagRuns", body)["dag_run_id"]
    plain = _wait_run(api, runs["plain"])
    noted = _wait_run(api, runs["noted"])
    assert plain["state"] == noted["state"] == "success"
    assert plain["note"].startswith(f"**Switchyard: batch {name} into postgres {schema}, 3 streams**: run success.")
    assert "25 rows" in plain["note"] and "1/1 groups switched" in plain["note"]
    assert f"[Run report]({report_url(DAG_ID, runs['plain'], api_url())})" in plain["note"]
    assert noted["note"] == HAND_NOTE


def test_only_dags_built_by_switchyard_are_noted():
    from airflow.sdk import DAG
    from airflow.providers.standard.operators.empty import EmptyOperator
    from airflow.serialization.serialized_objects import DagSerialization
    from switchyard.airflow.dag_factory import DagConfig, build_dag
    from switchyard.airflow.run_notes import is_switchyard_dag

    def as_scheduler_sees(dag):
        return DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))

    assert is_switchyard_dag(as_scheduler_sees(build_dag(DagConfig(streams=2, dag_id="nightly_load", tags=()))))
    with DAG("other", schedule=None, tags=["switchyard"]) as other:
        EmptyOperator(task_id="stats")
    assert not is_switchyard_dag(as_scheduler_sees(other))


def _as_scheduler_sees(dag):
    from airflow.serialization.serialized_objects import DagSerialization
    return DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))


def test_a_run_waiting_for_pools_that_do_not_exist_names_them_and_the_command():
    """What the scheduler's listener writes when a run starts with its pools missing."""
    from switchyard.airflow.dag_factory import DagConfig, build_dag
    from switchyard.airflow.run_notes import missing_pools, pool_sync_command, waiting_note
    dag = _as_scheduler_sees(build_dag(DagConfig(streams=8, dag_id="nightly_load", pool="nightly_loads",
                                                 prepare_pool="nightly_prepares", conn_id="warehouse")))
    assert missing_pools(dag, {"default_pool", "nightly_loads", "nightly_prepares"}) == {}
    missing = missing_pools(dag, {"default_pool", "nightly_loads"})
    assert list(missing) == ["nightly_prepares"]
    assert sorted(missing["nightly_prepares"]) == sorted(t.task_id for t in dag.tasks
                                                         if t.task_id.endswith(".prepare"))
    assert len(missing["nightly_prepares"]) == 6 * 8 + 2  # nation and region: one stream each
    both = missing_pools(dag, {"default_pool"})
    assert set(both) == {"nightly_loads", "nightly_prepares"}
    assert "lineitem_1.load" in both["nightly_loads"] and "stats" not in both["nightly_loads"]
    command = pool_sync_command(dag, "warehouse")
    assert command == "switchyard pool sync --conn-id warehouse --pool nightly_loads --prepare-pool nightly_prepares"
    note = waiting_note("nightly_load", "manual__1", both, command, base_url="http://af:8080")
    assert note.startswith("**Switchyard nightly_load**: waiting.")
    assert "`nightly_loads` (" in note and "`nightly_prepares` (" in note and f"`{command}`" in note
    assert len(note) <= NOTE_LIMIT and note.endswith(
        f"[Run report]({report_url('nightly_load', 'manual__1', 'http://af:8080')}) (once the run ends).")
    # The run's final note replaces it, as any note the listener wrote.
    assert is_our_note(note, "nightly_load", "manual__1")
    # No prepare pool: the command names the load pool only.
    plain = _as_scheduler_sees(build_dag(DagConfig(streams=2, dag_id="plain", tags=())))
    assert pool_sync_command(plain, "switchyard_target") == (
        "switchyard pool sync --conn-id switchyard_target --pool switchyard_loads")


@pytest.mark.chaos
def test_the_scheduler_says_on_the_run_which_pool_it_waits_for(pg_uri, tpch_batch, schema, scheduler):  # noqa: F811
    """A run whose load pool does not exist says so on the run; created, the run goes on and
    its final note replaces that one."""
    name, _ = tpch_batch
    env, api = scheduler
    api._request("DELETE", "/api/v2/pools/switchyard_loads")
    run_id = api.post(f"/api/v2/dags/{DAG_ID}/dagRuns", {"logical_date": None, "conf": {
        "batch": name, "tables": ["nation"]}})["dag_run_id"]
    deadline = time.monotonic() + 120
    while not (run := api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}"))["note"]:
        assert time.monotonic() < deadline, run
        time.sleep(2)
    assert run["state"] == "running"
    assert run["note"].startswith("**Switchyard switchyard_tpch**: waiting.")
    assert "`switchyard_loads` (" in run["note"] and "nation_1.load" in run["note"]
    assert "`switchyard pool sync --conn-id switchyard_target --pool switchyard_loads`" in run["note"]
    time.sleep(10)  # held back, not failed
    tis = api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{quote(run_id, safe='')}/taskInstances/nation_1.load")
    assert tis["state"] in (None, "scheduled"), tis["state"]
    api.post("/api/v2/pools", {"name": "switchyard_loads", "slots": 2, "include_deferred": False})
    done = _wait_run(api, run_id)
    assert done["state"] == "success"
    assert done["note"].startswith(f"**Switchyard: batch {name} into postgres {schema}, 3 streams**: run success.")
