"""One place that resolves the workshop's files, independent of the current directory."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent


def data_dir() -> Path:
    """The recorded-samples folder: ``$WORKSHOP_DATA`` if set, else ``data/`` of the repo."""
    return Path(os.environ.get("WORKSHOP_DATA", REPO_DIR / "data"))


def data_path(*parts: str) -> Path:
    """Path of a recorded sample, e.g. ``data_path("runs", "torch-mnist-gloo-np2")``.

    Raises:
        FileNotFoundError: naming the missing path and the data folder searched.
    """
    path = data_dir().joinpath(*parts)
    if not path.exists():
        raise FileNotFoundError(
            f"no recorded sample {'/'.join(parts)!r} in {data_dir()} "
            "(set WORKSHOP_DATA to another data folder, or record one with `workshop run`)"
        )
    return path


def cache_dir() -> Path:
    """Per-user cache (datasets, built libraries): ``$WORKSHOP_CACHE`` or
    ~/.cache/horovod-workshop."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "horovod-workshop"
    path = Path(os.environ.get("WORKSHOP_CACHE", default))
    path.mkdir(parents=True, exist_ok=True)
    return path


RUNS_ENV = "WORKSHOP_RUNS"
HOME_RUNS = "workshop-runs"


class RunsDirError(ValueError):
    """The run folder cannot be written; the message names it and the variable to set."""


@dataclass(frozen=True)
class RunsChoice:
    """Where this user's new runs go (:func:`choose_runs_dir`).

    ``folder``: the folder; ``rule``: why this one, in words; ``problem``: "" when this user
    can write it, else a one-line reason naming the folder and ``$WORKSHOP_RUNS``.
    """

    folder: Path
    rule: str
    problem: str


def _enclosing_clone(folder: Path) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


def _owner(path: Path) -> str:
    try:
        import pwd

        return pwd.getpwuid(path.stat().st_uid).pw_name
    except (ImportError, KeyError):
        return f"uid {path.stat().st_uid}"


def writable_problem(folder: Path) -> str:
    """ "" when this user can create run directories in ``folder`` (it exists and is writable,
    or its nearest existing parent is), else why not, naming the folder."""
    if folder.exists():
        if not folder.is_dir():
            return f"{folder} is a file, not a folder"
        existing = folder
    else:
        existing = next((p for p in folder.parents if p.exists()), Path("/"))
        if not existing.is_dir():
            return f"cannot create {folder}: {existing} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        mine = "" if existing == folder else f" (cannot create it in {existing})"
        return f"cannot write {folder}{mine}: permission denied, owned by {_owner(existing)}"
    return ""


def choose_runs_dir(cwd: Path | None = None) -> RunsChoice:
    """Where this user's new run directories go, and whether they can be written there.

    The rule, first match wins (docs/run-directory.md):

    1. ``$WORKSHOP_RUNS`` when set (used as given: an unwritable one is a problem, not skipped);
    2. inside a git clone owned by this user: ``runs/`` at the clone's top (a notebook in
       ``notebooks/`` and a shell at the top share one folder; git ignores it);
    3. outside any clone: ``./runs`` under the current folder when this user can write it;
    4. otherwise ``~/workshop-runs`` (inside someone else's clone, or a read-only folder): a
       learner on a shared install never writes into the clone of the person who installed it.

    Args:
        cwd: the current folder (default: :func:`os.getcwd`).

    Returns:
        A :class:`RunsChoice`; nothing is created.
    """
    if os.environ.get(RUNS_ENV):
        folder = Path(os.environ[RUNS_ENV]).expanduser()
        return RunsChoice(folder, f"${RUNS_ENV}", writable_problem(folder))
    try:
        here = Path(cwd) if cwd else Path.cwd()
    except FileNotFoundError:  # the current folder was removed
        here = Path.home()
    clone = _enclosing_clone(here)
    if clone is not None and clone.stat().st_uid == os.getuid():
        folder = clone / "runs"
        if not writable_problem(folder):
            return RunsChoice(folder, f"runs/ of your clone {clone}", "")
    elif clone is None and not writable_problem(here / "runs"):
        return RunsChoice(here / "runs", "./runs under the current folder", "")
    folder = Path.home() / HOME_RUNS
    rule = f"~/{HOME_RUNS}"
    if clone is not None and clone.stat().st_uid != os.getuid():
        rule += f" (the current folder is in {_owner(clone)}'s clone {clone})"
    else:
        rule += " (cannot write ./runs here)"
    problem = writable_problem(folder)
    if problem:
        problem += f": set {RUNS_ENV} to a folder of yours, or give --out"
    return RunsChoice(folder, rule, problem)


def runs_dir() -> Path:
    """Default parent of new run directories, for this user: see :func:`choose_runs_dir`.

    Raises:
        RunsDirError: this user cannot write that folder (one line: the folder and what to set).
    """
    choice = choose_runs_dir()
    if choice.problem:
        problem = choice.problem
        if RUNS_ENV not in problem:
            problem += f": set {RUNS_ENV} to a folder of yours, or give --out"
        raise RunsDirError(problem)
    return choice.folder


def run_or_recording(run_dir: str | os.PathLike, recording: str, *, need: str = "") -> Path:
    """The folder a notebook analyses: the learner's ``RUN_DIR`` when set, else a recording.

    An empty ``run_dir`` means "use the recorded sample" (the notebooks' default); a non-empty
    one must exist and hold what the notebook reads: there is no silent fallback to the
    recording when it does not.

    Args:
        run_dir: the notebook's ``RUN_DIR`` parameter ("" for the recording).
        recording: the recorded sample under ``data/``, e.g. ``"timelines/tl-torch-gloo-np2"``.
        need: a glob the folder must match, e.g. ``"timeline.json"`` or ``"mpi_profile.*"``.

    Returns:
        The folder, after printing which one is analysed.

    Raises:
        FileNotFoundError: ``run_dir`` is missing, not a folder, or lacks ``need``.
    """
    if not run_dir:
        source = data_path(*recording.split("/"))
        print(f"RUN_DIR is empty: analysing the recorded sample {source}")
        return source
    source = Path(run_dir).expanduser()
    if not source.is_dir():
        raise FileNotFoundError(
            f"RUN_DIR {str(source)!r} is not a folder (from {Path.cwd()}); give a run "
            f'directory written by `workshop run`, or RUN_DIR = "" for {recording!r}'
        )
    if need and not any(source.glob(need)):
        raise FileNotFoundError(
            f"RUN_DIR {str(source)!r} has no {need!r}: this notebook reads that file "
            f"(e.g. the recording {recording!r} has it)"
        )
    print(f"analysing your run directory {source}")
    return source
