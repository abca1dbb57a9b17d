"""`make demo`: the main job end to end on this machine.

Embedded PostgreSQL, a generated batch (TPC-H, or with `SPEC=shop` the shop example), a
local Airflow (scheduler, dag-processor, api-server; LocalExecutor; its metadata in the
embedded PostgreSQL), the target connection and the load pool, one DAG run followed to its
end, and the run's summary. Everything it starts or makes is reused by the next `make demo`,
which reloads the same batch (replacing its partitions). Each spec has its own DAG
(`switchyard_<spec name>`) and target schema (`<spec name>`) unless SWITCHYARD_DAG_ID /
SWITCHYARD_SCHEMA say otherwise; Airflow is restarted when the demo switches between them.

`make demo SPEC=/path/to/my.yaml BATCH=<name>` loads a batch the user's producer already wrote
under the data root (a spec without a generator generates nothing).

The DAG's settings go into the local Airflow's settings file (`switchyard.env` in its home),
which every Airflow process and `airflow dags test` from any shell build the DAG from.
"""
from __future__ import annotations

import json
import sys
import time
import urllib.error
from pathlib import Path

from switchyard_dev import LocalStackError, local
from switchyard.core.batch import data_root
from switchyard.core.datagen import generate
from switchyard_dev.embedded import EmbeddedPostgres, state_dir
from switchyard_dev.settings import value
from switchyard.core.spec import load_spec
from switchyard.observability.stats import stats_path

DAG_ID = "switchyard_tpch"
CONN_ID = "switchyard_target"
POOL = "switchyard_loads"
STEPS = ("prepare", "load", "validate", "switch")


def say(step: str, text: str) -> None:
    print(f"==> [{step}] {text}", flush=True)


def batch_name(scale: float, streams: int, spec: str = "tpch") -> str:
    return f"{spec}-sf{scale:g}-s{streams}"


def dag_id_for(spec: str) -> str:
    """The demo's DAG for a built-in spec: switchyard_tpch, switchyard_shop."""
    return f"switchyard_{spec}"


def connection_body(pg: EmbeddedPostgres, extra: dict | None = None) -> dict:
    """The demo's target connection as the API takes it; `extra` as the connection's extra."""
    return {"connection_id": CONN_ID, "conn_type": "postgres", "host": "127.0.0.1", "port": pg.port,
            "login": "postgres", "password": pg.password(), "schema": "switchyard",
            "extra": json.dumps(extra or {}),
            "description": "Switchyard demo target: the embedded PostgreSQL"}


def connection_environment(pg: EmbeddedPostgres, extra: dict | None = None) -> dict[str, str]:
    """The same connection as an environment variable (`AIRFLOW_CONN_<ID>`, Airflow's JSON form),
    which a task finds in its own environment before it asks the API server."""
    body = connection_body(pg, extra)
    value = {k: body[k] for k in ("conn_type", "host", "port", "login", "password", "schema")}
    value["extra"] = extra or {}
    return {f"AIRFLOW_CONN_{CONN_ID.upper()}": json.dumps(value)}


def ensure_connection(api: local.Api, pg: EmbeddedPostgres, extra: dict | None = None) -> None:
    """The demo's target connection; `extra` as the connection's extra (e.g. {"copy_slots": 1})."""
    body = connection_body(pg, extra)
    if api.exists(f"/api/v2/connections/{CONN_ID}"):
        api.patch(f"/api/v2/connections/{CONN_ID}", body)
    else:
        api.post("/api/v2/connections", body)


def ensure_pool(api: local.Api, slots: int, name: str = POOL,
                description: str = "Load tasks: the target's load slots x SWITCHYARD_POOL_PER_SLOT") -> None:
    """The load pool with `slots` slots (default_pool_size: what `switchyard pool sync` sets), or
    the pool `name`."""
    body = {"name": name, "slots": slots, "description": description}
    if api.exists(f"/api/v2/pools/{name}"):
        api.patch(f"/api/v2/pools/{name}", {"pool": name, "slots": slots, "description": description,
                                            "include_deferred": False})
    else:
        api.post("/api/v2/pools", body)


def wait_for_dag(api: local.Api, expected_tasks: int, timeout: float = 240, dag_id: str = DAG_ID) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            tasks = api.get(f"/api/v2/dags/{dag_id}/tasks")
            if tasks.get("total_entries", len(tasks.get("tasks", []))) == expected_tasks:
                return
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
        if time.monotonic() > deadline:
            raise LocalStackError(f"the DAG {dag_id} was not parsed with {expected_tasks} tasks in {timeout:.0f}s "
                                  f"(see {local.airflow_home() / 'logs' / 'dag-processor.out'})")
        time.sleep(2)


def _progress_line(tis: list[dict], elapsed: float) -> str:
    # A group run as one task (the spec's `tasks: single`) shows as `steps`.
    counts: dict[str, dict[str, int]] = {s: {} for s in (*STEPS, "steps")}
    failed = []
    for ti in tis:
        step = ti["task_id"].rsplit(".", 1)[-1]
        state = ti.get("state") or "none"
        if step in counts:
            counts[step][state] = counts[step].get(state, 0) + 1
        if state == "failed":
            failed.append(ti["task_id"])
    parts = []
    for step in (*STEPS, "steps"):
        c = counts[step]
        total = sum(c.values())
        if step == "steps" and not total:
            continue
        done = c.get("success", 0)
        running = c.get("running", 0)
        # A skipped group's task (a stream the batch does not have) had nothing to do: not counted.
        skipped = c.get("skipped", 0)
        parts.append(f"{step} {done}/{total - skipped}"
                     + "".join(f" ({n} {what})" for n, what in ((running, "running"), (skipped, "skipped")) if n))
    line = f"[{elapsed:5.0f}s] " + " | ".join(parts)
    if failed:
        line += f" | FAILED: {', '.join(sorted(failed)[:4])}" + (" ..." if len(failed) > 4 else "")
    return line


class _Waits:
    """A running run whose progress line has not moved for a while is not followed in silence:
    what it waits for is said (its batch, and the manifest's path as the services resolve it; an
    earlier run; the target's lease), once, and again when that changes."""
    QUIET_SECONDS = 15.0

    def __init__(self, api: local.Api, dag_id: str):
        self.api, self.dag_id = api, dag_id
        self.since, self.said = time.monotonic(), ""

    def moved(self) -> None:
        self.since = time.monotonic()

    def check(self, run: dict) -> None:
        if time.monotonic() - self.since < self.QUIET_SECONDS:
            return
        self.since = time.monotonic()
        from switchyard_dev import runs
        doing = runs.what_it_does(self.api, {**run, "dag_id": self.dag_id}, runs.batch_wait_seconds())
        if doing != self.said and not doing.startswith("is loading"):
            print(f"    the run {doing}", flush=True)
        self.said = doing


def follow(api: local.Api, run_id: str, timeout: float, progress_every: float = 2.0, dag_id: str = DAG_ID,
           poll_every: float = 2.0, watch_queue: bool = True, say_waits: bool = False) -> str:
    """Wait for the run's end, printing its progress every `progress_every` seconds (the task
    list is the api-server's most expensive answer: the benchmark asks for it less often).
    A run Airflow keeps queued is not waited for in silence: within seconds it says which run
    of the DAG holds it, what that run waits for, and the command that ends it (and notes it).
    With `say_waits`, a running run whose progress stands still says what it waits for (_Waits);
    the benchmark's runs go without those calls."""
    from switchyard_dev.runs import QueuedWatch
    start = time.monotonic()
    last = ""
    shown = float("-inf")
    quoted = _quote(run_id)
    queued = QueuedWatch(api, dag_id, run_id) if watch_queue else None
    waits = _Waits(api, dag_id) if say_waits else None
    while True:
        run = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{quoted}")
        if queued is not None:
            queued.check(run)
        done = run["state"] in ("success", "failed")
        if done or time.monotonic() - shown >= progress_every:
            shown = time.monotonic()
            tis = api.get_all(f"/api/v2/dags/{dag_id}/dagRuns/{quoted}/taskInstances", "task_instances")
            line = _progress_line(tis, time.monotonic() - start)
            if line.split("] ", 1)[1] != last:
                print(line, flush=True)
                last = line.split("] ", 1)[1]
                if waits is not None:
                    waits.moved()
        if waits is not None and run["state"] == "running":
            waits.check(run)
        if done:
            return run["state"]
        if time.monotonic() - start > timeout:
            raise LocalStackError(f"the run {run_id} did not finish in {timeout:.0f}s")
        time.sleep(poll_every)


def print_summary(stats: dict, path: Path) -> None:
    from switchyard.observability.stats import name_width, summary_table
    print()
    for line in summary_table(stats["tables"]):
        print(line)
    tot = stats["totals"]
    span = stats.get("makespan_seconds")
    rate = f"{tot['mb_per_s']:.1f}" if tot["mb_per_s"] else "-"
    w = name_width(stats["tables"])
    print(f"{'total':<{w}} {tot['rows']:>12,} {tot['switched']:>10} {(f'{span:.2f}' if span else '-'):>8} {rate:>8}")
    # Why the run failed, first: a batch refused at setup.plan or not published never reached
    # its groups, so its "failed groups" are the groups that did not run.
    if stats.get("plan_error"):
        print(f"\nrefused before any load, nothing changed: {stats['plan_error'].removeprefix('AirflowFailException: ')}")
    elif stats.get("publish_error"):
        print(f"\nthe batch was not published, every table kept its contents: {stats['publish_error']}")
    elif stats["failed_groups"]:
        print(f"failed groups: {', '.join(stats['failed_groups'])}")
        # Why, for the first few: each failed step's error as its task raised it.
        errors = [(g["group"], step, text) for g in stats.get("groups") or [] if g["group"] in stats["failed_groups"]
                  for step, text in (g.get("errors") or {}).items()]
        for group, step, text in errors[:3]:
            print(f"  {group}.{step}: {text[:600]}")
        if stats.get("held_back_groups"):
            print(f"held back (validated and staged, kept out with them): {', '.join(stats['held_back_groups'])}")
    print(f"\nrun statistics: {path}")


def durations(stats: dict | None, run: dict, demo_seconds: float) -> list[tuple[str, float | None, str]]:
    """The run's four durations, each with what it measures (they differ, and by design)."""
    def seconds(a, b):
        from datetime import datetime
        if not a or not b:
            return None
        return (datetime.fromisoformat(b.replace("Z", "+00:00")) - datetime.fromisoformat(a.replace("Z", "+00:00"))
                ).total_seconds()
    stats = stats or {}
    return [
        ("loads", stats.get("makespan_seconds"),
         "first load start to last load end: the report's makespan, the `total` row's seconds above"),
        ("steps", stats.get("steps_seconds"),
         "first prepare start to last switch end: the span of the report's Gantt chart"),
        ("Airflow run", seconds(run.get("start_date"), run.get("end_date")),
         "the DAG run's start to its end, as the Airflow UI shows it (setup, publish and stats included)"),
        ("whole demo", demo_seconds, "this command: server, data, Airflow start-up and the run"),
    ]


def print_durations(stats: dict | None, run: dict, demo_seconds: float) -> None:
    print("\ndurations")
    for name, seconds, what in durations(stats, run, demo_seconds):
        shown = f"{seconds:.1f} s" if seconds is not None else "-"
        print(f"  {name:<12} {shown:>9}  {what}")


def _quote(run_id: str) -> str:
    from urllib.parse import quote
    return quote(run_id, safe="")


def existing_batch(spec, name: str | None, streams: int | None) -> tuple[Path, int]:
    """A batch the user's producer wrote under the data root: its folder and the streams the DAG
    needs for it (its manifest's most streams of a table, or `streams` if more)."""
    from switchyard.core.batch import BatchError, read_manifest
    if not name:
        raise SystemExit(f"demo: {spec.source} has no generator: name the batch to load, one your producer "
                         f"wrote under {data_root()} (make demo SPEC=... BATCH=<folder name>)")
    folder = data_root() / name
    try:
        manifest = read_manifest(folder, spec)
    except BatchError as exc:
        raise SystemExit(f"demo: {exc}")
    most = max((len(manifest.streams_of(t)) for t in spec.table_names), default=1)
    return folder, max(most, streams or 0)


def run(scale: float, streams: int | None, timeout: float = 3600, spec: str = "tpch", executor: str = "local",
        batch: str | None = None) -> int:
    began = time.monotonic()
    import os
    loaded = load_spec(spec)
    spec_name = loaded.name
    # A built-in spec by its name; a spec file by its path (the DAG reads it from there).
    spec = spec if Path(spec).suffix in (".yaml", ".yml") else spec_name
    remote = executor != "local"
    dag_id = os.environ.get("SWITCHYARD_DAG_ID", "").strip() or dag_id_for(spec_name)
    schema = os.environ.get("SWITCHYARD_SCHEMA", "").strip() or spec_name
    generated = loaded.generator is not None
    if remote and not generated:
        raise SystemExit("demo: EXECUTOR=edge lays out a generated batch over two sources; a spec without a "
                         "generator runs with the local executor")
    streams = streams if streams is not None or not generated else 4
    say("1/6", "embedded PostgreSQL")
    pg = EmbeddedPostgres()
    uri = pg.start()
    print(f"    target: {uri.split('@', 1)[1]} (make db-uri prints the full URI, make psql opens a prompt)")

    if generated:
        say("2/6", f"{'TPC-H' if spec_name == 'tpch' else spec_name} batch, scale {scale:g}, {streams} streams")
    else:
        say("2/6", f"batch {batch} of {loaded.source} (written by its producer)")
    name = batch or batch_name(scale, streams, spec_name)
    extra = {}
    if not generated:
        folder, streams = existing_batch(loaded, batch, streams)
        from switchyard.core.batch import read_manifest
        manifest = read_manifest(folder, loaded)
    elif remote:
        from switchyard_dev import scaleout
        # The producer's batch, then laid out as two source machines would hold it: each
        # source's data root gets its own streams' files, the central root the manifest only.
        place = state_dir() / "scaleout"
        sources = scaleout.split_streams(streams)
        spec_path = scaleout.spec_with_sources(spec, sources, place)
        generated = place / "generated" / name
        manifest = generate(generated, loaded, scale, streams)
        roots = {source: place / source for source in sources}
        folder = place / "central" / name
        scaleout.distribute(generated, name, load_spec(spec_path), place / "central", roots)
        for source, ks in sources.items():
            print(f"    {roots[source] / name}: streams {', '.join(map(str, ks))} (queue {source})")
        extra = {**scaleout.edge_settings(scaleout.ensure_metadata_database(pg)),
                 "SWITCHYARD_DATA_ROOT": str(place / "central")}
        spec = spec_path
    else:
        folder = data_root() / name
        manifest = generate(folder, loaded, scale, streams)
    total = sum(e.bytes for e in manifest.entries)
    # With sources, the central folder holds the manifest alone: the files are the sources' (above).
    where = f"the sources' folders, the manifest alone in {folder}" if remote else folder
    print(f"    {where}: {len(manifest.entries)} files, {total / 1e6:.1f} MB, "
          f"{sum(e.rows for e in manifest.entries):,} rows")

    say("3/6", "Airflow (scheduler, dag-processor, api-server; " +
        ("LocalExecutor, the loads on two Edge workers" if remote else "LocalExecutor")
        + "; metadata in the embedded PostgreSQL)")
    # The DAG's settings, in the settings file every Airflow process builds the DAG from. The demo
    # loads one batch on demand: no schedule unless the settings give one (SWITCHYARD_SCHEDULE).
    chosen = {"SWITCHYARD_SPEC": spec, "SWITCHYARD_DAG_ID": dag_id, "SWITCHYARD_SCHEMA": schema,
              "SWITCHYARD_STREAMS": str(streams),
              "SWITCHYARD_LOAD_EXECUTOR": extra.pop("SWITCHYARD_LOAD_EXECUTOR", "none")}
    previous = local.dag_settings().get("SWITCHYARD_DAG_ID")
    values = local.write_dag_settings(chosen)
    print(f"    the DAG's settings: {local.dag_settings_file()} (schedule: {values['SWITCHYARD_SCHEDULE']})")
    if previous not in (None, dag_id):
        # One local Airflow builds one DAG (docs/deployment.md, "Two checkouts on one machine").
        print(f"    {dag_id} replaces the DAG {previous} in the local Airflow (its runs stay in Airflow's history)")
    env = local.airflow_env(extra=extra)
    conflicts = local.dag_settings_conflicts(env)
    if conflicts:
        raise SystemExit(f"demo: this shell contradicts the DAG's settings: {'; '.join(conflicts)}")
    # The services read the DAG's settings from the file, which `services start` may rewrite while
    # they run: kept in their environment, this shell's would contradict it and stop every parse.
    env = local.without_dag_settings(env)
    local.migrate(env)
    if local.running_streams() not in (None, streams):
        print(f"    restarting Airflow for {streams} streams")
        local.stop_services()
    elif local.running_spec() not in (None, spec):
        print(f"    restarting Airflow for the {spec} spec's DAG")
        local.stop_services()
    elif local.running_executor() not in (None, executor):
        print(f"    restarting Airflow for the {executor} executor")
        local.stop_services()
    elif (root := local.running_data_root()) not in (None, data_root().resolve()):
        # The services keep the data root of the shell that started them: the run would wait
        # there for a batch this shell wrote elsewhere.
        print(f"    restarting Airflow for this shell's data root {data_root()} (it read batches under {root})")
        local.stop_services()
    local.start_services(env, streams, spec)
    api = local.Api()
    api.wait_ready()
    if remote:
        for source in sources:
            scaleout.start_worker(env, scaleout.worker_name(source), [source], roots[source])
        scaleout.wait_for_workers(scaleout.worker_name(source) for source in sources)
        for source in sources:
            print(f"    Edge worker {scaleout.worker_name(source)}: queue {source}, data root {roots[source]}")
    print(f"    UI: {local.api_url()}  login: {local.ADMIN_USER} / {local.admin_password()}")

    say("4/6", "target connection and load pool")
    ensure_connection(api, pg)
    slots = value("SWITCHYARD_POOL_SLOTS") or default_pool_size()
    from switchyard.settings import Settings
    pool = Settings.from_env(env).pool
    ensure_pool(api, slots, pool)
    print(f"    connection {CONN_ID}; pool {pool} with {slots} slots (the server runs one COPY per core "
          f"at a time, {pg_slots()} here)")

    say("5/6", "trigger the DAG")
    from switchyard.airflow.dag_factory import DagConfig, build_dag
    expected = len(build_dag(DagConfig(streams=streams, spec=spec, dag_id=dag_id, schema=schema)).tasks)
    wait_for_dag(api, expected, dag_id=dag_id)
    from switchyard_dev import runs
    active = runs.active_runs(api, dag_id)
    if active:
        print(f"    {len(active)} run(s) of {dag_id} already active: this one waits for them (`switchyard runs`)")
    api.patch(f"/api/v2/dags/{dag_id}", {"is_paused": False})
    dag_run = api.post(f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": None, "conf": {"batch": name}})
    run_id = dag_run["dag_run_id"]
    print(f"    run {run_id}: {local.api_url()}/dags/{dag_id}/runs/{run_id}")

    say("6/6", "following the run")
    state = follow(api, run_id, timeout, dag_id=dag_id, say_waits=True)
    path = stats_path(dag_id, run_id)
    stats = json.loads(path.read_text()) if path.exists() else None
    if stats:
        print_summary(stats, path)
    from switchyard.observability.stats import report_url
    report = report_url(dag_id, run_id, local.api_url())
    # The scheduler wrote the run's note (switchyard.airflow.run_notes) with the run's final state.
    note = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{_quote(run_id)}").get("note")
    print(f"run report: {path.parent / 'report.html'}\n            {report} (also linked from the stats task's "
          f"\"Run report\" button" + (" and the run's note)" if note else ")"))
    finished = api.get(f"/api/v2/dags/{dag_id}/dagRuns/{_quote(run_id)}")
    print_durations(stats, finished, time.monotonic() - began)
    print(f"\nrun {state}. Airflow keeps running for you to look around: {local.api_url()} "
          f"({local.ADMIN_USER} / {local.admin_password()}); `make stop` stops it.")
    return 0 if state == "success" else 1


def pg_slots() -> int:
    """The embedded target's COPY slots: this machine's cores."""
    from switchyard.targets.postgres import PostgresAdapter
    return PostgresAdapter(load_spec("tpch"), uri="postgresql://unused").scheduler_count()


def default_pool_size(server_slots: int | None = None) -> int:
    """The load pool `switchyard pool sync` would set for the embedded target (or one with
    `server_slots` COPY slots): slots x SWITCHYARD_POOL_PER_SLOT."""
    from switchyard.targets.postgres import PostgresAdapter
    return PostgresAdapter(load_spec("tpch"), uri="postgresql://unused",
                           copy_slots=server_slots or pg_slots()).pool_size()


if __name__ == "__main__":
    sys.exit(run(float(sys.argv[1]), int(sys.argv[2]), spec=sys.argv[3] if len(sys.argv) > 3 else "tpch",
                 executor=sys.argv[4] if len(sys.argv) > 4 else "local"))
