"""Partition keys on SQL Server: integer, date and time values, stepped and written per type.

A plan's bounds are integers, or ISO 8601 text for date and time keys. They are parsed here
(strictly, by this module's own pattern) and written back from the parsed value, never
pasted: a bound that is not a value of the key's type fails with a TargetError before any SQL
is written.

Each type has its own step, the distance between two neighbouring values it holds (`before`,
`after`): that is what makes a stream's RANGE LEFT boundary (its largest key) and the next
stream's CHECK (its smallest key) meet with nothing between them and nothing shared.

* integers (tinyint, smallint, int, bigint): 1, within the type's range;
* date: one day;
* smalldatetime: one minute (it holds whole minutes);
* datetime: one tick of 1/300 s. The server shows ticks as milliseconds ending in 0, 3 or 7
  (.000, .003, .007, .010 ...), so the step is 3 or 4 ms: after .997 comes the next second's
  .000, before .000 the previous second's .997
  (https://learn.microsoft.com/en-us/sql/t-sql/data-types/datetime-transact-sql);
* datetime2(p), p <= 6: 10^(6-p) microseconds;
* datetime2(7) (and datetime2 without a precision, which is datetime2(7)): 100 ns, one digit
  more than Python's datetime keeps
  (https://learn.microsoft.com/en-us/sql/t-sql/data-types/datetime2-transact-sql). A bound
  stands for its whole microsecond: a stream's smallest key `…59.123456` is written
  `…59.1234560` in its CHECK, its largest `…59.123456` as `…59.1234569`, the largest
  datetime2(7) value of that microsecond, in the CHECK and as the RANGE LEFT boundary. A
  7-digit bound given as text is read as its microsecond (its 7th digit dropped on purpose,
  not rounded), so the partitions hold whole microseconds and still tile the keys exactly;
  two streams whose keys meet inside one microsecond are refused by the planner (a stream's
  keys must start above the previous stream's).

Literals in expressions (a CHECK, $PARTITION) are typed: CONVERT(<type>, '<ISO 8601 text>',
<style>), style 23 (yyyy-mm-dd) for date and 126 (yyyy-mm-ddThh:mi:ss[.fff...]) for the
others, which the server reads the same under every SET LANGUAGE and SET DATEFORMAT
(https://learn.microsoft.com/en-us/sql/t-sql/functions/cast-and-convert-transact-sql). Both
are deterministic, so a CHECK holding them is a constant range the switch can compare with the
partition's: CONVERT is nondeterministic only where one side is datetime or smalldatetime, the
other a string, and the style 100 or below other than 20 and 21, or 106, 107, 109 or 113;
style 23 converts to date, never to those two, and they get style 126
(https://learn.microsoft.com/en-us/sql/relational-databases/user-defined-functions/deterministic-and-nondeterministic-functions). A
partition function's boundary values are the same ISO 8601 text (`boundary`), converted by the
server to the function's parameter type.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from switchyard.targets.base import TargetError

_TYPE = re.compile(r"^(tinyint|smallint|int|integer|bigint|date|datetime2|datetime|smalldatetime)(?:\((\d)\))?$")
_TIMESTAMP = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,7}))?)?)?$")
_INTEGER_RANGE = {"tinyint": (0, 255), "smallint": (-2 ** 15, 2 ** 15 - 1), "int": (-2 ** 31, 2 ** 31 - 1),
                  "bigint": (-2 ** 63, 2 ** 63 - 1)}
# Each type's smallest and largest value (datetime2's and date's are Python's own).
_TIME_RANGE = {"datetime": (datetime(1753, 1, 1), datetime(9999, 12, 31, 23, 59, 59, 997000)),
               "smalldatetime": (datetime(1900, 1, 1), datetime(2079, 6, 6, 23, 59)),
               "datetime2": (datetime.min, datetime.max)}
# datetime's ticks within 10 ms, as the server shows them: milliseconds ending in 0, 3, 7.
_DATETIME_MS = (0, 3, 7)


@dataclass(frozen=True)
class KeyType:
    """The partition key's SQL Server type and how its values are stepped and written."""
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

    @property
    def digits(self) -> int:
        """datetime2's fractional digits (7 when not given)."""
        return 7 if self.precision is None else self.precision

    @property
    def declared(self) -> str:
        """The type as CONVERT writes it: datetime2 always with its precision."""
        return f"datetime2({self.digits})" if self.base == "datetime2" else self.base

    # --- values ---------------------------------------------------------------------------
    def value(self, raw: Any) -> int | date | datetime:
        """A bound as a Python value of the key's type (what pyodbc binds as a parameter);
        TargetError when it is not a value the type holds exactly."""
        if self.kind == "integer":
            if isinstance(raw, bool) or not isinstance(raw, int):
                raise TargetError(f"{raw!r} is not an integer bound for a {self.sql_type} key")
            low, high = _INTEGER_RANGE[self.base]
            if not low <= raw <= high:
                raise TargetError(f"{raw} is outside the range of {self.sql_type} ({low}..{high})")
            return raw
        if self.kind == "date":
            if isinstance(raw, datetime):
                raise TargetError(f"{raw!r} is a timestamp, not a date bound for a date key")
            if isinstance(raw, date):
                return raw
            m = _TIMESTAMP.match(str(raw))
            if not m or m.group(4) is not None:
                raise TargetError(f"{raw!r} is not an ISO date (yyyy-mm-dd) bound for a date key")
            try:
                return date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
            except ValueError as exc:
                raise TargetError(f"{raw!r} is not a valid date: {exc}") from None
        if isinstance(raw, datetime):
            if raw.tzinfo is not None:
                raise TargetError(f"{raw!r} has a time zone; a {self.sql_type} key holds none")
            return self._held(raw, raw)
        if isinstance(raw, date):
            return self._held(datetime(raw.year, raw.month, raw.day), raw)
        return self._held(*self._parse(raw))

    def _parse(self, raw: Any) -> tuple[datetime, Any]:
        text = str(raw)
        m = _TIMESTAMP.match(text)
        if not m:
            raise TargetError(f"{raw!r} is not an ISO timestamp (yyyy-mm-ddThh:mm:ss[.fffffff], no time zone) "
                              f"bound for a {self.sql_type} key")
        fraction = m.group(7) or ""
        if len(fraction) == 7 and fraction[6] != "0" and not (self.base == "datetime2" and self.digits == 7):
            raise TargetError(f"{raw!r}: more fractional digits than {self.sql_type} holds")
        try:
            # A 7th digit is datetime2(7)'s: the bound stands for its microsecond (module docstring).
            value = datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4) or 0),
                             int(m.group(5) or 0), int(m.group(6) or 0), int(fraction[:6].ljust(6, "0")))
        except ValueError as exc:
            raise TargetError(f"{raw!r} is not a valid timestamp: {exc}") from None
        return value, raw

    def _held(self, v: datetime, raw: Any) -> datetime:
        """`v` when the key's type holds it exactly, else TargetError saying why."""
        low, high = _TIME_RANGE[self.base]
        if not low <= v <= high:
            raise TargetError(f"{raw!r} is outside the range of {self.sql_type} ({low.isoformat()} .. "
                              f"{high.isoformat()})")
        if self.base == "smalldatetime":
            if v.second or v.microsecond:
                raise TargetError(f"{raw!r}: a smalldatetime holds whole minutes (the server rounds seconds to "
                                  f"the nearest minute): give the bound in whole minutes, or use datetime2")
        elif self.base == "datetime":
            if v.microsecond % 1000 or (v.microsecond // 1000) % 10 not in _DATETIME_MS:
                raise TargetError(f"{raw!r}: a datetime holds 1/300 s ticks, shown as milliseconds ending in 0, 3 "
                                  f"or 7 (the server rounds .998 to .997 and .999 to the next .000): give the bound "
                                  f"as a value datetime holds, or use datetime2(3)")
        elif self.digits < 6 and v.microsecond % (10 ** (6 - self.digits)):
            raise TargetError(f"{raw!r}: more fractional digits than {self.sql_type} holds")
        return v

    def inside_a_microsecond(self, boundary: Any) -> bool:
        """True for a datetime2(7) boundary, read from the catalog as 7-digit text, that is not
        the last 100 ns of its microsecond (`…59.1234560`, a whole second `…59`): Switchyard's
        partitions hold whole microseconds (module docstring), so such a boundary cannot be
        one of theirs, and read as a Python value (6 digits) it would be misplaced."""
        if not (self.base == "datetime2" and self.digits == 7 and isinstance(boundary, str)):
            return False
        m = _TIMESTAMP.match(boundary)
        return m is not None and (m.group(7) or "").ljust(7, "0")[6] != "9"

    # --- neighbours -----------------------------------------------------------------------
    def before(self, raw: Any) -> int | date | datetime:
        """The type's value just below `raw`: the RANGE LEFT boundary under a partition whose
        smallest key is `raw` (one step of the type, module docstring)."""
        return self._step(self.value(raw), -1)

    def after(self, raw: Any) -> int | date | datetime:
        """The type's value just above `raw`: the smallest key of the partition above the RANGE
        LEFT boundary `raw`."""
        return self._step(self.value(raw), +1)

    def _step(self, v: Any, direction: int) -> Any:
        word = "below" if direction < 0 else "above"
        try:
            if self.kind == "integer":
                out = v + direction
            elif self.kind == "date":
                out = v + direction * timedelta(days=1)
            elif self.base == "smalldatetime":
                out = v + direction * timedelta(minutes=1)
            elif self.base == "datetime":
                ms = (v.microsecond // 1000) % 10
                # Ticks: .xx0 -> .xx3 -> .xx7 -> .xx0 of the next 10 ms (+3, +4, +3 ms).
                size = {(0, 1): 3, (3, 1): 4, (7, 1): 3, (0, -1): 3, (3, -1): 3, (7, -1): 4}[(ms, direction)]
                out = v + direction * timedelta(milliseconds=size)
            else:
                out = v + direction * timedelta(microseconds=10 ** max(0, 6 - self.digits))
            return self.value(out)
        except (OverflowError, TargetError):
            raise TargetError(f"{show(v)} is the {'smallest' if direction < 0 else 'largest'} value of "
                              f"{self.sql_type}: the partition layout needs a value {word} it; a stream cannot start "
                              f"or end at the type's limit") from None

    # --- T-SQL ----------------------------------------------------------------------------
    def literal(self, raw: Any, start: bool = False) -> str:
        """The bound as a typed T-SQL literal. For datetime2(7) a bound is its whole microsecond:
        `start` writes its first 100 ns (a CHECK's lower end), otherwise its last (a CHECK's
        upper end, a value inside a partition)."""
        v = self.value(raw)
        if self.kind == "integer":
            return str(v)
        if self.kind == "date":
            return f"CONVERT(date, '{v.year:04d}-{v.month:02d}-{v.day:02d}', 23)"
        return f"CONVERT({self.declared}, '{self.text(v, start)}', 126)"

    def boundary(self, raw: Any) -> str:
        """A RANGE LEFT boundary value as CREATE PARTITION FUNCTION ... FOR VALUES and ALTER
        PARTITION FUNCTION ... SPLIT / MERGE RANGE take it: an integer, or the ISO 8601 text of
        `text` (yyyy-mm-dd for date, with the T for the others), which the server converts to
        the function's parameter type and reads the same under every SET LANGUAGE and SET
        DATEFORMAT (https://learn.microsoft.com/en-us/sql/t-sql/statements/create-partition-function-transact-sql,
        https://learn.microsoft.com/en-us/sql/t-sql/data-types/datetime2-transact-sql#supported-string-literal-formats-for-datetime2)."""
        v = self.value(raw)
        return str(v) if self.kind == "integer" else f"'{self.text(v)}'"

    def param(self, raw: Any, start: bool = False) -> Any:
        """A bound as a query parameter: the Python value, or for time keys the ISO 8601 text
        (`text`) that the query reads with CONVERT(<type>, ?, 126): a driver binds a Python
        datetime with six fractional digits at most."""
        return self.text(raw, start) if self.kind == "timestamp" else self.value(raw)

    def text(self, raw: Any, start: bool = False) -> str:
        """A time bound as ISO 8601 text with the type's fractional digits (as `literal`)."""
        v = self.value(raw)
        if self.kind != "timestamp":
            return show(v)
        head = f"{v.year:04d}-{v.month:02d}-{v.day:02d}T{v.hour:02d}:{v.minute:02d}:{v.second:02d}"
        if self.base == "smalldatetime":
            return head
        if self.base == "datetime":
            return f"{head}.{v.microsecond // 1000:03d}"
        if self.digits == 0:
            return head
        fraction = f"{v.microsecond:06d}"
        if self.digits == 7:
            return f"{head}.{fraction}{'0' if start else '9'}"
        return f"{head}.{fraction[:self.digits]}"


def show(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def key_type(sql_type: str) -> KeyType:
    m = _TYPE.match(sql_type.strip().lower())
    if not m:
        raise TargetError(f"{sql_type!r} is not a partition key type on SQL Server (an integer type, date, "
                          "datetime, smalldatetime or datetime2)")
    base = "int" if m.group(1) == "integer" else m.group(1)
    precision = int(m.group(2)) if m.group(2) is not None else None
    if precision is not None and base != "datetime2":
        raise TargetError(f"{sql_type!r}: only datetime2 takes a precision")
    if precision is not None and precision > 7:
        raise TargetError(f"{sql_type!r}: datetime2 takes a precision of 0 to 7")
    return KeyType(sql_type=sql_type, base=base, precision=precision)
