"""The DAG lever "preload, the connection rendered": the steps' target connection rendered from
a template field (`{{ params.conn_id }}`), as before they read it from the run's params.

A task with a template field sends its rendered fields to Airflow's API server when it starts,
which writes them to the metadata database and prunes that task's older ones
(`TaskInstance.update_rtif`): one request and a few statements per task. The lever puts the
field back on every step (SWITCHYARD_BENCH_RENDERED_CONN_ID=1 in the benchmark's own Airflow,
from its local settings), before the preload builds the DAG.
"""
from __future__ import annotations

import functools
import sys

TEMPLATE = "{{ params.conn_id }}"


def rendered_conn_id() -> None:
    from switchyard.airflow import operators

    base = operators._TargetOperator
    init = base.__init__

    @functools.wraps(init)
    def templated(self, *args, conn_id=None, **kwargs):
        init(self, *args, conn_id=TEMPLATE if conn_id is None else conn_id, **kwargs)

    base.__init__ = templated
    base.template_fields = ("conn_id",)
    operators.PlanBatchOperator.template_fields = ("conn_id", "batch", "tables")
    print("switchyard bench: the steps' connection rendered from a template field (the 'connection rendered' "
          "lever)", file=sys.stderr, flush=True)
