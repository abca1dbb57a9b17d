"""The load spec: which tables a batch holds, their columns, keys and file layout.

A spec is declarative (YAML) and validated once when it is read: every name that
later reaches SQL is checked here against a strict identifier pattern, and every
column type against a strict type pattern, so the SQL layers never see free text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

TARGETS = ("postgres", "mssql")

# Lower-case letters, digits and underscores, starting with a letter: a subset of what
# both PostgreSQL and SQL Server accept unquoted, so a name is the same on both.
IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
# "bigint", "char(25)", "numeric(15,2)", "double precision": no quotes, no semicolons.
SQL_TYPE = re.compile(r"^[a-z][a-z ]{0,30}(\(\d{1,4}(,\s?\d{1,3})?\))?$")

BUILTIN_SPECS = Path(__file__).with_name("specs")


class SpecError(ValueError):
    """The spec is not valid; the message names the spec file and the entry."""


@dataclass(frozen=True)
class Column:
    name: str
    types: Mapping[str, str]

    def sql_type(self, target: str) -> str:
        return self.types[target]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    key: str
    partitioned: bool = True

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


@dataclass(frozen=True)
class FileFormat:
    delimiter: str = "|"
    trailing_delimiter: bool = True
    encoding: str = "utf-8"


@dataclass(frozen=True)
class LoadSpec:
    name: str
    tables: tuple[Table, ...]
    files: str = "{table}/{table}.{stream}.tbl"
    format: FileFormat = field(default_factory=FileFormat)
    generator: str | None = None
    source: str = "<inline>"

    def table(self, name: str) -> Table:
        for t in self.tables:
            if t.name == name:
                return t
        raise SpecError(f"{self.source}: no table {name!r} in spec {self.name!r}; "
                        f"known tables: {', '.join(self.table_names)}")

    @property
    def table_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tables)

    def file_for(self, table: str, stream: int) -> str:
        """The stream file's path relative to the batch folder."""
        return self.files.format(table=table, stream=stream)


def _identifier(value: Any, where: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER.match(value):
        raise SpecError(f"{where}: {value!r} is not a valid name "
                        "(lower-case letters, digits and _, starting with a letter, at most 63)")
    return value


def _column(raw: Mapping[str, Any], where: str) -> Column:
    name = _identifier(raw.get("name"), f"{where}.name")
    declared = raw.get("type")
    if isinstance(declared, str):
        types = {t: declared for t in TARGETS}
    elif isinstance(declared, Mapping) and set(declared) == set(TARGETS):
        types = dict(declared)
    else:
        raise SpecError(f"{where}.type: give one type, or one per target ({', '.join(TARGETS)})")
    for target, sql_type in types.items():
        if not isinstance(sql_type, str) or not SQL_TYPE.match(sql_type):
            raise SpecError(f"{where}.type.{target}: {sql_type!r} is not an accepted SQL type")
    return Column(name=name, types=types)


def _table(name: str, raw: Mapping[str, Any], where: str) -> Table:
    _identifier(name, where)
    columns = tuple(_column(c, f"{where}.columns[{i}]") for i, c in enumerate(raw.get("columns") or []))
    if not columns:
        raise SpecError(f"{where}: a table needs at least one column")
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise SpecError(f"{where}: duplicate column names")
    key = _identifier(raw.get("key"), f"{where}.key")
    if key not in names:
        raise SpecError(f"{where}.key: {key!r} is not one of the table's columns")
    return Table(name=name, columns=columns, key=key, partitioned=bool(raw.get("partitioned", True)))


def parse_spec(raw: Mapping[str, Any], source: str = "<inline>") -> LoadSpec:
    name = _identifier(raw.get("name"), f"{source}: name")
    tables_raw = raw.get("tables")
    if not isinstance(tables_raw, Mapping) or not tables_raw:
        raise SpecError(f"{source}: 'tables' must map table names to their definitions")
    tables = tuple(_table(t, d, f"{source}: tables.{t}") for t, d in tables_raw.items())
    fmt_raw = raw.get("format") or {}
    fmt = FileFormat(
        delimiter=str(fmt_raw.get("delimiter", "|")),
        trailing_delimiter=bool(fmt_raw.get("trailing_delimiter", True)),
        encoding=str(fmt_raw.get("encoding", "utf-8")),
    )
    if len(fmt.delimiter) != 1 or fmt.delimiter in "\r\n\\":
        raise SpecError(f"{source}: format.delimiter must be one character other than CR, LF or backslash")
    files = str(raw.get("files", LoadSpec.files))
    if "{stream}" not in files or ".." in files.split("/") or files.startswith("/"):
        raise SpecError(f"{source}: files must be a relative pattern containing {{stream}}")
    return LoadSpec(name=name, tables=tables, files=files, format=fmt,
                    generator=raw.get("generator"), source=source)


def spec_file(name_or_path: str = "tpch") -> Path:
    """The YAML file of a built-in spec name ("tpch") or of a path."""
    path = Path(name_or_path)
    return path if path.suffix else BUILTIN_SPECS / f"{name_or_path}.yaml"


@lru_cache(maxsize=8)
def load_spec(name_or_path: str = "tpch") -> LoadSpec:
    """A built-in spec by name ("tpch"), or a YAML file by path."""
    path = spec_file(name_or_path)
    if not path.is_file():
        raise SpecError(f"{path}: spec file not found")
    with path.open(encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)
    return parse_spec(raw, source=str(path))
