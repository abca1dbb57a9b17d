"""Partition key values: integers, dates and timestamps, parsed strictly and written one way.

A partition key is of one of three kinds (`spec.key_kind`): `integer`, `date` or
`timestamp` (without time zone). Its values travel in three forms:

* **in JSON** (the manifest, the plan in XCom): an integer as a JSON number; a date as an
  ISO-8601 string `YYYY-MM-DD`; a timestamp as `YYYY-MM-DDTHH:MM:SS` with an optional
  fraction of 1 to 6 digits (a space may stand for the `T`; no time zone, no offset);
* **in Python** (planning, comparing, rendering): `int`, `datetime.date`,
  `datetime.datetime` (naive). `parse_key` is the only way from JSON to Python, `to_json`
  the only way back;
* **in SQL**: a typed literal rendered from the Python value only (never from the text that
  came in), by the target adapter's `lit` (see `targets/base.py`).

One *unit* of a key is the step between two neighbouring values the column can hold: 1 for
integers, 1 day for dates, 1 microsecond for timestamps (10^(6-p) microseconds for a
`timestamp(p)` column with p < 6). A range of keys [lower, upper] is the half-open range
[lower, upper + one unit), which is how PostgreSQL writes a partition's bound.
"""
from __future__ import annotations

import hashlib
import re
from datetime import date, datetime, timedelta
from typing import Any, Union

KeyValue = Union[int, date, datetime]
JsonKey = Union[int, str]

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_TIMESTAMP = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d{1,6})?$")
# How the messages write the form a timestamp key takes: as a file or a manifest most often has it.
_TIMESTAMP_FORM = "YYYY-MM-DD HH:MM:SS[.ffffff], a T or a space between date and time"
_ZONE = re.compile(r"[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)$")
_PRECISION = re.compile(r"\((\d)\)\s*$")
# The longest name PostgreSQL and SQL Server both keep (PostgreSQL truncates at 63 bytes).
MAX_NAME = 63
# The largest value of each integer type a key can have (PostgreSQL's and SQL Server's names):
# a range's exclusive end one above it is no value of the type.
_INT_MAX = {"tinyint": 255, "smallint": 2**15 - 1, "int2": 2**15 - 1, "int": 2**31 - 1, "integer": 2**31 - 1,
            "int4": 2**31 - 1, "bigint": 2**63 - 1, "int8": 2**63 - 1}


class KeyValueError(ValueError):
    """A key value that is not of its key's kind; the message says what was expected."""


def parse_key(kind: str, raw: Any) -> KeyValue:
    """The Python value of a key given in JSON, strictly: an integer for `integer`, an ISO-8601
    string for `date` and `timestamp` (see the module's docstring). Raises KeyValueError."""
    if kind == "integer":
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise KeyValueError(f"expected an integer, found {raw!r}")
        return raw
    if kind == "date":
        if isinstance(raw, datetime) or not isinstance(raw, (str, date)):
            raise KeyValueError(f"expected an ISO-8601 date string (YYYY-MM-DD), found {raw!r}")
        if isinstance(raw, date):
            return raw
        if not _DATE.match(raw):
            raise KeyValueError(f"{raw!r} is not an ISO-8601 date (YYYY-MM-DD)")
        try:
            return date.fromisoformat(raw)
        except ValueError as exc:
            raise KeyValueError(f"{raw!r} is not a valid date: {exc}") from None
    if kind == "timestamp":
        if isinstance(raw, datetime):
            if raw.tzinfo is not None:
                raise KeyValueError(f"{raw!r} has a time zone; timestamp keys are without time zone")
            return raw
        if not isinstance(raw, str):
            raise KeyValueError(f"expected an ISO-8601 timestamp string ({_TIMESTAMP_FORM}), "
                            f"found {raw!r}")
        if _ZONE.search(raw) and not _TIMESTAMP.match(raw):
            raise KeyValueError(f"{raw!r} has a time zone or offset; timestamp keys are without time zone "
                            f"(write the local time as {_TIMESTAMP_FORM})")
        m = _TIMESTAMP.match(raw)
        if not m:
            raise KeyValueError(f"{raw!r} is not an ISO-8601 timestamp ({_TIMESTAMP_FORM})")
        fraction = (m.group(3) or ".")[1:].ljust(6, "0")
        try:
            day = date.fromisoformat(m.group(1))
            hh, mm, ss = (int(x) for x in m.group(2).split(":"))
            return datetime(day.year, day.month, day.day, hh, mm, ss, int(fraction))
        except ValueError as exc:
            raise KeyValueError(f"{raw!r} is not a valid timestamp: {exc}") from None
    raise KeyValueError(f"unknown key kind {kind!r} (integer, date or timestamp)")


def kind_of(value: KeyValue) -> str:
    """integer, date or timestamp: the kind of a Python key value."""
    if isinstance(value, bool):
        raise KeyValueError(f"{value!r} is not a key value")
    if isinstance(value, int):
        return "integer"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, date):
        return "date"
    raise KeyValueError(f"{value!r} is not a key value (int, datetime.date or datetime.datetime)")


def to_json(value: KeyValue | None) -> JsonKey | None:
    """A key value as it travels in JSON: the integer itself, or its ISO-8601 text."""
    if value is None:
        return None
    kind = kind_of(value)
    if kind == "integer":
        return value
    if kind == "date":
        return value.isoformat()
    return value.isoformat(sep="T", timespec="microseconds" if value.microsecond else "seconds")


def step(kind: str, sql_type: str | None = None) -> int | timedelta:
    """One unit of the key: 1, 1 day, or 1 microsecond (10^(6-p) us for timestamp(p), p < 6)."""
    if kind == "integer":
        return 1
    if kind == "date":
        return timedelta(days=1)
    if kind == "timestamp":
        m = _PRECISION.search(sql_type or "")
        digits = min(int(m.group(1)), 6) if m else 6
        return timedelta(microseconds=10 ** (6 - digits))
    raise KeyValueError(f"unknown key kind {kind!r}")


def after(value: KeyValue, sql_type: str | None = None) -> KeyValue:
    """The smallest key above `value` (value + one unit): the exclusive end of a range. For an
    integer at its type's largest value that is one past the type (see `past_the_type`); a date
    or timestamp on 9999-12-31 has no day after it here (KeyValueError)."""
    kind = kind_of(value)
    aligned(value, sql_type)
    try:
        return value + step(kind, sql_type)
    except OverflowError:
        raise KeyValueError(f"{to_json(value)} is on the last day a {kind} key holds here (9999-12-31): "
                            f"a partition's range ends after its last key, and no day comes after it") from None


def past_the_type(value: KeyValue, sql_type: str | None) -> bool:
    """True for an integer above the largest value an integer column of `sql_type` holds: the
    exclusive end of a range whose last key is the type's largest, which no literal of the
    type can say (PostgreSQL's bound is MAXVALUE there)."""
    if kind_of(value) != "integer" or not sql_type:
        return False
    largest = _INT_MAX.get(sql_type.partition("(")[0].strip().lower())
    return largest is not None and value > largest


def before(value: KeyValue, sql_type: str | None = None) -> KeyValue:
    """The largest key below `value` (value - one unit): e.g. the RANGE LEFT boundary below a
    partition whose smallest key is `value`."""
    kind = kind_of(value)
    aligned(value, sql_type)
    return value - step(kind, sql_type)


def aligned(value: KeyValue, sql_type: str | None = None) -> KeyValue:
    """`value` itself when a column of `sql_type` holds it exactly; KeyValueError when the column
    would round it (a timestamp with more fractional digits than timestamp(p) keeps)."""
    if isinstance(value, datetime):
        unit = step("timestamp", sql_type)
        if value.microsecond % (unit // timedelta(microseconds=1)):
            raise KeyValueError(f"{to_json(value)} has more fractional digits than a {sql_type} column keeps")
    return value


def name_part(value: KeyValue) -> str:
    """A key value as it appears in a partition's name: 42, m42 for -42, 20260131 for a date,
    20260131235959 for a timestamp (20260131235959999999 with microseconds)."""
    kind = kind_of(value)
    if kind == "integer":
        return f"m{-value}" if value < 0 else str(value)
    if kind == "date":
        return value.strftime("%Y%m%d")
    return value.strftime("%Y%m%d%H%M%S") + (f"{value.microsecond:06d}" if value.microsecond else "")


def partition_name(table: str, lower: KeyValue, upper: KeyValue) -> str:
    """`<table>_<lower>_<upper>`, e.g. orders_1_20000 or events_20260101_20260131: a valid
    identifier that names the range. Longer than 63 characters, it becomes the first 50 of
    the table's name and a hash of the full name (still one name per range)."""
    name = f"{table}_{name_part(lower)}_{name_part(upper)}"
    if len(name) <= MAX_NAME:
        return name
    return f"{table[:50]}_{hashlib.sha1(name.encode()).hexdigest()[:12]}"


def ansi_literal(value: KeyValue) -> str:
    """A typed SQL literal in the SQL standard's form, from a Python value only: 42,
    DATE '2026-01-31', TIMESTAMP '2026-01-31 23:59:59.999999'. PostgreSQL takes these as
    they are; the text inside the quotes is produced here from the value's fields, so
    nothing from outside reaches the SQL text."""
    kind = kind_of(value)
    if kind == "integer":
        return str(int(value))
    if kind == "date":
        return f"DATE '{value.year:04d}-{value.month:02d}-{value.day:02d}'"
    return (f"TIMESTAMP '{value.year:04d}-{value.month:02d}-{value.day:02d} "
            f"{value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}'")
