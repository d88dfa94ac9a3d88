"""The facade over a run (issue 47, item 1): ``import workshop as wk; run = wk.open_run(...)``
opens every recorded run of ``data/`` by path or by name, reads each file on first use and
once, and the analyses that take a run's frame take the Run too."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

import workshop as wk
from workshop.frames import takes_run
from workshop.paths import data_dir
from workshop.readers.runs import RECORDING_FOLDERS, Run

RUN_DIRS = sorted(
    {p.parent for top in RECORDING_FOLDERS for p in (data_dir() / top).rglob("run.json")}
)


def test_every_recorded_run_opens_with_its_record_metrics_and_steps():
    assert len(RUN_DIRS) > 300  # every recording, not a sample of them
    for path in RUN_DIRS:
        run = wk.open_run(path)
        assert run.record["name"] and run.np >= 1, path
        assert isinstance(run.metrics, pd.DataFrame) and isinstance(run.steps, pd.DataFrame)
        # a recording's metrics are its metrics.jsonl, line for line
        lines = (path / "metrics.jsonl").read_text().splitlines() if (
            path / "metrics.jsonl"
        ).exists() else []  # fmt: skip
        assert len(run.metrics) == len([x for x in lines if x.strip()]), path


def test_a_recording_opens_by_its_name_and_by_its_path_under_data():
    by_name = wk.open_run("torch-mnist-gloo-np2")
    assert by_name.path == data_dir() / "runs" / "torch-mnist-gloo-np2"
    by_path = wk.open_run("sweeps/scaling-mnist")
    assert by_path.path == data_dir() / "sweeps" / "scaling-mnist"
    assert wk.open_run(by_name) is by_name  # a Run is returned as it is
    assert "np=2" in repr(by_name) and "timeline" in repr(by_name)


def test_each_file_is_read_once_on_first_use(monkeypatch):
    import workshop.readers.timeline as timeline_reader

    calls = []
    real = timeline_reader.read_timeline
    monkeypatch.setattr(timeline_reader, "read_timeline", lambda p: calls.append(p) or real(p))
    run = wk.open_run("torch-mnist-gloo-np2")
    assert calls == []  # opening reads nothing
    first, second = run.timeline, run.timeline
    assert first is second and len(calls) == 1


def test_an_mpi_profile_and_the_ranks_logs_are_part_of_the_run():
    run = wk.open_run("torch-mnist-mpi-ops-np2")
    assert run.timeline is None
    assert sorted(run.profile.files["rank"]) == [0, 1]
    assert sorted(run.logs) == [0, 1] and "Epoch" in run.logs[0]
    assert {end["state"] for end in run.ends.values()} == {"ok"}


def test_a_wrong_name_is_named_with_the_closest_recordings():
    with pytest.raises(FileNotFoundError) as error:
        wk.open_run("torch-mnist-glo-np2")
    assert "closest: torch-mnist-gloo-np2" in str(error.value)
    with pytest.raises(FileNotFoundError, match="not a run directory"):
        Run(data_dir() / "no-such-folder")


def test_a_name_in_two_recording_folders_is_refused(tmp_path, monkeypatch):
    for top in ("runs", "timelines"):
        (tmp_path / top / "same").mkdir(parents=True)
        (tmp_path / top / "same" / "run.json").write_text(json.dumps({"name": "same"}))
    monkeypatch.setenv("WORKSHOP_DATA", str(tmp_path))
    with pytest.raises(ValueError, match=r"several recordings .* runs/same, timelines/same"):
        wk.open_run("same")


def test_a_function_of_a_runs_frame_takes_the_run():
    @takes_run
    def rows(spans: pd.DataFrame) -> int:
        return len(spans)

    run = wk.open_run("torch-mnist-gloo-np2")
    assert rows(run) == rows(run.timeline.spans) == len(run.timeline.spans) > 0
    # near miss: a run without a timeline is named, not passed on as None
    with pytest.raises(
        ValueError, match="rows: the run .*torch-mnist-mpi-ops-np2 has no timeline"
    ):
        rows(wk.open_run("torch-mnist-mpi-ops-np2"))


def test_the_facade_loads_sub_packages_on_first_use():
    code = (
        "import sys, workshop as wk\n"
        "print('workshop.plot' in sys.modules, 'matplotlib' in sys.modules)\n"
        "wk.plot\n"
        "print('workshop.plot' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "True"]
    with pytest.raises(AttributeError, match="no attribute 'plots'"):
        wk.plots  # noqa: B018


def test_the_lessons_analyses_take_a_run_as_they_take_its_frames():
    from workshop.analysis import diagnose, mpi
    from workshop.analysis import timeline as tla
    from workshop.findings.timeline import timeline_findings

    run = wk.open_run("torch-mnist-gloo-np2")
    assert tla.timeline_summary(run) == tla.timeline_summary(run.timeline)
    pd.testing.assert_frame_equal(tla.breakdown(run), tla.breakdown(run.timeline.spans))
    assert timeline_findings(run) == timeline_findings(run.timeline)
    assert diagnose.compute_ratio(run) == diagnose.compute_ratio(run.steps)
    profiled = wk.open_run("torch-mnist-mpi-ops-np2")
    assert mpi.profile_summary(profiled) == mpi.profile_summary(profiled.profile)
    # a DataFrame that is not a run's still goes through unchanged, and is checked as before
    with pytest.raises(ValueError, match="the spans DataFrame has no column"):
        tla.breakdown(pd.DataFrame({"x": [1]}))
