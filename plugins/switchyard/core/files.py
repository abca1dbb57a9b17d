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
from typing import BinaryIO, Iterator

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
