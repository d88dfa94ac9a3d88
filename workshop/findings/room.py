"""The room table in words: what ``workshop room DIR`` prints."""

from __future__ import annotations

import math
import time

import pandas as pd

from workshop.room import UNIX_ACCOUNTS

MAX_CELL = 60


def _ago(seconds_then: float, now: float) -> str:
    if seconds_then is None or math.isnan(seconds_then):
        return "-"
    seconds = max(0, now - seconds_then)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min ago"
    return f"{seconds / 3600:.1f} h ago"


def _cut(text: str, width: int = MAX_CELL) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _current(row) -> str:
    if not row.current:
        return "-"
    if row.current_right:
        return f"{row.current} right"
    if row.current_wrong:
        return f"{row.current} STUCK: {row.current_wrong} wrong"
    return f"{row.current} not answered"


def _check(row) -> str:
    if not row.last_check:
        return "-"
    if row.last_check_verdict:
        text = row.last_check_verdict.upper()
        return f"{text}: {row.last_check_error}" if row.last_check_error else text
    return f"missing {row.last_check_missing}" if row.last_check_missing else "all hold"


def _run(row) -> str:
    if not row.last_run_status:
        return "-"
    text = f"{row.last_run_status} ({row.last_run})"
    return f"{text}: {row.last_run_error}" if row.last_run_error else text


def _files(row) -> str:
    found = [f"{row.bad_files} unreadable"] if row.bad_files else []
    found += [f"{row.refused_files} not theirs"] if row.refused_files else []
    return f"{', '.join(found)} (below)" if found else "ok"


def room_notes(room) -> list[str]:
    """What the room's file system says, in sentences: how learners are named (the room's
    identity), each entry not counted because another account made it, and what the room
    folder lacks.

    Args:
        room: a :class:`workshop.readers.room.Room`.

    >>> from workshop.readers.room import Room
    >>> empty = pd.DataFrame()
    >>> refused = pd.DataFrame([{"learner": "ben", "folder": "ben", "file": "", "owner": "ana",
    ...                          "problem": "owned by ana"}])
    >>> for line in room_notes(Room("/r", ["ana"], *[empty] * 4, refused, "unix accounts",
    ...                             "root", ["not sticky (chmod +t): ..."])):
    ...     print(line)
    identity: Unix accounts (the room is root's): a folder and its records count only for the account that owns them
    /r/ben is owned by ana: not counted as ben's
    what is not counted is kept out of every row: remove it (rm -r PATH, as root or the room's owner root); a learner whose folder another account made records in a folder of their own meanwhile (NAME.<random hex>), counted in their row
    /r: not sticky (chmod +t): ... (workshop room --init /r, run by its owner, adds what is missing)
    """  # noqa: E501
    folder = str(room.folder)
    if room.identity == UNIX_ACCOUNTS:
        notes = [
            f"identity: Unix accounts (the room is {room.owner}'s): a folder and its records "
            "count only for the account that owns them"
        ]
    elif room.learners:
        notes = [
            f"identity: one account ({room.owner}) writes every folder: each folder is named "
            "by the hub's variable (JUPYTERHUB_USER, set per container), which the file "
            "system cannot check"
        ]
    else:
        notes = [f"identity: no learner folder yet (the room is {room.owner}'s)"]
    for entry in room.refused.itertuples():
        path = f"{folder}/{entry.folder}" + (f"/{entry.file}" if entry.file else "")
        whose = f"in {entry.learner}'s row" if entry.file else f"as {entry.learner}'s"
        made = f" (made by {entry.owner})" if entry.problem == "a link" else ""
        notes.append(f"{path} is {entry.problem}{made}: not counted {whose}")
    if len(room.refused):
        notes.append(
            "what is not counted is kept out of every row: remove it (rm -r PATH, as root or "
            f"the room's owner {room.owner}); a learner whose folder another account made "
            "records in a folder of their own meanwhile (NAME.<random hex>), counted in their "
            "row"
        )
    notes += [
        f"{folder}: {problem} (workshop room --init {folder}, run by its owner, adds what is "
        "missing)"
        for problem in room.folder_problems
    ]
    return notes


def room_text(
    table: pd.DataFrame, *, folder: str = "", now: float | None = None, room=None
) -> str:
    """The room as a text table, one line per learner, then each learner's bad files and, with
    ``room``, :func:`room_notes` (the room's identity, what is not counted, the folder's bits).

    "last check" is the last ``workshop check``: "all hold", "missing broadcast, sharded", or
    its verdict when the script did not run to its end ("STALLED: ...", "CRASHED: ...").

    Args:
        table: :func:`workshop.analysis.room.room_table`.
        folder: the room folder, named in the title line.
        now: the time, Unix seconds, for "seen ... ago" (default: now).
        room: the :class:`workshop.readers.room.Room` the table was made from.
    """
    now = time.time() if now is None else now
    stuck = int((table["stuck_on"] != "").sum()) if len(table) else 0
    title = f"room {folder}: {len(table)} learners, {stuck} stuck"
    header = [
        "learner", "right", "furthest", "current exercise", "last check", "last run", "seen",
        "files",
    ]  # fmt: skip
    cells = [
        [
            row.learner,
            str(row.right),
            row.furthest or "-",
            _current(row),
            _cut(_check(row), 40),
            _cut(_run(row)),
            _ago(row.last_seen_s, now),
            _files(row),
        ]
        for row in table.itertuples()
    ]
    widths = [max(len(line[i]) for line in [header, *cells]) for i in range(len(header))]
    lines = [title, "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for line in cells:
        lines.append("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())
    for row in table.itertuples():
        if row.problems:
            lines.append(f"{row.learner}: unreadable: {_cut(row.problems, 300)}")
    lines += room_notes(room) if room is not None else []
    return "\n".join(lines)
