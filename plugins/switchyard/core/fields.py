"""A stream file's fields against their columns' types, read as text the way the loads read it,
so that `switchyard check` names a bad field (file, line, column) before any load instead of the
load failing on it.

Checked, on every target the spec declares a type for: the record's field count; a field in a
NOT NULL column or one that is not the NULL marker, against an integer type (digits, the type's
range), a decimal type (a number, no more integer digits than its precision leaves and no more
digits after the point than its scale keeps: the servers round those away silently; a number
with an exponent counted as the digits it stands for), a floating
point type (a number), a date or time type written as ISO 8601 (a real calendar date, a real
time of day, and nothing finer than the type keeps: the servers round a time to their precision
and drop a date's time of day silently; no time zone after it, which both drop silently from a
type without one; not `now`, `today` and the like, which PostgreSQL reads as the load's own
time), a character type with a length (no more characters than that; `char(n)` may pad past it),
a boolean (the words its type reads: PostgreSQL's boolean more than SQL Server's bit).
Other forms of dates and times, and other types, are left to the load: the server decides those.
"""
from __future__ import annotations

import math
import re
import struct
from datetime import date, datetime, timezone
from functools import lru_cache
from typing import Callable, Sequence

from switchyard.core.spec import NEUTRAL, Table

# ASCII digits only (re.ASCII): Python reads other scripts' digits (`١٢`) as numbers, the servers
# refuse them at the load.
_INTEGER = re.compile(r"^[+-]?\d+$", re.ASCII)
_NUMBER = re.compile(r"^[+-]?(\d*)(?:\.(\d*))?(?:[eE][+-]?\d+)?$", re.ASCII)
# A point after the seconds with no digits after it is the same time (`10:00:00.`).
_ISO_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d*)?)?))?$", re.ASCII)
_ISO_TIME = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d*))?)?$", re.ASCII)
# An ISO 8601 date, timestamp or time of day followed by a time zone: an offset (Z, +02, -0530,
# +05:30) or a zone's name or abbreviation (UTC, CET, Europe/Paris). AD and BC are eras, AM and
# PM halves of the day (`10:00 pm` is 22:00 on both servers), `allballs` PostgreSQL's word for
# midnight: none of them a zone.
_ZONED = re.compile(r"^(\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d*)?)?)?|\d{2}:\d{2}(?::\d{2}(?:\.\d*)?)?)"
                    r"\s*(Z|[+-]\d{1,2}(?::?\d{2}){0,2}|(?!(?:AD|BC|AM|PM|ALLBALLS)$)[A-Za-z][A-Za-z0-9_/+-]*)$",
                    re.IGNORECASE)
# Words PostgreSQL reads as the time of the statement that reads them: a row would hold when it
# was loaded (and a rerun another value), not a value of the file.
_LOAD_TIME = {"now", "today", "tomorrow", "yesterday"}
# Dates PostgreSQL reads in forms of its own, as a date the file does not write: `epoch`
# (1970-01-01 00:00:00), a Julian day (`J2461011`), a year of two digits (`26-12-05` is
# 2026-12-05 by a guess of the century, `261205` too). SQL Server refuses each of them.
_EPOCH = "epoch"
_JULIAN = re.compile(r"^j\s*\d", re.IGNORECASE | re.ASCII)
_FULL_YEAR = re.compile(r"(?<!\d)(\d{4}|\d{8})(?!\d)", re.ASCII)
# The forms other than ISO 8601 the check reads, whole, and passes where PostgreSQL and SQL Server
# store what they say: the year first, or a month's name; a time of day `H:MM[:SS[.f]]` with a
# half of the day, or ISO 8601's basic `HHMM[SS[.f]]`; an era (PostgreSQL's own types); a zone
# of the spellings every reader takes alike (Z, UTC, GMT, `+05`, `+0530`, `+05:30`, a region's
# name `Europe/Paris`). Any other form is refused: PostgreSQL reads `10:30.5` as 00:10:30.5,
# `1:2:3.5` rounded, `24:0` as the next day, `2026-01-05TT10:00` at midnight, `UTC+5` five hours
# west, `IST` as Israel's, a word with anything after it as the load's own time, all without an error.
_MONTHS = ("jan|january|feb|february|mar|march|apr|april|may|jun|june|jul|july|aug|august|sep|sept|september|"
           "oct|october|nov|november|dec|december")
_MONTH_NUMBER = {name: i for i, names in enumerate(
    [("jan", "january"), ("feb", "february"), ("mar", "march"), ("apr", "april"), ("may",), ("jun", "june"),
     ("jul", "july"), ("aug", "august"), ("sep", "sept", "september"), ("oct", "october"), ("nov", "november"),
     ("dec", "december")], start=1) for name in names}
_ZONE_SPELLINGS = r"Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?|[A-Za-z]+/[A-Za-z_]+(?:/[A-Za-z_]+)?"
_ZONE_OK = re.compile(f"(?:{_ZONE_SPELLINGS})", re.ASCII | re.IGNORECASE)
_CLOCK_FORM = (r"(?:(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<sec>\d{2})(?:\.(?P<f>\d+))?)?(?:\s*(?P<ap>[ap])\.?m\.?)?"
               r"|(?P<bh>\d{2})(?P<bmi>\d{2})(?:(?P<bsec>\d{2})(?:\.(?P<bf>\d+))?)?)")
_OTHER_FORM = re.compile(
    r"(?:(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*,?\s+)?"        # a weekday (RFC 1123's dates), which the day says
    r"(?:(?P<y>\d{4})(?P<sep>[-/.])(?P<m>\d{1,2})(?P=sep)(?P<d>\d{1,2})"
    r"|(?P<y8>\d{4})(?P<m8>\d{2})(?P<d8>\d{2})"
    rf"|(?P<mon>{_MONTHS})\.?\s+(?P<dm>\d{{1,2}}),?\s+(?P<ym>\d{{4}})"
    rf"|(?P<dn>\d{{1,2}})(?:\s+|-)(?P<mon2>{_MONTHS})\.?(?:\s+|-)(?P<yn>\d{{4}})"
    rf"|(?P<yd>\d{{4}})-(?P<mon3>{_MONTHS})-(?P<dd>\d{{1,2}}))"
    rf"(?:(?:T|\s+)(?P<clock>{_CLOCK_FORM}))?"
    rf"(?:\s*(?P<zone>{_ZONE_SPELLINGS}))?(?:\s+(?P<era>AD|BC))?",
    re.ASCII | re.IGNORECASE)
_TIME_FORM = re.compile(_CLOCK_FORM, re.ASCII | re.IGNORECASE)
_TYPE = re.compile(r"^\s*([a-z][a-z0-9 ]*?)\s*(?:\(\s*(max|\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")
# PostgreSQL's spelling of a time type's precision before its zone: `timestamp(3) with time zone`.
_PRECISION_FIRST = re.compile(r"^\s*(time|timestamp)\s*(\(\s*\d+\s*\))\s*(with(?:out)?\s+time\s+zone)\s*$")
_INT_BITS = {"smallint": 16, "int2": 16, "integer": 32, "int": 32, "int4": 32, "bigint": 64, "int8": 64,
             # PostgreSQL's serial types are these integers with a default: a file's value goes in as written.
             "smallserial": 16, "serial2": 16, "serial": 32, "serial4": 32, "bigserial": 64, "serial8": 64}
# The whitespace PostgreSQL's and SQL Server's number inputs skip around a number (C's isspace):
# Python's str.strip() takes more (U+001C-U+001F, U+00A0, ...), which the servers refuse.
_C_SPACE = " \t\n\r\v\f"
_DECIMAL = {"numeric", "decimal", "dec"}
_FLOAT = {"real", "float", "float4", "float8", "double precision"}
_DATES = {"date", "timestamp", "timestamp without time zone", "datetime", "datetime2", "smalldatetime"}
_TIMES = {"time", "time without time zone"}
# Types that keep an instant: a zone after the time is read, not dropped.
_ZONED_DATES = {"timestamptz", "timestamp with time zone", "datetimeoffset"}
# PostgreSQL's time of day with its zone's offset: it reads an offset, and a zone's name only
# through a date it then drops (`10:00 Europe/Paris` is refused by its load, `10:00 EST` is -05).
_ZONED_TIMES = {"timetz", "time with time zone"}
_OFFSET = re.compile(r"Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?", re.ASCII | re.IGNORECASE)
# Digits after the second's point a type keeps where it is given no precision.
_FRACTION = {"timestamp": 6, "timestamp without time zone": 6, "timestamptz": 6, "timestamp with time zone": 6,
             "datetimeoffset": 7, "datetime2": 7, "time": 6,
             "time without time zone": 6, "timetz": 6, "time with time zone": 6, "datetime": 3, "smalldatetime": 0}
# A type for every target is kept to microseconds at most: PostgreSQL's finest, where SQL
# Server's datetime2(7) and time(7) keep a seventh digit only as a target's own type.
_NEUTRAL_FRACTION = 6
# SQL Server's date and time types hold no era and no infinity: `infinity`, `-infinity` and a
# date BC, which PostgreSQL stores, are refused by SQL Server's load. A type for every target
# takes only what both keep, as with booleans; so does a type of SQL Server's own, whose load
# would refuse the field after other loads ran. Years outside a type's range likewise.
_ERA = re.compile(r"\s(?:BC|AD)$", re.IGNORECASE)
_INFINITIES = {"infinity", "-infinity", "+infinity"}
_MSSQL_DATES = {"datetime2", "datetime", "smalldatetime"}
_RANGES = {"datetime": (date(1753, 1, 1), date(9999, 12, 31)), "smalldatetime": (date(1900, 1, 1), date(2079, 6, 6))}
_CHARS = {"varchar", "character varying", "nvarchar", "char", "character", "nchar"}
# The fields each boolean type reads, letter case aside. PostgreSQL's boolean: true, yes, on, 1
# and false, no, off, 0, a word's unique prefix too (`t`, `ye`, `of`), spaces around it ignored
# (the boolean type's reference, "Boolean Type"). SQL Server's bit: 1, 0, TRUE and FALSE (the bit
# reference: "The string values TRUE and FALSE can be converted to bit values"); any other
# number converts to 1 without an error, so only 1 and 0 pass. A type for every target (`boolean`,
# SQL Server's bit there) takes what both read alike.
_PG_TRUE, _PG_FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
_BOOLEANS = {
    **{name: frozenset(word[:n] for word in _PG_TRUE + _PG_FALSE for n in range(1, len(word) + 1)
                       if word[:n] not in ("o",)) for name in ("boolean", "bool")},
    "bit": frozenset({"1", "0", "true", "false"}),
}
_PG_BOOLEAN_NAMES = "true, yes, on, 1, false, no, off, 0 or a prefix of one"
_BOOLEAN_NAMES = {"boolean": _PG_BOOLEAN_NAMES, "bool": _PG_BOOLEAN_NAMES, "bit": "1, 0, true or false"}
_NEUTRAL_BOOLEAN = frozenset({"true", "false", "1", "0"})

Check = Callable[[str], "str | None"]
# A byte the file's encoding does not decode, as the batch reader keeps it (surrogateescape).
_NOT_DECODED = re.compile("[\udc80-\udcff]")


def _type_match(sql_type: str) -> re.Match | None:
    """The type's name, size and scale (_TYPE's groups), the precision read where PostgreSQL also
    writes it, before `with time zone`: `timestamp(3) with time zone` is `timestamp with time zone(3)`."""
    lowered = sql_type.lower()
    first = _PRECISION_FIRST.match(lowered)
    return _TYPE.match(f"{first[1]} {' '.join(first[3].split())}{first[2]}" if first else lowered)


def field_check(sql_type: str, neutral: bool = False, fast: bool = True,
                money_digits: int | None = None) -> Check | None:
    """A function that says what is wrong with a field for `sql_type` (None: nothing), or None
    where this module leaves the type to the load. `neutral`: the type is the one for every target.
    `fast`: a field of the common well-formed shapes passes on one pattern match (`_accepts`).
    `money_digits`: the digits after the point the target's money keeps, where the caller knows
    its target (a load); a target's own money is not checked for them otherwise."""
    m = _type_match(sql_type)
    if not m:
        return None
    check = _full_check(sql_type, m.group(1), m.group(2), m.group(3), neutral, money_digits)
    accepts = _accepts(m.group(1), m.group(2), m.group(3), neutral, money_digits) if fast and check else None
    if accepts is None:
        return check
    pattern = re.compile(accepts)

    def passed_or_checked(text: str) -> str | None:
        return None if pattern.fullmatch(text) else check(text)
    return passed_or_checked


def passing_pattern(sql_type: str, neutral: bool, char: str) -> str | None:
    """A pattern of fields that `field_check(sql_type, neutral)` passes, every one of them, with
    `char` the pattern of one character of a text field: the common well-formed shapes
    (`_accepts`), any text where the check leaves the type to the load, up to n characters in a
    character type of length n. None where only the full check can tell."""
    m = _type_match(sql_type)
    if not m or _full_check(sql_type, *m.groups(), neutral) is None:
        return f"{char}*"
    base, size, scale = m.groups()
    if base in _CHARS and size and size != "max":
        return f"{char}{{0,{int(size)}}}"
    return _accepts(base, size, scale, neutral)


def is_money(sql_type: str) -> bool:
    """Whether `sql_type` is a money type, whose digits after the point are the target's to say."""
    m = _type_match(sql_type)
    return bool(m) and m.group(1) in ("money", "smallmoney")


def reads_as_flag(sql_type: str, text: str) -> bool:
    """Whether `text` is a true/false value of a boolean type (`sql_type` boolean, bool or bit):
    a line whose field in such a column reads so is more likely a record than a header, whose
    name for the column (`eu_member`, `active`) is no such word."""
    m = _type_match(sql_type)
    return bool(m) and m.group(1) in _BOOLEANS and text.strip().lower() in _BOOLEANS[m.group(1)]


def reads_as_value(sql_type: str, text: str) -> bool:
    """Whether `text` is written as a value of `sql_type` that no column's name can be: a number
    in a number type, an ISO 8601 date or time in a date or time type. A line whose field is one
    is a record, not a header line."""
    m = _type_match(sql_type)
    base = m.group(1) if m else ""
    if base in _INT_BITS or base in ("tinyint", *_DECIMAL, *_FLOAT):
        return bool(_NUMBER.match(text.strip())) and any(ch.isdigit() for ch in text)
    if base in _DATES:
        return bool(_ISO_DAY.match(text.strip()))
    if base in _TIMES:
        return bool(_ISO_TIME.match(text.strip()))
    return False


def _accepts(base: str, size: str | None, scale: str | None, neutral: bool,
             money_digits: int | None = None) -> str | None:
    """A pattern of the common well-formed fields of the type, each of which the full check
    passes (tests/unit/test_batch_tools.py compares the two on every shape of field it makes);
    None where the full check is as quick. About half a plan's read of a batch is these checks.
    ASCII digits only: the full check reads other scripts' digits too, and the load refuses them."""
    if base in _INT_BITS or base == "tinyint":
        high = 255 if base == "tinyint" else 2 ** (_INT_BITS[base] - 1) - 1
        # Fewer digits than the largest value: inside the range either side of zero.
        return ("" if base == "tinyint" else "[+-]?") + rf"[0-9]{{1,{len(str(high)) - 1}}}"
    if base in _DECIMAL and size and size != "max" and int(size) > int(scale or 0):
        whole, kept = int(size) - int(scale or 0), int(scale or 0)
        return rf"[+-]?[0-9]{{1,{whole}}}" + (rf"(\.[0-9]{{1,{kept}}})?" if kept else "")
    if base in ("money", "smallmoney"):
        # The digits after the point a money keeps where known (_money_kept), SQL Server's 4 else.
        kept = _money_kept(neutral, money_digits)
        kept = 4 if kept is None else kept
        return r"[+-]?[0-9]{1,15}" + (rf"(\.[0-9]{{1,{kept}}})?" if kept else "")
    # A real calendar day (29 February in a leap year) in a year the type holds (datetime's
    # start in 1753: _RANGES).
    year = r"(175[3-9]|17[6-9][0-9]|1[89][0-9]{2}|[2-9][0-9]{3})" if base == "datetime" else r"(?!0000)[0-9]{4}"
    leap = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)"
    day = (rf"({year}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
           rf"|02-(0[1-9]|1[0-9]|2[0-8]))|(?={year}-){leap}-02-29)")
    # datetime's milliseconds and smalldatetime's seconds have rules of their own: the full check.
    kept = _kept_fraction(base, size, neutral)[0] if base in _FRACTION and base != "datetime" else 0
    clock = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9]" + (rf"(\.[0-9]{{1,{kept}}})?" if kept else "") + ")?"
    if base == "date":
        return day
    if base in _DATES and base != "smalldatetime":
        return rf"{day}([T ]{clock})?"
    if base in _TIMES:
        return clock
    return None


def kept_pattern(sql_type: str, neutral: bool = False, money_digits: int | None = None) -> str | None:
    """A pattern (ASCII) of fields of `sql_type` that no server changes as it reads them: each is
    kept as written, or refused with an error the load reports (`2026-02-30`, `1e`, digits past
    the precision). None where the type has no field a server changes without an error, as far
    as this module knows (text, PostgreSQL's own boolean). A number (PostgreSQL 16 reads `0x1F`
    into an integer as 31, `0o7`, `0b11` and `1_000` too, `0x10` into a float or a numeric as 16),
    a date or time type and a boolean SQL Server reads (its bit turns any number but 0 into 1; a
    boolean for every target takes what both read alike) have: core/value_guard.py reads the
    fields this pattern does not take with the full check.

    Looser than `_accepts` where the server refuses anyway, and as tight where it would not:
    a decimal's digits after the point up to its scale (trailing zeros past it are the same
    number); a date alone; a time of day 00:00-23:59:59 with the fraction its type keeps; no
    zone, no word. tests/integration/test_exact_loads.py puts each shape through the server."""
    m = _type_match(sql_type)
    if not m or _full_check(sql_type, m.group(1), m.group(2), m.group(3), neutral, money_digits) is None:
        return None
    base, size, scale = m.groups()
    if base in _DECIMAL and size and size != "max":
        return r"[+-]?[0-9]*" + _digits_after_point(int(scale or 0))
    if base in ("money", "smallmoney"):
        # PostgreSQL's money reads `$12`, `(12)`, `12-` and an empty field (as 0.00): the full check.
        kept = _money_kept(neutral, money_digits)
        return r"[+-]?[0-9]+" + (_digits_after_point(kept) if kept is not None else r"(?:\.[0-9]*)?")
    if base in _DECIMAL or base in _FLOAT:
        # Decimal digits: PostgreSQL reads `0x10` as 16 into either type and `inf` into numeric,
        # which the full check refuses (a float's `inf` and `nan` it passes for PostgreSQL's own
        # type, as the server reads them, and refuses for a type for every target).
        return r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    if base == "tinyint":
        return r"(?:1?[0-9]{1,2}|2[0-4][0-9]|25[0-5])"     # 0-255; the rest to the full check
    if base in _INT_BITS:
        return r"[+-]?[0-9]+"       # out of the type's range: the load's error
    if base in _BOOLEANS:
        return r"(?i:true|false|1|0)" if neutral or base == "bit" else None
    if base not in _DATES and base not in _TIMES and base not in _ZONED_DATES and base not in _ZONED_TIMES:
        return None
    if base == "smalldatetime":
        fraction = r"(?::00(?:\.0*)?)?"
    elif base == "datetime":
        fraction = r"(?::[0-5][0-9](?:\.0*)?)?"      # its 1/300 s rule: the full check
    else:
        fraction = r"(?::[0-5][0-9]" + _digits_after_point(_kept_fraction(base, size, neutral)[0]) + ")?"
    clock = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]" + fraction
    day = r"[0-9]{4}-[0-9]{2}-[0-9]{2}"
    if base == "date":
        # A date alone, or at midnight as exports of a timestamp write it (no time of day dropped).
        return day + r"(?:[T ]00:00(?::00(?:\.0*)?)?)?"
    if base in _TIMES:
        return clock
    if base in _ZONED_TIMES:
        return rf"{clock}(?: ?(?:Z|[+-][0-9]{{2}}(?::?[0-9]{{2}})?))?"
    if base in _ZONED_DATES:
        return rf"{day}(?:[T ]{clock})?(?: ?(?:Z|[+-][0-9]{{2}}(?::?[0-9]{{2}})?))?"
    return rf"{day}(?:[T ]{clock})?"


def _digits_after_point(kept: int) -> str:
    """A point and up to `kept` digits, then zeros only (the same number, the same time), or none."""
    return rf"(?:\.[0-9]{{0,{kept}}}0*)?" if kept else r"(?:\.0*)?"


def _money_kept(neutral: bool, money_digits: int | None) -> int | None:
    """The digits after the point a money field keeps: PostgreSQL's money keeps its locale's
    (lc_monetary: 2 for most, 0 for yen), SQL Server's 4; a money for every target keeps what
    both do, 2 at most. None: not known here (a target's own money, its target not given)."""
    kept = [d for d in (2 if neutral else None, money_digits) if d is not None]
    return min(kept) if kept else None


def _full_check(sql_type: str, base: str, size: str | None, scale: str | None, neutral: bool,
                money_digits: int | None = None) -> Check | None:
    """The check of a field for the type, in full (`field_check`)."""
    if base in _INT_BITS or base == "tinyint":
        low, high = (0, 255) if base == "tinyint" else (-2 ** (_INT_BITS[base] - 1), 2 ** (_INT_BITS[base] - 1) - 1)

        def integer(text: str) -> str | None:
            if not _INTEGER.match(text.strip(_C_SPACE)):
                return f"not an integer ({sql_type})"
            value = int(text.strip(_C_SPACE))
            return None if low <= value <= high else f"outside the range of {sql_type} ({low}..{high})"
        return integer
    if base in _DECIMAL or base in ("money", "smallmoney"):
        # A scale above the precision (PostgreSQL's numeric(3,5)) leaves no digit before the point.
        whole = max(int(size) - int(scale or 0), 0) if size and size != "max" and base in _DECIMAL else None
        # The digits a declared scale keeps (`numeric(12)` keeps none), or a money (_money_kept):
        # the servers round the rest away as they read the field, without an error.
        kept = (int(scale or 0) if size and size != "max" and base in _DECIMAL
                else _money_kept(neutral, money_digits) if base in ("money", "smallmoney") else None)

        def decimal(text: str) -> str | None:
            text = text.strip(_C_SPACE)
            n = _NUMBER.match(text)
            if not n or not (n.group(1) or n.group(2)):
                return f"not a decimal number ({sql_type})"
            if "e" in text.lower():
                # PostgreSQL reads an exponent into numeric and rounds it to the scale like any
                # other number (1.23456e1 into numeric(10,3) is 12.346, 1e-4 is 0.000): the
                # digits it stands for are counted as written out.
                try:
                    before, after = _digit_counts(text.strip())
                except ArithmeticError:     # an exponent past what any server reads
                    return f"an exponent out of range ({sql_type})"
            else:
                before, after = len(n.group(1).lstrip("0")), len((n.group(2) or "").rstrip("0"))
            if whole is not None and before > whole:
                return f"{before} digits before the point, {sql_type} holds {whole}"
            if kept is not None and after > kept:
                return (f"{after} digits after the point, {sql_type} keeps {kept}: the load would round "
                        f"it to another value without an error")
            return None
        return decimal
    if base in _BOOLEANS:
        accepted = _BOOLEANS[base] if not neutral else _NEUTRAL_BOOLEAN
        named = ("true, false, 1 or 0, which every target reads alike; a type for PostgreSQL alone, "
                 "{postgres: boolean}, takes its t, f, yes, no, on and off too" if neutral else _BOOLEAN_NAMES[base])

        def boolean(text: str) -> str | None:
            value = text if neutral or base == "bit" else text.strip()
            return None if value.lower() in accepted else f"not a boolean ({sql_type}: {named})"
        return boolean
    if base in _FLOAT:
        # real, float4 and float(1..24) are 4 bytes; the rest 8 (PostgreSQL's and SQL Server's float(n)).
        single = base in ("real", "float4") or (base == "float" and size is not None and size.isdigit()
                                                 and int(size) <= 24)

        def floating(text: str) -> str | None:
            if not text.isascii() or "_" in text:
                # Python reads other scripts' digits and `1_000.5`; the servers refuse both.
                return f"not a number ({sql_type})"
            try:
                value = float(text)
            except ValueError:
                return f"not a number ({sql_type})"
            if neutral and not any(ch.isdigit() for ch in text):
                # `NaN`, `inf`: PostgreSQL keeps them, SQL Server's float holds neither (its load
                # would refuse the field after other loads ran).
                return (f"{text.strip()}: SQL Server's float holds no NaN or infinity; {sql_type} as the type for "
                        f"every target takes only values both servers keep (a PostgreSQL type of its own, "
                        f"{{postgres: {sql_type}}}, takes them)")
            return _float_range_problem(text, value, sql_type, single)
        return floating
    if base in _DATES or base in _TIMES or base in _ZONED_DATES or base in _ZONED_TIMES:
        return _when(sql_type, base, size, neutral)
    if base in _CHARS and size and size != "max":
        limit, padded = int(size), base in ("char", "character", "nchar")

        def characters(text: str) -> str | None:
            over = text[limit:]
            if len(text) <= limit or (padded and not over.strip(" ")):
                return None
            return f"{len(text)} characters, {sql_type} holds {limit}"
        return characters
    return None


def _float_range_problem(text: str, value: float, sql_type: str, single: bool) -> str | None:
    """A number past the float type's range, or so small it would be 0 (the servers refuse both:
    PostgreSQL's float input says "out of range"), which Python reads as infinity or 0.0."""
    if math.isnan(value) or (math.isinf(value) and not any(ch.isdigit() for ch in text)):
        return None     # a word: `NaN`, `inf`, `-Infinity`, as the server reads it
    try:
        kept = struct.unpack("f", struct.pack("f", value))[0] if single else value
    except OverflowError:
        kept = math.inf
    if math.isinf(kept):
        return f"{text.strip()} is out of the range of {sql_type}: the load would refuse it"
    mantissa = text.strip().lower().split("e")[0]
    if kept == 0 and any(ch in "123456789" for ch in mantissa):
        return f"{text.strip()} is too small for {sql_type} (it would be 0): the load would refuse it"
    return None


def _digit_counts(text: str) -> tuple[int, int]:
    """The digits a number with an exponent stands for before and after the point, as written out
    without leading or trailing zeros: `1.23456e1` (12.3456) is (2, 4), `1e-4` (0.0001) is (0, 4).
    Counted, never written out: `1e999999999` is a billion digits."""
    from decimal import Decimal
    # as_tuple() applies no context: no rounding, no overflow, whatever the exponent.
    _, digits, exponent = Decimal(text).as_tuple()
    written = "".join(map(str, digits)).lstrip("0")
    if not written:
        return 0, 0
    significant = written.rstrip("0")
    exponent += len(written) - len(significant)
    if exponent >= 0:
        return len(significant) + exponent, 0
    return max(len(significant) + exponent, 0), -exponent


def _kept_fraction(base: str, size: str | None, neutral: bool, sql_type: str = "") -> tuple[int, str]:
    """The digits after the second's point the type keeps, and how a message names the type."""
    kept = int(size) if size and size.isdigit() else _FRACTION.get(base, 0)
    named = sql_type if size or base in ("datetime", "smalldatetime") else f"{sql_type} (no precision given)"
    if neutral and kept > _NEUTRAL_FRACTION:
        kept, named = _NEUTRAL_FRACTION, f"{sql_type} as the type for every target"
    return kept, named


def _when(sql_type: str, base: str, size: str | None, neutral: bool) -> Check:
    """The check of a date, a timestamp or a time of day written as ISO 8601."""
    kept, named = _kept_fraction(base, size, neutral, sql_type)
    both = neutral or base in _MSSQL_DATES      # SQL Server reads it: no era, no infinity

    def when(text: str) -> str | None:
        field = text.strip()
        zoned, region = _ZONED.match(field), None
        if zoned and base in _ZONED_TIMES and not _OFFSET.fullmatch(zoned.group(2)):
            return _zone_unread(zoned.group(2), offset_only=True)
        if zoned and (base in _ZONED_DATES or base in _ZONED_TIMES):
            if not _ZONE_OK.fullmatch(zoned.group(2)):
                return _zone_unread(zoned.group(2))
            problem = _zone_out_of_reach(zoned.group(2), base, neutral)
            if problem:
                return problem
            region = zoned.group(2) if "/" in zoned.group(2) else None
            field, zoned = zoned.group(1), None      # its zone is read: the time before it is checked
        if zoned:
            # PostgreSQL ignores a zone in a value of a type without one, without an error
            # ("silently ignore any time zone indication", Date/Time Types, Time Stamps), and SQL
            # Server's conversion of such a string to datetime2, datetime, date or time drops it
            # (the datetimeoffset reference's example casts one string to each type).
            return (f"a time zone ({zoned.group(2)}): {sql_type} keeps none, the load would drop it without an "
                    f"error and keep {zoned.group(1)}; write every time in one zone without it, or declare a "
                    f"type with a zone")
        if field.lower() in _LOAD_TIME:
            return ("a word PostgreSQL reads as the load's own date or time: the row would hold when it was "
                    "loaded, not a value of the file")
        era = _ERA.search(field) if both else None
        if both and (field.lower() in _INFINITIES or era):
            what = f"the era {era.group(0).strip()}" if era else field
            if not neutral:
                return (f"a value SQL Server's {sql_type} does not hold ({what}): its load would refuse it; "
                        f"write a date (9999-12-31 for an open end)")
            return (f"a value SQL Server's date and time types do not hold ({what}): {sql_type} as the type for "
                    f"every target takes only values both servers keep; write a date (9999-12-31 for an open "
                    f"end), or give the column a PostgreSQL type of its own ({{postgres: {sql_type}}})")
        if not field:
            # Unquoted, the format's NULL marker where the column allows NULL; quoted, or in a
            # NOT NULL column, an empty string, which no date or time type reads.
            return f"an empty field, not a value of {sql_type}"
        if base in _TIMES or base in _ZONED_TIMES:
            return _time_of_day_problem(field, sql_type, lambda clock: _clock_problem(clock, sql_type, base, kept,
                                                                                      named))
        if not both and field.lower() in _INFINITIES:
            return None     # PostgreSQL's own type keeps it as written
        d = _ISO_DAY.match(field)
        if d is None:
            return _other_form_problem(field, sql_type, base,
                                       lambda clock: _clock_problem(clock, sql_type, base, kept, named))
        problem = _day_problem(d.group(1), d.group(2), d.group(3), sql_type, base)
        if problem is None and d.group(4) is not None:
            problem = _clock_problem(d.group(4), sql_type, base, kept, named)
        if problem is None and region:
            problem = _local_time_problem(d.group(1), d.group(2), d.group(3), d.group(4) or "00:00", region)
        return problem
    return when


def _time_of_day_problem(field: str, sql_type: str, clock_problem: Callable[[str], str | None]) -> str | None:
    """A `time` column's field: ISO 8601's `HH:MM[:SS[.f]]`, or another form _TIME_FORM reads."""
    if _ISO_DAY.match(field):
        # PostgreSQL reads a time of day after a date and ignores the date ("you can also
        # always specify a date but it will be ignored", Date/Time Types, Times).
        return f"a date before the time of day: {sql_type} keeps the time only, the load would drop it"
    if _ISO_TIME.match(field):
        return clock_problem(field)
    t = _TIME_FORM.fullmatch(field)
    if t is None:
        return ("a time of day in a form the check does not read: the server may read it as another time "
                "(10:30.5 as 00:10:30.5) without an error; write it as HH:MM:SS[.fff]")
    clock, problem = _clock_of(t)
    return problem or clock_problem(clock)


def _day_problem(year: str, month: str | int, day_of_month: str, sql_type: str, base: str) -> str | None:
    """A day that is not in the calendar, or not in the type's range."""
    try:
        day = date(int(year), int(month), int(day_of_month))
    except ValueError as exc:
        return f"not a date ({exc})"
    first, last = _RANGES.get(base, (day, day))
    if not first <= day <= last:
        # Microsoft's references give each type's range (datetime: 1753-01-01 to 9999-12-31,
        # smalldatetime: 1900-01-01 to 2079-06-06); the load would refuse the field.
        return f"a day outside {sql_type}'s range ({first} to {last})"
    return None


def _other_form_problem(field: str, sql_type: str, base: str, clock_problem: Callable[[str], str | None]
                        ) -> str | None:
    """A date or timestamp in another form than ISO 8601: refused unless it is one of the forms
    _OTHER_FORM reads, as the servers read it (`2026/12/05`, `20261205`, `Dec 5 2026 10:00`,
    `5 December 2026 1:45 pm`), a calendar day, with no time of day in a `date`, no zone in a type
    without one, and a time of day the type keeps (`clock_problem`, as in ISO 8601). PostgreSQL's
    own forms (_EPOCH, _JULIAN, a year of two digits) and the day or the month first (the loads
    read dates year first: `5/6/2027` is refused at the load, after other loads ran) are named."""
    form = _OTHER_FORM.fullmatch(field)
    if form is None:
        return _unread_form(field, sql_type, base)
    g = form.groupdict()
    month = g["m"] or g["m8"] or _MONTH_NUMBER[(g["mon"] or g["mon2"] or g["mon3"]).lower()]
    year, day_of_month = g["y"] or g["y8"] or g["ym"] or g["yn"] or g["yd"], g["d"] or g["d8"] or g["dm"] or g["dn"] or g["dd"]
    problem = _day_problem(year, month, day_of_month, sql_type, base)
    if problem:
        return problem
    if g["zone"] and base not in _ZONED_DATES:
        return (f"a time zone ({g['zone']}): {sql_type} keeps none, the load would drop it without an error; "
                f"write every time in one zone without it, or declare a type with a zone")
    clock, problem = _clock_of(form) if g["clock"] else ("00:00", None)
    problem = problem or (clock_problem(clock) if g["clock"] else None)
    if problem and base == "date" and problem.startswith("a time of day"):
        return (f"a time of day after the date: {sql_type} keeps the day only, the load would drop it; write the "
                f"date alone, YYYY-MM-DD")
    if problem is None and g["zone"] and "/" in g["zone"]:
        return _local_time_problem(year, month, day_of_month, clock, g["zone"])
    return problem


def _local_time_problem(year: str, month: str | int, day_of_month: str, clock: str, zone: str) -> str | None:
    """A local time in a region's zone (`2026-10-25 02:30 Europe/Berlin`) that is not one instant:
    its clocks pass it twice (the hour a change back to standard time repeats) or never (the hour
    a change forward skips). The servers pick one reading without an error, the file meant one
    the check cannot tell. A region the time zone database does not have, the load refuses."""
    found = _zone_info(zone)
    if found is None:
        return (f"a time zone {zone!r} the time zone database does not have: the load would refuse the field; "
                f"write an offset (+01:00) or a region's name (Europe/Paris)")
    t = _ISO_TIME.match(clock)
    if t is None:
        return None
    wall = datetime(int(year), int(month), int(day_of_month), int(t.group(1)), int(t.group(2)), int(t.group(3) or 0))
    earlier, later = wall.replace(tzinfo=found, fold=0), wall.replace(tzinfo=found, fold=1)
    if earlier.utcoffset() == later.utcoffset():
        return None
    skipped = earlier.astimezone(timezone.utc).astimezone(found).replace(tzinfo=None) != wall
    offsets = " or ".join(sorted({f"{o:%z}"[:3] + ":" + f"{o:%z}"[3:] for o in (earlier, later)}))
    return (f"{wall:%Y-%m-%d %H:%M} does not exist in {zone}: its clocks skip that hour, and the load would "
            f"store another time without an error; write the offset the file means ({offsets})" if skipped else
            f"{wall:%Y-%m-%d %H:%M} happens twice in {zone}: its clocks pass that hour twice, and the load would "
            f"pick one of the two without an error; write the offset the file means ({offsets})")


@lru_cache(maxsize=64)
def _zone_info(zone: str):
    """The zone of a region's name as the time zone database has it, its letter case aside (the
    servers read `europe/paris` too); None where it has no such zone."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones
    try:
        return ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        # Another letter case: the database's files are named in one.
        name = next((z for z in available_timezones() if z.lower() == zone.lower()), None)
        return ZoneInfo(name) if name else None


def _clock_of(form: re.Match) -> tuple[str | None, str | None]:
    """(the time of day a match of _CLOCK_FORM holds, as `HH:MM[:SS[.f]]`, a half of the day read:
    12 AM is 00; the problem of an hour a half of the day does not have), one of them None."""
    g = form.groupdict()
    if g["bh"] is not None:
        return f"{g['bh']}:{g['bmi']}" + (f":{g['bsec']}" + (f".{g['bf']}" if g["bf"] else "") if g["bsec"] else ""), None
    hour = int(g["h"])
    if g["ap"]:
        if not 1 <= hour <= 12:
            return None, f"not a time of day ({g['h']}:{g['mi']} {g['ap'].upper()}M: hours 1-12 with AM or PM)"
        hour = hour % 12 + (12 if g["ap"].lower() == "p" else 0)
    return f"{hour:02d}:{g['mi']}" + (f":{g['sec']}" + (f".{g['f']}" if g["f"] else "") if g["sec"] else ""), None


def _unread_form(field: str, sql_type: str, base: str) -> str:
    """Why a date in a form _OTHER_FORM does not read is refused, as near as its form says."""
    if field.lower() == _EPOCH:
        return ("a word PostgreSQL reads as 1970-01-01 00:00:00, not a date written in the file "
                "(SQL Server refuses it); write the date itself, or leave the field empty for NULL")
    if _JULIAN.match(field):
        return ("a Julian day, which PostgreSQL reads as a date the file does not write (SQL Server refuses it); "
                "write the date as YYYY-MM-DD")
    if any(ch.isdigit() and not ch.isascii() for ch in field):
        return "digits of another script than ASCII's, which the servers do not read as a date; write 0-9"
    digits = re.findall(r"[0-9]+", field)
    if digits and not _FULL_YEAR.search(field):
        return ("no year of four digits: the server would guess the century (26-12-05 is read as 2026-12-05) "
                "or the order of the parts; write the date as YYYY-MM-DD")
    if digits and len(digits[0]) not in (4, 8) and not re.search(_MONTHS, field, re.IGNORECASE):
        return ("the day or the month first: the loads read dates year first, so the server would refuse it or "
                "read another day; write the date as YYYY-MM-DD")
    zone = re.search(r"(?:\s|\d)((?:UTC|GMT|Z)[+-]\d.*|[A-Za-z]{2,5})$", field)
    if zone and zone.group(1).upper() not in ("AM", "PM", "AD", "BC") and digits:
        if base not in _ZONED_DATES:
            return (f"a time zone after the time: {sql_type} keeps none, the load would drop it without an error; "
                    f"write every time in one zone without it, or declare a type with a zone")
        return _zone_unread(zone.group(1))
    return ("a form of date the check does not read: the server may read it as another value (a word as the "
            "load's own time, 10:30.5 as 00:10:30.5, 24:0 as the next day) without an error; write it as "
            "YYYY-MM-DD HH:MM:SS[.fff]")


_OFFSET_PARTS = re.compile(r"[+-](\d{2})(?::?(\d{2}))?", re.ASCII)


def _zone_out_of_reach(zone: str, base: str, neutral: bool) -> str | None:
    """A zone of an accepted spelling that the load would still refuse: an offset past what the
    server reads (SQL Server's datetimeoffset, and a type for every target, up to 14:00 either
    way; PostgreSQL up to 15:59, "time zone displacement out of range"), minutes past 59, or a
    region of the time zone database's `posix/` or `right/` trees, which PostgreSQL's does not
    have ("time zone ... not recognized")."""
    if base == "datetimeoffset" and "/" in zone:
        return (f"a time zone's name ({zone}): SQL Server's datetimeoffset reads an offset only, its load would "
                f"refuse the field; write the offset the file means (+01:00, Z)")
    tree = re.match(r"(posix|right)/(.+)", zone, re.IGNORECASE)
    if tree:
        return (f"a time zone {zone!r} of the time zone database's {tree.group(1)}/ tree, which PostgreSQL does not "
                f"read: the load would refuse the field; write the region's name ({tree.group(2)}) or an offset")
    m = _OFFSET_PARTS.fullmatch(zone)
    if m is None:
        return None
    hours, minutes = int(m.group(1)), int(m.group(2) or 0)
    most, who = ((14, 0), "SQL Server's datetimeoffset") if base == "datetimeoffset" or neutral else \
        ((15, 59), "PostgreSQL")
    if minutes <= 59 and (hours, minutes) <= most:
        return None
    return (f"a time zone offset {zone} out of range: {who} reads offsets up to {most[0]:02d}:{most[1]:02d} either "
            f"way (minutes 00-59), the load would refuse the field; write the offset the file means")


def _zone_unread(zone: str, offset_only: bool = False) -> str:
    """Why a zone of another spelling than _ZONE_OK's (a time of day's: _OFFSET's) is refused."""
    if offset_only and _ZONE_OK.fullmatch(zone):
        return (f"a time zone's name ({zone}) after a time of day: PostgreSQL's time with time zone reads a name "
                f"only with a date, its load would refuse the field; write the offset (+01, -05:30, Z)")
    spellings = "an offset (+05:30) or Z" if offset_only else "an offset (+05:30), Z, or a region's name (Asia/Kolkata)"
    return (f"a time zone spelt {zone!r}, which the servers do not read alike (PostgreSQL reads UTC+5 five hours "
            f"west of UTC, IST as Israel's, an abbreviation by its own list) or at all; write {spellings}")


def _clock_problem(clock: str, sql_type: str, base: str, kept: int, named: str) -> str | None:
    """What is wrong with a time of day (`HH:MM[:SS[.f...]]`) for the type: a time that is none,
    or one finer than the type keeps (the servers round it, or drop it from a date, silently)."""
    t = _ISO_TIME.match(clock)
    if t is None:
        return None         # another form: the server decides
    hour, minute, second = int(t.group(1)), int(t.group(2)), int(t.group(3) or 0)
    if hour > 23 or minute > 59 or second > 59:
        # PostgreSQL reads 24:00 and a 60th second as the next day's or minute's start.
        return f"not a time of day ({clock}: hours 00-23, minutes and seconds 00-59)"
    fraction = (t.group(4) or "").rstrip("0")
    if base == "date":
        return None if not (hour or minute or second or fraction) else (
            f"a time of day ({clock}): {sql_type} keeps the day only, the load would drop it without an error")
    if base == "smalldatetime":
        return None if not (second or fraction) else (
            f"{clock}: {sql_type} keeps whole minutes, the load would round the seconds away without an error")
    if len(fraction) > kept:
        return (f"{len(fraction)} digits after the second's point, {named} keeps {kept}: the load "
                f"would round it to another time without an error")
    if base == "datetime" and int(fraction.ljust(3, "0")) % 10 not in (0, 3, 7):
        # datetime counts in 1/300 s, shown as milliseconds ending in 0, 3 or 7 (Microsoft's
        # datetime reference: "rounded to increments of .000, .003, or .007 seconds").
        return (f"{clock}: {sql_type} keeps 1/300 of a second (milliseconds ending in 0, 3 or 7), the load "
                f"would round it to another time without an error; datetime2(3) keeps every millisecond")
    return None


class Quoted(str):
    """A field written in quotes (RFC 4180): a value, never the NULL marker, as the servers' CSV
    readers take it (`""` is the empty string, `"NA"` the text NA)."""


class BareCarriageReturn(str):
    """A field written without quotes that holds a carriage return (RFC 4180 quoting): a line end
    to the loads (PostgreSQL: "literal carriage return found in data"), refused by RecordCheck
    naming its column."""


def quoted_fields(text: str, delimiter: str, quoted: bool) -> list[tuple[str, bool]] | None:
    """A record's fields (its line end stripped), each with whether it was quoted; RFC 4180's
    quoting where `quoted`. None for a record RFC 4180 does not read (core/files.guard_quotes
    refuses its quotes before the load). The server's CSV reader takes a quoted field for a value,
    never NULL, where Python's csv module tells no quoted field from a bare one."""
    if not quoted:
        return [(field, False) for field in text.split(delimiter)]
    out, at = [], 0
    while True:
        if text.startswith('"', at):
            parts, at = [], at + 1
            while True:
                close = text.find('"', at)
                if close < 0:
                    return None
                parts.append(text[at:close])
                if not text.startswith('"', close + 1):
                    break
                parts.append('"')
                at = close + 2
            out.append(("".join(parts), True))
            at = close + 1
        else:
            end = text.find(delimiter, at)
            end = len(text) if end < 0 else end
            out.append((text[at:end], False))
            at = end
        if at >= len(text):
            return out
        if not text.startswith(delimiter, at):
            return None
        at += len(delimiter)
        if at == len(text):
            out.append(("", False))
            return out


# Delimiters no pattern of `_accepts` takes (those take digits, signs, points, colons, T and
# spaces): fields joined by one split back into the same fields, and only so, in `_whole`.
_JOINING_DELIMITERS = frozenset("|,;\t")


class RecordCheck:
    """Each record of one table's file against the table's columns, on every target."""

    def __init__(self, table: Table):
        self.table = table
        self.columns = [(c.name, c.nullable, [(t, field_check(sql_type, t == NEUTRAL))
                                              for t, sql_type in c.types.items()])
                        for c in table.columns]
        self.marker = table.format.null_marker
        self.bare = table.format.quoting == "none"
        self.trailing = table.format.delimiter if table.format.trailing_delimiter else None
        self.delimiter = table.format.delimiter
        self.whole = self._whole()

    def _whole(self) -> re.Pattern | None:
        """One pattern of a record every field of which passes (`passing_pattern`, or the NULL
        marker where its column takes NULL), matched against the fields joined by the
        delimiter: a record it matches has no problem, found in one match instead of a check
        per field (most of a plan's read of a small batch). A field it does not take sends the
        record to the checks field by field, which say what is wrong. No field pattern takes the
        delimiter, so a record of another field count, or a field holding the delimiter (quoted),
        is not matched. None where a column's types have no common pattern."""
        if self.delimiter not in _JOINING_DELIMITERS or (self.marker and self.delimiter in self.marker):
            return None
        # A text field's character: not the delimiter, a NUL, a byte not decoded, a bare CR.
        delimiter = re.escape(self.delimiter)
        char = "[^" + delimiter + r"\x00\udc80-\udcff" + (r"\r" if self.bare else "") + "]"
        parts = []
        for column in self.table.columns:
            patterns = {passing_pattern(sql_type, t == NEUTRAL, char) for t, sql_type in column.types.items()}
            if None in patterns:
                return None
            if len(patterns) > 1:
                patterns.discard(f"{char}*")        # any text: the other types decide
            # A field of a column of several types (one per target) passes each type's pattern:
            # each but the last looks ahead to the field's end (no pattern takes the delimiter).
            *others, last = sorted(patterns)
            pattern = "".join(f"(?=(?:{p})(?:{delimiter}|\\Z))" for p in others) + f"(?:{last})"
            if column.nullable and self.marker is not None:
                pattern = f"(?:{re.escape(self.marker)}|{pattern})"
            parts.append(pattern)
        return re.compile(delimiter.join(parts) + (delimiter if self.trailing else ""))

    def problems(self, fields: Sequence[str]) -> list[str]:
        """What is wrong with one record's fields as read from its line (with `trailing_delimiter`,
        the empty one after the last delimiter included): "column <name>: <field>: <why>"."""
        if self.whole is not None and self.whole.fullmatch(self.delimiter.join(fields)) and (
                self.bare or not {Quoted, BareCarriageReturn} & set(map(type, fields))):
            # A quoted field equal to the NULL marker is a value (Quoted): its column's checks read it.
            return []
        if self.trailing is not None:
            ended = bool(fields) and fields[-1] == ""
            if not ended and len(fields) in (len(self.columns), len(self.columns) + 1):
                return [self._end_problem(len(fields) > len(self.columns))]
            fields = fields[:-1] if ended else fields
        if len(fields) != len(self.columns):
            blank = " (a blank line)" if list(fields) in ([], [""]) else ""
            return [f"{len(fields)} fields, the table has {len(self.columns)} columns{blank}"]
        out = []
        for i, (text, (name, nullable, _)) in enumerate(zip(fields, self.columns)):
            if self.bare and "\r" in text:
                # Without quoting a carriage return is a line end to the loads (PostgreSQL: "unquoted
                # carriage return found in data", naming no column), or in a CRLF line of an LF file.
                out.append(f"column {name}: a carriage return, which the load cannot tell from a line end "
                           f"(quoting: none; the file's first line says its line end)")
                continue
            if isinstance(text, BareCarriageReturn):
                out.append(f"column {name}: a carriage return outside quotes, which the load cannot tell from a "
                           f"line end (PostgreSQL: \"literal carriage return found in data\"): quote the field")
                continue
            if nullable and self.marker is not None and text == self.marker and not isinstance(text, Quoted):
                continue
            if _NOT_DECODED.search(text):
                # The reader keeps bytes the file's encoding does not decode as lone surrogates
                # (surrogateescape): the server refuses them, so the record is refused here.
                out.append(f"column {name}: bytes that are not {self.table.format.encoding}: "
                           f"{text.encode(self.table.format.encoding, 'surrogateescape')!r}")
                continue
            if "\x00" in text:
                # Refused on every target: PostgreSQL's text types hold no NUL character (its COPY
                # refuses the record), and a NUL in an exported text field is a damaged file.
                out.append(f"column {name}: a NUL byte (0x00) at character {text.index(chr(0)) + 1}, which "
                           f"PostgreSQL does not store in text")
                continue
            said = self.value_problem(i, text)
            if said:
                out.append(said)
        return out

    def value_problem(self, index: int, text: str) -> str | None:
        """What is wrong with `text` as a value of column `index` for one of its types (the first
        type that refuses it): "column <name>: <field>: <why>", or None."""
        name, nullable, checks = self.columns[index]
        for _, check in checks:
            why = check(text) if check is not None else None
            if why:
                # The NULL marker quoted: the server's CSV reader takes it for a value.
                quoted = " (quoted, so a value, never NULL)" if nullable and text == self.marker else ""
                return f"column {name}: {text!r}: {why}{quoted}"
        return None

    def _end_problem(self, text_after: bool) -> str:
        """A record whose line does not end with its trailing delimiter, worded as the loads word it."""
        if text_after:
            return (f"text after the trailing delimiter {self.trailing!r}, which ends every line "
                    f"(trailing_delimiter: true)")
        return (f"the line does not end with the trailing delimiter {self.trailing!r}, as every line must "
                f"(trailing_delimiter: true, the default; say `trailing_delimiter: false` for files whose lines "
                f"do not end with it)")
