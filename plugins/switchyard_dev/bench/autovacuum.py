"""What autovacuum did on the server while a part ran, from the server's own log.

With `log_autovacuum_min_duration = 0` PostgreSQL logs every automatic vacuum and analyse with
its own CPU ("system usage: CPU: user: ... s, system: ... s, elapsed: ... s"). The benchmark
sets it for the time of a part (ALTER SYSTEM and a reload, reset afterwards) and reads the log
lines the part added: how much of the server's CPU in a run went to autovacuum's analyses of the
new staging tables, beside the same in the floor.
"""
from __future__ import annotations

import re
from pathlib import Path

_ENTRY = re.compile(r'automatic (?:aggressive )?(vacuum|analyze)(?: to prevent wraparound)? of table "([^"]+)"')
_USAGE = re.compile(r"system usage: CPU: user: ([0-9.]+) s, system: ([0-9.]+) s, elapsed: ([0-9.]+) s")


def parse(text: str) -> dict:
    """Sum each kind's CPU and elapsed seconds over the log's automatic vacuum/analyse entries."""
    out = {"vacuum": {"count": 0, "cpu_seconds": 0.0, "elapsed_seconds": 0.0},
           "analyze": {"count": 0, "cpu_seconds": 0.0, "elapsed_seconds": 0.0}}
    entries = list(_ENTRY.finditer(text))
    for i, entry in enumerate(entries):
        end = entries[i + 1].start() if i + 1 < len(entries) else len(text)
        usage = _USAGE.search(text, entry.end(), end)
        if usage is None:
            continue
        kind = out[entry.group(1)]
        kind["count"] += 1
        kind["cpu_seconds"] += float(usage.group(1)) + float(usage.group(2))
        kind["elapsed_seconds"] += float(usage.group(3))
    for kind in out.values():
        kind["cpu_seconds"] = round(kind["cpu_seconds"], 2)
        kind["elapsed_seconds"] = round(kind["elapsed_seconds"], 2)
    return out


class AutovacuumLog:
    """`with AutovacuumLog(uri, logfile) as log: ...` then `log.result`: autovacuum's work in between."""

    def __init__(self, uri: str, logfile: Path):
        self.uri, self.logfile, self.result = uri, logfile, None

    def _set(self, value: str | None) -> None:
        import psycopg
        with psycopg.connect(self.uri, autocommit=True) as conn:  # ALTER SYSTEM: not in a transaction
            if value is None:
                conn.execute("ALTER SYSTEM RESET log_autovacuum_min_duration")
            else:
                conn.execute(f"ALTER SYSTEM SET log_autovacuum_min_duration = {int(value)}")
            conn.execute("SELECT pg_reload_conf()")

    def __enter__(self) -> "AutovacuumLog":
        self._set("0")
        self.offset = self.logfile.stat().st_size if self.logfile.exists() else 0
        return self

    def __exit__(self, *exc) -> None:
        try:
            with open(self.logfile, "rb") as fh:
                fh.seek(self.offset)
                self.result = parse(fh.read().decode(errors="replace"))
        except OSError:
            self.result = None
        finally:
            self._set(None)


def measuring(uri: str) -> AutovacuumLog:
    """Autovacuum's work on the embedded server from here to the end of the `with` block."""
    from switchyard_dev.embedded import EmbeddedPostgres
    return AutovacuumLog(uri, EmbeddedPostgres().logfile)
