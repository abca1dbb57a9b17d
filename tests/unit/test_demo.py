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


def _refused_stats(**more):
    return {"tables": {"tracks": {"rows": 0, "partitions": 0, "seconds": None, "mb_per_s": None,
                                  "mb_per_s_per_stream": None}},
            "totals": {"rows": 0, "switched": 0, "mb_per_s": None}, "makespan_seconds": None,
            "failed_groups": ["tracks_1", "tracks_2"], **more}


def test_the_summary_says_why_a_refused_or_unpublished_run_failed(capsys, tmp_path):
    from switchyard_dev.demo import print_summary
    print_summary(_refused_stats(plan_error="AirflowFailException: pre-flight refused the batch before any load; "
                                            "nothing was changed:\n- storms.tracks: column gust ..."),
                  tmp_path / "stats.json")
    out = capsys.readouterr().out
    assert "refused before any load, nothing changed: pre-flight refused the batch before any load" in out
    assert "storms.tracks: column gust" in out and "failed groups" not in out
    print_summary(_refused_stats(publish_error="tpch.nation: its stream was not staged"), tmp_path / "stats.json")
    assert "the batch was not published, every table kept its contents: tpch.nation" in capsys.readouterr().out
    print_summary(_refused_stats(), tmp_path / "stats.json")
    assert "failed groups: tracks_1, tracks_2" in capsys.readouterr().out
    # A failed load says why, as its task raised it; a group kept out with it is named apart.
    why = 'TargetError: tracks/tracks.1.csv: line 2: missing data for column "gust"'
    print_summary(_refused_stats(groups=[{"group": "tracks_1", "errors": {"load": why}},
                                         {"group": "tracks_2", "errors": {}}, {"group": "stations_1"}],
                                 held_back_groups=["stations_1"]), tmp_path / "stats.json")
    out = capsys.readouterr().out
    assert f"  tracks_1.load: {why}\n" in out and "tracks_2." not in out
    assert "held back (validated and staged, kept out with them): stations_1" in out
