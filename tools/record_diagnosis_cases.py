"""Record the cases ``workshop diagnose`` is tested on: problems injected from outside the
program (a Horovod variable in the environment, a busy process on one rank's core), in a
script the workshop did not write (Horovod 0.28.1's own PyTorch synthetic benchmark,
tests/foreign_scripts/) and in the workshop's own job, each beside its healthy twin.

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
#: Timeline-only folders: the case whose timeline.json each copies.
TIMELINE_ONLY = {
    "timeline-only-healthy": "foreign-healthy",
    "timeline-only-cycle50": "foreign-cycle50",
}


def record(name: str, out: Path) -> None:
    options, env, inject = CASES[name]
    run_dir = out / name
    if run_dir.exists():
        print(f"{run_dir}: exists, left alone", flush=True)
        return
    command = ["workshop", "run", *options, "--out", str(out), "--name", name]
    if "--script" in options:
        command += ["--", *SCRIPT_ARGS]
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
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
    parser.add_argument("--out", type=Path, default=data_path("diagnose") / "cases")
    args = parser.parse_args(argv)
    stop_on_sigterm()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.cases:
        if name not in CASES:
            print(f"unknown case {name!r}; known: {', '.join(CASES)}", file=sys.stderr)
            return 2
        record(name, args.out)
    for name, source in TIMELINE_ONLY.items():
        folder = args.out / name
        if not folder.exists() and (args.out / source / "timeline.json").is_file():
            folder.mkdir()
            shutil.copy(args.out / source / "timeline.json", folder / "timeline.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
