"""One place that resolves the workshop's files, independent of the current directory."""

from __future__ import annotations

import os
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


def runs_dir() -> Path:
    """Default parent of new run directories: ``$WORKSHOP_RUNS`` or ``runs/`` of the repo."""
    return Path(os.environ.get("WORKSHOP_RUNS", REPO_DIR / "runs"))


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
