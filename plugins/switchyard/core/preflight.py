"""Pre-flight: a batch's key ranges against what the target table already holds, before any load.

Pure Python, no database: a target adapter reads the table's partitions (bounds, and the
batch each one was recorded to) and hands them here; what comes back says what the table's
commit will do (which partitions the batch replaces, which retention takes out) or, when the
mode does not allow the batch, every problem with what differs and what to do.

The modes (a table's `mode` in the spec):
* replace: the batch becomes the whole table; every partition the table has gives way, whatever
  its bounds. Nothing about the ranges can refuse it.
* append: the batch adds its own partitions. Partitions of the same batch (an earlier run of
  it) give way; a partition of another batch (or of none recorded) that overlaps the batch's
  ranges refuses the batch, naming both. Retention `keep: N` keeps the N newest batches, newest
  by key (a sliding window over an increasing key: a backfilled older batch is older); a batch
  that would fall out of the window as it goes in is refused. Retention `keep_days: D` (a date
  or timestamp key) keeps the partitions holding a key within D days of the table's newest
  key; the older ones leave.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Iterable

from switchyard.core import keys
from switchyard.core.planner import StreamPlan
from switchyard.core.spec import Table


@dataclass(frozen=True)
class Partition:
    """A partition the target table has now: half-open bounds [lower, upper) as the server
    holds them (None: MINVALUE / MAXVALUE, or a DEFAULT partition), and its recorded batch."""
    name: str
    lower: Any
    upper: Any
    batch: str | None = None
    schema: str = ""
    default: bool = False

    def describe(self, kind: str = "integer") -> str:
        return f"partition {self.name} ({_keys(self.lower, self.upper, kind)})"


@dataclass
class TableCheck:
    table: str
    mode: str
    batch: str
    exists: bool
    remove: list[Partition] = field(default_factory=list)   # the commit replaces these
    retire: list[Partition] = field(default_factory=list)   # retention takes these out
    retire_batches: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _keys(lower: Any, upper: Any, kind: str = "integer") -> str:
    """`keys 1..20000` for the half-open [1, 20001) of an integer key (and likewise for dates)."""
    if lower is None or upper is None:
        return (f"keys from {'MINVALUE' if lower is None else keys.to_json(lower)} to before "
                f"{'MAXVALUE' if upper is None else keys.to_json(upper)}")
    if kind == "timestamp":
        return f"keys from {keys.to_json(lower)} to before {keys.to_json(upper)}"
    return f"keys {keys.to_json(lower)}..{keys.to_json(keys.before(upper))}"


def half_open(stream: StreamPlan, key_type: str | None = None) -> tuple[Any, Any]:
    """A stream's partition as [lower, upper + one unit): the planner's bounds are inclusive."""
    return stream.typed("lower"), keys.after(stream.typed("upper"), key_type)


def overlaps(a: tuple[Any, Any], b: tuple[Any, Any]) -> bool:
    """Two half-open ranges share a key; None is unbounded."""
    (a_lo, a_hi), (b_lo, b_hi) = a, b
    below = a_hi is not None and b_lo is not None and a_hi <= b_lo
    above = b_hi is not None and a_lo is not None and b_hi <= a_lo
    return not (below or above)


def batch_order(partitions: Iterable[Partition]) -> list[str]:
    """The batches recorded in `partitions`, oldest first: by their smallest key."""
    first: dict[str, Any] = {}
    for p in partitions:
        if p.batch is None or p.lower is None:
            continue
        if p.batch not in first or p.lower < first[p.batch]:
            first[p.batch] = p.lower
    return sorted(first, key=lambda b: (first[b], b))


def check_table(table: Table, streams: list[StreamPlan], batch: str, existing: list[Partition] | None,
                where: str, kind: str = "integer", key_type: str | None = None,
                holds_rows: bool = True) -> TableCheck:
    """What this batch's commit does to `table` (`where`: schema.table, for messages), or why not.

    `existing` is None when the target table does not exist yet (setup creates it); `key_type`
    is the key's SQL type (a timestamp(p) key's unit is 10^(6-p) microseconds); `holds_rows`,
    whether an unpartitioned table holds rows (asked only where its stream is empty)."""
    check = TableCheck(table=table.name, mode=table.mode, batch=batch, exists=existing is not None)
    loaded = [s for s in streams if not s.empty]
    if not table.partitioned:
        check.problems += emptied_whole(table, streams, where, holds_rows) if existing is not None else []
        check.notes.append(f"{where}: unpartitioned, replaced whole by its one stream")
        return check
    if existing is None:
        check.notes.append(f"{where}: new table; this batch brings {len(loaded)} partitions")
        return check
    if not loaded:
        problems, notes = empty_in_batch(table, batch, sum(p.batch == batch for p in existing), where)
        check.problems += problems
        check.notes += notes
        return check
    defaults = [p for p in existing if p.default]
    if defaults:
        check.problems.append(
            f"{where} has a DEFAULT partition ({', '.join(p.name for p in defaults)}): every partition "
            f"attached to the table would have to be checked against its rows, and its rows belong to no "
            f"batch. Move its rows into range partitions or out of the table, then "
            f"ALTER TABLE {where} DETACH PARTITION <name>")
        return check
    ranges = {s.stream: half_open(s, key_type) for s in loaded}
    if table.mode == "replace":
        problems, notes = replacing_batches(table, [p.batch for p in existing], batch, where)
        check.problems += problems
        check.notes += notes
        if problems:
            return check
        check.remove = list(existing)
        batches = sorted({p.batch or "(none recorded)" for p in existing})
        check.notes.append(
            f"{where}: replace mode: its {len(existing)} partitions"
            + (f" (batches {', '.join(batches)})" if existing else "")
            + f" give way to this batch's {len(loaded)} once all {len(loaded)} are validated; until then "
              f"readers see the table as it is")
        return check

    # append
    own = [p for p in existing if p.batch == batch]
    others = [p for p in existing if p.batch != batch]
    for s in loaded:
        for p in others:
            if overlaps(ranges[s.stream], (p.lower, p.upper)):
                owner = f"batch {p.batch}" if p.batch else "no batch (recorded to none: loaded by hand or before append mode)"
                check.problems.append(
                    f"{where}: batch {batch} overlaps {owner}: its stream {s.stream} "
                    f"({_keys(*ranges[s.stream], kind)}) and {p.describe(kind)} of {owner}. In append mode every "
                    f"batch brings its own key ranges. To load batch {p.batch or p.name} again, run that batch; "
                    f"to have this batch take its place, {_retire_first(where, p, others)}, or declare the table "
                    f"mode: replace")
    if check.problems:
        return check
    check.remove = own
    if own:
        check.notes.append(f"{where}: append mode: batch {batch} is in the table already "
                           f"({len(own)} partitions); they give way to this run's {len(loaded)}")
    unrecorded = [p.name for p in others if p.batch is None]
    if unrecorded:
        check.notes.append(f"{where}: partitions recorded to no batch stay and are never retired: "
                           f"{', '.join(unrecorded)}")
    after = others + [Partition(name=s.partition_table, lower=ranges[s.stream][0], upper=ranges[s.stream][1],
                                batch=batch) for s in loaded]
    retired, why = retention(table, after)
    mine = [p for p in retired if p.batch == batch]
    if mine:
        check.problems.append(retired_on_arrival(where, batch, why, len(mine), len(loaded),
                                                 [_keys(p.lower, p.upper, kind) for p in mine]))
        return check
    if retired:
        check.retire = retired
        check.retire_batches = sorted({p.batch for p in retired if p.batch})
        # Said before any load, and true only once the batch is in: the commit retires them.
        check.notes.append(
            f"{where}: when batch {batch} goes in, and not before: {why} ({len(retired)} partitions, "
            f"{'moved to the archive schema' if table.retire == 'archive' else 'dropped'})")
    check.notes.append(f"{where}: append mode: batch {batch} adds {len(loaded)} partitions "
                       f"({_keys(ranges[loaded[0].stream][0], ranges[loaded[-1].stream][1], kind)})")
    return check


def replacing_batches(table: Table, held: Iterable[str | None], batch: str, where: str) -> tuple[list[str], list[str]]:
    """(problems, notes) for a replace table holding several batches (`held`: the batch each of
    its partitions holds): a table in replace mode holds one batch after each run, so several are
    an append table's history, and the spec's mode changed (a `mode: append` line deleted). Its
    batch would replace all of them: a difference between the spec and the table that only
    `on_spec_change: sync` settles, as the other differences that lose what the table holds."""
    others = sorted({b for b in held if b and b != batch})
    if len(others) < 2:
        return [], []
    listed = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    if table.on_spec_change == "sync":
        return [], [f"{where}: holds {len(others)} batches ({listed}); in replace mode this batch replaces all of "
                    f"them (on_spec_change: sync)"]
    return [f"{where}: holds {len(others)} batches ({listed}), as a table in append mode does; the spec says "
            f"mode: replace, so this batch would replace all of them. If the table's mode changed on purpose, set "
            f"on_spec_change: sync on it for this run; otherwise put mode: append back in the spec"], []


def no_longer_in_the_spec(where: str, batches: Iterable[str], spec_source: str) -> str:
    """The note for a table Switchyard loaded (`batches`: those it holds) that the spec no longer
    has (renamed, or taken out): no run loads it any more, and readers keep reading its rows."""
    held = sorted(b for b in batches if b)
    last = f"its newest batch {max(held)}" if held else "rows"
    return (f"{where}: loaded by Switchyard ({last}) but no table of the spec {spec_source} any more: no run loads it "
            f"now, and its readers keep its rows as they are; drop it, or move its rows to the table that took "
            f"its place, or give the spec the table back")


def empty_in_batch(table: Table, batch: str, own: int, where: str) -> tuple[list[str], list[str]]:
    """(problems, notes) for an existing partitioned table none of whose streams has a row in
    this batch (`own`: the partitions the table holds of this batch already). Refused, as an
    incomplete batch, unless the spec allows it (`allow_empty`, append mode): the batch then adds
    nothing. A batch in the table already, delivered again without rows of it, is refused too:
    its partitions would stay, and the table would hold rows the batch no longer has."""
    if table.mode == "append" and table.allow_empty:
        if own:
            return [f"{where}: batch {batch} is in the table already ({own} partitions), and this delivery of it "
                    f"has no rows of the table: the run would leave the earlier rows in place. Take the batch's "
                    f"partitions out first (ALTER TABLE {where} DETACH PARTITION ..., or SWITCH them out), or "
                    f"check the producer's manifest"], []
        return [], [f"{where}: every stream of the table is empty in batch {batch}: it adds nothing "
                    f"(allow_empty: true)"]
    advice = ("leave the table out of this run (the tables param)" if table.mode == "replace" else
              "declare allow_empty: true on the table, or leave it out of this run (the tables param)")
    return [f"{where}: every stream of the table is empty in batch {batch}; in {table.mode} mode that would "
            + ("empty the table" if table.mode == "replace" else "add nothing")
            + f". If that is meant, {advice}; otherwise the batch is incomplete: check the producer's manifest"], []


def _retire_first(where: str, p: Partition, others: list[Partition]) -> str:
    """How to take partition `p`'s batch out of the way: every partition of it, as a batch left
    with some of its partitions would be half in the table (a partition recorded to none alone)."""
    names = [q.name for q in others if q.batch == p.batch] if p.batch else [p.name]
    shown = "; ".join(f"ALTER TABLE {where} DETACH PARTITION {n}" for n in names[:4])
    more = f"; and the {len(names) - 4} more of it" if len(names) > 4 else ""
    what = f"every partition of batch {p.batch}" if p.batch and len(names) > 1 else "the partition"
    return f"retire {what} first ({shown}{more})"


def batch_time(name: str, batch_format: str | None = None) -> datetime | None:
    """A batch's name read as the date it names (`batch_format`, the DAG's SWITCHYARD_BATCH_FORMAT:
    the names a schedule's runs and a backfill's load; None: the settings in effect); None for a
    name of another form (a batch triggered by name)."""
    if batch_format is None:
        from switchyard.settings import get
        batch_format = get().batch_format
    try:
        return datetime.strptime(name, batch_format)
    except ValueError:
        return None


def newer_in_place(table: Table, batch: str, in_place: Iterable[str], where: str,
                   replace_newer: bool = False, batch_format: str | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes) for a batch replacing a table that holds a newer batch (by the dates
    their names give): a backfill or a rerun of an older date would put the table back to that
    date's rows, behind the newer batch the other tables keep. Refused unless the run asks for
    it (`replace_newer`); an append table's older batch adds its own partitions, rolling nothing back."""
    if table.partitioned and table.mode != "replace":
        return [], []
    when = batch_time(batch, batch_format)
    newer = [b for b in set(in_place)
             if b and when is not None and (t := batch_time(b, batch_format)) is not None and t > when]
    if not newer:
        return [], []
    newest = max(newer, key=lambda b: batch_time(b, batch_format))
    if replace_newer:
        return [], [f"{where}: holds batch {newest}, newer than this batch {batch}; put back to batch {batch}, "
                    f"as the run asks (replace_newer)"]
    return [f"{where}: holds batch {newest}, newer than this batch {batch}: in replace mode loading it would "
            f"put the table back to batch {batch}'s rows. To load the batch's other tables, leave this one out "
            f"(the tables param); to put it back on purpose, run with replace_newer: true"], []


def emptied_whole(table: Table, streams: list[StreamPlan], where: str, holds_rows: bool = True) -> list[str]:
    """An existing unpartitioned table that holds rows, whose one stream has none: loading it
    would empty the table, which a producer's empty file by mistake must not do in silence. A
    table emptied on purpose (the refusal's way on) takes the empty batch: it stays empty, and the
    batch is recorded as the one it holds."""
    if holds_rows and any(s.rows == 0 for s in streams):
        return [f"{where}: its one stream is empty in this batch (0 rows); loading it would empty the table. If "
                f"that is meant, truncate the table yourself; otherwise leave it out of this run (the tables "
                f"param) or check the producer's manifest"]
    return []


def retired_on_arrival(where: str, batch: str, why: str, retired: int, loaded: int,
                       keys_retired: list[str] = ()) -> str:
    """The refusal of a batch whose own partitions, `retired` of its `loaded`, the table's
    retention would take out as it goes in: all of them (its keys are older than the window),
    or some (`keys_retired`, their key ranges): loading it would drop those at once."""
    if retired >= loaded:
        said = "would be retired as it goes in ({why}): its keys are older than the window the table keeps"
    else:
        said = (f"would be partly retired as it goes in ({{why}}): {retired} of its {loaded} partitions"
                + (f" ({', '.join(keys_retired)})" if keys_retired else "")
                + " hold only keys older than the window the table keeps, the others are within it, and "
                  "none of it is loaded")
    return (f"{where}: batch {batch} " + said.format(why=why)
            + ". Raise keep or keep_days, or retire the newer batches first")


def retention(table: Table, partitions: list[Partition]) -> tuple[list[Partition], str]:
    """The partitions an append table's retention takes out once a batch is in, and why.

    `partitions` are the table's partitions after the batch went in, with their batches; only
    partitions recorded to a batch are ever retired. `keep: N` keeps the N newest batches (by
    their smallest key); `keep_days: D` keeps the partitions with a key within D days of the
    newest key (a partition whose every key is older goes)."""
    if table.mode != "append":
        return [], ""
    retired: list[Partition] = []
    why = []
    if table.keep is not None:
        order = batch_order(partitions)
        if len(order) > table.keep:
            old = order[:len(order) - table.keep]
            retired += [p for p in partitions if p.batch in old]
            why.append(f"keep: {table.keep} batches; retired: {', '.join(old)}")
    if table.keep_days is not None:
        uppers = [p.upper for p in partitions if isinstance(p.upper, (date, datetime))]
        if uppers:
            newest = max(uppers)   # exclusive: one unit above the newest key
            cutoff = newest - timedelta(days=table.keep_days)
            old = [p for p in partitions if p.batch is not None and p.upper is not None
                   and p.upper <= cutoff and p not in retired]
            if old:
                retired += old
                why.append(f"keep_days: {table.keep_days}; keys before {keys.to_json(cutoff)} retired "
                           f"({', '.join(sorted({p.batch for p in old}))})")
    return retired, "; ".join(why)


def parse_bound_value(text: str, kind: str) -> Any:
    """One value of a server's partition bound text (DateStyle ISO): `'20001'` -> 20001,
    `'2026-01-31'` -> a date; MINVALUE/MAXVALUE -> None."""
    value = text.strip()
    if value.upper() in ("MINVALUE", "MAXVALUE"):
        return None
    if value.startswith("'") and value.endswith("'"):
        value = value[1:-1].replace("''", "'")
    if kind == "integer":
        return int(value)
    return date.fromisoformat(value) if kind == "date" else datetime.fromisoformat(value)
