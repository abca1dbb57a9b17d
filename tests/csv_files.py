"""An independent reading of a batch's stream files: Python's csv and gzip modules only.

It shares nothing with the loaders or the generators; it knows a table's format from the
spec alone. A field is NULL only where the file has the table's NULL marker in a column
the spec declares nullable; everywhere else it is the text as the file holds it.
"""
from __future__ import annotations

import csv
import gzip
import hashlib
import io
import re
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

from switchyard.core.spec import Table

_LENGTH = re.compile(r"^(?:n?var)?n?char\((\d+)\)$")


def open_text(path: Path, encoding: str = "utf-8") -> io.TextIOBase:
    """The file's text, decompressed when its name ends in .gz; line ends left as they are."""
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return path.open("r", encoding=encoding, newline="")


def raw_text(path: Path, encoding: str = "utf-8") -> str:
    with open_text(path, encoding) as fh:
        return fh.read()


def read_records(path: Path, table: Table) -> tuple[list[list[str]], list[list[str]]]:
    """(header lines, records) of a stream file, every field as the text it is."""
    fmt = table.format
    assert fmt.quoting == "csv", "this reader reads CSV files"
    with open_text(path, fmt.encoding) as fh:
        reader = csv.reader(fh, delimiter=fmt.delimiter, quotechar='"', doublequote=True, strict=True)
        rows = list(reader)
    return rows[:fmt.header_lines], rows[fmt.header_lines:]


def with_nulls(table: Table, record: list[str]) -> list[str | None]:
    marker = table.format.null_marker
    return [None if (column.nullable and marker is not None and value == marker) else value
            for column, value in zip(table.columns, record)]


def typed(table: Table, values: list[str | None]) -> tuple:
    """The values as Python objects of the columns' PostgreSQL types (what psycopg returns)."""
    out: list[Any] = []
    for column, value in zip(table.columns, values):
        sql_type = column.sql_type("postgres")
        if value is None:
            out.append(None)
        elif sql_type in ("bigint", "integer", "int", "smallint"):
            out.append(int(value))
        elif sql_type == "date":
            out.append(date.fromisoformat(value))
        elif sql_type.startswith("timestamp"):
            out.append(datetime.fromisoformat(value))
        elif sql_type.startswith("numeric"):
            out.append(Decimal(value))
        else:
            out.append(value)
    return tuple(out)


def canonical(values: tuple) -> tuple:
    """Equal values compare equal: numerics without trailing zeros, the rest as they are."""
    return tuple(v.normalize() if isinstance(v, Decimal) else v for v in values)


def row_hash(values: tuple) -> str:
    """A hash of every field of a row (type and value; NULL distinct from every text)."""
    return hashlib.sha256(repr(canonical(values)).encode("utf-8")).hexdigest()


def declared_length(sql_type: str) -> int | None:
    m = _LENGTH.match(sql_type)
    return int(m.group(1)) if m else None


def table_rows(batch_dir: Path, table: Table, files: list[str]) -> Iterator[tuple]:
    """Every row of a table's stream files, typed, in file order."""
    for rel in files:
        _, records = read_records(batch_dir / rel, table)
        for record in records:
            yield typed(table, with_nulls(table, record))


def records_by_line_end(text: str, line_end: str) -> list[str]:
    """The file's records, cut at the line end outside quotes (a quoted field may hold line
    breaks): a piece with an odd number of quotes continues into the next one."""
    pieces = text.split(line_end)
    if pieces and pieces[-1] == "":
        pieces.pop()
    records, pending = [], None
    for piece in pieces:
        pending = piece if pending is None else pending + line_end + piece
        if pending.count('"') % 2 == 0:
            records.append(pending)
            pending = None
    assert pending is None, "the file ends inside a quoted field"
    return records
