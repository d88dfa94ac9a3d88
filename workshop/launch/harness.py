"""The recording harness: real ``workshop run`` runs recorded for lessons and benchmarks, with
the ranks bound to cores and, when asked, a busy process beside one rank (a straggler).

Both the capstone (``workshop.lessons.l09_diagnose.capstone``) and the straggler benchmark
(``benchmarks/straggler_signal.py``) record through :func:`record_run`, so a straggler is
injected one way everywhere::

    with cpu_lock_note():
        record = record_run(command, run_dir, rank_cores={0: 0, 1: 1}, hog_core=1)

Timing-sensitive recordings run under the machine's CPU lock
(``flock /tmp/workshop-cpu.lock ...``); :func:`under_cpu_lock` says whether they did.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from workshop.launch.quiet import BusyMachine, ForeignLoad, add_record, quietly

LOCK_FILE = "/tmp/workshop-cpu.lock"
#: The job every recorded diagnosis run shares (the capstone and the straggler benchmark):
#: 2 ranks, PyTorch, MNIST's offline subset, Gloo, 3 short epochs.
RUN_SHAPE = (
    "-np", "2", "--framework", "torch", "--data", "subset", "--controller", "gloo",
    "--epochs", "3", "--steps-per-epoch", "40", "--quiet",
)  # fmt: skip
#: The capstone's straggler (case 1): this many busy processes on the straggler's core, each in
#: a session of its own (about 3x slower compute: the compute ratio alone names it). The
#: straggler benchmark injects a milder one (one busy process, 75 % of the time: 1.2-1.9x,
#: which only the CPU-wait gap separates; data/benchmarks/straggler-cpu-wait).
HOGS = 3
#: The training programs whose processes are the ranks (``workshop.check.runner`` runs a
#: learner's script: ``workshop run --script``).
PROGRAMS = ("workshop.train.torch_train", "workshop.train.tf_train", "workshop.check.runner")


def stop_on_sigterm() -> None:
    """Make SIGTERM stop a recorder like Ctrl-C does (as SystemExit), so that the busy process
    and the run are stopped on the way out instead of left running."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))


def under_cpu_lock() -> bool:
    """True when another process holds the machine-wide CPU lock (our ``flock`` parent)."""
    with open(LOCK_FILE, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def rank_pids(run_dir: Path) -> dict[int, int]:
    """rank -> pid of the training processes that write into ``run_dir`` (from /proc)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = [a.decode() for a in (proc / "cmdline").read_bytes().split(b"\0")]
            if not any(p in argv for p in PROGRAMS) or "--run-dir" not in argv:
                continue
            where = Path(os.readlink(proc / "cwd")) / argv[argv.index("--run-dir") + 1]
            env = (proc / "environ").read_bytes().split(b"\0")
        except (OSError, IndexError):
            continue
        # horovodrun's ranks have HOROVOD_RANK; torchrun's (a DDP script) RANK
        ranks = [e.split(b"=", 1)[1] for e in env if e.startswith(b"HOROVOD_RANK=")]
        ranks = ranks or [e.split(b"=", 1)[1] for e in env if e.startswith(b"RANK=")]
        if where.resolve() == run_dir.resolve() and ranks and ranks[0].isdigit():
            found[int(ranks[0])] = int(proc.name)
    return found


def bind(pid: int, core: int) -> None:
    """Bind every thread of ``pid`` to ``core`` (threads started later inherit it)."""
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            os.sched_setaffinity(int(task.name), {core})
        except (OSError, ValueError):
            pass


def busy_process(core: int, duty: float = 1.0) -> subprocess.Popen:
    """A Python loop that keeps ``core`` busy until terminated (the competing work), in a
    session of its own, as another user's program is: Linux's autogroup scheduling shares a
    core between sessions first, so each busy process takes a share of its own.

    With ``duty`` below 1 it is busy that share of every 0.1 s and sleeps the rest (a program
    that computes in bursts: a milder straggler).
    """
    code = (
        f"import os, time\nos.sched_setaffinity(0, {{{core}}})\n"
        f"while True:\n"
        f"    end = time.perf_counter() + {0.1 * duty}\n"
        f"    while time.perf_counter() < end:\n        pass\n"
        f"    time.sleep({0.1 * (1 - duty)})\n"
    )
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


@contextmanager
def injected(
    run_dir: Path,
    rank_cores: dict[int, int] | None,
    hog_core: int | tuple[int, ...] | None,
    hogs: int = 1,
    duty: float = 1.0,
):
    """While the block runs: bind each rank of the run in ``run_dir`` to its core of
    ``rank_cores`` (as ``mpirun --bind-to core`` would; None: leave them to the scheduler)
    and, if ``hog_core`` is not None, keep ``hogs`` busy processes on that core (a tuple of
    cores: on each of them; a room's load), each in a session of its own and busy ``duty`` of
    the time (:func:`busy_process`).

    Yields a dict that ends up holding what was done: ``rank_cores`` (rank -> core, as
    strings, for the ranks seen), ``hog_core`` and, with several, ``hogs``.
    """
    cores = () if hog_core is None else (hog_core,) if isinstance(hog_core, int) else hog_core
    shown = hog_core if hog_core is None or isinstance(hog_core, int) else list(cores)
    done: dict = {"rank_cores": {}, "hog_core": shown}
    if hogs > 1:
        done["hogs"] = hogs
    if duty < 1:
        done["duty"] = duty
    stop = threading.Event()

    def binder() -> None:
        while not stop.is_set():
            for rank, pid in rank_pids(run_dir).items():
                if rank in rank_cores:
                    bind(pid, rank_cores[rank])
                    done["rank_cores"][str(rank)] = rank_cores[rank]
            stop.wait(0.1)

    busy = [busy_process(core, duty) for core in cores for _ in range(hogs)]
    thread = threading.Thread(target=binder, daemon=True) if rank_cores else None
    if thread:
        thread.start()
    try:
        yield done
    finally:
        stop.set()
        if thread:
            thread.join()
        for process in busy:
            process.terminate()
            process.wait()


def record_run(
    command: list[str],
    run_dir: Path,
    *,
    rank_cores: dict[int, int] | None = None,
    hog_core: int | tuple[int, ...] | None = None,
    hogs: int = 1,
    duty: float = 1.0,
    quiet: bool = False,
    attempts: int = 5,
) -> dict:
    """Run ``command`` (``["workshop", "run", ..., "--out", OUT, "--name", NAME]`` writing
    ``run_dir``) with :func:`injected` (``rank_cores``, ``hog_core``, ``hogs``, ``duty``), and
    return what happened.

    With ``quiet`` the run goes through the recording path of ``data/``
    (:func:`workshop.launch.quiet.quietly`): it starts on a quiet machine, the CPU other work
    took during it is measured (the busy processes :func:`injected` starts are this run's
    own, not other work), a disturbed run is deleted and recorded again (``attempts`` at
    most), and run.json gets the ``recording`` record, also returned as ``recording``.

    Returns:
        ``command``, ``seconds`` (wall time), ``loadavg_before``, ``loadavg_after``,
        ``foreign_cpu_s`` (CPU seconds the machine was busy during the run beyond this run's
        own processes: other users' work that competed with it; 0 on a quiet machine), and
        ``straggler`` (what :func:`injected` did) when ``rank_cores`` or ``hog_core`` was set.

    Raises:
        RuntimeError: the run exited non-zero (with its output).
        workshop.launch.quiet.BusyMachine: with ``quiet``, every attempt was disturbed.
    """
    if not quiet:
        return _record_once(command, run_dir, rank_cores, hog_core, hogs, duty)
    record, recording = quietly(
        lambda: _record_once(command, run_dir, rank_cores, hog_core, hogs, duty),
        label=lambda _: str(run_dir),
        discard=lambda _: shutil.rmtree(run_dir),
        attempts=attempts,
    )
    add_record(run_dir, recording)
    if not recording["quiet"]:
        raise BusyMachine(
            f"{run_dir}: every one of {attempts} attempts was disturbed (other work took "
            f"{recording['foreign_cores']:.2f} cores at the last); kept with quiet: false"
        )
    return record | {"recording": recording}


def _record_once(command, run_dir, rank_cores, hog_core, hogs, duty) -> dict:
    load_before = list(os.getloadavg())
    started = time.time()
    with ForeignLoad() as load, injected(run_dir, rank_cores, hog_core, hogs, duty) as done:
        launch = subprocess.Popen(
            [sys.executable, "-m", "workshop.cli", *command[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            output, _ = launch.communicate()
        except BaseException:
            # stopped (Ctrl-C, SIGTERM made SystemExit): workshop run stops its ranks on SIGTERM
            launch.terminate()
            launch.wait(timeout=30)
            raise
    if launch.returncode:
        raise RuntimeError(f"{' '.join(command)} exited with {launch.returncode}:\n{output}")
    seconds = round(time.time() - started, 2)
    foreign = round(load.foreign_cpu_s, 2)
    print(f"{run_dir}: {seconds:.1f} s, foreign load {foreign:.1f} CPU-s", flush=True)
    record = {
        "command": command,
        "seconds": seconds,
        "loadavg_before": load_before,
        "loadavg_after": list(os.getloadavg()),
        "foreign_cpu_s": foreign,
    }
    if rank_cores or hog_core is not None:
        record["straggler"] = done
    return record
