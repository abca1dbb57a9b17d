#!/usr/bin/env bash
# One-shot init of the stack, safe to run again (`docker compose run --rm airflow-init`):
#   1. Airflow's metadata database;
#   2. the target database on SQL Server (SIMPLE recovery, so bulk loads are minimally logged);
#   3. the Airflow connection `switchyard_target` (type mssql, the pinned ports 2000-2003);
#   4. the pool `switchyard_loads`, sized by the server's schedulers (`switchyard pool sync`);
#   5. the demo TPC-H batch in the shared data volume (reused when it is already there).
# The DAG is unpaused by the `switchyard-demo` service once the dag-processor has parsed it.
set -euo pipefail
export PYTHONPATH="/opt/airflow/plugins${PYTHONPATH:+:$PYTHONPATH}"

airflow db migrate

python - <<'PY'
import json, os, re, sys, time
import pyodbc
from switchyard.targets.mssql import find_odbc_driver, odbc_value

password = os.environ["MSSQL_SA_PASSWORD"]
database = os.environ.get("SWITCHYARD_MSSQL_DATABASE", "switchyard")


def db(name: str) -> str:
    """The database name as a quoted identifier, checked each time it goes into a statement:
    letters, digits and underscores only, so nothing inside the brackets needs escaping."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
        sys.exit(f"SWITCHYARD_MSSQL_DATABASE={name!r} is not a plain name (letters, digits, underscores)")
    return f"[{name}]"


db(database)
# odbc_value braces a value with ; { } = or spaces and doubles every }: PWD={pa}}ss;word}.
conn_str = (f"DRIVER={{{find_odbc_driver()}}};SERVER=mssql,1433;UID=sa;PWD={odbc_value(password)};"
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
    cur.execute(f"CREATE DATABASE {db(database)}")
cur.execute(f"ALTER DATABASE {db(database)} SET RECOVERY SIMPLE")
ports = os.environ.get("SWITCHYARD_MSSQL_PORTS", "2000,2001,2002,2003")
extra = {"load_mode": os.environ.get("SWITCHYARD_MSSQL_LOAD_MODE", "bulk_insert"),
         "server_data_root": "/switchyard/data", "local_data_root": "/switchyard/data",
         "ports": ports, "TrustServerCertificate": "yes"}
fd = os.open("/tmp/switchyard_conn.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as fh:
    json.dump({"switchyard_target": {
        "conn_type": "mssql", "host": os.environ.get("SWITCHYARD_MSSQL_HOST", "mssql-ports"),
        "port": int(ports.split(",")[0]), "login": "sa", "password": password, "schema": database,
        "extra": json.dumps(extra)}}, fh)
print(f"database {database} ready (SIMPLE recovery)", flush=True)
PY

airflow connections import --overwrite /tmp/switchyard_conn.json
rm -f /tmp/switchyard_conn.json
# One load per scheduler: the VISIBLE ONLINE rows of sys.dm_os_schedulers, read by the adapter.
python -m switchyard pool sync --conn-id switchyard_target --pool "${SWITCHYARD_POOL:-switchyard_loads}"

if [ "${SWITCHYARD_DEMO_SCALE:-0.1}" != "0" ]; then
  python -m switchyard generate --scale "${SWITCHYARD_DEMO_SCALE:-0.1}" --streams "${SWITCHYARD_STREAMS:-4}" \
    --batch "${SWITCHYARD_DEMO_BATCH:-demo}"
fi
