"""A real, tiny sweep through the CLI: two Horovod runs, then a resume that runs nothing."""

from __future__ import annotations

import json

import pytest

from workshop.cli import main
from workshop.readers.sweep import read_sweep


@pytest.mark.live
def test_tiny_sweep_runs_and_resumes(tmp_path, capsys, cpu_lock, horovod_ready):
    out = tmp_path / "sweep"
    argv = [
        "sweep",
        "--np",
        "1",
        "2",
        "--epochs",
        "1",
        "--steps-per-epoch",
        "3",
        "--quiet",
        "--data",
        "subset",
        "--threads-per-rank",
        "1",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "2 ran, 0 already done, 0 failed (this machine has" in text
    runs, epochs = read_sweep(out)
    assert sorted(runs["np"]) == [1, 2] and (runs["steps"] == 3).all()
    assert len(epochs) == 2
    assert main(argv) == 0
    assert "0 ran, 2 already done" in capsys.readouterr().out
    manifest = json.loads((out / "sweep.json").read_text())
    assert [p["status"] for p in manifest["points"]] == ["skipped", "skipped"]
