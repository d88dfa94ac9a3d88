"""``workshop room DIR``: the instructor's view of the learners who opted in (WORKSHOP_ROOM);
``workshop room --init DIR [--group G]`` makes (or checks) the room folder."""

from __future__ import annotations

import argparse
import grp
import json
import os
import stat
import sys
import time
from pathlib import Path

from workshop.room import ROOM_BITS, account_name, bit_names


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


def make_room(folder: Path, group: str | None = None) -> tuple[list[str], list[str]]:
    """Make the room folder, or check an existing one, as a room of several accounts needs it:
    :data:`ROOM_BITS` (``rwxrws--T``: set-group-id, sticky, group rwx, nothing for others),
    group ``group`` when given. Its owner (or root) fixes what is missing; anyone else is told.

    Args:
        folder: the room folder (its parents are made as needed).
        group: the group every learner and the instructor are in (default: the folder's).

    Returns:
        ``(done, wrong)``: what was made (``["made DIR"]``) or fixed, and what is still wrong
        (each a sentence). An existing folder keeps its other bits: only write for others is
        taken away; a new one is exactly ``rwxrws--T``.

    Raises:
        ValueError: ``group`` is no group on this machine.
        OSError: the folder cannot be made or changed (e.g. a group its maker is not in).
    """
    try:
        gid = grp.getgrnam(group).gr_gid if group else -1
    except KeyError:
        raise ValueError(f"--group {group!r}: no such group on this machine") from None
    done, wrong = [], []
    made = not os.path.lexists(folder)
    if made:
        folder.mkdir(mode=0o700, parents=True)  # nothing for others, whatever the umask
    found = folder.lstat()
    if not stat.S_ISDIR(found.st_mode):
        kind = "a link" if stat.S_ISLNK(found.st_mode) else "not a folder"
        return done, [f"{folder} is {kind}: give the room folder itself"]
    mine = os.geteuid() in (0, found.st_uid)
    ask = f"ask its owner {account_name(found.st_uid)} to run: workshop room --init {folder}"
    if gid not in (-1, found.st_gid):
        if mine:
            try:
                os.chown(folder, -1, gid)
            except PermissionError as exc:
                raise PermissionError(
                    f"{folder}: cannot give it the group {group} ({exc.strerror}): run as a "
                    f"member of {group}, or as root"
                ) from exc
            done.append(f"group set to {group}")
        else:
            wrong.append(f"its group is {group_name(found.st_gid)}, not {group}: {ask}")
    mode = stat.S_IMODE(found.st_mode)
    wanted = (mode | ROOM_BITS) & ~stat.S_IWOTH
    added, removed = wanted & ~mode, mode & ~wanted
    if added or removed:
        change = [f"added {bit_names(added)}"] if added else []
        change += ["removed write for others"] if removed else []
        if mine:
            folder.chmod(wanted)
            done.append("; ".join(change))
        else:
            lacks = [f"it lacks {bit_names(added)}"] if added else []
            lacks += ["others may write it"] if removed else []
            wrong.append(f"{'; '.join(lacks)}: {ask}")
    return ([f"made {folder}"] if made else done), wrong


def group_name(gid: int) -> str:
    """The name of group ``gid``, or ``"gid N"`` when it has none."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return f"gid {gid}"
