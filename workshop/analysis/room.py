"""The room at a glance: one row per learner from :func:`workshop.readers.room.read_room`."""

from __future__ import annotations

import math

import pandas as pd

ROOM_COLUMNS = [
    "learner", "right", "furthest", "current", "current_tries", "current_wrong",
    "current_right", "stuck_on", "last_check", "last_check_missing", "last_check_verdict",
    "last_check_error", "last_run", "last_run_status", "last_run_error", "last_seen_s",
    "bad_files", "problems", "refused_files",
]  # fmt: skip


def exercise_order(exercise: str) -> tuple:
    """Sort key of an exercise id: "05.2" < "05.10" < "06.1"; ids that are not numbers last.

    >>> sorted(["06.1", "05.10", "05.2", "x"], key=exercise_order)
    ['05.2', '05.10', '06.1', 'x']
    """
    try:
        return (0, *(int(part) for part in str(exercise).split(".")))
    except ValueError:
        return (1, str(exercise))


def learner_exercises(exercises: pd.DataFrame) -> pd.DataFrame:
    """Each learner's sessions merged: one row per learner and exercise.

    Returns:
        Columns ``learner``, ``exercise``, ``tries`` and ``wrong`` (summed over sessions),
        ``right`` (any session), ``first_s`` (earliest), ``last_s`` (latest), ``last_ok``
        (of the latest check).
    """
    columns = ["learner", "exercise", "tries", "wrong", "right", "first_s", "last_s", "last_ok"]
    if exercises.empty:
        return pd.DataFrame(columns=columns)
    latest = exercises.sort_values("last_s").groupby(["learner", "exercise"])["last_ok"].last()
    merged = exercises.groupby(["learner", "exercise"]).agg(
        tries=("tries", "sum"),
        wrong=("wrong", "sum"),
        right=("right", "any"),
        first_s=("first_s", "min"),
        last_s=("last_s", "max"),
    )
    merged["last_ok"] = latest
    return merged.reset_index()[columns]


def _latest(seen_s: float, written_s) -> float:
    return seen_s if pd.isna(written_s) else float(pd.Series([seen_s, written_s]).max())


def room_table(room) -> pd.DataFrame:
    """One row per learner: where they are, what they are stuck on, their last check and run.

    Args:
        room: a :class:`workshop.readers.room.Room`.

    Returns:
        Columns: ``learner``; ``right`` (exercises answered right); ``furthest`` (the
        highest exercise id checked, "" if none); ``current`` (the exercise of the latest
        check) with ``current_tries`` (answers given to it), ``current_wrong`` and
        ``current_right``; ``stuck_on`` (``current`` when it has a wrong answer and no right
        one yet, else ""); ``last_check`` (the script of the ``workshop check`` recorded last,
        "" if none), ``last_check_missing`` (its failed practices, ", "-joined),
        ``last_check_verdict`` ("stalled", "crashed", "timed out", "interrupted" or "") and
        ``last_check_error`` (its error's first line); ``last_run``, ``last_run_status``,
        ``last_run_error`` (of the run recorded last, "" if none); ``last_seen_s`` (Unix
        seconds of the learner's latest record, NaN if none); ``bad_files`` (how many files
        could not be used) and ``problems`` (each with its reason, "; "-joined);
        ``refused_files`` (files in the learner's folders that another account made, or links:
        not counted, named in ``room.refused``). A learner's folders (``NAME`` and, in a room
        of Unix accounts, ``NAME.<suffix>`` of theirs) make one row.
    """
    merged = learner_exercises(room.exercises)
    rows = []
    for learner in room.learners:
        mine = merged[merged["learner"] == learner]
        runs = room.runs[room.runs["learner"] == learner].sort_values("written_s")
        checks = room.checks[room.checks["learner"] == learner].sort_values("written_s")
        troubles = room.problems[room.problems["learner"] == learner]
        refused = room.refused[(room.refused["learner"] == learner) & (room.refused["file"] != "")]
        row = dict.fromkeys(ROOM_COLUMNS, "")
        row.update(learner=learner, right=int(mine["right"].sum()), last_seen_s=math.nan)
        row.update(current_tries=0, current_wrong=0, current_right=False)
        if not mine.empty:
            current = mine.sort_values("last_s").iloc[-1]
            stuck = current["wrong"] > 0 and not current["right"]
            row.update(
                furthest=max(mine["exercise"], key=exercise_order),
                current=current["exercise"],
                current_tries=int(current["tries"]),
                current_wrong=int(current["wrong"]),
                current_right=bool(current["right"]),
                stuck_on=current["exercise"] if stuck else "",
                last_seen_s=float(mine["last_s"].max()),
            )
        if not checks.empty:
            check = checks.iloc[-1]
            row.update(
                last_check=str(check["script"]) or "?",
                last_check_missing=str(check["missing"]),
                last_check_verdict=str(check["verdict"]),
                last_check_error=str(check["error"]),
            )
            row["last_seen_s"] = _latest(row["last_seen_s"], check["written_s"])
        if not runs.empty:
            last = runs.iloc[-1]
            row.update(
                last_run=str(last["name"]),
                last_run_status=str(last["status"]),
                last_run_error=str(last["error"] or ""),
            )
            row["last_seen_s"] = _latest(row["last_seen_s"], last["written_s"])
        row["bad_files"] = len(troubles)
        row["refused_files"] = len(refused)
        row["problems"] = "; ".join(
            f"{t.file}: {t.problem}" if t.file else t.problem for t in troubles.itertuples()
        )
        rows.append(row)
    return pd.DataFrame(rows, columns=ROOM_COLUMNS)


def room_progress(room) -> pd.DataFrame:
    """How far the room got on each exercise, in exercise order.

    Returns:
        Columns ``exercise``, ``right`` (learners who answered it right), ``trying``
        (learners who checked it without a right answer yet), ``wrong_answers`` (all
        learners' wrong answers to it).
    """
    merged = learner_exercises(room.exercises)
    if merged.empty:
        return pd.DataFrame(columns=["exercise", "right", "trying", "wrong_answers"])
    table = merged.groupby("exercise").agg(
        right=("right", "sum"), trying=("right", lambda r: int((~r.astype(bool)).sum()))
    )
    table["wrong_answers"] = merged.groupby("exercise")["wrong"].sum()
    table = table.reset_index()
    table["right"] = table["right"].astype(int)
    order = sorted(range(len(table)), key=lambda i: exercise_order(table["exercise"].iloc[i]))
    return table.iloc[order].reset_index(drop=True)
