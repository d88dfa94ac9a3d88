"""Golden-text tests of `workshop jobscript`: each generated script is compared exactly with
tests/golden/jobscripts/<case>.sh.

After an intended change of the generator, regenerate the golden files and review the diff:

    WORKSHOP_REGEN_GOLDEN=1 python -m pytest tests/test_jobscript_golden.py
    git diff tests/golden/jobscripts/
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workshop.cli import build_parser
from workshop.commands.jobscript import spec_from_args
from workshop.launch.jobscript import render

GOLDEN = Path(__file__).parent / "golden" / "jobscripts"
REGENERATE = os.environ.get("WORKSHOP_REGEN_GOLDEN") == "1"
COMMON = [
    "--python",
    "/home/learner/horovod-workshop/.venv/bin/python",
    "--out",
    "/home/learner/horovod-workshop/runs",
]

#: case name -> `workshop jobscript` arguments (also used by tests/test_jobscript.py).
CASES: dict[str, list[str]] = {
    # The seeds' timeline demo: 2 ThetaGPU nodes, 16 A100s, timeline + MPI profile.
    "thetagpu-torch-mnist-2x8": [
        "--system",
        "thetagpu",
        "--nodes",
        "2",
        "--account",
        "SDL_Workshop",
        "--queue",
        "full-node",
        "--walltime",
        "00:30:00",
        "--framework",
        "torch",
        "--dataset",
        "mnist",
        "--epochs",
        "4",
        "--timeline",
        "--mpi-profile",
        *COMMON,
    ],
    # Seed 001's CPU profile: 16 ranks on one ThetaGPU node, no GPU.
    "thetagpu-tensorflow-mnist-cpu-1x16": [
        "--system",
        "thetagpu",
        "--nodes",
        "1",
        "--gpus-per-node",
        "0",
        "--ranks-per-node",
        "16",
        "--account",
        "SDL_Workshop",
        "--queue",
        "training-gpu",
        "--framework",
        "tensorflow",
        "--mpi-profile",
        "--no-timeline",
        *COMMON,
    ],
    "polaris-torch-cifar10-2x4": [
        "--system",
        "polaris",
        "--nodes",
        "2",
        "--account",
        "MyProject",
        "--queue",
        "debug",
        "--walltime",
        "00:20:00",
        "--framework",
        "torch",
        "--dataset",
        "cifar10",
        "--batch-size",
        "64",
        "--lr-scaling",
        "sqrt",
        "--warmup-epochs",
        "1",
        "--setup",
        "module use /soft/modulefiles",
        "--setup",
        "module load conda",
        "--setup",
        "conda activate base",
        *COMMON,
        "--name",
        "polaris-cifar10-8gpu",
    ],
    "slurm-tensorflow-mnist-2x4": [
        "--system",
        "slurm",
        "--nodes",
        "2",
        "--gpus-per-node",
        "4",
        "--threads-per-rank",
        "8",
        "--queue",
        "gpu",
        "--account",
        "proj01",
        "--walltime",
        "01:00:00",
        "--framework",
        "tensorflow",
        "--dataset",
        "mnist",
        "--fusion-threshold-mb",
        "32",
        "--cycle-time-ms",
        "3.5",
        *COMMON,
    ],
    # CPU-only Slurm job with no --threads-per-rank: threads come from $SLURM_CPUS_ON_NODE.
    "slurm-torch-mnist-cpu-1x4": [
        "--system",
        "slurm",
        "--gpus-per-node",
        "0",
        "--ranks-per-node",
        "4",
        "--steps-per-epoch",
        "50",
        *COMMON,
    ],
}


def generate(case: str) -> str:
    """The script `workshop jobscript <CASES[case]> -o <case>.sh` writes."""
    args = build_parser().parse_args(["jobscript", *CASES[case], "-o", f"{case}.sh"])
    return render(spec_from_args(args))


@pytest.mark.parametrize("case", sorted(CASES))
def test_jobscript_matches_golden(case: str) -> None:
    path = GOLDEN / f"{case}.sh"
    text = generate(case)
    if REGENERATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} missing: run with WORKSHOP_REGEN_GOLDEN=1 to create it"
    assert text == path.read_text(), (
        f"generated script differs from {path}; if intended, regenerate "
        "(WORKSHOP_REGEN_GOLDEN=1) and review the diff"
    )


def test_every_golden_file_has_a_case() -> None:
    assert {p.stem for p in GOLDEN.glob("*.sh")} == set(CASES)
