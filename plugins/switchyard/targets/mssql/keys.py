"""Partition keys on SQL Server: integer, date and timestamp values as typed T-SQL literals.

A plan's bounds are integers, or ISO 8601 text for date and timestamp keys. They are parsed
here (int, date.fromisoformat, datetime.fromisoformat) and written back from the parsed
value, never pasted: a bound that is not a value of the key's type fails before any SQL is
written. Date and time literals use the ISO 8601 forms SQL Server reads the same under every
SET LANGUAGE and SET DATEFORMAT: 'yyyy-mm-dd' for date, 'yyyy-mm-ddThh:mm:ss[.fff]' (with
the T) for datetime, smalldatetime and datetime2 (for datetime and smalldatetime the form
without the T depends on DATEFORMAT).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from switchyard.targets.base import TargetError

_TYPE = re.compile(r"^(tinyint|smallint|int|integer|bigint|date|datetime2|datetime|smalldatetime)(?:\((\d)\))?$")


@dataclass(frozen=True)
class KeyType:
    """The partition key's SQL Server type and how its values are written."""
    sql_type: str
    base: str
    precision: int | None  # datetime2's fractional digits (default 7)

    @property
    def kind(self) -> str:
        if self.base == "date":
            return "date"
        if self.base in ("datetime", "datetime2", "smalldatetime"):
            return "timestamp"
        return "integer"

    def value(self, raw: Any) -> int | date | datetime:
        """A bound as a Python value of the key's type (what pyodbc binds as a parameter)."""
        if self.kind == "integer":
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise TargetError(f"{raw!r} is not an integer bound for a {self.sql_type} key")
            return raw
        if self.kind == "date":
            if isinstance(raw, datetime):
                raise TargetError(f"{raw!r} is a timestamp, not a date bound for a date key")
            if isinstance(raw, date):
                return raw
            try:
                return date.fromisoformat(str(raw))
            except ValueError as exc:
                raise TargetError(f"{raw!r} is not an ISO date (yyyy-mm-dd) bound for a date key") from exc
        if isinstance(raw, datetime):
            value = raw
        elif isinstance(raw, date):
            value = datetime(raw.year, raw.month, raw.day)
        else:
            try:
                value = datetime.fromisoformat(str(raw))
            except ValueError as exc:
                raise TargetError(f"{raw!r} is not an ISO timestamp bound for a {self.sql_type} key") from exc
        if value.tzinfo is not None:
            raise TargetError(f"{raw!r} has a time zone; a {self.sql_type} key holds none")
        return value

    def literal(self, raw: Any) -> str:
        """The bound as a T-SQL literal of the key's type."""
        v = self.value(raw)
        if self.kind == "integer":
            return str(v)
        if self.kind == "date":
            return f"'{v.isoformat()}'"
        if self.base == "smalldatetime":
            if v.second or v.microsecond:
                raise TargetError(f"{raw!r}: a smalldatetime holds whole minutes")
            return f"'{v:%Y-%m-%dT%H:%M:%S}'"
        if self.base == "datetime":
            # datetime keeps milliseconds rounded to .000/.003/.007: a bound must be one of those.
            ms = v.microsecond / 1000
            if v.microsecond % 1000 or int(ms) % 10 not in (0, 3, 7):
                raise TargetError(f"{raw!r}: a datetime holds milliseconds ending in 0, 3 or 7 only")
            return f"'{v:%Y-%m-%dT%H:%M:%S}.{v.microsecond // 1000:03d}'"
        digits = 7 if self.precision is None else self.precision
        if v.microsecond % (10 ** max(0, 6 - digits)):
            raise TargetError(f"{raw!r}: more fractional digits than {self.sql_type} holds")
        text = f"{v:%Y-%m-%dT%H:%M:%S}"
        if digits:
            text += "." + f"{v.microsecond:06d}{'0' * max(0, digits - 6)}"[:digits]
        return f"'{text}'"

    def before(self, raw: Any) -> int | date | datetime:
        """A value of the type just below `raw`: the RANGE LEFT boundary under a partition
        whose smallest key is `raw` (one step of the type's resolution; 10 ms for datetime,
        whose steps are 3-4 ms, and 1 microsecond at most for datetime2)."""
        v = self.value(raw)
        if self.kind == "integer":
            return v - 1
        if self.kind == "date":
            return v - timedelta(days=1)
        if self.base == "smalldatetime":
            return v - timedelta(minutes=1)
        if self.base == "datetime":
            return v - timedelta(milliseconds=10)
        digits = 7 if self.precision is None else self.precision
        return v - timedelta(microseconds=10 ** max(0, 6 - digits))


    def after(self, raw: Any) -> int | date | datetime:
        """A value of the type just above `raw` (one step of the type's resolution, as in `before`):
        a key inside the partition above the RANGE LEFT boundary `raw`."""
        v = self.value(raw)
        if self.kind == "integer":
            return v + 1
        if self.kind == "date":
            return v + timedelta(days=1)
        if self.base == "smalldatetime":
            return v + timedelta(minutes=1)
        if self.base == "datetime":
            return v + timedelta(milliseconds=10)
        digits = 7 if self.precision is None else self.precision
        return v + timedelta(microseconds=10 ** max(0, 6 - digits))


def key_type(sql_type: str) -> KeyType:
    m = _TYPE.match(sql_type.strip().lower())
    if not m:
        raise TargetError(f"{sql_type!r} is not a partition key type on SQL Server (an integer type, date, "
                          "datetime, smalldatetime or datetime2)")
    base = "int" if m.group(1) == "integer" else m.group(1)
    precision = int(m.group(2)) if m.group(2) is not None else None
    if precision is not None and base != "datetime2":
        raise TargetError(f"{sql_type!r}: only datetime2 takes a precision")
    return KeyType(sql_type=sql_type, base=base, precision=precision)
