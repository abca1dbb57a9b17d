"""A batch: one folder of stream files plus the producer's `manifest.json`.

The manifest is the producer's word on what it wrote (per table and stream: file, bytes,
rows, smallest and largest key). Switchyard plans partitions from it and validates the
loaded data against it. Every path is resolved inside the configured data root, so a
batch name from a UI form cannot point a load (and, on SQL Server, BULK INSERT with the
server's rights) at another file.
"""
from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterable

from switchyard.core.keys import KeyValue, KeyValueError, parse_key, to_json
from switchyard.core.spec import FileFormat, LoadSpec

MANIFEST = "manifest.json"
MANIFEST_FORMAT = "switchyard-manifest/1"
# A batch is named by a path of plain segments under the data root: "2026-11-21", "tpch/sf1-s8".
_BATCH_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class BatchError(ValueError):
    """The batch folder or its manifest is unusable; the message names the file."""


def data_root() -> Path:
    """Where batches live: $SWITCHYARD_DATA_ROOT, else data/ in the state folder (settings.py)."""
    from switchyard.settings import data_root
    return data_root()


def resolve_batch(name: str, root: Path | None = None) -> Path:
    """The batch folder for a batch name, refusing anything that leaves the data root."""
    root = (root or data_root()).resolve()
    if not isinstance(name, str) or not name.strip():
        raise BatchError("batch name is empty")
    segments = name.strip().rstrip("/").split("/")  # a leading "/" leaves an empty segment: refused
    for seg in segments:
        if not _BATCH_SEGMENT.match(seg):
            raise BatchError(f"batch {name!r}: segment {seg!r} is not allowed (letters, digits, '.', '_', '-'; "
                             f"no '..', no absolute paths)")
    path = root.joinpath(*segments).resolve()
    if not path.is_relative_to(root):
        raise BatchError(f"batch {name!r} resolves to {path}, outside the data root {root}")
    return path


def resolve_file(batch_dir: Path, relative: str) -> Path:
    """A stream file inside the batch folder; symlinks that escape the folder are refused."""
    path = (batch_dir / relative).resolve()
    if not path.is_relative_to(batch_dir.resolve()):
        raise BatchError(f"{batch_dir / relative}: resolves to {path}, outside the batch folder {batch_dir}")
    return path


@dataclass(frozen=True)
class ManifestEntry:
    table: str
    stream: int
    file: str
    bytes: int
    rows: int
    # The stream's smallest and largest key, parsed (see keys.py): int, datetime.date or
    # datetime.datetime as the table's key kind says; None for an empty stream. In the file
    # an integer is a JSON number, a date or timestamp an ISO-8601 string.
    key_min: KeyValue | None
    key_max: KeyValue | None


@dataclass(frozen=True)
class Manifest:
    spec: str
    streams: int
    entries: tuple[ManifestEntry, ...]
    scale: float | None = None
    path: str = ""

    def streams_of(self, table: str) -> list[int]:
        """The streams the manifest lists for a table, in order: the batch's shape for it (a
        small table may come in 1 stream, a large one in 16)."""
        return sorted(e.stream for e in self.entries if e.table == table)

    def entry(self, table: str, stream: int) -> ManifestEntry:
        for e in self.entries:
            if e.table == table and e.stream == stream:
                return e
        raise BatchError(f"{self.path}: no entry for table {table!r} stream {stream}")

    def to_json(self) -> dict[str, Any]:
        return {"format": MANIFEST_FORMAT, "spec": self.spec, "streams": self.streams, "scale": self.scale,
                "files": [{**asdict(e), "key_min": to_json(e.key_min), "key_max": to_json(e.key_max)}
                          for e in self.entries]}


def _int(value: Any, where: str, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BatchError(f"{where}: expected an integer, found {value!r}")
    return value


def _key(value: Any, kind: str, where: str) -> KeyValue | None:
    """A key_min / key_max of the manifest, strictly as the table's key kind (None: empty stream)."""
    if value is None:
        return None
    try:
        return parse_key(kind, value)
    except KeyValueError as exc:
        raise BatchError(f"{where}: {exc}") from None


def parse_manifest(raw: Any, path: str, spec: LoadSpec) -> Manifest:
    if not isinstance(raw, dict) or raw.get("format") != MANIFEST_FORMAT:
        raise BatchError(f"{path}: not a Switchyard manifest (expected \"format\": \"{MANIFEST_FORMAT}\")")
    streams = _int(raw.get("streams"), f"{path}: streams")
    if streams < 1:
        raise BatchError(f"{path}: streams must be at least 1")
    entries = []
    seen: dict[tuple[str, int], int] = {}
    files_seen: dict[str, int] = {}
    for i, item in enumerate(raw.get("files") or []):
        where = f"{path}: files[{i}]"
        if not isinstance(item, dict):
            raise BatchError(f"{where}: expected an object")
        table = item.get("table")
        if not isinstance(table, str) or table not in spec.table_names:
            raise BatchError(f"{where}: table {table!r} is not in spec {spec.name!r}")
        stream = _int(item.get("stream"), f"{where}.stream")
        if not 1 <= stream <= streams:
            raise BatchError(f"{where}: stream {stream} is outside 1..{streams}")
        file = item.get("file")
        if not isinstance(file, str) or not file or file.startswith("/") or ".." in file.split("/"):
            raise BatchError(f"{where}: file must be a path relative to the batch folder")
        if (table, stream) in seen:
            raise BatchError(f"{where}: duplicate entry for {table} stream {stream} (also files[{seen[(table, stream)]}])")
        if file in files_seen:
            raise BatchError(f"{where}: file {file} is listed twice (also files[{files_seen[file]}])")
        seen[(table, stream)] = i
        files_seen[file] = i
        # An unpartitioned table's key may be of any type; its range is then given as integers.
        kind = spec.table(table).key_kind("postgres") or "integer"
        entries.append(ManifestEntry(
            table=table, stream=stream, file=file,
            bytes=_int(item.get("bytes"), f"{where}.bytes"),
            rows=_int(item.get("rows"), f"{where}.rows"),
            key_min=_key(item.get("key_min"), kind, f"{where}.key_min ({table} stream {stream})"),
            key_max=_key(item.get("key_max"), kind, f"{where}.key_max ({table} stream {stream})")))
    for table in {e.table for e in entries}:
        listed = sorted(e.stream for e in entries if e.table == table)
        if listed != list(range(1, len(listed) + 1)):
            missing = sorted(set(range(1, max(listed) + 1)) - set(listed))
            raise BatchError(f"{path}: table {table} lists streams {', '.join(map(str, listed))}: streams are "
                             f"numbered 1..n without gaps (missing {', '.join(map(str, missing))})")
    scale = raw.get("scale")
    return Manifest(spec=str(raw.get("spec", spec.name)), streams=streams, entries=tuple(entries),
                    scale=float(scale) if isinstance(scale, (int, float)) else None, path=path)


def read_manifest(batch_dir: Path, spec: LoadSpec) -> Manifest:
    path = batch_dir / MANIFEST
    if not path.is_file():
        raise BatchError(f"{path}: manifest not found (is the batch complete?)")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BatchError(f"{path}: line {exc.lineno}, column {exc.colno}: invalid JSON: {exc.msg}") from exc
    return parse_manifest(raw, str(path), spec)


def write_manifest(batch_dir: Path, manifest: Manifest) -> Path:
    """Written last and atomically, so a reader never sees a half-written batch as complete."""
    path = batch_dir / MANIFEST
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(manifest.to_json(), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


_GZIP_MAGIC = b"\x1f\x8b"


def _open_counted(path: Path):
    """The file's bytes: a `.gz` file decompressed (Python's gzip), any other as it is; a
    plain-named file that is gzip-compressed is refused, as the loaders refuse it."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")
    with path.open("rb") as fh:
        if fh.read(2) == _GZIP_MAGIC:
            raise BatchError(f"{path}: the file is gzip-compressed but its name does not end in .gz")
    return path.open("rb")


def count_file(path: Path, fmt: FileFormat | str | None = None, key_index: int = 0, kind: str = "integer"
               ) -> tuple[int, int, KeyValue | None, KeyValue | None]:
    """(bytes, rows, first key, last key) of a stream file, read independently of any loader.

    Rows, not lines: the format's header lines are not counted, a `.gz` file is counted
    decompressed, and with quoting csv Python's csv module reads the records (a quoted field
    may hold line breaks). Keys are field `key_index` of the first and last record, read as
    the key's `kind` (integer, date, timestamp; None when the field is not one). `bytes` is
    the file's size on disk. A str `fmt` is a delimiter (the default format otherwise).
    """
    if not isinstance(fmt, FileFormat):
        fmt = FileFormat(delimiter=fmt) if isinstance(fmt, str) else FileFormat()
    size = path.stat().st_size
    with _open_counted(path) as fh:
        if fmt.quoting == "csv":
            rows, first, last = _csv_records(fh, fmt)
        else:
            rows, first, last = _plain_lines(fh, fmt)

    def key(fields: list[str] | None) -> KeyValue | None:
        try:
            text = fields[key_index]
            return int(text) if kind == "integer" else parse_key(kind, text.strip())
        except (TypeError, IndexError, ValueError):  # KeyValueError is a ValueError
            return None

    if rows == 0:
        return size, 0, None, None
    return size, rows, key(first), key(last)


def _plain_lines(fh, fmt: FileFormat) -> tuple[int, list[str] | None, list[str] | None]:
    """Rows of a file without quoting: its lines after the header lines (a last line without
    its line end counts); the first and the last non-blank line split at the delimiter."""
    lines = 0
    head = b""
    tail = b""
    last_chunk = b""
    while chunk := fh.read(1 << 22):
        lines += chunk.count(b"\n")
        if head.count(b"\n") <= fmt.header_lines:
            head += chunk
        tail = chunk[-(1 << 16):] if len(chunk) >= 1 << 16 else (tail + chunk)[-(1 << 16):]
        last_chunk = chunk
    if last_chunk and not last_chunk.endswith(b"\n"):
        lines += 1
    rows = max(lines - fmt.header_lines, 0)
    if not rows:
        return 0, None, None
    first = head.split(b"\n")[fmt.header_lines].rstrip(b"\r")
    last = tail.rstrip(b"\r\n").rsplit(b"\n", 1)[-1]
    return rows, _fields(first, fmt), _fields(last, fmt)


def _fields(line: bytes, fmt: FileFormat) -> list[str]:
    return line.decode(fmt.encoding, errors="replace").split(fmt.delimiter)


def _csv_records(fh, fmt: FileFormat) -> tuple[int, list[str] | None, list[str] | None]:
    """Rows of an RFC 4180 file, as Python's csv module reads them after the header lines."""
    for _ in range(fmt.header_lines):
        if not fh.readline():
            return 0, None, None
    text = io.TextIOWrapper(fh, encoding=fmt.encoding, errors="surrogateescape", newline="")
    rows, first, last = 0, None, None
    for row in csv.reader(text, delimiter=fmt.delimiter, quotechar='"', doublequote=True):
        if rows == 0:
            first = row
        last = row
        rows += 1
    return rows, first, last


def manifest_for(batch_dir: Path, spec: LoadSpec, streams: int, tables: Iterable[str] | None = None,
                 scale: float | None = None, table_streams: dict[str, int] | None = None) -> Manifest:
    """Count what is in a batch folder laid out as the spec says and describe it. Every table has
    `streams` streams, or its own count in `table_streams`; `streams` is written as the largest."""
    from switchyard.core.planner import streams_of
    entries = []
    table_streams = table_streams or {}
    streams = max([streams, *table_streams.values()])
    for table in spec.tables:
        if tables and table.name not in tables:
            continue
        for k in streams_of(table, table_streams.get(table.name, streams)):
            rel = spec.file_for(table.name, k)
            size, rows, kmin, kmax = count_file(batch_dir / rel, table.format,
                                                table.column_names.index(table.key), table.key_kind())
            entries.append(ManifestEntry(table=table.name, stream=k, file=rel, bytes=size, rows=rows,
                                         key_min=kmin, key_max=kmax))
    return Manifest(spec=spec.name, streams=streams, entries=tuple(entries), scale=scale,
                    path=str(batch_dir / MANIFEST))
