"""A spec column's type on one engine: the type the spec gives for the engine's dialect, taken as
written, or the neutral one (one type for every target) read in the engine's words by its own
`mapped` (each engine's `types.py`)."""
from __future__ import annotations

from typing import Callable

from switchyard.core.spec import Column, SpecError
from switchyard.targets.base import TargetError


def column_type(column: Column, dialect: str, mapped: Callable[[str], str | None], display_name: str,
                meaning: Callable[[str], str] = lambda sql_type: "") -> str:
    """The column's type for `dialect`; TargetError (permanent) where the spec gives none, or gives the
    engine's own as a name `mapped` knows (it means something else there: `meaning` says what)."""
    try:
        sql_type, neutral = column.declared(dialect)
    except SpecError as exc:
        raise TargetError(str(exc), permanent=True) from None
    fix = mapped(sql_type)
    if fix is None:
        return sql_type
    if neutral:
        return fix
    raise TargetError(f"column {column.name}: {sql_type!r} is not a {display_name} type for this column"
                      f"{meaning(sql_type)}; give {dialect}: {fix}, or one type for every target ({sql_type})",
                      permanent=True)
