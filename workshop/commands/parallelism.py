"""``workshop parallelism``: lesson 01's data vs model parallelism demos with real processes.

    workshop parallelism [--np 2] [--steps 10] [--batch 512] [--microbatches 1 4]

Starts the processes once, runs every experiment (one process, data parallel, model parallel
with each micro-batch count) and prints the step times and how far each run's parameters are
from the one-process run's.
"""

from __future__ import annotations

import argparse
from typing import Any

from workshop.train.parallelism_demo import DemoConfig  # numpy only: no torch here


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "parallelism",
        help="data vs model parallelism demos with real processes (lesson 01)",
        description="Run lesson 01's data vs model parallelism demos with real processes.",
    )
    parser.add_argument("--np", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--steps", type=int, default=DemoConfig.steps, help="optimizer steps")
    parser.add_argument(
        "--batch", type=int, default=DemoConfig.global_batch, help="global batch per step"
    )
    parser.add_argument(
        "--microbatches",
        type=int,
        nargs="+",
        default=[1, 4],
        help="micro-batch counts of the model-parallel runs (default 1 4)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from workshop.analysis import parallelism as estimates
    from workshop.launch.parallelism import run_all

    cfg = DemoConfig(steps=args.steps, global_batch=args.batch)
    runs = run_all(args.np, cfg, tuple(args.microbatches))
    reference = runs["single process"]["params"]
    table = estimates.compare_runs({k: v["events"] for k, v in runs.items()})
    table["max_param_diff"] = [
        estimates.max_param_diff(reference, r["params"]) for r in runs.values()
    ]
    print(table.to_string(index=False))
    return 0
