"""The DAG lever "preload, stats after the Asset events": the stats task after the tables'
publish tasks as well, as before it came after the switches and the batch's publish alone.

The publish tasks carry the tables' Asset events and change nothing in the target; with the
stats after them, the run's end waits for one more round of task starts. The lever puts that
dependency back (SWITCHYARD_BENCH_STATS_AFTER_PUBLISH=1 in the benchmark's own Airflow, from its
local settings), before the preload builds the DAG; the dag-processor, which serializes the DAG
the scheduler follows, reads the same local settings.
"""
from __future__ import annotations

import dataclasses
import functools
import sys


def stats_after_publish() -> None:
    from switchyard import graph

    build = graph.build_graph

    @functools.wraps(build)
    def with_stats_last(*args, **kwargs):
        built = build(*args, **kwargs)
        publishes = tuple(n.id for n in built.nodes if n.kind == "publish")
        nodes = tuple(dataclasses.replace(n, upstream=(*n.upstream, *publishes)) if n.kind == "stats" else n
                      for n in built.nodes)
        return dataclasses.replace(built, nodes=nodes)

    graph.build_graph = with_stats_last
    if "switchyard.airflow.dag_factory" in sys.modules:  # imported by name there
        sys.modules["switchyard.airflow.dag_factory"].build_graph = with_stats_last
    print("switchyard bench: the stats task after the tables' publish tasks (the 'stats after the Asset "
          "events' lever)", file=sys.stderr, flush=True)
