"""The learner's side of the room: small records of what this session did, in a shared folder.

A learner opts in with one setting, ``WORKSHOP_ROOM=DIR`` (the instructor's JupyterHub config,
or ``os.environ["WORKSHOP_ROOM"] = "/shared/room"`` in a first cell). Then each exercise check
(:func:`workshop.exercises.check`), each ``workshop run`` and each ``workshop check`` writes
under ``DIR/<learner>/``;
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

Every write is a temporary file in the same folder then :func:`os.replace`: a reader sees the
old or the new file, never half of one. Sizes are bounded: :data:`MAX_EXERCISES` exercises per
session, :data:`MAX_SESSIONS` session files, :data:`MAX_RUNS` run files and :data:`MAX_CHECKS`
check files per learner (the oldest are removed), :data:`MAX_TEXT` characters per message.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

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

_SESSION = {"id": f"{int(time.time())}-{os.getpid()}-{uuid.uuid4().hex[:8]}", "exercises": {}}
_WARNED: set[str] = set()


def room_dir() -> Path | None:
    """The room folder from ``$WORKSHOP_ROOM``, or None when this learner has not opted in."""
    value = os.environ.get(ROOM_ENV, "")
    return Path(value).expanduser() if value else None


def learner_name() -> str:
    """This learner's name in the room: ``$JUPYTERHUB_USER`` (one Unix account may serve
    several hub users), else the login name.

    Raises:
        ValueError: a name that is not a plain folder name (letters, digits, ``._-``).
    """
    name = os.environ.get("JUPYTERHUB_USER") or getpass.getuser()
    if not LEARNER_NAME.match(name):
        raise ValueError(
            f"learner name {name!r} cannot name a folder in the room: letters, digits, . _ - only"
        )
    return name


def write_json(path: Path, payload: dict) -> None:
    """Write ``payload`` to ``path`` atomically (temporary file, then :func:`os.replace`).

    Raises:
        ValueError: the JSON is over :data:`MAX_FILE_BYTES`.
        OSError: the folder cannot be written.
    """
    text = json.dumps(payload, indent=1, sort_keys=True)
    if len(text) > MAX_FILE_BYTES:
        raise ValueError(f"room record {path.name} is {len(text)} bytes, over {MAX_FILE_BYTES}")
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), 0o640)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _learner_dir(room: Path) -> Path:
    if not room.is_dir():
        raise FileNotFoundError(f"{ROOM_ENV}={room}: no such folder (the instructor makes it)")
    folder = room / learner_name()
    folder.mkdir(mode=0o750, exist_ok=True)
    return folder


def _prune(folder: Path, pattern: str, keep: int, current: Path) -> None:
    files = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime)
    for old in [p for p in files if p != current][: max(0, len(files) - keep)]:
        old.unlink(missing_ok=True)


def _write_record(room: Path, name: str, pattern: str, keep: int, problem: str, **fields) -> bool:
    """Write ``fields`` as this learner's ``name`` (atomic) and keep the newest ``keep`` files
    of ``pattern``: True when written; False, said once on stderr after ``problem``, when the
    room could not be written."""
    try:
        folder = _learner_dir(room)
        path = folder / name
        write_json(path, _payload(folder, **fields))
        _prune(folder, pattern, keep, path)
    except (OSError, ValueError) as exc:
        _warn_once(f"{problem}{exc}")
        return False
    return True


def _warn_once(problem: str) -> None:
    # A room that cannot be written must not break the lesson: say so once, go on.
    if problem not in _WARNED:
        _WARNED.add(problem)
        print(f"(room: not recorded: {problem})", file=sys.stderr)


def _payload(folder: Path, **fields) -> dict:
    return {"format": FORMAT, "learner": folder.name, "written_s": time.time(), **fields}


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
