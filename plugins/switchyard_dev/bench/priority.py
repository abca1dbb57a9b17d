"""The DAG lever "preload, control plane niced": Airflow's processes that do not feed the server
at a lower CPU priority than the loads that do.

In the production shape the loads' COPY clients (reading, guarding and sending their files)
share the Airflow core with the scheduler, the API server, the DAG processor, the triggerer and
the other steps' task processes; a COPY client waiting for that core leaves the server's core
idle once the socket's buffer is drained. With SWITCHYARD_BENCH_CONTROL_NICE=N the benchmark's
local settings raise the niceness (which any process may raise, never lower, without
privileges) of the API server, the DAG processor and the triggerer at their start, and of every
task process whose step sends no file, before its step. The scheduler keeps its priority: its
LocalExecutor workers fork the loads, which would inherit it. A measuring device first.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

# Airflow's services that never fork a load's task process.
SERVICES = ("api-server", "dag-processor", "triggerer")


def service(argv: list[str]) -> str | None:
    if len(argv) >= 2 and Path(argv[0]).name == "airflow" and argv[1] in SERVICES:
        return argv[1]
    return None


def nice_control_plane(niceness: int, argv: list[str] | None = None) -> str:
    """Lower this process's priority if it is one of SERVICES; make every task whose step sends
    no file lower its own before the step. What it did, for the services' logs."""
    argv = sys.argv if argv is None else argv
    name = service(argv)
    if name:
        os.nice(niceness)
        return f"{name} at niceness {os.nice(0)}"
    from switchyard.airflow import operators

    feeds = (operators.LoadOperator, operators.GroupStepsOperator)
    before = operators._TargetOperator.pre_execute

    def pre_execute(self, context):
        if not isinstance(self, feeds):
            os.nice(niceness)
        return before(self, context)

    operators._TargetOperator.pre_execute = pre_execute
    return "task processes of steps that send no file niced"
