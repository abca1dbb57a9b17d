"""When a spec and the table it loads into differ: every difference at once, what it means for
this run, the statement that brings the table in line, and whether the table's
`on_spec_change` applies that statement (in setup, before any load) or refuses the batch.

Engine-neutral: an adapter describes the existing table (`Existing`) and what the spec's loads
need in its own terms (`Needed`: each column's type as its catalog writes it, the CHECK
constraints the loads rely on, the name of the unique index it makes from the spec's
`unique`), and writes the statements (`Statements`). Nothing here reads a catalog or runs SQL.

The policies (spec.ON_SPEC_CHANGE), from the safest:

* `fail` (the default): any difference refuses the batch before any load, naming it with
  the statement that fixes it. A table that holds months of batches changes only when
  someone decides it should, and the refusal says exactly what to run.
* `add_columns`: the spec's new nullable columns are added to the table (a catalog change
  only, the rows are not rewritten); every other difference still refuses.
* `sync`: also relaxes or tightens nullability to the spec's (tightening checks the rows),
  adds the CHECK constraints the loads rely on, drops the unique index Switchyard made from
  an earlier spec's `unique` that the spec no longer declares, and builds the declared one
  (checking the existing rows: a duplicate refuses the batch).

Never applied, whatever the policy: a retyped column (every partition is rewritten: a DBA's
decision), a new NOT NULL column of a partitioned table (the rows the table holds have no value
for it; an unpartitioned table, replaced whole by every batch, gets it nullable), dropping a
column (it may hold data). A unique index or CHECK constraint of a DBA's is never dropped: the
loads are checked against it before their switch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

from switchyard.core.spec import Table


@dataclass(frozen=True)
class ExistingColumn:
    name: str
    type: str           # as the engine's catalog writes it
    not_null: bool
    filled: bool        # a default or a generated expression fills it when the files do not


@dataclass(frozen=True)
class ExistingUnique:
    name: str
    columns: tuple[str, ...] | None     # None: an index on an expression
    ours: bool                          # the index Switchyard makes from the spec's `unique`


@dataclass(frozen=True)
class Existing:
    """The table as the catalog has it."""
    columns: tuple[ExistingColumn, ...]
    uniques: tuple[ExistingUnique, ...] = ()
    checks: frozenset[str] = frozenset()    # names of its CHECK constraints
    check_defs: Mapping[str, str] = field(default_factory=dict)   # CHECK name -> its text, as the catalog writes it


@dataclass(frozen=True)
class Needed:
    """What this spec's loads need of the table, in the engine's terms."""
    types: Mapping[str, str]            # column -> its type as the engine's catalog writes it
    checks: Mapping[str, str] = field(default_factory=dict)   # CHECK name -> the column it guards
    # CHECK name -> its text as the catalog writes it (the same server's words as check_defs).
    check_defs: Mapping[str, str] = field(default_factory=dict)
    unique_index: str | None = None     # the index the spec's `unique` makes (None: none declared)
    # CHECK name -> the column it would guard, for the table's columns the spec does not have: the
    # CHECKs the engine makes with such a column (added under an earlier spec that had it).
    former_checks: Mapping[str, str] = field(default_factory=dict)
    # The engine loads a file by position (SQL Server's BULK INSERT): a column the files do not
    # carry cannot be left to its default.
    loads_by_position: bool = False


class Statements(Protocol):
    """The engine's statements that bring the table in line (quoted names, validated types)."""
    def add_column(self, column: str, sql_type: str) -> str: ...
    def alter_type(self, column: str, sql_type: str) -> str: ...
    def set_not_null(self, column: str) -> str: ...
    def set_not_null_where_none(self, column: str) -> str: ...     # run only if no row holds NULL in it
    def drop_not_null(self, column: str) -> str: ...
    def add_check(self, name: str) -> str: ...
    def replace_check(self, name: str) -> str: ...
    def drop_index(self, name: str) -> str: ...
    def create_unique(self, name: str, columns: Sequence[str]) -> str: ...


@dataclass(frozen=True)
class Difference:
    kind: str
    text: str                       # what differs
    means: str                      # what it means for this run
    fix: str | None                 # the statement that brings the table in line
    applied_by: tuple[str, ...]     # the policies that run `fix` in setup; () none
    note_only: bool = False         # said (with its fix, if any), never refused: the run is right either way


def compare(table: Table, existing: Existing, needed: Needed, sql: Statements) -> list[Difference]:
    """Every difference between the spec's `table` and the existing one, in column order."""
    out: list[Difference] = []
    have = {c.name: c for c in existing.columns}
    for c in table.columns:
        wanted = needed.types[c.name]
        found = have.get(c.name)
        if found is None:
            if c.nullable:
                out.append(Difference(
                    "column_added", f"column {c.name} ({wanted}) is in the spec, not in the table",
                    "the files carry it and no staging table can be switched in without it",
                    sql.add_column(c.name, wanted), ("add_columns", "sync")))
            elif not table.partitioned:
                # Every batch replaces the table's rows (DELETE and INSERT in its publish): the rows
                # it holds until then are the only ones without a value. Added nullable, the column
                # takes this batch's values; validation checks the spec's NOT NULL on every batch,
                # and the table says so too once sync sets it (nullability_tightened, next run).
                out.append(Difference(
                    "column_added_not_null_replaced", f"column {c.name} ({wanted}, NOT NULL) is in the spec, not "
                    f"in the table", "the table is replaced whole by every batch: the column is added nullable "
                    "(readers see NULL in it until this batch's rows replace the table's), every batch is checked "
                    "for NULLs in it, and sync sets NOT NULL once its rows are in",
                    sql.add_column(c.name, wanted), ("add_columns", "sync")))
            else:
                out.append(Difference(
                    "column_added_not_null", f"column {c.name} ({wanted}, NOT NULL) is in the spec, not in the "
                    f"table", "the rows the table holds have no value for it, so it cannot be added NOT NULL; "
                    "declare it nullable: true in the spec (then add_columns adds it), or add it yourself with a "
                    "DEFAULT", None, ()))
            continue
        if found.type != wanted and table.partitioned and c.name == table.key:
            # Neither server alters a partitioning column's type in place (PostgreSQL: "cannot alter
            # column ... because it is part of the partition key"; SQL Server: the partition
            # function's type is the column's): a new table is the way.
            out.append(Difference(
                "column_retyped", f"column {c.name}, the partition key, is {found.type} in the table, {wanted} in "
                f"the spec", "a staging table takes the table's types, so the loads would not be what the spec "
                "says, and a partition key's type cannot be changed in place: keep the table's type in the spec, "
                "or create the table anew (rename it, let setup create it, and copy its rows)", None, ()))
        elif found.type != wanted:
            out.append(Difference(
                "column_retyped", f"column {c.name} is {found.type} in the table, {wanted} in the spec",
                "a staging table takes the table's types, so the loads would not be what the spec says; changing "
                "a type rewrites every partition, which is yours to decide", sql.alter_type(c.name, wanted), ()))
        if found.not_null and c.nullable:
            out.append(Difference(
                "nullability_relaxed", f"column {c.name} is NOT NULL in the table, nullable in the spec",
                "a row with the NULL marker in it would fail its load", sql.drop_not_null(c.name), ("sync",)))
        elif not found.not_null and not c.nullable and c.name != table.key:
            # Validation checks the spec's NOT NULL columns on every batch; the table saying so
            # too is tidier, not needed. (A nullable key is each engine's own note.) A table
            # replaced whole by every batch may hold NULLs of rows the next publish replaces (a run
            # that failed after column_added_not_null_replaced added the column): NOT NULL is set
            # there only where none is left, never refusing the batch that replaces them.
            means = ("validation checks every batch for NULLs in it; SET NOT NULL (which checks every row once) "
                     "would make the table say so too" if table.partitioned else
                     "validation checks every batch for NULLs in it, and every batch replaces the table's rows; the "
                     "table says NOT NULL too once no row holds NULL in it (a run that failed after adding the column "
                     "leaves NULLs until a batch is published)")
            marker = table.format.null_marker
            texts = ("char", "varchar", "text", "nchar", "nvarchar", "character")
            if marker is not None and any(t.lower().startswith(texts) for t in c.types.values()):
                # The marker is NULL only where the column allows it (FileFormat.null_marker): a
                # producer's missing values of a column made NOT NULL load as its text from now on.
                means += (f"; from now on a field {marker!r} (the format's null_marker) in this column is a value, "
                          f"not NULL: it loads as that text, and no check refuses it")
            fix = sql.set_not_null(c.name) if table.partitioned else sql.set_not_null_where_none(c.name)
            out.append(Difference("nullability_tightened", f"column {c.name} is nullable in the table, NOT NULL in "
                                  f"the spec", means, fix, ("sync",), note_only=True))
    for name, column in needed.checks.items():
        if name not in existing.checks and column in have:
            out.append(Difference(
                "check_missing", f"the CHECK {name} on {column} the loads rely on is missing",
                "a staging table takes the table's constraints: without it a value longer than the spec's "
                "length would load (adding it checks every row once)", sql.add_check(name), ("sync",)))
        elif (name in existing.check_defs and name in needed.check_defs
              and existing.check_defs[name] != needed.check_defs[name]):
            # A varchar(n) the spec widened or narrowed: the table's CHECK holds the old length.
            out.append(Difference(
                "check_changed", f"the CHECK {name} on {column} is {existing.check_defs[name]} in the table, "
                f"{needed.check_defs[name]} for the spec",
                "a staging table takes the table's constraints: a value the spec allows and the table's CHECK does "
                "not would fail its load, and one the table's allows and the spec does not would load from a batch "
                "too big to read before its loads (replacing it checks every row once)",
                sql.replace_check(name), ("sync",)))
    for name in sorted(existing.checks - set(needed.checks)):
        if name in needed.former_checks:
            out.append(Difference(
                "check_of_a_former_column", f"CHECK constraint {name} on column {needed.former_checks[name]} is "
                f"Switchyard's, made with the column by a spec that had it",
                "the column is not in this spec's files: the batch's rows get NULL in it, which the CHECK lets "
                "through; both stay", None, (), note_only=True))
            continue
        out.append(Difference(
            "check_of_a_dba", f"CHECK constraint {name} is not Switchyard's",
            "every staging table carries it, so the load refuses a row that breaks it, naming file and line; it is "
            "never dropped", None, (), note_only=True))
    spec_columns = set(table.column_names)
    for c in existing.columns:
        if c.name in spec_columns:
            continue
        if needed.loads_by_position and not c.filled:
            out.append(Difference(
                "column_not_in_spec", f"column {c.name} is not in the spec's files",
                "the files are loaded by position, so no load can leave it out; add it to the spec where the files "
                "carry it, or drop it from the table yourself if it holds nothing you need (Switchyard never drops "
                "a column: it may hold data)", None, ()))
        elif c.not_null and not c.filled:
            out.append(Difference(
                "column_not_in_spec", f"NOT NULL column {c.name} without a default is not in the spec's files",
                "no load can fill it; give it a default or make it nullable (Switchyard never drops a column: it "
                "may hold data)", None, ()))
        else:
            out.append(Difference(
                "column_not_in_spec", f"column {c.name} is not in the spec's files",
                f"the batch's rows get {'its default' if c.filled else 'NULL'} in it; Switchyard never drops a "
                f"column (it may hold data)", None, (), note_only=True))
    declared = tuple(table.unique)
    ours = [u for u in existing.uniques if u.ours]
    for u in ours:
        if needed.unique_index is None or u.columns != declared:
            now = f"declares unique ({', '.join(declared)})" if declared else "declares no unique columns"
            out.append(Difference(
                "unique_stale", f"unique index {u.name} on ({', '.join(u.columns or ('<expression>',))}) was made by "
                f"Switchyard from an earlier spec, which the spec no longer declares (it {now})",
                "each switch builds the table's indexes on its staging table: a batch with duplicates of those "
                "columns would fail there", sql.drop_index(u.name), ("sync",)))
    if needed.unique_index is not None and (not ours or ours[0].columns != declared):
        out.append(Difference(
            "unique_missing", f"the spec declares unique ({', '.join(declared)}); the table has no unique index "
            f"{needed.unique_index}", "the table would take duplicates the spec says never come (building it "
            "checks every row once; a duplicate refuses the batch)",
            sql.create_unique(needed.unique_index, declared), ("sync",)))
    for u in existing.uniques:
        if not u.ours:
            out.append(Difference(
                "unique_of_a_dba", f"unique index {u.name} on ({', '.join(u.columns or ('<expression>',))}) is not "
                f"Switchyard's", "each stream's staging table is checked against it before anything is "
                "published; it is never dropped", None, (), note_only=True))
    return out


def reconcile(table: Table, differences: Sequence[Difference], where: str) -> tuple[list[str], list[str], list[str]]:
    """(problems, notes, statements): what refuses the batch under the table's `on_spec_change`
    (each with its fix), what is only said, and the statements setup runs before any load."""
    policy = table.on_spec_change
    problems, notes, statements = [], [], []
    for d in differences:
        if policy in d.applied_by:
            statements.append(d.fix)
            notes.append(f"{where}: {d.text}; on_spec_change: {policy} ran: {d.fix}")
        elif d.note_only:
            fix = f" ({d.fix}{f'; on_spec_change: {d.applied_by[0]} runs it' if d.applied_by else ''})" if d.fix else ""
            notes.append(f"{where}: {d.text}: {d.means}{fix}")
        else:
            fix = f"; to bring the table in line, run: {d.fix}" if d.fix else ""
            how = (f" (or set on_spec_change: {d.applied_by[0]} for {table.name}, which runs it)"
                   if d.applied_by else "")
            problems.append(f"{where}: {d.text}: {d.means}{fix}{how}")
    return problems, notes, statements
