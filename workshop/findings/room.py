"""The room table in words: what ``workshop room DIR`` prints."""

from __future__ import annotations

import math
import time

import pandas as pd

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


def room_text(table: pd.DataFrame, *, folder: str = "", now: float | None = None) -> str:
    """The room as a text table, one line per learner, then each learner's bad files.

    "last check" is the last ``workshop check``: "all hold", "missing broadcast, sharded", or
    its verdict when the script did not run to its end ("STALLED: ...", "CRASHED: ...").

    Args:
        table: :func:`workshop.analysis.room.room_table`.
        folder: the room folder, named in the title line.
        now: the time, Unix seconds, for "seen ... ago" (default: now).
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
            f"{row.bad_files} unreadable (below)" if row.bad_files else "ok",
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
    return "\n".join(lines)
