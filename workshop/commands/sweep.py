"""``workshop sweep``: a grid of real runs (workers, batch sizes, LR rules, ...) in one folder.

Options that take several values span the grid; every combination is one run directory under
the sweep directory. Running the same command again resumes: finished points are skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from workshop.launch.options import add_run_options
from workshop.launch.run import RunConfig, RunInterrupted
from workshop.paths import RunsDirError, runs_dir
from workshop.runspec import GRID_FIELDS


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="run a grid of real runs (np, batch size, LR rule, ...) into one sweep folder",
        description="Run every combination of the given values as a real Horovod run, each in "
        "its own run directory under one sweep directory, with a progress bar and a summary "
        "table. Options marked [grid] take several values. Run the same command again to "
        "resume: finished points are skipped. Example: workshop sweep --np 1 2 "
        "--batch-size 32 256 --lr-scaling none linear --epochs 3 --steps-per-epoch 40",
    )
    add_run_options(parser, sweep=True)
    add = parser.add_argument
    add(
        "--out",
        type=Path,
        default=None,
        help="sweep directory (default runs/sweep-<UTC time>); an existing one is resumed",
    )
    add(
        "--resume",
        type=Path,
        default=None,
        metavar="DIR",
        help="re-run the grid recorded in DIR/sweep.json, skipping finished points",
    )
    add(
        "--rounds",
        type=int,
        default=1,
        help="run the whole grid N times, round by round (compare timings within a round)",
    )
    add(
        "--record",
        action="store_true",
        help="record on a quiet machine: wait until other work uses < 0.05 cores, measure the "
        "other work during each run (run.json 'recording'), and record a disturbed run again "
        "(how every timing in data/ is made)",
    )
    add(
        "--compute-baseline",
        action="store_true",
        help="each round, also time the same network's step in 1 and max(np) independent "
        "processes without Horovod (compute-baseline.jsonl): the ceiling of a speedup here",
    )
    add(
        "--one-at-a-time",
        action="store_true",
        help="not every combination: a baseline (each option's first value) and one run per "
        "other value of each option, the rest at the baseline (knobs against the default)",
    )
    add("--dry-run", action="store_true", help="list the points and exit")
    add("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(func=main)


def grid_from_args(args: argparse.Namespace) -> tuple[RunConfig, dict[str, list]]:
    """The base configuration and the grid an argument namespace describes."""
    grid = {key: list(dict.fromkeys(getattr(args, key))) for key in GRID_FIELDS}
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    single = {k: v for k, v in vars(args).items() if k in fields and k not in GRID_FIELDS}
    base = RunConfig(**single)
    return base, grid


def _from_manifest(sweep_dir: Path) -> tuple[RunConfig, dict[str, list]]:
    path = sweep_dir / "sweep.json"
    if not path.exists():
        raise ValueError(f"{path}: missing; is {sweep_dir} a sweep directory?")
    manifest = json.loads(path.read_text())
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    base = RunConfig(**{k: v for k, v in manifest["base"].items() if k in fields})
    return base, manifest["grid"]


def main(args: argparse.Namespace) -> int:
    from workshop.launch.sweep import check_points, expand_grid, run_sweep

    if args.resume:
        sweep_dir = args.resume
        try:
            base, grid = _from_manifest(sweep_dir)
        except ValueError as exc:
            print(f"workshop sweep: {exc}", file=sys.stderr)
            return 2
        manifest = json.loads((sweep_dir / "sweep.json").read_text())
        for key in ("rounds", "record", "compute_baseline", "one_at_a_time"):
            if key in manifest:
                setattr(args, key, manifest[key])
    else:
        base, grid = grid_from_args(args)
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        try:
            sweep_dir = args.out or runs_dir() / f"sweep-{stamp}"
        except RunsDirError as exc:  # a folder this user cannot write: one line, no traceback
            print(f"workshop sweep: {exc}", file=sys.stderr)
            return 2
    cores = os.cpu_count() or 1
    try:
        points = expand_grid(base, grid, one_at_a_time=getattr(args, "one_at_a_time", False))
        check_points(points)
    except ValueError as exc:
        print(f"workshop sweep: {exc}", file=sys.stderr)
        return 2
    note = f"this machine has {cores} cores"
    if base.oversubscribe and max(grid["np"]) > cores:
        note += f"; np up to {max(grid['np'])} OVERSUBSCRIBED (ranks share cores)"
    rounds = getattr(args, "rounds", 1)
    if rounds > 1:
        note += f"; {rounds} rounds"
    print(f"sweep of {len(points) * rounds} runs into {sweep_dir} ({note})")
    if args.dry_run:
        for name, _ in points:
            print(f"  {name}")
        return 0
    try:
        summary = run_sweep(
            sweep_dir,
            base,
            grid,
            command=["workshop", *sys.argv[1:]],
            progress=not args.quiet,
            rounds=getattr(args, "rounds", 1),
            record=getattr(args, "record", False),
            compute_baseline=getattr(args, "compute_baseline", False),
            one_at_a_time=getattr(args, "one_at_a_time", False),
        )
    except (KeyboardInterrupt, RunInterrupted) as exc:
        print(f"\ninterrupted; run the same command again to resume ({sweep_dir})")
        return getattr(exc, "exit_code", 130)
    with_pandas_width = summary.to_string(index=False, float_format=lambda v: f"{v:.4g}")
    print(with_pandas_width)
    counts = summary["status"].value_counts().to_dict()
    print(
        f"{counts.get('ok', 0)} ran, {counts.get('skipped', 0)} already done, "
        f"{counts.get('failed', 0)} failed ({note}). "
        f"Analyse with: workshop scaling report {sweep_dir}"
    )
    return 1 if counts.get("failed") else 0
