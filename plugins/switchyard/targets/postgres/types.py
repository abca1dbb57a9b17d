"""PostgreSQL's reading of a spec's column types.

A spec's neutral type (one `type` for every target) is read in PostgreSQL's words where its
name is SQL Server's: `datetime2(3)` is `timestamp(3)` here (PostgreSQL keeps at most
microseconds), `nvarchar(40)` is `varchar(40)`. A type the spec gives for `postgres` itself is
PostgreSQL's own and is taken as written, except one of those names, which is refused with the
type that says what it means.
"""
from __future__ import annotations

import re

from switchyard.core.spec import Column
from switchyard.targets.types import column_type as shared_column_type

# Name -> PostgreSQL's type for it (`{p}`: the neutral type's precision, at most 6, where it has one;
# `{size}`: its length).
NEUTRAL = {"datetime": "timestamp(3)", "datetime2": "timestamp{p}", "smalldatetime": "timestamp(0)",
           "datetimeoffset": "timestamptz{p}", "tinyint": "smallint", "nvarchar": "varchar{size}",
           "nchar": "char{size}", "ntext": "text", "uniqueidentifier": "uuid", "image": "bytea",
           "rowversion": "bytea"}
_SIZE = re.compile(r"\((\d+|max)\)\s*$", re.I)


def mapped(sql_type: str) -> str | None:
    """PostgreSQL's type for a neutral `sql_type` whose name is SQL Server's; None: as written."""
    name = sql_type.partition("(")[0].strip().lower()
    target = NEUTRAL.get(name)
    if target is None:
        return None
    size = _SIZE.search(sql_type)
    digits = size[1] if size and size[1].isdigit() else None
    return target.format(p=f"({min(int(digits), 6)})" if digits else "", size=f"({digits})" if digits else "")


def column_type(column: Column, dialect: str = "postgres") -> str:
    """The column's type on PostgreSQL: its own as the spec gives it, or its neutral one read in
    PostgreSQL's words; TargetError (permanent) for an own type PostgreSQL does not have."""
    return shared_column_type(column, dialect, mapped, "PostgreSQL")
