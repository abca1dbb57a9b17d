"""Numbers people can read: rates, seconds, bytes, shares, times, as the report writes them."""
from __future__ import annotations

import html
import math
from datetime import datetime
from typing import Any


def _int(value: Any) -> str:
    return f"{value:,.0f}" if isinstance(value, (int, float)) else "–"


def _rate(value: Any) -> str:
    """A rate with as many decimals as it needs to not read as zero."""
    if not isinstance(value, (int, float)):
        return "–"
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:,.1f}"
    if abs(value) >= 1:
        return f"{value:,.2f}"
    return f"{value:.{1 - int(math.floor(math.log10(abs(value))))}f}"


def _secs(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "–"
    if value >= 3600:
        return f"{int(value // 3600)} h {int(value % 3600 // 60):02d} min"
    if value >= 120:
        return f"{int(value // 60)} min {value % 60:04.1f} s"
    return f"{value:,.2f} s" if value < 10 else f"{value:,.1f} s"


def _bytes(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "–"
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:,.2f} {unit}"
    return f"{value:,.0f} B"


def _pct(value: Any) -> str:
    return f"{value:.0%}" if isinstance(value, (int, float)) else "–"


def _ts(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _plain(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return f"{_plain(value[0])} .. {_plain(value[1])}"
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items())
    return str(value)


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)
