"""SQL Server's partition window: a batch's ranges against the partition function, decided in
Python from the catalog's answers, before any load.

No connection here. The adapter reads the target table from the catalog (pre-flight queries in
targets/mssql/templates/catalog_*.sql: sys.partition_functions, sys.partition_range_values,
sys.partition_schemes, sys.destination_data_spaces, sys.partitions, sys.indexes) into a
`Layout`, and `plan_window` says what the table's commit does, step by step, or why the batch is
refused. The steps are simulated on the layout with SQL Server's own rules, so a plan in which a
SPLIT or MERGE would move rows is refused before it is ever run:

* RANGE LEFT (the only kind planned here): a boundary value belongs to the partition on its
  left; partition i holds keys in (b[i-1], b[i]].
* SPLIT RANGE (v): "of the two ranges, the one with the new boundary value is the new
  partition" and goes to the scheme's NEXT USED filegroup; with RANGE LEFT that is the left one,
  (b[i-1], v]; the right one, (v, b[i]], keeps the filegroup it had. Both keep the data
  compression of the partition that was split.
* MERGE RANGE (v): the partition holding v (the left one) is dropped; the merged partition stays
  on the filegroup that did not hold v (the right one) and has its data compression.
* SPLIT and MERGE are metadata-only only when the partitions they touch are empty; otherwise
  rows move, fully logged, under a schema-modification lock. Here every SPLIT lands in an
  empty partition and every MERGE joins two empty ones, or the plan is refused.
* SWITCH needs the receiving partition empty, the source on the partition's filegroup, with
  the partition's data compression, the target's columns and indexes, and a trusted CHECK
  within the partition's boundaries.

The commit (one transaction, the table's last switch) runs, in order: the partitions that give
way emptied (TRUNCATE ... WITH (PARTITIONS)) and the retired ones switched out to the archive
schema or emptied; MERGE of every boundary no partition needs any more; SPLIT of each new
boundary, ascending, with NEXT USED set to the filegroup the new partition needs; SWITCH of
every staging table into its partition. A stream's staging table is created where its partition
will be (`placement`: the filegroup and data compression the simulation gives that partition),
so SWITCH finds them equal.
"""
from __future__ import annotations

import bisect
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from switchyard.core.preflight import retired_on_arrival
from switchyard.targets.mssql.keys import KeyType
from switchyard.targets.mssql.settings import EDGE_FILEGROUP

MAX_SYSNAME = 128
_SYSNAME = re.compile(r"^[a-z_][a-z0-9_]{0,127}$")
_COMPRESSIONS = ("NONE", "ROW", "PAGE")


def object_name(prefix: str, schema: str, table: str) -> str:
    """`<prefix>_<schema>_<table>`, e.g. pf_tpch_orders: partition functions and schemes are
    database-wide objects (not in a schema), so the schema is part of the name. Names longer than
    SQL Server's 128 characters keep their first 115 and a hash of the whole."""
    name = f"{prefix}_{schema}_{table}"
    if len(name) > MAX_SYSNAME:
        name = f"{name[:115]}_{hashlib.sha1(name.encode()).hexdigest()[:12]}"
    if not _SYSNAME.match(name):
        raise ValueError(f"{name!r} is not a valid SQL Server object name here")
    return name


@dataclass(frozen=True)
class Partition:
    """One partition of the target as the catalog has it (RANGE LEFT: keys in (lower, upper])."""
    number: int
    lower: Any            # the boundary below, exclusive; None: the first partition
    upper: Any            # the boundary above, inclusive; None: the last partition
    filegroup: str
    rows: int
    compression: tuple[tuple[str, str], ...] = ()   # (index, NONE|ROW|PAGE), heap or clustered first
    batch: str | None = None

    def describe(self, key: KeyType) -> str:
        return f"partition {self.number} ({keys_text(self.lower, self.upper, key)}, {self.rows:,} rows)"


def keys_text(lower: Any, upper: Any, key: KeyType) -> str:
    """`keys 1..1000` for the partition (0, 1000] of an integer key; open ends said so."""
    low = "any key" if lower is None else _show(key.after(lower))
    if upper is None:
        return f"keys above {_show(lower)}" if lower is not None else "every key"
    return f"keys {low}..{_show(upper)}" if lower is not None else f"keys up to {_show(upper)}"


def show_key(value: Any) -> str:
    """A key value as text: the integer, or ISO 8601 (the form the control tables keep)."""
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


_show = show_key


@dataclass(frozen=True)
class Incoming:
    """A stream of the batch: its inclusive key range and the filegroup a new partition for it
    gets (NEXT USED at its SPLIT)."""
    stream: int
    lower: Any
    upper: Any
    filegroup: str
    staging_table: str = ""
    rows: int | None = None


@dataclass
class Layout:
    """A RANGE LEFT partition function, its scheme and the table's partitions, simulated.

    `filegroups`, `rows`, `compression` and `batches` have one entry per partition, one more
    than `boundaries`. A step that would move rows raises RowsWouldMove."""
    boundaries: list[Any]
    filegroups: list[str]
    rows: list[int]
    compression: list[tuple[tuple[str, str], ...]]
    batches: list[str | None]

    @classmethod
    def of(cls, partitions: Sequence[Partition]) -> "Layout":
        ordered = sorted(partitions, key=lambda p: p.number)
        return cls(boundaries=[p.upper for p in ordered[:-1]], filegroups=[p.filegroup for p in ordered],
                   rows=[p.rows for p in ordered], compression=[p.compression for p in ordered],
                   batches=[p.batch for p in ordered])

    def copy(self) -> "Layout":
        return Layout(list(self.boundaries), list(self.filegroups), list(self.rows), list(self.compression),
                      list(self.batches))

    def partitions(self) -> list[Partition]:
        bounds = [None, *self.boundaries, None]
        return [Partition(number=i + 1, lower=bounds[i], upper=bounds[i + 1], filegroup=self.filegroups[i],
                          rows=self.rows[i], compression=self.compression[i], batch=self.batches[i])
                for i in range(len(self.filegroups))]

    def index_of(self, value: Any) -> int:
        """0-based partition of a key: RANGE LEFT puts a boundary value on its left."""
        return bisect.bisect_left(self.boundaries, value)

    def empty(self, index: int) -> None:
        self.rows[index] = 0
        self.batches[index] = None

    def split(self, value: Any, next_used: str) -> None:
        i = self.index_of(value)
        if i < len(self.boundaries) and self.boundaries[i] == value:
            raise ValueError(f"{value!r} is a boundary already")
        if self.rows[i]:
            raise RowsWouldMove(f"SPLIT RANGE ({_show(value)}) would split partition {i + 1}, which holds "
                                f"{self.rows[i]:,} rows: they would move")
        self.boundaries.insert(i, value)
        self.filegroups.insert(i, next_used)        # the new partition: left of the value
        self.rows.insert(i, 0)
        self.compression.insert(i, self.compression[i])   # both keep the split partition's compression
        self.batches.insert(i, None)

    def merge(self, value: Any) -> None:
        i = self.boundaries.index(value)
        if self.rows[i] or self.rows[i + 1]:
            raise RowsWouldMove(f"MERGE RANGE ({_show(value)}) would join partitions {i + 1} and {i + 2}, which "
                                f"hold {self.rows[i]:,} and {self.rows[i + 1]:,} rows: rows would move")
        del self.boundaries[i]
        # The merged partition stays where the partition that did not hold the value was (the
        # right one), with its compression.
        del self.filegroups[i], self.rows[i], self.compression[i], self.batches[i]


class RowsWouldMove(Exception):
    """A SPLIT or MERGE that is not metadata-only: refused."""


@dataclass(frozen=True)
class Step:
    """One statement of the commit. kind: truncate | archive | merge | split | switch_in."""
    kind: str
    value: Any = None                 # a key in the partition (truncate, archive, switch_in) or the boundary
    filegroup: str | None = None      # split: NEXT USED; archive, switch_in: the partition's
    partition: Partition | None = None
    stream: Incoming | None = None
    archive_table: str | None = None
    compression: tuple[tuple[str, str], ...] = ()
    why: str = ""


@dataclass
class WindowPlan:
    table: str
    mode: str
    batch: str
    steps: list[Step] = field(default_factory=list)
    placement: dict[int, tuple[str, tuple[tuple[str, str], ...]]] = field(default_factory=dict)
    removed: list[Partition] = field(default_factory=list)
    retired: list[Partition] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    final: Layout | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def reshapes(self) -> bool:
        return any(s.kind in ("merge", "split") for s in self.steps)


def plan_window(where: str, mode: str, batch: str, partitions: Sequence[Partition], streams: Sequence[Incoming],
                key: KeyType, *, keep: int | None = None, keep_days: int | None = None, archive: bool = False,
                shared_with: Sequence[str] = (), scheme: str = "", function: str = "",
                archive_name=None) -> WindowPlan:
    """What the table's commit does, step by step, or every reason it cannot (plan.problems).

    `partitions`: the table's partitions now, with the batch each is recorded to; `streams`: the
    batch's, in key order; `shared_with`: other tables or indexes on the same partition function
    (a SPLIT or MERGE would repartition them too); `archive_name(partition)`: the archive table's
    name for a retired partition (retire: archive)."""
    plan = WindowPlan(table=where, mode=mode, batch=batch)
    layout = Layout.of(partitions)
    current = layout.partitions()
    filled = [p for p in current if p.rows > 0]
    if mode == "replace":
        give_way = filled
    else:
        give_way = [p for p in filled if p.batch == batch]
        for s in streams:
            hit = [p for p in filled if p.batch != batch and _overlaps(s, p)]
            for owner_batch in sorted({p.batch or "" for p in hit}):
                parts = [p for p in hit if (p.batch or "") == owner_batch]
                owner = (f"batch {owner_batch}" if owner_batch else
                         "no batch (recorded to none: loaded by hand or before append mode)")
                inside = [b for b in layout.boundaries if s.lower <= b < s.upper]
                straddle = (f"; its range spans the boundar{'ies' if len(inside) > 1 else 'y'} "
                            f"{', '.join(_show(b) for b in inside)} of {function or 'the partition function'}"
                            if inside else "")
                numbers = ", ".join(str(p.number) for p in parts)
                plan.problems.append(
                    f"{where}: batch {batch} overlaps {owner}: its stream {s.stream} "
                    f"({keys_text(key.before(s.lower), s.upper, key)}) and "
                    f"{'; '.join(p.describe(key) for p in parts)} of {owner}{straddle}. In append mode every batch "
                    f"brings its own key ranges, and no SPLIT or MERGE may move rows. To load "
                    f"{'batch ' + owner_batch if owner_batch else 'that data'} again, run "
                    f"{'that batch' if owner_batch else 'it as a batch of its own'}; to have this batch take its "
                    f"place, empty {'that partition' if len(parts) == 1 else 'those partitions'} first (TRUNCATE "
                    f"TABLE {where} WITH (PARTITIONS ({numbers})), or SWITCH {'it' if len(parts) == 1 else 'each'} "
                    f"out to an empty table on {'its' if len(parts) == 1 else 'their'} filegroup), or declare the "
                    f"table mode: replace")
        if plan.problems:
            return plan
    plan.removed = give_way
    sim = layout.copy()
    for p in give_way:
        plan.steps.append(Step("truncate", value=_inside(p, key), partition=p,
                               why=f"{mode} mode: gives way to batch {batch}"))
        sim.empty(p.number - 1)

    # Retention (append): the partitions of the batches that fall out of the window.
    retired: list[Partition] = []
    if mode == "append" and (keep is not None or keep_days is not None):
        retired, why = _retention(sim.partitions(), streams, batch, key, keep, keep_days)
        mine = [p for p in retired if p.batch == batch]
        if mine:
            plan.problems.append(retired_on_arrival(where, batch, why, len(mine), len(streams)))
            return plan
        for p in retired:
            if archive:
                plan.steps.append(Step("archive", value=_inside(p, key), partition=p, filegroup=p.filegroup,
                                       compression=p.compression, archive_table=archive_name(p) if archive_name else None,
                                       why=why))
            else:
                plan.steps.append(Step("truncate", value=_inside(p, key), partition=p, why=why))
            sim.empty(p.number - 1)
        if retired:
            # Said before any load, and true only once the batch is in: the commit retires them.
            plan.notes.append(f"{where}: when batch {batch} goes in, and not before: {why} ({len(retired)} "
                              f"partitions, {'switched out to the archive schema' if archive else 'emptied'})")
    plan.retired = retired

    # The boundaries the table needs after the commit: each kept partition's and each stream's.
    kept = [p for p in sim.partitions() if p.rows > 0]
    needed = set()
    for p in kept:
        needed.update(b for b in (p.lower, p.upper) if b is not None)
    for s in streams:
        needed.update((key.before(s.lower), s.upper))
    uppers = {s.upper: s for s in streams}
    # A stream whose partition would keep another filegroup (its upper boundary is there
    # already) gets its own where the partition above is empty: MERGE of that boundary and a
    # SPLIT with the stream's filegroup as NEXT USED, both metadata only.
    resplit: set[Any] = set()
    probe = _reshaped(sim, needed, uppers, resplit)
    if probe is not None:
        for s in streams:
            i = probe.index_of(s.lower)
            if probe.filegroups[i] != s.filegroup and i + 1 < len(probe.rows) and not probe.rows[i + 1]:
                resplit.add(s.upper)
    try:
        steps = []
        for value in sorted((set(sim.boundaries) - needed) | resplit):
            steps.append(Step("merge", value=value, why="re-split for the stream's filegroup" if value in resplit
                              else "no partition needs this boundary any more"))
            sim.merge(value)
        for value in sorted((needed - set(sim.boundaries))):
            s = uppers.get(value)
            fg = s.filegroup if s else EDGE_FILEGROUP
            steps.append(Step("split", value=value, filegroup=fg,
                              why=f"closes stream {s.stream}'s partition" if s else
                              "closes the empty partition below a stream"))
            sim.split(value, fg)
        plan.steps += steps
    except RowsWouldMove as exc:
        plan.problems.append(f"{where}: {exc}. Switchyard splits and merges empty partitions only (metadata only); "
                             f"empty that partition first or give the batch ranges that fit the table's partitions")
        return plan

    for s in streams:
        i = sim.index_of(s.lower)
        lower = sim.boundaries[i - 1] if i > 0 else None
        upper = sim.boundaries[i] if i < len(sim.boundaries) else None
        if lower != key.before(s.lower) or upper != s.upper or sim.rows[i]:
            plan.problems.append(f"{where}: stream {s.stream} would not get a partition of its own "
                                 f"({keys_text(key.before(s.lower), s.upper, key)})")
            continue
        plan.placement[s.stream] = (sim.filegroups[i], sim.compression[i])
        plan.steps.append(Step("switch_in", value=s.upper, stream=s, filegroup=sim.filegroups[i],
                               compression=sim.compression[i]))
        if sim.filegroups[i] != s.filegroup:
            plan.notes.append(f"{where}: stream {s.stream} loads on filegroup {sim.filegroups[i]}, its partition's "
                              f"(the boundary above it is kept), not on {s.filegroup}")
        sim.rows[i] = s.rows or 1    # taken from here on
        sim.batches[i] = batch
    if plan.problems:
        return plan
    for end, i in (("first", 0), ("last", len(sim.rows) - 1)):
        if sim.rows[i]:
            plan.notes.append(f"{where}: its {end} partition holds rows (made so by hand): a batch beyond it "
                              f"would need a SPLIT that moves rows and is refused")
    if shared_with and plan.reshapes:
        plan.problems.append(
            f"{where}: its partition function {function} is used by {', '.join(shared_with)} too: ALTER PARTITION "
            f"FUNCTION repartitions every table and index on it in one transaction, so this batch's SPLIT and MERGE "
            f"would change them as well. Give the table a function and scheme of its own (CREATE PARTITION FUNCTION "
            f"and SCHEME, then rebuild its clustered index ON the new scheme WITH (DROP_EXISTING = ON): this moves "
            f"its rows once), or load a batch whose ranges equal the table's partitions")
        return plan
    plan.final = sim
    n_in = len(streams)
    if mode == "replace":
        plan.notes.append(f"{where}: replace mode: its {len(give_way)} filled partitions give way to this batch's "
                          f"{n_in} once all {n_in} are validated; until then readers see the table as it is")
    else:
        if give_way:
            plan.notes.append(f"{where}: append mode: batch {batch} is in the table already ({len(give_way)} "
                              f"partitions); they give way to this run's {n_in}")
        plan.notes.append(f"{where}: append mode: batch {batch} adds {n_in} partitions "
                          f"({keys_text(key.before(streams[0].lower), streams[-1].upper, key)})")
    merges = sum(s.kind == "merge" for s in plan.steps)
    splits = sum(s.kind == "split" for s in plan.steps)
    if merges or splits:
        plan.notes.append(f"{where}: the commit merges {merges} and splits {splits} boundaries of {function or 'its function'}, "
                          f"all in empty partitions (metadata only)")
    return plan


def _reshaped(sim: Layout, needed: set, uppers: dict, resplit: set) -> Layout | None:
    """The layout after the merges and splits (None if one would move rows)."""
    trial = sim.copy()
    try:
        for value in sorted((set(trial.boundaries) - needed) | resplit):
            trial.merge(value)
        for value in sorted(needed - set(trial.boundaries)):
            s = uppers.get(value)
            trial.split(value, s.filegroup if s else EDGE_FILEGROUP)
    except RowsWouldMove:
        return None
    return trial


def _overlaps(s: Incoming, p: Partition) -> bool:
    """The stream's keys [lower, upper] and the partition's (p.lower, p.upper] share a key."""
    return (p.lower is None or s.upper > p.lower) and (p.upper is None or s.lower <= p.upper)


def _inside(p: Partition, key: KeyType) -> Any:
    """A key in the partition, for $PARTITION: its upper boundary, or the key above the last boundary."""
    if p.upper is not None:
        return p.upper
    return key.after(p.lower) if p.lower is not None else None


def _retention(partitions: list[Partition], streams: Sequence[Incoming], batch: str, key: KeyType,
               keep: int | None, keep_days: int | None) -> tuple[list[Partition], str]:
    """The filled partitions that leave once the batch is in (the shared rule of
    switchyard.core.preflight.retention), on half-open ranges [lower, upper + one unit)."""
    from switchyard.core.preflight import Partition as Half
    from switchyard.core.spec import NEUTRAL, Column, Table
    halves: dict[Half, Partition] = {}
    after = []
    for p in partitions:
        if p.rows <= 0:
            continue
        half = Half(name=str(p.number), lower=key.after(p.lower) if p.lower is not None else None,
                    upper=key.after(p.upper) if p.upper is not None else None, batch=p.batch)
        halves[half] = p
        after.append(half)
    after += [Half(name=f"stream {s.stream}", lower=s.lower, upper=key.after(s.upper), batch=batch) for s in streams]
    # The retention rule reads only the table's mode, keep and keep_days, and the partitions' bounds.
    table = Table(name="t", columns=(Column("k", {NEUTRAL: "bigint"}),), key="k", mode="append", keep=keep,
                  keep_days=keep_days)
    from switchyard.core.preflight import retention
    gone, why = retention(table, after)
    return [halves[h] if h in halves else Partition(number=0, lower=None, upper=None, filegroup="", rows=0, batch=batch)
            for h in gone], why


def compression_of(text: str | None) -> str:
    value = (text or "NONE").upper()
    if value not in _COMPRESSIONS:
        raise ValueError(f"data compression {value!r}: Switchyard stages NONE, ROW or PAGE only")
    return value


__all__ = ["EDGE_FILEGROUP", "Incoming", "Layout", "Partition", "RowsWouldMove", "Step", "WindowPlan",
           "keys_text", "object_name", "plan_window", "show_key"]
