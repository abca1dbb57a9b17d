"""A stream file may be a named pipe: its progress counts the bytes read (a pipe has no position)."""
from __future__ import annotations

import os
import threading

from switchyard.core.files import open_source


def test_progress_of_a_named_pipe_counts_the_bytes_read(tmp_path):
    pipe = tmp_path / "orders.1.tbl"
    os.mkfifo(pipe)
    data = b"1|x|\n" * 5000
    writer = threading.Thread(target=lambda: pipe.write_bytes(data))
    writer.start()
    seen = []
    with open_source(pipe) as source:
        got = b""
        while chunk := source.read(4096):
            got += chunk
            seen.append(source.consumed())
    writer.join()
    assert got == data and seen[-1] == len(data) and seen == sorted(seen)


def test_progress_of_a_plain_file_is_its_position(tmp_path):
    path = tmp_path / "orders.1.tbl"
    path.write_bytes(b"1|x|\n" * 10)
    with open_source(path) as source:
        source.read(2), source.read(7)
        assert source.consumed() == 9
