"""The target table as SQL Server's catalog answers it, turned into Python values (no connection).

The adapter runs the pre-flight queries (targets/mssql/templates/catalog_*.sql) and hands their rows
here, in the order the queries select them; tests hand scripted answers the same way. What
comes back (`TargetTable`) feeds window.plan_window and the staging tables' DDL: columns as the
target has them (a DBA's widened column, a collation), each index with its columns, and each
partition's filegroup, rows and data compression.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from switchyard.targets.mssql.keys import KeyType
from switchyard.targets.mssql.tsql import writable_name
from switchyard.targets.mssql.window import Partition, compression_of

_TYPE = re.compile(r"^[a-z0-9_]+$")
_COLLATION = re.compile(r"^[A-Za-z0-9_]+$")
_LENGTH_BYTES = {"char", "varchar", "binary", "varbinary"}
_LENGTH_CHARS = {"nchar", "nvarchar"}
_SCALE = {"datetime2", "time", "datetimeoffset"}
_DECIMAL = {"decimal", "numeric"}


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type: str          # as CREATE TABLE writes it: varchar(79), decimal(15,2), datetime2(3)
    nullable: bool
    collation: str | None = None
    computed: bool = False
    identity: bool = False
    sparse: bool = False


@dataclass(frozen=True)
class Dependency:
    """A row of catalog_dependencies.sql: something about the target beyond its shape that can
    make the commit's TRUNCATE, SWITCH, SPLIT or MERGE fail."""
    kind: str            # check, fk_in, fk_out, indexed_view, cdc, replication, temporal, change_tracking, set_option,
    #                      column, fulltext, read_only, table_option, check_nfr, rule, lob_filegroup, permission
    #                      (catalog_dependencies.sql)
    name: str
    detail: str | None = None
    flag: int = 0


@dataclass(frozen=True)
class IndexInfo:
    index_id: int
    name: str
    clustered: bool
    unique: bool
    primary_key: bool
    unique_constraint: bool
    keys: tuple[tuple[str, bool], ...]   # (column, descending)
    included: tuple[str, ...] = ()
    filter: str | None = None
    aligned: bool = True
    disabled: bool = False
    kind: str = "CLUSTERED"

    @property
    def constraint(self) -> bool:
        return self.primary_key or self.unique_constraint


@dataclass
class TargetTable:
    exists: bool
    partitioned: bool = False
    data_space: str | None = None
    function: str | None = None
    function_id: int | None = None
    scheme: str | None = None
    range_right: bool = False
    parameter_type: str | None = None
    parameter_scale: int | None = None   # the function's datetime2 precision
    partition_column: str | None = None
    boundaries: list[Any] = field(default_factory=list)
    partitions: list[Partition] = field(default_factory=list)
    indexes: list[IndexInfo] = field(default_factory=list)
    columns: list[ColumnInfo] = field(default_factory=list)
    shared_with: list[str] = field(default_factory=list)
    # Every partition scheme of the function, the table's own among them: a SPLIT needs a NEXT
    # USED filegroup in each (an index of the table may be on another scheme of the function).
    function_schemes: list[str] = field(default_factory=list)
    dependencies: list[Dependency] = field(default_factory=list)
    # Indexes with a partition on another filegroup than the table's partition of that number
    # (an index on another scheme of the table's function): (index, partition, its filegroup).
    misplaced: list[tuple[str, int, str]] = field(default_factory=list)
    # datetime2(7) boundaries that are not the last 100 ns of a microsecond (KeyType.inside_a_microsecond).
    inexact_boundaries: list[str] = field(default_factory=list)
    # The batches the control table records in the table (a whole table's: one).
    batches: list[str] = field(default_factory=list)
    # The table's rows (its heap or clustered index's partitions); None where not read.
    rows: int | None = None

    @property
    def checks(self) -> list[Dependency]:
        """The target's CHECK constraints: each staging table carries them (check_copies)."""
        return [d for d in self.dependencies if d.kind == "check"]


def column_type(type_name: str, max_length: int, precision: int, scale: int) -> str:
    """The type as CREATE TABLE writes it, from sys.columns' fields (max_length is in bytes, -1 for max)."""
    if not type_name:
        # TYPE_NAME of a CLR type's system_type_id (240: hierarchyid, geometry, geography) is NULL.
        raise ValueError("a column of a CLR type (hierarchyid, geometry, geography), which Switchyard does not "
                         "load; make it a type of the spec's for the load")
    t = type_name.lower()
    if not _TYPE.match(t):
        raise ValueError(f"type {type_name!r} is not a system type name")
    if t in _LENGTH_BYTES:
        return f"{t}({'max' if max_length == -1 else int(max_length)})"
    if t in _LENGTH_CHARS:
        return f"{t}({'max' if max_length == -1 else int(max_length) // 2})"
    if t in _DECIMAL:
        return f"{t}({int(precision)},{int(scale)})"
    if t in _SCALE:
        return f"{t}({int(scale)})"
    return t


def _name(value: str) -> str:
    if not writable_name(value):
        raise ValueError(f"{value!r}: a name Switchyard does not write into T-SQL (letters, digits, _ @ # $ only)")
    return value


def target_from_catalog(key: KeyType | None, table_rows: Sequence[tuple], boundary_rows: Sequence[tuple] = (),
                        partition_rows: Sequence[tuple] = (), index_rows: Sequence[tuple] = (),
                        column_rows: Sequence[tuple] = (), shared_rows: Sequence[tuple] = (),
                        batch_rows: Sequence[tuple] = (), scheme: str | None = None,
                        dependency_rows: Sequence[tuple] = (), function_schemes: Sequence[str] = ()) -> TargetTable:
    """The catalog's answers (rows of catalog_table, _boundaries, _partitions, _indexes, _columns,
    the shared-function query and catalog_dependencies; `batch_rows`: (key_min, key_max, batch) of
    the control table partition_batches, keys as JSON text) as one TargetTable. `key`: the
    partition key's type; None for a table the spec loads whole, whose partitions are not read."""
    if not table_rows:
        return TargetTable(exists=False)
    (ds_type, data_space, function_id, function, on_right, _fanout, p_type, _len, _prec, scale, column), = \
        [tuple(r) for r in table_rows]
    t = TargetTable(exists=True, partitioned=str(ds_type).strip() == "PS", data_space=data_space,
                    function=function, function_id=function_id, range_right=bool(on_right),
                    parameter_type=(p_type or None), partition_column=column, scheme=scheme or data_space,
                    parameter_scale=int(scale) if str(p_type or "").lower() == "datetime2" and scale is not None
                    else None)
    t.columns = [ColumnInfo(name=_name(n), type=column_type(tn, ml, pr, sc), nullable=bool(nul),
                            collation=c if c and _COLLATION.match(c) else None, computed=bool(more[0]) if more else False,
                            identity=bool(more[1]) if len(more) > 1 else False,
                            sparse=bool(more[3]) if len(more) > 3 else False)
                 for n, tn, ml, pr, sc, nul, c, *more in column_rows]
    t.dependencies = [Dependency(kind=str(k), name=str(n), detail=None if d is None else str(d), flag=int(f or 0))
                      for k, n, d, f in dependency_rows]
    t.shared_with = [r[0] for r in shared_rows]
    t.function_schemes = [str(n) for n in function_schemes]
    t.indexes = _indexes(index_rows)
    t.batches = sorted({str(batch) for *_, batch in batch_rows})
    # The table's rows, by its heap or clustered index (sys.partitions.rows, which the docs call
    # approximate: exact for a table no transaction is writing, as under the run lease).
    t.rows = sum(int(r[3]) for r in partition_rows if int(r[0]) in (0, 1))
    if not t.partitioned:
        # Where a table loaded whole lives: its heap or clustered index's one partition (filegroup,
        # data compression of each index), which its next version must share for SWITCH.
        by_number, t.misplaced = _placement(partition_rows)
        t.partitions = [Partition(number=1, lower=None, upper=None, filegroup=e["filegroup"] or "", rows=e["rows"],
                                  compression=tuple(e["compression"])) for n, e in by_number.items() if n == 1]
        return t
    if key is None:  # a partitioned target the spec loads whole: shape_problems refuses it
        return t
    if t.parameter_type and t.parameter_type.lower() != key.base:
        # Partitioned on a key of another type (the spec's key moved or retyped): shape_problems
        # refuses it, naming both types; its boundaries are not values of the spec's key.
        return t
    t.boundaries = [key.value(b) for _, b in sorted(boundary_rows)]
    t.inexact_boundaries = [b for _, b in sorted(boundary_rows) if key.inside_a_microsecond(b)]
    by_number, t.misplaced = _placement(partition_rows)
    recorded = {}
    for key_min, key_max, batch in batch_rows:
        recorded[(key.before(key.value(_json(key_min, key))), key.value(_json(key_max, key)))] = batch
    bounds = [None, *t.boundaries, None]
    if len(by_number) != len(t.boundaries) + 1:
        return t   # boundaries not read (a function of another type): shape_problems says so
    for number in sorted(by_number):
        e = by_number[number]
        lower, upper = bounds[number - 1], bounds[number]
        t.partitions.append(Partition(number=number, lower=lower, upper=upper, filegroup=e["filegroup"] or "",
                                      rows=e["rows"], compression=tuple(e["compression"]),
                                      batch=recorded.get((lower, upper))))
    return t


def _placement(partition_rows: Sequence[tuple]) -> tuple[dict[int, dict], list[tuple[str, int, str]]]:
    """catalog_partitions.sql's rows as ({partition number: its rows, filegroup and each index's
    data compression}, the index partitions on another filegroup than the table's partition of
    that number: (index, partition, filegroup))."""
    by_number: dict[int, dict] = {}
    index_places = []
    for index_id, index_name, number, rows, compression, filegroup in partition_rows:
        entry = by_number.setdefault(int(number), {"rows": 0, "filegroup": None, "compression": []})
        if int(index_id) in (0, 1):
            entry["rows"] = int(rows)
            entry["filegroup"] = filegroup
        else:
            index_places.append((str(index_name), int(number), filegroup))
        entry["compression"].append((index_name or "(heap)", compression_of(compression)))
    misplaced = [(name, number, fg) for name, number, fg in index_places if fg != by_number[number]["filegroup"]]
    return by_number, misplaced


def _json(text: Any, key: KeyType) -> Any:
    """A key kept as JSON text in the control tables, as the key type's value."""
    if key.kind == "integer":
        return int(text)
    return str(text)


def _indexes(rows: Sequence[tuple]) -> list[IndexInfo]:
    grouped: dict[int, dict] = {}
    for (index_id, name, type_desc, unique, pk, uq, disabled, has_filter, filter_def, aligned, column, ordinal,
         descending, included) in rows:
        g = grouped.setdefault(int(index_id), {
            "name": _name(name), "kind": str(type_desc), "unique": bool(unique), "pk": bool(pk), "uq": bool(uq),
            "disabled": bool(disabled), "filter": filter_def if has_filter else None, "aligned": bool(aligned),
            "keys": [], "included": []})
        if column is None:
            continue
        if included:
            g["included"].append(_name(column))
        elif ordinal:
            g["keys"].append((_name(column), bool(descending)))
    return [IndexInfo(index_id=i, name=g["name"], clustered=g["kind"] == "CLUSTERED", unique=g["unique"],
                      primary_key=g["pk"], unique_constraint=g["uq"], keys=tuple(g["keys"]),
                      included=tuple(g["included"]), filter=g["filter"], aligned=g["aligned"],
                      disabled=g["disabled"], kind=g["kind"])
            for i, g in sorted(grouped.items())]


def shape_problems(t: TargetTable, where: str, spec_table, key: KeyType, key_sql_type: str) -> list[str]:
    """What about the existing table stops this spec's batches from switching in, with what to do."""
    problems = []
    if spec_table.partitioned and not t.partitioned:
        problems.append(f"{where} exists but is not partitioned (it is on {t.data_space}; the spec partitions it by "
                        f"range on {spec_table.key}): rename or drop it, or declare the table partitioned: false")
        return problems
    if not spec_table.partitioned:
        if t.partitioned:
            problems.append(f"{where} is partitioned, the spec declares it partitioned: false: rename or drop it, "
                            f"or change the spec")
        return problems
    if t.partition_column != spec_table.key:
        problems.append(f"{where} is partitioned on {t.partition_column}, the spec on {spec_table.key}: rename or "
                        f"drop it, or change the spec's key")
    unwritable = _unwritable_names(t)
    if unwritable:
        problems.append(f"{where}: its partition function, scheme, filegroups, indexes or columns include "
                        f"{', '.join(repr(n) for n in unwritable)}: Switchyard writes a catalog name into T-SQL only "
                        f"as letters, digits, _ @ # $ (a letter or _ first), so its commit could not name "
                        f"{'it' if len(unwritable) == 1 else 'them'}; rename (sp_rename), or load this table another way")
    if t.range_right:
        problems.append(f"{where}: its partition function {t.function} is RANGE RIGHT; Switchyard's partitions are "
                        f"RANGE LEFT (a stream's largest key is its boundary): rebuild the table on a RANGE LEFT "
                        f"function, or drop it and let setup create it")
    if t.parameter_type and t.parameter_type.lower() != key.base:
        problems.append(f"{where}: its partition function {t.function} takes {t.parameter_type}, the spec's key "
                        f"{spec_table.key} is {key_sql_type}: the boundaries would not compare; make them the same type")
    elif t.parameter_scale is not None and key.base == "datetime2" and t.parameter_scale != key.digits:
        problems.append(f"{where}: its partition function {t.function} takes datetime2({t.parameter_scale}), the "
                        f"spec's key {spec_table.key} is {key.declared}: the boundaries would not compare; make them "
                        f"the same precision")
    if t.inexact_boundaries:
        problems.append(f"{where}: its partition function {t.function} has the boundary {t.inexact_boundaries[0]}"
                        f"{f' (and {len(t.inexact_boundaries) - 1} more)' if len(t.inexact_boundaries) > 1 else ''}, "
                        f"which is not the last 100 ns of a microsecond: Switchyard's {key.declared} partitions hold "
                        f"whole microseconds (a RANGE LEFT boundary ends in 9, e.g. …59.9999999); rebuild the table "
                        f"on such boundaries, or drop it and let setup create it")
    # Which columns differ is core/spec_diff.py's (the adapter's _spec_differences); the order
    # is SQL Server's own constraint: the staging tables load the files by position and SWITCH
    # needs the columns in the same order, so the spec's columns the table has must come in the
    # table's order, and a column the table lacks can only come after them (ADD appends it).
    names = [c.name for c in t.columns]
    spec_names = list(spec_table.column_names)
    shared = [n for n in spec_names if n in names]
    if [n for n in names if n in spec_names] != shared or spec_names[:len(shared)] != shared:
        problems.append(f"{where} has the columns ({', '.join(names)}) in that order; the spec's files carry "
                        f"({', '.join(spec_names)}), which the staging tables load by position and SWITCH needs in "
                        f"the table's order (a new column goes after the others): make the orders the same")
    for index in t.indexes:
        if not index.aligned:
            problems.append(f"{where}: index {index.name} is not aligned (not partitioned by {spec_table.key} on a "
                            f"scheme of the table's function {t.function}): SWITCH needs every index partitioned "
                            f"with the table, and the commit's SPLIT and MERGE change that function only; rebuild "
                            f"it ON {t.scheme}({spec_table.key}) or drop it")
        if index.kind not in ("CLUSTERED", "NONCLUSTERED"):
            problems.append(f"{where}: index {index.name} is {index.kind.lower()}: Switchyard builds rowstore indexes "
                            f"on its staging tables only; drop it or load this table another way")
        if index.filter:
            problems.append(f"{where}: index {index.name} is filtered: Switchyard writes no index definition it "
                            f"did not build from names (a filter is free text), so it cannot build it on the staging "
                            f"tables that SWITCH needs it on; drop the filter or the index")
        places = sorted({(n, fg) for name, n, fg in t.misplaced if name == index.name})
        if places and index.aligned:
            problems.append(f"{where}: index {index.name} has partitions on other filegroups than the table's "
                            f"(partition {places[0][0]} on {places[0][1]}): SWITCH needs each index partition on the "
                            f"filegroup of the table's partition, where Switchyard builds the staging tables' "
                            f"indexes; rebuild it ON {t.scheme}({spec_table.key}) or on a scheme with the same "
                            f"filegroups")
        if index.disabled:
            problems.append(f"{where}: index {index.name} is disabled: SWITCH needs it enabled (ALTER INDEX "
                            f"{index.name} ON {where} REBUILD) or dropped")
    return problems


def _unwritable_names(t: TargetTable) -> list[str]:
    """The catalog names of the table's partitioning, indexes and columns that the commit's T-SQL
    could not write (tsql.quote_name refuses them)."""
    names = (t.function, t.scheme, *t.function_schemes, *(p.filegroup for p in t.partitions),
             *(i.name for i in t.indexes), *(c.name for c in t.columns), *(fg for _, _, fg in t.misplaced))
    return sorted({n for n in names if n is not None and not writable_name(n)})


def staging_constraint_name(staging_table: str, index: str) -> str:
    """A primary key or unique constraint is an object of its schema: on the staging table it is
    named after the staging table and the target's constraint (hashed past 128 characters)."""
    name = f"{staging_table}__{index}"
    if len(name) > 128:
        name = f"{name[:100]}_{hashlib.sha1(name.encode()).hexdigest()[:16]}"
    return _name(name)


# A CHECK definition Switchyard copies to its staging tables: the catalog's own text of the
# constraint (sys.check_constraints.definition), taken only when every token is one of these:
# a bracketed name of one of the table's columns, a number, a string literal, a comparison or
# arithmetic operator, a parenthesis or comma, or AND, OR, NOT, IS, NULL, IN, LIKE, BETWEEN.
# Anything else (a function, a subquery, a comment) is refused by name, never pasted.
_CHECK_TOKENS = re.compile(r"\s+|\[(?P<column>[A-Za-z_][A-Za-z0-9_]{0,127})\]|N?'(?:[^']|'')*'|\d+(?:\.\d+)?"
                           r"|<>|!=|>=|<=|[=<>+\-*/%(),]|(?P<word>[A-Za-z]+)")
_CHECK_WORDS = {"AND", "OR", "NOT", "IS", "NULL", "IN", "LIKE", "BETWEEN"}


def check_copy(definition: str | None, columns: Sequence[str]) -> str | None:
    """The CHECK definition as it is when it is safe to write into a staging table's DDL, else None."""
    if not definition or len(definition) > 4000:
        return None
    pos = 0
    while pos < len(definition):
        m = _CHECK_TOKENS.match(definition, pos)
        if not m or m.end() == pos:
            return None
        if m.group("column") is not None and m.group("column") not in columns:
            return None
        if m.group("word") is not None and m.group("word").upper() not in _CHECK_WORDS:
            return None
        pos = m.end()
    if definition.count("(") != definition.count(")") or "--" in definition or "/*" in definition:
        return None
    return definition


def leftover_findings(rows: list[tuple], where: str, spec_table, key: KeyType, key_sql_type: str,
                      function: str, scheme: str) -> tuple[list[str], list[str]]:
    """(problems, notes) for a partitioned table not there yet whose partition function or scheme,
    by the names setup gives them, a table of that name dropped earlier left behind
    (catalog_leftover.sql rows: kind, name, boundary_value_on_right, parameter type or the
    scheme's function, scale). Setup creates them only where missing and puts the new table on
    them as they are, so what shape_problems refuses in a table's function is refused here, before
    any load, rather than by the SWITCH after every load."""
    drop = (f"drop what is left (DROP PARTITION SCHEME {_bracketed(scheme)}; DROP PARTITION FUNCTION "
            f"{_bracketed(function)}, once no table uses them) and setup creates both for this batch")
    problems, notes = [], []
    for kind, name, right, typed, scale in rows:
        if kind == "scheme" and typed != function:
            problems.append(f"{where}: new table, but the partition scheme {name} setup would create it on is in the "
                            f"database already, on the partition function {typed}: {drop}")
        if kind != "function":
            continue
        if right:
            problems.append(f"{where}: new table, but the partition function {name} setup would create it on is in "
                            f"the database already, RANGE RIGHT; Switchyard's partitions are RANGE LEFT: {drop}")
        if str(typed or "").lower() != key.base:
            problems.append(f"{where}: new table, but the partition function {name} setup would create it on is in "
                            f"the database already, taking {typed}; the spec's key {spec_table.key} is "
                            f"{key_sql_type}: {drop}")
        elif key.base == "datetime2" and scale is not None and scale != key.digits:
            problems.append(f"{where}: new table, but the partition function {name} setup would create it on is in "
                            f"the database already, taking datetime2({scale}); the spec's key {spec_table.key} is "
                            f"{key.declared}: {drop}")
    if rows and not problems:
        notes.append(f"{where}: the partition function {function} and scheme {scheme} a table of that name left are "
                     f"in the database; setup creates the table on them (RANGE LEFT, {key_sql_type})")
    return problems, notes


def dependency_findings(t: TargetTable, where: str, spec_table) -> tuple[list[str], list[str]]:
    """(problems, notes): what about an existing partitioned target beyond its shape would make the
    commit's TRUNCATE, SWITCH, SPLIT or MERGE fail, each with its fix; and what the load does
    about the rest (the rules: catalog_dependencies.sql)."""
    problems, notes = truncate_problems(t, where), []
    names = [c.name for c in t.columns]
    key = next((c for c in t.columns if c.name == spec_table.key), None)
    if key is not None and key.nullable:
        notes.append(f"{where}: its key column {key.name} allows NULL; each staging table's range CHECK says "
                     f"{key.name} IS NOT NULL, which SWITCH into any partition but the first needs (Msg 4982 "
                     f"otherwise). Making {key.name} NOT NULL on the table is the cleaner fix")
    for c in t.columns:
        if c.computed:
            problems.append(f"{where}: column {c.name} is computed: the staging tables load every column from the "
                            f"file, and SWITCH needs the same computed definition on them; drop the computed column "
                            f"(or make it a plain column the file fills), or load this table another way")
        if c.identity:
            notes.append(f"{where}: column {c.name} has the IDENTITY property: the rows keep the file's values "
                         f"(SWITCH ignores IDENTITY); run DBCC CHECKIDENT on the table after the load if inserts "
                         f"follow")
    for d in t.dependencies:
        if d.kind != "check":
            if (refusal := _SWITCH_REFUSES.get(_rule_of(d))) is not None:
                problems.append(refusal(where, d))
        elif d.flag:
            notes.append(f"{where}: CHECK constraint {d.name} is disabled: the staging tables do not carry it")
        elif check_copy(d.detail, names) is None or not writable_name(d.name):
            problems.append(f"{where}: CHECK constraint {d.name} {d.detail}: SWITCH needs every staging table to "
                            f"carry it, and Switchyard copies only definitions made of the table's columns, "
                            f"literals, comparisons, arithmetic, AND, OR, NOT, IN, BETWEEN, LIKE and IS NULL; "
                            f"rewrite it so, or drop it for the load and add it back WITH CHECK after")
        else:
            notes.append(f"{where}: CHECK constraint {d.name} {d.detail} is copied to each staging table "
                         f"(SWITCH needs it there)")
    return problems, notes


def whole_table_blockers(t: TargetTable, spec_table) -> list[str]:
    """Why a table loaded whole cannot take its next version by SWITCH (metadata only, its
    readers waiting for no copy) and is replaced by TRUNCATE TABLE and INSERT ... SELECT instead:
    what SWITCH needs the same on both tables that Switchyard does not build on the staging
    table, or a staging table loaded by position that would not line up with the table's
    columns. Empty: the staging table is made to the table's shape and switched in."""
    out = []
    names = [c.name for c in t.columns]
    spec_names = list(spec_table.column_names)
    # A column the spec adds goes after the others (the pre-flight's ALTER TABLE ... ADD).
    if names + [n for n in spec_names if n not in names] != spec_names:
        out.append(f"its columns ({', '.join(names)}) are not the spec's in the spec's order, and the staging table "
                   f"is loaded by position")
    unwritable = _unwritable_names(t)
    if unwritable:
        out.append(f"its names {', '.join(repr(n) for n in unwritable)}, which Switchyard does not write into T-SQL")
    out += [f"column {c.name} is computed" for c in t.columns if c.computed]
    # SWITCH ignores IDENTITY: the table's identity value would stay where it was, below the
    # file's values, and the next INSERT would reuse them; the copy's IDENTITY_INSERT moves it up.
    out += [f"column {c.name} has the IDENTITY property (SWITCH would leave the table's identity value below "
            f"the file's values)" for c in t.columns if c.identity]
    for index in t.indexes:
        if index.kind not in ("CLUSTERED", "NONCLUSTERED"):
            out.append(f"index {index.name} is {index.kind.lower()}")
        elif index.filter:
            out.append(f"index {index.name} is filtered")
        elif index.disabled:
            out.append(f"index {index.name} is disabled")
    home = t.partitions[0].filegroup if t.partitions else None
    out += [f"index {name} is on filegroup {fg}, not the table's {home}" for name, _, fg in t.misplaced]
    for d in t.dependencies:
        if d.kind == "check" and not d.flag and (check_copy(d.detail, names) is None or not writable_name(d.name)):
            out.append(f"CHECK constraint {d.name} is not one Switchyard copies (columns, literals, comparisons, "
                       f"arithmetic, AND, OR, NOT, IN, BETWEEN, LIKE, IS NULL only)")
        elif (blocker := _WHOLE_TABLE_BLOCKERS.get(d.kind)) is not None:
            out.append(blocker(d))
    return out


# What SWITCH needs the same on a table loaded whole and its next version, that Switchyard's
# staging tables do not have (catalog_dependencies.sql's rows, by kind): such a table is
# replaced by TRUNCATE TABLE and INSERT ... SELECT, which need none of it.
_WHOLE_TABLE_BLOCKERS: dict[str, Callable[[Dependency], str]] = {
    "fk_out": lambda d: f"foreign key {d.name} (to {d.detail}), which SWITCH needs on the staging table, trusted",
    "change_tracking": lambda d: "change tracking is enabled on it (SWITCH fails on such a table, Msg 4900)",
    "set_option": lambda d: f"it was created with {d.name} OFF",
    "column": lambda d: f"column {d.name} has {d.detail}",
    "fulltext": lambda d: "a full-text index (SWITCH refuses such a table, Msg 4918)",
    "table_option": lambda d: f"its table option '{d.name}' is ON",
    "check_nfr": lambda d: f"CHECK constraint {d.name} is NOT FOR REPLICATION",
    "rule": lambda d: f"rule {d.detail} is bound to column {d.name} (Msg 4964)",
    "lob_filegroup": lambda d: f"its large values are on filegroup {d.name}, apart from its rows",
}


def shape_differences(t: TargetTable, made: TargetTable) -> list[str]:
    """How `made` (a table loaded whole's staging table or next version) differs from the table
    `t` in what SWITCH needs equal: its columns, filegroup, data compression and indexes, and a
    trusted copy of each of the table's enabled CHECK constraints
    (https://learn.microsoft.com/en-us/previous-versions/sql/sql-server-2008-r2/ms191160(v=sql.105)).
    Empty: SWITCH takes it."""
    if not made.exists or not made.partitions or not t.partitions:
        return ["it is not there"]
    out = []

    def columns(table: TargetTable) -> list[tuple]:
        return [(c.name, c.type, c.nullable, c.collation, c.sparse) for c in table.columns]

    def indexes(table: TargetTable) -> list[tuple]:
        compression = dict(table.partitions[0].compression)
        return sorted((i.clustered, i.unique, i.primary_key, i.unique_constraint, i.keys, i.included,
                       compression.get(i.name)) for i in table.indexes)
    if columns(made) != columns(t):
        out.append("its columns")
    if made.partitions[0].filegroup != t.partitions[0].filegroup:
        out.append(f"its filegroup ({made.partitions[0].filegroup}, the table's {t.partitions[0].filegroup})")
    if made.partitions[0].compression[:1] != t.partitions[0].compression[:1] and not any(
            i.clustered for i in t.indexes):     # a heap's own (a clustered index's is its index's)
        out.append("its data compression")
    if indexes(made) != indexes(t):
        out.append("its indexes")
    copies = {d.detail for d in made.checks if not d.flag}
    if any(d.detail not in copies for d in t.checks if not d.flag):
        out.append("its CHECK constraints")
    return out


def whole_table_problems(t: TargetTable, where: str) -> list[str]:
    """What stops a table loaded whole from being replaced either way (TRUNCATE TABLE refuses it,
    or SWITCH out of it, or a read-only filegroup holds it), with the fix."""
    return truncate_problems(t, where) + [_SWITCH_REFUSES["read_only"](where, d) for d in t.dependencies
                                          if d.kind == "read_only"]


def _bracketed(name: str | None) -> str:
    """A name for a statement the refusal prints for a DBA to run (never run by Switchyard), as
    QUOTENAME writes it: in brackets, a closing bracket doubled."""
    return "[" + str(name).replace("]", "]]") + "]"


def truncate_problems(t: TargetTable, where: str) -> list[str]:
    """What makes TRUNCATE TABLE refuse the existing target, with the fix: the commit empties a
    partitioned table's partitions with it, and an unpartitioned table's replace the whole table
    (https://learn.microsoft.com/en-us/sql/t-sql/statements/truncate-table-transact-sql#restrictions)."""
    return [refusal(where, d) for d in t.dependencies if (refusal := _TRUNCATE_REFUSES.get(_rule_of(d)))]


def _rule_of(d: Dependency) -> str:
    """The refusal a dependency row gets: by its kind, a permission by its name too."""
    return f"permission {d.name}" if d.kind == "permission" else d.kind


def _temporal(where: str, d: Dependency) -> str:
    what = "a history table" if d.flag == 1 else "system-versioned"
    refused = ("SWITCH into it is refused" if d.flag == 1
               else "TRUNCATE TABLE and SWITCH out of it, with which the commit replaces or retires its rows, "
                    "are refused")
    return (f"{where} is {what} ({d.detail}): {refused} while SYSTEM_VERSIONING is ON, and Switchyard loads no "
            f"table under system versioning; turn it OFF for the load and ON after, or leave {where} out of this run")


Refusal = Callable[[str, Dependency], str]
# What each row of catalog_dependencies.sql makes TRUNCATE TABLE refuse, with the fix: checks as
# data, one line per rule (`where` is the table, `d` the row).
_TRUNCATE_REFUSES: dict[str, Refusal] = {
    "fk_in": lambda where, d: (
        f"{where} is referenced by foreign key {d.name} of {d.detail}: TRUNCATE TABLE refuses a table a foreign key "
        f"references (Msg 4712), and the commit empties the table's partitions (or the table) with it; drop {d.name} "
        f"for the load and add it back WITH CHECK after, or leave {where} out of this run"),
    "indexed_view": lambda where, d: (
        f"{where} is in the indexed view {d.name}: TRUNCATE TABLE refuses a table an indexed view references, and "
        f"SWITCH needs the view's index aligned; drop the view's index for the load and create it again after"),
    "cdc": lambda where, d: (
        f"{where}: change data capture tracks it: TRUNCATE TABLE refuses such a table; disable it for the load "
        f"(sys.sp_cdc_disable_table) and enable it after, or leave {where} out of this run"),
    "permission ALTER": lambda where, d: (
        f"{where}: the run's database user {d.detail} lacks ALTER on it, which TRUNCATE TABLE and SWITCH need; "
        f"GRANT ALTER ON {'.'.join(map(_bracketed, where.split('.', 1)))} TO {_bracketed(d.detail)}"),
    "replication": lambda where, d: (
        f"{where} is published or subscribed for replication: TRUNCATE TABLE refuses a published table and SWITCH "
        f"needs the publication's allow_partition_switch; take it out of the publication for the load, or leave "
        f"{where} out of this run"),
    "ledger": lambda where, d: (
        f"{where} is a ledger table (its column {d.name} is one the ledger generates): TRUNCATE TABLE and deleting "
        f"rows, with which the commit replaces or retires its partitions, are not supported on a ledger table, and "
        f"it cannot become an ordinary table; load the batch into a table that is not a ledger table, or leave "
        f"{where} out of this run"),
    "temporal": _temporal,
}
# What the rest make SWITCH, SPLIT or MERGE refuse (a partitioned target), with the fix.
_SWITCH_REFUSES: dict[str, Refusal] = {
    "fk_out": lambda where, d: (
        f"{where}: foreign key {d.name} references {d.detail}: SWITCH needs every staging table to carry it, "
        f"trusted, and Switchyard copies no foreign keys; drop {d.name} for the load and add it back WITH CHECK "
        f"after"),
    "change_tracking": lambda where, d: (
        f"{where}: change tracking is enabled on it: ALTER TABLE SWITCH fails on such a table (Msg 4900); disable "
        f"it for the load (ALTER TABLE {where} DISABLE CHANGE_TRACKING) and enable it after, or leave {where} out "
        f"of this run"),
    "set_option": lambda where, d: (
        f"{where} was created with {d.name} OFF: SWITCH needs the staging tables' {d.name} setting the same, and "
        f"Switchyard creates them with it ON; create the table again with {d.name} ON (a new table, its rows "
        f"copied), or leave {where} out of this run"),
    "column": lambda where, d: (
        f"{where}: column {d.name} has {d.detail}: SWITCH needs the same on the staging tables, which Switchyard "
        f"creates without it; make {d.name} a plain column of the spec's type for the load, or leave {where} out "
        f"of this run"),
    "fulltext": lambda where, d: (
        f"{where} has a full-text index: ALTER TABLE SWITCH refuses such a table (Msg 4918); drop the full-text "
        f"index for the load (DROP FULLTEXT INDEX ON {where}) and create it again after, or leave {where} out of "
        f"this run"),
    "read_only": lambda where, d: (
        f"{where}: filegroup {d.name}, which holds partitions of it (or of its indexes or LOB data), is read-only: "
        f"TRUNCATE TABLE and SWITCH refuse a partition there (Msg 4707, 4978-4981), and the commit replaces and "
        f"retires partitions with them; ALTER DATABASE ... MODIFY FILEGROUP {_bracketed(d.name)} READ_WRITE for "
        f"the load, or leave {where} out of this run"),
    "table_option": lambda where, d: (
        f"{where}: its table option '{d.name}' is ON, and Switchyard creates the staging tables without it: SWITCH "
        f"needs the option the same on both tables (Msg 4993, 4954, 4984); turn it off for the load (EXEC "
        f"sp_tableoption N'{where}', '{d.name}', 'OFF') and on after, or leave {where} out of this run"),
    "check_nfr": lambda where, d: (
        f"{where}: CHECK constraint {d.name} {d.detail} is NOT FOR REPLICATION, and the copy each staging table "
        f"carries is not: SWITCH needs the two the same (Msg 4975); create it again without NOT FOR REPLICATION "
        f"for the load, or leave {where} out of this run"),
    "rule": lambda where, d: (
        f"{where}: rule {d.detail} is bound to its column {d.name}: SWITCH is not allowed on a table with a rule "
        f"(Msg 4964); unbind it (EXEC sp_unbindrule N'{where}.{d.name}') and replace it with a CHECK constraint, "
        f"or leave {where} out of this run"),
    "permission ALTER ANY DATASPACE": lambda where, d: (
        f"{where}: the run's database user {d.detail} lacks ALTER ANY DATASPACE, which the commit's SPLIT and "
        f"MERGE of the partition function and NEXT USED of its scheme need; GRANT ALTER ANY DATASPACE TO "
        f"{_bracketed(d.detail)}, or run as a user of db_ddladmin"),
}
