"""Several extracts in one Airflow: a DAG file per extract, each built from its own settings file
(`dag_from_settings_file`), beside the home's settings file, which describes another DAG.

Each DAG's tasks read their own file for what they use as they run: the batch a run's date names
(SWITCHYARD_BATCH_FORMAT) and, in the pre-flight, how the batches a table holds read as dates. A
task that read the home's file instead would wait for another folder, or put a replace table back
behind a newer batch without a word.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest
import yaml

from helpers import dag_env
from switchyard import settings
from test_own_extract import SPEC, file_rows, produce, spec_file, table_rows

DAG_SETTINGS = [s.variable for s in settings.SETTINGS if s.section == settings.FILE_SECTION]


@pytest.fixture
def two_schemas(pg_uri, schema):
    yield f"{schema}_a", f"{schema}_b"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for name in (f"{schema}_a", f"{schema}_b"):
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}_staging" CASCADE')


def own_dag(folder: Path, name: str, **values: str) -> Path:
    """A DAG file and its settings file, as a user keeps them in the DAGs folder."""
    (folder / f"{name}.env").write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    path = folder / f"{name}.py"
    path.write_text("from pathlib import Path\n\nfrom switchyard.airflow.dag_factory import dag_from_settings_file\n\n"
                    f"dag = dag_from_settings_file(Path(__file__).with_name({name + '.env'!r}))\n")
    return path


def dags_test(pg_uri, data_root, tmp_path, dag_id: str, logical_date: str):
    """`airflow dags test` of one DAG of the DAGs folder (`tmp_path / "dags"`, with the built-in
    DAG's file beside the user's), in an environment that names none of the DAG's settings and
    whose home settings file describes the built-in DAG (another batch name, schema and spec)."""
    import warm_airflow
    from switchyard_dev.local import migrate
    env = dag_env(pg_uri, data_root, "unused", 2, tmp_path / "runs")
    for variable in DAG_SETTINGS:
        env.pop(variable, None)
    home = tmp_path / "home-switchyard.env"
    home.write_text("SWITCHYARD_DAG_ID=switchyard_tpch\nSWITCHYARD_SCHEMA=elsewhere\nSWITCHYARD_BATCH_FORMAT=%Y-%m-%d\n")
    env["SWITCHYARD_SETTINGS_FILE"] = str(home)
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(tmp_path / "dags")
    migrate(env)
    return warm_airflow.run(["dags", "test", dag_id, logical_date], env, timeout=900)


def test_two_dags_of_their_own_name_load_and_check_their_own_batches(pg_uri, data_root, tmp_path, two_schemas):
    a_schema, b_schema = two_schemas
    dags = tmp_path / "dags"
    dags.mkdir()
    shutil.copy(settings.PROJECT / "dags" / "switchyard_tpch.py", dags)
    spec = spec_file(tmp_path)
    a_root, b_root = data_root / f"a-{tmp_path.name}", data_root / f"b-{tmp_path.name}"
    for root in (a_root, b_root):
        root.mkdir()
        (root / "spec.yaml").write_text(yaml.safe_dump(SPEC, sort_keys=False))
    # A run waiting for a batch the files do not hold fails soon, not in 6 h.
    common = {"SWITCHYARD_SPEC": spec, "SWITCHYARD_STREAMS": "2", "SWITCHYARD_BATCH_WAIT_SECONDS": "20"}
    own_dag(dags, "trips_a", SWITCHYARD_DAG_ID="trips_a", SWITCHYARD_SCHEMA=a_schema,
                SWITCHYARD_BATCH_FORMAT=f"{a_root.name}/%Y-%m", **common)
    own_dag(dags, "trips_b", SWITCHYARD_DAG_ID="trips_b", SWITCHYARD_SCHEMA=b_schema,
                SWITCHYARD_BATCH_FORMAT=f"{b_root.name}/%Y-%m-%d", **common)
    produce(a_root / "2026-01", 1)
    produce(a_root / "2026-02", 2, stations=9)
    produce(b_root / "2026-03-01", 3, stations=5)
    try:
        first = dags_test(pg_uri, data_root, tmp_path, "trips_a", "2026-02-10")
        assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
        other = dags_test(pg_uri, data_root, tmp_path, "trips_b", "2026-03-01")
        assert other.returncode == 0, (other.stdout + other.stderr)[-4000:]
        for table in SPEC["tables"]:
            assert table_rows(pg_uri, a_schema, table) == file_rows(a_root / "2026-02", table), table
            assert table_rows(pg_uri, b_schema, table) == file_rows(b_root / "2026-03-01", table), table
        assert table_rows(pg_uri, "elsewhere", "trips") is None
        # A's January, after its February: the pre-flight reads A's batch names as dates, so its
        # replace tables are not put back behind the newer batch they hold.
        older = dags_test(pg_uri, data_root, tmp_path, "trips_a", "2026-01-10")
        assert older.returncode != 0
        assert f"holds batch {a_root.name}/2026-02, newer than this batch {a_root.name}/2026-01" in older.stdout + older.stderr
        for table in ("stations", "payment_types"):
            assert table_rows(pg_uri, a_schema, table) == file_rows(a_root / "2026-02", table), table
    finally:
        shutil.rmtree(a_root, ignore_errors=True)
        shutil.rmtree(b_root, ignore_errors=True)


def test_a_dag_of_its_own_names_its_settings_file_absolutely_with_its_id_spec_and_schema(tmp_path):
    from switchyard.airflow.dag_factory import dag_from_settings_file
    with pytest.raises(settings.SettingsError, match="absolute path"):
        dag_from_settings_file("trips.env")
    with pytest.raises(settings.SettingsError, match="is not there"):
        dag_from_settings_file(tmp_path / "missing.env")
    partial = tmp_path / "partial.env"
    partial.write_text("SWITCHYARD_DAG_ID=trips_c\nSWITCHYARD_SPEC=shop\n")
    with pytest.raises(settings.SettingsError, match="lacks SWITCHYARD_SCHEMA"):
        dag_from_settings_file(partial)
