"""MNIST training by rank placement on an emulated 2-node cluster (needs root).

Brings up 2 nodes linked at --link (workshop.cluster; torn down at the end, also on error)
and, in every repeat, runs one short `workshop run` per placement, in rotating order:

  np2-2+0   2 ranks on nodea                (workshop cluster run --ranks-per-node 2)
  np2-1+1   1 rank on each node
  np4-4+0   4 ranks on nodea                (--ranks-per-node 4)
  np4-2+2   2 ranks on each node

The emulated nodes share this machine's cores: 4 ranks oversubscribe a 2-core machine in both
np=4 placements, so np=4 compares placements, not scaling. Every run is an ordinary run
directory (OUT/<repeat>-<placement>), its run.json with the cluster's placement and link;
WORKSHOP_REPEAT in its env gives the repeat.

    flock /tmp/workshop-cpu.lock python benchmarks/cluster_placement.py --repeats 5 \\
        --out data/cluster/mnist-placement
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _recording import run_record, started_now

PLACEMENTS = {"np2-2+0": (2, 2), "np2-1+1": (2, 1), "np4-4+0": (4, 4), "np4-2+2": (4, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--link", default="1gbit")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps-per-epoch", type=int, default=40)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=None)
    args = parser.parse_args()
    from workshop.cluster import emulate
    from workshop.cluster.spec import ClusterSpec

    args.out.mkdir(parents=True, exist_ok=True)
    started, load = started_now()
    emulate.up(ClusterSpec(nodes=2, link=args.link))
    names, runs, begin = list(PLACEMENTS), [], time.monotonic()
    try:
        for repeat in range(args.repeats):
            repeat_start = time.monotonic()
            order = names[repeat % len(names) :] + names[: repeat % len(names)]
            for name in order:
                np, per_node = PLACEMENTS[name]
                argv = [
                    sys.executable, "-m", "workshop.cli", "cluster", "run",
                    "--ranks-per-node", str(per_node), "--",
                    sys.executable, "-m", "workshop.cli", "run", "-np", str(np),
                    "--epochs", str(args.epochs), "--steps-per-epoch", str(args.steps_per_epoch),
                    "--no-timeline", "--out", str(args.out), "--name", f"r{repeat}-{name}",
                    "--quiet", *(["--oversubscribe"] if np > (os.cpu_count() or 1) else []),
                ]  # fmt: skip
                env = os.environ | {"WORKSHOP_REPEAT": str(repeat)}
                result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300)
                runs.append({"repeat": repeat, "placement": name, "exit_code": result.returncode})
                print(f"repeat {repeat + 1} {name}: exit {result.returncode}", flush=True)
            took = time.monotonic() - repeat_start
            if args.budget_s and time.monotonic() - begin + 1.2 * took > args.budget_s:
                print(f"stopping after {repeat + 1} repeats: --budget-s {args.budget_s}")
                break
    finally:
        emulate.down()
    manifest = {
        **run_record(started, load),
        "link": args.link,
        "placements": {k: {"np": v[0], "ranks_per_node": v[1]} for k, v in PLACEMENTS.items()},
        "order": "rotating: repeat r starts with placement r mod 4",
        "runs": runs,
    }
    (args.out / "benchmark.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
