"""What a failed statement means: SQL Server's error numbers, data errors (permanent) against
connection trouble (worth a retry), refused logins, and the driver's message without its prefix."""
from __future__ import annotations

import re

# SQL Server errors about the data itself: the same file fails the same way on every try.
DATA_ERRORS = frozenset({
    241, 242, 245, 8114, 8115,  # conversion of a value (date, number) failed or overflowed
    515,                        # NULL into a NOT NULL column
    547,                        # CHECK constraint violated: a key outside the partition's range
    1505, 2601, 2627,           # duplicate key (a unique index build, an insert)
    2628, 8152,                 # string or binary data would be truncated
    4815, 4816,                 # bulk copy: invalid column length / type from the client
    4832,                       # bulk load: unexpected end of file
    4863, 4864, 4867,           # bulk load conversion error (truncation, type, overflow) at row, column
    4865,                       # bulk load: more errors than MAXERRORS
    4866,                       # bulk load: a field too long (wrong terminators) at row, column
    4879,                       # bulk load: invalid column value in a CSV file
})
# ODBC SQLSTATE classes: 22 data exception, 23 integrity constraint violation; 08 and the
# timeouts are connection troubles, worth a retry whatever else the message says.
_NATIVE_ERROR = re.compile(r"\((\d+)\)(?=\s*(?:;|\(SQL\w+\)|$))")
_CONNECTION_LOST = re.compile(r"communication link failure|connection (?:is )?(?:broken|reset|closed)|"
                              r"transport-level error|TCP Provider", re.I)


def error_numbers(exc: BaseException) -> set[int]:
    """SQL Server's native error numbers in a driver error (pyodbc ends each record with `(n)`)."""
    return {int(n) for n in _NATIVE_ERROR.findall(str(exc))}


def is_data_error(exc: BaseException) -> bool:
    """True when a load failed on the data (a retry cannot help), False for everything else."""
    args = getattr(exc, "args", ())
    sqlstate = str(args[0]) if args and isinstance(args[0], str) and len(args[0]) == 5 else ""
    if sqlstate.startswith("08") or sqlstate in ("HYT00", "HYT01") or _CONNECTION_LOST.search(str(exc)):
        return False
    if error_numbers(exc) & DATA_ERRORS or sqlstate[:2] in ("22", "23"):
        return True
    # DB-API classes (mssql-python's bulk copy raises these): DataError, IntegrityError.
    return any(c.__name__ in ("DataError", "IntegrityError") for c in type(exc).__mro__)


# A refused login (18456) or a database the login cannot open (4060): the same on every try.
LOGIN_REFUSED = frozenset({18456, 4060})
_LOGIN_REFUSED_TEXT = re.compile(r"Login failed for user|Cannot open database", re.I)


def is_login_refused(exc: BaseException) -> bool:
    """True when the server refused the login or the database, by number (pyodbc) or by the
    server's own message (mssql-python may not end it with the number)."""
    return bool(error_numbers(exc) & LOGIN_REFUSED) or bool(_LOGIN_REFUSED_TEXT.search(str(exc)))



def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    text = str(args[-1]) if args else str(exc)
    return re.sub(r"\[Microsoft\]\[ODBC Driver \d+ for SQL Server\](\[SQL Server\])?", "", text).strip()


# Besides the data errors: what fails the same way on every try.
_MISSING = frozenset({208, 207, 2812, 3701, 4902, 15151})     # object, column, procedure not found
_REFUSED = frozenset({229, 230, 262, 297, 300, 916, 15247})   # permission denied
_STATEMENT = frozenset({102, 156, 170})                       # incorrect syntax
# What the tables themselves refuse: ALTER TABLE SWITCH's requirements (4900-4999: a full-text
# index, a read-only filegroup, another index, CHECK or table option on one side, a target
# partition not empty; 4902 is a missing object, 4903 a warning) and TRUNCATE's on a read-only or
# offline filegroup, a replicated or CDC-enabled table, a referenced one (4707, 4710-4712). The
# tables are as they are on every try ("Database engine events and errors 4000 to 4999",
# learn.microsoft.com/sql/relational-databases/errors-events/database-engine-events-and-errors-4000-to-4999).
_TABLE_REFUSES = frozenset({4707, 4710, 4711, 4712, *range(4900, 5000)}) - {4902, 4903}
_NAMED = {1505: "a unique violation", 2601: "a unique violation", 2627: "a unique violation", 547: "a constraint violation",
          515: "a NOT NULL violation", 2628: "a value too long for its column", 8152: "a value too long for its column"}


def permanent_error(exc: BaseException) -> str | None:
    """What `exc` is when a retry cannot help (e.g. "a unique violation"), else None: a lost
    connection, a time-out, a deadlock (1205), a lock time-out (1222) and everything not
    classified here are worth the task's retries. `_message(exc)` says which requirement a
    refused switch did not meet."""
    numbers = error_numbers(exc)
    if is_data_error(exc):
        return next((_NAMED[n] for n in sorted(numbers) if n in _NAMED), "a data error")
    if is_login_refused(exc):
        return "a refused login"
    if numbers & _MISSING:
        return "a missing object"
    if numbers & _REFUSED:
        return "a refused permission"
    if numbers & _STATEMENT:
        return "a statement the server cannot parse"
    if numbers & _TABLE_REFUSES:
        return "a switch or truncate the table refuses as it is"
    return None
