"""CPU seconds spent by process trees between two moments, from /proc (Linux).

The benchmark uses it to say where a run's CPU went: PostgreSQL, the task processes,
the scheduler, the api-server... A tree's CPU is the sum, over its live (or not yet
reaped) processes, of their own user + system time and their reaped children's (the
kernel adds a child's times, its own children's included, to its parent's when the parent
waits for it). Every process that ran under a root is therefore counted exactly once, with
two snapshots and no sampling, however short-lived it was.
"""
from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _processes() -> dict[int, tuple[int, float, float]]:
    """{pid: (parent pid, own cpu seconds, reaped children's cpu seconds)} of every process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # exited meanwhile
        # After the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15), 1-based from state.
        out[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK,
                                (int(fields[13]) + int(fields[14])) / _TICK)
    return out


def process_cpu(pid: int) -> float | None:
    """One process's own user + system CPU seconds so far (None if it is gone): e.g. a
    PostgreSQL backend, whose session's work it is."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK


def machine_busy() -> float:
    """CPU seconds all cores spent busy since boot (user, nice, system, irq, softirq, steal)."""
    parts = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    values = [int(v) for v in parts]
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return (sum(values[:8]) - idle) / _TICK


def snapshot(roots: dict[str, int | None], split_children: tuple[str, ...] = ()) -> dict[str, float]:
    """CPU seconds so far of each root's process tree, by name.

    For a root named in `split_children`, the root process's own time is reported under its
    name and everything below it (children, reaped or not) under "<name> children".
    """
    procs = _processes()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out: dict[str, float] = {"machine": machine_busy()}
    for name, root in roots.items():
        if not root or root not in procs:
            continue
        below = 0.0
        stack = list(children.get(root, []))
        while stack:
            pid = stack.pop()
            _, own, reaped = procs[pid]
            below += own + reaped
            stack.extend(children.get(pid, []))
        _, own, reaped = procs[root]
        if name in split_children:
            out[name] = own
            out[f"{name} children"] = below + reaped
        else:
            out[name] = own + reaped + below
    return out


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds between two snapshots per tree (trees present in both), plus "other":
    what the machine spent outside them (the caller, the machine's other work)."""
    out = {k: round(after[k] - before[k], 2) for k in after if k in before and k != "machine"}
    if "machine" in before and "machine" in after:
        total = after["machine"] - before["machine"]
        out["machine"] = round(total, 2)
        out["other"] = round(total - sum(out[k] for k in out if k != "machine"), 2)
    return out
