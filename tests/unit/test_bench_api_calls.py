"""The benchmark's count of the API server's requests by kind, from its access log."""
from __future__ import annotations

from switchyard_dev.bench import api_calls

LOG = """\
2026-11-30T16:11:36.508036Z [info     ] request finished               [http.access] client_addr=127.0.0.1:45644 duration_us=82475 loc=http_access_log.py:130 method=PATCH path=/execution/task-instances/01a2/run query= status_code=200
2026-11-30T16:11:36.516358Z [info     ] request finished               [http.access] client_addr=127.0.0.1:49958 duration_us=30000 loc=http_access_log.py:130 method=PUT path=/execution/task-instances/01a2/heartbeat query= status_code=204
2026-11-30T16:11:36.517427Z [info     ] Task started                   [airflow.api_fastapi.execution_api.routes.task_instances] ti_id=01a2
2026-11-30T16:11:36.624126Z [info     ] request finished               [http.access] client_addr=127.0.0.1:53460 duration_us=34208 loc=http_access_log.py:130 method=GET path=/execution/xcoms/d/manual__2026-11-30T15:03:10.615014+00:00/setup.plan/return_value/slice query= status_code=200
2026-11-30T16:11:36.634553Z [info     ] request finished               [http.access] client_addr=127.0.0.1:53460 duration_us=9883 loc=http_access_log.py:130 method=GET path=/execution/connections/switchyard_target query= status_code=200
2026-11-30T16:11:36.706483Z [info     ] request finished               [http.access] client_addr=127.0.0.1:53460 duration_us=20928 loc=http_access_log.py:130 method=POST path=/execution/xcoms/d/r/readings_7.prepare/return_value query= status_code=201
2026-11-30T16:11:36.772767Z [info     ] request finished               [http.access] client_addr=127.0.0.1:53460 duration_us=28540 loc=http_access_log.py:130 method=PATCH path=/execution/task-instances/01a2/state query= status_code=204
2026-11-30T16:11:36.800000Z [info     ] request finished               [http.access] client_addr=127.0.0.1:53460 duration_us=5000 loc=http_access_log.py:130 method=PUT path=/execution/task-instances/01a2/rtif query= status_code=204
2026-11-30T16:11:37.000000Z [info     ] request finished               [http.access] client_addr=127.0.0.1:53461 duration_us=100000 loc=http_access_log.py:130 method=GET path=/api/v2/dags/switchyard_tpch/dagRuns/manual__x query= status_code=200
"""


def test_requests_are_counted_by_what_a_task_does_with_them():
    calls = api_calls.count(iter(LOG.splitlines()))
    assert {k: v["requests"] for k, v in calls.items()} == {
        "start": 1, "heartbeat": 1, "XCom read": 1, "connection": 1, "XCom write": 1, "end": 1,
        "other Execution API": 1, "the benchmark's polling (REST API)": 1}
    assert calls["start"]["server_seconds"] == 0.082
    # Per task run: the tasks' own requests; the polling apart.
    assert api_calls.per_task(calls, 2) == {"start": 0.5, "heartbeat": 0.5, "XCom read": 0.5, "connection": 0.5,
                                            "XCom write": 0.5, "end": 0.5, "other Execution API": 0.5, "all": 3.5}
    report = "\n".join(api_calls.lines(calls, 2, calls, 1))
    assert "XCom read                    0.50         1.00" in report
    assert "and 1 requests of the benchmark's own polling" in report


def test_a_part_without_a_log_counts_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(api_calls, "log_file", lambda: tmp_path / "api-server.out")
    with api_calls.counting() as calls:
        pass
    assert calls.result == {}
    (tmp_path / "api-server.out").write_text(LOG.splitlines()[0] + "\n")
    with api_calls.counting() as calls:
        with (tmp_path / "api-server.out").open("a") as fh:
            fh.write(LOG.splitlines()[1] + "\n")
    assert calls.result == {"heartbeat": {"requests": 1, "server_seconds": 0.03}}
