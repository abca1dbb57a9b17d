"""Validation of a loaded staging table with Great Expectations, before it is switched in.

Expectations: the row count equals the manifest's, the key is never null, and the key's
smallest and largest values lie inside the stream's key range (which lies inside its
partition). GX pushes each of them down to the server as an aggregate query: on
PostgreSQL that is four scans of the staging table (count, null sample, min/max, null count).

What the load already guarantees is not scanned again. The staging table's key column is
NOT NULL and its range CHECK constraint is validated (it was created on the empty table,
so COPY checked it on every row). On PostgreSQL the validation asks the server's planner
whether those constraints refute "key IS NULL OR key < key_min OR key > key_max"
(constraint exclusion uses only validated constraints and NOT NULL): when they do, no row
can break the three key expectations, and they are reported as proven, with the proof.
Great Expectations still checks the row count, which no constraint proves. When the proof
does not hold (a constraint missing, NOT VALID or wider than the stream's range, or another
engine), every expectation goes through GX as before. `trust_constraints=False` (or
SWITCHYARD_VALIDATION=full) always runs all four through GX.

Great Expectations is imported here, inside the function that runs it, never at module
level: every Airflow task process imports the DAG file and what it imports, and GX costs
seconds to import.
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Check:
    expectation: str
    column: str | None
    expected: Any
    observed: Any
    success: bool


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

    def to_dict(self) -> dict:
        return asdict(self)


class ValidationFailed(RuntimeError):
    def __init__(self, message: str, outcome: ValidationOutcome):
        super().__init__(message)
        self.outcome = outcome


def _plain(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _expected_of(config: dict) -> Any:
    if "value" in config:
        return _plain(config["value"])
    if "min_value" in config or "max_value" in config:
        return [_plain(config.get("min_value")), _plain(config.get("max_value"))]
    return None


def trust_constraints_default() -> bool:
    return os.environ.get("SWITCHYARD_VALIDATION", "").strip().lower() != "full"


def key_range_proof(url: str, schema: str, table: str, key: str, key_min: Any, key_max: Any) -> str | None:
    """On PostgreSQL: the plan that proves, from the table's validated constraints, that no row has
    a null key or a key outside [key_min, key_max]; None when the constraints do not prove it."""
    if not (isinstance(key_min, int) and isinstance(key_max, int)) or isinstance(key_min, bool):
        return None
    from sqlalchemy import create_engine, text
    engine = create_engine(url)
    try:
        quote = engine.dialect.identifier_preparer.quote
        k = quote(key)
        # Integers formatted by int(): nothing from outside reaches the SQL text.
        # "k >= max + 1" rather than "k > max": the planner compares constants, it does not
        # know that no integer lies between max and max + 1 (the CHECK says "k < max + 1").
        sql = (f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {quote(schema)}.{quote(table)} "
               f"WHERE {k} IS NULL OR {k} < {int(key_min)} OR {k} >= {int(key_max) + 1}")
        with engine.connect() as conn:
            # 'on' applies constraint exclusion to plain tables too (the default covers only
            # partitions); the planner uses NOT NULL and validated CHECK constraints only.
            conn.execute(text("SET LOCAL constraint_exclusion = on"))
            plan = conn.execute(text(sql)).scalar_one()
            conn.rollback()
    finally:
        engine.dispose()
    node = (plan[0] if isinstance(plan, list) else plan)["Plan"]
    # Refuted: the planner replaced the scan by a Result that returns nothing, without children.
    if node.get("Node Type") == "Result" and node.get("One-Time Filter") == "false" and not node.get("Plans"):
        return (f"the planner refutes {key} IS NULL OR {key} outside [{key_min}, {key_max}] "
                f"from the table's NOT NULL and validated CHECK constraints")
    return None


def validate_table(url: str, schema: str, table: str, key: str, expected_rows: int,
                   key_min: int, key_max: int, engine: str = "postgres",
                   trust_constraints: bool | None = None) -> ValidationOutcome:
    started = time.monotonic()
    preloaded = "great_expectations.expectations" in sys.modules
    import great_expectations as gx
    import great_expectations.expectations as gxe
    imported = time.monotonic()

    if trust_constraints is None:
        trust_constraints = trust_constraints_default()
    proof = None
    if trust_constraints and engine == "postgres":
        proof = key_range_proof(url, schema, table, key, key_min, key_max)

    from great_expectations.data_context.types.base import ProgressBarsConfig
    context = gx.get_context(mode="ephemeral")
    # Progress bars are for notebooks; in a task log they are noise.
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    if engine == "mssql":
        source = context.data_sources.add_sql_server(name="target", connection_string=url)
    else:
        source = context.data_sources.add_postgres(name="target", connection_string=url)
    asset = source.add_table_asset(name=table, table_name=table, schema_name=schema)
    batch = asset.add_batch_definition_whole_table("whole table").get_batch()
    expectations = [gxe.ExpectTableRowCountToEqual(value=expected_rows)]
    if proof is None:
        expectations += [
            gxe.ExpectColumnValuesToNotBeNull(column=key),
            gxe.ExpectColumnMinToBeBetween(column=key, min_value=key_min, max_value=key_max),
            gxe.ExpectColumnMaxToBeBetween(column=key, min_value=key_min, max_value=key_max),
        ]
    suite = gx.ExpectationSuite(name=f"{schema}.{table}", expectations=expectations)
    result = batch.validate(suite, result_format="BASIC")
    checks = []
    for r in result.results:
        config = r.expectation_config
        kwargs = dict(config.kwargs)
        observed = _plain(r.result.get("observed_value"))
        if observed is None and "unexpected_count" in r.result:
            observed = {"null_count": r.result.get("unexpected_count")}
        checks.append(Check(expectation=config.type, column=kwargs.get("column"),
                            expected=_expected_of(kwargs) if config.type != "expect_column_values_to_not_be_null"
                            else "no nulls",
                            observed=observed, success=bool(r.success)))
    if proof is not None:
        checks += [
            Check("expect_column_values_to_not_be_null", key, "no nulls", {"proven": proof}, True),
            Check("expect_column_min_to_be_between", key, [key_min, key_max], {"proven": proof}, True),
            Check("expect_column_max_to_be_between", key, [key_min, key_max], {"proven": proof}, True),
        ]
    return ValidationOutcome(success=bool(result.success), checks=checks,
                             seconds=time.monotonic() - started, import_seconds=imported - started,
                             gx_preloaded=preloaded)


def describe_failures(outcome: ValidationOutcome, where: str) -> str:
    lines = [f"validation failed for {where}:"]
    for c in outcome.failures():
        target = f" on {c.column}" if c.column else ""
        lines.append(f"  {c.expectation}{target}: expected {c.expected}, observed {c.observed}")
    return "\n".join(lines)
