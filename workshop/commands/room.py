"""``workshop room DIR``: the instructor's view of the learners who opted in (WORKSHOP_ROOM);
``workshop room --init DIR [--group G]`` makes (or checks) the room folder."""

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
        "furthest one, the current one and its wrong answers, the last run's status; under "
        "it, how learners are named and any folder or file not counted. With --init: make "
        "DIR (or check and fix it) so that no learner can remove or rename another's folder.",
    )
    parser.add_argument("folder", type=Path, metavar="DIR", help="the room folder")
    parser.add_argument(
        "--init",
        action="store_true",
        help="make DIR rwxrws--T (set-group-id, sticky), or check and fix an existing one",
    )
    parser.add_argument(
        "--group", metavar="G", help="with --init: the group of the learners and the instructor"
    )
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

    room = read_room(folder)
    table = room_table(room)
    if as_json:
        return json.dumps(json.loads(table.to_json(orient="records")), indent=1)  # NaN -> null
    return room_text(table, folder=str(folder), room=room)


def _init(folder: Path, group: str | None) -> int:
    import stat

    from workshop.room import group_name, make_room

    try:
        done, wrong = make_room(folder, group)
    except (OSError, ValueError) as exc:
        print(f"workshop room --init: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ValueError) else 1
    found = folder.lstat()
    print(f"room {folder}: {stat.filemode(found.st_mode)}, group {group_name(found.st_gid)}")
    for line in done:
        print(f"  {line}")
    for line in wrong:
        print(f"  {line}", file=sys.stderr)
    if not wrong:
        print(
            "  each member of the group can add their own folder; none can remove or rename "
            "another's"
        )
    return 1 if wrong else 0


def main(args: argparse.Namespace) -> int:
    if args.group and not args.init:
        print("workshop room: --group goes with --init", file=sys.stderr)
        return 2
    if args.init:
        return _init(args.folder, args.group)
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
