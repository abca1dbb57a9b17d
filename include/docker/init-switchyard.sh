#!/usr/bin/env bash
# One-shot init of the stack: Airflow's metadata DB and admin, the target database on
# SQL Server (SIMPLE recovery, so bulk loads are minimally logged), the Airflow connection
# `switchyard_target` and the pool `switchyard_loads` sized by the server's schedulers.
set -euo pipefail

airflow db migrate

python - <<'PY'
import json, os, sys, time
import pyodbc
sys.path.insert(0, "/opt/airflow/plugins")
from switchyard.targets.mssql import find_odbc_driver

password = os.environ["MSSQL_SA_PASSWORD"]
database = os.environ.get("SWITCHYARD_MSSQL_DATABASE", "switchyard")
driver = find_odbc_driver()
conn_str = (f"DRIVER={{{driver}}};SERVER=mssql,1433;UID=sa;PWD={{{password}}};"
            "Encrypt=yes;TrustServerCertificate=yes")
for attempt in range(60):
    try:
        conn = pyodbc.connect(conn_str, autocommit=True, timeout=5)
        break
    except pyodbc.Error as exc:
        print(f"waiting for SQL Server ({exc.args[-1]})", flush=True)
        time.sleep(5)
else:
    sys.exit("SQL Server did not accept logins")
cur = conn.cursor()
if not cur.execute("SELECT 1 FROM sys.databases WHERE name = ?", database).fetchone():
    # The name is checked before it reaches the statement: letters, digits, underscores.
    if not database.replace("_", "").isalnum():
        sys.exit(f"SWITCHYARD_MSSQL_DATABASE={database!r} is not a plain name")
    cur.execute(f"CREATE DATABASE [{database}]")
cur.execute(f"ALTER DATABASE [{database}] SET RECOVERY SIMPLE")
schedulers = cur.execute("SELECT COUNT(*) FROM sys.dm_os_schedulers WHERE status = 'VISIBLE ONLINE'").fetchone()[0]
ports = os.environ.get("SWITCHYARD_MSSQL_PORTS", "2000,2001,2002,2003")
extra = {"load_mode": os.environ.get("SWITCHYARD_MSSQL_LOAD_MODE", "bulk_insert"),
         "server_data_root": "/switchyard/data", "local_data_root": "/switchyard/data",
         "ports": ports, "TrustServerCertificate": "yes"}
with open("/tmp/switchyard_conn.json", "w") as fh:
    json.dump({"switchyard_target": {
        "conn_type": "mssql", "host": os.environ.get("SWITCHYARD_MSSQL_HOST", "mssql-ports"),
        "port": int(ports.split(",")[0]), "login": "sa", "password": password, "schema": database,
        "extra": json.dumps(extra)}}, fh)
with open("/tmp/switchyard_pool_slots", "w") as fh:
    fh.write(str(schedulers))
print(f"database {database} ready; {schedulers} schedulers", flush=True)
PY

airflow connections import --overwrite /tmp/switchyard_conn.json
airflow pools set switchyard_loads "$(cat /tmp/switchyard_pool_slots)" "Switchyard: one load per SQL Server scheduler"
rm -f /tmp/switchyard_conn.json
