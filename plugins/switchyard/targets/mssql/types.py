"""SQL Server's reading of a spec's column types.

A spec's neutral type (one `type` for every target) is read in SQL Server's words where its name
means something else here, or nothing: `timestamp` is rowversion on SQL Server (a row version
counter, not a date and time), so a neutral `timestamp(3)` is `datetime2(3)` here. A type the
spec gives for `mssql` itself is SQL Server's own and is taken as written, except one of those
names, which is refused with the type that says what it means
(https://learn.microsoft.com/en-us/sql/t-sql/data-types/rowversion-transact-sql).
"""
from __future__ import annotations

import re

from switchyard.core.spec import Column
from switchyard.targets.base import TargetError
from switchyard.targets.types import column_type as shared_column_type

# Name -> SQL Server's type for it (`{p}`: the neutral type's precision, 6 where none is given).
NEUTRAL = {"timestamp": "datetime2({p})", "timestamp without time zone": "datetime2({p})",
           "timestamptz": "datetimeoffset({p})", "timestamp with time zone": "datetimeoffset({p})",
           "boolean": "bit", "bool": "bit", "bytea": "varbinary(max)", "serial": "int", "bigserial": "bigint",
           "uuid": "uniqueidentifier"}
# The digits after the point money and smallmoney keep: "accurate to a ten-thousandth of the
# monetary units they represent"; the load rounds the others away without an error
# (https://learn.microsoft.com/en-us/sql/t-sql/data-types/money-and-smallmoney-transact-sql).
MONEY_DIGITS = 4
_SIZE = re.compile(r"\((\d+)\)\s*$")


def mapped(sql_type: str) -> str | None:
    """SQL Server's type for a neutral `sql_type` whose name it reads otherwise; None: as written."""
    name = sql_type.partition("(")[0].strip().lower()
    target = NEUTRAL.get(name)
    if target is None:
        return None
    size = _SIZE.search(sql_type)
    return target.format(p=size[1] if size else 6)


def column_type(column: Column, dialect: str = "mssql") -> str:
    """The column's type on SQL Server: its own as the spec gives it, or its neutral one read in
    SQL Server's words; TargetError (permanent) for an own type that means something else here,
    and for a neutral decimal type without a precision (`unsized_decimal`)."""
    unsized_decimal(column, dialect)
    return shared_column_type(column, dialect, mapped, "SQL Server", _meaning)


def unsized_decimal(column: Column, dialect: str) -> None:
    """Refuses a neutral `numeric` or `decimal` without a precision: PostgreSQL's keeps any number
    of digits, SQL Server's is decimal(18,0), to which the load rounds every fraction away without
    an error (https://learn.microsoft.com/en-us/sql/t-sql/data-types/decimal-and-numeric-transact-sql).
    One type for every target must mean the same value on each."""
    from switchyard.core.spec import SpecError
    try:
        sql_type, neutral = column.declared(dialect)
    except SpecError:
        return  # shared_column_type says what is missing
    if neutral and sql_type.strip().lower() in ("numeric", "decimal", "dec"):
        raise TargetError(
            f"column {column.name}: {sql_type!r} without a precision keeps every digit on PostgreSQL but is "
            f"decimal(18,0) on SQL Server, where the load would round each fraction away without an error "
            f"(12.34 stored as 12); give it a precision and scale ({sql_type}(18,4)), or a type for mssql",
            permanent=True)


def _meaning(sql_type: str) -> str:
    return " (there it means rowversion, a row version counter)" if sql_type.lower().startswith("timestamp") else ""
