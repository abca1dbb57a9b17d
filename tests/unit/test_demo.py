"""What `make demo` prints at its end: every duration says what it measures."""
from __future__ import annotations

from switchyard_dev.demo import durations, print_durations


def test_the_four_durations_are_named_and_explained(capsys):
    stats = {"makespan_seconds": 15.2, "steps_seconds": 21.0}
    run = {"start_date": "2026-11-24T10:00:00.000000Z", "end_date": "2026-11-24T10:00:24.500000Z"}
    rows = durations(stats, run, 56.0)
    assert [(name, value) for name, value, _ in rows] == [
        ("loads", 15.2), ("steps", 21.0), ("Airflow run", 24.5), ("whole demo", 56.0)]
    assert all(what for _, _, what in rows)
    print_durations(stats, run, 56.0)
    out = capsys.readouterr().out
    lines = {line.split()[0] if not line.strip().startswith("Airflow") else "Airflow": line for line in out.splitlines()
             if line.strip()}
    assert "24.5 s  the DAG run's start to its end, as the Airflow UI shows it" in lines["Airflow"]
    assert "15.2 s  first load start to last load end: the report's makespan" in lines["loads"]


def test_a_run_without_timings_prints_dashes():
    rows = durations(None, {}, 3.0)
    assert [value for _, value, _ in rows] == [None, None, None, 3.0]
