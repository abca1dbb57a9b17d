"""Validation's proofs from a PostgreSQL staging table's own constraints, without reading a row
(observability/validation.py asks the adapter for them: PostgresAdapter.proofs_in_session in a
step, on the step's session; PostgresAdapter.constraint_proofs from a URL otherwise).

The planner refutes "key IS NULL OR key outside [key_min, key_max]" from the table's NOT NULL
and validated CHECK constraints, and "c1 IS NULL OR c2 IS NULL ..." for the NOT NULL columns
(one EXPLAIN for all of them; column by column only when that one does not hold); the load's
file node, compared with the table's now, says whether the table is still the storage the
load's COPY filled (its count is then the table's).
"""
from __future__ import annotations

from typing import Any, Sequence

from switchyard.core.keys import ansi_literal, kind_of, step, to_json


def _quote(name: str) -> str:
    """A quoted identifier (an embedded double quote doubled, as PostgreSQL reads it)."""
    return '"' + name.replace('"', '""') + '"'


def _refuted(cur, schema: str, table: str, condition: str) -> bool:
    """Whether the planner, from the table's NOT NULL and validated CHECK constraints, shows
    that no row can satisfy `condition` (built from quoted names and typed literals only)."""
    cur.execute(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {_quote(schema)}.{_quote(table)} WHERE {condition}")
    plan = cur.fetchone()[0]  # psycopg (3 and 2) returns EXPLAIN's json parsed
    node = (plan[0] if isinstance(plan, list) else plan)["Plan"]
    # Refuted: the planner replaced the scan by a Result that returns nothing, without children.
    return node.get("Node Type") == "Result" and node.get("One-Time Filter") == "false" and not node.get("Plans")


def _key_condition(key: str, key_min: Any, key_max: Any, key_type: str | None) -> str | None:
    """"key IS NULL OR key outside [min, max]" from typed literals only; None when the bounds
    are not one kind of key value (int, datetime.date or datetime.datetime), which proves
    nothing. "k >= max + one unit" rather than "k > max": the planner compares constants, it
    does not know that no value of the key's type lies between max and max + one unit (the
    CHECK says "k < max + one unit"); `key_type`, the key's SQL type, sets a timestamp's unit."""
    try:
        kind = kind_of(key_min)
        if kind_of(key_max) != kind:
            return None
        upper_next = key_max + step(kind, key_type)
    except (ValueError, TypeError):
        return None
    k = _quote(key)
    return f"{k} IS NULL OR {k} < {ansi_literal(key_min)} OR {k} >= {ansi_literal(upper_next)}"


def constraint_proofs(url: str, schema: str, table: str, key: str | None, key_min: Any, key_max: Any,
                      not_null: Sequence[str], key_type: str | None = None,
                      loaded_filenode: int | None = None) -> tuple[str | None, dict[str, str], bool]:
    """`proofs_on` over a connection of their own, from a SQLAlchemy URL (validation outside a step)."""
    from sqlalchemy import create_engine
    engine = create_engine(url)
    try:
        conn = engine.raw_connection()
        try:
            return proofs_on(conn, schema, table, key, key_min, key_max, not_null, key_type, loaded_filenode)
        finally:
            conn.close()
    finally:
        engine.dispose()


def proofs_on(conn: Any, schema: str, table: str, key: str | None, key_min: Any, key_max: Any,
              not_null: Sequence[str], key_type: str | None = None,
              loaded_filenode: int | None = None) -> tuple[str | None, dict[str, str], bool]:
    """(key proof, {column: not-null proof}, whether the table is still the load's storage), on
    `conn`, a driver's connection with no transaction open: the step's own session in a step
    (PostgresAdapter.proofs_in_session). Its one transaction only reads, and is rolled back."""
    key_proof: str | None = None
    proofs: dict[str, str] = {}
    same_storage = False
    condition = _key_condition(key, key_min, key_max, key_type) if key is not None else None
    cur = conn.cursor()
    # 'on' applies constraint exclusion to plain tables too (the default covers only
    # partitions); the planner uses NOT NULL and validated CHECK constraints only. SET LOCAL
    # lasts until the rollback below: the session keeps its own setting. A statement that
    # fails leaves the transaction to the caller: the kept session rolls back what a use left
    # open, the URL's connection is closed.
    cur.execute("SET LOCAL constraint_exclusion = on")
    if condition is not None and _refuted(cur, schema, table, condition):
        key_proof = (f"the planner refutes {key} IS NULL OR {key} outside [{to_json(key_min)}, "
                     f"{to_json(key_max)}] from the table's NOT NULL and validated CHECK constraints")
    if not_null:
        every = " OR ".join(f"{_quote(c)} IS NULL" for c in not_null)
        proven = (list(not_null) if _refuted(cur, schema, table, every) else
                  [c for c in not_null if _refuted(cur, schema, table, f"{_quote(c)} IS NULL")])
        proofs = {c: f"the planner refutes {c} IS NULL from the table's NOT NULL constraint" for c in proven}
    if loaded_filenode is not None:
        cur.execute("SELECT pg_relation_filenode(to_regclass(%s))", (f"{_quote(schema)}.{_quote(table)}",))
        now = cur.fetchone()[0]
        same_storage = now is not None and int(now) == int(loaded_filenode)
    cur.close()
    conn.rollback()
    return key_proof, proofs, same_storage
