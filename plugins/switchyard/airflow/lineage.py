"""What each step tells a lineage tool, through Airflow's OpenLineage provider.

The operators' `get_openlineage_facets_on_complete` and `_on_failure` (operators.py) call
`facets`; only the provider calls those methods, and only when it is installed and configured,
so without it nothing here is imported and a task pays nothing. The provider sends the events
(START, COMPLETE, FAIL with the error message) through its own transport.

Datasets are named as OpenLineage's naming spec names them (https://openlineage.io/docs/spec/naming):
a stream file is namespace `file`, name its absolute path; a table is `<engine>://host:port`,
`database.schema.table` (the engine's adapter says its scheme and default port). The lineage
of a batch reads file -> staging table (load) -> target table (switch, and the batch's publish).
A target table also carries a symlink to the Airflow Asset Switchyard publishes for it
(`switchyard://<conn_id>/<schema>/<table>`), so the two names meet in a lineage tool.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import attr
from airflow.providers.openlineage.extractors.base import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import (
    RunFacet,
    data_quality_assertions_dataset,
    data_quality_metrics_input_dataset,
    output_statistics_output_dataset,
    schema_dataset,
    symlinks_dataset,
)

from switchyard.core.batch import MANIFEST
from switchyard.core.planner import StreamPlan


@attr.define
class SwitchyardBatchRunFacet(RunFacet):
    """Which batch a step belongs to: its name, its manifest's SHA-256 and the streams the step
    carried (group ids, `<table>.<stream>`)."""
    batch: str
    manifestDigest: str | None = None  # noqa: N815 - OpenLineage's field names are camelCase
    streams: list[str] = attr.field(factory=list)

    @staticmethod
    def _get_schema() -> str:
        # A run facet of the spec's base shape; its fields are documented in docs/lineage.md.
        return "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunFacet"


class Names:
    """Dataset names for one target connection, in OpenLineage's naming."""

    def __init__(self, conn_id: str):
        from switchyard.airflow.connections import connection_fields
        self.conn_id = conn_id
        self.engine, self.fields = connection_fields(conn_id)
        self.namespace = self.engine.lineage_namespace(self.fields)

    def table(self, schema: str, table: str) -> tuple[str, str]:
        return self.namespace, self.engine.lineage_name(self.fields, schema, table)

    def asset(self, schema: str, table: str) -> symlinks_dataset.Identifier:
        """The table's Airflow Asset (dag_factory.table_asset), as a symlink of its dataset."""
        return symlinks_dataset.Identifier(namespace=f"switchyard://{self.conn_id}", name=f"{schema}/{table}",
                                           type="TABLE")


def facets(op: Any, step: str, done: dict | None) -> OperatorLineage:
    """The datasets and run facets of `op`'s step (`step`: prepare, load, validate, switch,
    steps, plan, publish_batch, publish), from what it left in `done` (the run's plan, its
    stream, its result), as far as it got."""
    done = done or {}
    names = Names(op.conn_id)
    spec = op.load_spec()
    return _BUILDERS[step](names, spec, op, done)


# --- each step -------------------------------------------------------------------------------
def _prepare(names: Names, spec, op, done: dict) -> OperatorLineage:
    s, plan = done.get("stream"), done.get("plan")
    if s is None or plan is None:
        return OperatorLineage()
    return OperatorLineage(outputs=[_staging(names, spec, plan, s)], run_facets=_batch(plan, [s.group_id]))


def _load(names: Names, spec, op, done: dict) -> OperatorLineage:
    s, plan, result = done.get("stream"), done.get("plan"), done.get("result") or {}
    if s is None or plan is None:
        return OperatorLineage()
    statistics = {}
    if "rows" in result:
        statistics["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=result["rows"], size=result.get("bytes"))
    return OperatorLineage(inputs=[_file(result.get("file") or str(Path(plan["batch_dir"]) / s.file))],
                           outputs=[_staging(names, spec, plan, s, output_facets=statistics)],
                           run_facets=_batch(plan, [s.group_id]))


def _validate(names: Names, spec, op, done: dict) -> OperatorLineage:
    s, plan, result = done.get("stream"), done.get("plan"), done.get("result") or {}
    if s is None or plan is None:
        return OperatorLineage()
    namespace, name = names.table(plan["staging_schema"], s.staging_table)
    return OperatorLineage(inputs=[InputDataset(namespace=namespace, name=name, inputFacets=_quality(result))],
                           run_facets=_batch(plan, [s.group_id]))


def _switch(names: Names, spec, op, done: dict) -> OperatorLineage:
    s, plan = done.get("stream"), done.get("plan")
    if s is None or plan is None:
        return OperatorLineage()
    namespace, name = names.table(plan["staging_schema"], s.staging_table)
    return OperatorLineage(inputs=[InputDataset(namespace=namespace, name=name)],
                           outputs=[_target(names, spec, plan["schema"], s.table)],
                           run_facets=_batch(plan, [s.group_id]))


def _steps(names: Names, spec, op, done: dict) -> OperatorLineage:
    """A group's four steps in one task (`tasks: single`): the file in, the staging table checked,
    the target table out."""
    results = done.get("result") or {}
    parts = [_load(names, spec, op, {**done, "result": results.get("load")}),
             _validate(names, spec, op, {**done, "result": results.get("validate")}),
             _switch(names, spec, op, done)]
    whole = OperatorLineage()
    for part in parts:
        whole = whole.merge(part)
    # The staging table validate checked is the one switch reads: one input, with the checks.
    inputs: dict[tuple[str, str], InputDataset] = {}
    for d in whole.inputs:
        seen = inputs.get((d.namespace, d.name))
        inputs[(d.namespace, d.name)] = d if seen is None else InputDataset(
            namespace=d.namespace, name=d.name, facets={**(seen.facets or {}), **(d.facets or {})},
            inputFacets={**(seen.inputFacets or {}), **(d.inputFacets or {})})
    whole.inputs = list(inputs.values())
    return whole


def _plan(names: Names, spec, op, done: dict) -> OperatorLineage:
    plan = done.get("plan")
    if plan is None:
        return OperatorLineage()
    return OperatorLineage(inputs=[_file(str(Path(plan["batch_dir"]) / MANIFEST))],
                           run_facets=_batch(plan, _groups(plan)))


def _publish_batch(names: Names, spec, op, done: dict) -> OperatorLineage:
    plan = done.get("plan")
    if plan is None:
        return OperatorLineage()
    return OperatorLineage(outputs=[_target(names, spec, plan["schema"], t) for t in plan.get("tables") or []],
                           run_facets=_batch(plan, _groups(plan)))


def _publish(names: Names, spec, op, done: dict) -> OperatorLineage:
    return OperatorLineage(outputs=[_target(names, spec, op.schema, op.table)])


_BUILDERS = {"prepare": _prepare, "load": _load, "validate": _validate, "switch": _switch, "steps": _steps,
             "plan": _plan, "publish_batch": _publish_batch, "publish": _publish}


# --- datasets and facets ---------------------------------------------------------------------
def _file(path: str) -> InputDataset:
    from openlineage.client.naming.dataset import LocalFileSystem
    naming = LocalFileSystem(path=str(Path(path).absolute()))
    return InputDataset(namespace=naming.get_namespace(), name=naming.get_name())


def _schema(names: Names, spec, table: str) -> schema_dataset.SchemaDatasetFacet:
    """The spec's columns in the engine's types."""
    adapter = names.engine
    t = spec.table(table)
    return schema_dataset.SchemaDatasetFacet(fields=[
        schema_dataset.SchemaDatasetFacetFields(name=c.name, type=_type(adapter, c)) for c in t.columns])


def _type(engine: Any, column: Any) -> str | None:
    try:
        return column.sql_type(engine.dialect)
    except Exception:  # noqa: BLE001 - a type the spec gives no engine: lineage names none
        return None


def _staging(names: Names, spec, plan: dict, s: StreamPlan, output_facets: dict | None = None) -> OutputDataset:
    namespace, name = names.table(plan["staging_schema"], s.staging_table)
    return OutputDataset(namespace=namespace, name=name, facets={"schema": _schema(names, spec, s.table)},
                         outputFacets=output_facets or {})


def _target(names: Names, spec, schema: str, table: str) -> OutputDataset:
    namespace, name = names.table(schema, table)
    return OutputDataset(namespace=namespace, name=name, facets={
        "schema": _schema(names, spec, table),
        "symlinks": symlinks_dataset.SymlinksDatasetFacet(identifiers=[names.asset(schema, table)])})


def _quality(result: dict) -> dict:
    """Validation's checks as OpenLineage's data quality facets: every check as an assertion, the
    row count and the null counts it measured (or proved: none) as metrics."""
    checks = result.get("checks") or []
    assertions = [data_quality_assertions_dataset.Assertion(
        assertion=c["expectation"], success=bool(c["success"]), column=c.get("column"), name=c.get("category"),
        expected=_text(c.get("expected")), actual=_text(c.get("observed"))) for c in checks]
    rows = next((_count(c.get("observed"), "rows") for c in checks if c.get("category") == "row_count"), None)
    nulls = {c["column"]: data_quality_metrics_input_dataset.ColumnMetrics(nullCount=n) for c in checks
             if c.get("category") == "not_null" and c.get("column") and c.get("success")
             and (n := _count(c.get("observed"), "null_count", proven=0)) is not None}
    out: dict[str, Any] = {}
    if assertions:
        out["dataQualityAssertions"] = data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
            assertions=assertions)
    if rows is not None or nulls:
        out["dataQualityMetrics"] = data_quality_metrics_input_dataset.DataQualityMetricsInputDatasetFacet(
            rowCount=rows, columnMetrics=nulls)
    return out


def _count(observed: Any, key: str, proven: int | None = None) -> int | None:
    """A count a check observed: the value itself, or its `key` (validation's forms: 25,
    {"rows": 25, "proven": ...}, {"null_count": 0}); `proven` where a proof stands for it."""
    if isinstance(observed, int) and not isinstance(observed, bool):
        return observed
    if isinstance(observed, dict):
        if isinstance(observed.get(key), int):
            return observed[key]
        if "proven" in observed:
            return proven
    return None


def _text(value: Any) -> str | None:
    """A check's expected or observed value as the assertion's text: a count as its number."""
    if value is None:
        return None
    if isinstance(value, dict):
        count = _count(value, "rows")
        if count is None:
            count = _count(value, "null_count")
        return str(count) if count is not None else json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _groups(plan: dict) -> list[str]:
    tables = set(plan.get("tables") or [])
    return sorted(g for g, raw in (plan.get("groups") or {}).items() if raw.get("table") in tables)


def _batch(plan: dict, streams: list[str]) -> dict[str, RunFacet]:
    return {"switchyard_batch": SwitchyardBatchRunFacet(batch=plan.get("batch") or "",
                                                         manifestDigest=_digest(plan), streams=streams)}


def _digest(plan: dict) -> str | None:
    """The batch's manifest's SHA-256, where this host sees the batch (the planning host does)."""
    path = Path(plan.get("batch_dir") or "") / MANIFEST
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
