"""T-SQL text: string literals and the statement splitter the templates are cut with.

Templates end each statement with ';' at the end of a line. The shared splitter cuts at
every such ';'; T-SQL needs one that knows where a string literal ('...' with '' inside),
a bracketed name ([...] with ]] inside) or a comment (-- to the line end, /* ... */) is,
so that a ';' inside any of them never cuts a statement, whatever a spec's delimiter is.
"""
from __future__ import annotations

import re

# A run of text with no quote, bracket, comment start or ';': skipped in one step.
_PLAIN = re.compile(r"[^'\[;\-/]+")


def nstr(value: str) -> str:
    """A Unicode string literal; quotes doubled."""
    return "N'" + str(value).replace("'", "''") + "'"


_CATALOG_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_@#$]{0,127}$")


def writable_name(name: object) -> bool:
    """Whether `quote_name` takes the name: the pre-flight refuses a table whose catalog names it
    does not, before any load, instead of its commit failing to render after the loads."""
    return isinstance(name, str) and bool(_CATALOG_NAME.match(name))


def quote_name(name: str) -> str:
    """A name read from the catalog (an index, a filegroup, a function a DBA named) in brackets.
    Only letters, digits, _, @, # and $ are taken (up to SQL Server's 128 characters), so the
    brackets never need escaping; anything else is refused."""
    if not writable_name(name):
        raise ValueError(f"{name!r}: not a name Switchyard writes into T-SQL (letters, digits, _ @ # $ only)")
    return f"[{name}]"


def sstr(value: str) -> str:
    """A plain string literal (BULK INSERT options take these); quotes doubled."""
    return "'" + str(value).replace("'", "''") + "'"


def _end_of(text: str, i: int, close: str) -> int:
    """The index after a literal or bracketed name opened at i, `close` doubled inside it."""
    j = i + 1
    while True:
        k = text.find(close, j)
        if k < 0:
            raise ValueError(f"unterminated {text[i]} at offset {i}: {text[i:i + 40]!r}")
        if text.startswith(close * 2, k):
            j = k + 2
            continue
        return k + 1


def statement_ends(text: str) -> list[int]:
    """Offsets of the ';' that end statements: a ';' followed by spaces and a line end (or
    the text's end), outside literals, bracketed names and comments."""
    ends, i, n = [], 0, len(text)
    while i < n:
        m = _PLAIN.match(text, i)
        if m:
            i = m.end()
            continue
        ch = text[i]
        if ch == "'":
            i = _end_of(text, i, "'")
        elif ch == "[":
            i = _end_of(text, i, "]")
        elif text.startswith("--", i):
            nl = text.find("\n", i)
            i = n if nl < 0 else nl
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            if close < 0:
                raise ValueError(f"unterminated comment at offset {i}")
            i = close + 2
        elif ch == ";":
            rest = re.match(r"[ \t]*(\r?\n|$)", text[i + 1:])
            if rest:
                ends.append(i)
            i += 1
        else:
            i += 1
    return ends


def split_statements(text: str) -> list[str]:
    """The statements of a rendered template, in order; parts that hold only comments go."""
    out, start = [], 0
    for end in [*statement_ends(text), len(text)]:
        part = text[start:end]
        start = end + 1
        lines = part.strip().splitlines()
        if lines and not all(ln.strip().startswith("--") or not ln.strip() for ln in lines):
            out.append("\n".join(lines).strip())
    return out
