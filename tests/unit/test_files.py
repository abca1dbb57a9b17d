"""core/files.py: RFC 4180's quotes checked as a file streams, whatever its chunks."""
from __future__ import annotations

import pytest

from switchyard.core.files import MisplacedQuote, data_chunks, guard_quotes, place_of

# Quotes where RFC 4180 puts them: doubled inside a quoted field, a quoted line break and
# delimiter, an empty quoted field, CR LF line ends, a last line without its line end.
WELL_QUOTED = [b'1,"a ""b"" c",3\n', b'2,"",x\n', b'3,"multi\nline","x,y"\r\n', b'4,"""q""",5\n',
               b'5,plain,6', b'"a","b"\n', b'"",""\n""\n']
# (the file, the offset of the first quote out of place)
MISPLACED = [(b'1,b "x" c,3\n', 4), (b'3,"q"r,3\n', 4), (b'4,x"",5\n', 3), (b'5,"a"" b"c,6\n', 8),
             (b'""x,1\n', 1), (b'1,2,"a"\n1,x"\n', 11), (b'1,"a"\n"b"c\n', 8)]
SIZES = (1, 2, 3, 7, 4096)


def _guarded(data: bytes, size: int) -> int | None:
    try:
        for _ in guard_quotes([data[i:i + size] for i in range(0, len(data), size)], ","):
            pass
    except MisplacedQuote as exc:
        return exc.offset
    return None


@pytest.mark.parametrize("data", WELL_QUOTED)
def test_quotes_where_rfc_4180_puts_them_pass_whatever_the_chunks(data):
    assert {_guarded(data, size) for size in SIZES} == {None}


@pytest.mark.parametrize("data, offset", MISPLACED)
def test_the_first_quote_out_of_place_is_found_whatever_the_chunks(data, offset):
    assert {_guarded(data, size) for size in SIZES} == {offset}


def test_the_chunks_go_on_unchanged():
    data = b"\n".join(d.rstrip(b"\n") for d in WELL_QUOTED)
    chunks = [data[i:i + 5] for i in range(0, len(data), 5)]
    assert list(guard_quotes(chunks, ",")) == chunks


def test_a_misplaced_quote_is_named_by_its_line_and_field_after_the_header(tmp_path):
    path = tmp_path / "f.csv"
    body = b'1,"two\nlines",x\n' * 40_000 + b'9,"ok",x"y\n'
    path.write_bytes(b"code,name,note\n" + body)
    with path.open("rb") as fh:
        with pytest.raises(MisplacedQuote) as found:
            for _ in guard_quotes(data_chunks(fh.read, 1, 1 << 16), ","):
                pass
    assert found.value.offset == body.index(b'x"y') + 1
    assert place_of(path, 1, ",", found.value.offset) == (1 + 80_000 + 1, 2)


def test_data_chunks_skip_the_header_lines_across_chunks():
    data = b"h1\nh2\nrow1\nrow2\n"
    for size in (1, 2, 5, 100):
        read = iter([data[i:i + size] for i in range(0, len(data), size)] + [b""]).__next__
        assert b"".join(data_chunks(lambda n: read(), 2, size)) == b"row1\nrow2\n"


def test_without_quoting_a_quote_is_a_character_when_a_place_is_named(tmp_path):
    from switchyard.core.files import place_of
    path = tmp_path / "f.dat"
    data = b'1|5" screen|a|\n2|x|caf\xc3\xa9|\n'
    path.write_bytes(data)
    at = data.index(b"\xc3")
    assert place_of(path, 0, "|", at, quoted=False) == (2, 2)
    assert place_of(path, 0, "|", at) != (2, 2)     # read as RFC 4180, the lone quote opens a field
