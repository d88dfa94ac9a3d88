"""``workshop sweep``: grid expansion, refusal of np above the core count, resumption, the
manifest, reading a sweep back. A stand-in launcher writes run directories in the documented
layout (docs/run-directory.md; tests/conftest.py's fake_launcher) so these tests run without
Horovod; real sweeps are recorded in data/sweeps/ and checked in test_sweep_recorded.py."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from workshop.launch import sweep
from workshop.readers.sweep import read_sweep


def test_expand_grid_names_only_varying_keys(sweep_base):
    points = sweep.expand_grid(sweep_base, {"np": [1, 2], "batch_size": [32, 64], "lr": [0.01]})
    assert [name for name, _ in points] == [
        "p00-np1-bs32",
        "p01-np1-bs64",
        "p02-np2-bs32",
        "p03-np2-bs64",
    ]
    assert points[3][1].np == 2 and points[3][1].batch_size == 64 and points[3][1].lr == 0.01
    with pytest.raises(ValueError, match="'batchsize' is not a run option"):
        sweep.expand_grid(sweep_base, {"batchsize": [1]})
    with pytest.raises(ValueError, match="no values for 'np'"):
        sweep.expand_grid(sweep_base, {"np": []})


def test_np_above_core_count_is_refused_unless_oversubscribed(sweep_base):
    too_many = (os.cpu_count() or 1) + 1
    points = sweep.expand_grid(sweep_base, {"np": [1, too_many]})
    with pytest.raises(ValueError) as info:
        sweep.check_points(points)
    message = str(info.value)
    assert f"1 of 2 sweep points cannot run on this machine ({os.cpu_count()} cores)" in message
    assert f"np={too_many}" in message and "--oversubscribe" in message
    over = dataclasses.replace(sweep_base, oversubscribe=True)
    sweep.check_points(sweep.expand_grid(over, {"np": [1, too_many]}))


def test_refused_sweep_starts_nothing(tmp_path, sweep_base, fake_launcher):
    fake = fake_launcher()
    with pytest.raises(ValueError):
        sweep.run_sweep(
            tmp_path / "s", sweep_base, {"np": [1, 1000]}, launcher=fake, progress=False
        )
    assert fake.calls == [] and not (tmp_path / "s").exists()


def test_sweep_runs_resumes_and_records_failures(tmp_path, sweep_base, fake_launcher):
    grid = {"np": [1, 2], "batch_size": [32, 64]}
    fake = fake_launcher(fail={"p03-np2-bs64"})
    summary = sweep.run_sweep(
        tmp_path, sweep_base, grid, launcher=fake, progress=False, command=["workshop", "sweep"]
    )
    assert fake.calls == ["p00-np1-bs32", "p01-np1-bs64", "p02-np2-bs32", "p03-np2-bs64"]
    assert summary["status"].tolist() == ["ok", "ok", "ok", "failed"]
    assert summary.loc[0, "final_test_accuracy"] == pytest.approx(0.75)
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    assert manifest["host"]["cores"] == os.cpu_count()
    assert manifest["grid"] == grid and manifest["command"] == ["workshop", "sweep"]
    assert manifest["points"][3]["error"].startswith("run failed")
    assert manifest["points"][3]["run"] == "p03-np2-bs64"

    # Same sweep again: the three finished points are skipped, the failed one retried in a
    # new directory; the failed directory stays.
    again = fake_launcher()
    summary = sweep.run_sweep(tmp_path, sweep_base, grid, launcher=again, progress=False)
    assert again.calls == ["p03-np2-bs64"]
    assert summary["status"].tolist() == ["skipped", "skipped", "skipped", "ok"]
    assert summary.loc[3, "run"] == "p03-np2-bs64-2"
    assert (tmp_path / "p03-np2-bs64" / "run.json").exists()
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    assert len(manifest["history"]) == 1

    # A changed configuration is not "finished".
    changed = dataclasses.replace(sweep_base, epochs=2)
    third = fake_launcher()
    sweep.run_sweep(tmp_path, changed, {"np": [1]}, launcher=third, progress=False)
    assert third.calls == ["p00"]


def test_read_sweep_tables(tmp_path, sweep_base, fake_launcher):
    fake = fake_launcher(fail={"p01-np2"})
    sweep.run_sweep(tmp_path, sweep_base, {"np": [1, 2]}, launcher=fake, progress=False)
    runs, epochs = read_sweep(tmp_path)
    assert runs["run"].tolist() == ["p00-np1"]  # failed runs are left out
    row = runs.iloc[0]
    assert row["global_batch_size"] == 32 and row["steps"] == 10
    assert row["first_epoch_s"] == pytest.approx(1.32)
    assert row["steady_epoch_time_s"] == pytest.approx(0.32)
    assert row["final_test_accuracy"] == pytest.approx(0.75)
    assert row["best_test_accuracy"] == pytest.approx(0.75)
    assert len(epochs) == 3 and set(epochs["run"]) == {"p00-np1"}
    all_runs, _ = read_sweep(tmp_path, only_ok=False)
    assert sorted(all_runs["status"]) == ["failed", "ok"]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="empty: no run directories"):
        read_sweep(empty)
    with pytest.raises(FileNotFoundError, match="missing: no such directory"):
        read_sweep(tmp_path / "missing")


def test_second_grid_adds_points_to_the_same_folder(tmp_path, sweep_base, fake_launcher):
    sweep.run_sweep(
        tmp_path, sweep_base, {"batch_size": [16]}, launcher=fake_launcher(), progress=False
    )
    large = dataclasses.replace(sweep_base, batch_size=256)
    fake = fake_launcher()
    summary = sweep.run_sweep(
        tmp_path, large, {"lr_scaling": ["none", "linear"]}, launcher=fake, progress=False
    )
    assert fake.calls == ["p00-lrnone", "p01-lrlinear"] and len(summary) == 2
    manifest = json.loads((tmp_path / "sweep.json").read_text())
    assert [p["name"] for p in manifest["points"]] == ["p00", "p00-lrnone", "p01-lrlinear"]
    assert all(0 <= p["loadavg_1min"] for p in manifest["points"])
    runs, _ = read_sweep(tmp_path)
    assert sorted(runs["batch_size"]) == [16, 256, 256]
    again = fake_launcher()
    sweep.run_sweep(tmp_path, sweep_base, {"batch_size": [16]}, launcher=again, progress=False)
    assert again.calls == []


def test_grid_labels_come_from_the_run_options_and_controllers_can_be_swept(sweep_base):
    # One declaration: each grid option carries its label; no sweep-side list of its own (it
    # had a 'controller' entry while --controller took one value only).
    from workshop.cli import build_parser
    from workshop.runspec import CLI_OPTIONS as RUN_OPTIONS
    from workshop.runspec import GRID_FIELDS

    assert set(sweep.GRID_LABELS) == set(GRID_FIELDS)
    assert all(isinstance(o.label, str) for o in RUN_OPTIONS if o.grid)
    assert all(o.label is None for o in RUN_OPTIONS if not o.grid)
    points = sweep.expand_grid(sweep_base, {"controller": ["gloo", "mpi"], "np": [2]})
    assert [(name, c.controller) for name, c in points] == [("p00-gloo", "gloo"),
                                                             ("p01-mpi", "mpi")]  # fmt: skip
    args = build_parser().parse_args(["sweep", "--controller", "gloo", "mpi", "--out", "x"])
    assert args.controller == ["gloo", "mpi"]
