"""``workshop diagnose``: what each known problem costs a run, the largest first, and the fix.

    workshop diagnose RUN_DIR                      verdict, each problem's cost, the fixes
    workshop diagnose RUN_DIR --json               the same as one JSON object
    workshop diagnose RUN_DIR --baseline OTHER     a healthy run of your own as the noise

The decisions are ``workshop.analysis.diagnose`` (costs, verdict), the sentences
``workshop.findings.diagnose``; the estimators' noise is ``data/diagnose/calibration.json``.
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
        help="what each known problem costs a run, the largest first, and the fix",
        description=(
            "Read one run directory (timeline optional) and estimate, from the run's own "
            "evidence, the time per step the fix of each known problem would save (straggler, "
            "long_cycle_time, fusion_off, cache_off, small_batch, input_pipeline), with the "
            "rules it breaks (crashed: which rank died first, oversubscribed, lr_not_scaled). A "
            "finding saves at least 10% of a step beyond the estimate's noise on healthy runs; "
            "healthy only when every problem was measured."
        ),
    )
    parser.add_argument("run_dir", help="a run directory written by workshop run")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--baseline",
        metavar="RUN_DIR",
        help="a healthy run of your own: its savings are the noise, instead of the shipped "
        "calibration",
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
