"""Build and preload the workshop's own MPI profiler (``workshop/launch/mpiprof/mpiprof.c``).

The profiler is a small PMPI interposition library: preloaded into every rank
(``LD_PRELOAD``), it counts the calls, bytes and time of the MPI routines and at
``MPI_Finalize`` writes ``mpi_profile.<jobid>.<rank>`` files in the layout of IBM's mpitrace,
which :func:`workshop.readers.mpitrace.read_mpitrace` reads back.

The library is compiled with ``mpicc`` on first use into
``workshop.paths.cache_dir()/lib/libmpiprof-<key>.so``, where ``<key>`` is a hash of the C
source, the MPI version and the ``mpicc`` command line, so a change of either rebuilds it and
an unchanged setup reuses it.

Job id in the file names (the same for every rank of a launch), first found of:
``WORKSHOP_MPI_PROFILE_JOBID`` (set by :func:`launch_env`), ``COBALT_JOBID``, ``PBS_JOBID``,
``SLURM_JOB_ID``; :func:`launch_env` falls back to the launching process's id (the pid of the
``workshop run`` process), and the library itself, when started without :func:`launch_env`,
to rank 0's process id.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from workshop import paths
from workshop.launch.programs import find_program

SOURCE = Path(__file__).resolve().parent / "mpiprof" / "mpiprof.c"
EXERCISE_SOURCE = Path(__file__).resolve().parent / "mpiprof" / "mpiprof_exercise.c"

#: Environment variable the library reads for the output directory.
DIR_VAR = "WORKSHOP_MPI_PROFILE_DIR"
#: Environment variable the library reads for the job id in the file names.
JOBID_VAR = "WORKSHOP_MPI_PROFILE_JOBID"
#: Batch-system job id variables, in the order they are tried.
BATCH_JOBID_VARS = ("COBALT_JOBID", "PBS_JOBID", "SLURM_JOB_ID")


class ProfilerBuildError(RuntimeError):
    """The profiler library could not be built (no mpicc, or the compile failed)."""


def _mpicc() -> str:
    mpicc = find_program(os.environ.get("MPICC", "mpicc"))
    if mpicc is None:
        raise ProfilerBuildError(
            "mpicc not found: install Open MPI's development files "
            "(Debian/Ubuntu: apt-get install libopenmpi-dev openmpi-bin), or set MPICC"
        )
    return mpicc


def _run_text(cmd: list[str]) -> str:
    """stdout of a command run without LD_PRELOAD (whose loader messages would go to stderr
    and change the build key); empty when it cannot run."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=60, check=False, env=env
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.strip()


def mpi_version() -> str:
    """The MPI implementation's version line, e.g. ``mpirun (Open MPI) 4.1.4``.

    Returns:
        The first line of ``mpirun --version`` (empty string when mpirun is missing).
    """
    mpirun = find_program("mpirun")
    if mpirun is None:
        return ""
    lines = _run_text([mpirun, "--version"]).splitlines()
    return lines[0] if lines else ""


def build_key() -> str:
    """Hash of the C source, the MPI version and the ``mpicc -show`` command line.

    Returns:
        12 hex digits naming the built library.
    """
    mpicc = _mpicc()
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(mpi_version().encode())
    digest.update(_run_text([mpicc, "-show"]).encode())
    return digest.hexdigest()[:12]


def lib_dir() -> Path:
    """Folder of built libraries: ``cache_dir()/lib``."""
    return paths.cache_dir() / "lib"


def _compile(sources: list[Path], target: Path, extra: list[str]) -> None:
    """Compile into a temporary file next to ``target``, then rename it (atomic, so two
    concurrent builds never leave a half-written library)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    cmd = [_mpicc(), "-O2", "-Wall", *extra, "-o", str(tmp), *map(str, sources)]
    try:
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=300, check=False, env=env
        )
        if proc.returncode != 0:
            raise ProfilerBuildError(
                f"compiling {', '.join(map(str, sources))} failed (exit {proc.returncode}):\n"
                f"$ {' '.join(cmd)}\n{proc.stderr.strip()}"
            )
        tmp.chmod(0o755)
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


def build(*, force: bool = False, progress: Callable[[str], None] | None = None) -> Path:
    """Build the profiler library if it is not built yet for this source and MPI.

    Args:
        force: rebuild even if the library exists.
        progress: called with a line of text before a compile starts (e.g. ``print``).

    Returns:
        Path of ``libmpiprof-<key>.so``.

    Raises:
        ProfilerBuildError: no mpicc, or the compile failed (the message has the compiler's
            output).
    """
    target = lib_dir() / f"libmpiprof-{build_key()}.so"
    if target.exists() and not force:
        return target
    if progress is not None:
        progress(f"compiling {SOURCE.name} with mpicc -> {target}")
    _compile([SOURCE], target, ["-fPIC", "-shared"])
    return target


def library_path() -> Path:
    """Path of the built profiler library, building it first if needed.

    Returns:
        Path of the shared library to preload.

    Raises:
        ProfilerBuildError: as :func:`build`.
    """
    return build()


def exercise_path() -> Path:
    """Path of the test program ``mpiprof_exercise`` (built on first use, like the library).

    Returns:
        Path of the executable (see the comment at the top of ``mpiprof_exercise.c``).
    """
    digest = hashlib.sha256(EXERCISE_SOURCE.read_bytes())
    digest.update(mpi_version().encode())
    target = lib_dir() / f"mpiprof_exercise-{digest.hexdigest()[:12]}"
    if not target.exists():
        _compile([EXERCISE_SOURCE], target, ["-pthread"])
    return target


def job_id(environ: dict[str, str] | None = None) -> str:
    """The job id for profile file names.

    Args:
        environ: environment to look in (default ``os.environ``).

    Returns:
        The first non-empty of ``COBALT_JOBID``, ``PBS_JOBID``, ``SLURM_JOB_ID``; else this
        process's id (the launcher's pid).
    """
    env = os.environ if environ is None else environ
    for name in BATCH_JOBID_VARS:
        value = env.get(name, "").strip()
        if value:
            # the same rule as the library: keep file names portable
            return re.sub(r"[^A-Za-z0-9._-]", "_", value)[:63]
    return str(os.getpid())


def launch_env(run_dir: Path) -> dict[str, str]:
    """Environment variables a launcher must export to every rank to profile its MPI calls.

    The launcher passes each with ``-x NAME`` (mpirun) so that every rank preloads the
    profiler and writes ``run_dir/mpi_profile.<jobid>.<rank>``. ``SAVE_ALL_TASKS`` is passed
    through when set (``yes``: every rank writes a file, not only rank 0 and the ranks with the
    minimum, median and maximum communication time).

    Args:
        run_dir: the run directory the profiles go into (created by the library if missing).

    Returns:
        ``{"LD_PRELOAD": ..., "WORKSHOP_MPI_PROFILE_DIR": ..., "WORKSHOP_MPI_PROFILE_JOBID":
        ...}`` (plus ``SAVE_ALL_TASKS`` when set). An existing ``LD_PRELOAD`` is kept after
        the profiler.

    Raises:
        ProfilerBuildError: the library could not be built.
    """
    preload = str(library_path())
    existing = os.environ.get("LD_PRELOAD", "").strip()
    if existing and preload not in existing.replace(":", " ").split():
        preload = f"{preload}:{existing}"
    env = {
        "LD_PRELOAD": preload,
        DIR_VAR: str(Path(run_dir).resolve()),
        JOBID_VAR: job_id(),
    }
    if os.environ.get("SAVE_ALL_TASKS"):
        env["SAVE_ALL_TASKS"] = os.environ["SAVE_ALL_TASKS"]
    return env
