"""PostgreSQL's SQL text for each step: column types, bounds, literals, index names, the rendered templates
(targets/postgres/templates/). Nothing here connects."""
from __future__ import annotations

import hashlib
from datetime import date, datetime
from typing import Any

from switchyard.core import keys
from switchyard.core.planner import LoadPlan, StreamPlan, TablePlan
from switchyard.core.spec import Table
from switchyard.targets.base import TargetError
from switchyard.targets.postgres.copy_format import (
    copy_format,
    copy_options,
    length_check_name,
    length_check_sql,
    max_chars,
    rendered_type,
)

EOL_COLUMN = "switchyard_eol"
_ENCODINGS = {"utf-8": "UTF8", "utf8": "UTF8", "latin-1": "LATIN1", "latin1": "LATIN1",
              "iso-8859-1": "LATIN1", "ascii": "SQL_ASCII", "cp1252": "WIN1252"}
# The table's next version in the staging schema: `<table>__next` (no staging table, named
# `<table>_<stream>`, ends in letters).
NEXT_SUFFIX = "__next"


class PostgresSql:
    """The statements of each step, rendered for one table or stream of the spec."""

    # --- SQL text ---------------------------------------------------------------------
    def _eol(self, table: Table) -> str | None:
        return EOL_COLUMN if table.format.trailing_delimiter else None

    def columns(self, table: Table) -> list[dict[str, Any]]:
        """Each column as created here: its type (varchar(n) as text, see copy_format.py), and
        NOT NULL unless the spec declares it nullable."""
        return [{"name": c.name, "type": rendered_type(self.column_type(c)), "nullable": c.nullable}
                for c in table.columns]

    def length_checks(self, table: Table) -> list[dict[str, Any]]:
        """The CHECK (char_length(c) <= n) of each varchar(n) column: name, column, n."""
        out = []
        for c in table.columns:
            n = max_chars(self.column_type(c))
            if n is not None:
                out.append({"name": length_check_name(c.name), "column": c.name, "max": n,
                            "sql": length_check_sql(self.q(c.name), n)})
        return out

    def date_literal(self, value: date) -> str:
        return keys.ansi_literal(value)            # DATE 'YYYY-MM-DD'

    def timestamp_literal(self, value: datetime) -> str:
        return keys.ansi_literal(value)            # TIMESTAMP 'YYYY-MM-DD HH:MM:SS.ffffff'

    def bounds(self, stream: StreamPlan) -> tuple[keys.KeyValue, keys.KeyValue]:
        """(FROM, TO) of the stream's partition: its lower bound and its upper bound plus one
        unit of the key's type (a timestamp(p) column's unit is 10^(6-p) microseconds: a bound
        finer than the column would be rounded by PostgreSQL, so it is refused here)."""
        key_type = self.key_type(stream.table)
        try:
            return keys.aligned(stream.typed("lower"), key_type), keys.after(stream.typed("upper"), key_type)
        except keys.KeyValueError as exc:
            raise TargetError(f"{stream.group_id}: the key range {stream.lower}..{stream.upper} does not fit "
                              f"the key's type: {exc}", permanent=True) from None

    def _bound_context(self, stream: StreamPlan) -> dict[str, Any]:
        if not stream.partitioned or stream.empty:
            return {"lower": None, "upper_next": None, "bound": None}
        lower, upper_next = self.bounds(stream)
        return {"lower": lower, "upper_next": upper_next,
                "bound": self._bound_sql(lower, upper_next, self.key_type(stream.table))}

    @staticmethod
    def index_name(base: str, suffix: str = "_unique") -> str:
        """`<base>_unique`, or a hashed form of it where that would pass 63 characters."""
        name = base + suffix
        if len(name) <= keys.MAX_NAME:
            return name
        return f"{base[:40]}_{hashlib.sha1(name.encode()).hexdigest()[:12]}{suffix}"

    def unique_index_name(self, stream: StreamPlan) -> str:
        """The staging table's unique index: named after the partition it becomes (names of
        indexes share the schema with tables, and a partition keeps its index's name)."""
        return self.index_name(stream.partition_table if stream.partitioned else stream.staging_table)

    def setup_sql(self, plan: LoadPlan) -> list[str]:
        tables = [{"name": t.table.name, "key": t.table.key, "partitioned": t.table.partitioned,
                   "columns": self.columns(t.table), "checks": self.length_checks(t.table),
                   "unique": list(t.table.unique),
                   "unique_index": self.index_name(t.table.name) if t.table.unique else None}
                  for t in plan.tables]
        return self.render("setup.sql", tables=tables)

    def prepare_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        return self.render("prepare.sql", s=stream, columns=self.columns(table), key=table.key,
                           checks=self.length_checks(table), eol_column=self._eol(table),
                           tablespace=self.tablespaces.get(stream.stream), **self._bound_context(stream))

    def validate_sql(self, stream: StreamPlan) -> list[str]:
        return self.unique_index_sql(stream) if self.spec.table(stream.table).unique else []

    def unique_index_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        return self.render("unique_index.sql", s=stream, index=self.unique_index_name(stream),
                           columns=list(table.unique), tablespace=self.tablespaces.get(stream.stream))

    def load_sql(self, stream: StreamPlan) -> list[str]:
        table = self.spec.table(stream.table)
        fmt = table.format
        encoding = _ENCODINGS.get(fmt.encoding.lower())
        if encoding is None:
            raise TargetError(f"encoding {fmt.encoding!r} has no PostgreSQL name here")
        eol = self._eol(table)
        return self.render("load.sql", s=stream, columns=self.columns(table), eol_column=eol,
                           options=copy_options(fmt, table.columns, eol, encoding, self.q),
                           text_format=copy_format(fmt, table.columns) == "text")

    def switch_sql(self, stream: StreamPlan, replace_existing: bool) -> list[str]:
        """A stream's switch: a partitioned table's stream attaches to the table's next version
        (the table's last switch then runs `commit_sql`); an unpartitioned table is replaced whole."""
        if stream.partitioned:
            return self.render("switch_partition.sql", s=stream, next_table=self.next_table(stream.table),
                               attached=False, **self._bound_context(stream))
        return self.render("switch_table.sql", s=stream, replace_existing=replace_existing,
                           columns=self.columns(self.spec.table(stream.table)))

    def commit_sql(self, table_plan: TablePlan) -> list[str]:
        """The table's batch moved in whole, as its last switch runs it into an empty target (the
        partitions it replaces and retires are known only then)."""
        table = table_plan.table
        if not table.partitioned:
            return []
        key_type = self.key_type(table.name)
        move = [{"staging": s.staging_table, "partition": s.partition_table,
                 "bound": self._bound_sql(*self.bounds(s), key_type)} for s in table_plan.streams if not s.empty]
        return self.render("commit_table.sql", table=table.name, next_table=self.next_table(table.name),
                           mode=table.mode, remove=[], move=move, retire=[], retention="", archive_schema=None)

    def _bound_sql(self, lower: keys.KeyValue, upper_next: keys.KeyValue, key_type: str | None) -> str:
        """FOR VALUES FROM (...) TO (...), the literals rendered from the typed values by `lit`. A
        range ending at the integer type's largest key ends at MAXVALUE: a bound is a value of
        the key's type, and one past the largest is none ("integer out of range"); no key of the
        type lies above it, so the partition holds the same keys."""
        end = "MAXVALUE" if keys.past_the_type(upper_next, key_type) else self.lit(upper_next)
        return f"FOR VALUES FROM ({self.lit(lower)}) TO ({end})"

    def next_table(self, table: str) -> str:
        """The table's next version in the staging schema, which its switches attach to."""
        return self.checked(f"{table}{NEXT_SUFFIX}")

    @property
    def archive_schema(self) -> str:
        """Where `retire: archive` moves partitions that fall out of an append table's window."""
        return self.checked(f"{self.schema}_archive")
