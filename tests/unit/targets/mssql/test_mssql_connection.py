"""An Airflow connection -> the SQL Server adapter, through switchyard.airflow.connections
(the one module that reads connections; targets/mssql never imports Airflow).

The connection is given as Airflow keeps one in the environment (AIRFLOW_CONN_<ID>, JSON)
and looked up by Airflow's own Task SDK; no server is needed: nothing here connects.
"""
from __future__ import annotations

import json
import uuid

import pytest

from switchyard.airflow.connections import adapter_for
from switchyard.core.spec import load_spec
from switchyard.targets import TargetError
from switchyard.targets.mssql import Endpoint, MssqlAdapter, parse_connection

SPEC = load_spec("tpch")


def connection(monkeypatch, **fields) -> str:
    conn_id = f"sy_mssql_{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps({"conn_type": "mssql", **fields}))
    return conn_id


def test_the_connection_gives_the_endpoint_and_the_settings(monkeypatch):
    conn_id = connection(monkeypatch, host="db.example", port=14330, login="loader", password="s;cret",
                         schema="warehouse", extra={"ports": "2001,2002", "load_mode": "bcp",
                                                    "packet_size": 32767, "Encrypt": "yes",
                                                    "TrustServerCertificate": "yes"})
    a = adapter_for(conn_id, SPEC, schema="dw")
    assert isinstance(a, MssqlAdapter) and a.conn_id == conn_id
    assert a.endpoint == Endpoint(host="db.example", port=14330, user="loader", password="s;cret",
                                  database="warehouse",
                                  attributes=(("Encrypt", "yes"), ("TrustServerCertificate", "yes")))
    assert a.ports == [2001, 2002] and a.load_mode == "tds" and a.packet_size == 32767 and a.schema == "dw"
    assert a.database == "warehouse"
    text = a.odbc_connection_string(2002, driver="ODBC Driver 18 for SQL Server")
    assert "SERVER=db.example,2002" in text and "UID=loader" in text and "PWD={s;cret}" in text
    assert "Encrypt=yes" in text and "TrustServerCertificate=yes" in text


def test_the_steps_sessions_carry_its_task_name_as_the_program_name(monkeypatch):
    """sys.dm_exec_sessions.program_name shows the task a session belongs to; without a name,
    "switchyard"."""
    conn_id = connection(monkeypatch, host="db.example")
    named = adapter_for(conn_id, SPEC, session_name="switchyard:lineitem_3.load")
    assert "APP=switchyard:lineitem_3.load;" in named.odbc_connection_string(driver="ODBC Driver 18 for SQL Server")
    assert "APP=switchyard;" in adapter_for(conn_id, SPEC).odbc_connection_string(driver="ODBC Driver 18 for SQL Server")


def test_options_given_win_over_the_connections(monkeypatch):
    conn_id = connection(monkeypatch, host="db.example", extra={"batch_size": 5000, "load_mode": "tds"})
    a = adapter_for(conn_id, SPEC, batch_size=250000)
    assert a.batch_size == 250000 and a.load_mode == "tds"
    # The defaults where the connection leaves a field out: port 1433, database switchyard,
    # a trusted connection.
    assert (a.endpoint.port, a.endpoint.database, a.endpoint.user) == (1433, "switchyard", None)
    assert "Trusted_Connection=yes" in a.odbc_connection_string(driver="ODBC Driver 18 for SQL Server")


def test_an_unknown_extra_is_refused_by_name(monkeypatch):
    conn_id = connection(monkeypatch, host="db.example", extra={"Autocommit": "no"})
    with pytest.raises(TargetError, match="connection option 'Autocommit' is not known"):
        adapter_for(conn_id, SPEC)
    with pytest.raises(TargetError, match="connection port 'x' is not a TCP port"):
        parse_connection(host="db.example", port="x")


def test_a_connection_id_alone_is_not_looked_up_by_the_adapter():
    with pytest.raises(TargetError, match="connection 'warehouse': .*switchyard.airflow.connections.adapter_for"):
        MssqlAdapter(SPEC, conn_id="warehouse")
