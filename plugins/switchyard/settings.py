"""Where Switchyard keeps its files: one place that reads the locations from the environment.

| variable | default | what |
|---|---|---|
| SWITCHYARD_STATE_DIR | `.switchyard/` in the project | local state: embedded server, local Airflow, runs |
| SWITCHYARD_DATA_ROOT | `<state dir>/data` | batches: one folder each, with its manifest |
| SWITCHYARD_RUNS_DIR | `<state dir>/runs` | each run's statistics and report |
"""
from __future__ import annotations

import os
from pathlib import Path

# plugins/switchyard/settings.py -> the project folder.
PROJECT = Path(__file__).resolve().parents[2]


def _path(variable: str, default: Path) -> Path:
    configured = os.environ.get(variable)
    return Path(configured).resolve() if configured else default.resolve()


def state_dir() -> Path:
    return _path("SWITCHYARD_STATE_DIR", PROJECT / ".switchyard")


def data_root() -> Path:
    return _path("SWITCHYARD_DATA_ROOT", state_dir() / "data")


def runs_dir() -> Path:
    return _path("SWITCHYARD_RUNS_DIR", state_dir() / "runs")
