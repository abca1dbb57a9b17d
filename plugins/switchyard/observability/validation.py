"""Validation of a loaded staging table with Great Expectations, before it is switched in.

The checks, each reported with what it expected, what it observed and what it cost:

* **row count**: equals the manifest's (the load's COPY count, below; else GX
  `expect_table_row_count_to_equal`);
* **key range**: the key is never null and its smallest and largest values lie inside the
  stream's key range, which lies inside its partition (integer, date or timestamp keys);
* **not null**: every column the spec declares NOT NULL (every column not `nullable: true`);
* **unique**: the spec's `unique` columns (the key alone, or a compound key such as
  lineitem's (l_orderkey, l_linenumber)), where declared;
* **declared expectations**: what the spec lists under a table's `expectations`, any Great
  Expectations expectation type by its snake_case name with its kwargs.

What the load already guarantees is not scanned again. The staging table's columns are NOT
NULL where the spec says so, and its range CHECK constraint is validated (it was created on
the empty table, so COPY checked it on every row). On PostgreSQL the validation asks the
server's planner whether those constraints refute "key IS NULL OR key < key_min OR key >=
key_max + one unit", and "column IS NULL" for each NOT NULL column (constraint exclusion uses
only validated constraints and NOT NULL): when they do, no row can break the expectation,
and it is reported as proven, with the proof. On another engine a column the catalog shows
NOT NULL is proven the same way (SQL Server enforces NOT NULL on every row, bulk loads
included). The row count, which no constraint proves, is the load's own on PostgreSQL: its
transaction emptied the table (TRUNCATE gives it new storage), copied the file and read the
table's file node, so while the table is still that file node it holds exactly the rows the
COPY reported; otherwise GX counts them. When a proof does not hold (a constraint missing,
NOT VALID or wider than the stream's range, another file node), the expectation goes
through GX. `trust_load=False` (SWITCHYARD_VALIDATION=constraints) counts the rows through
GX; `trust_constraints=False` (SWITCHYARD_VALIDATION=full) runs all of them through GX.

Uniqueness rides on the index the target keeps: the adapter builds the unique index on the
staging table (`TargetAdapter.prove_unique`, PostgreSQL: the index ATTACH then adopts) and
passes its result here; where an engine has no such step, GX's
`expect_column_values_to_be_unique` / `expect_compound_columns_to_be_unique` run instead.
At scale 1 the index cost 0.25 s on orders and 1.3-2.4 s on lineitem, GX's expectations
1.0 s and 14-23 s, a GROUP BY query 0.3 s and 1.8-5.3 s (docs/validation.md).

Each expectation runs through GX on its own, so that its cost is its own (`Check.seconds`).

Great Expectations is imported here, inside the functions that run it, never at module
level: every Airflow task process imports the DAG file and what it imports, and GX costs
seconds to import.
"""
from __future__ import annotations

import functools
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Iterable, Sequence

from switchyard.core.keys import KeyValue
from switchyard.core.spec import Expectation, SpecError

# Kwargs that would carry SQL text into the server: refused in declared expectations.
_SQL_KWARGS = ("query", "row_condition", "condition_parser")


@dataclass
class Check:
    expectation: str
    column: str | None
    expected: Any
    observed: Any
    success: bool
    # Wall seconds of the check's own work on the server (its GX run, its index build, its
    # proof); None for a check proven by the same query as the one before it.
    seconds: float | None = None
    # row_count, key_range, not_null, unique (the spec's unique columns) or declared (the
    # spec's expectations, `origin` names the entry: "<file>: tables.t.expectations[0]").
    category: str = "row_count"
    origin: str | None = None


@dataclass
class ValidationOutcome:
    success: bool
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0
    import_seconds: float = 0.0
    # GX already imported when validation started (the scheduler's preload reached this process).
    gx_preloaded: bool = False

    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.success]

    def cost(self) -> dict[str, float]:
        """Seconds per kind of check (row_count, key_range, not_null, unique, declared)."""
        out: dict[str, float] = {}
        for c in self.checks:
            out[c.category] = round(out.get(c.category, 0.0) + (c.seconds or 0.0), 4)
        return out

    def to_dict(self) -> dict:
        return {**asdict(self), "cost": self.cost()}


class ValidationFailed(RuntimeError):
    def __init__(self, message: str, outcome: ValidationOutcome):
        super().__init__(message)
        self.outcome = outcome


def _plain(value: Any) -> Any:
    """A value for JSON (XCom, the run report): whole floats as ints, dates and timestamps in
    ISO-8601, decimals as floats; lists and dicts element by element."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, datetime):
        return value.isoformat(sep="T", timespec="microseconds" if value.microsecond else "seconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return _plain(float(value))
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (int, float, str)):
        return value
    return str(value)


def _expected_of(config: dict) -> Any:
    if "value" in config:
        return _plain(config["value"])
    if "min_value" in config or "max_value" in config:
        return [_plain(config.get("min_value")), _plain(config.get("max_value"))]
    return None


def trust_constraints_default() -> bool:
    from switchyard.settings import get
    return get().validation != "full"


def trust_load_default() -> bool:
    from switchyard.settings import get
    return get().validation == "load"


# --- declared expectations ----------------------------------------------------------------------
def declared_expectations(expectations: Iterable[Expectation], where: str) -> list[tuple[str, Any]]:
    """(spec entry, GX expectation) for each declared expectation: its type's GX 1.x class from
    `great_expectations.expectations`, built with its kwargs. A type GX does not know, kwargs
    that do not fit it, or kwargs that would carry SQL text raise SpecError naming the spec
    entry (`where`: "<spec file>: tables.<table>.expectations"). Imports GX, where there is
    an expectation to build."""
    expectations = list(expectations)
    if not expectations:
        return []
    import great_expectations.expectations as gxe  # noqa: F401  (registers the core expectations)
    from great_expectations.exceptions import ExpectationNotFoundError
    from great_expectations.expectations.registry import get_expectation_impl
    out = []
    for i, e in enumerate(expectations):
        at = f"{where}[{i}]"
        if "query" in e.type or any(any(word in k for word in _SQL_KWARGS) for k in e.kwargs):
            raise SpecError(f"{at}: {e.type} with {', '.join(sorted(e.kwargs))}: expectations that carry SQL "
                            f"text (queries, row conditions) are not accepted in a spec")
        try:
            cls = get_expectation_impl(e.type)
        except ExpectationNotFoundError:
            raise SpecError(f"{at}.type: {e.type!r} is not a Great Expectations expectation type (see "
                            f"https://greatexpectations.io/expectations/ for the names)") from None
        try:
            out.append((at, cls(**dict(e.kwargs))))
        except Exception as exc:  # pydantic's ValidationError, or the class's own check
            errors = getattr(exc, "errors", None)
            said = ("; ".join(f"{'.'.join(map(str, err.get('loc', ())))}: {err.get('msg')}" for err in errors())
                    if callable(errors) else str(exc))
            raise SpecError(f"{at}.kwargs: do not fit {e.type}: {said}") from None
    return out


def check_spec_expectations(spec: Any, tables: Iterable[str] | None = None) -> int:
    """Build every declared expectation of the spec's (chosen) tables, so that a bad entry fails
    before anything is loaded; returns how many there are. Imports GX only if there are any."""
    count = 0
    for t in spec.tables:
        if tables is not None and t.name not in tables:
            continue
        if t.expectations:
            count += len(declared_expectations(t.expectations, f"{spec.source}: tables.{t.name}.expectations"))
    return count


# --- the validation -----------------------------------------------------------------------------
def _observed(expectation_type: str, result: Any) -> Any:
    r = result.result or {}
    if getattr(result, "exception_info", None) and (result.exception_info or {}).get("raised_exception"):
        return {"error": str(result.exception_info.get("exception_message"))[:500]}
    if "observed_value" in r and r["observed_value"] is not None:
        return _plain(r["observed_value"])
    if expectation_type == "expect_column_values_to_not_be_null":
        return {"null_count": r.get("unexpected_count")}
    if "unexpected_count" in r:
        out = {"unexpected_count": r.get("unexpected_count"),
               "unexpected_percent": round(float(r.get("unexpected_percent") or 0.0), 4)}
        examples = r.get("partial_unexpected_list")
        if examples:
            out["examples"] = _plain(examples[:5])
        return out
    return _plain(r.get("observed_value"))


def _column_of(kwargs: dict) -> str | None:
    if "column" in kwargs:
        return kwargs["column"]
    if "column_list" in kwargs:
        return ", ".join(kwargs["column_list"])
    if "column_A" in kwargs:
        return f"{kwargs['column_A']}, {kwargs.get('column_B')}"
    return None


def _declared_expected(kwargs: dict) -> Any:
    shown = {k: _plain(v) for k, v in kwargs.items()
             if k not in ("column", "column_list", "column_A", "column_B") and v is not None}
    return shown or None


def _through_gx(url: str, datasource: str, schema: str, table: str, runs: Sequence[tuple[Any, str, str | None]],
                declared_kwargs: dict[str, dict]) -> list[Check]:
    """Each (expectation, category, spec entry) run through Great Expectations on the whole
    table, one at a time so that each check's cost is its own. `datasource`: the kind of GX's
    fluent data source for the target's engine (TargetAdapter.gx_datasource)."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig
    context = gx.get_context(mode="ephemeral")
    # Progress bars are for notebooks; in a task log they are noise.
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    source = getattr(context.data_sources, f"add_{datasource}")(name="target", connection_string=url)
    asset = source.add_table_asset(name=table, table_name=table, schema_name=schema)
    batch = asset.add_batch_definition_whole_table("whole table").get_batch()
    checks = []
    for expectation, category, origin in runs:
        t0 = time.monotonic()
        r = batch.validate(expectation, result_format="BASIC")
        seconds = round(time.monotonic() - t0, 4)
        config = r.expectation_config
        kwargs = dict(config.kwargs)
        if category == "declared":
            expected = _declared_expected(declared_kwargs[origin])
        elif config.type == "expect_column_values_to_not_be_null":
            expected = "no nulls"
        elif category == "unique":
            expected = "no duplicates"
        else:
            expected = _expected_of(kwargs)
        checks.append(Check(expectation=config.type, column=_column_of(kwargs), expected=expected,
                            observed=_observed(config.type, r), success=bool(r.success), seconds=seconds,
                            category=category, origin=origin))
    return checks


def validate_table(url: str, schema: str, table: str, key: str | None, expected_rows: int,
                   key_min: KeyValue | None, key_max: KeyValue | None, engine: str | None = None,
                   trust_constraints: bool | None = None, *, key_type: str | None = None,
                   not_null: Sequence[str] = (), unique: Sequence[str] = (),
                   unique_result: dict | None = None, expectations: Sequence[Expectation] = (),
                   expectations_where: str = "spec: expectations", loaded: dict | None = None,
                   trust_load: bool | None = None, adapter: Any = None) -> ValidationOutcome:
    """Validate one staging table; see the module's docstring.

    key_min / key_max: the stream's key range as Python values (int, datetime.date,
    datetime.datetime); None (or `key` None) for a table loaded whole without a key range (an
    unpartitioned lookup table keyed by text, or without a key): no key range check, and its
    key, if any, is checked NOT NULL as any other column; key_type: the key's SQL type (a timestamp(p) key's unit). not_null:
    the columns declared NOT NULL besides the key. unique: the spec's unique columns;
    unique_result: what the adapter's `prove_unique` found (None: GX checks uniqueness).
    expectations: the table's declared expectations, `expectations_where` their spec entry.
    loaded: the load's result (`rows`, `staging_filenode`) where its engine names the storage
    it filled; with `trust_load` (SWITCHYARD_VALIDATION=load) its COPY's count is the table's
    while the table is still that storage, else GX counts the rows. `engine`: the target's
    engine (its adapter supplies the proofs and Great Expectations' data source; None: the
    first registered engine). `adapter`: the step's adapter, which answers the proofs on the
    step's own session (`proofs_in_session`); without it they connect with `url`."""
    from switchyard.targets import ENGINES, adapter_class
    target = adapter_class(engine or ENGINES[0])
    started = time.monotonic()
    if trust_constraints is None:
        trust_constraints = trust_constraints_default()
    if trust_load is None:
        trust_load = trust_load_default()
    declared = declared_expectations(expectations, expectations_where)
    ranged = key is not None and key_min is not None and key_max is not None
    if ranged:
        not_null = [c for c in not_null if c != key]
    loaded = loaded or {}
    loaded_filenode = (loaded.get("staging_filenode") if trust_constraints and trust_load
                       and loaded.get("rows") is not None else None)

    staged = Staged(expected_rows=expected_rows, key=key, key_min=key_min, key_max=key_max, ranged=ranged,
                    not_null=list(not_null), unique=list(unique), unique_result=unique_result, declared=declared,
                    loaded=loaded)
    if trust_constraints:
        t0 = time.monotonic()
        prove = adapter.proofs_in_session if adapter is not None else functools.partial(target.constraint_proofs, url)
        staged.proof, staged.proofs, staged.same_storage = prove(
            schema, table, key if ranged else None, key_min, key_max, not_null, key_type, loaded_filenode)
        staged.loaded_filenode = loaded_filenode
        # One connection answers them all: its cost is split evenly between the kinds it proved.
        staged.share = round((time.monotonic() - t0) / ((staged.proof is not None) + bool(staged.proofs)
                                                         + staged.same_storage or 1), 4)
    checks = [c for kind in CHECKS for c in kind.proven(staged)]

    # Great Expectations only for what nothing above proved: where everything was, the task
    # neither imports it nor opens its connection and catalog queries.
    preloaded = "great_expectations.expectations" in sys.modules
    import_seconds = 0.0
    if any(kind.needs_gx(staged) for kind in CHECKS):
        t0 = time.monotonic()
        import great_expectations.expectations as gxe
        import_seconds = time.monotonic() - t0
        # (expectation, category, spec entry); in the order they are reported.
        runs = [run for kind in CHECKS for run in kind.gx(staged, gxe)]
        declared_kwargs = {f"{expectations_where}[{i}]": dict(e.kwargs) for i, e in enumerate(expectations)}
        checks += _through_gx(url, target.gx_datasource, schema, table, runs, declared_kwargs)
    checks += [c for kind in CHECKS for c in kind.after(staged)]

    return ValidationOutcome(success=all(c.success for c in checks), checks=checks,
                             seconds=time.monotonic() - started, import_seconds=import_seconds,
                             gx_preloaded=preloaded)


# --- the checks ----------------------------------------------------------------------------
@dataclass
class Staged:
    """One staging table under validation, as its checks read it: what the spec and the plan
    expect, and what the target's proofs (`constraint_proofs`, one query for all) settled."""
    expected_rows: int
    key: str | None
    key_min: KeyValue | None
    key_max: KeyValue | None
    # A key range to check (the key and both bounds known).
    ranged: bool
    not_null: list[str]
    unique: list[str]
    unique_result: dict | None
    declared: list[tuple[str, Any]]
    loaded: dict
    loaded_filenode: int | None = None
    # The target's proof of the key's range and non-nullness (None: not proven), of each NOT
    # NULL column's (column -> proof), and whether the table is still the storage the load's
    # COPY filled (its count is then the table's).
    proof: str | None = None
    proofs: dict[str, str] = field(default_factory=dict)
    same_storage: bool = False
    # Seconds of the proofs' query per kind of check it proved.
    share: float = 0.0


class CheckKind:
    """One kind of check on a staging table: what the target's proofs settle without reading
    rows (`proven`), what Great Expectations checks where they do not (`needs_gx`, `gx`: its
    expectations, each with its category and spec entry), and what the target found before
    validation (`after`: a unique index's build). A new check is one subclass, added to CHECKS;
    the checks are reported in CHECKS' order: proven, then Great Expectations', then after."""
    category = ""

    def proven(self, t: Staged) -> list[Check]:
        return []

    def needs_gx(self, t: Staged) -> bool:
        return False

    def gx(self, t: Staged, gxe: Any) -> list[tuple[Any, str, str | None]]:
        return []

    def after(self, t: Staged) -> list[Check]:
        return []


class RowCount(CheckKind):
    """The manifest's row count: the load's COPY count while the table is still its storage."""
    category = "row_count"

    def proven(self, t: Staged) -> list[Check]:
        if not t.same_storage:
            return []
        rows = int(t.loaded["rows"])
        how = (f"the load's COPY reported {rows} rows into the staging table, which the TRUNCATE in the "
               f"same transaction had emptied; the table is still the storage that transaction left "
               f"(file node {t.loaded_filenode})")
        # A count that disagrees is reported as GX reports one: the number, which the failure's
        # message shows against the expected one.
        return [Check("expect_table_row_count_to_equal", None, t.expected_rows,
                      {"rows": rows, "proven": how} if rows == t.expected_rows else rows,
                      rows == t.expected_rows, t.share, self.category)]

    def needs_gx(self, t: Staged) -> bool:
        return not t.same_storage

    def gx(self, t: Staged, gxe: Any) -> list[tuple[Any, str, str | None]]:
        return [] if t.same_storage else [(gxe.ExpectTableRowCountToEqual(value=t.expected_rows), self.category, None)]


class KeyRange(CheckKind):
    """The key never null, its smallest and largest values inside the stream's key range."""
    category = "key_range"

    def proven(self, t: Staged) -> list[Check]:
        if t.proof is None:
            return []
        bounds = _plain([t.key_min, t.key_max])
        return [Check("expect_column_values_to_not_be_null", t.key, "no nulls", {"proven": t.proof}, True,
                      t.share, self.category),
                Check("expect_column_min_to_be_between", t.key, bounds, {"proven": t.proof}, True, None,
                      self.category),
                Check("expect_column_max_to_be_between", t.key, bounds, {"proven": t.proof}, True, None,
                      self.category)]

    def needs_gx(self, t: Staged) -> bool:
        return t.ranged and t.proof is None

    def gx(self, t: Staged, gxe: Any) -> list[tuple[Any, str, str | None]]:
        if not self.needs_gx(t):
            return []
        return [(gxe.ExpectColumnValuesToNotBeNull(column=t.key), self.category, None),
                (gxe.ExpectColumnMinToBeBetween(column=t.key, min_value=t.key_min, max_value=t.key_max),
                 self.category, None),
                (gxe.ExpectColumnMaxToBeBetween(column=t.key, min_value=t.key_min, max_value=t.key_max),
                 self.category, None)]


class NotNull(CheckKind):
    """Every column the spec declares NOT NULL (the key apart, where its range is checked)."""
    category = "not_null"

    def proven(self, t: Staged) -> list[Check]:
        return [Check("expect_column_values_to_not_be_null", c, "no nulls", {"proven": t.proofs[c]}, True,
                      t.share if i == 0 else None, self.category)
                for i, c in enumerate(c for c in t.not_null if c in t.proofs)]

    def needs_gx(self, t: Staged) -> bool:
        return any(c not in t.proofs for c in t.not_null)

    def gx(self, t: Staged, gxe: Any) -> list[tuple[Any, str, str | None]]:
        return [(gxe.ExpectColumnValuesToNotBeNull(column=c), self.category, None)
                for c in t.not_null if c not in t.proofs]


class Unique(CheckKind):
    """The spec's unique columns: by the target's unique index where it built one, else GX."""
    category = "unique"

    def needs_gx(self, t: Staged) -> bool:
        return bool(t.unique) and t.unique_result is None

    def gx(self, t: Staged, gxe: Any) -> list[tuple[Any, str, str | None]]:
        if not self.needs_gx(t):
            return []
        return [(gxe.ExpectColumnValuesToBeUnique(column=t.unique[0]) if len(t.unique) == 1
                 else gxe.ExpectCompoundColumnsToBeUnique(column_list=list(t.unique)), self.category, None)]

    def after(self, t: Staged) -> list[Check]:
        return [_unique_check(t.unique, t.unique_result)] if t.unique and t.unique_result is not None else []


class Declared(CheckKind):
    """The expectations the spec declares for the table, each reported with its spec entry."""
    category = "declared"

    def needs_gx(self, t: Staged) -> bool:
        return bool(t.declared)

    def gx(self, t: Staged, gxe: Any) -> list[tuple[Any, str, str | None]]:
        return [(e, self.category, at) for at, e in t.declared]


CHECKS: tuple[CheckKind, ...] = (RowCount(), KeyRange(), NotNull(), Unique(), Declared())


def validate_stream(adapter: Any, spec: Any, stream: Any, expected_rows: int | None = None,
                    trust_constraints: bool | None = None, loaded: dict | None = None) -> ValidationOutcome:
    """Every check of one (table, stream)'s staging table, as the validate step runs them: the
    adapter's unique index first (where the engine builds one), then `validate_table`.
    `expected_rows` defaults to the plan's; `loaded` is the load's result (its row count and
    the storage it filled, where the adapter names it). Raises SpecError for a bad declared
    expectation."""
    table = spec.table(stream.table)
    # Uniqueness rides on the target's unique index, built on the staging table here (None
    # where the engine does not: GX checks it then).
    unique_result = adapter.prove_unique(stream) if table.unique else None
    outcome = validate_table(
        adapter.sqlalchemy_url(), adapter.staging_schema, stream.staging_table, table.key,
        stream.rows if expected_rows is None else expected_rows,
        stream.typed("key_min"), stream.typed("key_max"), engine=adapter.engine,
        trust_constraints=trust_constraints, key_type=adapter.key_type(stream.table),
        not_null=[c.name for c in table.columns if not c.nullable], unique=table.unique,
        unique_result=unique_result, expectations=table.expectations,
        expectations_where=f"{spec.source}: tables.{table.name}.expectations",
        loaded=loaded if adapter.load_names_its_storage else None, adapter=adapter)
    if unique_result is not None:
        outcome.seconds += unique_result.get("seconds") or 0.0
    # The target's own unique indexes (a DBA's): a batch that breaks one fails here, before
    # its switch, as the spec's `unique` does.
    for found in adapter.prove_target_uniques(stream):
        check = _unique_check(found["columns"], found)
        outcome.checks.append(replace(check, origin=f"the target's unique index {found['index']}"))
        outcome.success = outcome.success and check.success
        outcome.seconds += found.get("seconds") or 0.0
    return outcome


def _unique_check(columns: Sequence[str], found: dict) -> Check:
    """The uniqueness check as the target's unique index reported it."""
    dup = found.get("duplicates")
    name = "expect_column_values_to_be_unique" if len(columns) == 1 else "expect_compound_columns_to_be_unique"
    if dup:
        observed: Any = {"duplicated_keys": dup.get("keys"), "extra_rows": dup.get("extra_rows"),
                         "examples": dup.get("examples"), "by": f"unique index {found.get('index')}"}
    else:
        observed = {"proven": f"unique index {found.get('index')} built on ({', '.join(columns)})"}
    return Check(name, ", ".join(columns), "no duplicates", observed, not dup, found.get("seconds"), "unique")


def describe_failures(outcome: ValidationOutcome, where: str) -> str:
    lines = [f"validation failed for {where}:"]
    for c in outcome.failures():
        target = f" on {c.column}" if c.column else ""
        origin = f" (declared in {c.origin})" if c.origin else ""
        lines.append(f"  {c.expectation}{target}{origin}: expected {c.expected}, observed {c.observed}")
    if any(c.category == "row_count" for c in outcome.failures()):
        # A group cleared after its file was fixed keeps the run's plan, made from the manifest
        # as it was: the count it expects is that one.
        lines.append("  (the rows expected are the manifest's as the run's setup.plan read it; after a fix that "
                     "changes a file's rows, write its manifest again and clear the whole run, from setup.plan)")
    return "\n".join(lines)
