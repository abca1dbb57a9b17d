"""What a failed PostgreSQL statement means, read from its SQLSTATE once for every step: an
error a second try cannot fix (the data, a missing object, a refused permission or login) or
one worth the task's retries (a lost connection, a lock time-out, a deadlock, a restart).
The codes: https://www.postgresql.org/docs/current/errcodes-appendix.html
"""
from __future__ import annotations

# Classes whose every error fails the same way on a second try.
_PERMANENT_CLASSES = {
    "22": "a data error",
    "23": "an integrity constraint violation",
    "28": "a refused login",
    "3D": "a missing database",
    "3F": "a missing schema",
    "42": "a statement the server refuses (a missing object or column, a refused permission)",
    "0A": "a feature the server does not support",
}
# The common ones by name, for the message.
_NAMED = {
    "23505": "a unique violation",
    "23514": "a CHECK violation",
    "23502": "a NOT NULL violation",
    "23503": "a foreign key violation",
    "22001": "a value too long for its column",
    "22P02": "a value of the wrong type",
    "22003": "a number out of its type's range",
    "22007": "a date or time in the wrong format",
    "22008": "a date or time out of range",
    "42501": "a refused permission",
    "42P01": "a missing table",
    "42703": "a missing column",
    "42883": "a missing function",
    "28P01": "a refused password",
}
# In a permanent class but worth a retry: another session creating the same object at the same
# moment (CREATE ... IF NOT EXISTS races on the catalog's own unique indexes, pg_*).
_RACES = {"42P07", "42710", "42P06"}


def permanent_error(exc: BaseException) -> str | None:
    """What `exc` is when a retry cannot help (e.g. "a unique violation"), else None (a lost
    connection, a lock or statement time-out, a deadlock or serialization failure, a server
    shutting down, or not a server error at all)."""
    code = getattr(exc, "sqlstate", None)
    if not isinstance(code, str) or len(code) != 5:
        return None
    if code in _RACES:
        return None
    if code == "23505":
        constraint = getattr(getattr(exc, "diag", None), "constraint_name", None) or ""
        if constraint.startswith("pg_"):
            return None     # the catalog's own index: two sessions created one object at once
    if code in _NAMED:
        return _NAMED[code]
    return _PERMANENT_CLASSES.get(code[:2])
