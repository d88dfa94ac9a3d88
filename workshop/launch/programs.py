"""Finding the programs a run starts (``horovodrun``, ``mpirun``) and the PATH its children
get: the ground floor of :mod:`workshop.launch`, imported by the launchers, the profiler and
``workshop doctor`` alike."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def find_program(name: str) -> str | None:
    """Path of an executable, looked up next to the running Python first, then on PATH.

    ``.venv/bin/workshop``, a JupyterLab kernel or an IDE run the environment's Python without
    ``source .venv/bin/activate``, so PATH may lack ``.venv/bin`` where ``horovodrun`` lives.
    (The folder is not resolved: ``.venv/bin/python`` is a link to the base interpreter.)

    Args:
        name: program name, e.g. ``horovodrun`` or ``mpirun``.

    Returns:
        The path, or None when neither place has an executable of that name.
    """
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def program_path_env(environ: dict[str, str] | None = None) -> str:
    """PATH for child processes: the running Python's folder first, then ``environ``'s PATH,
    so what horovodrun starts finds the same environment's programs, activated or not."""
    path = (os.environ if environ is None else environ).get("PATH", os.defpath)
    folder = str(Path(sys.executable).parent)
    parts = path.split(os.pathsep)
    return path if parts[:1] == [folder] else os.pathsep.join([folder, *parts])
