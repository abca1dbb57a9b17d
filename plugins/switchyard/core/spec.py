"""The load spec: which tables a batch holds, their columns, keys, file formats and checks.

A spec is declarative (YAML) and validated once when it is read: every name that
later reaches SQL is checked here against a strict identifier pattern, and every
column type against a strict type pattern, so the SQL layers never see free text.

The spec-level `format` is the default of every table; a table's own `format` overrides
single entries of it. Likewise `files`. docs/spec.md describes every key.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

import yaml

# A column's one type for every target (`type: bigint`, or `default` among per-target types):
# each engine reads it in its own words (targets/<engine>/types.py maps the names it reads
# otherwise, e.g. timestamp -> datetime2 on SQL Server). A type given for a target by its
# dialect's name (`type: {default: timestamp, mssql: datetime2(7)}`) is that engine's own.
NEUTRAL = "default"

# Lower-case letters, digits and underscores, starting with a letter: a subset of what
# both PostgreSQL and SQL Server accept unquoted, so a name is the same on both.
IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
# "bigint", "char(25)", "numeric(15,2)", "double precision", "datetime2(3)": no quotes, no semicolons.
SQL_TYPE = re.compile(r"^[a-z][a-z0-9 ]{0,30}(\(\d{1,4}(,\s?\d{1,3})?\))?$")

BUILTIN_SPECS = Path(__file__).with_name("specs")

# What a partition key may be: its values order the streams and bound the partitions.
KEY_KINDS = ("integer", "date", "timestamp")
_INTEGER_TYPES = re.compile(r"^(smallint|int|integer|bigint|tinyint)$")
_DATE_TYPES = re.compile(r"^date$")
_TIMESTAMP_TYPES = re.compile(r"^(timestamp|timestamp without time zone|datetime|datetime2|smalldatetime)"
                              r"(\(\d\))?$")
QUOTING = ("none", "csv")
LINE_ENDS = ("lf", "crlf")
LOAD_MODES = ("replace", "append")
# How a table's (table, stream) groups run in Airflow: a task per step, or the four steps in one.
GROUP_TASKS = ("per-step", "single")
RETIRE = ("drop", "archive")
PUBLISH = ("batch", "table")
ON_SPEC_CHANGE = ("fail", "add_columns", "sync")
# A Great Expectations expectation type as declared in a spec: its snake_case name.
_EXPECTATION = re.compile(r"^expect_[a-z0-9_]{1,80}$")
# A source: where a stream's files live, and the name of the Airflow queue whose workers can
# read them (an Edge or Celery queue name: letters, digits, '_', '-', '.').
SOURCE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_STREAM_RANGE = re.compile(r"^(\d{1,5})\s*-\s*(\d{1,5})$")


class SpecError(ValueError):
    """The spec is not valid; the message names the spec file and the entry."""


@dataclass(frozen=True)
class Column:
    name: str
    types: Mapping[str, str]
    # NOT NULL unless declared nullable; only a nullable column ever takes the NULL marker.
    nullable: bool = False

    def sql_type(self, dialect: str) -> str:
        """The type as the spec gives it for `dialect`: its own, else the neutral one (as written;
        the engine's adapter maps a neutral type to its own words: `TargetAdapter.column_type`)."""
        return self.declared(dialect)[0]

    def declared(self, dialect: str) -> tuple[str, bool]:
        """(the type the spec gives for `dialect`, whether it is the neutral one)."""
        if dialect in self.types:
            return self.types[dialect], False
        if NEUTRAL in self.types:
            return self.types[NEUTRAL], True
        raise SpecError(f"column {self.name}: the spec gives no type for {dialect} (it gives one for "
                        f"{', '.join(sorted(self.types))}); add one, or give one type for every target")


@dataclass(frozen=True)
class FileFormat:
    """How a table's files are written. Defaults: TPC-H's `tbl` layout."""
    delimiter: str = "|"
    trailing_delimiter: bool = True
    encoding: str = "utf-8"
    # "none": fields are taken literally up to the next delimiter (no quoting at all);
    # "csv": RFC 4180 quoting, a field in double quotes may hold the delimiter, quotes ("")
    # and line breaks.
    quoting: str = "none"
    header_lines: int = 0
    # The field that means NULL in a nullable column ("" for the empty field); None: no field
    # is ever NULL. In a NOT NULL column the same text is an ordinary value.
    null_marker: str | None = None
    line_end: str = "lf"


@dataclass(frozen=True)
class Expectation:
    """A Great Expectations expectation a user declares for a table: its type and kwargs."""
    type: str
    kwargs: Mapping[str, Any]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    # The partition key; an unpartitioned table may have none (any column types: a lookup
    # table keyed by a text code, or no key at all), and its key is then only a NOT NULL column.
    key: str | None
    partitioned: bool = True
    format: FileFormat = field(default_factory=FileFormat)
    files: str = "{table}/{table}.{stream}.tbl"
    # Columns whose values are unique together (the key alone, or a compound key); () none.
    unique: tuple[str, ...] = ()
    expectations: tuple[Expectation, ...] = ()
    # Nightly load mode: "replace" the whole table, or "append" this batch's partitions.
    mode: str = "replace"
    # append only: how many batches to keep (None: all), or a window on a date/timestamp
    # key in days; what happens to the partitions that fall out of it.
    keep: int | None = None
    keep_days: int | None = None
    retire: str = "drop"
    # append only: a batch may hold no rows of the table (every stream empty, its file a header
    # only): the run adds nothing to it. Otherwise such a batch is refused as incomplete.
    allow_empty: bool = False
    # A batch may leave the table out (its manifest lists no file of it: a lookup the producer
    # sends only when it changes): the run does not load it, and it keeps what it holds.
    optional: bool = False
    # Scheduling priority of the table's tasks (Airflow's priority_weight): the run lasts as
    # long as its slowest stream, so the biggest tables should get the higher weights.
    weight: int = 1
    # "per-step": prepare, load, validate and switch are four tasks of the group; "single": one
    # task runs the four in order. For tables whose loads take a second or two, where four
    # task starts cost Airflow more than the steps' own work.
    tasks: str = "per-step"
    # What setup does when the target table differs from this spec (core/spec_diff.py): "fail"
    # refuses the batch naming each difference and the statement that fixes it; "add_columns"
    # also adds the spec's new nullable columns; "sync" also drops the unique indexes
    # Switchyard made that the spec no longer declares (and builds the declared ones).
    on_spec_change: str = "fail"

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise SpecError(f"table {self.name!r} has no column {name!r}")

    def key_kind(self, target: str | None = None) -> str | None:
        """integer, date or timestamp: what the partition key's values are, on `target` or (None)
        on every target alike (the spec refuses a partition key of another kind on each); None
        for a table without a key, or an unpartitioned table whose key is of another type."""
        if self.key is None:
            return None
        return column_key_kind(self.column(self.key), target)


@dataclass(frozen=True)
class LoadSpec:
    name: str
    tables: tuple[Table, ...]
    files: str = "{table}/{table}.{stream}.tbl"
    format: FileFormat = field(default_factory=FileFormat)
    generator: str | None = None
    source: str = "<inline>"
    # Where each stream's files live: source (queue) name -> its streams. A stream no source
    # lists is read wherever its load runs (shared storage, or the server reads the file).
    sources: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    # How a batch goes in: "batch", every table of the batch in one transaction once all its
    # groups are validated (readers see one batch or the other, across tables); "table", each
    # table on its own once its groups are (a failed table leaves the others published).
    publish: str = "batch"

    def source_of(self, stream: int) -> str | None:
        """The source (the Airflow queue) whose workers hold stream `stream`'s files; None: any."""
        for name, streams in self.sources.items():
            if stream in streams:
                return name
        return None

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
        """The stream file's path relative to the batch folder (the table's pattern)."""
        return self.table(table).files.format(table=table, stream=stream)

    def digests(self) -> dict[str, str]:
        """A digest of each table's definition as read (its columns, key, mode, format, ...), and
        of the spec's own entries under "" (publish, sources): what a run's plan was made with,
        which each later step of the run compares with the spec it reads (a file edited in
        between, or a worker holding another copy). Comments and layout of the file count not."""
        def digest(value: Any) -> str:
            text = json.dumps(value, sort_keys=True, default=repr)
            return hashlib.sha256(text.encode()).hexdigest()[:16]
        own = {"publish": self.publish, "sources": {k: list(v) for k, v in self.sources.items()},
               "files": self.files}
        def table(t: Table) -> dict:
            # A field at its default is left out: a spec that does not use a newer key digests as it
            # did before the key existed (a run planned by the previous version goes on).
            out = asdict(t)
            if not t.optional:
                del out["optional"]
            return out
        return {"": digest(own), **{t.name: digest(table(t)) for t in self.tables}}


def key_kind(sql_type: str) -> str | None:
    """integer, date or timestamp for a type a partition key may have; None otherwise."""
    t = sql_type.strip().lower()
    if _INTEGER_TYPES.match(t):
        return "integer"
    if _DATE_TYPES.match(t):
        return "date"
    if _TIMESTAMP_TYPES.match(t):
        return "timestamp"
    return None


def column_key_kind(column: "Column", target: str | None = None) -> str | None:
    """The kind of a key column's values on `target`, or (None) the kind its type has on every
    target, None where the targets' types are of different kinds or of none."""
    if target is not None:
        return key_kind(column.sql_type(target))
    kinds = {key_kind(t) for t in column.types.values()}
    return kinds.pop() if len(kinds) == 1 else None


def _identifier(value: Any, where: str) -> str:
    if not isinstance(value, str) or not IDENTIFIER.match(value):
        raise SpecError(f"{where}: {value!r} is not a valid name "
                        "(lower-case letters, digits and _, starting with a letter, at most 63)")
    return value


_COLUMN_KEYS = ("name", "type", "nullable")
# Entries a user may put on a column that a spec takes elsewhere or not at all: said so, since a
# misspelt or misplaced entry taken for its default changes what loads (`nulable: true` left the
# column NOT NULL, and an empty field loads as '' instead of NULL).
_COLUMN_ELSEWHERE = {
    "unique": "unique belongs to the table's `unique`: a list of columns unique together, or `true` (its key)",
    "null_marker": "null_marker belongs to the table's or the spec's `format`",
    "key": "key belongs to the table's `key: <column>`",
    "default": "a column takes no default: each is loaded from its field"}


def _column(raw: Mapping[str, Any], where: str) -> Column:
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: a mapping of {', '.join(_COLUMN_KEYS)}, not {raw!r}")
    name = _identifier(raw.get("name"), f"{where}.name")
    declared = raw.get("type")
    if isinstance(declared, str):
        types = {NEUTRAL: declared}
    elif isinstance(declared, Mapping) and declared and all(isinstance(k, str) and IDENTIFIER.match(k)
                                                             for k in declared):
        types = dict(declared)
    else:
        raise SpecError(f"{where}.type: give one type (every target reads it in its own words), or types by "
                        f"target: {{default: ..., <a target's dialect>: ...}}")
    for target, sql_type in types.items():
        at = f"{where}.type" + ("" if target == NEUTRAL else f".{target}")
        if not isinstance(sql_type, str) or not SQL_TYPE.match(sql_type):
            cut = isinstance(sql_type, str) and sql_type.count("(") > sql_type.count(")")
            # YAML's flow mapping `{name: amount, type: numeric(10,3)}` ends the value at the comma.
            unbounded = isinstance(sql_type, str) and re.search(r"\(\s*max\s*\)\s*$", sql_type, re.I)
            raise SpecError(f"{at}: {sql_type!r} is not an accepted SQL type" + (
                "; in YAML's `{...}` a comma ends the value: quote the type (\"numeric(10,3)\")" if cut else "") + (
                "; a length of `max` is not accepted: give the longest value's length (on SQL Server nvarchar(n) "
                "takes n up to 4000, varchar(n) and varbinary(n) up to 8000; on PostgreSQL `text` has no limit)"
                if unbounded else ""))
        _one_type(sql_type, at)
    nullable = raw.get("nullable", False)
    if not isinstance(nullable, bool):
        raise SpecError(f"{where}.nullable: true or false, not {nullable!r}")
    # After the type: a type cut at its comma in YAML's `{...}` leaves its rest as an entry
    # (`3)`), and the type's message says why.
    unknown = sorted(map(str, set(raw) - set(_COLUMN_KEYS)))
    if unknown:
        raise SpecError(f"{where}: unknown entries {', '.join(unknown)} (known: {', '.join(_COLUMN_KEYS)})" + "".join(
            f"; {_COLUMN_ELSEWHERE[k]}" for k in unknown if k in _COLUMN_ELSEWHERE))
    return Column(name=name, types=types, nullable=nullable)


# A type is one word and a size, or one of these names of more than one word; anything else
# ("bigint primary key", "int identity") is a column definition, not a type.
_MULTI_WORD_TYPES = ("double precision", "character varying", "timestamp without time zone",
                     "timestamp with time zone", "time without time zone", "time with time zone", "bit varying")
def _one_type(sql_type: str, where: str) -> None:
    """SpecError unless `sql_type` is a type: a name and a size, or a name of several words."""
    name = sql_type.partition("(")[0].strip().lower()
    if " " in name and name not in _MULTI_WORD_TYPES:
        raise SpecError(f"{where}: {sql_type!r} is not a type (a type is a name and a size, such as "
                        f"bigint or varchar(40); keys, identity and defaults are not declared in a spec)")


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if value not in allowed:
        raise SpecError(f"{where}: {value!r} is not one of {', '.join(allowed)}")
    return value


def _count(value: Any, where: str, minimum: int = 0, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"{where}: a whole number of at least {minimum}, not {value!r}")
    return value


_FORMAT_KEYS = {f for f in FileFormat.__dataclass_fields__}


def _format(raw: Any, base: FileFormat, where: str) -> FileFormat:
    """`raw` (a mapping) over `base`: the entries it names replace base's."""
    if raw is None:
        return base
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: a mapping of {', '.join(sorted(_FORMAT_KEYS))}")
    unknown = set(raw) - _FORMAT_KEYS
    if unknown:
        raise SpecError(f"{where}: unknown entries {', '.join(sorted(map(str, unknown)))} "
                        f"(known: {', '.join(sorted(_FORMAT_KEYS))})")
    values = {**base.__dict__, **raw}
    fmt = FileFormat(
        delimiter=str(values["delimiter"]),
        trailing_delimiter=values["trailing_delimiter"],
        encoding=str(values["encoding"]),
        quoting=_choice(values["quoting"], QUOTING, f"{where}.quoting"),
        header_lines=_count(values["header_lines"], f"{where}.header_lines"),
        null_marker=values["null_marker"],
        line_end=_choice(values["line_end"], LINE_ENDS, f"{where}.line_end"),
    )
    if not isinstance(fmt.trailing_delimiter, bool):
        raise SpecError(f"{where}.trailing_delimiter: true or false")
    # One printable ASCII character or tab: what both engines' bulk loaders accept as a field
    # terminator, and never a character that ends lines or starts an escape or a quote.
    printable = " " <= fmt.delimiter <= "~" or fmt.delimiter == "\t"
    if len(fmt.delimiter) != 1 or not printable or fmt.delimiter in '\\"':
        raise SpecError(f"{where}.delimiter: one printable ASCII character or tab, other than "
                        f"backslash and double quote, not {fmt.delimiter!r}")
    marker = fmt.null_marker
    if marker is not None and (not isinstance(marker, str) or len(marker) > 16
                               or any(ch in "\"\\\x7f" or ch < " " for ch in marker) or fmt.delimiter in marker):
        escaped = ("; \\N is the NULL of a backslash-escaped export (PostgreSQL's text COPY, MySQL's "
                   "SELECT INTO OUTFILE, Hive), whose other escapes (\\t, \\n, \\\\) Switchyard does not "
                   "read: every byte of a field is its value. Export as CSV instead (quoting: csv, "
                   "null_marker: '')" if marker == "\\N" else "")
        raise SpecError(f"{where}.null_marker: a short text without the delimiter, quotes, backslash "
                        f"or control characters ('' for the empty field), not {marker!r}{escaped}")
    return fmt


def _files(value: Any, where: str) -> str:
    files = str(value)
    if "{stream}" not in files or ".." in files.split("/") or files.startswith("/"):
        raise SpecError(f"{where}: files must be a relative pattern containing {{stream}}")
    return files


# Expectations that a column's (or columns') values are unique: checked on each stream's staging
# table, they hold across a partitioned table only where the partition key is one of the columns
# (the streams' and earlier batches' key ranges do not overlap).
_UNIQUE_EXPECTATIONS = {"expect_column_values_to_be_unique", "expect_compound_columns_to_be_unique",
                        "expect_multicolumn_values_to_be_unique"}


def _expectations(raw: Any, columns: list[str], where: str, partition_key: str | None = None
                  ) -> tuple[Expectation, ...]:
    """The table's declared expectations; `partition_key`: the key of a partitioned table, which a
    uniqueness expectation must hold (_UNIQUE_EXPECTATIONS)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SpecError(f"{where}: a list of {{type: expect_..., kwargs: {{...}}}}")
    out = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping) or set(item) - {"type", "kwargs"}:
            raise SpecError(f"{at}: give type and kwargs only")
        kind = item.get("type")
        if not isinstance(kind, str) or not _EXPECTATION.match(kind):
            raise SpecError(f"{at}.type: {kind!r} is not an expectation type (expect_...)")
        kwargs = item.get("kwargs") or {}
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise SpecError(f"{at}.kwargs: a mapping of argument names to values")
        for arg in ("column", "column_A", "column_B"):
            if arg in kwargs and kwargs[arg] not in columns:
                raise SpecError(f"{at}.kwargs.{arg}: {kwargs[arg]!r} is not one of the table's columns")
        if "column_list" in kwargs and (not isinstance(kwargs["column_list"], list)
                                        or any(c not in columns for c in kwargs["column_list"])):
            raise SpecError(f"{at}.kwargs.column_list: a list of the table's columns")
        named = [kwargs["column"]] if "column" in kwargs else list(kwargs.get("column_list") or [])
        if partition_key is not None and kind in _UNIQUE_EXPECTATIONS and partition_key not in named:
            # Each stream's staging table is validated on its own rows: a value in two streams, or
            # in an earlier batch's partition, would pass, and the run end `success` with the
            # declared columns not unique. No square brackets: Airflow's import errors drop them.
            raise SpecError(f"{at}: {kind} on {', '.join(named)} would be checked on each stream's rows alone (each "
                            f"stream's staging table is validated on its own), so a value in two streams or in an "
                            f"earlier batch would pass; on a partitioned table such values are unique across the "
                            f"table only with the partition key {partition_key}: name it too "
                            f"(expect_compound_columns_to_be_unique on {', '.join([*named, partition_key])}, or "
                            f"unique: {', '.join([*named, partition_key])}), or check it upstream")
        out.append(Expectation(type=kind, kwargs=dict(kwargs)))
    return tuple(out)


def _unique(raw: Any, key: str | None, columns: list[str], where: str, partitioned: bool = False) -> tuple[str, ...]:
    if raw is None or raw is False:
        return ()
    if raw is True:
        if key is None:
            raise SpecError(f"{where}: true means the key is unique, and the table has no key; list the "
                            f"unique columns instead")
        return (key,)
    if not (isinstance(raw, list) and raw and all(c in columns for c in raw) and len(set(raw)) == len(raw)):
        raise SpecError(f"{where}: true (the key is unique), false, or a list of the table's columns")
    if partitioned and key not in raw:
        # A unique index on a partitioned table must hold its partition key (PostgreSQL refuses
        # one without it; SQL Server's must be aligned, which puts the key in it): without the key
        # the target could check the columns within each partition only, and a value in two
        # partitions would load, a run ending `success` with the declared key not unique.
        # No square brackets: Airflow's table of import errors reads them as markup and drops them.
        raise SpecError(f"{where} ({', '.join(raw)}) leaves out the partition key {key}. A unique index on a "
                        f"partitioned table holds within each partition only, so the target cannot keep "
                        f"({', '.join(raw)}) unique across the table: list the key in unique too "
                        f"({', '.join([*raw, key])}, unique together), or leave unique out and check it upstream")
    return tuple(raw)


_TABLE_KEYS = {"columns", "key", "partitioned", "format", "files", "unique", "expectations",
               "mode", "keep", "keep_days", "retire", "allow_empty", "optional", "weight", "tasks",
               "on_spec_change"}


def _table(name: str, raw: Mapping[str, Any], where: str, fmt: FileFormat, files: str,
           on_spec_change: str = "fail") -> Table:
    _identifier(name, where)
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: a mapping with columns and key")
    unknown = set(raw) - _TABLE_KEYS
    if unknown:
        raise SpecError(f"{where}: unknown entries {', '.join(sorted(map(str, unknown)))} "
                        f"(known: {', '.join(sorted(_TABLE_KEYS))})")
    # Every column's first problem at once, as every table's (parse_spec).
    columns, problems = [], []
    for i, c in enumerate(raw.get("columns") or []):
        try:
            columns.append(_column(c, f"{where}.columns[{i}]"))
        except SpecError as exc:
            problems.append(str(exc))
    if problems:
        raise SpecError("\n".join(problems))
    columns = tuple(columns)
    if not columns:
        raise SpecError(f"{where}: a table needs at least one column")
    names = [c.name for c in columns]
    if len(set(names)) != len(names):
        raise SpecError(f"{where}: duplicate column names")
    partitioned = raw.get("partitioned", True)
    if not isinstance(partitioned, bool):
        raise SpecError(f"{where}.partitioned: true or false")
    if raw.get("key") is None and not partitioned:
        key, key_column = None, None
    else:
        if isinstance(raw.get("key"), list):
            raise SpecError(f"{where}.key: one column, the table's key (a partitioned table's partition key); "
                            f"columns unique together go in unique: {', '.join(map(str, raw['key']))}")
        key = _identifier(raw.get("key"), f"{where}.key")
        if key not in names:
            raise SpecError(f"{where}.key: {key!r} is not one of the table's columns")
        key_column = columns[names.index(key)]
        if key_column.nullable:
            raise SpecError(f"{where}.key: the key {key!r} cannot be nullable")
    if partitioned:
        for target, sql_type in key_column.types.items():
            if key_kind(sql_type) is None:
                on = "" if target == NEUTRAL else f" on {target}"
                raise SpecError(f"{where}.key: {key!r} has type {sql_type!r}{on}; a partition key is an integer, a "
                                f"date or a timestamp (a lookup table keyed by text: partitioned: false, loaded whole)")
        kinds = {target: key_kind(sql_type) for target, sql_type in key_column.types.items()}
        if len(set(kinds.values())) > 1:
            # The manifest gives one value per bound, read as the key's kind: it must be one kind.
            raise SpecError(f"{where}.key: {key!r} is of a different kind on each target "
                            f"({', '.join(f'{t}: {k}' for t, k in kinds.items())}); give types of one kind")
    mode = _choice(raw.get("mode", "replace"), LOAD_MODES, f"{where}.mode")
    keep = _count(raw.get("keep"), f"{where}.keep", minimum=1, allow_none=True)
    keep_days = _count(raw.get("keep_days"), f"{where}.keep_days", minimum=1, allow_none=True)
    retire = _choice(raw.get("retire", "drop"), RETIRE, f"{where}.retire")
    if mode != "append" and (keep is not None or keep_days is not None):
        raise SpecError(f"{where}: keep and keep_days go with mode: append")
    if mode == "append" and not partitioned:
        raise SpecError(f"{where}: mode append needs a partitioned table")
    allow_empty = raw.get("allow_empty", False)
    if not isinstance(allow_empty, bool):
        raise SpecError(f"{where}.allow_empty: true or false")
    if allow_empty and mode != "append":
        # A batch without rows of a table loaded whole would empty it: never allowed in silence.
        raise SpecError(f"{where}.allow_empty: goes with mode: append (a batch with no rows of a table in "
                        f"replace mode, or loaded whole, would empty it)")
    optional = raw.get("optional", False)
    if not isinstance(optional, bool):
        raise SpecError(f"{where}.optional: true or false")
    if keep_days is not None and key_column is not None and column_key_kind(key_column) == "integer":
        raise SpecError(f"{where}.keep_days: needs a date or timestamp key; use keep (batches) instead")
    return Table(name=name, columns=columns, key=key, partitioned=partitioned,
                 format=_format(raw.get("format"), fmt, f"{where}.format"),
                 files=_files(raw["files"], f"{where}.files") if "files" in raw else files,
                 unique=_unique(raw.get("unique"), key, names, f"{where}.unique", partitioned),
                 expectations=_expectations(raw.get("expectations"), names, f"{where}.expectations",
                                            key if partitioned else None),
                 mode=mode, keep=keep, keep_days=keep_days, retire=retire, allow_empty=allow_empty, optional=optional,
                 weight=_count(raw.get("weight", 1), f"{where}.weight", minimum=1),
                 tasks=_choice(raw.get("tasks", "per-step"), GROUP_TASKS, f"{where}.tasks"),
                 on_spec_change=_choice(raw.get("on_spec_change", on_spec_change), ON_SPEC_CHANGE,
                                        f"{where}.on_spec_change"))


def _sources(raw: Any, where: str) -> dict[str, tuple[int, ...]]:
    """`sources`: {source name: [stream numbers or "first-last" ranges]}; a stream in one source only."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise SpecError(f"{where}: a mapping of source (queue) names to lists of streams, "
                        f"e.g. {{source_a: [1, 2], source_b: [\"3-4\"]}}")
    out: dict[str, tuple[int, ...]] = {}
    owner: dict[int, str] = {}
    for name, items in raw.items():
        at = f"{where}.{name}"
        if not isinstance(name, str) or not SOURCE.match(name):
            raise SpecError(f"{where}: {name!r} is not a valid source name (letters, digits, '_', '-', '.'; "
                            f"it is the Airflow queue of the workers that read its files)")
        if not isinstance(items, list) or not items:
            raise SpecError(f"{at}: a list of stream numbers or ranges like \"1-7\"")
        streams: list[int] = []
        for item in items:
            if isinstance(item, int) and not isinstance(item, bool) and item >= 1:
                streams.append(item)
            elif isinstance(item, str) and (m := _STREAM_RANGE.match(item.strip())) \
                    and 1 <= int(m.group(1)) <= int(m.group(2)):
                streams.extend(range(int(m.group(1)), int(m.group(2)) + 1))
            else:
                raise SpecError(f"{at}: {item!r} is neither a stream number (1 or more) nor a range like \"1-7\"")
        for k in streams:
            if k in owner:
                raise SpecError(f"{at}: stream {k} is listed twice (also in {owner[k]}); a stream's files live "
                                f"in one source")
            owner[k] = name
        out[name] = tuple(sorted(streams))
    return out


_SPEC_KEYS = {"name", "tables", "format", "files", "generator", "sources", "publish", "on_spec_change"}


def parse_spec(raw: Mapping[str, Any], source: str = "<inline>") -> LoadSpec:
    if not isinstance(raw, Mapping):
        raise SpecError(f"{source}: a spec is a mapping with name, tables and optionally format, files")
    unknown = set(raw) - _SPEC_KEYS
    if unknown:
        # A misspelt option (say `publsh: table`) must not be taken for its default in silence.
        raise SpecError(f"{source}: unknown entries {', '.join(sorted(map(str, unknown)))} "
                        f"(known: {', '.join(sorted(_SPEC_KEYS))})")
    name = _identifier(raw.get("name"), f"{source}: name")
    tables_raw = raw.get("tables")
    if not isinstance(tables_raw, Mapping) or not tables_raw:
        raise SpecError(f"{source}: 'tables' must map table names to their definitions")
    fmt = _format(raw.get("format") or {}, FileFormat(), f"{source}: format")
    files = _files(raw.get("files", LoadSpec.files), f"{source}: files")
    # The spec's own on_spec_change is each table's unless the table says otherwise.
    on_change = _choice(raw.get("on_spec_change", "fail"), ON_SPEC_CHANGE, f"{source}: on_spec_change")
    # Every table's first problem at once: a spec with two wrong tables is fixed in one round.
    tables, problems = [], []
    for t, d in tables_raw.items():
        try:
            tables.append(_table(t, d, f"{source}: tables.{t}", fmt, files, on_change))
        except SpecError as exc:
            problems.append(str(exc))
    if problems:
        raise SpecError("\n".join(problems))
    tables = tuple(tables)
    sources = _sources(raw.get("sources"), f"{source}: sources")
    publish = _choice(raw.get("publish", "batch"), PUBLISH, f"{source}: publish")
    single = [t.name for t in tables if t.tasks == "single"]
    if sources and publish == "table" and single:
        # Such a table goes in at its last group's one task, on one source's worker: the files of
        # its other streams, elsewhere, would not be compared with what their loads read.
        raise SpecError(f"{source}: tables {', '.join(single)}: `tasks: single` with `publish: table` and `sources`: "
                        f"a table's last group would put it in without comparing its files on other sources with "
                        f"what their loads read; use `publish: batch`, or `tasks: per-step` for those tables")
    return LoadSpec(name=name, tables=tables, files=files, format=fmt, generator=raw.get("generator"),
                    source=source, sources=sources, publish=publish)


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
