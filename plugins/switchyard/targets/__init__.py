"""Target adapters: one per database engine over a small shared base.

The DAG and the operators speak only to `TargetAdapter`; each engine's SQL lives in
`targets/<engine>/templates/` and its quirks in its own module here. Nothing here imports
Airflow: switchyard/airflow/connections.py maps an Airflow connection to an adapter.
"""
from __future__ import annotations

from switchyard.targets.base import LeaseHeld, LoadResult, TargetAdapter, TargetError, permanent_reason
from switchyard.targets.registry import ENGINES, adapter_class, engines

__all__ = ["ENGINES", "LeaseHeld", "LoadResult", "TargetAdapter", "TargetError", "adapter_class", "engines",
           "permanent_reason"]
