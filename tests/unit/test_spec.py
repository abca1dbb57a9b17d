"""The spec's format keys, read without a database."""
from __future__ import annotations

import pytest

from switchyard.core.spec import SpecError, parse_spec


def _spec(**fmt) -> dict:
    return {"name": "x", "files": "{table}.{stream}.txt", "format": fmt,
            "tables": {"t": {"partitioned": False, "columns": [{"name": "a", "type": "integer"},
                                                                {"name": "b", "type": "text", "nullable": True}]}}}


def test_a_backslash_n_null_marker_is_refused_saying_what_such_an_export_needs():
    """`\\N` is the NULL of backslash-escaped exports, whose other escapes would be loaded as
    they are (`\\\\` as two backslashes): refused, with the export that is read exactly."""
    with pytest.raises(SpecError, match=r"\\N is the NULL of a backslash-escaped export .* Export as CSV instead"):
        parse_spec(_spec(delimiter="\t", null_marker="\\N"), source="x.yaml")
    # Another marker with a backslash is refused as before, without the export's words.
    with pytest.raises(SpecError) as refused:
        parse_spec(_spec(delimiter="\t", null_marker="\\0"), source="x.yaml")
    assert "backslash-escaped" not in str(refused.value)
    assert parse_spec(_spec(delimiter="\t", null_marker="NULL"), source="x.yaml").format.null_marker == "NULL"
