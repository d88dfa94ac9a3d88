"""Record the cases ``workshop diagnose`` is tested on: problems injected from outside the
program (a Horovod variable in the environment, a busy process on one rank's core), in a
script the workshop did not write (Horovod 0.28.1's own PyTorch synthetic benchmark,
tests/foreign_scripts/), in the workshop's own job and in its PyTorch DDP twin (lesson 02's
ddp_torch.py under torchrun, into data/diagnose/ddp/), each beside its healthy twin.

    python -m tools.record_diagnosis_cases [--out data/diagnose/cases] [CASE ...]

Every run goes through the recording path of data/ (``workshop.launch.harness.record_run``
with ``quiet``: it waits for a quiet machine, measures the other work during the run, records
a disturbed run again) and writes its own run.json (command, environment, versions, host,
load). A case folder that exists is left alone: delete it to record it again. The timeline-only
folders are copies of one recorded run's timeline.json, alone, as a cluster job leaves it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from workshop.launch.harness import RUN_SHAPE, record_run, stop_on_sigterm
from workshop.paths import data_path

SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "foreign_scripts"
SCRIPT = SCRIPT / "pytorch_synthetic_benchmark.py"
#: The foreign script's arguments: a small torchvision model on the CPU, 45 steps.
SCRIPT_ARGS = (
    "--model", "mobilenet_v3_small", "--batch-size", "4", "--no-cuda",
    "--num-warmup-batches", "5", "--num-batches-per-iter", "10", "--num-iters", "4",
)  # fmt: skip
FOREIGN = ("-np", "2", "--controller", "gloo", "--timeline", "--mark-cycles", "--quiet")

#: case -> (workshop run options, environment added, harness injection)
CASES = {
    "foreign-healthy": ([*FOREIGN, "--script", str(SCRIPT)], {}, {}),
    "foreign-cycle10": ([*FOREIGN, "--script", str(SCRIPT)], {"HOROVOD_CYCLE_TIME": "10"}, {}),
    "foreign-cycle50": ([*FOREIGN, "--script", str(SCRIPT)], {"HOROVOD_CYCLE_TIME": "50"}, {}),
    "foreign-fusion0": (
        [*FOREIGN, "--script", str(SCRIPT)],
        {"HOROVOD_FUSION_THRESHOLD": "0"},
        {},
    ),
    "foreign-straggler": (
        [*FOREIGN, "--script", str(SCRIPT)],
        {},
        {"rank_cores": {0: 0, 1: 1}, "hog_core": 1, "hogs": 3},
    ),
    "mnist-healthy": ([*RUN_SHAPE, "--timeline", "--mark-cycles"], {}, {}),
    "mnist-cycle10": (
        [*RUN_SHAPE, "--timeline", "--mark-cycles"],
        {"HOROVOD_CYCLE_TIME": "10"},
        {},
    ),
}
#: Lesson 02's DDP twin of the workshop's job (PyTorch DDP, torchrun, Gloo; MNIST's offline
#: subset, 3 epochs of 40 steps, batch 32), with 3 profiled steps: recorded into
#: data/diagnose/ddp/ (:data:`DDP_OUT`), outside the Horovod calibration set.
DDP_SCRIPT = Path(__file__).resolve().parents[1] / "workshop" / "lessons" / "l02_first_program"
DDP_SCRIPT = DDP_SCRIPT / "programs" / "ddp_torch.py"
DDP = ("-np", "2", "--script", str(DDP_SCRIPT), "--profile-steps", "3", "--quiet")
DDP_ARGS = ("--epochs", "3", "--steps", "40")
DDP_CASES = {
    "ddp-healthy": (DDP, {}, {}),
    "ddp-straggler": (DDP, {}, {"rank_cores": {0: 0, 1: 1}, "hog_core": 1, "hogs": 3}),
}
DDP_OUT = data_path("diagnose") / "ddp"
CASES |= DDP_CASES
#: Timeline-only folders: the case whose timeline.json each copies.
TIMELINE_ONLY = {
    "timeline-only-healthy": "foreign-healthy",
    "timeline-only-cycle50": "foreign-cycle50",
}


def record(name: str, out: Path | None) -> None:
    options, env, inject = CASES[name]
    out = DDP_OUT if name in DDP_CASES and out is None else out or data_path("diagnose") / "cases"
    run_dir = out / name
    if run_dir.exists():
        print(f"{run_dir}: exists, left alone", flush=True)
        return
    command = ["workshop", "run", *options, "--out", str(out), "--name", name]
    if "--script" in options:
        command += ["--", *(DDP_ARGS if name in DDP_CASES else SCRIPT_ARGS)]
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    out.mkdir(parents=True, exist_ok=True)
    try:
        record_run(command, run_dir, quiet=True, **inject)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(CASES), help="cases to record")
    parser.add_argument(
        "--out", type=Path, default=None,
        help="parent folder (default data/diagnose/cases, the DDP cases data/diagnose/ddp)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    stop_on_sigterm()
    for name in args.cases:
        if name not in CASES:
            print(f"unknown case {name!r}; known: {', '.join(CASES)}", file=sys.stderr)
            return 2
        record(name, args.out)
    cases = args.out or data_path("diagnose") / "cases"
    for name, source in TIMELINE_ONLY.items():
        folder = cases / name
        if not folder.exists() and (cases / source / "timeline.json").is_file():
            folder.mkdir()
            shutil.copy(args.out / source / "timeline.json", folder / "timeline.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
