"""The benchmark reads autovacuum's own CPU from the server's log lines (PostgreSQL's format for
`log_autovacuum_min_duration`: each automatic vacuum or analyse, then its "system usage" line)."""
from __future__ import annotations

from switchyard_dev.bench.autovacuum import parse

LOG = """\
2026-11-28 23:40:01.123 UTC [4242] LOG:  automatic analyze of table "postgres.bench_staging.lineitem_1"
\tavg read rate: 120.500 MB/s, avg write rate: 0.000 MB/s
\tbuffer usage: 30012 hits, 812 reads, 0 dirtied
\tsystem usage: CPU: user: 0.41 s, system: 0.03 s, elapsed: 0.52 s
2026-11-28 23:40:02.001 UTC [4243] LOG:  automatic vacuum of table "postgres.bench.orders_2": index scans: 0
\tpages: 0 removed, 12000 remain, 0 scanned (0.00% of total)
\tsystem usage: CPU: user: 0.01 s, system: 0.00 s, elapsed: 0.02 s
2026-11-28 23:40:03.500 UTC [4244] LOG:  automatic analyze of table "postgres.bench_staging.orders_1"
\tsystem usage: CPU: user: 0.10 s, system: 0.02 s, elapsed: 0.15 s
2026-11-28 23:40:04.000 UTC [4245] LOG:  automatic aggressive vacuum to prevent wraparound of table "postgres.pg_catalog.pg_class": index scans: 1
\tsystem usage: CPU: user: 0.00 s, system: 0.01 s, elapsed: 0.01 s
2026-11-28 23:40:05.000 UTC [4246] LOG:  automatic analyze of table "postgres.bench.cancelled"
2026-11-28 23:40:06.000 UTC [4247] WARNING:  something else entirely
"""


def test_each_kind_sums_its_entries_cpu_and_elapsed_seconds():
    out = parse(LOG)
    assert out["analyze"] == {"count": 2, "cpu_seconds": 0.56, "elapsed_seconds": 0.67}
    assert out["vacuum"] == {"count": 2, "cpu_seconds": 0.02, "elapsed_seconds": 0.03}


def test_a_log_without_autovacuum_entries_is_nothing():
    out = parse("2026-11-28 LOG:  checkpoint starting: time\n")
    assert out["analyze"]["count"] == out["vacuum"]["count"] == 0
