r"""How a stream file reaches PostgreSQL's COPY byte for byte: the options, and the stream.

What is in the file is what is in the table. Every field reaches its column exactly as the
file holds it; the one exception is a field equal to the spec's `null_marker` in a column
declared `nullable: true`, which is NULL. PostgreSQL's text format, as such, breaks this: it
treats `\` as an escape (`\N` is NULL, `\t` a tab, `\\` one backslash). Two ways keep every
byte, and the adapter takes the faster one the spec allows (measured side by side on TPC-H
SF1 lineitem, 6 M rows, two sessions, five rounds in rotating order, server CPU: text as is
7.70 s; text with the backslash check 7.68 s; CSV 8.08 s; CSV with the quote-byte check and
line-aligned chunks 8.09 s; the same plus the varchar length CHECK below 8.17 s, or 8.44 s
with a plain char_length CHECK):

* **Text format, every backslash doubled while streaming**, when no field can be NULL (no
  `null_marker`, or no nullable column) and the file has no quoting. A chunk is only copied
  when it holds a backslash (`b"\\" in chunk`, one memchr); doubled, every backslash is a
  literal one to COPY, and neither `\N` (NULL) nor `\.` (end of data) can occur any more.
  Text format's NULL applies to every column alike, which is why it cannot serve a marker
  that means NULL in some columns and is a value in others (the country code "NA").
* **CSV format** otherwise: it takes backslashes literally and matches NULL per column, with
  `NULL '<marker>'` and `FORCE_NOT_NULL (<every column that is not nullable>)`; it reads
  RFC 4180 quoting (quoting: csv) on the server. A quoted field is always a value, never NULL
  (`""` is the empty string), as RFC 4180 readers take it. It costs about 5 % more server CPU.
  With quoting none the quote character is the byte 0x01: PostgreSQL's CSV parser starts a
  quoted section at a quote character anywhere in a field, so it must be a byte the data does
  not hold. Each chunk is checked for it (one memchr); a chunk that holds one takes the slow
  path: each line with the byte gets the affected fields quoted (0x01 ... 0x01, an inner 0x01
  doubled), which CSV reads back to the exact bytes. Chunks are sent cut at line ends (no
  copy: a memoryview), so a line is always checked and rewritten whole.

Both: the trailing delimiter fills a dummy last column (dropped after the load, 1 ms), still
faster than stripping it while streaming; header lines are skipped here, not by COPY's
HEADER (one line only), and an error's record number is translated back to the line in the
file. With quoting csv every quote is checked against RFC 4180 on its way
(core/files.guard_quotes): PostgreSQL's CSV reader takes a quote that RFC 4180 does not allow
where it is (`b "x" c`, `"q"r`, `x""`) without an error and drops it from the field. Every
record is read on its way for a field the server would store changed without an error
(core/value_guard.py: a decimal past its scale, a time finer than its column, a dropped zone).
The rest is PostgreSQL's: encoding conversion (ENCODING), CR LF line ends (detected from the first line;
a file that mixes LF and CR LF fails), invalid bytes and NUL (fail with the line).

varchar(n) is created as text with a CHECK: PostgreSQL's varchar(n) cuts a value's excess
trailing spaces to fit n without an error (the SQL standard's rule), a silent change of the
data. The CHECK reads `octet_length(c) <= n OR char_length(c) <= n`, the same test as
char_length alone (a character is at least one byte), but octet_length comes from the
value's header while char_length counts characters: most values pass on the first half.
"""
from __future__ import annotations

import csv
import hashlib
import io
import re
from pathlib import Path
from typing import Iterator

from switchyard.core.files import data_chunks, guard_line_end, guard_quotes, guard_single_byte, is_gzip_name, single_byte
from switchyard.core.spec import Column, FileFormat
from switchyard.core.value_guard import ValueGuard

QUOTE = b"\x01"
_QQ = QUOTE + QUOTE
_END_MARKER = b"\\."
_VARCHAR = re.compile(r"^(?:varchar|character varying)\((\d+)\)$")


def max_chars(sql_type: str) -> int | None:
    """n for varchar(n) / character varying(n): the length the load checks itself."""
    found = _VARCHAR.match(sql_type.strip().lower())
    return int(found[1]) if found else None


def rendered_type(sql_type: str) -> str:
    """The column type as created: varchar(n) becomes text with a length CHECK (above). char(n)
    stays: it is blank-padded by definition (its trailing spaces carry no meaning, and excess
    ones are cut like the padding they are), and a non-space past n still fails."""
    return "text" if max_chars(sql_type) is not None else sql_type


def length_check_sql(column_sql: str, n: int) -> str:
    """The length CHECK's expression, the same text on target and staging table."""
    return f"octet_length({column_sql}) <= {n} OR char_length({column_sql}) <= {n}"


def length_check_name(column: str) -> str:
    """The CHECK's name: the same on target and staging table, which ATTACH requires."""
    name = f"{column}_length"
    if len(name) <= 63:
        return name
    return f"{column[:46]}_{hashlib.md5(column.encode()).hexdigest()[:8]}_length"


def sql_literal(text: str) -> str:
    """A string literal for COPY's options; control characters in E'' form."""
    if all(" " <= ch <= "~" for ch in text):
        return "'" + text.replace("'", "''") + "'"
    return "E'" + "".join(ch if " " <= ch <= "~" and ch not in "'\\" else
                          ("''" if ch == "'" else "\\\\" if ch == "\\" else f"\\x{ord(ch):02x}")
                          for ch in text) + "'"


def takes_null(fmt: FileFormat, columns: tuple[Column, ...]) -> bool:
    """Whether any field of this format can be NULL: a marker and a nullable column."""
    return fmt.null_marker is not None and any(c.nullable for c in columns)


def copy_format(fmt: FileFormat, columns: tuple[Column, ...]) -> str:
    """"text" (backslashes doubled while streaming) where no field can be NULL and the file
    has no quoting; "csv" otherwise."""
    return "text" if fmt.quoting == "none" and not takes_null(fmt, columns) else "csv"


def copy_options(fmt: FileFormat, columns: tuple[Column, ...], eol_column: str | None, encoding: str,
                 q) -> str:
    """The COPY options that take every field literally, NULL only where the spec allows it."""
    delimiter = f"DELIMITER {sql_literal(fmt.delimiter)}"
    tail = [f"ENCODING {sql_literal(encoding)}", "FREEZE"]
    if copy_format(fmt, columns) == "text":
        # NULL stays \N: with every backslash doubled, no field is ever \N.
        return ", ".join(["FORMAT text", delimiter, *tail])
    nullable = [c.name for c in columns if c.nullable] if fmt.null_marker is not None else []
    literal = [c.name for c in columns if c.name not in nullable] + ([eol_column] if eol_column else [])
    options = ["FORMAT csv", delimiter, "QUOTE '\"'" if fmt.quoting == "csv" else "QUOTE E'\\x01'"]
    if nullable:
        options.append(f"NULL {sql_literal(fmt.null_marker)}")
    if literal:
        options.append(f"FORCE_NOT_NULL ({', '.join(q(n) for n in literal)})")
    return ", ".join(options + tail)


def _quoted_lines(block: bytes, delimiter: bytes, single_field: bool) -> bytes:
    """The slow path of quoting none: each line holding the quote byte (or, in a one-field
    file, a line that is `\\.`, which older servers take as the end of data) gets those
    fields quoted; every other byte is left as it is. A CR before the LF stays outside the
    quotes: it belongs to the line end."""
    lines = block.split(b"\n")
    for i, line in enumerate(lines):
        if QUOTE not in line and not (single_field and line.rstrip(b"\r") == _END_MARKER):
            continue
        cr = b"\r" if line.endswith(b"\r") and i < len(lines) - 1 else b""
        body = line[:-1] if cr else line
        fields = [QUOTE + f.replace(QUOTE, _QQ) + QUOTE if QUOTE in f or (single_field and f == _END_MARKER)
                  else f for f in body.split(delimiter)]
        lines[i] = delimiter.join(fields) + cr
    return b"\n".join(lines)


def copy_chunks(read, fmt: FileFormat, text_format: bool, single_field: bool, size: int = 1 << 20,
                guard: ValueGuard | None = None) -> Iterator[bytes | memoryview]:
    """What to send to COPY, from `read(n)` (the file's decompressed bytes): header lines
    skipped; for text format every backslash doubled; for CSV with quoting none, cut at line
    ends and guarded against the quote byte; for quoting csv, the file as it is, once its
    quotes are where RFC 4180 puts them (MisplacedQuote otherwise: PostgreSQL's CSV reader
    would take a quote elsewhere without an error, and change the field). `guard`: each record
    read for a field the server would change (ChangedValue, core/value_guard.py). Data whose
    last line has no line end: UnendedData, after its last chunk (core/files.guard_line_end)."""
    def chunks() -> Iterator[bytes]:
        # A file cut short inside its last field: COPY would take what is left for the value.
        data = guard_line_end(data_chunks(read, fmt.header_lines, size))
        # In latin-1 or cp1252 every byte is a character: UTF-8 or Windows text would load changed,
        # unrefused.
        data = guard_single_byte(data, fmt.encoding) if single_byte(fmt.encoding) else data
        return guard.chunks(data) if guard is not None else data

    if text_format:
        for chunk in chunks():
            yield chunk.replace(b"\\", b"\\\\") if b"\\" in chunk else chunk
        return
    if fmt.quoting == "csv":
        # The file's own RFC 4180 quoting, read by the server.
        yield from guard_quotes(chunks(), fmt.delimiter)
        return
    delimiter = fmt.delimiter.encode("ascii")
    carry = b""
    for chunk in chunks():
        cut = chunk.rfind(b"\n") + 1
        if not cut:  # a line longer than a chunk
            carry += chunk
            continue
        suspect = QUOTE in chunk or QUOTE in carry or (
            single_field and (_END_MARKER in chunk or _END_MARKER in carry[-1:] + chunk[:1]))
        if suspect:
            yield _quoted_lines(carry + chunk[:cut], delimiter, single_field)
        else:
            if carry:
                yield carry
            yield memoryview(chunk)[:cut]
        carry = chunk[cut:]
    if carry:
        yield _quoted_lines(carry, delimiter, single_field) if (
            QUOTE in carry or (single_field and _END_MARKER in carry)) else carry


# --- error messages: the line a user sees in the file ---------------------------------------
def _lines(path: Path) -> Iterator[bytes]:
    import gzip
    with (gzip.open(path, "rb") if is_gzip_name(path) else path.open("rb")) as fh:
        yield from fh


def record_at(path: Path, fmt: FileFormat, copy_line: int) -> tuple[int, bytes] | None:
    """(line in the file where the record COPY calls `line <copy_line>` starts, its bytes).

    COPY numbers what it was sent, so header lines skipped before it are not counted. With
    quoting csv a record may span lines, and COPY's number is then neither the record's nor
    the file's line: it adds one per quoted line break, counting the CR of a quoted break until
    it has seen the first record's line end and the file's line end character after that
    (PostgreSQL's CopyReadLineText). That rule is followed here to find the record. None when
    the file has no such record."""
    if copy_line < 1:
        return None
    physical = fmt.header_lines
    counted = 0                      # COPY's line number of the record being read
    in_quote = False
    target = None                    # the quoted line break COPY counts, once it knows the line end
    start, held = 0, []
    lines = _lines(path)
    try:
        for _ in range(fmt.header_lines):
            if next(lines, None) is None:
                return None
        for line in lines:
            physical += 1
            if not held:
                counted += 1
                start = physical
            held.append(line)
            if fmt.quoting == "csv":
                for i, part in enumerate(line.split(b'"')):
                    if i:
                        in_quote = not in_quote
                    if in_quote:
                        counted += part.count(target or b"\r")
            if in_quote:
                continue
            if target is None:
                # The first record's line end tells COPY the file's.
                target = b"\r" if line.endswith(b"\r\n") else b"\n"
            if counted >= copy_line:
                return start, b"".join(held)
            held = []
    finally:
        lines.close()
    return (start, b"".join(held)) if held else None  # a last record cut short


def field_count(record: bytes, fmt: FileFormat) -> int:
    """How many fields a record has, as the spec reads it (the trailing delimiter's empty
    field not counted)."""
    delimiter = fmt.delimiter
    if fmt.quoting == "csv":
        text = record.decode(fmt.encoding, errors="replace")
        row = next(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter), [])
        count = len(row)
        return count - 1 if fmt.trailing_delimiter and row and row[-1] == "" else count
    body = record.rstrip(b"\r\n")
    d = delimiter.encode()
    return body.count(d) + (0 if fmt.trailing_delimiter and body.endswith(d) else 1)


def field_index(prefix: bytes, fmt: FileFormat) -> int:
    """Which field (0-based) a record's byte at len(prefix) is in: the delimiters before it,
    outside quotes for quoting csv."""
    d = fmt.delimiter.encode()
    if fmt.quoting == "csv":
        return sum(part.count(d) for part in prefix.split(b'"')[0::2])
    return prefix.count(d)
