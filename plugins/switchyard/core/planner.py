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
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable, Mapping

from switchyard.core import tpch
from switchyard.core.spec import LoadSpec, SpecError, Table


class PlanError(ValueError):
    """The key ranges cannot be laid out as partitions."""


@dataclass(frozen=True)
class StreamPlan:
    table: str
    stream: int
    file: str                   # relative to the batch folder
    key_min: int | None         # None: an empty stream
    key_max: int | None
    rows: int | None            # expected rows; None when only the data can tell
    lower: int | None           # inclusive lower bound of the stream's partition (its smallest key)
    upper: int | None           # inclusive upper bound (the RANGE LEFT boundary value)
    partition_number: int | None  # 1-based position among the table's partitions
    staging_table: str
    partition_table: str        # the name a switched-in partition takes (PostgreSQL)
    filegroup: str
    partitioned: bool = True

    @property
    def empty(self) -> bool:
        return self.key_min is None

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
    def boundaries(self) -> list[int]:
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


def _table_plan(spec: LoadSpec, table: Table, ranges: Mapping[int, tuple[int | None, int | None, int | None]]
                ) -> TablePlan:
    plans = []
    previous_upper: int | None = None
    number = 0
    for stream in sorted(ranges):
        key_min, key_max, rows = ranges[stream]
        lower = upper = part_no = None
        if key_min is not None:
            if key_max is None or key_max < key_min:
                raise PlanError(f"{table.name} stream {stream}: key range {key_min}..{key_max} is empty or reversed")
            if table.partitioned:
                if previous_upper is not None and key_min <= previous_upper:
                    raise PlanError(
                        f"{table.name} stream {stream}: keys start at {key_min}, not above the previous "
                        f"stream's last key {previous_upper}; each stream must hold one increasing key range")
                lower, upper = key_min, key_max
                previous_upper = key_max
                number += 1
                part_no = number
        partition_table = (f"{table.name}_{lower}_{upper}" if table.partitioned and lower is not None
                           else table.name)
        plans.append(StreamPlan(
            table=table.name, stream=stream, file=spec.file_for(table.name, stream),
            key_min=key_min, key_max=key_max, rows=rows, lower=lower, upper=upper,
            partition_number=part_no, staging_table=group_id(table.name, stream),
            partition_table=partition_table, filegroup=f"fg{stream}", partitioned=table.partitioned))
    return TablePlan(table=table, streams=tuple(plans))


def _select(spec: LoadSpec, tables: Iterable[str] | None) -> list[Table]:
    if not tables:
        return list(spec.tables)
    return [spec.table(name) for name in tables]


def plan_tpch(spec: LoadSpec, scale: float, streams: int, tables: Iterable[str] | None = None,
              producer: str = "tpchgen-cli") -> LoadPlan:
    """Plan a TPC-H batch from the generator's rules alone."""
    if streams < 1:
        raise PlanError("streams must be at least 1")
    if scale <= 0:
        raise PlanError("scale must be positive")
    plans = []
    for table in _select(spec, tables):
        ranges = {}
        for k in streams_of(table, streams):
            keys = tpch.stream_keys(table.name, scale, streams, k, producer)
            ranges[k] = (keys.key_min, keys.key_max, keys.rows)
        plans.append(_table_plan(spec, table, ranges))
    return LoadPlan(spec=spec, streams=streams, tables=tuple(plans))


def plan_batch(spec: LoadSpec, manifest: "Manifest", tables: Iterable[str] | None = None) -> LoadPlan:  # noqa: F821
    """Plan a batch from its manifest: bounds from the key ranges the producer recorded."""
    plans = []
    for table in _select(spec, tables):
        ranges = {}
        for k in streams_of(table, manifest.streams):
            entry = manifest.entry(table.name, k)
            ranges[k] = (entry.key_min, entry.key_max, entry.rows)
        plans.append(_table_plan(spec, table, ranges))
    return LoadPlan(spec=spec, streams=manifest.streams, tables=tuple(plans))
