"""Validation of a loaded staging table with Great Expectations, before it is switched in.

Expectations: the row count equals the manifest's, the key is never null, and the key's
smallest and largest values lie inside the stream's key range (which lies inside its
partition). GX pushes each of them down to the server as an aggregate query.

Great Expectations is imported here, inside the function that runs it, never at module
level: every Airflow task process imports the DAG file and what it imports, and GX costs
seconds to import.
"""
from __future__ import annotations

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


def validate_table(url: str, schema: str, table: str, key: str, expected_rows: int,
                   key_min: int, key_max: int, engine: str = "postgres") -> ValidationOutcome:
    started = time.monotonic()
    import great_expectations as gx
    import great_expectations.expectations as gxe
    imported = time.monotonic()

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
    suite = gx.ExpectationSuite(name=f"{schema}.{table}", expectations=[
        gxe.ExpectTableRowCountToEqual(value=expected_rows),
        gxe.ExpectColumnValuesToNotBeNull(column=key),
        gxe.ExpectColumnMinToBeBetween(column=key, min_value=key_min, max_value=key_max),
        gxe.ExpectColumnMaxToBeBetween(column=key, min_value=key_min, max_value=key_max),
    ])
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
    return ValidationOutcome(success=bool(result.success), checks=checks,
                             seconds=time.monotonic() - started, import_seconds=imported - started)


def describe_failures(outcome: ValidationOutcome, where: str) -> str:
    lines = [f"validation failed for {where}:"]
    for c in outcome.failures():
        target = f" on {c.column}" if c.column else ""
        lines.append(f"  {c.expectation}{target}: expected {c.expected}, observed {c.observed}")
    return "\n".join(lines)
