"""The spec against an existing PostgreSQL table (core/spec_diff.py): the table as the catalog
has it, what the spec's loads need in the server's own type names, and the statements that
bring the table in line. Names are validated identifiers, quoted; types are the spec's
validated types as setup.sql writes them; nothing else reaches the SQL text.
"""
from __future__ import annotations

from typing import Sequence

from switchyard.core.spec import Table
from switchyard.core.spec_diff import Existing, ExistingColumn, ExistingUnique, Needed
from switchyard.targets.postgres.copy_format import length_check_name

# The parent table's unique indexes: name, and its columns in order (0 in indkey: an expression).
UNIQUES_SQL = (
    "SELECT ic.relname::text, array_agg(a.attname::text ORDER BY k.ord) FILTER (WHERE k.attnum > 0), "
    "       bool_or(k.attnum = 0) OR i.indexprs IS NOT NULL "
    "FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid "
    "CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord) "
    "LEFT JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum "
    "WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND k.ord <= i.indnkeyatts "
    "GROUP BY ic.relname, i.indexprs ORDER BY 1")
# Each CHECK constraint with its text as the server writes it back (pg_get_constraintdef): the
# spec's own, made on a probe table by the same server, compare with it word for word.
CHECKS_SQL = ("SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint "
              "WHERE conrelid = to_regclass(%s) AND contype = 'c'")
# The server's own name of a type (format_type), the same text the catalog query reads.
TYPES_SQL = ("SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute "
             "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped")


def existing_table(cur, qualified: str, shape: dict, our_unique: str) -> Existing:
    """The table as the catalog has it (`shape`: PostgresAdapter._target_shape's answer)."""
    columns = tuple(ExistingColumn(name=name, type=c["type"], not_null=bool(c["not_null"]),
                                   filled=bool(c["default"] or c["generated"]))
                    for name, c in shape["columns"].items())
    cur.execute(UNIQUES_SQL, (qualified,))
    uniques = tuple(ExistingUnique(name=name, columns=None if expression else tuple(cols or ()),
                                   ours=name == our_unique)
                    for name, cols, expression in cur.fetchall())
    cur.execute(CHECKS_SQL, (qualified,))
    defs = dict(cur.fetchall())
    return Existing(columns=columns, uniques=uniques, checks=frozenset(defs), check_defs=defs)


# A temporary table of setup's transaction, made and dropped for each table compared.
PROBE = "switchyard_spec_types"


def needed(cur, adapter, columns: list[dict], checks: list[dict], unique_index: str | None,
           other_columns: Sequence[str] = ()) -> Needed:
    """What the spec's loads need, as the server writes it: a temporary table with setup.sql's
    column types (the spec's validated types) and its length CHECKs (`checks`: the adapter's
    length_checks), read back through the catalog and dropped; and the name the length CHECK of
    each of the table's `other_columns` (those the spec does not have) has where setup made it."""
    probe = f"pg_temp.{adapter.q(PROBE)}"
    body = ", ".join([f"{adapter.q(c['name'])} {c['type']}" for c in columns]
                     + [f"CONSTRAINT {adapter.q(k['name'])} CHECK ({k['sql']})" for k in checks])
    cur.execute(f"CREATE TEMPORARY TABLE {adapter.q(PROBE)} ({body}) ON COMMIT DROP")
    cur.execute(TYPES_SQL, (probe,))
    types = dict(cur.fetchall())
    cur.execute(CHECKS_SQL, (probe,))
    defs = dict(cur.fetchall())
    cur.execute(f"DROP TABLE {probe}")
    return Needed(types=types, checks={k["name"]: k["column"] for k in checks}, check_defs=defs,
                  unique_index=unique_index, former_checks={length_check_name(c): c for c in other_columns})


class Statements:
    """core.spec_diff.Statements for one PostgreSQL table. Each relies on PostgreSQL's rules:
    ADD COLUMN without a default and DROP NOT NULL change the catalog only, on the partitioned
    table and every partition (https://www.postgresql.org/docs/current/sql-altertable.html);
    SET NOT NULL, ADD CONSTRAINT ... CHECK and CREATE UNIQUE INDEX read every row once and fail
    on the first that breaks them; an ALTER TABLE's subcommands take effect together, in its one
    transaction."""

    def __init__(self, adapter, table: Table):
        self.a = adapter
        self.table = table
        self.target = adapter.qualified(adapter.schema, table.name)

    def add_column(self, column: str, sql_type: str) -> str:
        check = next((k for k in self.a.length_checks(self.table) if k["column"] == column), None)
        guard = f" CONSTRAINT {self.a.q(check['name'])} CHECK ({check['sql']})" if check else ""
        return f"ALTER TABLE {self.target} ADD COLUMN {self.a.q(column)} {self._type(column)}{guard};"

    def alter_type(self, column: str, sql_type: str) -> str:
        return f"ALTER TABLE {self.target} ALTER COLUMN {self.a.q(column)} TYPE {self._type(column)};"

    def set_not_null(self, column: str) -> str:
        return f"ALTER TABLE {self.target} ALTER COLUMN {self.a.q(column)} SET NOT NULL;"

    def set_not_null_where_none(self, column: str) -> str:
        # A DO block: the statement runs only if no row holds NULL (SET NOT NULL would fail on one).
        return (f"DO $set_not_null$ BEGIN IF NOT EXISTS (SELECT FROM {self.target} WHERE {self.a.q(column)} IS NULL) "
                f"THEN {self.set_not_null(column)} END IF; END $set_not_null$;")

    def drop_not_null(self, column: str) -> str:
        return f"ALTER TABLE {self.target} ALTER COLUMN {self.a.q(column)} DROP NOT NULL;"

    def add_check(self, name: str) -> str:
        check = next(k for k in self.a.length_checks(self.table) if k["name"] == name)
        return f"ALTER TABLE {self.target} ADD CONSTRAINT {self.a.q(name)} CHECK ({check['sql']});"

    def replace_check(self, name: str) -> str:
        # One ALTER TABLE: the old CHECK goes and the new one is checked against every row in the
        # same command, so no moment has the table without its length CHECK.
        check = next(k for k in self.a.length_checks(self.table) if k["name"] == name)
        return (f"ALTER TABLE {self.target} DROP CONSTRAINT {self.a.q(name)}, "
                f"ADD CONSTRAINT {self.a.q(name)} CHECK ({check['sql']});")

    def drop_index(self, name: str) -> str:
        return f"DROP INDEX {self.a.qualified(self.a.schema, name)};"

    def create_unique(self, name: str, columns: Sequence[str]) -> str:
        return (f"CREATE UNIQUE INDEX {self.a.q(name)} ON {self.target} "
                f"({', '.join(self.a.q(c) for c in columns)});")

    def _type(self, column: str) -> str:
        """The column's type as setup.sql writes it (the spec's validated type; varchar as text)."""
        return next(c["type"] for c in self.a.columns(self.table) if c["name"] == column)
