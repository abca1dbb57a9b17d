"""Lineage from every step: the real DAG run with Airflow's OpenLineage provider and its file
transport, each event read back and checked against what the run did.

Every event is also checked against OpenLineage's model as the client package ships it: the
classes generated from the spec's JSON schema (the package carries the classes, not the JSON
files), each facet against its class (its required fields there, no field the class lacks),
besides the event's own required fields.
"""
from __future__ import annotations

import json
import uuid
from datetime import datetime
from pathlib import Path
from urllib.parse import urlparse

import attr
import pytest
from openlineage.client.event_v2 import RunState
from openlineage.client.facet_v2 import (
    data_quality_assertions_dataset,
    data_quality_metrics_input_dataset,
    error_message_run,
    output_statistics_output_dataset,
    schema_dataset,
    symlinks_dataset,
)

from switchyard.core.batch import read_manifest
from switchyard.core.planner import plan_batch
from switchyard.core.spec import load_spec
from helpers import LATER_STEPS_CHECK, copy_batch, edit_manifest, run_dag

SPEC = load_spec("tpch")
TABLES = ["orders", "nation"]
# Each facet Switchyard fills, and the OpenLineage class it must match (nested classes by field).
FACETS = {
    "schema": (schema_dataset.SchemaDatasetFacet, {"fields": schema_dataset.SchemaDatasetFacetFields}),
    "symlinks": (symlinks_dataset.SymlinksDatasetFacet, {"identifiers": symlinks_dataset.Identifier}),
    "outputStatistics": (output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet, {}),
    "dataQualityAssertions": (data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet,
                              {"assertions": data_quality_assertions_dataset.Assertion}),
    "dataQualityMetrics": (data_quality_metrics_input_dataset.DataQualityMetricsInputDatasetFacet,
                           {"columnMetrics": data_quality_metrics_input_dataset.ColumnMetrics}),
    "errorMessage": (error_message_run.ErrorMessageRunFacet, {}),
}


def lineage_env(path: Path) -> dict[str, str]:
    return {"AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(path),
                                                          "append": True}),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "switchyard-tests"}


def read_events(path: Path) -> list[dict]:
    assert path.is_file(), "no lineage event was written"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def by_task(events: list[dict]) -> dict[str, dict[str, list[dict]]]:
    """Task events by task id (the job's name is `<dag_id>.<task_id>`), then by event type."""
    out: dict[str, dict[str, list[dict]]] = {}
    for e in events:
        if "airflow" not in (e["run"].get("facets") or {}) or e["job"]["name"].count(".") == 0:
            continue
        task = e["job"]["name"].split(".", 1)[1]
        out.setdefault(task, {}).setdefault(e["eventType"], []).append(e)
    return out


def check_model(event: dict) -> None:
    """The event against OpenLineage's model: its required fields and types, and each facet
    Switchyard fills against the client's class for it."""
    assert RunState(event["eventType"])
    datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00"))
    assert urlparse(event["producer"]).scheme and urlparse(event["schemaURL"]).scheme
    uuid.UUID(event["run"]["runId"])
    assert event["job"]["namespace"] and event["job"]["name"]
    facets = [event["run"].get("facets") or {}, event["job"].get("facets") or {}]
    for d in event.get("inputs", []) + event.get("outputs", []):
        assert d["namespace"] and d["name"]
        facets += [d.get("facets") or {}, d.get("inputFacets") or {}, d.get("outputFacets") or {}]
    for group in facets:
        for key, facet in group.items():
            assert urlparse(facet["_producer"]).scheme and urlparse(facet["_schemaURL"]).scheme, key
            if key in FACETS:
                cls, nested = FACETS[key]
                check_fields(cls, facet, key)
                for name, inner in nested.items():
                    values = facet.get(name) or []
                    for value in values.values() if isinstance(values, dict) else values:
                        check_fields(inner, value, f"{key}.{name}")


def check_fields(cls: type, value: dict, where: str) -> None:
    fields = {f.name.lstrip("_"): f for f in attr.fields(cls)}
    data = {k: v for k, v in value.items() if k not in ("_producer", "_schemaURL", "_deleted")}
    unknown = set(data) - set(fields)
    assert not unknown, f"{where}: fields the model lacks: {sorted(unknown)}"
    missing = [n for n, f in fields.items() if f.default is attr.NOTHING and n not in data
               and n not in ("producer", "schemaURL")]
    assert not missing, f"{where}: required fields missing: {missing}"


def test_every_step_reports_its_datasets_and_a_bad_stream_its_failure(pg_uri, data_root, tpch_batch, schema,
                                                                      tmp_path):
    name, folder = tpch_batch
    events_file = tmp_path / "lineage.jsonl"
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": TABLES}, tmp_path / "runs",
                  extra_env=lineage_env(events_file))
    assert run.returncode == 0, run.output[-4000:]
    events = read_events(events_file)
    for e in events:
        check_model(e)
    tasks = by_task(events)
    manifest = read_manifest(folder, SPEC)
    plan = plan_batch(SPEC, manifest, TABLES)
    loaded = [g for g in run.stats["groups"] if g["outcome"] != "skipped"]
    assert {g["table"] for g in loaded} == set(TABLES)

    # One START and one COMPLETE per task that ran, and nothing failed.
    ran = {f"{g['group']}.{step}" for g in loaded for step in ("prepare", "load", "validate", "switch")}
    ran |= {"setup.plan", "publish_batch"}
    assert ran <= set(tasks), sorted(ran - set(tasks))
    for task, kinds in tasks.items():
        assert len(kinds.get("START", [])) == 1 and len(kinds.get("COMPLETE", [])) == 1, (task, kinds.keys())
        assert "FAIL" not in kinds, task

    namespace = f"postgres://{urlparse(pg_uri).hostname}:{urlparse(pg_uri).port}"
    database = urlparse(pg_uri).path.lstrip("/")
    for g in loaded:
        rows = manifest.entry(g["table"], g["stream"]).rows
        staging = f"{database}.{schema}_staging.{plan.stream(g['table'], g['stream']).staging_table}"
        load = tasks[f"{g['group']}.load"]["COMPLETE"][0]
        # The stream file in, the staging table out, with the manifest's row count.
        assert [(d["namespace"], d["name"]) for d in load["inputs"]] == [("file", str(Path(g["file"]).absolute()))]
        (out,) = load["outputs"]
        assert (out["namespace"], out["name"]) == (namespace, staging)
        assert out["outputFacets"]["outputStatistics"]["rowCount"] == rows == g["rows"]
        assert out["outputFacets"]["outputStatistics"]["size"] == g["bytes"]
        assert [f["name"] for f in out["facets"]["schema"]["fields"]] == [c.name for c in SPEC.table(g["table"]).columns]
        assert load["run"]["facets"]["switchyard_batch"]["batch"] == name

        # The checks validation ran, as assertions on the staging table, and its row count.
        validate = tasks[f"{g['group']}.validate"]["COMPLETE"][0]
        (checked,) = validate["inputs"]
        assert (checked["namespace"], checked["name"]) == (namespace, staging)
        assertions = checked["inputFacets"]["dataQualityAssertions"]["assertions"]
        assert [(a["assertion"], a.get("column"), a["success"]) for a in assertions] == \
            [(c["expectation"], c["column"], c["success"]) for c in g["validation_checks"]]
        assert checked["inputFacets"]["dataQualityMetrics"]["rowCount"] == rows

        # The switch: the staging table into the target table, which names its Airflow Asset.
        switch = tasks[f"{g['group']}.switch"]["COMPLETE"][0]
        assert [d["name"] for d in switch["inputs"]] == [staging]
        (target,) = switch["outputs"]
        assert (target["namespace"], target["name"]) == (namespace, f"{database}.{schema}.{g['table']}")
        assert target["facets"]["symlinks"]["identifiers"] == [
            {"namespace": "switchyard://switchyard_target", "name": f"{schema}/{g['table']}", "type": "TABLE"}]

    # The batch's publish: every table of the run out, with the batch's identity.
    publish = tasks["publish_batch"]["COMPLETE"][0]
    assert sorted(d["name"] for d in publish["outputs"]) == sorted(f"{database}.{schema}.{t}" for t in TABLES)
    batch = publish["run"]["facets"]["switchyard_batch"]
    assert batch["batch"] == name and len(batch["manifestDigest"]) == 64
    assert sorted(batch["streams"]) == sorted(g["group"] for g in loaded)

    # A stream whose rows differ from its manifest's count: its validation fails, with the
    # failed assertion and the error message in a FAIL event.
    bad = copy_batch(folder, data_root / f"{name}-lineage-bad")
    edit_manifest(bad, "nation", 1, rows=26)
    failed_file = tmp_path / "failed.jsonl"
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": bad.name, "tables": ["nation"]}, tmp_path / "runs-bad",
                  extra_env={**lineage_env(failed_file), **LATER_STEPS_CHECK})
    assert run.returncode != 0
    events = read_events(failed_file)
    for e in events:
        check_model(e)
    (fail,) = by_task(events)["nation_1.validate"]["FAIL"]
    assert "expect_table_row_count_to_equal: expected 26, observed 25" in fail["run"]["facets"]["errorMessage"]["message"]
    (checked,) = fail["inputs"]
    rows = [a for a in checked["inputFacets"]["dataQualityAssertions"]["assertions"] if a["name"] == "row_count"]
    assert rows and rows[0]["success"] is False and rows[0]["expected"] == "26" and rows[0]["actual"] == "25"


def test_without_lineage_configured_no_step_imports_it():
    """Off by default costs nothing: a task process that imports the DAG's operators and Airflow's
    provider plugin machinery imports no OpenLineage module of ours, and the provider stays off."""
    import subprocess
    import sys
    probe = ("import sys, switchyard.airflow.operators; "
             "from airflow.providers.openlineage import conf; "
             "print(conf.is_disabled(), 'switchyard.airflow.lineage' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env={k: v for k, v in __import__('os').environ.items()
                              if not k.startswith(("AIRFLOW__OPENLINEAGE", "OPENLINEAGE"))})
    assert out.stdout.split()[-2:] == ["True", "False"], out.stdout + out.stderr


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__])


def test_a_group_in_one_task_reports_the_file_the_checks_and_the_tables(pg_uri, data_root, tpch_batch, schema,
                                                                        tmp_path):
    """`tasks: single`: the group's task reads the stream file, checks the staging table it wrote
    (one input, with validation's assertions) and puts it into the target table."""
    from test_single_task_groups import SINGLE, single_spec
    name, folder = tpch_batch
    table = SINGLE[0]
    events_file = tmp_path / "lineage.jsonl"
    run = run_dag(pg_uri, data_root, schema, 3, {"batch": name, "tables": [table]}, tmp_path / "runs",
                  extra_env=lineage_env(events_file), spec=single_spec(tmp_path))
    assert run.returncode == 0, run.output[-4000:]
    events = read_events(events_file)
    for e in events:
        check_model(e)
    (done,) = by_task(events)[f"{table}_1.steps"]["COMPLETE"]
    assert [d["namespace"] for d in done["inputs"]][0] == "file"
    (checked,) = done["inputs"][1:]
    assert checked["name"].endswith(f"{schema}_staging.{table}_1")
    assert all(a["success"] for a in checked["inputFacets"]["dataQualityAssertions"]["assertions"])
    staging, target = done["outputs"]
    rows = read_manifest(folder, SPEC).entry(table, 1).rows
    assert staging["name"] == checked["name"] and staging["outputFacets"]["outputStatistics"]["rowCount"] == rows
    assert target["name"].endswith(f".{schema}.{table}")
