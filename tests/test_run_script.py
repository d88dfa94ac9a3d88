"""A diagnosis of any Horovod run (issue 49, items 1, 4 and 5): ``workshop run --script FILE --
ARGS`` runs a learner's own script on 2 real ranks under ``workshop check``'s observation and
writes a run directory ``workshop diagnose`` reads like its own runs; a failed script is named
by the rank that started the failure, in ``workshop run``, ``check`` and ``diagnose`` alike;
a folder with only a timeline and the ranks' logs (a cluster job) is diagnosed on what it has.
The scripts are not the workshop's: tests/check_scripts/ (they do not import workshop)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from workshop.paths import data_path
from workshop.readers.runs import open_run

SCRIPTS = Path(__file__).parent / "check_scripts"


def _workshop(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "workshop.cli", *args], capture_output=True, text=True,
        timeout=300, cwd=cwd, env=os.environ,
    )  # fmt: skip


@pytest.fixture(scope="module")
def correct_run(tmp_path_factory, cpu_lock_module, horovod_ready):
    """One real 2-rank run of a correct learner's script (16 steps a rank), shared. (Every live
    test here holds the module's lock: a test-scoped lock taken while the module's is held would
    wait for itself.)"""
    out = tmp_path_factory.mktemp("script-run")
    result = _workshop(
        "run", "-np", "2", "--no-timeline", "--out", str(out), "--name", "correct",
        "--script", str(SCRIPTS / "torch_correct.py"),
        "--", "--steps", "8", "--epochs", "2", "--checkpoint", str(out / "model.pt"),
        cwd=out,
    )  # fmt: skip
    return result, out / "correct"


@pytest.mark.live
def test_live_a_learners_script_runs_into_a_run_directory(correct_run):
    result, run_dir = correct_run
    assert result.returncode == 0, result.stderr
    assert "script torch_correct.py" in result.stdout and "16 optimizer steps" in result.stdout
    run = open_run(run_dir)
    assert run.config["script"].endswith("torch_correct.py")
    assert run.config["script_args"].startswith("--steps 8 --epochs 2 --checkpoint ")
    assert run.record["status"] == "ok" and run.record["data"]["mode"] == "script"
    # each rank's steps, as the workshop's own programs write them: 16 optimizer steps
    steps = run.steps
    assert steps.groupby("rank").size().to_dict() == {0: 16, 1: 16}
    assert (steps["step_s"] > 0).all() and (steps["compute_s"] >= 0).all()
    # PyTorch's DistributedOptimizer waits inside the step: the wait is measured
    assert steps["wait_s"].notna().all() and (steps["wait_s"] >= 0).all()
    assert steps["cpu_wait_s"].notna().all()  # Linux's run-queue wait, per step
    # the rank's output split from the launcher's, the script's checkpoint written by it
    assert "epoch 2 step 16" in run.logs[0] and sorted(run.logs) == [0, 1]
    assert (run_dir.parent / "model.pt").exists()
    assert (run_dir / "observations" / "rank.1.json").exists()


@pytest.mark.live
def test_live_a_scripts_run_is_diagnosed_and_against_itself_healthy(correct_run):
    _, run_dir = correct_run
    result = json.loads(_workshop("diagnose", str(run_dir), "--json").stdout)
    costs = {c["problem"]: c for c in result["costs"]}
    assert costs["straggler"]["measured"] and not math.isnan(costs["straggler"]["saving_ms"])
    # a script's learning rate lives in the script: not measured, so never "healthy" here
    assert "lr_not_scaled" in result["not_measured"] and not result["healthy"]
    # near miss of a false finding: against itself as the baseline (its own savings are the
    # noise), no saving lies beyond it
    itself = json.loads(
        _workshop("diagnose", str(run_dir), "--baseline", str(run_dir), "--json").stdout
    )
    assert itself["findings"] == [], itself["findings"]
    assert itself["calibration"] == f"the baseline run {run_dir}"


@pytest.mark.live
def test_live_a_rank_that_fails_in_its_input_pipeline_is_named_first(
    tmp_path, cpu_lock_module, horovod_ready
):
    script = SCRIPTS / "torch_input_crash.py"
    result = _workshop(
        "run", "-np", "2", "--no-timeline", "--out", str(tmp_path), "--name", "input",
        "--script", str(script), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 1
    said = [line.strip() for line in result.stderr.splitlines() if line.startswith("  ")]
    # the cause first: rank 1's own error at its line; rank 0 only its consequence
    assert said[0].startswith("rank 1 crashed at line 28 of torch_input_crash.py"), said
    assert "RuntimeError: record 80 is truncated: cannot decode it" in said[0]
    assert any(line.startswith("rank 0 ") and "consequence of rank 1's end" in line
               for line in said), said  # fmt: skip
    run = open_run(tmp_path / "input")
    assert (run.record["failure"]["cause"]["rank"], run.record["failure"]["cause"]["how"]) == (
        1,
        "raised",
    )
    top = json.loads(_workshop("diagnose", str(run.path), "--json").stdout)["findings"][0]
    assert (top["problem"], top["rank"]) == ("crashed", 1), top
    assert top["evidence"].startswith(
        "run.json: status failed: rank 1 crashed at line 28 of torch_input_crash.py"
    )
    # workshop check says it the same way, cause first
    checked = _workshop("check", str(script), "--no-base-run", cwd=tmp_path)
    assert checked.returncode == 2
    assert "the script crashed on rank 1: RuntimeError: record 80 is truncated" in checked.stdout


@pytest.mark.live
def test_live_a_rank_that_stops_early_on_its_own_is_named_with_its_line(
    tmp_path, cpu_lock_module, horovod_ready
):
    checked = _workshop("check", str(SCRIPTS / "torch_early_stop.py"), "--no-base-run")
    assert checked.returncode == 2, checked.stdout
    first = next(line for line in checked.stdout.splitlines() if "left first" in line)
    assert first.startswith(
        "rank 1 left first: its script ended at line 28 of torch_early_stop.py (sys.exit(0)) "
        "after 8 steps"
    ), checked.stdout
    assert "then rank 0 failed" in first and "the consequence, not the cause" in first


def test_a_cluster_jobs_folder_is_diagnosed_on_what_it_has(tmp_path):
    # what a horovodrun job on a cluster leaves: the timeline and the ranks' logs, no run.json,
    # no step files
    recorded = data_path("runs", "torch-mnist-gloo-np2")
    job = tmp_path / "job"
    (job / "logs").mkdir(parents=True)
    shutil.copy(recorded / "timeline.json", job / "timeline.json")
    for name in ("launcher.log", "rank.0.log", "rank.1.log"):
        shutil.copy(recorded / "logs" / name, job / "logs" / name)
    result = _workshop("diagnose", str(job), "--json")
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    measured = {c["problem"] for c in found["costs"] if c["measured"]}
    assert "fusion_off" in measured  # from the timeline
    assert "straggler" not in measured  # not without per-rank step times: said instead
    assert not found["healthy"] and "straggler" in found["not_measured"]
    assert any(n.startswith("The timeline alone (no per-rank step times)") for n in found["notes"])
    assert any(n.startswith("No run.json") for n in found["notes"])
    assert open_run(job).np == 2 and open_run(job).record == {}


def test_script_arguments_without_a_script_are_refused(tmp_path):
    result = _workshop("run", "--out", str(tmp_path), "--", "--steps", "3")
    assert result.returncode == 2 and "without --script FILE" in result.stderr
    missing = _workshop("run", "--out", str(tmp_path), "--script", str(tmp_path / "no.py"))
    assert missing.returncode == 2 and "no.py: no such file" in missing.stderr
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_open_run_of_a_bare_name_prefers_the_recording_to_a_folder_of_runs_here(
    tmp_path, monkeypatch
):
    # issue 59: wk.open_run("runs") opened the runs/ folder that workshop run writes in the
    # working folder, not data/runs/; a run directory here, or "./runs", still means here
    from workshop.readers.runs import open_run

    (tmp_path / "runs" / "20261206-x").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert open_run("runs").path == data_path("runs")
    assert open_run("./runs").path == Path("./runs")
    (tmp_path / "runs" / "run.json").write_text("{}")
    assert open_run("runs").path == Path("runs")
