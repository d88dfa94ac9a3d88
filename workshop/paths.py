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
