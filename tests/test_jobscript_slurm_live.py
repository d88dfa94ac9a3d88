"""The Slurm job script on a site whose MpiDefault is none (the emulated cluster's Slurm started
with --mpi-default none): it checks that srun offers PMIx and asks for it (srun --mpi=pmix), so
the run succeeds where a plain srun starts each rank alone (tests/test_cluster_slurm.py's
test_srun_without_pmi_is_explained: the near miss). Root only, like that module."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from processes import processes_with

pytestmark = pytest.mark.live


def _cluster_slurm_module():
    """tests/test_cluster_slurm.py (its helpers: up_slurm, submit, workshop), loaded by path."""
    path = Path(__file__).with_name("test_cluster_slurm.py")
    spec = importlib.util.spec_from_file_location("_cluster_slurm_helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_job_script_runs_on_a_slurm_whose_mpi_default_is_none(cpu_lock, horovod_ready):
    helpers = _cluster_slurm_module()
    state = helpers.up_slurm("none")
    try:
        work = Path(state["slurm"]["work"])
        script = work / "pmix-2x1.sh"
        made = helpers.workshop(
            "jobscript", "--system", "slurm", "--nodes", "2", "--gpus-per-node", "0",
            "--ranks-per-node", "1", "--python", sys.executable, "--data", "subset",
            "--epochs", "1", "--steps-per-epoch", "5", "--no-timeline",
            "--out", str(work / "runs"), "--name", "pmix-2x1", "-o", str(script), "--force",
        )  # fmt: skip
        assert made.returncode == 0, made.stdout + made.stderr
        result, out = helpers.submit(state, script)
        assert result.returncode == 0, result.stdout + result.stderr + out
        run = json.loads((work / "runs" / "pmix-2x1" / "run.json").read_text())
        assert run["status"] == "ok", out
        assert run["launch_command"][:2] == ["srun", "--mpi=pmix"]
    finally:
        down = helpers.workshop("cluster", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert processes_with(state["state_dir"]) == []
