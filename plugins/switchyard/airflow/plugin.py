"""Airflow plugin: the api-server serves each run's report under /switchyard/reports/, and
every Switchyard run gets a note linking it when the run ends (and one naming any pool it
waits for when the scheduler starts it).

Registered through the package's `airflow.plugins` entry point (pyproject.toml), the way
installed packages give Airflow plugins; the plugins folder's `.airflowignore` keeps Airflow
from loading this file a second time from there.

The stats task writes report.html, report.md, the charts and stats.json into
<SWITCHYARD_RUNS_DIR>/<dag_id>/<run folder>/; its "Run report" button and the run's note
(set by the listener in switchyard.airflow.run_notes) link here. Only those files are served, and
only to a user logged in to Airflow who may read the DAG's runs (the same JWT cookie or
bearer token as the UI).
"""
from __future__ import annotations

import re
from pathlib import Path

from airflow.plugins_manager import AirflowPlugin

from switchyard.airflow import run_notes
from switchyard.airflow.schedule import CronFromStartDate

SERVED = re.compile(r"^(report\.html|report\.md|report-[a-z]+\.svg|stats\.json)$")
SAFE = re.compile(r"^[A-Za-z0-9._-]+$")
MEDIA = {".html": "text/html; charset=utf-8", ".md": "text/markdown; charset=utf-8",
         ".svg": "image/svg+xml", ".json": "application/json"}


def _app():
    from fastapi import Depends, FastAPI, HTTPException
    from fastapi.responses import FileResponse

    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
    from airflow.api_fastapi.core_api.security import get_user

    app = FastAPI(title="Switchyard run reports", docs_url=None, redoc_url=None, openapi_url=None)

    @app.get("/{dag_id}/{run}/{name}")
    def report_file(dag_id: str, run: str, name: str, user=Depends(get_user)) -> FileResponse:
        if not (SAFE.match(dag_id) and SAFE.match(run) and SERVED.match(name)) or ".." in (dag_id + run):
            raise HTTPException(404, "not a report file")
        if not get_auth_manager().is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN,
                                                    details=DagDetails(id=dag_id), user=user):
            raise HTTPException(403, f"not allowed to read runs of {dag_id}")
        from switchyard.settings import runs_dir
        path = runs_dir() / dag_id / run / name
        if not path.is_file():
            raise HTTPException(404, f"{name} of run {run} not found (the run's stats task writes it)")
        return FileResponse(path, media_type=MEDIA[Path(name).suffix])

    return app


class SwitchyardReportsPlugin(AirflowPlugin):
    name = "switchyard_reports"
    listeners = [run_notes]
    # The DAG's schedule when a start date is set: Airflow reads a timetable of a package's own
    # back from the serialized DAG only when a plugin registers it.
    timetables = [CronFromStartDate]

    @property
    def fastapi_apps(self) -> list[dict]:
        # Built when the api-server asks: task processes, which load plugins too, never pay
        # for FastAPI and the api-server's modules.
        return [{"app": _app(), "url_prefix": "/switchyard/reports", "name": "Switchyard run reports"}]
