"""The TDS path's reader: the rows of a stream file as typed tuples, parsed without locale rules."""
from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, Iterator

from ...spec import Table
from ..base import ProgressCallback, TargetError

_INT = re.compile(r"-?[0-9]+\Z")
_DEC = re.compile(r"-?[0-9]+(\.[0-9]+)?\Z")
_FLOAT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\Z")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\Z")
_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}([ T][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,7})?)?)?\Z")
_TYPE = re.compile(r"^([a-z ]+?)\s*(?:\((\d+)(?:,\s?(\d+))?\))?$")
_INT_RANGES = {"tinyint": (0, 255), "smallint": (-2**15, 2**15 - 1), "int": (-2**31, 2**31 - 1),
               "integer": (-2**31, 2**31 - 1), "bigint": (-2**63, 2**63 - 1)}


def converter(sql_type: str) -> Callable[[str], Any]:
    """A strict text-to-value function for one SQL Server column type; raises ValueError."""
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
        def to_decimal(text: str) -> Decimal:
            if not _DEC.match(text):
                raise ValueError("not a decimal number")
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
        def to_datetime(text: str) -> datetime:
            if not _DATETIME.match(text):
                raise ValueError("not an ISO date and time")
            return datetime.fromisoformat(text.replace("T", " ")[:26])
        return to_datetime
    if base in ("char", "varchar", "nchar", "nvarchar", "text"):
        limit = int(length) if length else None

        def to_str(text: str) -> str:
            if limit is not None and len(text) > limit:
                raise ValueError(f"longer than {limit} characters")
            return text
        return to_str
    if base == "bit":
        def to_bit(text: str) -> bool:
            if text not in ("0", "1"):
                raise ValueError("not 0 or 1")
            return text == "1"
        return to_bit
    raise TargetError(f"column type {sql_type!r} has no converter in the TDS loader")


class FileRows:
    """The rows of one stream file as typed tuples, for TDS bulk copy.

    Iterating raises TargetError naming the file, line and column of the first bad field;
    the error is also kept in `error`, since a driver may wrap what its iterator raised.
    """

    def __init__(self, path: Path, table: Table, engine: str, delimiter: str, trailing_delimiter: bool,
                 encoding: str = "utf-8", progress: ProgressCallback | None = None,
                 context: str = ""):
        self.path = path
        self.names = [c.name for c in table.columns]
        self.convert = [converter(c.sql_type(engine)) for c in table.columns]
        self.delimiter = delimiter
        self.trailing = trailing_delimiter
        self.encoding = encoding
        self.progress = progress
        self.context = context
        self.rows = 0
        self.bytes = 0
        self.error: TargetError | None = None

    def _fail(self, lineno: int, message: str) -> TargetError:
        self.error = TargetError(f"{self.path}: line {lineno}: {message}{self.context}", permanent=True)
        return self.error

    def __iter__(self) -> Iterator[tuple]:
        total = self.path.stat().st_size
        expected = len(self.names) + (1 if self.trailing else 0)
        names, convert, sep = self.names, self.convert, self.delimiter
        reported = 0
        with self.path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                self.bytes += len(raw)
                try:
                    line = raw.decode(self.encoding)
                except UnicodeDecodeError as exc:
                    raise self._fail(lineno, f"not valid {self.encoding} at byte {exc.start}")
                if line.endswith("\n"):
                    line = line[:-1]
                fields = line.split(sep)
                if len(fields) != expected or (self.trailing and fields[-1] != ""):
                    raise self._fail(lineno, f"{len(fields) - (1 if self.trailing else 0)} fields, expected "
                                             f"{len(names)}{' and a final ' + repr(sep) if self.trailing else ''}")
                row = []
                for i, fn in enumerate(convert):
                    try:
                        row.append(fn(fields[i]))
                    except ValueError as exc:
                        raise self._fail(lineno, f"column {names[i]}: {exc}: {fields[i]!r}") from None
                self.rows += 1
                if self.progress and self.bytes - reported >= 1 << 20:
                    reported = self.bytes
                    self.progress(self.bytes, total)
                yield tuple(row)
        if self.progress:
            self.progress(self.bytes, total)

