"""What horovodrun's build check costs each launch, and what fix 8 of the build saves.

Before it starts a rank, horovodrun asks an extension whether Gloo (or MPI) was built
(``horovod/common/util.py``: ``gloo_built`` tries the extensions in ``EXTENSIONS`` order, each
imported in a forked process, until one answers). Horovod 0.28.1 as released tries TensorFlow
first, so every launch imports TensorFlow, even a PyTorch run's; the workshop's build (fix 8 in
scripts/build_horovod.sh) tries torch first. Both orders give the same answer here.

Measured in one run, interleaved (the order alternates each round), on the installed Horovod
with the order set before horovodrun's code runs:

  check   the build check alone: ``gloo_built()``, wall seconds;
  launch  a whole 2-rank launch, ``horovodrun -np 2 --gloo python -c pass`` (rendezvous and
          two trivial ranks), wall seconds.

It prints min / median / max per order, the per-round differences (TensorFlow first minus
torch first) and, with ``--out DIR``, writes DIR/result.json with every round and the
provenance (command, UTC times, load average, git commit, versions, host).

    flock /tmp/workshop-cpu.lock python benchmarks/launch_check.py [--repeats 7] \
        [--out data/benchmarks/launch-check]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from workshop.benchmarking import run_record, spread, started_now
from workshop.launch.ranks import horovodrun_command

ORDERS = {
    "tensorflow-first": ["tensorflow", "torch", "mxnet"],  # Horovod 0.28.1 as released
    "torch-first": ["torch", "tensorflow", "mxnet"],  # the workshop's build (fix 8)
}
# Runs horovodrun's own command line with the extension order of argv[1].
LAUNCHER = (
    "import json, sys; import horovod.common.util as util; "
    "util.EXTENSIONS[:] = json.loads(sys.argv.pop(1)); "
    "from horovod.runner.launch import run_commandline; run_commandline()"
)
CHECK = (
    "import json, sys, time; import horovod.common.util as util; "
    "util.EXTENSIONS[:] = json.loads(sys.argv[1]); "
    "t = time.perf_counter(); built = util.gloo_built(); "
    "print(json.dumps({'built': built, 's': time.perf_counter() - t}))"
)


def check_s(order: list[str]) -> float:
    """Seconds of ``gloo_built()`` with ``order`` (fails if it does not say True)."""
    out = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(order)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    if found["built"] is not True:
        raise SystemExit(f"gloo_built() said {found['built']!r} with {order}")
    return found["s"]


def launch_s(order: list[str]) -> float:
    """Wall seconds of a 2-rank horovodrun launch of ``python -c pass`` with ``order``."""
    # horovodrun's own command line, run by LAUNCHER instead of the horovodrun script
    flags = horovodrun_command(2, [sys.executable, "-c", "pass"], program="horovodrun")[1:]
    argv = [sys.executable, "-c", LAUNCHER, json.dumps(order), *flags]
    start = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True)
    took = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"launch with {order} failed:\n{result.stdout}{result.stderr}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    started, load = started_now()
    rounds = []
    for index in range(args.repeats):
        names = list(ORDERS) if index % 2 == 0 else list(reversed(ORDERS))
        row = {"round": index, "order": names}
        for name in names:
            row[f"check_s[{name}]"] = check_s(ORDERS[name])
            row[f"launch_s[{name}]"] = launch_s(ORDERS[name])
        rounds.append(row)
        print(json.dumps(row), flush=True)
    summary = {}
    for what in ("check_s", "launch_s"):
        for name in ORDERS:
            summary[f"{what}[{name}]"] = spread([r[f"{what}[{name}]"] for r in rounds])
        saved = [r[f"{what}[tensorflow-first]"] - r[f"{what}[torch-first]"] for r in rounds]
        summary[f"{what} saved per round (tensorflow-first - torch-first)"] = spread(saved)
    for key, value in summary.items():
        print(f"{key}: min {value['min']:.2f} / median {value['median']:.2f} / "
              f"max {value['max']:.2f} s")  # fmt: skip
    if args.out:
        from workshop.launch.run import provenance

        args.out.mkdir(parents=True, exist_ok=True)
        record = {
            "what": __doc__.splitlines()[0],
            "rounds": rounds,
            "summary": summary,
            "run": run_record(started, load),
            "provenance": provenance(),
        }
        (args.out / "result.json").write_text(json.dumps(record, indent=2) + "\n")
        print(f"wrote {args.out / 'result.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
