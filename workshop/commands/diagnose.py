"""``workshop diagnose``: which known problem a run most likely has, with its evidence.

    workshop diagnose RUN_DIR                      verdict, evidence beside the healthy
                                                   reference, fix
    workshop diagnose RUN_DIR --json               the same as one JSON object
    workshop diagnose RUN_DIR --baseline OTHER     compare with a healthy run of your own

The analyses are ``workshop.analysis.diagnose``, the sentences ``workshop.findings.diagnose``;
the shipped healthy reference is ``data/diagnose/healthy-reference.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from workshop.units import json_safe


def register(subparsers: Any) -> None:
    """Add ``workshop diagnose``."""
    parser = subparsers.add_parser(
        "diagnose",
        help="the most likely problem of a run, with its evidence and the fix",
        description=(
            "Read one run directory (timeline optional), compute the evidence number of each "
            "known problem (straggler, lr_not_scaled, fusion_off, long_cycle_time, cache_off, "
            "small_batch, input_pipeline, crashed: which rank died first, oversubscribed: more "
            "threads than cores), compare each with healthy runs and rank the findings."
        ),
    )
    parser.add_argument("run_dir", help="a run directory written by workshop run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--baseline",
        metavar="RUN_DIR",
        help="a healthy run of your own to compare with, instead of the shipped reference",
    )
    parser.set_defaults(func=_diagnose)


def _diagnose(args: argparse.Namespace) -> int:
    from workshop.findings.diagnose import diagnose_lines, diagnose_run
    from workshop.readers.timeline.model import TimelineFormatError

    if not Path(args.run_dir).is_dir():
        print(f"workshop diagnose: {args.run_dir}: not a run directory", file=sys.stderr)
        return 2
    try:
        result = diagnose_run(args.run_dir, args.baseline)
    except (FileNotFoundError, ValueError, TimelineFormatError) as exc:
        print(f"workshop diagnose: {exc}", file=sys.stderr)
        return 2
    if args.json:
        # numpy scalars as numbers (NaN as null: JSON has no NaN); anything else as its text
        print(json.dumps(json_safe(result), indent=2, default=str))
    else:
        print("\n".join(diagnose_lines(result)))
    return 0
