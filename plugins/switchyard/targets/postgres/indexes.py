"""The target's indexes built on a staging table before its switch (ATTACH then adopts them instead of
building its own under the table's lock), and the unique proofs made with them."""
from __future__ import annotations

import hashlib
import logging
import time
from datetime import date, datetime
from typing import Any

from switchyard.core.planner import StreamPlan
from switchyard.targets.base import TargetError

log = logging.getLogger(__name__)


class PostgresIndexes:
    """Indexes on staging tables, and the duplicates they find."""

    # --- the target's indexes on the staging table ------------------------------------------
    def _staging_index_name(self, stream: StreamPlan, parent_index: str) -> str:
        """Unique in the target schema once the partition moves there: the partition's name and
        the parent index's, hashed when that would pass PostgreSQL's 63 bytes."""
        digest = hashlib.md5(parent_index.encode()).hexdigest()[:8]
        name = f"{stream.partition_table}_{digest}"
        if len(name) > 63:
            name = f"{stream.table[:30]}_{hashlib.md5((stream.partition_table + parent_index).encode()).hexdigest()[:24]}"
        return self.checked(name)

    def target_indexes(self, cur, table: str, schema: str | None = None) -> list[dict[str, Any]]:
        """A table's indexes (the target's, or with `schema` a staging table's): name, whether
        unique, the definition of the constraint that owns it (primary key, unique, exclusion)
        if one does, and the index's own definition after `USING` (columns, opclasses, INCLUDE,
        WHERE), as the server writes them."""
        schema = schema or self.schema
        cur.execute("SET LOCAL search_path = pg_catalog")  # the server writes every name qualified
        cur.execute(
            "SELECT ic.relname::text, i.indisunique, pg_get_indexdef(i.indexrelid), con.conname::text, "
            "       pg_get_constraintdef(con.oid), quote_ident(%s) || '.' || quote_ident(%s) "
            "FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid "
            "LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid AND con.conrelid = i.indrelid "
            "     AND con.contype IN ('p', 'u', 'x') "
            "WHERE i.indrelid = to_regclass(%s) ORDER BY 1",
            (schema, table, self.qualified(schema, table)))
        out = []
        for name, unique, indexdef, constraint, constraintdef, ref in cur.fetchall():
            entry = {"name": name, "unique": unique, "constraint": constraintdef if constraint else None,
                     "using": None}
            for marker in (f" ON ONLY {ref} USING ", f" ON {ref} USING "):
                if marker in indexdef:
                    entry["using"] = indexdef.split(marker, 1)[1]
                    break
            out.append(entry)
        cur.execute("RESET search_path")
        return out

    def _build_target_indexes(self, stream: StreamPlan) -> dict[str, Any]:
        """The target's indexes and key constraints built on the staging table, in a transaction
        of their own before the switch's: ATTACH PARTITION then attaches them instead of building
        them while it holds the table. Idempotent: a retry finds them built."""
        staging = self.qualified(self.staging_schema, stream.staging_table)
        started = time.monotonic()
        built = []
        with self.connection() as conn:
            with conn.transaction(), conn.cursor() as cur:
                indexes = self.target_indexes(cur, stream.table)
                if not indexes:
                    return {"indexes_built": [], "index_seconds": 0.0}
                on_staging = self.target_indexes(cur, stream.staging_table, schema=self.staging_schema)
                present = {i["name"] for i in on_staging}
                # An equivalent index is there already (validation's unique index, or an earlier
                # attempt's): ATTACH adopts it. A constraint's index counts only as that constraint.
                equivalent = {(i["unique"], i["using"], i["constraint"]) for i in on_staging}
                for index in indexes:
                    name = self._staging_index_name(stream, index["name"])
                    if name in present or (index["unique"], index["using"], index["constraint"]) in equivalent:
                        continue
                    if index["constraint"]:
                        # The server's own text of the target's constraint (PRIMARY KEY (...), UNIQUE (...)).
                        cur.execute(f"ALTER TABLE {staging} ADD CONSTRAINT {self.q(name)} {index['constraint']}")
                    elif index["using"]:
                        cur.execute(f"CREATE {'UNIQUE ' if index['unique'] else ''}INDEX {self.q(name)} "
                                    f"ON {staging} USING {index['using']}")
                    else:
                        log.warning("%s: index %s of %s.%s not reproduced on the staging table; ATTACH builds it",
                                    stream.group_id, index["name"], self.schema, stream.table)
                        continue
                    built.append(index["name"])
        seconds = round(time.monotonic() - started, 4)
        if built:
            log.info("%s: built the target's %s on the staging table in %.2f s", stream.group_id,
                     ", ".join(built), seconds)
        return {"indexes_built": built, "index_seconds": seconds}

    def prove_unique(self, stream: StreamPlan) -> dict[str, Any] | None:
        """The table's unique columns checked by building their unique index on the staging
        table: the build sorts the rows and fails at the first duplicate; the index is the one
        the target's table has (setup.sql), so the switch's ATTACH adopts it instead of building
        one. Measured at scale 1 against Great Expectations' uniqueness expectations and a
        GROUP BY query: see docs/validation.md. On a duplicate, one GROUP BY
        (only then) counts the duplicated keys and names a few."""
        import psycopg
        table = self.spec.table(stream.table)
        if not table.unique:
            return None
        columns = list(table.unique)
        staging = self.qualified(self.staging_schema, stream.staging_table)
        out: dict[str, Any] = {
            "columns": columns, "index": f"{self.staging_schema}.{self.unique_index_name(stream)}",
            "duplicates": None}
        started = time.monotonic()
        try:
            self.execute(self.unique_index_sql(stream))
        except psycopg.errors.UniqueViolation as exc:
            out["duplicates"] = self._duplicates(staging, columns, exc)
        except psycopg.OperationalError as exc:
            raise TargetError(f"validate of {stream.group_id}: connection lost while building the unique "
                              f"index: {exc}") from exc
        out["seconds"] = round(time.monotonic() - started, 4)
        return out

    def prove_target_uniques(self, stream: StreamPlan) -> list[dict[str, Any]]:
        """The target's unique indexes besides the spec's own (a DBA's index or primary key),
        each built on the staging table now, at validate, so that a duplicate fails the group's
        validation, naming the index and a few duplicated keys, before any switch (where the
        index would otherwise be built, see _build_target_indexes, which then finds it there).
        One result per index, as prove_unique's."""
        import psycopg

        from switchyard.targets.postgres.spec_change import UNIQUES_SQL
        staging = self.qualified(self.staging_schema, stream.staging_table)
        ours = self.index_name(stream.table)
        with self.connection() as conn, conn.cursor() as cur:
            indexes = {i["name"]: i for i in self.target_indexes(cur, stream.table) if i["unique"]}
            cur.execute(UNIQUES_SQL, (self.qualified(self.schema, stream.table),))
            columns = {name: (None if expression else list(cols or ())) for name, cols, expression in cur.fetchall()}
        out = []
        for name, index in sorted(indexes.items()):
            if (name == ours and self.spec.table(stream.table).unique) or not (index["constraint"] or index["using"]):
                continue    # the spec's own: prove_unique checks it
            on_staging = self._staging_index_name(stream, name)
            found: dict[str, Any] = {"columns": columns.get(name) or ["<expression>"],
                                     "index": f"{self.schema}.{name}", "duplicates": None}
            started = time.monotonic()
            statement = (f"ALTER TABLE {staging} ADD CONSTRAINT {self.q(on_staging)} {index['constraint']}"
                         if index["constraint"] else
                         f"CREATE UNIQUE INDEX IF NOT EXISTS {self.q(on_staging)} ON {staging} USING {index['using']}")
            try:
                # Committed: the switch then finds the index built (_build_target_indexes), and a
                # retried validation too. The steps' session is not in autocommit, and a use that
                # leaves its transaction open is rolled back when it gives the session back.
                with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
                    cur.execute("SELECT to_regclass(%s) IS NULL",
                                (self.qualified(self.staging_schema, on_staging),))
                    if cur.fetchone()[0]:   # a retried validation finds it built
                        cur.execute(statement)
            except psycopg.errors.UniqueViolation as exc:
                found["duplicates"] = self._duplicates(staging, columns.get(name), exc)
            found["seconds"] = round(time.monotonic() - started, 4)
            out.append(found)
        return out

    def _duplicates(self, staging: str, columns: list[str] | None, exc: Any) -> dict[str, Any]:
        """How many keys of `columns` the staging table holds more than once, and a few of them
        (one GROUP BY, only after an index build found a duplicate)."""
        out: dict[str, Any] = {"keys": None, "extra_rows": None, "examples": [], "server": exc.diag.message_detail}
        if not columns:
            return out
        cols = ", ".join(self.q(c) for c in columns)
        # Names are validated identifiers (the spec's, or the catalog's), quoted; nothing else is in it.
        rows = self.fetch(
            f"SELECT {cols}, count(*) AS n, count(*) OVER () AS keys, sum(count(*) - 1) OVER () AS extra "
            f"FROM {staging} GROUP BY {cols} HAVING count(*) > 1 ORDER BY {cols} LIMIT 5")
        if rows:
            out.update(keys=int(rows[0][-2]), extra_rows=int(rows[0][-1]),
                       examples=[{**{c: _json_value(v) for c, v in zip(columns, r)}, "rows": int(r[len(columns)])}
                                 for r in rows])
        return out


def _json_value(value: Any) -> Any:
    """A value read from the server as JSON: dates and timestamps in ISO-8601, decimals as text."""
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    return str(value)
