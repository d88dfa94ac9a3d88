"""``workshop room DIR``: the instructor's view of the learners who opted in (WORKSHOP_ROOM)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "room",
        help="show the room: each learner's exercise and last run",
        description="One line per learner who set WORKSHOP_ROOM=DIR: exercises right, the "
        "furthest one, the current one and its wrong answers, the last run's status.",
    )
    parser.add_argument("folder", type=Path, metavar="DIR", help="the room folder")
    parser.add_argument("--json", action="store_true", help="print the table as JSON records")
    parser.add_argument("--watch", action="store_true", help="refresh until Ctrl-C")
    parser.add_argument(
        "--interval", type=float, default=5.0, help="seconds between refreshes (--watch)"
    )
    parser.add_argument(
        "--times", type=int, default=0, help="with --watch: stop after this many (0: never)"
    )
    parser.set_defaults(func=main)


def _view(folder: Path, as_json: bool) -> str:
    from workshop.analysis.room import room_table
    from workshop.findings.room import room_text
    from workshop.readers.room import read_room

    table = room_table(read_room(folder))
    if as_json:
        return json.dumps(json.loads(table.to_json(orient="records")), indent=1)  # NaN -> null
    return room_text(table, folder=str(folder))


def main(args: argparse.Namespace) -> int:
    if args.interval <= 0 or args.times < 0:
        print("workshop room: --interval must be > 0 and --times >= 0", file=sys.stderr)
        return 2
    shown = 0
    while True:
        try:
            text = _view(args.folder, args.json)
        except (FileNotFoundError, PermissionError) as exc:
            print(f"workshop room: {exc}", file=sys.stderr)
            return 1
        if args.watch and not args.json:
            print("\033[H\033[2J", end="")  # clear the terminal, as watch(1) does
        print(text, flush=True)
        shown += 1
        if not args.watch or shown == args.times:
            return 0
        time.sleep(args.interval)
