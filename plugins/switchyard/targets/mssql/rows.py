"""The client path's reader: the rows of a stream file as typed tuples, streamed.

What the server cannot read itself (a gzip file, a NULL marker other than the empty field,
...) is read here, on the worker, and sent over TDS bulk copy. Every field reaches the
table as it is in the file, byte for byte after decoding; the only exception is a field
equal to the spec's NULL marker in a nullable column, which becomes NULL. The reader
follows the table's FileFormat:

* quoting "none": a record is one line; fields are split at the delimiter, nothing else is
  special (backslashes, quotes and spaces are data);
* quoting "csv" (RFC 4180): a field in double quotes may hold the delimiter, "" for a quote
  and line breaks (kept as they are); a quoted field never matches the NULL marker;
* line ends LF or CRLF, exactly as declared; a trailing delimiter on every line;
* header lines skipped; gzip (a name ending in .gz) decompressed while reading, never to disk.

Numbers and dates are parsed without locale rules. A bad record raises TargetError naming
the file, the line and the column.
"""
from __future__ import annotations

import gzip
import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Mapping

from switchyard.core.files import UNENDED_LINE
from switchyard.core.spec import FileFormat, Table
from switchyard.targets.base import ProgressCallback, TargetError
from switchyard.targets.mssql.types import MONEY_DIGITS, column_type

_INT = re.compile(r"-?[0-9]+\Z")
_DEC = re.compile(r"-?[0-9]+(\.[0-9]+)?\Z")
_FLOAT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\Z")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\Z")
_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.([0-9]{1,7}))?)?)?\Z")
_TYPE = re.compile(r"^([a-z][a-z0-9 ]*?)\s*(?:\((\d+)(?:,\s?(\d+))?\))?$")
_INT_RANGES = {"tinyint": (0, 255), "smallint": (-2**15, 2**15 - 1), "int": (-2**31, 2**31 - 1),
               "integer": (-2**31, 2**31 - 1), "bigint": (-2**63, 2**63 - 1)}
GZIP_MAGIC = b"\x1f\x8b"


def converter(sql_type: str, code_page: int | None = None) -> Callable[[str], Any]:
    """A strict text-to-value function for one SQL Server column type; raises ValueError.

    Text keeps every character as it is. Lengths count what SQL Server counts: UTF-16 code
    units for nchar/nvarchar, bytes in the column's code page for char/varchar (UTF-8 for a
    _UTF8 collation, code page 65001, or when the code page is not known); a character the
    column's code page cannot hold fails here instead of being replaced by '?' on the way in.
    """
    m = _TYPE.match(sql_type.strip().lower())
    if not m:
        raise TargetError(f"column type {sql_type!r} is not understood by the TDS loader")
    base, length = m.group(1), m.group(2)
    if base in _INT_RANGES:
        lo, hi = _INT_RANGES[base]

        def to_int(text: str) -> int:
            if not _INT.match(text):
                raise ValueError("not an integer")
            value = int(text)
            if not lo <= value <= hi:
                raise ValueError(f"outside the {base} range")
            return value
        return to_int
    if base in ("money", "smallmoney", "decimal", "numeric"):
        # The digits after the point the column keeps (decimal without a scale keeps none): the
        # bulk copy rounds the others away without an error.
        scale = MONEY_DIGITS if base in ("money", "smallmoney") else int(m.group(3) or 0)

        def to_decimal(text: str) -> Decimal:
            if not _DEC.match(text):
                raise ValueError("not a decimal number")
            kept = len(text.partition(".")[2].rstrip("0"))
            if kept > scale:
                raise ValueError(f"{kept} digits after the point, {sql_type} keeps {scale}: the load would round "
                                 f"it to another value without an error")
            return Decimal(text)
        return to_decimal
    if base in ("float", "real", "double precision"):
        def to_float(text: str) -> float:
            if not _FLOAT.match(text):
                raise ValueError("not a number")
            return float(text)
        return to_float
    if base == "date":
        def to_date(text: str) -> date:
            m = _DATE.match(text)
            if not m:
                raise ValueError("not a yyyy-mm-dd date")
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
        return to_date
    if base in ("datetime", "datetime2", "smalldatetime"):
        # What the column keeps of a time, which the bulk copy rounds the rest of away without an
        # error: datetime2(p) p digits after the second's point (7 without a precision); datetime
        # 1/300 s (milliseconds ending in 0, 3 or 7); smalldatetime whole minutes.
        kept = {"datetime2": int(length) if length else 7, "datetime": 3, "smalldatetime": 0}[base]

        def to_datetime(text: str) -> datetime:
            m = _DATETIME.match(text)
            if not m:
                raise ValueError("not an ISO date and time")
            digits = (m.group(4) or "").rstrip("0")
            if len(digits) > kept or (base == "datetime" and digits.ljust(3, "0")[2] not in "037") or (
                    base == "smalldatetime" and (m.group(2) or ":00")[1:3] != "00"):
                raise ValueError(f"finer than {sql_type} keeps: the load would round it to another time without "
                                 f"an error")
            if len(digits) == 7:
                raise ValueError("a 7th fractional digit (100 ns) is more than the client path carries: "
                                 "load this file with BULK INSERT")
            return datetime.fromisoformat(text.replace("T", " ")[:26])
        return to_datetime
    if base in ("nchar", "nvarchar"):
        limit = int(length) if length else None

        def to_nstr(text: str) -> str:
            if limit is not None:
                units = len(text) if text.isascii() else len(text.encode("utf-16-le")) // 2
                if units > limit:
                    raise ValueError(f"longer than {limit} UTF-16 code units")
            return text
        return to_nstr
    if base in ("char", "varchar", "text"):
        limit = int(length) if length else None
        codec = "utf-8" if code_page in (None, 0, 65001) else f"cp{code_page}"
        try:
            "".encode(codec)
        except LookupError:
            codec = "ascii"  # a code page Python has no codec for: only what every code page holds

        def to_str(text: str) -> str:
            if text.isascii():
                size = len(text)
            else:
                try:
                    size = len(text.encode(codec))
                except UnicodeEncodeError as exc:
                    raise ValueError(f"{text[exc.start]!r} is not in the column's code page {code_page} "
                                     "(declare nvarchar, or a _UTF8 collation)") from None
            if limit is not None and size > limit:
                raise ValueError(f"longer than {limit} bytes" if size != len(text) else
                                 f"longer than {limit} characters")
            return text
        return to_str
    if base == "bit":
        def to_bit(text: str) -> bool:
            if text not in ("0", "1"):
                raise ValueError("not 0 or 1")
            return text == "1"
        return to_bit
    raise TargetError(f"column type {sql_type!r} has no converter in the TDS loader")


def open_stream_file(path: Path) -> tuple[IO[bytes], IO[bytes]]:
    """(reader, raw file): gzip streamed when the name ends in .gz; a plain name holding
    gzip bytes is refused, saying so."""
    raw = Path(path).open("rb")
    if Path(path).name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    if raw.read(2) == GZIP_MAGIC:
        raw.close()
        raise TargetError(f"{path}: line 1: the file is gzip-compressed (it starts with bytes 1f 8b) but its name "
                          "does not end in .gz; name it *.gz to load it compressed", permanent=True)
    raw.seek(0)
    return raw, raw


class FileRows:
    """The rows of one stream file as typed tuples (None for NULL), for TDS bulk copy.

    Iterating raises TargetError naming the file, line and column of the first bad field;
    the error is also kept in `error`, since a driver may wrap what its iterator raised.
    `code_pages`: each char/varchar column's code page, where the server said (lengths and
    characters are checked against it).
    """

    def __init__(self, path: Path, table: Table, engine: str = "mssql", fmt: FileFormat | None = None,
                 progress: ProgressCallback | None = None, context: str = "",
                 code_pages: Mapping[str, int] | None = None):
        self.path = Path(path)
        self.fmt = fmt or table.format
        self.names = [c.name for c in table.columns]
        code_pages = code_pages or {}
        self.convert = [converter(column_type(c, engine), code_pages.get(c.name)) for c in table.columns]
        marker = self.fmt.null_marker
        self.null_at = [marker is not None and c.nullable for c in table.columns]
        self.progress = progress
        self.context = context
        self.rows = 0
        self.bytes = 0          # bytes of the file read (compressed bytes for gzip)
        self.text_bytes = 0     # bytes of text read
        self.error: TargetError | None = None

    def _fail(self, lineno: int, message: str) -> TargetError:
        self.error = TargetError(f"{self.path}: line {lineno}: {message}{self.context}", permanent=True)
        return self.error

    # --- records: (first line number, [(field text, quoted)]) ------------------------------
    def _lines(self, fh: IO[bytes]) -> Iterator[tuple[int, str]]:
        """Decoded lines without their line end, checked against the declared line end."""
        fmt = self.fmt
        crlf = fmt.line_end == "crlf"
        for lineno, raw in enumerate(fh, start=1):
            self.text_bytes += len(raw)
            if raw.endswith(b"\n"):
                if crlf:
                    if not raw.endswith(b"\r\n"):
                        raise self._fail(lineno, "ends in LF alone; the spec declares CRLF line ends")
                    raw = raw[:-2]
                else:
                    raw = raw[:-1]
            else:
                # The last line, cut short (the plan reads a compressed file's end only when it
                # reads the batch's fields): its last field would load as what is left of it.
                raise self._fail(lineno, UNENDED_LINE)
            try:
                line = raw.decode(fmt.encoding)
            except UnicodeDecodeError as exc:
                column = raw[:exc.start].count(fmt.delimiter.encode(fmt.encoding, "replace")) + 1
                name = self.names[column - 1] if column <= len(self.names) else f"field {column}"
                raise self._fail(lineno, f"column {name}: not valid {fmt.encoding} at byte {exc.start} of "
                                         "the line") from None
            yield lineno, line

    def _plain_records(self, lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, list[tuple[str, bool]]]]:
        sep = self.fmt.delimiter
        for lineno, line in lines:
            yield lineno, [(f, False) for f in line.split(sep)]

    def _csv_records(self, lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, list[tuple[str, bool]]]]:
        """RFC 4180 records: a quoted field may span lines; the line break inside is kept as
        the file has it (LF, or CR LF for crlf files)."""
        sep = self.fmt.delimiter
        eol = "\r\n" if self.fmt.line_end == "crlf" else "\n"
        pending, first = None, 0
        for lineno, line in lines:
            if pending is None:
                pending, first = line, lineno
            else:
                pending += eol + line
            if pending.count('"') % 2:
                continue  # inside a quoted field: the record goes on
            yield first, self._split_csv(pending, sep, first)
            pending = None
        if pending is not None:
            raise self._fail(first, "a quoted field is not closed before the end of the file")

    def _split_csv(self, record: str, sep: str, lineno: int) -> list[tuple[str, bool]]:
        fields, i, n = [], 0, len(record)
        while True:
            if i < n and record[i] == '"':
                j = i + 1
                while True:
                    k = record.find('"', j)
                    if k < 0:
                        raise self._fail(lineno, f"field {len(fields) + 1}: a quoted field is not closed")
                    if record.startswith('""', k):
                        j = k + 2
                        continue
                    break
                fields.append((record[i + 1:k].replace('""', '"'), True))
                i = k + 1
                if i < n and record[i] != sep:
                    raise self._fail(lineno, f"field {len(fields)}: text after a closing quote")
            else:
                k = record.find(sep, i)
                k = n if k < 0 else k
                text = record[i:k]
                if '"' in text:
                    raise self._fail(lineno, f"field {len(fields) + 1}: a quote inside an unquoted field "
                                             "(RFC 4180: quote the whole field and double the quote)")
                fields.append((text, False))
                i = k
            if i >= n:
                return fields
            i += 1  # past the delimiter
            if i == n:
                fields.append(("", False))
                return fields

    def __iter__(self) -> Iterator[tuple]:
        total = self.path.stat().st_size
        fmt = self.fmt
        names, convert, null_at, marker = self.names, self.convert, self.null_at, fmt.null_marker
        expected = len(names) + (1 if fmt.trailing_delimiter else 0)
        reported = 0
        reader, raw = open_stream_file(self.path)
        try:
            lines = self._lines(reader)
            for _ in range(fmt.header_lines):
                if next(lines, None) is None:
                    break
            records = self._csv_records(lines) if fmt.quoting == "csv" else self._plain_records(lines)
            for lineno, fields in records:
                if len(fields) != expected or (fmt.trailing_delimiter and fields[-1] != ("", False)):
                    tail = f" and a final {fmt.delimiter!r}" if fmt.trailing_delimiter else ""
                    raise self._fail(lineno, f"{len(fields) - (1 if fmt.trailing_delimiter else 0)} fields, "
                                             f"expected {len(names)}{tail}")
                row = []
                for i, fn in enumerate(convert):
                    text, quoted = fields[i]
                    if null_at[i] and not quoted and text == marker:
                        row.append(None)
                        continue
                    try:
                        row.append(fn(text))
                    except ValueError as exc:
                        raise self._fail(lineno, f"column {names[i]}: {exc}: {text!r}") from None
                self.rows += 1
                self.bytes = raw.tell()
                if self.progress and self.bytes - reported >= 1 << 20:
                    reported = self.bytes
                    self.progress(self.bytes, total)
                yield tuple(row)
        finally:
            reader.close()
            raw.close()
        self.bytes = total
        if self.progress:
            self.progress(self.bytes, total)
