"""How long ``workshop check`` takes on a small PyTorch and a small TensorFlow script, and where
the TensorFlow time goes.

    python benchmarks/check_time.py [--repeats 5] [--out DIR]

Each round runs, in rotating order, for each framework's fixture (tests/check_scripts/
torch_correct.py, tf_correct.py):
- ``check``: ``workshop check SCRIPT`` (2 ranks and the np=1 base run, as a learner runs it);
- ``check-no-base``: the same without the np=1 base run;
- ``plain``: ``horovodrun -np 2 -H localhost:2 --gloo python SCRIPT`` (the script alone, no
  observing runner);
- ``import``: ``python -c "import <framework>, horovod.<framework>"`` (one process).
The differences between them split the check's time: imports and start-up, the script's own
work, the runner's observation, the base run. Min / median / max over the rounds; the rounds
are interleaved so that the machine's load falls on every kind alike. ``--out DIR`` writes
result.json with every run and provenance. ``--lock FILE`` holds an flock on FILE for each round
(not the whole benchmark), so that other work on a shared machine runs between rounds, not
inside them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _recording import flock_held, run_record, started_now

from workshop.launch.horovodrun import horovodrun_command
from workshop.launch.record import provenance as run_provenance

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = REPO / "tests" / "check_scripts"
FIXTURES = {"torch": SCRIPTS / "torch_correct.py", "tensorflow": SCRIPTS / "tf_correct.py"}
KINDS = ("check", "check-no-base", "plain", "import")


def command(kind: str, framework: str) -> list[str]:
    script = str(FIXTURES[framework])
    workshop = [sys.executable, "-m", "workshop.cli", "check"]
    return {
        "check": [*workshop, script],
        "check-no-base": [*workshop, "--no-base-run", script],
        "plain": horovodrun_command(2, [sys.executable, script]),
        "import": [sys.executable, "-c", f"import {framework}, horovod.{framework}"],
    }[kind]


def run_once(kind: str, framework: str, workdir: Path) -> dict:
    env = os.environ | {"TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
    start = time.monotonic()
    result = subprocess.run(
        command(kind, framework), cwd=workdir, env=env, capture_output=True, text=True
    )
    seconds = time.monotonic() - start
    ok = result.returncode == 0
    if not ok:
        sys.stderr.write(f"{kind} {framework} exited {result.returncode}:\n{result.stdout[-2000:]}"
                         f"{result.stderr[-2000:]}\n")  # fmt: skip
    return {"kind": kind, "framework": framework, "seconds": round(seconds, 3), "ok": ok}


def spread(values: list[float]) -> dict:
    return {
        "min": round(min(values), 2),
        "median": round(statistics.median(values), 2),
        "max": round(max(values), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json")
    parser.add_argument("--lock", type=Path, default=None, help="flock this file for each round")
    args = parser.parse_args()
    cases = [(kind, framework) for framework in FIXTURES for kind in KINDS]
    runs = []
    started, load = started_now()
    with tempfile.TemporaryDirectory(prefix="check-time-") as tmp:
        for repeat in range(args.repeats):
            shift = repeat % len(cases)
            with flock_held(args.lock):
                for position, (kind, framework) in enumerate(cases[shift:] + cases[:shift]):
                    found = run_once(kind, framework, Path(tmp))
                    runs.append(found | {"round": repeat + 1, "position": position + 1})
                    print(f"round {repeat + 1}: {framework:<10} {kind:<13} "
                          f"{found['seconds']:6.1f} s", flush=True)  # fmt: skip
    summary = {
        f"{framework} {kind}": spread(
            [r["seconds"] for r in runs if (r["kind"], r["framework"]) == (kind, framework)]
        )
        for framework in FIXTURES
        for kind in KINDS
    }
    print("\nmin / median / max seconds over", args.repeats, "rounds:")
    for name, values in summary.items():
        print(f"  {name:<26} {values['min']:6.1f} {values['median']:6.1f} {values['max']:6.1f}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        # The record every benchmark writes (command, times, load, commit), versions and host.
        provenance = run_record(started, load) | run_provenance()
        (args.out / "result.json").write_text(
            json.dumps({"provenance": provenance, "summary": summary, "runs": runs}, indent=1)
            + "\n"
        )
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
