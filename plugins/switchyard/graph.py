"""The DAG's graph as plain data, computed from the spec and the DAG's settings by one function.

Which tasks, in which task groups, with which pool, priority, route, retries and trigger rule,
and which task (or group) comes before which: `build_graph`. Nothing here imports Airflow;
`airflow/dag_factory.py` renders the graph into Airflow's operators in one place, and a test
or the benchmark can read it without Airflow. Trigger rules are Airflow's names as text.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from switchyard.core.planner import group_id, load_priorities, streams_of
from switchyard.core.spec import LoadSpec

# The suffix of a source's check before the batch's publish (`files_on_<source>_as_loaded`).
AS_LOADED = "_as_loaded"
# Airflow's trigger rules, by name.
NONE_FAILED_MIN_ONE_SUCCESS = "none_failed_min_one_success"
ALL_DONE = "all_done"


@dataclass(frozen=True)
class Node:
    """One task: `kind` names its step (wait, plan, source_files, prepare, load, validate, switch,
    steps, publish_batch, publish, stats); `options` are its operator's, beyond the steps' common ones
    (`common`: the spec, schema and lock timeout every step reading the target takes)."""
    task_id: str
    kind: str
    group: str | None = None
    # The tasks (full ids) or task groups this one comes after.
    upstream: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)
    common: bool = True

    @property
    def id(self) -> str:
        return f"{self.group}.{self.task_id}" if self.group else self.task_id


@dataclass(frozen=True)
class Graph:
    # Task group -> its tooltip, in the order the groups are made (the grid lists them so).
    groups: dict[str, str]
    nodes: tuple[Node, ...]

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)


@dataclass(frozen=True)
class GraphSettings:
    """What of the DAG's settings decides its graph (settings.py; DagConfig in the DAG factory)."""
    streams: int
    pool: str
    prepare_pool: str | None = None
    load_executor: str | None = None
    load_order: str = "interleaved"
    conn_id: str = "switchyard_target"
    schema: str = "tpch"
    batch_wait_seconds: int = 6 * 3600
    batch_poke_seconds: float = 60.0
    lease_retries: int = 0
    lease_retry_seconds: float = 60.0
    # SWITCHYARD_START_DATE as ISO text: a scheduled run dated before it loads nothing (the
    # setup's wait skips it); manual runs and backfills are not bound by it.
    start_date: str | None = None
    # The DAG's own settings file (a DAG among several in one Airflow), which the wait reads for
    # the batch a run's date names; None: the one the environment names.
    settings_file: str | None = None


def routing(spec: LoadSpec, load_executor: str | None, stream: int) -> dict[str, str]:
    """Where stream `stream`'s load runs: the `executor` and `queue` of its load task.

    Only the load reads the stream's file, so only the load is routed; prepare, validate and
    switch talk to the target alone and stay on the default executor, next to the scheduler.
    A stream the spec's `sources` place on a source goes to that source's queue (its workers
    hold its files under their own data root); the executor is SWITCHYARD_LOAD_EXECUTOR. A
    stream without a source (shared storage, or a server that reads the file itself) keeps
    the executor's default queue.
    """
    return _route(load_executor, spec.source_of(stream))


def _route(load_executor: str | None, source: str | None) -> dict[str, str]:
    out = {}
    if load_executor:
        out["executor"] = load_executor
    if source:
        out["queue"] = source
    return out


def source_check_ids(spec: LoadSpec) -> dict[str, str]:
    """Each source's files task id in the setup group: `files_on_<source>`, a dot of the name
    (a group separator in Airflow's ids) written `_`, numbered where two names meet so."""
    ids: dict[str, str] = {}
    for name in spec.sources:
        task_id = base = "files_on_" + name.replace(".", "_")
        n = 1
        while task_id in ids.values():
            n += 1
            task_id = f"{base}_{n}"
        ids[name] = task_id
    return ids


def tables_checked_on_sources(spec: LoadSpec, streams: int) -> dict[str, dict[str, str]]:
    """With `publish: table`, each table of four-step groups with streams on sources: the task
    that compares its files there with what their loads read, per source (source -> task id
    `<table>_files_on_<source>_as_loaded`, never a group's id: it does not end in a number)."""
    if spec.publish != "table":
        return {}
    ids = source_check_ids(spec)
    out: dict[str, dict[str, str]] = {}
    for table in spec.tables:
        on = sorted({src for k in streams_of(table, streams) if (src := spec.source_of(k))})
        if on and table.tasks != "single":
            out[table.name] = {src: f"{table.name}_{ids[src]}{AS_LOADED}" for src in on}
    return out


def build_graph(spec: LoadSpec, s: GraphSettings) -> Graph:
    """setup (wait for the batch, plan), a group per (table, stream), the batch's publish, a
    publish task per table (its Asset) and the stats task, with their order."""
    groups = {"setup": "Wait for the batch, plan partitions, create missing objects"}
    nodes = [
        Node("wait_for_batch", "wait", "setup", common=False,
             options={"wait_seconds": s.batch_wait_seconds, "poke_interval": s.batch_poke_seconds, "retries": 0,
                      **({"not_before": s.start_date} if s.start_date else {}),
                      **({"settings_file": s.settings_file} if s.settings_file else {})}),
        # Retries wait for another run's lease (and ride out a lost connection) without
        # holding a worker slot; bad batches fail at once.
        Node("plan", "plan", "setup", upstream=("setup.wait_for_batch",),
             options={"streams": s.streams, "retries": s.lease_retries, "retry_delay_seconds": s.lease_retry_seconds}),
    ]
    # The files on each source's workers, checked there once the plan is made: the plan cannot
    # see them. In the setup group, so every group's first step comes after them: no load starts
    # before every source's files are found as the manifest lists them.
    for name, task_id in source_check_ids(spec).items():
        nodes.append(Node(task_id, "source_files", "setup", upstream=("setup.plan",),
                          options={"source": name, **_route(s.load_executor, name)}))
    switches: list[str] = []
    by_table: dict[str, list[str]] = {}
    # Groups are made biggest table first (by weight; the spec's order among equals): the
    # grid lists them in this order, the way the run spends its time.
    tables = sorted(spec.tables, key=lambda t: -t.weight)
    # Tables whose groups run their four steps in one task (the spec's `tasks: single`).
    single_tables = [t.name for t in tables if t.tasks == "single"]
    # Bigger tables start first (the run lasts as long as its slowest stream), with the small
    # loads paired in between by default: see planner.load_priorities.
    priorities = load_priorities([((t.name, k), t.weight) for t in tables for k in streams_of(t, s.streams)],
                                 s.load_order)
    stream_groups: list[tuple[str, int]] = []
    table_checks = tables_checked_on_sources(spec, s.streams)
    for table in tables:
        for k in streams_of(table, s.streams):
            gid = group_id(table.name, k)
            stream_groups.append((table.name, k))
            single = table.name in single_tables
            groups[gid] = f"{table.name}, stream {k}: prepare, load, validate, switch" + (" in one task" if single else "")
            args = {"table": table.name, "stream": k, "priority_weight": priorities[(table.name, k)],
                    "weight_rule": "absolute"}
            route = routing(spec, s.load_executor, k)
            if single:
                # The whole group holds a load pool slot and goes where its load would.
                nodes.append(Node("steps", "steps", gid, upstream=("setup",),
                                  options={"pool": s.pool, "file_on_source": spec.source_of(k), **route, **args}))
                last = f"{gid}.steps"
            else:
                # A stream on a source: its file is on that source's workers, not here. In a pool
                # of their own, the prepares leave the run's task slots to the loads whose staging
                # tables are ready (both go by the group's weight).
                nodes += [
                    Node("prepare", "prepare", gid, upstream=("setup",),
                         options={"file_on_source": spec.source_of(k),
                                  **({"pool": s.prepare_pool} if s.prepare_pool else {}), **args}),
                    Node("load", "load", gid, upstream=(f"{gid}.prepare",), options={"pool": s.pool, **route, **args}),
                    # A failed expectation is a fact about the data and fails at once; a lost
                    # connection is retried.
                    Node("validate", "validate", gid, upstream=(f"{gid}.load",), options=dict(args)),
                    Node("switch", "switch", gid,
                         upstream=(f"{gid}.validate", *table_checks.get(table.name, {}).values()), options=dict(args)),
                ]
                last = f"{gid}.switch"
            switches.append(last)
            by_table.setdefault(table.name, []).append(last)

    # With `publish: table`, a table goes in at its last switch, which runs here and cannot see the
    # sources' files: each source's files of the table are compared there with what their loads
    # read, after every validate of the table and before any of its switches. Upstream of every
    # switch of the table, the checks run again whenever any group of it is cleared.
    for name, checks in table_checks.items():
        validates = tuple(f"{group_id(name, k)}.validate" for k in streams_of(spec.table(name), s.streams))
        for source, task_id in checks.items():
            nodes.append(Node(task_id, "source_files", upstream=validates,
                              options={"source": source, "as_loaded": True, "table": name,
                                       "trigger_rule": NONE_FAILED_MIN_ONE_SUCCESS, **_route(s.load_executor, source)}))
    # Which switch of a table comes last is not known in advance (streams finish in any order),
    # so one task per table waits for all of them and carries the table's Asset.
    batch: tuple[str, ...] = ()
    if spec.publish == "batch":
        # Every table of the batch in one transaction, once every group has switched (staged its
        # validated table). A failed group fails this task's upstream: no table of the batch goes
        # in. Skipped groups (streams the batch does not have, tables the run leaves out) do not
        # hold it back; the target checks that every stream the plan loads was staged. Its id
        # cannot be a group's (<table>_<stream number>) nor, outside the publish group, a table's.
        # The files on each source's workers, compared there with what their loads read: the
        # publish cannot see them (it compares the files it sees itself).
        as_loaded = []
        for name, task_id in source_check_ids(spec).items():
            as_loaded.append(task_id + AS_LOADED)
            nodes.append(Node(as_loaded[-1], "source_files", upstream=tuple(switches),
                              options={"source": name, "as_loaded": True, "trigger_rule": NONE_FAILED_MIN_ONE_SUCCESS,
                                       **_route(s.load_executor, name)}))
        nodes.append(Node("publish_batch", "publish_batch", upstream=(*switches, *as_loaded),
                          options={"trigger_rule": NONE_FAILED_MIN_ONE_SUCCESS, "retries": 3}))
        batch = ("publish_batch",)
    groups["publish"] = "One Asset event per table once the batch is in"
    # A batch may bring a table in fewer streams than the DAG has groups for (those groups skip),
    # so: every switch that ran succeeded, and at least one ran.
    for name, table_switches in by_table.items():
        nodes.append(Node(name, "publish", "publish", upstream=(*table_switches, *batch),
                          options={"table": name, "asset_conn_id": s.conn_id,
                                   "groups": [t.split(".")[0] for t in table_switches],
                                   "single": name in single_tables, "asset": (s.conn_id, s.schema, name),
                                   "retries": 0, "trigger_rule": NONE_FAILED_MIN_ONE_SUCCESS}))
    # The stats task reads the groups and the batch's publish, never the Asset events: it runs
    # beside them rather than after, one task start fewer between the last switch and the run's end.
    nodes.append(Node("stats", "stats", upstream=(*switches, *batch),
                      options={"groups": stream_groups, "trigger_rule": ALL_DONE, "retries": 0,
                               "single_tables": single_tables}))
    return Graph(groups=groups, nodes=tuple(nodes))
