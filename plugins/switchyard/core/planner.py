"""The planner: from a spec and each stream's key range, everything a load needs to know.

Pure Python, no database. For every (table, stream) it gives the staging table, the
filegroup (tablespace), the partition bounds and the expected rows. Bounds follow the
record runs' RANGE LEFT layout: the boundary of stream k is its largest key. The
stream's staging table is checked against its own key range [smallest key, largest key],
which lies inside (boundary k-1, boundary k]; PostgreSQL partitions take exactly that
range, so one stream's bounds never depend on another stream's file (a bad manifest
entry fails its own group only).

Key ranges come either from the producer's rules (`plan_tpch`: no data needed, used to
plan and to print T-SQL ahead of time) or from a batch's manifest (`plan_batch`: what a
DAG run loads, since a producer may split a table at other keys than the rules say).

Keys are integers, dates or timestamps (`StreamPlan.key_kind`); the planner orders and
bounds streams with their parsed values (see keys.py) and writes them into the plan as
JSON values, because the plan travels through XCom as JSON.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import date
from typing import Iterable, Mapping, Sequence, TypeVar

from switchyard.core import tpch
from switchyard.core.keys import KeyValue, kind_of, parse_key, partition_name, to_json
from switchyard.core.spec import LoadSpec, SpecError, Table
from switchyard.settings import LOAD_ORDERS

K = TypeVar("K")


class PlanError(ValueError):
    """The key ranges cannot be laid out as partitions."""


@dataclass(frozen=True)
class StreamPlan:
    """What one (table, stream) group loads and where it goes; JSON-serialisable as it is.

    Key fields (`key_min`, `key_max`, `lower`, `upper`) hold JSON values of the key's kind
    (`key_kind`): an `int` for an integer key, an ISO-8601 string for a date key
    ("2026-01-31") or a timestamp key ("2026-01-31T23:59:59" or with up to 6 fractional
    digits, no time zone). `typed(name)` gives the Python value (int, datetime.date,
    datetime.datetime) to compare or to render, never the text: SQL literals come from the
    typed value through the adapter's `lit`. Bounds are inclusive: the stream's partition
    holds lower <= key <= upper (PostgreSQL writes it FROM (lower) TO (upper + one unit),
    SQL Server's RANGE LEFT function has upper as its boundary and the value one unit
    below lower as the boundary before it; see keys.after / keys.before).
    """
    table: str
    stream: int
    file: str                   # relative to the batch folder
    key_min: int | str | None   # the stream's smallest key (JSON value); None: an empty stream
    key_max: int | str | None   # its largest key
    rows: int | None            # expected rows; None when only the data can tell
    lower: int | str | None     # inclusive lower bound of the stream's partition (its smallest key)
    upper: int | str | None     # inclusive upper bound (the RANGE LEFT boundary value)
    partition_number: int | None  # 1-based position among the table's partitions
    staging_table: str
    partition_table: str        # the name a switched-in partition takes (PostgreSQL)
    filegroup: str
    partitioned: bool = True
    # The stream file's size: the manifest's, or an estimate when planned from rules; None
    # when unknown. Targets size their storage from it.
    bytes: int | None = None
    key_kind: str = "integer"   # integer | date | timestamp: how to read the key fields
    # The stream file's modification time (ns) where the run's plan checked it; None where the
    # plan did not see it (a source's file, a named pipe). Its load checks a file changed since
    # again (steps.check_again_if_changed).
    file_mtime_ns: int | None = None

    @property
    def empty(self) -> bool:
        """Nothing to load: the group skips. A partitioned table's stream with no rows (or, where
        the rows are not known, no key range); an unpartitioned table's one stream is the whole
        table and is always loaded (the pre-flight refuses emptying a table that has rows)."""
        if not self.partitioned:
            return False
        if self.rows is not None:
            return self.rows == 0
        return self.key_min is None

    def typed(self, name: str) -> KeyValue | None:
        """The key field `name` (key_min, key_max, lower, upper) as a Python value: int,
        datetime.date or datetime.datetime; None where the field is None."""
        if name not in ("key_min", "key_max", "lower", "upper"):
            raise AttributeError(f"{name!r} is not a key field of a stream plan")
        value = getattr(self, name)
        return None if value is None else parse_key(self.key_kind, value)

    @property
    def group_id(self) -> str:
        return group_id(self.table, self.stream)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TablePlan:
    table: Table
    streams: tuple[StreamPlan, ...]

    @property
    def boundaries(self) -> list[int | str]:
        """Each partition's inclusive upper bound, as JSON values (see StreamPlan)."""
        return [s.upper for s in self.streams if s.upper is not None]


@dataclass(frozen=True)
class LoadPlan:
    spec: LoadSpec
    streams: int
    tables: tuple[TablePlan, ...]

    def table(self, name: str) -> TablePlan:
        for t in self.tables:
            if t.table.name == name:
                return t
        raise SpecError(f"table {name!r} is not in this plan")

    def stream(self, table: str, stream: int) -> StreamPlan:
        for s in self.table(table).streams:
            if s.stream == stream:
                return s
        raise PlanError(f"{table} has no stream {stream} in this plan")

    def all_streams(self) -> Iterable[StreamPlan]:
        for t in self.tables:
            yield from t.streams

    def to_dict(self) -> dict:
        return {"spec": self.spec.name, "streams": self.streams,
                "groups": {s.group_id: s.to_dict() for s in self.all_streams()}}


def group_id(table: str, stream: int) -> str:
    """The task group id of one (table, stream): the record runs' staging name, e.g. orders_6."""
    return f"{table}_{stream}"


def streams_of(table: Table, streams: int) -> range:
    """Unpartitioned tables are loaded once, from stream 1."""
    return range(1, streams + 1) if table.partitioned else range(1, 2)


def load_priorities(sizes: Sequence[tuple[K, int]], order: str = "interleaved") -> dict[K, int]:
    """Priority weights (higher runs first) for the loads of one run, from each load's size
    (its table's spec `weight`); `sizes` in the order the groups were made.

    `biggest-first`: the size itself, so that the longest loads never start last.
    `interleaved`: the biggest remaining load, then the smallest remaining, and so on. The
    target runs one COPY per slot (the server-side slot guard) and the pool admits more loads
    than slots, so a load's task start-up overlaps another load's COPY, but only when that
    COPY lasts longer than a task's start (about half a second to a second). Biggest first
    leaves all the small loads for the end, where their COPYs are shorter than the start of
    the next task and the slots wait on Airflow; paired with the big ones, every small load
    starts while a big COPY runs. The big loads keep their order and still come first among
    themselves, so none is left for last."""
    if order not in LOAD_ORDERS:
        raise ValueError(f"load order {order!r}: one of {', '.join(LOAD_ORDERS)}")
    if order == "biggest-first":
        return {key: size for key, size in sizes}
    ranked = [key for _, _, key in sorted((-size, i, key) for i, (key, size) in enumerate(sizes))]
    sequence: list[K] = []
    front, back = 0, len(ranked) - 1
    while front <= back:
        sequence.append(ranked[front])
        front += 1
        if front <= back:
            sequence.append(ranked[back])
            back -= 1
    return {key: len(sequence) - position for position, key in enumerate(sequence)}


def _show(value: KeyValue | None) -> str:
    return str(to_json(value)) if value is not None else "None"


def _table_plan(spec: LoadSpec, table: Table,
                ranges: Mapping[int, tuple[KeyValue | None, KeyValue | None, int | None]],
                sizes: Mapping[int, int | None] | None = None) -> TablePlan:
    """`ranges`: per stream, (smallest key, largest key, rows) with keys as Python values
    of the table's key kind (int, datetime.date, datetime.datetime); `sizes`: per stream, the
    file's bytes where known."""
    kind = table.key_kind() or "integer"
    plans = []
    if not table.partitioned and table.key_kind() is None:
        # A lookup table keyed by text, or without a key: loaded whole, no key range to check.
        ranges = {k: (None, None, rows) for k, (_, _, rows) in ranges.items()}
    previous_upper: KeyValue | None = None
    number = 0
    for stream in sorted(ranges):
        key_min, key_max, rows = ranges[stream]
        lower = upper = part_no = None
        if table.partitioned and rows and key_min is None:
            raise PlanError(f"{table.name} stream {stream}: {rows} rows but no key range (key_min, key_max); a "
                            f"partitioned table's partitions are planned from its streams' key ranges")
        if table.partitioned and rows == 0 and key_min is not None:
            raise PlanError(f"{table.name} stream {stream}: 0 rows but a key range {_show(key_min)}..{_show(key_max)}; "
                            f"an empty stream has no keys (key_min and key_max null)")
        if key_min is not None:
            for value in (key_min, key_max):
                if value is not None and kind_of(value) != kind:
                    raise PlanError(f"{table.name} stream {stream}: key {_show(value)} is not of the key's "
                                    f"kind ({kind})")
            if key_max is None or key_max < key_min:
                raise PlanError(f"{table.name} stream {stream}: key range {_show(key_min)}..{_show(key_max)} "
                                f"is empty or reversed")
            if table.partitioned:
                if previous_upper is not None and key_min <= previous_upper:
                    raise PlanError(
                        f"{table.name} stream {stream}: keys start at {_show(key_min)}, not above the previous "
                        f"stream's last key {_show(previous_upper)}; each stream must hold one increasing "
                        f"key range")
                if kind != "integer" and (key_max if kind == "date" else key_max.date()) == date.max:
                    # A partition's range ends after its last key (PostgreSQL's exclusive TO, the
                    # pre-flight's overlap checks); Python's dates end on 9999-12-31.
                    raise PlanError(
                        f"{table.name} stream {stream} ({spec.file_for(table.name, stream)}): key "
                        f"{_show(key_max)} is on the last day a key holds here (9999-12-31), and a partition's "
                        f"range ends after its last key. Rows kept open with a 9999-12-31 placeholder need "
                        f"a table keyed by another column, or the placeholder before 9999-12-31")
                lower, upper = key_min, key_max
                previous_upper = key_max
                number += 1
                part_no = number
        partition_table = (partition_name(table.name, lower, upper) if table.partitioned and lower is not None
                           else table.name)
        plans.append(StreamPlan(
            table=table.name, stream=stream, file=spec.file_for(table.name, stream),
            key_min=to_json(key_min), key_max=to_json(key_max), rows=rows, lower=to_json(lower),
            upper=to_json(upper), partition_number=part_no, staging_table=group_id(table.name, stream),
            partition_table=partition_table, filegroup=f"fg{stream}", partitioned=table.partitioned,
            bytes=(sizes or {}).get(stream), key_kind=kind))
    return TablePlan(table=table, streams=tuple(plans))


def _select(spec: LoadSpec, tables: Iterable[str] | None) -> list[Table]:
    if not tables:
        return list(spec.tables)
    return [spec.table(name) for name in tables]


def _tpch_bytes(table: str, scale: float, streams: int, keys: "tpch.StreamKeys") -> int | None:
    """A stream file's size from the generator's own row-size estimate (no data at hand);
    lineitem's rows are about 4 per order."""
    per_row = tpch._AVG_ROW_BYTES.get(table)
    if per_row is None or keys.key_min is None:
        return None
    rows = keys.rows if keys.rows is not None else 4 * tpch.generator_rows(table, scale) // streams
    return rows * per_row


def plan_tpch(spec: LoadSpec, scale: float, streams: int, tables: Iterable[str] | None = None,
              producer: str = "tpchgen-cli") -> LoadPlan:
    """Plan a TPC-H batch from the generator's rules alone."""
    if streams < 1:
        raise PlanError("streams must be at least 1")
    if scale <= 0:
        raise PlanError("scale must be positive")
    plans = []
    for table in _select(spec, tables):
        ranges, sizes = {}, {}
        for k in streams_of(table, streams):
            keys = tpch.stream_keys(table.name, scale, streams, k, producer)
            ranges[k] = (keys.key_min, keys.key_max, keys.rows)
            sizes[k] = _tpch_bytes(table.name, scale, streams, keys)
        plans.append(_table_plan(spec, table, ranges, sizes))
    return LoadPlan(spec=spec, streams=streams, tables=tuple(plans))


def plan_batch(spec: LoadSpec, manifest: "Manifest", tables: Iterable[str] | None = None) -> LoadPlan:  # noqa: F821
    """Plan a batch from its manifest: bounds from the key ranges the producer recorded, and each
    table's streams as the manifest lists them (1 for a small table, 16 for lineitem: the
    batch's shape is the producer's). Every table's problems are found before one PlanError
    lists them all."""
    plans, problems = [], []
    for table in _select(spec, tables):
        ranges, sizes = {}, {}
        listed = manifest.streams_of(table.name)
        if not listed:
            problems.append(f"no entry for table {table.name} (the run loads it: list its files, or leave the "
                            f"table out of the run's tables)")
            continue
        if not table.partitioned and listed != [1]:
            problems.append(f"{table.name} is unpartitioned and loads from one stream, the manifest lists "
                            f"{len(listed)}")
            continue
        for k in listed:
            entry = manifest.entry(table.name, k)
            ranges[k] = (entry.key_min, entry.key_max, entry.rows)
            sizes[k] = entry.bytes
        try:
            plans.append(_table_plan(spec, table, ranges, sizes))
        except PlanError as exc:
            problems.append(str(exc))
    if problems:
        raise PlanError(f"{manifest.path}: " + ("" if len(problems) == 1 else "\n- ") + "\n- ".join(problems))
    return LoadPlan(spec=spec, streams=manifest.streams, tables=tuple(plans))
