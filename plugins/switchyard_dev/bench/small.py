"""A small batch of a user's own extract through the DAG: how long the local stack takes for a
batch that is nothing like TPC-H's size. One table, `readings` (readings.yaml beside this file:
a timestamp partition key, a text column, a numeric column), 35,000 rows in 10 files by default,
written into the benchmark's data folder with its manifest made from the files. The DAG runs it
through the benchmark's own Airflow in the spec's default shape (a task per step) and with the
table's `tasks: single` (each group's steps in one task), a few rounds in rotating order; what
counts is each run's wall time, its start to its end as Airflow records them."""
from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import yaml

from switchyard_dev.bench.api_calls import own_requests
from switchyard_dev.bench.common import say, spread
from switchyard_dev.bench.dag_run import run_dag
from switchyard_dev.bench.own_airflow import airflow_cpu_total

SPEC = Path(__file__).resolve().parent / "readings.yaml"
TABLE = "readings"
ROWS, FILES = 35_000, 10
# The shapes compared: the spec as written (a task per step), and the table's `tasks: single`.
SHAPES = ("per-step", "single")
_START = datetime(2026, 3, 1)
_SENSORS = ("north-gate", "south gate", "boiler room 2", "roof/anemometer", "cold store #4", "Kühlhaus 7",
            "pump-13", "east wing, level 3")


def batch_name(rows: int = ROWS, files: int = FILES) -> str:
    return f"readings-r{rows}-f{files}"


def generate_readings(folder: Path, rows: int = ROWS, files: int = FILES) -> dict:
    """The batch's files (each stream a contiguous range of timestamps, one reading every 1.5 s)
    and its manifest, made from the files as `switchyard manifest` makes it. A folder whose
    manifest already says these rows and files is reused. Returns the manifest's JSON."""
    import json

    from switchyard.core.batch import MANIFEST, describe_batch, write_manifest
    from switchyard.core.spec import load_spec
    spec = load_spec(str(SPEC))
    manifest_path = folder / MANIFEST
    if manifest_path.exists():
        raw = json.loads(manifest_path.read_text(encoding="utf-8"))
        if len(raw.get("files", [])) == files and sum(f["rows"] for f in raw["files"]) == rows:
            return raw
        manifest_path.unlink()
    per, extra = divmod(rows, files)
    i = 0
    for stream in range(1, files + 1):
        path = folder / spec.file_for(TABLE, stream)
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = []
        for _ in range(per + (1 if stream <= extra else 0)):
            ts = _START + timedelta(milliseconds=1500 * i)
            value = ((i * 7919) % 2_000_000 - 1_000_000) / 1000  # -1000.000 to 999.999
            lines.append(f"{ts.isoformat(sep=' ', timespec='milliseconds')}|{_SENSORS[i % len(_SENSORS)]}|"
                         f"{value:.3f}\n")
            i += 1
        path.write_text("".join(lines), encoding="utf-8")
    write_manifest(folder, describe_batch(folder, spec))
    return json.loads(manifest_path.read_text(encoding="utf-8"))


def spec_single(runs_dir: Path) -> Path:
    """The same spec with the table's `tasks: single`, beside the benchmark's runs folder
    (written only when it differs: the preload counts a spec's modification time as code)."""
    raw = yaml.safe_load(SPEC.read_text(encoding="utf-8"))
    raw["tables"][TABLE]["tasks"] = "single"
    out = runs_dir.parent / "readings-single.yaml"
    text = yaml.safe_dump(raw, sort_keys=False)
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        out.parent.mkdir(parents=True, exist_ok=True)   # a fresh checkout has no benchmark folder yet
        out.write_text(text, encoding="utf-8")
    return out


def run_small(uri: str, pg, slots: int, rounds: int = 3, rows: int = ROWS, files: int = FILES,
              preload: bool = True) -> dict:
    """The small batch's DAG runs, `rounds` per shape in rotating order (the benchmark's Airflow
    restarts when the spec changes; its start is not in a run's wall time)."""
    from switchyard.core.batch import data_root

    from switchyard_dev.bench.own_airflow import use_bench_airflow
    name = batch_name(rows, files)
    folder = data_root() / name
    manifest = generate_readings(folder, rows, files)
    use_bench_airflow()
    specs = {"per-step": SPEC, "single": spec_single(Path(os.environ["SWITCHYARD_RUNS_DIR"]))}
    out: dict = {"batch": name, "folder": str(folder), "table": TABLE, "rows": rows, "files": files,
                 "bytes": sum(f["bytes"] for f in manifest["files"]), "rounds": rounds, "runs": []}
    for r in range(rounds):
        order = SHAPES[r % len(SHAPES):] + SHAPES[:r % len(SHAPES)]
        for shape in order:
            say(f"small batch: {rows:,} rows in {files} files, {shape} (round {r + 1})")
            dag = run_dag(uri, pg, name, files, slots, preload=preload,
                          options={"airflow": {"SWITCHYARD_SPEC": str(specs[shape])}})
            run = {"shape": shape, "round": r + 1, "state": dag["state"], "wall_seconds": dag["wall_seconds"],
                   "rows": dag["rows"], "tasks_run": dag.get("tasks_run"),
                   "services_start_seconds": dag.get("services_start_seconds"),
                   "airflow_cpu_seconds": round(airflow_cpu_total(dag.get("cpu_seconds") or {}), 2),
                   "server_cpu_seconds": (dag.get("cpu_seconds") or {}).get("postgres"),
                   "task_overhead_median": dag.get("task_overhead_median"), "run_id": dag.get("run_id"),
                   "api_requests": dag.get("api_requests")}
            print(f"    {shape}: {dag['state']}, {dag['wall_seconds']} s, {dag.get('tasks_run')} tasks, "
                  f"{dag['rows']:,} rows", flush=True)
            out["runs"].append(run)
    out["shapes"] = {shape: {"wall_seconds": spread([x["wall_seconds"] for x in out["runs"]
                                                     if x["shape"] == shape and x["state"] == "success"]),
                             "tasks_run": next((x["tasks_run"] for x in out["runs"] if x["shape"] == shape), None),
                             # The tasks' own requests to Airflow's API server per run (api_calls).
                             "api_requests": spread([sum(own_requests(x["api_requests"]).values()) for x in out["runs"]
                                                     if x["shape"] == shape and x.get("api_requests")]),
                             "failed_runs": sum(1 for x in out["runs"] if x["shape"] == shape
                                                and x["state"] != "success")}
                     for shape in SHAPES}
    return out

