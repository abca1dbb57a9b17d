"""A batch: one folder of stream files plus the producer's `manifest.json`.

The manifest is the producer's word on what it wrote (per table and stream: file, bytes,
rows, smallest and largest key). Switchyard plans partitions from it and validates the
loaded data against it. Every path is resolved inside the configured data root, so a
batch name from a UI form cannot point a load (and, on SQL Server, BULK INSERT with the
server's rights) at another file.
"""
from __future__ import annotations

import codecs
import csv
import functools
import gzip
import io
import itertools
import json
import re
import zlib
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from switchyard.core.keys import KeyValue, KeyValueError, parse_key, to_json
from switchyard.core.spec import NEUTRAL, FileFormat, LoadSpec, Table

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


class _Problems(list):
    """The problems found in a manifest, each a line; `BatchError` lists them all at once."""

    def int(self, value: Any, where: str, allow_none: bool = False) -> int | None:
        if value is None and allow_none:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.append(f"{where}: expected an integer, found {value!r}")
            return None
        return value

    def key(self, value: Any, kind: str | None, where: str) -> KeyValue | None:
        """A key_min / key_max, strictly as the table's key kind (None: empty stream); a table
        whose key is no partition key (a text code, or none) takes none: anything there is
        not a bound and is left alone."""
        if value is None or kind is None:
            return None
        try:
            return parse_key(kind, value)
        except KeyValueError as exc:
            self.append(f"{where}: {exc}")
            return None


def parse_manifest(raw: Any, path: str, spec: LoadSpec) -> Manifest:
    """The manifest checked whole: one BatchError lists every problem found in it."""
    if not isinstance(raw, dict) or raw.get("format") != MANIFEST_FORMAT:
        raise BatchError(f"{path}: not a Switchyard manifest (expected \"format\": \"{MANIFEST_FORMAT}\")")
    problems = _Problems()
    streams = problems.int(raw.get("streams"), "streams")
    if streams is not None and streams < 1:
        problems.append("streams must be at least 1")
    entries = []
    seen: dict[tuple[str, int], int] = {}
    files_seen: dict[str, int] = {}
    items = raw.get("files") or []
    if not isinstance(items, list):
        problems.append("files: expected a list of entries")
        items = []
    for i, item in enumerate(items):
        where = f"files[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected an object")
            continue
        table = item.get("table")
        if not isinstance(table, str) or table not in spec.table_names:
            problems.append(f"{where}: table {table!r} is not in spec {spec.name!r}")
            continue
        stream = problems.int(item.get("stream"), f"{where}.stream")
        if stream is None:
            continue
        if streams is not None and not 1 <= stream <= streams:
            problems.append(f"{where}: stream {stream} is outside 1..{streams}")
        file = item.get("file")
        if not isinstance(file, str) or not file or file.startswith("/") or ".." in file.split("/"):
            problems.append(f"{where}: file must be a path relative to the batch folder")
            continue
        if (table, stream) in seen:
            problems.append(f"{where}: duplicate entry for {table} stream {stream} (also files[{seen[(table, stream)]}])")
            continue
        if file in files_seen:
            problems.append(f"{where}: file {file} is listed twice (also files[{files_seen[file]}])")
            continue
        seen[(table, stream)] = i
        files_seen[file] = i
        expected_file = spec.file_for(table, stream)
        if file != expected_file:
            # The plan reads the spec's file; a manifest naming another would describe a file
            # nobody loads.
            problems.append(f"{where}: file {file} is not where the spec's files pattern puts {table} stream "
                            f"{stream} ({expected_file})")
        spec_table = spec.table(table)
        # An unpartitioned table's key, if it has one, may be of any type; its range is not a bound.
        kind = spec_table.key_kind()
        size = problems.int(item.get("bytes"), f"{where}.bytes ({table} stream {stream})")
        rows = problems.int(item.get("rows"), f"{where}.rows ({table} stream {stream})")
        entries.append(ManifestEntry(
            table=table, stream=stream, file=file, bytes=size if size is not None else -1,
            rows=rows if rows is not None else -1,
            key_min=problems.key(item.get("key_min"), kind, f"{where}.key_min ({table} stream {stream})"),
            key_max=problems.key(item.get("key_max"), kind, f"{where}.key_max ({table} stream {stream})")))
    for table in sorted({e.table for e in entries}):
        listed = sorted(e.stream for e in entries if e.table == table)
        if listed != list(range(1, len(listed) + 1)):
            missing = sorted(set(range(1, max(listed) + 1)) - set(listed))
            problems.append(f"table {table} lists streams {', '.join(map(str, listed))}: streams are numbered "
                            f"1..n without gaps (missing {', '.join(map(str, missing))})")
    if problems:
        raise BatchError(f"{path}: " + (problems[0] if len(problems) == 1 else
                                        f"{len(problems)} problems:\n- " + "\n- ".join(problems)))
    scale = raw.get("scale")
    return Manifest(spec=str(raw.get("spec", spec.name)), streams=streams, entries=tuple(entries),
                    scale=float(scale) if isinstance(scale, (int, float)) else None, path=path)


def check_files(batch_dir: Path, manifest: Manifest, spec: LoadSpec, tables: Iterable[str] | None = None,
                source: str | None = None) -> list[str]:
    """Every problem with the files a manifest lists (of `tables`, default all), before any load:
    a file missing, or not of the size the manifest gives, and a file of one of those tables
    in the folder that the manifest does not list (a run would leave it out, and end `success`).
    The streams of `source` only (the spec's `sources`; None: the streams of no source): a
    source's files are on its workers alone, and checked there."""
    chosen = set(tables) if tables is not None else {e.table for e in manifest.entries}
    problems = unlisted_files(batch_dir, manifest, spec, chosen, source)
    for e in manifest.entries:
        if tables is not None and e.table not in tables:
            continue
        if spec.source_of(e.stream) != source:
            continue
        try:
            path = resolve_file(batch_dir, e.file)
        except BatchError as exc:
            problems.append(str(exc))
            continue
        if path.is_fifo():
            continue    # a named pipe is read once, by the load, which counts its records
        if not path.is_file():
            problems.append(f"{path}: listed in the manifest ({e.table} stream {e.stream}, {e.rows:,} rows) but "
                            f"not found")
        elif path.stat().st_size != e.bytes:
            problems.append(f"{path}: {path.stat().st_size:,} bytes, the manifest says {e.bytes:,} ({e.table} "
                            f"stream {e.stream}): the file changed after the manifest was written, or is "
                            f"incomplete")
        else:
            problems += start_problems(path, spec.table(e.table)) + unended_file(path)
            if e.rows == 0:
                problems += empty_stream_records(path, spec.table(e.table), e.stream)
    return problems


def empty_stream_records(path: Path, table: Table, stream: int) -> list[str]:
    """A file the manifest lists with 0 rows that holds a record: a run skips an empty stream's
    group, so its records would be left out of a run that ends `success`. The header lines and
    one byte after them are read, so every such file is checked whatever the batch's size."""
    fmt = table.format
    try:
        with _open_counted(path) as fh:
            for _ in range(fmt.header_lines):
                fh.readline(_HEADER_LINE_MAX)
            more = fh.read(1)
    except (BatchError, OSError, EOFError):
        return []   # the load names what is wrong with such a file
    if not more:
        return []
    return [f"{path}: line {fmt.header_lines + 1}: a record, but the manifest lists the file with 0 rows "
            f"({table.name} stream {stream}): a run would skip the stream and leave the file's records out; "
            f"write the manifest from the file (switchyard manifest)"]


_WHOLE_NUMBER = re.compile(r"^[+-]?\d+$")
# The longest line read as a header: a longer one is left to the load.
_HEADER_LINE_MAX = 1 << 20
_BOM = b"\xef\xbb\xbf"


def start_problems(path: Path, table: Table) -> list[str]:
    """What a file's first lines say before any load, in a few bytes read, so every file is
    checked whatever the batch's size: a file that ends before its header lines (`header_missing`),
    a byte order mark the load would keep (`byte_order_mark`),
    line ends of a carriage return alone (`carriage_return_line_ends`),
    a line the format skips as a header that is a record of the table (`header_record`), a header
    that names the table's columns in other places than the spec's (`header_order`) or columns
    the spec does not have (`header_width`), a header line the load would take for a record
    (`names_record`)."""
    head = _head(path, table)
    if head is None:
        return []   # the load names what is wrong with such a file
    missing = header_missing(path, table, head)
    if missing:
        return missing
    line_ends = carriage_return_line_ends(path, table, head[0])
    if line_ends:       # the lines read here are not the file's
        return byte_order_mark(path, table, head[0][:3]) + line_ends
    return (byte_order_mark(path, table, head[0][:3]) + header_record(path, table, head)
            + header_order(path, table, head) + header_width(path, table, head) + names_record(path, table, head))


def header_missing(path: Path, table: Table, head: list[bytes]) -> list[str]:
    """A file that ends before the header lines the format says it starts with: an export that
    wrote nothing (0 bytes) or stopped in its header. A stream with no records still has its
    header; skipped as one, such a file would pass for an empty stream, and a run leave the
    stream out and end `success`."""
    lines = table.format.header_lines
    got = sum(1 for line in head[:lines] if line)
    if not lines or got == lines:
        return []
    said = "no line at all" if got == 0 else f"{got} line{'s' if got > 1 else ''} only"
    return [f"{path}: {said}, where the format says the file starts with {lines} header line{'s' if lines > 1 else ''} "
            f"(header_lines: {lines}): a stream with no records still has its header; the export wrote nothing, or "
            f"stopped? Write the file again (its header line alone for a stream with no records)"]


def _head(path: Path, table: Table, records: int = 0) -> list[bytes] | None:
    """The file's first lines, its header's (one line without a header), then `records` lines
    more, each record whole; None when the file cannot be read so."""
    csv_quoting = table.format.quoting == "csv"
    try:
        with _open_counted(path) as fh:
            head = [fh.readline(_HEADER_LINE_MAX) for _ in range(max(table.format.header_lines, 1))]
            if csv_quoting and table.format.header_lines:
                head[-1] = _whole_record(fh, head[-1])
            for _ in range(records):
                line = fh.readline(_HEADER_LINE_MAX)
                head.append(_whole_record(fh, line) if csv_quoting else line)
    except (BatchError, OSError, EOFError):
        return None
    return head


def _whole_record(fh, line: bytes) -> bytes:
    """`line` with the lines after it that its open quote runs over (RFC 4180: a quoted field may
    hold line breaks), as the reader of records takes them, up to _HEADER_LINE_MAX bytes. A header
    line never opens a field it does not close, but a record written where the header should be
    may (`"Ost<LF>bahnhof",10`): read by its first line alone it would be no record of the table."""
    while line.count(b'"') % 2 and line.endswith(b"\n") and len(line) < _HEADER_LINE_MAX:
        more = fh.readline(_HEADER_LINE_MAX - len(line))
        if not more:
            break
        line += more
    return line


def unended_file(path: Path) -> list[str]:
    """A plain file whose last byte is no line end, read at the file's end whatever its size (a
    compressed file's end is read with its records, `unended_problem`). A file cut short (a copy
    that stopped, a full disk) ends so, and a cut inside the last record's last field leaves as
    many fields as the others: the load would take what is left of it for its value."""
    if path.name.endswith(".gz") or not path.is_file():
        return []
    try:
        with open(path, "rb") as fh:
            if fh.seek(0, 2) == 0:
                return []
            fh.seek(-1, 2)
            if fh.read(1) == b"\n":
                return []
            fh.seek(0)
            lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except OSError:
        return []   # the load names what is wrong with such a file
    return [unended_problem(path, lines + 1)]


def unended_problem(path: Path, line: int) -> str:
    """A file's last line `line`, with no line end after it."""
    from switchyard.core.files import UNENDED_LINE
    return f"{path}: line {line}: {UNENDED_LINE}"


def line_end_unlike_spec(path: Path, table: Table) -> str | None:
    """The file's line end, as its first line ends, where it is not the spec's `line_end` (for a
    target that ends a row at the spec's line end only: SQL Server's BULK INSERT and its client
    path would keep the CR of a CR LF file declared `lf` as its last field's last character); None
    where it is, or where the file cannot be read here or has no whole first line. A named pipe is
    not read: its bytes are the load's, once."""
    if not path.is_file():
        return None
    try:
        with _open_counted(path) as fh:
            first = fh.readline(_HEADER_LINE_MAX)
    except (BatchError, OSError, EOFError):
        return None
    if not first.endswith(b"\n"):
        return None
    found = "crlf" if first.endswith(b"\r\n") else "lf"
    if found == table.format.line_end:
        return None
    return (f"{path}: line 1 ends in {'CR LF' if found == 'crlf' else 'LF alone'}, the spec says `line_end: "
            f"{table.format.line_end}`: a row would end at the spec's line end only, so "
            + ("each record's last field would keep the CR" if found == "crlf" else "no record would end")
            + f"; say `line_end: {found}` for {table.name}")


def carriage_return_line_ends(path: Path, table: Table, first: bytes) -> list[str]:
    """A file whose line ends are carriage returns alone, outside quotes (as classic Mac OS wrote
    them), where the spec says LF or CR LF: `first`, the file's first line read up to an LF, holds
    none (in its first MB) but holds such a CR. PostgreSQL's COPY takes the first line end it meets
    for the file's, and a check that reads lines at LF would see the whole file as one line (and
    not read its fields). A CR inside a line that ends in LF is a field's (RecordCheck names it)."""
    if first.endswith(b"\n"):
        return []
    quoted = table.format.quoting == "csv"
    at = first.find(b"\r")
    while at >= 0 and quoted and first.count(b'"', 0, at) % 2:
        at = first.find(b"\r", at + 1)          # inside a quoted field: a character of its value
    if at < 0:
        return []
    return [f"{path}: line 1: its line ends are carriage returns alone (byte {at + 1} of the file's first line), "
            f"which the load would read as line ends and the spec's `line_end` does not allow (lf or crlf): "
            f"write the file with LF or CR LF line ends"]


def byte_order_mark(path: Path, table: Table, start: bytes) -> list[str]:
    """A file that starts (`start`, its first three bytes) with UTF-8's byte order mark (EF BB
    BF, which some tools write before UTF-8 text) where the load would take it for data: neither
    server's load skips it. With no header line it would be the start of the first record's
    first field (a text key `ST001` stored as `\ufeffST001`, joining nothing), and in a file the
    spec calls latin-1 or cp1252 it says the file is UTF-8: each of its other characters past
    ASCII would load as two or three others."""
    fmt = table.format
    if start != _BOM:
        return []
    try:
        encoding = codecs.lookup(fmt.encoding).name
    except LookupError:
        return []   # a target names an encoding it does not know
    if encoding in ("iso8859-1", "cp1252"):
        return [f"{path}: line 1: starts with UTF-8's byte order mark, but the spec says the file's encoding is "
                f"{fmt.encoding}: its characters past ASCII would load as other characters; say `encoding: utf-8`"]
    if fmt.header_lines == 0:
        return [f"{path}: line 1, column {table.columns[0].name}: starts with UTF-8's byte order mark (EF BB BF), "
                f"which the load would keep as the start of the first field; write the file without it "
                f"(UTF-8 without BOM), or say `header_lines: 1` if its first line is a header"]
    return []     # in the header line, which the load skips


def header_record(path: Path, table: Table, head: list[bytes]) -> list[str]:
    """The last line the format skips as a header (`head`: the file's first lines), when it is a
    record of the table: each field fits its column, and the key's field, or one that is a date,
    a time or a number with a point in a column of that type, is a value (fields.reads_as_value),
    which no column's name is; or a field is a whole number in a number column, or true/false in
    a boolean one (a header may name columns by years, `region,2024,2025`), and no field names a
    column of the spec, as a header's first name at least does. A producer that wrote a file
    without its header line would lose its first record to the skip, and a manifest counted the
    same way would not notice. A line of text fields alone passes unless its key is a code like
    the records' (`_coded_like_its_records`): a table of text columns cannot tell a header from a
    record (`names_record` is the other way round)."""
    from switchyard.core.fields import RecordCheck, reads_as_flag, reads_as_value
    fmt = table.format
    last = head[-1] if fmt.header_lines else b""
    if not last or (len(last) >= _HEADER_LINE_MAX and not last.endswith(b"\n")):
        return []   # no header line, a file that ends before it, or a line too long to be one
    fields = _line_fields(last.removeprefix(_BOM) if fmt.header_lines == 1 else last, fmt)
    if RecordCheck(table).problems(fields):
        return []   # not a record of the table: a header
    said = (f"{path}: line {fmt.header_lines}: skipped as a header line (header_lines: {fmt.header_lines}), but it "
            f"is a record of {table.name}")
    fix = f"the load would leave it out; write the file with its header line, or say `header_lines: {fmt.header_lines - 1}`"
    maybe = None    # a whole number or a flag: a value, unless the line names a column as a header does
    for column, text in zip(table.columns, fields):
        if column.nullable and text == fmt.null_marker:
            continue
        typed = next((t for t in column.types.values() if reads_as_value(t, text)), None)
        # A whole number names a column in some headers (a report's years: `region,2024,2025`);
        # in the table's key, or as a date, a time or a number with a point, it is a value.
        if typed and (column.name == table.key or not _WHOLE_NUMBER.match(text.strip())):
            return [f"{said} (column {column.name}: {text!r}, a value of {typed}, not a name): {fix}"]
        flag = next((t for t in column.types.values() if reads_as_flag(t, text)), None)
        maybe = maybe or ((column.name, text, typed or flag) if typed or flag else None)
    spec_names = {_name(n) for n in table.column_names}
    if maybe and not any(_name(text) in spec_names for text in fields):
        name, text, typed = maybe
        return [f"{said} (column {name}: {text!r}, a value of {typed}, and no field of the line names a column of "
                f"the spec, as a header line would): {fix}; a header line that names none of the spec's columns "
                f"(it calls them otherwise) must name at least one as the spec does"]
    return _coded_like_its_records(path, table, fields)


# A text's shape: each run of capitals, small letters, digits or spaces as one mark, any other
# character as itself (`ADJ-001` is `A-9`, `adjuster_id` `a_a`, `Adjuster ID` `Aa Aa`).
def _shape(text: str) -> str:
    marks = ("A" if ch.isupper() else "a" if ch.isalpha() else "9" if ch.isdigit() else " " if ch.isspace() else ch
             for ch in text.strip())
    return "".join(mark for mark, _ in itertools.groupby(marks))


def _coded_like_its_records(path: Path, table: Table, fields: list[str]) -> list[str]:
    """The line skipped as a header, in a table of text columns, when one of its fields is a code
    written as that column is in every record after it (the same shape, with digits: `ADJ-001`
    before `ADJ-002`, `ADJ-003`; a manager's `E-000001` in a lookup keyed by `CC-FIN`), the key's
    first, and none of its fields names a column of the spec: the producer left the header out,
    and the skip would drop that record. A header's names have no digits in the shape of the
    codes (`adjuster_id`, `ADJ_ID`); a table with no column of such codes (country codes and
    their names) cannot tell, and passes."""
    fmt = table.format
    spec_names = {_name(n) for n in table.column_names}
    if any(_name(f) in spec_names for f in fields):
        return []
    names = table.column_names
    order = sorted(range(min(len(names), len(fields))), key=lambda i: names[i] != table.key)
    after = _records_after_header(path, table)
    for at in order:
        shape = _shape(fields[at])
        if not any(ch == "9" for ch in shape):
            continue
        codes = [r[at] for r in after if at < len(r)]
        if len(codes) < 2 or any(_shape(code) != shape for code in codes):
            continue
        shown = ", ".join(repr(code) for code in codes[:3])
        like = "the key" if names[at] == table.key else "that column"
        return [f"{path}: line {fmt.header_lines}: skipped as a header line (header_lines: {fmt.header_lines}), but "
                f"it is a record of {table.name} (column {names[at]}: {fields[at]!r}, a code like {like} of the "
                f"records after it, {shown}, not a name): the load would leave it out; write the file with its "
                f"header line, or say `header_lines: {fmt.header_lines - 1}`"]
    return []


def _name(text: str) -> str:
    """A column's name as a header may write it: letter case, spaces, underscores and hyphens aside
    (`pay_code`, `PayCode`, `Pay Code`, `PAY-CODE`)."""
    return re.sub(r"[\s_-]+", "", text).lower()


def _header_keys(table: Table) -> tuple[list[str], Callable[[str], str]]:
    """The spec's column names as a header line is compared with them, and how a header's name is
    read for that: letter case, spaces, underscores and hyphens aside (an export template that
    writes `PayCode` for `pay_code`), unless two columns of the spec would then read alike, when
    letter case alone is set aside."""
    loose = [_name(n) for n in table.column_names]
    if len(set(loose)) == len(loose):
        return loose, _name
    return [n.lower() for n in table.column_names], str.lower


def _records_after_header(path: Path, table: Table, count: int = 5) -> list[list[str]]:
    """The fields of the first `count` records after the file's header lines, each record whole
    ([] when the file cannot be read so)."""
    out: list[list[str]] = []
    for line in (_head(path, table, records=count) or [])[table.format.header_lines:]:
        if not line.endswith(b"\n"):
            break       # the file's end, or a line too long to read here
        out.append(_line_fields(line, table.format))
    return out


def header_order(path: Path, table: Table, head: list[bytes]) -> list[str]:
    """A header line (`head`: the file's first lines, those the format skips) that names columns
    of the table in other places than the spec's: the loads take a record's fields by their
    place, so a producer that wrote two columns the other way round would load each into the
    other's column (two numeric columns, without an error). Names that are no column of the
    spec's are not read: a header may call its columns otherwise."""
    spec_names, read = _header_keys(table)
    for number, written in _headers(head, table.format):
        names = [read(n) for n in written]
        moved = [(i, name) for i, name in enumerate(names)
                 if name in spec_names and (i >= len(spec_names) or spec_names[i] != name)]
        if moved:
            said = ", ".join(_moved(i, written[i], table.column_names, spec_names.index(name)) for i, name in moved[:5]) + (f" and {len(moved) - 5} more" if len(moved) > 5 else "")
            return [f"{path}: line {number}: the header names the table's columns in another order than the "
                    f"spec's: {said}; the load takes each field by its place, so their values would go into "
                    f"other columns: write the fields in the spec's order ({', '.join(table.column_names)}), "
                    f"or list the spec's columns in the file's order"]
    return []


def _moved(field: int, written: str, columns: Sequence[str], column: int) -> str:
    """`field` of a header, `written` so, naming the spec's `column` (the spec's name where the
    header writes it otherwise)."""
    name = columns[column]
    return (f"field {field + 1} is {written} (the spec's column {column + 1}"
            + (")" if written == name.lower() else f", {name})"))


def header_width(path: Path, table: Table, head: list[bytes]) -> list[str]:
    """A header line that names more fields than the spec has columns, the extra ones no column
    of the spec's (the producer added columns the spec does not have yet), or fewer, each of
    them the spec's and the rest missing (a file written before the spec had those columns, such
    as an older batch loaded again after a column was added). Each record is refused for its
    field count; this says why, with the names."""
    spec_names, read = _header_keys(table)
    for number, written in _headers(head, table.format):
        names = [read(n) for n in written]
        extra = [w for w, n in zip(written, names) if n not in spec_names]
        missing = [c.lower() for c, n in zip(table.column_names, spec_names) if n not in names]
        said = (f"{path}: line {number}: the header names {len(names)} fields, the spec's {table.name} "
                f"{len(spec_names)} columns")
        if len(names) > len(spec_names) and extra:
            return [f"{said}; not in the spec: {_first_five(extra)}. Add them to the spec's columns, in the file's "
                    f"order (a new nullable column is added to the target with on_spec_change: add_columns), or have "
                    f"the producer leave them out"]
        if len(names) < len(spec_names) and not extra and missing:
            return [f"{said}; not in the file: {_first_five(missing)}. The file was written without them (before "
                    f"the spec had them?): the load takes each field by its place, so have the producer write them "
                    f"(an empty field is NULL where the column allows it and the format's null_marker is empty), or "
                    f"load this batch with the spec it was written for"]
        if len(names) != len(spec_names) and extra and missing and any(
                len(record) == len(names) for record in _records_after_header(path, table, count=1)):
            # Names on both sides and records as wide as the header: a file of another shape of the
            # table (a column renamed and another added since it was written), each of whose records
            # the load would refuse for its field count.
            return [f"{said}; not in the spec: {_first_five(extra)}; not in the file: {_first_five(missing)}, and "
                    f"its records have {len(names)} fields too. Was it written before the spec changed (a column "
                    f"renamed, another added)? The load takes each field by its place: load this batch with the spec "
                    f"it was written for, or have the producer write the spec's columns"]
    return []


def _first_five(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def names_record(path: Path, table: Table, head: list[bytes]) -> list[str]:
    """The first line of a file read with no header line (`header_lines: 0`), when it is the
    table's column names, every one in order (letter case and spaces aside): the file was
    written with a header, which the load would take for a record (in a table of text columns,
    without an error)."""
    fmt = table.format
    if fmt.header_lines or not head[0] or (len(head[0]) >= _HEADER_LINE_MAX and not head[0].endswith(b"\n")):
        return []
    if _header_names(head[0].removeprefix(_BOM), fmt) != list(table.column_names):
        return []
    return [f"{path}: line 1: the table's column names ({', '.join(table.column_names)}), a header line, which the "
            f"load would take for a record of {table.name} (header_lines: 0); say `header_lines: 1`"]


def _headers(head: list[bytes], fmt: FileFormat) -> Iterator[tuple[int, list[str]]]:
    """(line number, names) of each line the format skips as a header (`head`: the file's first
    lines), up to a line without its end: a file that ends there, or a line too long to be one."""
    for number, raw in enumerate(head[:fmt.header_lines], start=1):
        if not raw.endswith(b"\n"):
            return
        yield number, _header_names(raw.removeprefix(_BOM) if number == 1 else raw, fmt)


def _header_names(raw: bytes, fmt: FileFormat) -> list[str]:
    """The names a header line gives, letter case and spaces aside (a trailing delimiter's empty
    field is none)."""
    names = [f.strip().lower() for f in _line_fields(raw, fmt)]
    return names[:-1] if fmt.trailing_delimiter and names and names[-1] == "" else names


def _line_fields(raw: bytes, fmt: FileFormat) -> list[str]:
    """The fields of one line of a file, as the batch's reader splits a record (with a trailing
    delimiter, the empty field after it included, as RecordCheck takes a record)."""
    text = raw.decode(fmt.encoding, "surrogateescape").removesuffix("\n").removesuffix("\r")
    if fmt.quoting == "csv":
        return next(csv.reader([text], delimiter=fmt.delimiter, quotechar='"', doublequote=True), [])
    return text.split(fmt.delimiter)


def tables_in_batch(batch_dir: Path, manifest: Manifest, spec: LoadSpec,
                    tables: Iterable[str]) -> tuple[list[str], list[str], list[str]]:
    """(the run's `tables` the batch holds, a note for each it leaves out, the problems): a table
    whose spec says `optional: true` and of which the manifest lists no file is not loaded by the
    run, and keeps what it holds (a lookup the producer sends only when it changes), unless its
    files are in the folder all the same (a manifest that forgot them: a problem). Any other table
    the batch lacks stays among the run's tables, and the plan refuses the batch for it."""
    kept, left, notes = [], [], []
    for name in tables:
        if spec.table(name).optional and not manifest.streams_of(name):
            left.append(name)
            notes.append(f"{name}: not in this batch (its manifest lists no file of it), and optional: true: this "
                         f"run does not load it, and it keeps what it holds")
        else:
            kept.append(name)
    return kept, notes, unlisted_files(batch_dir, manifest, spec, left)


def unlisted_files(batch_dir: Path, manifest: Manifest, spec: LoadSpec, tables: Iterable[str],
                   source: str | None = None,
                   said: Callable[[Path, str, int], str] | None = None) -> list[str]:
    """The files of `tables` in the batch folder, by the spec's files pattern, that the manifest
    does not list: a producer that wrote its manifest before its last file, or a file left from
    another batch. A batch is exactly what its manifest lists, so a run would not load them.
    The streams of `source` only (None: the streams of no source). `said`: how each is said
    (`unlisted` by default)."""
    said = said or unlisted
    problems = []
    for table in sorted(tables):
        # Compared as paths: a manifest may write `./orders/orders.1.tbl` for `orders/orders.1.tbl`.
        listed = {(batch_dir / e.file).resolve() for e in manifest.entries if e.table == table}
        for stream, rel in sorted(files_on_disk(batch_dir, spec, table).items()):
            if (batch_dir / rel).resolve() not in listed and spec.source_of(stream) == source:
                problems.append(said(batch_dir / rel, table, stream))
        problems += other_form_files(batch_dir, spec, table, source)
    return problems


def other_form_files(batch_dir: Path, spec: LoadSpec, table: str, source: Any = ...) -> list[str]:
    """The files of `table` named as its files pattern says but compressed otherwise (`t.2.txt`
    where the pattern says `t.{stream}.txt.gz`, and the other way round): a producer that forgot
    to compress one file. The pattern does not find them, so a run would leave them out and end
    `success`. The streams of `source` only (None: the streams of no source; by default every
    stream)."""
    files = spec.table(table).files
    gz = files.endswith(".gz")
    other, said = (files[:-len(".gz")], "not compressed") if gz else (files + ".gz", "compressed (gzip)")
    return [f"{batch_dir / rel}: a file of table {table} (stream {stream}) {said}, unlike the table's files "
            f"pattern ({files}): a run would not load it; name it as the pattern says"
            + (" (gzip it)" if gz else "") + " or move it out of the batch folder"
            for stream, rel in sorted(files_on_disk(batch_dir, spec, table, other).items())
            if source is ... or spec.source_of(stream) == source]


def unlisted(path: Path, table: str, stream: int) -> str:
    """The problem with a file of a run's table that the manifest does not list."""
    return (f"{path}: a file of table {table} (stream {stream}) the manifest does not list: a run would not "
            f"load it; list it (`switchyard manifest` writes the manifest from the folder's files) or move it "
            f"out of the batch folder")


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


@contextmanager
def _read_errors(path: Path) -> Iterator[None]:
    """A file that breaks off while it is read (a gzip file cut short, a bad gzip stream) as a
    BatchError naming it, never a traceback; the load says the same of it."""
    try:
        yield
    except (EOFError, OSError, zlib.error) as exc:
        what = "not a readable gzip file" if path.name.endswith(".gz") else "cannot be read"
        raise BatchError(f"{path}: {what}: {exc}") from None


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
    with _read_errors(path), _open_counted(path) as fh:
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
    rows, first, last = 0, None, None
    for row in _CsvRows(fh, fmt):
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
            kind = table.key_kind()
            size, rows, kmin, kmax = count_file(batch_dir / rel, table.format,
                                                table.column_names.index(table.key) if kind else 0, kind or "integer")
            if kind is None:
                kmin = kmax = None
            entries.append(ManifestEntry(table=table.name, stream=k, file=rel, bytes=size, rows=rows,
                                         key_min=kmin, key_max=kmax))
    return Manifest(spec=spec.name, streams=streams, entries=tuple(entries), scale=scale,
                    path=str(batch_dir / MANIFEST))


# --- a producer's tools: describe a batch from its files, check a batch without loading it -------
@dataclass(frozen=True)
class FileScan:
    """What a stream file holds, read record by record independently of any loader."""
    bytes: int
    rows: int
    key_min: KeyValue | None
    key_max: KeyValue | None
    # With a record check (check_batch): the first bad fields, "line n, column c: ...", and how many in all.
    bad_fields: list[str] = field(default_factory=list)
    bad_field_count: int = 0
    bad_record_count: int = 0   # the records those are in
    # The line of a last record with no line end after it (a file cut short ends so), or None.
    unended_line: int | None = None
    # With `bounds`: the first record whose key is outside them, (line, key), and how many are.
    first_outside: tuple[int, KeyValue] | None = None
    outside_count: int = 0


# The bad fields a check names per file; the rest are counted.
BAD_FIELDS_SHOWN = 5


def _records(fh, fmt: FileFormat) -> Iterable[tuple[int, list[str], str | None]]:
    """(line where the record starts, its fields as read, what is wrong with its line end) of every
    record after the header lines: its fields with a trailing delimiter's empty field included,
    a quoted field equal to the NULL marker as fields.Quoted (a value to the loads, never NULL);
    its line end wrong where it is not the first record's, which the loads take for every line's."""
    if fmt.quoting == "csv":
        yield from _quoted_records(fh, fmt)
        return
    text = io.TextIOWrapper(fh, encoding=fmt.encoding, errors="surrogateescape", newline="\n")
    crlf = None     # the data's line end, as its first line's says: the loads read every line so
    for number, line in enumerate(text, start=1):
        if number <= fmt.header_lines:
            continue
        ended = line.endswith("\n")
        line = line[:-1] if ended else line
        had_cr = line.endswith("\r")
        if crlf is None:
            crlf = had_cr
        # Any other carriage return stays in a field, where RecordCheck refuses it: a CR LF line
        # in an LF file keeps its CR in its last field.
        cr = had_cr and not crlf
        line = line[:-1] if had_cr else line
        # Every line is a record (a blank one too, as the loaders take it); the file's final
        # line end starts none. The empty field after a trailing delimiter stays: RecordCheck
        # judges the record's end.
        fields = line.split(fmt.delimiter)
        if cr and fields:
            # Named in the last column's field, before the trailing delimiter's empty one.
            trailing = fmt.trailing_delimiter and len(fields) > 1 and fields[-1] == ""
            fields[-2 if trailing else -1] += "\r"
        yield number, fields, _UNENDED if not ended else _LF_IN_CRLF if crlf and not had_cr else None


# A record ended by LF alone in a file whose first record ends with CR LF: the loads read a line
# end as the first one's (PostgreSQL: "unquoted newline found in data"; SQL Server's BULK INSERT
# looks for CR LF and joins the lines).
_LF_IN_CRLF = ("its line ends with LF alone, where the file's first record ends with CR LF: the load reads every "
               "line end as the first one's; write every line with the same line end")
# The last record, with no line end after it (a file cut short): its own problem (unended_problem).
_UNENDED = "no line end"
# The last record, its quoted field still open at the file's end (a file cut short inside it).
_UNCLOSED = ("a quoted field of this record is not closed before the file's end: a file cut short (a copy that "
             "stopped, a full disk) ends so; the load would refuse it; write the file whole")
_CRLF_IN_LF = ("its line ends with CR LF, where the file's first record ends with LF alone: the load reads every "
               "line end as the first one's; write every line with the same line end")


def _quoted_records(fh, fmt: FileFormat) -> Iterable[tuple[int, list[str], str | None]]:
    """_records with RFC 4180 quoting: Python's csv module reads the fields; the record's own text
    (the lines it took from the file) says which were quoted and how the record's line ends."""
    from switchyard.core.fields import Quoted, quoted_fields
    records = _CsvRows(fh, fmt)
    taken = records.taken
    start, first_end = fmt.header_lines + 1, None
    marker = fmt.null_marker
    in_quotes = None if marker is None else f'"{marker}"'
    for row in records:
        last = taken[-1] if taken else ""
        end = "\r\n" if last.endswith("\r\n") else "\n" if last.endswith("\n") else ""
        if first_end is None:
            first_end = end or None
        wrong = _UNENDED if not end else None
        if end and end != first_end:
            wrong = _LF_IN_CRLF if first_end == "\r\n" else _CRLF_IN_LF
        if end and any('"' in line for line in taken) and _unclosed("".join(taken), fmt.delimiter):
            # (Without a line end at all, the file's last line is said to have none: _UNENDED.)
            wrong = _UNCLOSED
        # The record read again only where the marker may stand quoted in it: rare, and cheap to rule out.
        if in_quotes is not None and marker in row and any(in_quotes in line for line in taken):
            read = quoted_fields("".join(taken).removesuffix(end), fmt.delimiter, True)
            if read is not None and len(read) == len(row):
                row = [Quoted(v) if quoted and v == marker else v for v, (_, quoted) in zip(row, read)]
        yield start, row, wrong
        start = fmt.header_lines + records.line_num + 1


class _CsvRows:
    """The records of an RFC 4180 file after its header lines, as Python's csv module reads them,
    its lines ending at LF only, as the loads count them: a carriage return alone is no line end
    to them (inside quotes a character of its field, outside them a record the load refuses), so
    a record's line is the one `grep -n` and the server's errors name. `taken`: the lines of the
    record just read; `line_num`: the lines read so far.

    A record with a carriage return outside quotes, for which the csv module raises "new-line
    character seen in unquoted field", comes as its fields as RFC 4180 reads its text, each
    such field a fields.BareCarriageReturn, which RecordCheck refuses naming its column; the
    reader goes on with the next line."""

    def __init__(self, fh, fmt: FileFormat):
        self.fh, self.fmt, self.taken, self._reader = fh, fmt, [], None

    @property
    def line_num(self) -> int:
        return self._reader.line_num if self._reader is not None else 0

    def _lines(self, text) -> Iterator[str]:
        for line in text:
            self.taken.append(line)
            yield line

    def __iter__(self) -> Iterator[list[str]]:
        from switchyard.core.fields import BareCarriageReturn, quoted_fields
        fmt = self.fmt
        for _ in range(fmt.header_lines):
            if not self.fh.readline():
                return
        text = io.TextIOWrapper(self.fh, encoding=fmt.encoding, errors="surrogateescape", newline="\n")
        self._reader = csv.reader(self._lines(text), delimiter=fmt.delimiter, quotechar='"', doublequote=True)
        while True:
            try:
                row = next(self._reader)
            except StopIteration:
                return
            except csv.Error as exc:
                if "new-line character seen in unquoted field" not in str(exc):
                    raise
                record = "".join(self.taken)
                record = record[:-2] if record.endswith("\r\n") else record.removesuffix("\n")
                read = quoted_fields(record, fmt.delimiter, True) or [(record, False)]
                row = [BareCarriageReturn(v) if not quoted and "\r" in v else v for v, quoted in read]
            yield row
            self.taken.clear()


def _unclosed(text: str, delimiter: str) -> bool:
    """Whether the record `text` ends inside a quoted field, which Python's csv reader, not
    strict, takes as the field's end: only the file's last record can (the reader reads lines
    until the quote closes). An odd count of quotes is what to look for; a quote inside an
    unquoted field (`5" pipe`, refused by the quote check) is no open field."""
    if text.count('"') % 2 == 0:
        return False
    try:
        list(csv.reader([text], delimiter=delimiter, quotechar='"', doublequote=True, strict=True))
    except csv.Error as exc:
        return "unexpected end of data" in str(exc)
    return False


def scan_file(path: Path, fmt: FileFormat, key: str | None = None, key_index: int = 0,
              kind: str | None = None, record_check=None, repeated: "RepeatedKeys | None" = None,
              columns: int = 0, bounds: tuple[KeyValue, KeyValue] | None = None,
              key_check: Callable[[str], str | None] | None = None) -> FileScan:
    """Bytes, rows and the smallest and largest key of a stream file, every record read (the key
    column `key`, at `key_index`, read as `kind`; no keys without a kind). A key that does not
    read as its kind raises BatchError naming the file, the line and the column. With
    `record_check` (core.fields.RecordCheck), every field is checked against its column's type,
    and such a key is one more of the file's problems (`bad_fields`), outside its key range;
    with `repeated`, every record's values of the table's unique columns are kept to find those
    another record holds too. Without `record_check`, a blank line in a table of `columns` > 1
    raises BatchError: no record of the table, the load would refuse it (a manifest counted it).
    With `bounds` (the stream's key range), the records whose key is outside it are counted, the
    first by its line. Without `record_check`, `key_check` (what is wrong with a key
    field for its column's types, core.fields.RecordCheck.value_problem) raises BatchError for a
    key that reads as its kind but that a column's type refuses or would store changed."""
    size = path.stat().st_size
    rows = 0
    low = high = None
    first_outside, outside = None, 0
    bad: list[str] = []
    bad_count = bad_records = 0
    unended = None
    with _read_errors(path), _open_counted(path) as fh:
        for line, fields, wrong_end in _records(fh, fmt):
            rows += 1
            if wrong_end is _UNENDED:
                unended, wrong_end = line, None
            found = []
            if wrong_end is _UNCLOSED:
                if record_check is None:
                    raise BatchError(f"{path}: line {line}: {_UNCLOSED}")
                found = [_UNCLOSED]     # its fields are cut: their problems are this one's
            elif record_check is not None:
                found = ([wrong_end] if wrong_end else []) + record_check.problems(fields)
            elif columns > 1 and kind is None and list(fields) in ([], [""]):   # a key read says it itself
                raise BatchError(f"{path}: line {line}: a blank line, no record of the table's {columns} columns: "
                                 f"the load would refuse it; write the file without it")
            if repeated is not None:
                repeated.see(line, fields)
            if kind is not None:
                value, problem = _read_key(fields, key, key_index, kind)
                if problem is None and record_check is None and key_check is not None:
                    if said := key_check(fields[key_index]):
                        raise BatchError(f"{path}: line {line}, {said}")
                if problem is None:
                    low = value if low is None or value < low else low
                    high = value if high is None or value > high else high
                    if bounds is not None and not bounds[0] <= value <= bounds[1]:
                        outside += 1
                        first_outside = first_outside or (line, value)
                elif record_check is None:
                    raise BatchError(f"{path}: line {line}, {problem}")
                elif not found:
                    # Where every field is checked, a key that does not read is one more problem of
                    # the file, the others still found (a record with problems named already: its
                    # key's among them, or its fields too few, is named once).
                    found = [problem]
            bad_records += 1 if found else 0
            for problem in found:
                bad_count += 1
                if len(bad) < BAD_FIELDS_SHOWN:
                    bad.append(f"line {line}, {problem}")
    return FileScan(bytes=size, rows=rows, key_min=low, key_max=high, bad_fields=bad, bad_field_count=bad_count,
                    bad_record_count=bad_records, unended_line=unended, first_outside=first_outside,
                    outside_count=outside)


def _read_key(fields: list[str], key: str, key_index: int, kind: str) -> tuple[Any, str | None]:
    """(the record's key as `kind` reads it, None), or (None, what is wrong with it)."""
    if key_index >= len(fields):
        return None, (f"column {key}: the record has {len(fields)} fields, the key is field {key_index + 1}"
                      + (" (a blank line)" if fields in ([], [""]) else ""))
    text = fields[key_index]
    try:
        return (int(text.strip()) if kind == "integer" else parse_key(kind, text.strip())), None
    except (KeyValueError, ValueError) as exc:
        return None, f"column {key}: {text!r} is not a{'n' if kind == 'integer' else ''} {kind} key ({exc})"


class RepeatedKeys:
    """The records of one file whose values of the table's unique columns (`Table.unique`) an
    earlier record of the file holds too, found as the file is read, before any load: each of
    them would fail the validate step's unique index after every load of the run. A stream
    file is the whole of its partition (a partitioned table's unique columns hold its key), so
    its own records are all it is compared with, as that index compares them.

    Values compare as their column's type reads them (`comparable`: `1.50` and `1.5`, `ER` and
    `ER ` in a char column): two values equal so are equal to PostgreSQL and to SQL Server,
    whose comparisons are coarser still (a case-insensitive collation, trailing spaces ignored
    in every text type), so nothing named here passes there; what only those rules join is left
    to the validate step. A record with a NULL in the unique columns is never a repeat
    (PostgreSQL's unique index keeps NULLs distinct)."""

    def __init__(self, table: Table):
        from switchyard.core.fields import Quoted
        self.quoted = Quoted    # a quoted field equal to the NULL marker: a value
        self.columns = table.unique
        self.index = [table.column_names.index(c) for c in self.columns]
        columns = [table.column(c) for c in self.columns]
        self.readers = [(i, comparable_reader(c.types.get(NEUTRAL) or next(iter(c.types.values()))))
                        for i, c in zip(self.index, columns)]
        self.last = max(self.index)
        null = table.format.null_marker
        # The unique columns' fields that can be NULL: nullable, with a marker.
        self.nulls = [i for i, c in zip(self.index, columns) if c.nullable and null is not None]
        self.null = null
        self.first: dict[tuple, int] = {}
        self.found: list[tuple[int, int, list[str]]] = []     # (line, its first line, values)
        self.count = 0

    def see(self, line: int, fields: list[str]) -> None:
        if len(fields) <= self.last:
            return      # too few fields: named by the record check
        if any(fields[i] == self.null and not isinstance(fields[i], self.quoted) for i in self.nulls):
            return
        first = self.first.setdefault(tuple(read(fields[i]) for i, read in self.readers), line)
        if first != line:
            self.count += 1
            if len(self.found) < BAD_FIELDS_SHOWN:
                self.found.append((line, first, [fields[i] for i in self.index]))

    def problems(self, path: Path) -> list[str]:
        said = [f"{path}: line {line}: {', '.join(f'{c} {v!r}' for c, v in zip(self.columns, values))}, as on line "
                f"{first}: the table's unique columns ({', '.join(self.columns)}) hold each value once, and the "
                f"validate step would refuse the batch after its loads" for line, first, values in self.found]
        if self.count > len(self.found):
            said.append(f"{path}: {self.count - len(self.found):,} more records repeat the unique columns' values "
                        f"of an earlier one ({self.count:,} in all)")
        return said


_STREAM_IN_NAME = "{stream}"


def files_on_disk(batch_dir: Path, spec: LoadSpec, table: str, files: str | None = None) -> dict[int, str]:
    """The files of `table` in the batch folder (the spec's files pattern, or `files`): stream ->
    its path relative to the folder."""
    pattern = (files or spec.table(table).files).format(table=table, stream=_STREAM_IN_NAME)
    before, _, after = pattern.partition(_STREAM_IN_NAME)
    return {int(m.group(1)): m.group(0) for p in batch_dir.glob(pattern.replace(_STREAM_IN_NAME, "*"))
            if (m := re.fullmatch(re.escape(before) + r"(\d+)" + re.escape(after),
                                  p.relative_to(batch_dir).as_posix()))}


def find_streams(batch_dir: Path, spec: LoadSpec, table: str) -> list[int]:
    """The stream numbers whose files of `table` are in the batch folder (the spec's files pattern),
    in order; BatchError when they are not 1..n without gaps."""
    found = sorted(files_on_disk(batch_dir, spec, table))
    if found and found != list(range(1, len(found) + 1)):
        missing = sorted(set(range(1, max(found) + 1)) - set(found))
        raise BatchError(f"{table} has files for streams {', '.join(map(str, found))}; streams are "
                         f"numbered 1..n without gaps (missing {', '.join(map(str, missing))}: "
                         f"{', '.join(spec.file_for(table, k) for k in missing)})")
    return found


def describe_batch(batch_dir: Path, spec: LoadSpec, tables: Iterable[str] | None = None) -> Manifest:
    """The manifest of a batch folder, from its files alone: each table's streams as the spec's
    files pattern finds them, each file's bytes, rows and smallest and largest key, every record
    read. Refuses (BatchError, every problem listed) a table with no files, a partitioned
    table's streams whose key ranges overlap or are out of order, an unpartitioned table in more
    than one stream, a file whose first lines a run would refuse (`start_problems`)."""
    from switchyard.core.fields import RecordCheck
    chosen = list(tables) if tables else list(spec.table_names)
    entries, problems = [], []
    for name in chosen:
        table = spec.table(name)
        problems += other_form_files(batch_dir, spec, name)
        try:
            streams = find_streams(batch_dir, spec, name)
        except BatchError as exc:
            problems.append(str(exc))
            continue
        if not streams:
            if not table.optional:   # a table the spec lets a batch leave out: the manifest leaves it out
                problems.append(f"{batch_dir / spec.file_for(name, 1)}: no file of table {name} (the spec's files "
                                f"pattern: {table.files})")
            continue
        if not table.partitioned and streams != [1]:
            problems.append(f"{name} is unpartitioned (one stream), the folder has {len(streams)} of its files")
            continue
        kind = table.key_kind()
        index = table.column_names.index(table.key) if kind else 0
        # A key its column's type refuses or would store changed (a finer fraction than it keeps):
        # no manifest lists it as a stream's bound, which the check and the loads would refuse.
        key_check = functools.partial(RecordCheck(table).value_problem, index) if kind else None
        previous = None
        for k in streams:
            rel = spec.file_for(name, k)
            # A manifest is not written for a file that a run would refuse for its start.
            problems += start_problems(batch_dir / rel, table)
            try:
                scan = scan_file(batch_dir / rel, table.format, table.key, index, kind, columns=len(table.columns),
                                 key_check=key_check)
            except BatchError as exc:
                problems.append(str(exc))
                continue
            if scan.unended_line:
                problems.append(unended_problem(batch_dir / rel, scan.unended_line))
            if table.partitioned and scan.rows and previous is not None and scan.key_min <= previous[1]:
                problems.append(f"{batch_dir / rel}: keys {to_json(scan.key_min)}..{to_json(scan.key_max)} overlap or "
                                f"come before stream {previous[0]}'s ..{to_json(previous[1])}; each stream of {name} "
                                f"holds one key range, above the stream before it")
            if table.partitioned and scan.rows:
                previous = (k, scan.key_max)
            entries.append(ManifestEntry(table=name, stream=k, file=rel, bytes=scan.bytes, rows=scan.rows,
                                         key_min=scan.key_min if table.partitioned else None,
                                         key_max=scan.key_max if table.partitioned else None))
    if problems:
        raise BatchError(f"{batch_dir}: " + (problems[0] if len(problems) == 1 else
                                             f"{len(problems)} problems:\n- " + "\n- ".join(problems)))
    streams = max((e.stream for e in entries), default=1)
    return Manifest(spec=spec.name, streams=streams, entries=tuple(entries), path=str(batch_dir / MANIFEST))


def check_batch(batch_dir: Path, spec: LoadSpec, tables: Iterable[str] | None = None) -> list[str]:
    """Every problem of a batch, found without loading it: its manifest (read whole), its plan
    (key ranges, streams), its files (there, of their size), and each file read record by record
    against the manifest (rows, keys inside the stream's range) and its fields against their
    columns' types (core/fields.py). [] when there is none."""
    from switchyard.core.planner import PlanError, plan_batch
    try:
        manifest = read_manifest(batch_dir, spec)
    except BatchError as exc:
        return [str(exc)]
    # A run's tables: its `tables` param, else every table of the spec (steps.chosen_tables), but
    # those the batch leaves out that the spec lets it (`optional: true`).
    chosen, _, problems = tables_in_batch(batch_dir, manifest, spec, list(tables) if tables else spec.table_names)
    try:
        plan_batch(spec, manifest, chosen)
    except PlanError as exc:
        problems.append(str(exc))
    problems += check_files(batch_dir, manifest, spec, chosen)
    return problems + read_problems(batch_dir, manifest, spec, chosen)


def read_bytes(batch_dir: Path, manifest: Manifest, spec: LoadSpec, tables: Iterable[str],
               source: str | None = None) -> int:
    """The bytes read_problems would read: the listed files of `tables` this machine holds."""
    chosen = set(tables)
    return sum(e.bytes for e in manifest.entries
               if e.table in chosen and spec.source_of(e.stream) == source and (batch_dir / e.file).is_file())


def _line_and_field(path: Path, table: Table, offset: int) -> tuple[int, int]:
    """(the file's line, the field's index in its record) of the byte a guard stopped at, `offset`
    bytes into the file's data (core/files.place_of)."""
    from switchyard.core.files import place_of
    fmt = table.format
    return place_of(path, fmt.header_lines, fmt.delimiter, offset, quoted=fmt.quoting == "csv")


def _place(path: Path, table: Table, offset: int) -> str:
    """`<file>: line <n>, column <name>` of the byte a guard of core/files stopped at, `offset`
    bytes into the file's data."""
    line, index = _line_and_field(path, table, offset)
    column = table.columns[index].name if index < len(table.columns) else f"field {index + 1}"
    return f"{path}: line {line}, column {column}"


def misplaced_quote_problem(path: Path, table: Table, offset: int) -> str:
    """The quote core/files.guard_quotes found at `offset` of the file's data, by its place."""
    from switchyard.core.files import MISPLACED_QUOTE
    return f"{_place(path, table, offset)}: {MISPLACED_QUOTE}"


def changed_value_problem(path: Path, table: Table, changed) -> str:
    """A field core/value_guard.py found a server would change, by its file, line and column (the
    guard names the column; its offset is the record's start)."""
    line, _ = _line_and_field(path, table, changed.offset)
    return f"{path}: line {line}, {changed.problem()}"


def quote_problems(path: Path, table: Table) -> list[str]:
    """A quote of a file with RFC 4180 quoting where RFC 4180 allows none (core/files.guard_quotes):
    the file's records read by Python's csv module would not show it."""
    from switchyard.core.files import MisplacedQuote, StreamFileError, data_chunks, guard_quotes, open_source
    if table.format.quoting != "csv":
        return []
    try:
        with open_source(path) as source:
            for _ in guard_quotes(data_chunks(source.read, table.format.header_lines), table.format.delimiter):
                pass
    except MisplacedQuote as exc:
        return [misplaced_quote_problem(path, table, exc.offset)]
    except (StreamFileError, OSError):
        return []   # the file's read names it
    return []


def encoding_problems(path: Path, table: Table) -> list[str]:
    """A file the spec calls latin-1 or cp1252 whose text is in another encoding (UTF-8, or in
    latin-1 Windows' cp1252: core/files.guard_single_byte): every byte is a latin-1 character, so
    nothing else would say so."""
    from switchyard.core.files import (StreamFileError, WrongSingleByte, data_chunks, guard_single_byte, open_source,
                                       single_byte)
    fmt = table.format
    if not single_byte(fmt.encoding):
        return []
    try:
        with open_source(path) as source:
            for _ in guard_single_byte(data_chunks(source.read, fmt.header_lines), fmt.encoding):
                pass
    except WrongSingleByte as exc:
        return [encoding_problem(path, table, exc)]
    except (StreamFileError, OSError):
        return []
    return []


def encoding_problem(path: Path, table: Table, wrong) -> str:
    """The text core/files.guard_single_byte found in another encoding, by its place."""
    return f"{_place(path, table, wrong.offset)}: {wrong.told}"


def refused_in_reading(path: Path, table: Table, exc: Exception) -> str:
    """What a guard of a file's reading on its way to a load refused (core/files, core/value_guard),
    by its file, line and column."""
    from switchyard.core.files import MisplacedQuote, UnendedData, WrongSingleByte
    if isinstance(exc, WrongSingleByte):
        return encoding_problem(path, table, exc)
    if isinstance(exc, MisplacedQuote):
        return misplaced_quote_problem(path, table, exc.offset)
    if isinstance(exc, UnendedData):
        # A line cut short: its number, as the check says it; a column would read as the place
        # of a bad value.
        return unended_problem(path, _line_and_field(path, table, exc.offset)[0])
    return changed_value_problem(path, table, exc)


def read_problems(batch_dir: Path, manifest: Manifest, spec: LoadSpec, tables: Iterable[str],
                  source: str | None = None) -> list[str]:
    """Each listed file of `tables` read record by record (`file_read_problems`). The streams of
    `source` only (None: the streams of no source)."""
    chosen = list(tables)
    problems = []
    for e in manifest.entries:
        path = batch_dir / e.file
        # A file of another size is read too: what it holds says what changed.
        if e.table not in chosen or spec.source_of(e.stream) != source or not path.is_file():
            continue
        problems += file_read_problems(path, spec.table(e.table), e.stream, e.rows, e.key_min, e.key_max)
    return problems


def file_read_problems(path: Path, table: Table, stream: int, rows: int | None, key_min: Any, key_max: Any
                       ) -> list[str]:
    """A stream file read record by record: its records against the rows the manifest gives,
    its keys inside the stream's range (`key_min`..`key_max`, typed), every field against its
    column's type (core/fields.py), its quotes against RFC 4180, its records' values of the
    table's unique columns against each other (`RepeatedKeys`)."""
    from switchyard.core.fields import RecordCheck
    kind = table.key_kind() if table.partitioned else None
    repeated = RepeatedKeys(table) if table.unique else None
    try:
        scan = scan_file(path, table.format, table.key, table.column_names.index(table.key) if kind else 0, kind,
                         record_check=RecordCheck(table), repeated=repeated,
                         bounds=(key_min, key_max) if kind and key_min is not None else None)
    except BatchError as exc:
        return [str(exc)]
    problems = quote_problems(path, table) + encoding_problems(path, table)
    problems += repeated.problems(path) if repeated is not None else []
    if scan.unended_line and path.name.endswith(".gz"):      # a plain file's end: check_files
        problems.append(unended_problem(path, scan.unended_line))
    head = _head(path, table) if table.format.header_lines and scan.bad_record_count else None
    if head is not None and header_width(path, table, head):
        # Its header names another number of fields than the spec's columns (start_problems says
        # which): every record's field count, and its fields read against the wrong columns, would
        # only say it again, record by record.
        problems.append(f"{path}: {scan.bad_record_count:,} records not read against the spec's columns: the "
                        f"file's header names other columns than the spec's")
    else:
        problems += [f"{path}: {bad}" for bad in scan.bad_fields]
        if scan.bad_field_count > len(scan.bad_fields):
            # A record of the wrong field count is one problem, a field its type refuses another.
            problems.append(f"{path}: {scan.bad_field_count - len(scan.bad_fields):,} more problems "
                            f"({scan.bad_field_count:,} in all, in {scan.bad_record_count:,} records; the load "
                            f"would stop at the first)")
    if rows is not None and scan.rows != rows:
        problems.append(f"{path}: {scan.rows:,} records, the manifest says {rows:,} ({table.name} stream {stream})")
    if scan.first_outside is not None:
        line, key = scan.first_outside
        others = scan.outside_count - 1
        more = (f"; {others:,} more record{'s' if others > 1 else ''} outside it, the file's keys "
                f"{to_json(scan.key_min)}..{to_json(scan.key_max)}" if others else "")
        problems.append(f"{path}: line {line}, column {table.key}: key {to_json(key)}, outside the manifest's "
                        f"{to_json(key_min)}..{to_json(key_max)} ({table.name} stream {stream}){more}")
    return problems


def lines_of_keys(path: Path, table: Table, columns: Sequence[str], keys: Sequence[Mapping[str, Any]],
                  dialect: str) -> list[list[int]]:
    """For each of `keys` (a key the server found more than once: its values by column, as JSON
    values, and `rows`, how many records hold it), the lines of the stream file where those
    records start, read until each key has its `rows` lines or the file ends. Values compare as
    the column's type reads them (`comparable`): `1.50` and `1.5` in a numeric column, `ER` and
    `ER ` in a char column are the same key. Read only after a uniqueness check failed."""
    index = [table.column_names.index(c) for c in columns]
    types = [table.column(c).sql_type(dialect) for c in columns]
    wanted = {tuple(comparable(t, k.get(c)) for t, c in zip(types, columns)): i for i, k in enumerate(keys)}
    found: list[list[int]] = [[] for _ in keys]
    left = sum(int(k.get("rows") or 0) for k in keys)
    with _read_errors(path), _open_counted(path) as fh:
        for line, fields, _ in _records(fh, table.format):
            if len(fields) <= max(index):
                continue
            at = wanted.get(tuple(comparable(t, fields[i]) for t, i in zip(types, index)))
            if at is not None:
                found[at].append(line)
                left -= 1
                if left <= 0:
                    break
    return found


def comparable(sql_type: str, value: Any) -> Any:
    """A key's value, from the file's text or the server's JSON value, as its column's type
    compares it; the text as it is where it does not read so."""
    return None if value is None else comparable_reader(sql_type)(str(value))


def _time_of_day(text: str) -> tuple:
    # Hours of one digit as well (`6:00:00`), which the servers read as 06:00:00.
    hours, minutes, *seconds = text.strip().split(":")
    return int(hours), int(minutes), Decimal(seconds[0] if seconds else 0)


@functools.lru_cache(maxsize=256)
def comparable_reader(sql_type: str) -> Callable[[str], Any]:
    """`comparable` for one type, made once: a field's text as its column's type compares it (a
    check of a file's unique columns reads one for every record)."""
    found = re.match(r"\s*([a-z]+)", sql_type.lower())
    base = found.group(1) if found else ""
    if base in ("int", "integer", "bigint", "smallint", "tinyint", "serial", "bigserial"):
        read = lambda text: int(text.strip())                                      # noqa: E731
    elif base in ("numeric", "decimal", "money", "smallmoney"):
        read = lambda text: Decimal(text.strip())                                  # noqa: E731
    elif base in ("real", "float", "double"):
        read = lambda text: float(text.strip())                                    # noqa: E731
    elif base in ("char", "character", "nchar", "bpchar") and "varying" not in sql_type.lower():
        return lambda text: text.rstrip(" ")   # blank-padded: trailing spaces tell no two values apart
    elif base == "date":
        read = lambda text: date.fromisoformat(text.strip())                       # noqa: E731
    elif base in ("timestamp", "datetime", "datetime2", "smalldatetime"):
        read = lambda text: datetime.fromisoformat(text.strip())                   # noqa: E731
    elif base == "time":
        read = _time_of_day
    else:
        return lambda text: text

    def reader(text: str) -> Any:
        try:
            return read(text)
        except (ValueError, ArithmeticError):
            return text
    return reader
