"""Notebooks 03, 06 and 07 analyse the runs a learner names in RUN_DIR (a sweep folder or any
folder of run directories), not the recordings; a RUN_DIR that does not exist is an error naming
it. Each replay runs the notebook's solutions in strict mode, so the exercises must also hold on
data other than the default recording."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from papermill.exceptions import PapermillExecutionError

from tools.notebook_run import execute
from workshop.paths import data_path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"

pytestmark = pytest.mark.notebook


def _replay(name: str, tmp_path: Path, run_dir: Path | str) -> dict:
    results = tmp_path / "results.json"
    execute(
        NOTEBOOKS / name,
        tmp_path / name,
        {"RESULTS_PATH": str(results), "RUN_DIR": str(run_dir), "SOLUTIONS": True},
    )
    return json.loads(results.read_text())


def test_03_reads_a_sweep_folder(tmp_path):
    got = _replay("03-launching-runs.ipynb", tmp_path, data_path("sweeps", "scaling-mnist"))
    assert got["runs"] == 4  # the sweep's four runs, not the five of data/runs
    # the example is the run with the most workers, then the most steps: np 2 at batch 32
    # (4,000 images // 2 // 32 = 62 steps per rank; at batch 128, 15)
    assert got["example_run"] == "p02-np2-bs32" and got["example_steps_per_rank"] == 62
    assert got["solutions_checked"] == ["03.1", "03.2", "03.3"]


def test_06_reads_one_sweep_for_scaling_and_the_model(tmp_path):
    sweep = data_path("sweeps", "fusion-tuning-mnist")
    got = _replay("06-scaling-experiments.ipynb", tmp_path, sweep)
    # the only runs of this sweep that differ just in np are the default-knob np 1 / np 2
    # pair, which is also the pair the model compares with: both sections see one measurement
    assert got["ours_speedup_throughput"] == pytest.approx(got["measured_speedup"])
    assert got["solutions_checked"] == ["06.1", "06.2", "06.3", "06.4"]


def test_07_reads_a_folder_of_run_directories(tmp_path):
    # a folder holding one-worker batch-size runs and two-worker LR-rule runs
    folder = tmp_path / "my-runs"
    for sweep in ("batch-size-mnist", "lr-rules-mnist"):
        for run in data_path("sweeps", sweep).iterdir():
            if (run / "run.json").exists():
                shutil.copytree(run, folder / run.name)
    got = _replay("07-batch-size-and-learning-rate.ipynb", tmp_path, folder)
    # the batch-size runs are the recording's: the plateau is the one the replay finds
    expected = NOTEBOOKS.parent / "data" / "expected" / "07-batch-size-and-learning-rate.json"
    recorded = json.loads(expected.read_text())["values"]
    assert got["steps_at_largest_batch"] == 7
    assert got["plateau_levels_off"] is recorded["plateau_levels_off"]["expected"]
    assert got["plateau_batch_size"] == recorded["plateau_batch_size"]["expected"]
    # the LR exercises follow the large-batch runs: 256 per worker, base batch 32, lr 0.01
    assert got["linear_lr_np4"] == pytest.approx(0.01 * 4 * 256 / 32)
    assert got["solutions_checked"] == ["07.1", "07.2", "07.3", "07.4"]


@pytest.mark.parametrize(
    "name",
    [
        "03-launching-runs.ipynb",
        "06-scaling-experiments.ipynb",
        "07-batch-size-and-learning-rate.ipynb",
    ],
)
def test_missing_run_dir_is_an_error_naming_it(tmp_path, name):
    missing = tmp_path / "no-such-runs"
    # the lessons open it with wk.open_run, whose error names the path and what is wrong
    with pytest.raises(
        PapermillExecutionError, match="no-such-runs.*(is not a folder|no such run)"
    ):
        _replay(name, tmp_path, missing)
