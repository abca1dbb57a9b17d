"""Opening a stream file the way its name says: gzip when it ends in `.gz`, plain otherwise.

A gzip file is decompressed while it is read, a chunk at a time: no uncompressed copy is
ever written. A plain-named file that starts with gzip's magic bytes is refused with a
message that says so, before anything is loaded: loading it would fail on the first line
with an encoding error that does not say why.

The loaders share this; the manifest producer (batch.py) reads files with its own code, so
that its counts stay an independent check of what a load reports.
"""
from __future__ import annotations

import gzip
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

GZIP_MAGIC = b"\x1f\x8b"


class StreamFileError(ValueError):
    """The stream file cannot be read as its name and spec say; the message names the file."""


def is_gzip_name(path: Path) -> bool:
    return path.name.endswith(".gz")


# What a plain-named gzip file gets told (after its name, and where the loader can, its line
# and column).
GZIP_UNDER_PLAIN_NAME = ("the file is gzip-compressed (it starts with gzip's magic bytes 1f 8b) but its "
                         "name does not end in .gz: name it *.gz (and the spec's files pattern too) to "
                         "load it compressed, or decompress it")


def gzip_under_plain_name(path: Path) -> bool:
    """Whether a file whose name does not end in .gz is gzip-compressed all the same."""
    if is_gzip_name(path):
        return False
    with path.open("rb") as fh:
        return fh.read(2) == GZIP_MAGIC


class GzipUnderPlainName(StreamFileError):
    """A plain-named file that starts with gzip's magic bytes."""


class Source:
    """A stream file opened for reading: `read(n)` gives decompressed bytes, `consumed()` how
    many bytes of the file itself have been read so far (for progress against its size)."""

    def __init__(self, raw: BinaryIO, reader: BinaryIO, head: bytes = b""):
        self._raw = raw
        self.reader = reader
        self._head = head
        self._given = 0

    def read(self, size: int) -> bytes:
        if self._head:
            head, self._head = self._head, b""
            self._given += len(head)
            return head
        try:
            data = self.reader.read(size)
        except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
            raise StreamFileError(f"{self._raw.name}: not a readable gzip file: {exc}") from exc
        self._given += len(data)
        return data

    def consumed(self) -> int:
        try:
            return self._raw.tell()
        except OSError:  # a named pipe has no position: the bytes read from it so far
            return self._given


@contextmanager
def open_source(path: Path) -> Iterator[Source]:
    """The file's bytes as the spec means them: decompressed when the name ends in `.gz`.

    Refuses a plain-named gzip file (GzipUnderPlainName), from the bytes it reads anyway, so a
    named pipe is read once. Unbuffered for plain files: each read returns what is there, so
    a pipe need not fill a whole chunk before the server sees it.
    """
    with path.open("rb", buffering=0) as raw:
        if is_gzip_name(path):
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield Source(raw, unzipped)
            return
        head = b""
        while len(head) < len(GZIP_MAGIC):
            more = raw.read(len(GZIP_MAGIC) - len(head))
            if not more:
                break
            head += more
        if head == GZIP_MAGIC:
            raise GzipUnderPlainName(f"{path}: {GZIP_UNDER_PLAIN_NAME}")
        yield Source(raw, raw, head)


def data_chunks(read, header_lines: int, size: int = 1 << 20) -> Iterator[bytes]:
    """The file's bytes after its first `header_lines` lines, from `read(n)`, a chunk at a time."""
    skipped, chunk = 0, b""
    while skipped < header_lines:
        chunk = read(size)
        if not chunk:
            return
        pos = 0
        while skipped < header_lines:
            at = chunk.find(b"\n", pos)
            if at < 0:
                break
            pos, skipped = at + 1, skipped + 1
        chunk = chunk[pos:] if skipped == header_lines else b""
    if chunk:
        yield chunk
    while chunk := read(size):
        yield chunk


# --- the last line's end ------------------------------------------------------------------------
class UnendedData(Exception):
    """Data whose last line has no line end; `offset`: its last byte's, into the data after the
    header lines."""

    def __init__(self, offset: int):
        super().__init__(offset)
        self.offset = offset


# What a file whose last line has no line end gets told, after its file and line.
UNENDED_LINE = ("the file's last line has no line end: a file cut short (a copy that stopped, a full disk) ends "
                "so, and its last record would load with what is left of its last field, without an error; "
                "write every line with its line end, the last one too")


def guard_line_end(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The chunks as they are; UnendedData after the last one when the data does not end with a
    line end. A file cut short inside its last record's last field still has as many fields as
    any record, and the servers' loads take what is left for the field's value; a load's
    transaction is still open when this raises, so nothing of the file is kept. The plan reads a
    plain file's last byte before any load; a compressed file's end is only seen here, or by a
    check that decompresses it whole."""
    size, last = 0, b"\n"
    for chunk in chunks:
        if chunk:
            size, last = size + len(chunk), chunk[-1:]
        yield chunk
    if last != b"\n":
        raise UnendedData(size - 1)


# --- RFC 4180's quotes ------------------------------------------------------------------------
class MisplacedQuote(Exception):
    """A `"` where RFC 4180 allows none, `offset` bytes into the data after the header lines.
    PostgreSQL's CSV reader takes such a quote without an error and changes the field: `b "x" c`
    is stored as `b x c`, `"q"r` as `qr`, `x""` as `x`."""

    def __init__(self, offset: int):
        super().__init__(offset)
        self.offset = offset


# What a misplaced quote gets told, after its file, line and column.
MISPLACED_QUOTE = ("a quote where RFC 4180 allows none (quoting: csv): a field holding a quote is quoted "
                   "whole, each quote in it doubled (\"b \"\"x\"\" c\"), and nothing follows a closing quote but "
                   "the delimiter or the line end; a CSV reader that is not strict (PostgreSQL's) would drop the quote "
                   "without an error, changing the value")
_QUOTE, _LF, _CR = 0x22, 0x0A, 0x0D


def guard_quotes(chunks: Iterable[bytes], delimiter: str) -> Iterator[bytes]:
    """The chunks of a file with RFC 4180 quoting (its header lines skipped), each as it is once
    its quotes are checked; MisplacedQuote at the first one out of place.

    Counted from the start of the data, a field's quotes alternate: an opening one (a quoted
    field's first byte, or the second of a doubled quote inside it) follows a delimiter, a line
    end or a quote; a closing one (the field's last byte, or the first of a doubled quote) is
    followed by a delimiter, a line end, a quote or the end of the data. That is RFC 4180's
    grammar for quotes; array operations check it at about 5 ms per MB of a file that quotes
    every field (a parser in Python would cost several times the server's COPY)."""
    import numpy as np
    d = ord(delimiter)
    seen = 0            # quotes before this chunk: their count's parity says which role comes next
    before = _LF        # the byte before the chunk: the data starts as a line does
    held = None         # a closing quote that ended the last chunk, its next byte not seen yet
    offset = 0
    for chunk in chunks:
        if not chunk:
            continue
        data = np.frombuffer(chunk, dtype=np.uint8)
        if held is not None and data[0] not in (d, _LF, _CR, _QUOTE):
            raise MisplacedQuote(held)
        held = None
        at = np.flatnonzero(data == _QUOTE)
        if len(at):
            opening = np.arange(seen, seen + len(at)) % 2 == 0
            prev = data[at - 1]                 # at 0 this reads the chunk's last byte: set below
            if at[0] == 0:
                prev[0] = before
            last = at == len(data) - 1
            nxt = data[np.minimum(at + 1, len(data) - 1)]
            bad = np.flatnonzero((opening & ~np.isin(prev, (d, _LF, _QUOTE)))
                                 | (~opening & ~last & ~np.isin(nxt, (d, _LF, _CR, _QUOTE))))
            if len(bad):
                raise MisplacedQuote(offset + int(at[bad[0]]))
            if last[-1] and not opening[-1]:
                held = offset + int(at[-1])
            seen += len(at)
        before = int(data[-1])
        offset += len(chunk)
        yield chunk


def place_of(path: Path, header_lines: int, delimiter: str, offset: int, quoted: bool = True) -> tuple[int, int]:
    """(the file's line, the field's index in its record) of the byte `offset` bytes into the
    data after the header lines (where a guard here stopped), the file read again up to it. The
    record's start is looked for in the chunk that holds the byte and the one before it (a record
    rarely spans more); with RFC 4180 quoting (`quoted`) the quotes before it are counted, so a
    quoted line break ends no record; without it a quote is a character like any other."""
    import re
    lines, quotes, before = header_lines + 1, 0, (b"", 0)   # (the chunk before, the quotes before it)
    window, parity = b"", 0
    with open_source(path) as source:
        for chunk in data_chunks(source.read, header_lines):
            part = chunk[:offset]
            lines += part.count(b"\n")
            if offset <= len(chunk):
                window, parity = before[0] + part, before[1]
                break
            offset -= len(chunk)
            before = (chunk, quotes)
            quotes += chunk.count(b'"')
    if not quoted:
        record = window[window.rfind(b"\n") + 1:]
        return lines, record.count(delimiter.encode())
    inside, start = parity % 2 == 1, 0
    for mark in re.finditer(rb'["\n]', window):
        if mark.group() == b'"':
            inside = not inside
        elif not inside:
            start = mark.end()
    record = window[start:]
    return lines, sum(part.count(delimiter.encode()) for part in record.split(b'"')[0::2])


# --- text of another encoding in a file the spec calls latin-1 or cp1252 ---------------------------
class WrongSingleByte(Exception):
    """A file the spec calls latin-1 or cp1252 whose bytes past ASCII say it is in another encoding,
    at `offset` bytes into its data; `told` says which and what the load would store. In those
    encodings every byte is a character, so the load would take the text without an error."""

    def __init__(self, offset: int, told: str):
        super().__init__(offset, told)
        self.offset, self.told = offset, told


def single_byte(encoding: str) -> bool:
    """Whether the spec's encoding is latin-1 or cp1252, in which any byte is a character."""
    return _codec(encoding) in ("iso8859-1", "cp1252")


def _codec(encoding: str) -> str | None:
    import codecs
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return None


_C1 = bytes(range(0x80, 0xA0))


def guard_single_byte(chunks: Iterable[bytes], encoding: str) -> Iterator[bytes]:
    """The chunks of a file the spec calls latin-1 or cp1252, each as it is once its bytes past
    ASCII are seen to be neither UTF-8 text nor, in latin-1, C1 control characters (0x80-0x9F,
    which text never holds and Windows' cp1252 writes `€`, `‘`, `’`, `…` with); WrongSingleByte
    otherwise. Text in those encodings almost never reads as UTF-8 (each of its bytes past ASCII
    would have to come in UTF-8's patterns). ASCII chunks cost one pass, the others a UTF-8
    decode and, in latin-1, one deletion pass (C speed)."""
    import re
    latin1 = _codec(encoding) == "iso8859-1"
    offset = 0
    for chunk in chunks:
        if not chunk.isascii():
            text = bytes(chunk)
            try:
                text.decode("utf-8")
                utf8 = True
            except UnicodeDecodeError as exc:
                # A chunk may end inside a character: the bytes before it decide.
                utf8 = exc.reason == "unexpected end of data" and exc.start > 0 and _decodes(text[:exc.start])
            if utf8:
                raise WrongSingleByte(offset + re.search(rb"[\x80-\xff]", text).start(),
                                      utf8_in_single_byte(encoding))
            if latin1 and len(text.translate(None, _C1)) != len(text):
                at = re.search(rb"[\x80-\x9f]", text).start()
                raise WrongSingleByte(offset + at, c1_in_latin1(text[at]))
        offset += len(chunk)
        yield chunk


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return not data.isascii()


def utf8_in_single_byte(encoding: str) -> str:
    """What a file the spec calls `encoding` that reads as UTF-8 gets told, after its place."""
    return (f"the file's text past ASCII reads as UTF-8, but the spec says its encoding is {encoding}: each such "
            f"character would load as two or three others without an error (Müller as MÃ¼ller); say "
            f"`encoding: utf-8`")


def c1_in_latin1(byte: int) -> str:
    """What a latin-1 file holding the byte `byte` (0x80-0x9F) gets told, after its place."""
    windows = bytes([byte]).decode("cp1252", errors="replace")
    seen = f"{windows!r} in Windows' cp1252" if windows != "\ufffd" else "no character in cp1252 either"
    return (f"byte 0x{byte:02x}, a control character in latin-1 (C1, 0x80-0x9F), which text does not hold; it is "
            f"{seen}: the load would store the control character without an error; if the file was written "
            f"on Windows, say `encoding: cp1252`")
