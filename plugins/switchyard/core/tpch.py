"""TPC-H key ranges of a stream, known without generating any data.

Two producers split a table into N streams:

* dbgen (`-C N -S k`): stream k holds generator rows (k-1)*floor(R/N)+1 .. k*floor(R/N),
  the last stream also the remainder.
* tpchgen-cli (`--parts N --part k`): the same rule applied to N*C internal chunks, where
  C is the number of ~15 MiB chunks one part is cut into for parallel generation
  (C = floor(floor(R'/N) * avg_row_bytes / 15 MiB) + 1, R' the table's estimated rows).
  Stream k is chunks (k-1)*C+1 .. k*C. Because C is computed per table, lineitem's
  streams (C from 4 rows per order) can end a few orders before the orders streams do.

Generator row i (1-based) has key i, except orders and lineitem, whose keys are sparse:
8 of every 32 keys are used (1-7, 32-39, 64-71, ...), key(i) = (i >> 3 << 5) + (i & 7).
partsupp yields 4 rows per part; lineitem 1 to 7 rows per order (so its row count is
known only from the data).
"""
from __future__ import annotations

from dataclasses import dataclass

# Rows of each table's generator at scale 1 (for lineitem: orders; for partsupp: parts).
SCALE_BASE = {
    "supplier": 10_000,
    "customer": 150_000,
    "part": 200_000,
    "partsupp": 200_000,
    "orders": 1_500_000,
    "lineitem": 1_500_000,
}
# tpchgen-cli's estimate of a row's size in tbl format, used to size its chunks.
_AVG_ROW_BYTES = {"part": 115, "supplier": 140, "partsupp": 148, "customer": 160,
                  "orders": 114, "lineitem": 128}
_CHUNK_TARGET_BYTES = 15 * 1024 * 1024
_ROWS_PER_GENERATOR_ROW = {"partsupp": 4}
UNSPLIT = {"nation": 25, "region": 5}
PRODUCERS = ("tpchgen-cli", "dbgen")


@dataclass(frozen=True)
class StreamKeys:
    """What the producer puts in one stream file of one table."""
    key_min: int | None       # None when the stream is empty
    key_max: int | None
    rows: int | None          # None when only the data can tell (lineitem)


def generator_rows(table: str, scale: float) -> int:
    # Same truncating float product as the generators use.
    return int(SCALE_BASE[table] * scale)


def sparse_key(index: int) -> int:
    return ((index >> 3) << 5) + (index & 7)


def _key(table: str, index: int) -> int:
    return sparse_key(index) if table in ("orders", "lineitem") else index


def chunks_per_stream(table: str, scale: float, streams: int, producer: str = "tpchgen-cli") -> int:
    if producer == "dbgen":
        return 1
    if producer != "tpchgen-cli":
        raise ValueError(f"unknown producer {producer!r}; known: {', '.join(PRODUCERS)}")
    estimated_rows = generator_rows(table, scale) * (4 if table == "lineitem" else 1)
    per_stream = estimated_rows // streams
    return per_stream * _AVG_ROW_BYTES[table] // _CHUNK_TARGET_BYTES + 1


def index_range(table: str, scale: float, streams: int, stream: int,
                producer: str = "tpchgen-cli") -> tuple[int, int]:
    """1-based generator rows [first, last] of a stream; first > last when it is empty."""
    if not 1 <= stream <= streams:
        raise ValueError(f"stream {stream} is outside 1..{streams}")
    chunks = chunks_per_stream(table, scale, streams, producer)
    total = generator_rows(table, scale)
    per_chunk = total // (streams * chunks)
    start = per_chunk * (stream - 1) * chunks
    end = total if stream == streams else per_chunk * stream * chunks
    return start + 1, end


def stream_keys(table: str, scale: float, streams: int, stream: int,
                producer: str = "tpchgen-cli") -> StreamKeys:
    if table in UNSPLIT:
        # nation and region are tiny and come out as one file whatever the stream count.
        n = UNSPLIT[table]
        return StreamKeys(0, n - 1, n) if stream == 1 else StreamKeys(None, None, 0)
    first, last = index_range(table, scale, streams, stream, producer)
    if first > last:
        return StreamKeys(None, None, 0)
    count = last - first + 1
    rows = None if table == "lineitem" else count * _ROWS_PER_GENERATOR_ROW.get(table, 1)
    return StreamKeys(_key(table, first), _key(table, last), rows)
