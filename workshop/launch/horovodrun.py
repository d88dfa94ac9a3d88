"""Starting Horovod ranks: the one place that finds ``horovodrun``, writes its command line and
the environment every rank needs. ``workshop run`` (:mod:`workshop.launch.run`), the lessons'
launcher (:mod:`workshop.lessons.l02_first_program.scripts`) and ``workshop check``
(:mod:`workshop.check.launch`) all start their ranks through it.

    >>> horovodrun_command(2, ["python", "train.py"], program="horovodrun")
    ['horovodrun', '-np', '2', '-H', 'localhost:2', '--gloo', 'python', 'train.py']
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from workshop.launch.programs import find_program
from workshop.runspec import CONTROLLERS

__all__ = [
    "CONTROLLERS",
    "RANK_ENV",
    "HorovodNotFound",
    "check_launch",
    "horovodrun_command",
    "horovodrun_program",
    "rank_environment",
]


#: What every rank gets: output line by line (ranks' lines interleave in the launcher's
#: output), tf-keras for Horovod 0.28 with TensorFlow >= 2.16 (Keras 3 variables break it,
#: upstream issue 4290), and TensorFlow's C++ start-up chatter off.
RANK_ENV = {"PYTHONUNBUFFERED": "1", "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}

#: Open MPI refuses to start as root without these (containers, Binder, CI).
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


class HorovodNotFound(FileNotFoundError):
    """``horovodrun`` is neither next to this Python nor on PATH."""


def horovodrun_program() -> str:
    """The ``horovodrun`` of this Python's environment, else the one on PATH.

    Raises:
        HorovodNotFound: (a ``FileNotFoundError``) Horovod is not installed, with the fix.
    """
    found = find_program("horovodrun")
    if not found:
        raise HorovodNotFound(
            f"horovodrun is neither next to {sys.executable} nor on PATH: Horovod is not "
            "installed here (bash scripts/setup.sh builds it; then use .venv's Python)"
        )
    return found


def rank_environment(*, threads: int | None = None) -> dict[str, str]:
    """The variables to add to the environment of a launch: :data:`RANK_ENV`, the threads of
    each rank's math libraries (``OMP_NUM_THREADS``) when ``threads`` is given, and Open MPI's
    permission to run as root when this process is root."""
    env = dict(RANK_ENV)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    if os.geteuid() == 0:
        env |= ROOT_ENV
    return env


def check_launch(np: int, controller: str) -> None:
    """Raise ``ValueError`` for a rank count below 1 or a controller other than gloo / mpi
    (before anything is prepared: callers that resolve files first call it early)."""
    if controller not in CONTROLLERS:
        raise ValueError(f"controller must be 'gloo' or 'mpi', not {controller!r}")
    if np < 1:
        raise ValueError(f"np must be >= 1, got {np}")


def horovodrun_command(
    np: int,
    argv: Sequence[str],
    *,
    controller: str = "gloo",
    hosts: str | None = None,
    interface: str | None = None,
    flags: Sequence[str] = (),
    program: str | None = None,
) -> list[str]:
    """``horovodrun -np NP -H HOSTS [--network-interface IF] --CONTROLLER FLAGS ARGV``.

    Args:
        np: number of ranks.
        argv: what every rank runs, e.g. ``[sys.executable, "train.py", "--epochs", "2"]``.
        controller: ``gloo`` or ``mpi``.
        hosts: horovodrun's host list (default ``localhost:NP``, all ranks on this machine).
        interface: the network interface between hosts (``--network-interface``).
        flags: more horovodrun flags (Horovod's knobs), before ``argv``.
        program: the horovodrun to run (default :func:`horovodrun_program`).

    Raises:
        ValueError: a bad ``np`` or ``controller``.
        HorovodNotFound: ``program`` not given and Horovod is not installed.
    """
    check_launch(np, controller)
    return [
        program or horovodrun_program(),
        "-np",
        str(np),
        "-H",
        hosts or f"localhost:{np}",
        *(["--network-interface", interface] if interface else []),
        f"--{controller}",
        *flags,
        *map(str, argv),
    ]
