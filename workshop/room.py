"""The learner's side of the room: small records of what this session did, in a shared folder.

A learner opts in with one setting, ``WORKSHOP_ROOM=DIR`` (the instructor's JupyterHub config,
or ``os.environ["WORKSHOP_ROOM"] = "/shared/room"`` in a first cell). Then each exercise check
(:func:`workshop.lessons.engine.check`), each ``workshop run`` and each
``workshop check`` writes under ``DIR/<learner>/``;
``workshop room DIR`` reads the whole folder (:mod:`workshop.readers.room`). Nothing is sent
anywhere else, and without the setting nothing is written.

Files, each a JSON object with ``"format": FORMAT`` and ``"learner"``:

- ``session-<id>.json``: one per Python session (a notebook kernel), rewritten on each check:
  ``exercises`` maps an exercise id to ``{"tries", "wrong", "right", "first_s", "last_s",
  "last_ok"}`` (``tries`` counts answers given, ``last_ok`` is None for a check run without an
  answer; times are Unix seconds). Sessions never share a file, so two kernels of one learner
  cannot lose each other's attempts.
- ``run-<name>.json``: one per finished ``workshop run``, the status part of its run.json.
- ``check-<time>-<pid>.json``: one per ``workshop check``, its ``--json`` report under
  ``"check"``, with long texts cut (the traceback to its last :data:`MAX_TRACEBACK`
  characters, each other text to :data:`MAX_CHECK_TEXT`).

Who writes (issue 50). The room folder's owner decides how a learner is named, one rule for
both sides (:func:`room_identity`):

- **Unix accounts** (an HPC centre's hub; the room made by the instructor or root,
  ``workshop room --init DIR --group G``): the session runs as another account than the room's
  owner, so its name is that account's (uid to name), never ``$JUPYTERHUB_USER``: when the
  variable names someone else, the account wins and the session says so once. The learner's
  folder must be owned by that account: a folder someone else made under the learner's name is
  never written into; the records go to a folder of the learner's own, ``DIR/<learner>.<16
  random hex>`` (said once: which account owns the other, where the records go), which the
  reader counts as the learner's too. Root, who is no learner there, records nothing.
- **Single account** (a hub with a container per learner, all running as one account such as
  ``jovyan``, the room made by that account): the session runs as the room's owner, so the
  file system cannot tell learners apart; ``$JUPYTERHUB_USER`` (else the login name) names the
  learner, and only the hub, which sets it per container, vouches for it.

``workshop room --init`` (:func:`workshop.commands.room.make_room`) makes the folder with the
bits a room of several accounts needs (:data:`ROOM_BITS`: set-group-id, sticky, group rwx)
and :func:`room_folder_problems` says which are missing.

Every write is a temporary file in the same folder then :func:`os.replace`: a reader sees the
old or the new file, never half of one. Sizes are bounded: :data:`MAX_EXERCISES` exercises per
session, :data:`MAX_SESSIONS` session files, :data:`MAX_RUNS` run files and :data:`MAX_CHECKS`
check files per learner (the oldest are removed), :data:`MAX_TEXT` characters per message.
"""

from __future__ import annotations

import getpass
import json
import os
import pwd
import re
import secrets
import stat
import sys
import time
import uuid
from pathlib import Path

from workshop.units import write_json_atomic

ROOM_ENV = "WORKSHOP_ROOM"
FORMAT = "workshop-room/1"
MAX_EXERCISES = 200
MAX_SESSIONS = 20
MAX_RUNS = 20
MAX_CHECKS = 5
MAX_CHECK_TEXT = 1000
MAX_TRACEBACK = 4000
MAX_TEXT = 300
MAX_FILE_BYTES = 64 * 1024
LEARNER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
HUB_USER_ENV = "JUPYTERHUB_USER"
UNIX_ACCOUNTS = "unix accounts"
SINGLE_ACCOUNT = "single account"
# rwxrws--T: the group (the room) may add folders, set-group-id gives each new folder the
# room's group (the instructor reads it), sticky keeps a folder for the account that made it.
ROOM_BITS = stat.S_ISGID | stat.S_ISVTX | stat.S_IRWXU | stat.S_IRWXG

_SESSION = {"id": f"{int(time.time())}-{os.getpid()}-{uuid.uuid4().hex[:8]}", "exercises": {}}
_WARNED: set[str] = set()
# (room, learner) -> the folder this session records in (see _learner_dir).
_FOLDERS: dict[tuple[str, str], Path] = {}


def room_dir() -> Path | None:
    """The room folder from ``$WORKSHOP_ROOM``, or None when this learner has not opted in."""
    value = os.environ.get(ROOM_ENV, "")
    return Path(value).expanduser() if value else None


def account_name(uid: int) -> str:
    """The account name of ``uid``, or ``"uid N"`` when it has none."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def room_identity(room_uid: int, writer_uids) -> str:
    """How the room names its learners: :data:`SINGLE_ACCOUNT` when every writer is the room
    folder's owner (one account writes it all: only the hub's variable tells learners apart),
    else :data:`UNIX_ACCOUNTS` (a folder or record counts for the account that owns it).

    The learner side asks with its own uid; the reader with the owners of the entries it finds.
    A learner cannot turn a room of Unix accounts into a single-account one: whatever they
    make is owned by them, not by the room's owner.

    >>> room_identity(0, [0, 0]), room_identity(0, [0, 1001]), room_identity(1000, [])
    ('single account', 'unix accounts', 'single account')
    """
    return SINGLE_ACCOUNT if all(uid == room_uid for uid in writer_uids) else UNIX_ACCOUNTS


def learner_name(room: Path | None = None) -> str:
    """This learner's name in ``room`` (default: ``$WORKSHOP_ROOM``).

    In a room of Unix accounts (:func:`room_identity`), the name of the account this process
    runs as; else (a single-account room, or no room) ``$JUPYTERHUB_USER``, else the login name.

    Raises:
        ValueError: a name that is not a plain folder name (letters, digits, ``._-``), or an
            account without a name.
        PermissionError: root in a room of Unix accounts (root is no learner there).
        OSError: the room folder cannot be looked at.
    """
    room = room if room is not None else room_dir()
    uid = os.geteuid()
    room_uid = room.stat().st_uid if room is not None else uid
    if room_identity(room_uid, [uid]) == UNIX_ACCOUNTS:
        if uid == 0:
            raise PermissionError(
                f"{room} is owned by {account_name(room_uid)}, a room of Unix accounts, where "
                "root is no learner: root records nothing there (run the lesson as the "
                "learner's account)"
            )
        try:
            name = pwd.getpwuid(uid).pw_name
        except KeyError:
            raise ValueError(
                f"this session's uid {uid} has no account name to record under"
            ) from None
    else:
        name = os.environ.get(HUB_USER_ENV) or getpass.getuser()
    if not LEARNER_NAME.match(name):
        raise ValueError(
            f"learner name {name!r} cannot name a folder in the room: letters, digits, . _ - only"
        )
    return name


def room_folder_problems(mode: int) -> list[str]:
    """What a room folder with ``mode`` (its ``st_mode``) lacks to keep each learner's folder
    theirs; nothing when only its owner may write it (a single-account room).

    >>> for problem in room_folder_problems(0o40770):  # drwxrwx---, as made by hand
    ...     print(problem)
    not sticky (chmod +t): a learner can remove or rename another learner's folder
    not set-group-id (chmod g+s): each learner's folder gets their own group, which the instructor may not be in
    >>> room_folder_problems(0o43770), room_folder_problems(0o40700)
    ([], [])
    """  # noqa: E501
    problems = []
    if not mode & (stat.S_IWGRP | stat.S_IWOTH):
        return problems
    if not mode & stat.S_ISVTX:
        problems.append(
            "not sticky (chmod +t): a learner can remove or rename another learner's folder"
        )
    if mode & stat.S_IWGRP and not mode & stat.S_ISGID:
        problems.append(
            "not set-group-id (chmod g+s): each learner's folder gets their own group, which "
            "the instructor may not be in"
        )
    if mode & stat.S_IWOTH:
        problems.append(
            "writable by every account on the machine (chmod o-w): anyone, not only the "
            "room's group, may add a folder"
        )
    return problems


def bit_names(bits: int) -> str:
    names = [
        (stat.S_ISGID, "set-group-id"), (stat.S_ISVTX, "sticky"), (stat.S_IRWXU, "owner rwx"),
        (stat.S_IRWXG, "group rwx"),
    ]  # fmt: skip
    return ", ".join(name for bit, name in names if bits & bit)


def write_json(path: Path, payload: dict) -> None:
    """Write ``payload`` to ``path`` atomically (temporary file, then :func:`os.replace`).

    Raises:
        ValueError: the JSON is over :data:`MAX_FILE_BYTES`.
        OSError: the folder cannot be written.
    """
    size = len(json.dumps(payload, indent=1, sort_keys=True))
    if size > MAX_FILE_BYTES:
        raise ValueError(f"room record {path.name} is {size} bytes, over {MAX_FILE_BYTES}")
    write_json_atomic(path, payload, indent=1, sort_keys=True, mode=0o640)


def _learner_dir(room: Path) -> tuple[Path, str]:
    """This session's folder in ``room`` and the learner's name.

    The folder is ``room/<name>`` when this account owns it (made here if missing). In a room of
    Unix accounts where another account made ``room/<name>`` first (or it is a link, or not a
    folder), the records go to a folder of this account's own, ``room/<name>.<16 hex>``: an
    existing one this account owns, else one made here (``mkdir`` of a random name, so it is
    this account's whatever anyone made before); said once. A session keeps the folder it
    found: its session file never lands in two folders, which the reader would count twice.
    """
    if not room.is_dir():
        raise FileNotFoundError(f"{ROOM_ENV}={room}: no such folder (the instructor makes it)")
    name = learner_name(room)
    hub_user = os.environ.get(HUB_USER_ENV)
    if hub_user and hub_user != name:
        _say_once(
            f"(room: recording as {name!r}, the Unix account this session runs as; "
            f"{HUB_USER_ENV}={hub_user!r} does not name a learner in a room of Unix accounts)"
        )
    kept = _FOLDERS.get((str(room), name))
    if kept is not None and _is_own_folder(kept):
        return kept, name
    folder = room / name
    try:
        folder.mkdir(mode=0o750)
    except FileExistsError:
        pass
    found = folder.lstat()
    if found.st_uid == os.geteuid() and stat.S_ISDIR(found.st_mode):
        _FOLDERS[(str(room), name)] = folder
        return folder, name
    what = "a link" if stat.S_ISLNK(found.st_mode) else "not a folder"
    what = what if found.st_uid == os.geteuid() else f"owned by {account_name(found.st_uid)}"
    if room_identity(room.stat().st_uid, [os.geteuid()]) != UNIX_ACCOUNTS:
        raise PermissionError(
            f"{folder} is {what}, not {name}'s own folder: nothing is written there. The "
            f"instructor should remove it (rm -r {folder}); your next record then goes in, "
            "and your results stay in your own run folders meanwhile"
        )
    own = _own_fallback(room, name)
    _FOLDERS[(str(room), name)] = own
    _say_once(
        f"(room: {folder} is {what}, not {name}'s own folder: your records go to {own} "
        f"instead, a folder only you can write, and count as {name}'s. The instructor may "
        f"remove {folder} (rm -r {folder}))"
    )
    return own, name


def _is_own_folder(folder: Path) -> bool:
    try:
        found = folder.lstat()
    except OSError:
        return False
    return found.st_uid == os.geteuid() and stat.S_ISDIR(found.st_mode)


def _own_fallback(room: Path, name: str) -> Path:
    """``room/<name>.<16 hex>`` owned by this account: one found (a session before this one
    made it), else a new one. Its name cannot be guessed, and ``mkdir`` fails on a name that
    exists, so a folder made here is this account's even if another made one of the same
    name before."""
    fallback = re.compile(re.escape(name) + r"\.[0-9a-f]{16}")
    try:
        found = sorted(entry.name for entry in os.scandir(room) if fallback.fullmatch(entry.name))
    except OSError:
        found = []  # a room its learners may not list: make one
    for entry in found:
        if _is_own_folder(room / entry):
            return room / entry
    for _ in range(10):
        folder = room / f"{name}.{secrets.token_hex(8)}"
        try:
            folder.mkdir(mode=0o750)
        except FileExistsError:
            continue
        if _is_own_folder(folder):
            return folder
    raise PermissionError(
        f"{room}/{name} is not {name}'s own folder and no folder of {name}'s own could be made "
        f"beside it: nothing is written. The instructor should remove {room}/{name}"
    )


def _prune(folder: Path, pattern: str, keep: int, current: Path) -> None:
    files = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime)
    for old in [p for p in files if p != current][: max(0, len(files) - keep)]:
        old.unlink(missing_ok=True)


def _write_record(room: Path, name: str, pattern: str, keep: int, problem: str, **fields) -> bool:
    """Write ``fields`` as this learner's ``name`` (atomic) and keep the newest ``keep`` files
    of ``pattern``: True when written; False, said once on stderr after ``problem``, when the
    room could not be written."""
    try:
        folder, learner = _learner_dir(room)
    except (OSError, ValueError) as exc:
        _warn_once(str(exc))  # the room's problem, not this record's: said once for all
        return False
    try:
        path = folder / name
        write_json(path, _payload(learner, **fields))
        _prune(folder, pattern, keep, path)
    except (OSError, ValueError) as exc:
        _warn_once(f"{problem}{exc}")
        return False
    return True


def _warn_once(problem: str) -> None:
    # A room that cannot be written must not break the lesson: say so once, go on.
    _say_once(f"(room: not recorded: {problem})")


def _say_once(text: str) -> None:
    if text not in _WARNED:
        _WARNED.add(text)
        print(text, file=sys.stderr)


def _payload(learner: str, **fields) -> dict:
    return {"format": FORMAT, "learner": learner, "written_s": time.time(), **fields}


def record_attempt(exercise: str, ok: bool | None, *, now: float | None = None) -> bool:
    """Count one check of ``exercise`` in this session's record (no-op without a room).

    Args:
        exercise: the exercise id, e.g. ``"05.1"``.
        ok: True right, False wrong, None checked without an answer (the learner got there).
        now: the time, Unix seconds (default: now).

    Returns:
        True when recorded; False without a room or when it could not be written (said once
        on stderr, never raised: the lesson goes on).
    """
    room = room_dir()
    if room is None:
        return False
    now = time.time() if now is None else now
    exercises, key = _SESSION["exercises"], str(exercise)[:40]
    if key not in exercises and len(exercises) >= MAX_EXERCISES:
        _warn_once(f"more than {MAX_EXERCISES} exercises in one session")
        return False
    entry = exercises.setdefault(
        key,
        {"tries": 0, "wrong": 0, "right": False, "first_s": now, "last_s": now, "last_ok": None},
    )
    if ok is not None:
        entry["tries"] += 1
        entry["wrong"] += not ok
        entry["right"] = entry["right"] or bool(ok)
    entry["last_s"], entry["last_ok"] = now, ok
    name = f"session-{_SESSION['id']}.json"
    return _write_record(room, name, "session-*.json", MAX_SESSIONS, "",
                         session=_SESSION["id"], exercises=exercises)  # fmt: skip


def record_run(run_dir: str | os.PathLike) -> bool:
    """Copy the status part of a finished run's run.json into the room (no-op without a room).

    Returns:
        True when recorded; False without a room, or when run.json or the room could not be
        read or written (said once on stderr, never raised).
    """
    room = room_dir()
    if room is None:
        return False
    run_dir = Path(run_dir)
    try:
        run = json.loads((run_dir / "run.json").read_text())
        config = run.get("config") or {}
        error = str(run.get("error") or run.get("launcher_problem") or "")
        summary = {
            "name": run_dir.name,
            "status": str(run.get("status", "unknown"))[:40],
            "exit_code": run.get("exit_code"),
            "np": config.get("np"),
            "framework": config.get("framework"),
            "duration_s": run.get("duration_s"),
            "error": error.splitlines()[0][:MAX_TEXT] if error else "",
            "failed_ranks": list(run.get("failed_ranks") or [])[:64],
        }
    except (OSError, ValueError) as exc:
        _warn_once(f"run {run_dir}: {exc}")
        return False
    name = f"run-{run_dir.name[:100]}.json"
    return _write_record(room, name, "run-*.json", MAX_RUNS, f"run {run_dir}: ", run=summary)


def _cut_texts(value, limit: int):
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 3] + "..."
    if isinstance(value, dict):
        return {str(key)[:100]: _cut_texts(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut_texts(item, limit) for item in value[:64]]
    return value


def record_check(report: dict, *, now: float | None = None) -> bool:
    """Write a ``workshop check --json`` report into the room (no-op without a room).

    Args:
        report: :meth:`workshop.check.Report.to_dict`; texts are cut (the traceback keeps its
            last :data:`MAX_TRACEBACK` characters, where the error is).
        now: the time, Unix seconds, that names the file (default: now).

    Returns:
        True when recorded; False without a room or when it could not be written (said once
        on stderr, never raised: the check's own report is what matters).
    """
    room = room_dir()
    if room is None:
        return False
    now = time.time() if now is None else now
    bounded = _cut_texts({k: v for k, v in report.items() if k != "traceback"}, MAX_CHECK_TEXT)
    trace = str(report.get("traceback") or "")
    bounded["traceback"] = (
        ("..." + trace[-MAX_TRACEBACK:]) if len(trace) > MAX_TRACEBACK else (trace or None)
    )
    name = f"check-{int(now * 1000)}-{os.getpid()}.json"
    return _write_record(room, name, "check-*.json", MAX_CHECKS, "check: ", check=bounded)
