"""Launching a learner's script: horovodrun, python and torchrun with this environment's
programs, the output kept, the epoch lines read back.

What lesson 02 teaches with them: see :mod:`workshop.lessons`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from workshop.launch.horovodrun import (
    check_launch,
    horovodrun_command,
    horovodrun_program,
    rank_environment,
)
from workshop.launch.stopping import end_on_parent_death, stop_tree
from workshop.lessons.l02_first_program.edits import EPOCH_LINE, script_path

__all__ = [
    "CHECK_ARGS",
    "Launch",
    "LaunchError",
    "NOISE",
    "epochs",
    "horovodrun",
    "horovodrun_path",
    "python",
    "run_check",
    "torchrun",
    "torchrun_command",
]


@dataclass
class Launch:
    """A finished run of a lesson script: the command, exit code, output and wall time."""

    command: list[str]
    returncode: int
    output: str
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode == 0


class LaunchError(RuntimeError):
    """A lesson script failed; the message holds the end of its output."""


def horovodrun_path() -> str:
    """``horovodrun`` of this Python's environment, else the one on PATH.

    Raises:
        FileNotFoundError: Horovod is not installed
            (:class:`workshop.launch.horovodrun.HorovodNotFound`).
    """
    return horovodrun_program()


def _environment() -> dict[str, str]:
    return os.environ | rank_environment()


# TensorFlow's C++ start-up chatter (horovodrun imports TensorFlow too): not for learners.
NOISE = re.compile(
    r"^(?:\S+<std\w+>:)?(?:[IWE]\d{4} |WARNING: All log messages|"
    r"To enable the following instructions)"
)


def _run(command: list[str], timeout_s: float, cwd: str | os.PathLike | None) -> Launch:
    """Run ``command`` in a session of its own and wait for it. On a timeout, or when the
    wait is interrupted (Ctrl-C, a Jupyter interrupt, a signal that raises), the launcher and
    every process it started (ranks sit in sessions of their own) are stopped before the error
    goes on: nothing is left running."""
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            command, env=_environment(), cwd=cwd, stdout=out, stderr=err, text=True,
            start_new_session=True, preexec_fn=end_on_parent_death,
        )  # fmt: skip
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            stop_tree(process)
            out.seek(0)
            raise LaunchError(
                f"{' '.join(command)} ran past {timeout_s:g} s; last output:\n{out.read()[-3000:]}"
            ) from exc
        except BaseException:
            stop_tree(process)
            raise
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    lines = (stdout + stderr).splitlines()
    output = "\n".join(line for line in lines if not NOISE.search(line))
    run = Launch(command, process.returncode, output, time.perf_counter() - start)
    if not run.ok:
        raise LaunchError(
            f"{' '.join(command)} exited with {process.returncode}; last output:\n{output[-3000:]}"
        )
    return run


def horovodrun(
    script: str | os.PathLike,
    np: int = 2,
    args: tuple | list = (),
    *,
    controller: str = "gloo",
    timeout_s: float = 300,
    cwd: str | os.PathLike | None = None,
) -> Launch:
    """Start ``script`` as ``np`` Horovod processes on this machine and wait for it.

    The command is ``horovodrun -np NP -H localhost:NP --CONTROLLER python SCRIPT ARGS``.

    Args:
        script: the learner's file, or the name of a shipped lesson script.
        np: number of processes.
        args: the script's own arguments, e.g. ``("--epochs", "2")``.
        controller: ``gloo`` or ``mpi``.
        timeout_s: give up after this long.
        cwd: where to run (default: the current directory).

    Returns:
        The :class:`Launch`, with TensorFlow's start-up chatter removed from the output.

    Raises:
        LaunchError: non-zero exit or timeout, with the end of the output.
        ValueError: a bad ``np`` or ``controller``.
    """
    check_launch(np, controller)
    path = Path(script) if Path(script).is_file() else script_path(str(script))
    command = horovodrun_command(np, [sys.executable, str(path), *args], controller=controller)
    return _run(command, timeout_s, cwd)


def python(
    script: str | os.PathLike,
    args: tuple | list = (),
    *,
    timeout_s: float = 300,
    cwd: str | os.PathLike | None = None,
) -> Launch:
    """Run a (serial) lesson script as one plain Python process; see :func:`horovodrun`."""
    path = Path(script) if Path(script).is_file() else script_path(str(script))
    return _run([sys.executable, str(path), *map(str, args)], timeout_s, cwd)


def torchrun(
    script: str | os.PathLike,
    nproc: int = 2,
    args: tuple | list = (),
    *,
    timeout_s: float = 300,
    cwd: str | os.PathLike | None = None,
) -> Launch:
    """Start ``script`` with ``torchrun --standalone --nproc_per_node NPROC`` (PyTorch DDP)."""
    return _run(torchrun_command(script, nproc, args), timeout_s, cwd)


def torchrun_command(
    script: str | os.PathLike, nproc: int = 2, args: tuple | list = ()
) -> list[str]:
    """The command :func:`torchrun` runs: this Python's ``torchrun`` (else the one on PATH),
    ``--standalone --nproc_per_node NPROC``, the script (a file, or a shipped lesson script's
    name) and its arguments.

    Raises:
        FileNotFoundError: no torchrun.
    """
    beside = Path(sys.executable).parent / "torchrun"
    runner = str(beside) if beside.is_file() else shutil.which("torchrun")
    if not runner:
        raise FileNotFoundError(f"torchrun is neither next to {sys.executable} nor on PATH")
    path = Path(script) if Path(script).is_file() else script_path(str(script))
    return [runner, "--standalone", "--nproc_per_node", str(nproc), str(path), *map(str, args)]


def epochs(output: str) -> pd.DataFrame:
    """The ``epoch N: train loss ...`` lines the lesson scripts print, as a table.

    Returns:
        DataFrame ``epoch``, ``train_loss``, ``test_loss``, ``accuracy``, ``steps``,
        ``train_s`` (seconds of the epoch's training steps), ``samples_per_s`` (all ranks
        together), ``lr`` (at the epoch's last step).

    Raises:
        ValueError: the output has no epoch line.
    """
    rows = [
        {key: float(value) for key, value in found.groupdict().items()}
        for found in EPOCH_LINE.finditer(output)
    ]
    if not rows:
        raise ValueError(f"no 'epoch N: train loss ...' line in the output:\n{output[-1500:]}")
    table = pd.DataFrame(rows)
    return table.astype({"epoch": int, "steps": int})


#: The arguments ``workshop check`` runs a lesson script with ("{ckpt}": a fresh folder): the
#: script's defaults (2 epochs, a warmup of 1 epoch in the solution), 10 steps per epoch to
#: keep it short, and a checkpoint folder so that the saves can be judged.
CHECK_ARGS = {
    "check_skeleton": ("hvd_torch_skeleton.py", ("--steps", "10", "--checkpoint", "{ckpt}")),
    "check_solution": ("hvd_torch_solution.py", ("--steps", "10", "--checkpoint", "{ckpt}")),
}


def run_check(name: str, script: str | os.PathLike = ""):
    """Run ``workshop check`` as :data:`CHECK_ARGS` ``name`` says, on ``script`` if given (a
    learner's file) else on the shipped script; returns the ``check.Report``."""
    from workshop import check

    shipped, args = CHECK_ARGS[name]
    path = Path(script) if script else script_path(shipped)
    with tempfile.TemporaryDirectory() as ckpt:
        args = tuple(a.replace("{ckpt}", ckpt) for a in args)
        return check.check_script(path, np=2, framework="torch", args=args)
