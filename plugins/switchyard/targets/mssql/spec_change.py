"""The spec against an existing SQL Server table (core/spec_diff.py): the table as the pre-flight
read it (catalog.TargetTable), what the spec's loads need in the catalog's own type names, and
the T-SQL that brings the table in line. Names are validated identifiers, bracket-quoted;
types are the spec's validated types; nothing else reaches the SQL text.

SQL Server makes no index from the spec's `unique` (validation checks it): every unique index
on the target is a DBA's, never dropped. BULK INSERT loads a file by position, so a column of
the table that the files do not carry is a difference to resolve, not a column to leave NULL.
"""
from __future__ import annotations

import re
from typing import Sequence

from switchyard.core.spec import Table
from switchyard.core.spec_diff import Existing, ExistingColumn, ExistingUnique, Needed
from switchyard.targets.base import TargetError
from switchyard.targets.mssql.catalog import TargetTable
from switchyard.targets.mssql.types import column_type

_SPEC_TYPE = re.compile(r"^\s*([a-z][a-z0-9 ]*?)\s*(?:\(\s*(max|\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")
# Spellings SQL Server reads as another type name, and the sizes it gives a type written without one
# (https://learn.microsoft.com/en-us/sql/t-sql/data-types/data-types-transact-sql).
_SYNONYM = {"integer": "int", "double precision": "float", "character": "char", "character varying": "varchar",
            "dec": "decimal", "rowversion": "timestamp"}
_DEFAULT_SIZE = {"char": "(1)", "varchar": "(1)", "nchar": "(1)", "nvarchar": "(1)", "binary": "(1)",
                 "varbinary": "(1)", "decimal": "(18,0)", "numeric": "(18,0)", "datetime2": "(7)", "time": "(7)",
                 "datetimeoffset": "(7)"}
_SIZED = {"char", "varchar", "nchar", "nvarchar", "binary", "varbinary", "decimal", "numeric", "datetime2", "time",
          "datetimeoffset"}


def catalog_type(sql_type: str) -> str:
    """A spec's SQL Server type as catalog.column_type writes the column's: `integer` is `int`,
    `datetime2` is `datetime2(7)`, `decimal` is `decimal(18,0)`, `float(53)` is `float`."""
    m = _SPEC_TYPE.match(sql_type.lower())
    if not m:
        return sql_type.strip().lower()
    base = _SYNONYM.get(m.group(1), m.group(1))
    if base not in _SIZED:
        return base
    if m.group(2) is None:
        return base + _DEFAULT_SIZE[base]
    if base in ("decimal", "numeric"):
        return f"{base}({m.group(2)},{m.group(3) or 0})"
    return f"{base}({m.group(2)})"


def existing_table(t: TargetTable) -> Existing:
    return Existing(
        columns=tuple(ExistingColumn(name=c.name, type=c.type, not_null=not c.nullable, filled=c.computed)
                      for c in t.columns),
        uniques=tuple(ExistingUnique(name=i.name, columns=tuple(k for k, _ in i.keys), ours=False)
                      for i in t.indexes if i.unique),
        # The target's CHECK constraints are the pre-flight's own notes (catalog.dependency_findings).
        checks=frozenset())


def needed(table: Table) -> Needed:
    return Needed(types={c.name: catalog_type(column_type(c)) for c in table.columns}, loads_by_position=True)


class Statements:
    """core.spec_diff.Statements in T-SQL for one table. ADD of a column that allows NULL and has
    no default changes the metadata only, on every partition; ALTER COLUMN to NOT NULL reads
    every row and fails on a NULL; ALTER COLUMN to another type may rewrite every row
    (https://learn.microsoft.com/en-us/sql/t-sql/statements/alter-table-transact-sql)."""

    def __init__(self, adapter, table: Table, existing: TargetTable | None = None):
        self.a = adapter
        self.table = table
        self.target = adapter.qualified(adapter.schema, table.name)
        # The table's own collations (catalog._COLLATION-checked names): ALTER COLUMN without
        # COLLATE gives a character column the database's default collation ("If you don't
        # specify a collation, the column is assigned the default collation of the database",
        # ALTER TABLE, ALTER COLUMN), which would change the column without anyone asking.
        self.collations = {c.name: c.collation for c in (existing.columns if existing else ()) if c.collation}

    def _type(self, column: str) -> str:
        """The column's spec type, with the table's collation where both are character types."""
        sql_type = column_type(self.table.column(column))
        collation = self.collations.get(column)
        textual = re.match(r"\s*n?(var)?char\b", sql_type.lower())
        return f"{sql_type} COLLATE {collation}" if collation and textual else sql_type

    def add_column(self, column: str, sql_type: str) -> str:
        return f"ALTER TABLE {self.target} ADD {self.a.q(column)} {self._type(column)} NULL;"

    def alter_type(self, column: str, sql_type: str) -> str:
        null = "NULL" if self.table.column(column).nullable else "NOT NULL"
        return f"ALTER TABLE {self.target} ALTER COLUMN {self.a.q(column)} {self._type(column)} {null};"

    def set_not_null(self, column: str) -> str:
        return f"ALTER TABLE {self.target} ALTER COLUMN {self.a.q(column)} {self._type(column)} NOT NULL;"

    def set_not_null_where_none(self, column: str) -> str:
        # ALTER COLUMN ... NOT NULL reads every row and fails on a NULL; under IF it runs only where
        # the read before it found none (setup holds the run's lease: no publish writes the table meanwhile).
        return f"IF NOT EXISTS (SELECT 1 FROM {self.target} WHERE {self.a.q(column)} IS NULL) {self.set_not_null(column)}"

    def drop_not_null(self, column: str) -> str:
        return f"ALTER TABLE {self.target} ALTER COLUMN {self.a.q(column)} {self._type(column)} NULL;"

    def add_check(self, name: str) -> str:
        raise TargetError(f"{self.target}: SQL Server loads need no CHECK {name} of Switchyard's")

    def replace_check(self, name: str) -> str:
        return self.add_check(name)

    def drop_index(self, name: str) -> str:
        return f"DROP INDEX {self.a.q(name)} ON {self.target};"

    def create_unique(self, name: str, columns: Sequence[str]) -> str:
        return f"CREATE UNIQUE INDEX {self.a.q(name)} ON {self.target} ({', '.join(self.a.q(c) for c in columns)});"
