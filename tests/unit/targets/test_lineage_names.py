"""How each engine names its tables for lineage tools: OpenLineage's naming spec gives
`<scheme>://host:port` as the namespace and `database.schema.table` as the name."""
from __future__ import annotations

import pytest

from switchyard.targets import adapter_class
from switchyard.targets.base import ConnectionFields


@pytest.mark.parametrize("engine, fields, namespace, name", [
    ("postgres", ConnectionFields("c", host="db.example", port=6432, login="etl", schema="dw"),
     "postgres://db.example:6432", "dw.tpch.orders"),
    # Without a database in the connection, libpq connects to the login's own; without a port, 5432.
    ("postgres", ConnectionFields("c", host="db.example", login="etl"), "postgres://db.example:5432",
     "etl.tpch.orders"),
    ("mssql", ConnectionFields("c", host="sql.example", port=1533, schema="warehouse"), "mssql://sql.example:1533",
     "warehouse.tpch.orders"),
    # The adapter's own default database where the connection names none, and SQL Server's port.
    ("mssql", ConnectionFields("c", host="sql.example"), "mssql://sql.example:1433", "switchyard.tpch.orders"),
])
def test_a_table_is_named_as_openlineage_names_it(engine, fields, namespace, name):
    cls = adapter_class(engine)
    assert cls.lineage_namespace(fields) == namespace
    assert cls.lineage_name(fields, "tpch", "orders") == name
