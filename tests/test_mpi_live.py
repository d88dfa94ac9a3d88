"""A real Horovod run with the MPI controller and our profiler preloaded (live: starts ranks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workshop.analysis import mpi as analysis
from workshop.readers.mpitrace import read_mpitrace

pytestmark = pytest.mark.live


def test_mpi_profile_of_a_horovod_run(tmp_path, cpu_lock, horovod_ready):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "workshop.cli",
            "run",
            "--controller",
            "mpi",
            "--mpi-profile",
            "-np",
            "2",
            "--epochs",
            "1",
            "--steps-per-epoch",
            "15",
            "--no-timeline",
            "--out",
            str(tmp_path),
            "--name",
            "run",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "SAVE_ALL_TASKS"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = tmp_path / "run"
    prof = read_mpitrace(run_dir)
    assert prof.ranks == [0, 1] and prof.ntasks == 2 and prof.warnings == []
    names = sorted(p.name for p in run_dir.glob("mpi_profile.*"))
    assert names == [f"mpi_profile.{prof.jobid}.0", f"mpi_profile.{prof.jobid}.1"]
    sig = analysis.negotiation_signature(prof)
    assert sig["small_calls"] > sig["large_calls"] > 0
    run = json.loads((run_dir / "run.json").read_text())
    assert run["config"]["mpi_profile"] is True and run["status"] == "ok"
    # the same numbers through the CLI
    cli = subprocess.run(
        [sys.executable, "-m", "workshop.cli", "mpi", "summary", str(run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    data = json.loads(cli.stdout)
    assert data["small_allreduce_calls"] == sig["small_calls"] and data["ranks"] == [0, 1]
