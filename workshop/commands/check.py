"""``workshop check SCRIPT``: run a learner's Horovod or PyTorch DDP script on 2 CPU ranks and
say which practice is missing (init, broadcast, averaged, sharded, rank0_checkpoint, lr_scaled).

The script runs unchanged (it does not import workshop) under ``horovodrun --gloo`` (a Horovod
script) or ``torchrun`` with Gloo (a script that imports torch.distributed or uses
DistributedDataParallel); the checker watches Horovod or torch.distributed, the optimizer (each
rank's own gradients and the ones a step applied: "averaged" means the mean, not a Sum, not a
clip racing the reduction), the model's inputs and file saves from outside and judges by what
happened, not by reading the source. It also runs the script once alone,
stopped at its first optimizer step, to see the base learning rate. Meant for short runs:
pass the script arguments after ``--`` (``workshop check train.py -- --steps 20``).

A collective that only some ranks submit (inside ``if hvd.rank() == 0:``, or under different
names on different ranks) is named within --stall-timeout seconds: which one, which ranks, from
which line, the likely cause and the fix; ranks that make different numbers of steps (one that
finishes while another still submits ends in "Horovod has been shut down") are named with
their counts. SIGINT, SIGTERM and SIGHUP stop every rank and still print the report, marked
interrupted.

A crash shows the learner's own line first, the cause and the fix for Horovod's errors a script
can cause (mismatched root ranks, shapes, dtypes or ops; backward_passes_per_step exceeded; a
name submitted twice; no hvd.init()), and the traceback with library and checker frames folded
(--verbose and --json keep the full one).

With WORKSHOP_ROOM=DIR set, the report (as --json prints it) is also written into the
learner's folder of the room, for the instructor's `workshop room DIR`.

Exit code: 0 every practice holds (warnings allowed), 1 one is missing, 2 the script crashed,
stalled, did not finish within --timeout, or the check was interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from workshop.runspec import FRAMEWORKS


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-np", "--np", type=int, default=2, dest="np", help="ranks to run (default 2, at least 2)"
    )
    parser.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        help="require this framework's hvd.init() (default: the one used)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="stop the script after this long (default 300)",
    )
    parser.add_argument(
        "--stall-timeout",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="a collective some ranks submitted and others not for this long is a stall: "
        "stop the ranks and say which (default 20)",
    )
    parser.add_argument(
        "--no-base-run",
        action="store_true",
        help="skip the np=1 run that shows the base learning rate",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"checks": {NAME: {"ok", "evidence"}}, "exit_code", "traceback", ...}',
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="after a crash, also print the full traceback (library and checker frames included)",
    )


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "check",
        help="run a learner's Horovod or DDP script and say which practice is missing",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="workshop check SCRIPT [-np N] [--framework torch|tensorflow] [--timeout S] "
        "[--stall-timeout S] [--no-base-run] [--json] [--verbose] [-- ARGS...]",
    )
    _add_options(parser)
    # SCRIPT and everything after it, kept raw: more of the options above, then `--` and the
    # script's own arguments (a REMAINDER keeps the `--` that separates them).
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [-- ARGS]",
        help="the Python script, then its arguments after --",
    )
    parser.set_defaults(func=main)


def _split_command(args: argparse.Namespace) -> tuple[Path, list[str]]:
    """The script, and its arguments; options between them are parsed into ``args``."""
    options = argparse.ArgumentParser(prog="workshop check SCRIPT", add_help=False)
    _add_options(options)
    if not args.command or args.command[0].startswith("-"):
        options.error("the SCRIPT to check is missing")
    script, rest = Path(args.command[0]), args.command[1:]
    cut = rest.index("--") if "--" in rest else len(rest)
    options.parse_args(rest[:cut], namespace=args)
    return script, rest[cut + 1 :]


def main(args: argparse.Namespace) -> int:
    from workshop.check import CheckError, check_script
    from workshop.room import record_check

    script, script_args = _split_command(args)
    try:
        report = check_script(
            script,
            np=args.np,
            framework=args.framework,
            args=script_args,
            timeout_s=args.timeout,
            base_run=not args.no_base_run,
            quiet=args.json,
            stall_s=args.stall_timeout,
        )
    except (FileNotFoundError, ValueError, CheckError) as error:
        print(f"workshop check: {error}", file=sys.stderr)
        return 2
    record_check(report.to_dict())  # only with WORKSHOP_ROOM set: the room's instructor view
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.text(verbose=args.verbose))
    return report.exit_code
