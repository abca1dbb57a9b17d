"""CPU affinity of process trees (Linux): the benchmark's production shape.

In production the target server has cores of its own and Airflow, its workers and the
clients run elsewhere. On one machine the benchmark imitates that by pinning the embedded
PostgreSQL (its postmaster, every backend it has forked and every one it will fork: a child
inherits its parent's affinity) to some CPUs and everything else it started to the others.
Only the trees it names are touched: other work on the machine keeps its own affinity.
"""
from __future__ import annotations

import os
import time
from pathlib import Path


def all_cpus() -> set[int]:
    """The CPUs this process may run on before any pinning (the machine's, or its cgroup's)."""
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


def split(cpus: set[int], server: int | None = None) -> tuple[set[int], set[int]]:
    """(server CPUs, everything else's CPUs): the first `server` CPUs (default half, at least one)
    for the server, the rest (at least one) for the others."""
    ordered = sorted(cpus)
    if len(ordered) < 2:
        raise ValueError("the production shape needs at least 2 CPUs: one for the server, one for the rest")
    n = server if server is not None else max(1, len(ordered) // 2)
    if not 1 <= n < len(ordered):
        raise ValueError(f"server CPUs: {n} of {len(ordered)}; leave at least one for Airflow and the clients")
    return set(ordered[:n]), set(ordered[n:])


def parse_cpus(text: str) -> set[int]:
    """'0', '0-3', '0,2,4-5' -> a set of CPU ids."""
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def tree(root: int) -> list[int]:
    """The root and every process below it."""
    kids = _children()
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(kids.get(pid, []))
    return out


def pin(pid: int, cpus: set[int]) -> int:
    """Every thread of every process in pid's tree onto `cpus`; how many threads were pinned.

    A process forked between the walk's list of the tree and its parent's pinning inherits the
    parent's old CPUs and is not in that list (a server's backend, while other clients connect):
    the tree is walked again, a moment later (a fork under way shows up), until a walk finds no
    process it has not pinned."""
    n = 0
    done: set[int] = set()
    for walk in range(10):
        if walk:
            time.sleep(0.02)
        new = [p for p in tree(pid) if p not in done]
        if not new:
            break
        for p in new:
            done.add(p)
            try:
                threads = [int(t.name) for t in Path(f"/proc/{p}/task").iterdir()]
            except OSError:
                continue  # exited meanwhile
            for tid in threads:
                try:
                    os.sched_setaffinity(tid, cpus)
                    n += 1
                except (ProcessLookupError, PermissionError):
                    pass
    return n


def cpus_of(pid: int) -> set[int] | None:
    try:
        return set(os.sched_getaffinity(pid))
    except (ProcessLookupError, PermissionError):
        return None
