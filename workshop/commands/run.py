"""``workshop run``: one real Horovod training run into a new run directory."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

from workshop.launch import quiet
from workshop.launch.options import add_run_options, config_from_args
from workshop.launch.run import RunError, run_one
from workshop.paths import runs_dir, writable_problem
from workshop.room import record_run, room_dir
from workshop.runspec import OPTIONS


def summarize(run_dir: Path) -> str:
    """A few lines on a finished run: epoch times, samples/s (a script's run: steps per rank
    and the median step), files written."""
    from workshop.readers.runs import open_run

    run = open_run(run_dir)
    record, config = run.record, run.config
    what = f"script {Path(config['script']).name}" if config.get("script") else config["framework"]
    data = (
        record["data"].get("source", record["data"]) if config.get("script") is None else "its own"
    )
    lines = [
        f"\nrun {record['name']}: {record['status']} in {record['duration_s']:.1f} s "
        f"(np={config['np']}, {what}, {config['controller']}, data: {data})",
    ]
    if len(run.metrics):
        lines.append("epoch  train_s  test_s  samples/s  test_acc")
        for row in run.metrics.itertuples():
            lines.append(
                f"{row.epoch:5d} {row.train_time_s:8.3f} {row.test_time_s:7.3f} "
                f"{row.samples_per_s:10.1f} {row.test_accuracy:9.4f}"
            )
    elif len(run.steps):
        per_rank = run.steps.groupby("rank")["step_s"]
        for rank, count in per_rank.size().items():
            lines.append(
                f"rank {rank}: {count} optimizer steps, median step "
                f"{per_rank.median()[rank] * 1e3:.1f} ms"
            )
    files = sorted(p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file())
    lines.append("files: " + ", ".join(files))
    return "\n".join(lines)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run",
        help="launch a real Horovod training run",
        description="Launch a real Horovod data-parallel training run into a new run "
        "directory. With no options: 2 processes, PyTorch, MNIST, Gloo, timeline on.",
    )
    add_run_options(parser)
    parser.add_argument("--out", type=Path, default=None, help="parent of the run directory")
    parser.add_argument("--name", default=None, help="run directory name")
    launcher = OPTIONS["launcher"]
    parser.add_argument(launcher.flag, default=launcher.default, help=launcher.help)
    script = OPTIONS["script"]
    parser.add_argument(script.flag, metavar="FILE", default=None, help=script.help)
    profile = OPTIONS["profile_steps"]
    parser.add_argument(profile.flag, type=int, metavar="N", default=None, help=profile.help)
    parser.add_argument(
        "script_argv", nargs="*", metavar="-- ARGS", help="the script's arguments (after --)"
    )
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--record",
        action="store_true",
        help="record on a quiet machine (as for data/): wait until other work uses < 0.05 "
        "cores, measure the other work during the run (run.json 'recording'), and record a "
        "disturbed run again; also set by WORKSHOP_RECORD=1 (for recorders that start "
        "'workshop run' themselves)",
    )
    parser.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.script_argv and not args.script:
        print(
            f"workshop run: arguments {' '.join(args.script_argv)!r} without --script FILE",
            file=sys.stderr,
        )
        return 2
    if args.script and not Path(args.script).is_file():
        print(f"workshop run: --script {args.script}: no such file", file=sys.stderr)
        return 2
    if args.script_argv:
        args.script_args = shlex.join(args.script_argv)
    config = config_from_args(args)
    problem = writable_problem(args.out) if args.out else ""
    if problem:
        print(f"workshop run: --out: {problem}: give a folder of yours", file=sys.stderr)
        return 2
    started = time.time()

    def launch() -> Path:
        return run_one(
            config,
            out_dir=args.out,
            name=args.name,
            quiet=args.quiet,
            command=["workshop", *sys.argv[1:]],
        )

    try:
        if args.record or os.environ.get("WORKSHOP_RECORD") == "1":
            run_dir = quiet.recorded(launch, report=lambda line: print(line, file=sys.stderr))
        else:
            run_dir = launch()
    except ValueError as exc:
        print(f"workshop run: {exc}", file=sys.stderr)
        return 2
    except RunError as exc:
        print(f"workshop run: {exc}", file=sys.stderr)
        _failed_to_room(args.out, started)
        return exc.exit_code  # 1, or 128 + the signal that stopped the run
    except quiet.BusyMachine as exc:  # no quiet moment, or every attempt disturbed
        print(f"workshop run: {exc}", file=sys.stderr)
        return 3
    record_run(run_dir)
    print(summarize(run_dir))
    return 0


def _failed_to_room(out: Path | None, started: float) -> None:
    # RunError names the run directory in words only: the run.json written since the start.
    if not room_dir():
        return
    parent = out or runs_dir()
    written = [p for p in parent.glob("*/run.json") if p.stat().st_mtime >= started - 1]
    if written:
        record_run(max(written, key=lambda p: p.stat().st_mtime).parent)
