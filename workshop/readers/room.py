"""Read a room folder (``workshop room DIR``): what each learner's sessions recorded.

The files are written by :mod:`workshop.room`. Anything else found in a learner's folder
(garbage, a half-written file, a file of another format version, a file too large) becomes a
line in :attr:`Room.problems` for that learner; reading never stops at one bad file.

Who wrote what (issue 50): in a room of Unix accounts (:func:`workshop.room.room_identity`)
a folder counts only when the account that owns it has the folder's name, ``<account>`` or
``<account>.<suffix>`` (the folder a learner records in when another account made theirs
first; all of a learner's folders make one row), and a record only when it is owned by that
same account; anything else (a folder made under another learner's name, or under their name
and a suffix, a file planted or renamed into someone's folder, a link) is not counted and goes
into :attr:`Room.refused`, for the view to name. In a single-account room the owner tells nothing
(one account wrote everything) and the folder's name is the learner's, as the hub's variable
gave it; links are refused there too.
"""

from __future__ import annotations

import json
import os
import pwd
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from workshop.room import (
    FORMAT,
    MAX_FILE_BYTES,
    UNIX_ACCOUNTS,
    account_name,
    room_folder_problems,
    room_identity,
)

EXERCISE_COLUMNS = [
    "learner", "session", "exercise", "tries", "wrong", "right", "first_s", "last_s", "last_ok",
]  # fmt: skip
RUN_COLUMNS = [
    "learner", "name", "status", "exit_code", "np", "framework", "duration_s", "error",
    "written_s",
]  # fmt: skip
CHECK_COLUMNS = [
    "learner", "script", "exit_code", "missing", "warnings", "verdict", "error", "written_s",
]  # fmt: skip
PROBLEM_COLUMNS = ["learner", "file", "problem"]
REFUSED_COLUMNS = ["learner", "folder", "file", "owner", "problem"]
# A temporary file younger than this is a write in flight, not one a crash left behind.
PARTIAL_AFTER_S = 60.0


@dataclass(frozen=True)
class Room:
    """The records of one room folder.

    Attributes:
        folder: the room folder.
        learners: sorted names of the learners found (each once: in a room of Unix accounts,
            the owners of the folders counted; else the names of the folders and stray
            entries).
        exercises: one row per learner, session and exercise: ``learner``, ``session``,
            ``exercise`` (id, e.g. "05.1"), ``tries`` (answers given), ``wrong``, ``right``
            (bool: answered right at least once), ``first_s`` / ``last_s`` (Unix seconds of
            the first and latest check), ``last_ok`` (True / False, None: checked unanswered).
        runs: one row per recorded run: ``learner``, ``name``, ``status`` (run.json's),
            ``exit_code``, ``np``, ``framework``, ``duration_s``, ``error`` (first line),
            ``written_s`` (Unix seconds the record was written).
        problems: one row per file that could not be used: ``learner``, ``file`` (in a
            learner's folder ``<name>.<suffix>``, prefixed ``<name>.<suffix>/``), ``problem``.
        refused: one row per entry not counted because of who made it: ``learner`` (the
            learner it claims to be: for a folder, its name, or the account its name starts
            with before a "."; for a file, its folder's learner), ``folder`` (the folder's name
            in the room), ``file`` ("" for the folder itself), ``owner`` (the account that owns
            it, "uid N" for one without a name), ``problem`` ("owned by ana", "a link"). A
            refused folder has no row of its own.
        identity: :data:`workshop.room.UNIX_ACCOUNTS` or :data:`workshop.room.SINGLE_ACCOUNT`.
        owner: the account that owns the room folder.
        folder_problems: what the room folder lacks to keep each folder its maker's
            (:func:`workshop.room.room_folder_problems`).
        checks: one row per recorded ``workshop check``: ``learner``, ``script``,
            ``exit_code`` (0 every practice holds, 1 one is missing, 2 not judged to the end),
            ``missing`` and ``warnings`` (the practices that failed / warned, ", "-joined),
            ``verdict`` ("stalled", "crashed", "timed out", "interrupted", or "" when the
            script ran to its end), ``error`` (its first line), ``written_s``.
    """

    folder: Path
    learners: list[str]
    exercises: pd.DataFrame
    runs: pd.DataFrame
    problems: pd.DataFrame
    checks: pd.DataFrame
    refused: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=REFUSED_COLUMNS))
    identity: str = UNIX_ACCOUNTS
    owner: str = ""
    folder_problems: list[str] = field(default_factory=list)


def _load(path: Path, owner_uid: int | None) -> tuple[dict | None, str]:
    # Opened without following a link and without waiting on a pipe; the owner is checked on
    # the open file, so a file swapped in after the folder was listed is caught too.
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"cannot read ({exc.strerror})"
    with open(handle, "rb") as opened:
        found = os.fstat(opened.fileno())
        if owner_uid is not None and found.st_uid != owner_uid:
            return None, f"replaced meanwhile by a file of {account_name(found.st_uid)}"
        if found.st_size > 2 * MAX_FILE_BYTES:
            return None, f"{found.st_size} bytes, over the {2 * MAX_FILE_BYTES} a record may have"
        try:
            record = json.loads(opened.read(2 * MAX_FILE_BYTES + 1).decode("utf-8"))
        except json.JSONDecodeError as exc:
            return None, f"not JSON ({exc.msg}: line {exc.lineno}, column {exc.colno})"
        except UnicodeDecodeError:
            return None, "not text (bytes that are not UTF-8)"
        except OSError as exc:
            return None, f"cannot read ({exc.strerror})"
    if not isinstance(record, dict):
        return None, f"a JSON {type(record).__name__}, not an object"
    if record.get("format") != FORMAT:
        return None, f"format {record.get('format')!r}, this workshop reads {FORMAT!r}"
    return record, ""


def _exercise_rows(learner: str, record: dict) -> tuple[list[dict], str]:
    exercises = record.get("exercises")
    if not isinstance(exercises, dict):
        return [], "no 'exercises' object"
    rows = []
    for exercise, entry in exercises.items():
        try:
            rows.append(
                {
                    "learner": learner,
                    "session": str(record.get("session", "")),
                    "exercise": str(exercise),
                    "tries": int(entry["tries"]),
                    "wrong": int(entry["wrong"]),
                    "right": bool(entry["right"]),
                    "first_s": float(entry["first_s"]),
                    "last_s": float(entry["last_s"]),
                    "last_ok": entry.get("last_ok"),
                }
            )
        except (KeyError, TypeError, ValueError) as exc:
            return [], f"exercise {str(exercise)[:20]!r}: bad entry ({type(exc).__name__}: {exc})"
    return rows, ""


def _run_row(learner: str, record: dict) -> tuple[dict | None, str]:
    run = record.get("run")
    if not isinstance(run, dict) or not isinstance(run.get("status"), str):
        return None, "no 'run' object with a status"
    row = {column: run.get(column) for column in RUN_COLUMNS[1:-1]}
    written = record.get("written_s")
    row.update(learner=learner, written_s=float(written) if _is_number(written) else None)
    return row, ""


def _verdict(check: dict, error: str) -> str:
    if check.get("stalled"):
        return "stalled"
    if check.get("interrupted"):
        return "interrupted"
    if check["exit_code"] != 2:
        return ""
    return "timed out" if error.startswith("stopped after") else "crashed"


def _check_row(learner: str, record: dict) -> tuple[dict | None, str]:
    check = record.get("check")
    if not isinstance(check, dict):
        return None, "no 'check' object"
    practices, code = check.get("checks"), check.get("exit_code")
    if not isinstance(practices, dict) or code not in (0, 1, 2):
        return None, "a check without 'checks' and an exit code 0, 1 or 2"
    if not all(isinstance(p, dict) and "ok" in p for p in practices.values()):
        return None, "a practice without its 'ok'"
    error = str(check.get("error") or "").strip()
    error = error.splitlines()[0] if error else ""
    written = record.get("written_s")
    return {
        "learner": learner,
        "script": str(check.get("script") or ""),
        "exit_code": code,
        "missing": ", ".join(n for n, p in practices.items() if p["ok"] is False),
        "warnings": ", ".join(n for n, p in practices.items() if p["ok"] is None),
        "verdict": _verdict(check, error),
        "error": error,
        "written_s": float(written) if _is_number(written) else None,
    }, ""


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Accounts(dict):
    """uid -> account name, each looked up once per reading; :meth:`claimed` by a folder name."""

    def __init__(self) -> None:
        super().__init__()
        self.names: dict[str, bool] = {}  # a name -> whether it is an account's

    def __missing__(self, uid: int) -> str:
        self[uid] = account_name(uid)
        return self[uid]

    def claimed(self, name: str, owner: str) -> str:
        """Whose folder ``name`` says it is: the longest of ``name``, then ``name`` cut at
        each "." from the right, that is ``owner`` or an account on this machine; ``name``
        when none is. A folder counts for its owner only when this is the owner: ``ana`` and
        ``ana.3f9c`` are ana's own, ``ben.3f9c`` made by ana is not, nor is ``ana.lee`` made
        by ana when ana.lee is an account."""
        known = self.names
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            prefix = ".".join(parts[:end])
            if prefix == owner:
                return prefix
            if prefix not in known:
                try:
                    pwd.getpwnam(prefix)
                    known[prefix] = True
                except KeyError:
                    known[prefix] = False
            if known[prefix]:
                return prefix
        return name


def _read_learner(
    folder: Path,
    found: os.stat_result,
    now: float,
    owner_uid: int | None,
    accounts: _Accounts,
    learner: str,
) -> tuple[list[dict], ...]:
    exercises, runs, problems, checks, refused = [], [], [], [], []
    where = "" if folder.name == learner else f"{folder.name}/"

    def problem(file: str, text: str) -> None:
        file = f"{where}{file}" if file else folder.name if where else ""
        problems.append({"learner": learner, "file": file, "problem": text})

    if not stat.S_ISDIR(found.st_mode):
        problem("", "not a folder (a learner's records go in DIR/<name>/)")
        return exercises, runs, problems, checks, refused
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        problem("", f"cannot list the folder ({exc.strerror})")
        return exercises, runs, problems, checks, refused
    for path in entries:
        name = path.name
        try:
            entry = path.lstat()
        except OSError:
            continue  # replaced or removed meanwhile
        if stat.S_ISLNK(entry.st_mode) or (owner_uid is not None and entry.st_uid != owner_uid):
            owner = accounts[entry.st_uid]
            why = "a link" if stat.S_ISLNK(entry.st_mode) else f"owned by {owner}"
            refused.append(
                {"learner": learner, "folder": folder.name, "file": name, "owner": owner,
                 "problem": why}
            )  # fmt: skip
            continue
        if name.startswith(".") and name.endswith(".tmp"):
            if now - entry.st_mtime > PARTIAL_AFTER_S:
                problem(name, "a partial write left behind (a session stopped mid-write)")
            continue
        if not (name.endswith(".json") and name.startswith(("session-", "run-", "check-"))):
            problem(name, "not a room record (session-, run- or check-*.json)")
            continue
        if not stat.S_ISREG(entry.st_mode):
            problem(name, "not a file")
            continue
        record, trouble = _load(path, owner_uid)
        if record is None:
            problem(name, trouble)
            continue
        if name.startswith("session-"):
            rows, trouble = _exercise_rows(learner, record)
            exercises += rows
        elif name.startswith("check-"):
            row, trouble = _check_row(learner, record)
            checks += [row] if row else []
        else:
            row, trouble = _run_row(learner, record)
            runs += [row] if row else []
        if trouble:
            problem(name, trouble)
    return exercises, runs, problems, checks, refused


def read_room(folder: str | Path, *, now: float | None = None) -> Room:
    """Read every learner's records under ``folder`` (``DIR/<learner>/*.json``, and in a room of
    Unix accounts ``DIR/<learner>.<suffix>/*.json`` too, in the same row).

    In a room of Unix accounts, an entry whose owner's account name is not its name (nor its
    name before a "." suffix), a record owned by another account than its folder's, and any link
    are not read: they are rows of :attr:`Room.refused`.

    Args:
        folder: the room folder (``WORKSHOP_ROOM`` of the learners).
        now: the time, Unix seconds, to tell a write in flight from a partial file left
            behind (default: now).

    Returns:
        A :class:`Room`; bad files are in its ``problems``, never raised.

    Raises:
        FileNotFoundError: ``folder`` is not a folder.
        PermissionError: ``folder`` cannot be listed by this user.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"room {folder}: not a folder (give the learners' WORKSHOP_ROOM)")
    now = time.time() if now is None else now
    try:
        entries = sorted(p for p in folder.iterdir() if not p.name.startswith("."))
    except OSError as exc:
        raise PermissionError(
            f"room {folder}: cannot list it ({exc.strerror}): the instructor needs read access"
        ) from exc
    found = {}
    for entry in entries:
        try:
            found[entry] = entry.lstat()
        except OSError:
            continue  # removed meanwhile
    room = folder.stat()
    identity = room_identity(room.st_uid, [entry.st_uid for entry in found.values()])
    accounts = _Accounts()
    exercises, runs, problems, checks, refused, learners = [], [], [], [], [], []
    for entry, entry_stat in found.items():
        owner = accounts[entry_stat.st_uid]
        learner = entry.name
        if identity == UNIX_ACCOUNTS:
            learner = accounts.claimed(entry.name, owner)
        if stat.S_ISLNK(entry_stat.st_mode) or (identity == UNIX_ACCOUNTS and owner != learner):
            why = "a link" if stat.S_ISLNK(entry_stat.st_mode) else f"owned by {owner}"
            refused.append(
                {"learner": learner, "folder": entry.name, "file": "", "owner": owner,
                 "problem": why}
            )  # fmt: skip
            continue
        learners.append(learner)
        owner_uid = entry_stat.st_uid if identity == UNIX_ACCOUNTS else None
        found_here = _read_learner(entry, entry_stat, now, owner_uid, accounts, learner)
        exercises += found_here[0]
        runs += found_here[1]
        problems += found_here[2]
        checks += found_here[3]
        refused += found_here[4]
    return Room(
        folder,
        sorted(set(learners)),
        pd.DataFrame(exercises, columns=EXERCISE_COLUMNS),
        pd.DataFrame(runs, columns=RUN_COLUMNS),
        pd.DataFrame(problems, columns=PROBLEM_COLUMNS),
        pd.DataFrame(checks, columns=CHECK_COLUMNS),
        pd.DataFrame(refused, columns=REFUSED_COLUMNS),
        identity,
        accounts[room.st_uid],
        room_folder_problems(room.st_mode),
    )
