"""The benchmark's pictures: throughput over time, and the run's tasks as a Gantt chart.

A stream's bytes are spread evenly over its load's duration: between two loads' start
and end that is all we know, and it is enough to see ramp-up, tail and gaps.
"""
from __future__ import annotations

from pathlib import Path

STEP_COLOURS = {"prepare": "#9ecae1", "load": "#fdae6b", "validate": "#a1d99b", "switch": "#bcbddc",
                "wait_for_batch": "#d9d9d9", "plan": "#d9d9d9", "stats": "#d9d9d9"}


def throughput_series(intervals: list[tuple[float, float, float]], origin: float, step: float = 0.5):
    """(times, MB/s) from (start, end, bytes) intervals, relative to `origin`."""
    if not intervals:
        return [], []
    end = max(e for _, e, _ in intervals) - origin
    n = int(end / step) + 2
    rate = [0.0] * n
    for s, e, b in intervals:
        s, e = s - origin, e - origin
        per_s = b / 1e6 / max(e - s, 1e-6)
        i = int(s / step)
        while i * step < e and i < n:
            lo, hi = max(s, i * step), min(e, (i + 1) * step)
            if hi > lo:
                rate[i] += per_s * (hi - lo) / step
            i += 1
    return [i * step for i in range(n)], rate


def _section_intervals(section: dict) -> list[tuple[float, float, float]]:
    return [(f["start"], f["end"], f["bytes"]) for f in section.get("files", [])]


def _dag_intervals(dag: dict) -> list[tuple[float, float, float]]:
    return [(t["work_start"], t["work_end"], t["bytes"]) for t in dag.get("tasks", [])
            if t["step"] == "load" and t.get("work_start") and t.get("work_end") and t.get("bytes")]


def plot_all(result: dict, out: Path, suffix: str = "") -> list[Path]:
    """throughput<suffix>.png and gantt<suffix>.png (a shape's plots: suffix "-production")."""
    import matplotlib
    matplotlib.use("Agg")
    paths = [plot_throughput(result, out / f"throughput{suffix}.png")]
    if result.get("dag") and result["dag"].get("tasks"):
        paths.append(plot_gantt(result, out / f"gantt{suffix}.png"))
    return paths


def _shape(result: dict) -> str:
    return f"{result.get('shape', 'laptop')} shape: "


def plot_throughput(result: dict, path: Path) -> Path:
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 4.5))
    series = [("floor (raw COPY FREEZE)", result.get("floor"), _section_intervals, "black"),
              ("floor with the target's unique indexes", result.get("floor_unique"), _section_intervals, "grey"),
              ("loader alone", result.get("loader"), _section_intervals, "tab:blue"),
              ("DAG end to end (loads)", result.get("dag"), _dag_intervals, "tab:orange")]
    for label, section, get, colour in series:
        if not section:
            continue
        intervals = get(section)
        if not intervals:
            continue
        origin = section["started"]
        xs, ys = throughput_series(intervals, origin, step=max(0.05, section["wall_seconds"] / 200))
        ax.step(xs, ys, where="post", label=f"{label}: {section['wall_seconds']:.1f} s", color=colour)
    b = result["batch"]
    ax.set_title(f"{_shape(result)}input MB/s over time: TPC-H scale {result['scale']:g}, {result['streams']} "
                 f"streams, {result['slots']} COPY slots ({b['bytes'] / 1e6:,.0f} MB); x = seconds from each "
                 f"section's start", fontsize=10)
    ax.set_xlabel("seconds (DAG: from the run's start)")
    ax.set_ylabel("MB/s of input")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_gantt(result: dict, path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    dag = result["dag"]
    tasks = [t for t in dag["tasks"] if t.get("start") and t.get("end")]
    origin = dag["started"]
    groups = []
    for t in sorted(tasks, key=lambda t: t["start"]):
        g = t["task_id"].rsplit(".", 1)[0]
        if g not in groups:
            groups.append(g)
    lane = {g: i for i, g in enumerate(groups)}
    fig, ax = plt.subplots(figsize=(12, max(4, 0.28 * len(groups) + 1.5)))
    for t in tasks:
        g = t["task_id"].rsplit(".", 1)[0]
        y = lane[g]
        ax.barh(y, t["end"] - t["start"], left=t["start"] - origin, height=0.8,
                color=STEP_COLOURS.get(t["step"], "#cccccc"), edgecolor="white", linewidth=0.5)
        if t["step"] == "load" and t.get("work_start") and t.get("work_end"):
            ax.barh(y, t["work_end"] - t["work_start"], left=t["work_start"] - origin, height=0.4,
                    color="#d94801")
    ax.set_yticks(range(len(groups)))
    ax.set_yticklabels(groups, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds from the DAG run's start")
    eff = dag.get("efficiency_run") or {}
    ax.set_title(f"{_shape(result)}DAG run tasks (wall {dag['wall_seconds']:.1f} s; schedule efficiency "
                 f"{eff.get('efficiency', float('nan')):.2f}; {result['slots']} COPY slots, pool of "
                 f"{dag.get('pool') or result['slots']})", fontsize=10)
    handles = [Patch(color=c, label=s) for s, c in STEP_COLOURS.items() if s in ("prepare", "load", "validate",
                                                                              "switch")]
    handles.append(Patch(color="#d94801", label="COPY (reported load work)"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
