"""The SQL Server target: the record-load method (see adapter.py), one concern per module.

* settings: a URI or a connection's fields and extras into typed settings;
* adapter: `MssqlAdapter`, its flags and how it is made; its steps by concern:
  sql (each step's T-SQL), commit_sql (a commit's and a publish's T-SQL, the plan as a script),
  session (connections pinned to ports, statements, the lease), server (the instance's state),
  preflight (setup), load (BULK INSERT and TDS bulk copy), commit (switch and publish);
* rows: the TDS path's reader (rows parsed without locale rules);
* dmv: where a load ran and what the server waited on (DMV queries and deltas);
* errors: which failures are the data's (permanent) and which are worth a retry;
* guard: one load per scheduler, the retry policy;
* server_config: what a DBA sets on the instance for pinned loads (no connection).

Drivers (pyodbc, mssql-python) are imported only inside the functions that use them.
"""
from __future__ import annotations

from switchyard.targets.mssql.adapter import MssqlAdapter, plan_script
from switchyard.targets.mssql.dmv import IDLE_WAITS, snapshot_delta, stats_delta
from switchyard.targets.mssql.errors import (DATA_ERRORS, LOGIN_REFUSED, error_numbers, is_data_error,
                                             is_login_refused)
from switchyard.targets.mssql.guard import (SCHEDULER_BUSY_ERROR, SCHEDULER_BUSY_MESSAGE, GuardOutcome,
                                            SchedulerBusy, is_scheduler_busy, with_scheduler_guard)
from switchyard.targets.mssql.rows import FileRows, converter
from switchyard.targets.mssql.session import drain, first_row
from switchyard.targets.mssql.settings import (ADAPTER_OPTIONS, DEFAULT_PORT, LOAD_MODES, MAX_PACKET_SIZE,
                                               ODBC_DRIVER_NAME, Endpoint, find_odbc_driver, odbc_value,
                                               parse_connection, parse_uri)
from switchyard.targets.mssql.tsql import nstr, sstr

__all__ = [
    "ADAPTER_OPTIONS", "DATA_ERRORS", "DEFAULT_PORT", "IDLE_WAITS", "LOAD_MODES", "LOGIN_REFUSED", "MAX_PACKET_SIZE",
    "ODBC_DRIVER_NAME", "SCHEDULER_BUSY_ERROR", "SCHEDULER_BUSY_MESSAGE", "Endpoint", "FileRows", "GuardOutcome",
    "MssqlAdapter", "SchedulerBusy", "converter", "drain", "error_numbers", "find_odbc_driver", "first_row",
    "is_data_error", "is_login_refused", "is_scheduler_busy", "nstr", "odbc_value", "parse_connection", "parse_uri", "plan_script",
    "snapshot_delta", "sstr", "stats_delta", "with_scheduler_guard",
]
