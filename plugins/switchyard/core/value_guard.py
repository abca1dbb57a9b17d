"""The fields a server would change as it reads them, refused while a file streams to its load.

A batch too big to read field by field before its loads (SWITCHYARD_CHECK_FIELDS_MB) is left to
them, and they refuse a field that does not fit its column. Some fields fit and are changed all
the same, by PostgreSQL and by SQL Server, without an error: a decimal with more digits after the
point than its column's scale (rounded), a time finer than its column keeps (rounded), a time of
day in a date and a time zone in a type without one (dropped), 24:00 and a 60th second (rolled
over into the next day or minute), `now` and its kin (the load's own time), an integer in another
base or with underscores (`0x1F` is 31 to PostgreSQL 16), a number other than 0 in SQL Server's
bit (1). A run that ends
`success` would hold other values than its files. This guard reads every record of a file on its
way to the load, with one pattern per table: the fields of the columns at risk in the shapes no
server changes (core/fields.kept_pattern), every other field skipped to its delimiter. A chunk
whose records all fit passes on one match of RE2's automaton (about 2 ms of one core per MB of
TPC-H's lineitem, which has seven columns at risk, against 6.7 with Python's re); a record that
does not fit is read field by field with the check `switchyard check` uses (core/fields), which
refuses it (ChangedValue) or passes it (a number with an exponent that stays the same number, a
form of date the server reads or refuses itself).
"""
from __future__ import annotations

import re
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from switchyard.core.fields import field_check, kept_pattern, quoted_fields
from switchyard.core.files import data_chunks, open_source
from switchyard.core.spec import Table


_QUOTE_OR_LF = re.compile(rb'["\n]')


class ChangedValue(Exception):
    """A field a server would store changed, `offset` bytes into the file's data after its header
    lines (where its record starts), in column `column`: `text`, and why (`why`)."""

    def __init__(self, offset: int, column: str, text: str, why: str):
        super().__init__(offset, column, text, why)
        self.offset, self.column, self.text, self.why = offset, column, text, why

    def problem(self) -> str:
        """`column <name>: <field>: <why>`, as `switchyard check` says it."""
        return f"column {self.column}: {self.text!r}: {self.why}"


def value_guard(table: Table, dialect: str, money_digits: int | None = None) -> "ValueGuard | None":
    """The guard for the files of `table` loaded into `dialect`'s types; None where no column is at
    risk (no integer, decimal with a scale, date or time type, nor boolean SQL Server reads).
    `money_digits`: the digits after the point the target's money keeps (fields.field_check)."""
    at_risk = {}
    for i, column in enumerate(table.columns):
        sql_type, neutral = column.declared(dialect)
        pattern = kept_pattern(sql_type, neutral, money_digits)
        if pattern is not None:
            at_risk[i] = (pattern, field_check(sql_type, neutral, money_digits=money_digits))
    return ValueGuard(table, at_risk) if at_risk else None


@contextmanager
def read_beside(guard: "ValueGuard | None", path: Path, header_lines: int) -> Iterator[None]:
    """Every record of `path` read by `guard` in a thread of its own while the body loads the file,
    for a server that reads the file itself (SQL Server's BULK INSERT); ChangedValue once the body
    is done, if the guard found a field the server would change, and whatever else stopped the
    reading (a file the worker cannot read): a guard that did not read the whole file must not pass
    it. The body's own error wins: the thread stops at its next chunk."""
    if guard is None:
        yield
        return
    stop, found = threading.Event(), []

    def read() -> None:
        try:
            with open_source(path) as source:
                for _ in guard.chunks(data_chunks(source.read, header_lines)):
                    if stop.is_set():
                        return
        except BaseException as exc:       # noqa: BLE001 - raised again after the body, never lost
            found.append(exc)

    reader = threading.Thread(target=read, name=f"value guard {path.name}", daemon=True)
    reader.start()
    try:
        yield
    except BaseException:
        stop.set()
        raise
    reader.join()
    if found:
        raise found[0]


class ValueGuard:
    """The records of one table's files against the shapes of their fields no server changes."""

    def __init__(self, table: Table, at_risk: dict):
        import re2
        self.table, self.at_risk = table, at_risk
        fmt = table.format
        self.quoted = fmt.quoting == "csv"
        record = _record_pattern(len(table.columns), {i: p for i, (p, _) in at_risk.items()}, fmt.delimiter,
                                 self.quoted, fmt.null_marker, [c.nullable for c in table.columns], fmt.encoding)
        options = re2.Options()
        options.max_mem = 64 << 20       # room for the automaton of a wide table's record
        # Bytes, not UTF-8 characters: a byte the encoding does not decode is the load's to name.
        options.encoding = re2.Options.Encoding.LATIN1
        # As many records as fit, one after another: the match ends where the first that does not
        # fit starts (RE2 keeps Perl's preference for the longer repetition).
        self._records = re2.compile(f"(?:{record})*".encode("ascii"), options)

    def chunks(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        """The chunks as they come, each once the records it completes are checked; ChangedValue at
        the first field a server would change. A record cut by a chunk's end is checked once a later
        chunk ends it (the load's transaction is still open then: nothing of the file is kept); its
        parts are held, not joined, until then, so a long quoted field costs no copy per chunk."""
        held: list[bytes] = []          # the parts of a record not yet ended
        inside = False                  # whether the held parts end inside a quoted field
        offset = 0                      # the data's bytes before this chunk
        for chunk in chunks:
            begin = 0
            if held:
                first = self._record_end(chunk, 0, len(chunk), inside)
                if first is None:
                    held.append(chunk)
                    inside ^= self.quoted and chunk.count(b'"') % 2 == 1
                    offset += len(chunk)
                    yield chunk
                    continue
                # The record, checked apart, so that the chunk is matched where it lies (a copy of
                # the chunk would cost a third of the match).
                record = b"".join(held) + chunk[:first]
                self._checked(record, 0, len(record), offset - (len(record) - first))
                held, inside, begin = [], False, first
            end = chunk.rfind(b"\n") + 1
            done = self._checked(chunk, begin, end, offset) if end > begin else begin
            if done < len(chunk):
                held = [chunk[done:]]
                inside = self.quoted and chunk.count(b'"', done) % 2 == 1
            offset += len(chunk)
            yield chunk
        if held:
            record = b"".join(held) + b"\n"
            self._checked(record, 0, len(record), offset - len(record) + 1)

    def _checked(self, data: bytes, begin: int, end: int, base: int) -> int:
        """Up to where data[begin:end] (whole lines; data[0] `base` bytes into the file's data) is
        checked: `end`, or the start of a record that goes on past it (quoted line breaks).
        ChangedValue at a field a server would change."""
        pos = begin
        while pos < end:
            pos = self._records.match(data, pos, end).end()
            if pos >= end:
                break
            stop = self._record_end(data, pos, end)
            if stop is None:
                return pos                       # its end is in a later chunk
            self._check_record(data[pos:stop], base + pos)
            pos = stop
        return end

    def _record_end(self, data: bytes, pos: int, end: int, inside: bool = False) -> int | None:
        """The offset after the line end that ends the record going on at `pos` (`inside`: in a
        quoted field there), None if none does by `end`."""
        if not self.quoted:
            at = data.find(b"\n", pos, end)
            return None if at < 0 else at + 1
        if inside and data.find(b'"', pos, end) < 0:
            return None
        for mark in _QUOTE_OR_LF.finditer(data, pos, end):
            if mark.group() == b'"':
                inside = not inside
            elif not inside:
                return mark.end()
        return None

    def _check_record(self, raw: bytes, offset: int) -> None:
        """One record that did not fit the pattern, read field by field; ChangedValue if a server
        would change a field of it. A record the load refuses anyway (its field count) is left to
        the load, which names it."""
        fmt = self.table.format
        text = raw.decode(fmt.encoding, errors="surrogateescape").rstrip("\n").removesuffix("\r")
        fields = quoted_fields(text, fmt.delimiter, self.quoted)
        if fmt.trailing_delimiter and fields and fields[-1] == ("", False):
            fields = fields[:-1]
        if fields is None or len(fields) != len(self.table.columns):
            return
        for i, (_, check) in self.at_risk.items():
            column = self.table.columns[i]
            value, quoted = fields[i]
            # A quoted field is a value, never NULL, as the server's CSV reader takes it.
            if column.nullable and fmt.null_marker is not None and value == fmt.null_marker and not quoted:
                continue
            try:
                why = check(value) if check is not None else None
            except Exception as exc:       # noqa: BLE001 - a field the check cannot read is not passed
                why = f"not read as its type ({type(exc).__name__}: {exc})"
            if why:
                raise ChangedValue(offset, column.name, value, why)


def _bytes(text: str, encoding: str) -> str:
    """`text` as the file holds it, each byte written `\\xhh` (the same in RE2 and Python's re)."""
    return "".join(f"\\x{b:02x}" for b in text.encode(encoding))


def _record_pattern(width: int, at_risk: dict[int, str], delimiter: str, quoted: bool, marker: str | None,
                    nullable: list[bool], encoding: str) -> str:
    """One record: each column at risk in its kept shapes (or the NULL marker where it may be NULL),
    every other field anything up to its delimiter; the line end LF or CR LF. Without quoting the
    fields after the last column at risk are skipped to the line end at once."""
    d = _bytes(delimiter, encoding)
    if quoted:
        anything = f'(?:"(?:[^"]|"")*"|[^{d}"\\n]*)'
    else:
        anything = f"[^{d}\\n]*"
    last = width - 1 if quoted else max(at_risk)
    fields = []
    for i in range(last + 1):
        if i not in at_risk:
            fields.append(anything)
            continue
        kept = at_risk[i]
        shapes = [kept, f'"(?:{kept})"'] if quoted else [kept]
        if nullable[i] and marker is not None:
            shapes.append(_bytes(marker, encoding))
        fields.append("(?:" + "|".join(shapes) + ")")
    rest = f"(?:{d})?" if quoted else f"(?:{d}[^\\n]*)?"
    return d.join(fields) + rest + "\\r?\\n"
