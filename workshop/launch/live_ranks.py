"""Live Horovod ranks in a notebook: the same code on every rank, cell by cell (IPython Parallel).

The hardest idea for a newcomer is that a data-parallel program runs N times and only the
collectives tie the copies together. ``live_ranks.start`` makes that visible: it starts ``np``
IPython Parallel engines under Open MPI's ``mpiexec`` (as NERSC did for interactive Horovod),
initialises Horovod on each, and turns on ``%%px``, so a cell marked ``%%px`` runs on every rank
and shows each rank's output under its own label::

    from workshop import launch
    cluster = launch.live_ranks.start(np=2)   # prints how long the start took
    %%px
    import horovod.torch as hvd, torch
    print(hvd.rank(), hvd.allreduce(torch.tensor([hvd.rank() + 1.0])))
    cluster.stop()                            # or: with launch.live_ranks.start(2) as c: ...

Why IPython Parallel and not a launcher of our own: it is Jupyter's own parallel engine, its
``%%px`` magic shows each engine's stdout, stderr and errors per rank in the notebook, and it
starts MPI engines with the site's ``mpiexec`` as a batch job would.

Nothing outlives the notebook: ``stop()`` ends the engines, ``mpiexec`` and the controller, and
so does a watchdog process when the kernel that started them dies (a restart, or SIGKILL: the
kernel cannot clean up then, so the watchdog, in a session of its own, does).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

#: How each engine prepares itself: Horovod initialised, compute threads set, one copy of
#: Horovod's own messages instead of one per rank.
ENGINE_SETUP = """
import os
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import torch
torch.set_num_threads({threads})
import horovod.torch as hvd
hvd.init()
"""


@dataclass
class Ranks:
    """A running set of ranks: ``client`` (ipyparallel's), ``view`` (all engines),
    ``np``, ``start_s`` (how long the start took), and the processes to stop."""

    cluster: object
    client: object
    view: object
    np: int
    start_s: float
    pids: dict = field(default_factory=dict)
    watchdog: subprocess.Popen | None = None
    stopped: bool = False

    def spread(self, expression: str) -> float:
        """The largest difference, element by element, between the ranks' values of
        ``expression`` (a tensor or array on every rank): 0 when the replicas agree."""
        import numpy as np

        self.view.execute(f"_spread_value = torch.as_tensor({expression}).detach().numpy()")
        values = [np.asarray(v) for v in self.view.pull("_spread_value")]
        return float(max(np.abs(v - values[0]).max() for v in values))

    def stop(self) -> float:
        """Stop the engines, mpiexec, the controller and the watchdog; returns the seconds
        it took. Safe to call twice."""
        if self.stopped:
            return 0.0
        began = time.perf_counter()
        try:
            self.client.close()
            self.cluster.stop_cluster_sync()
        finally:
            _kill_all(list(self.pids.get("engines", [])) + [self.pids.get("controller")])
            if self.watchdog is not None:
                self.watchdog.terminate()
                self.watchdog.wait(timeout=10)
            self.stopped = True
        took = time.perf_counter() - began
        print(f"stopped {self.np} ranks in {took:.1f} s")
        return took

    def __enter__(self) -> Ranks:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _engine_pids() -> list[int]:
    """On an engine: its pid and its descendants' (runs there, so defined at module level)."""
    import psutil

    me = psutil.Process()
    return [me.pid, *(child.pid for child in me.children(recursive=True))]


def _kill_all(pids: list) -> None:
    for pid in pids:
        if not pid:
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue


def mpi_args(np: int, cores: int | None = None) -> list[str]:
    """mpiexec's options: oversubscribe when there are more ranks than cores (Binder has one
    core for 2 ranks), and no binding (the ranks share the notebook's cores)."""
    if cores is None and hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))  # what this process may use (taskset, a cpuset)
    cores = cores or os.cpu_count() or 1
    args = ["--bind-to", "none"]
    if np > cores:
        args.append("--oversubscribe")
    return args


def start(np: int = 2, *, threads_per_rank: int = 1, timeout_s: float = 90.0) -> Ranks:
    """Start ``np`` Horovod ranks as IPython Parallel MPI engines and activate ``%%px``.

    Args:
        np: the number of ranks (more than the cores are allowed: they share them).
        threads_per_rank: compute threads of each rank (torch and OpenMP).
        timeout_s: how long the engines may take to connect.

    Returns:
        A :class:`Ranks`; ``stop()`` ends it (also usable as a context manager).

    Raises:
        RuntimeError: the engines did not start (mpiexec's output in the message).
    """
    import ipyparallel as ipp
    from traitlets.config import Config

    if np < 1:
        raise ValueError(f"live_ranks.start: np must be at least 1, not {np}")
    began = time.perf_counter()
    env = {"OMP_NUM_THREADS": str(threads_per_rank), "TF_USE_LEGACY_KERAS": "1"}
    if os.geteuid() == 0:  # containers, Binder's build, CI: Open MPI refuses root otherwise
        env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    os.environ.update(env)  # the launcher's mpiexec inherits this process's environment
    config = Config()
    config.MPILauncher.mpi_args = mpi_args(np)
    cluster = ipp.Cluster(engines="mpi", n=np, controller_ip="127.0.0.1", config=config,
                          log_level=40)  # fmt: skip
    try:
        client = cluster.start_and_connect_sync(activate=False)
        client.wait_for_engines(np, timeout=timeout_s)
    except BaseException as exc:
        cluster.stop_cluster_sync()
        raise RuntimeError(f"live_ranks.start: the {np} engines did not start: {exc}") from exc
    view = client[:]
    view.block = True
    view.execute(ENGINE_SETUP.format(threads=threads_per_rank))
    pids = {
        # each engine and what it started (its nanny: ipyparallel's supervisor of the engine)
        "engines": [pid for pids in view.apply_sync(_engine_pids) for pid in pids],
        "controller": getattr(getattr(cluster.controller, "process", None), "pid", None),
    }
    ranks = Ranks(cluster, client, view, np, 0.0, pids)
    ranks.watchdog = _watch(os.getpid(), [*pids["engines"], pids["controller"]], cluster)
    try:
        view.activate()  # %%px, %px, %autopx on this view
    except Exception:  # noqa: BLE001 - outside IPython there is no magic to register
        pass
    ranks.start_s = time.perf_counter() - began
    got = sorted(view.apply_sync(lambda: __import__("horovod.torch").torch.rank()))
    print(f"started {np} ranks in {ranks.start_s:.1f} s (Horovod ranks {got}); "
          "mark a cell %%px to run it on every rank")  # fmt: skip
    return ranks


def _watch(kernel: int, pids: list, cluster) -> subprocess.Popen:
    """A process in a session of its own that kills the ranks, mpiexec and the controller
    when ``kernel`` (this process) is gone."""
    for launcher in cluster.engines.values():  # mpiexec, one per engine set
        pid = getattr(getattr(launcher, "process", None), "pid", None)
        if pid:
            pids.append(pid)
    watchdog = [sys.executable, "-m", "workshop.launch.live_ranks", str(kernel)]
    return subprocess.Popen(
        [*watchdog, *(str(p) for p in pids if p)],
        start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _watchdog(kernel: int, pids: list[int]) -> None:
    while Path(f"/proc/{kernel}").exists():
        try:
            state = Path(f"/proc/{kernel}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state == "Z":  # dead, not yet reaped by its parent
            break
        time.sleep(0.5)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                continue
        time.sleep(2)


if __name__ == "__main__":
    _watchdog(int(sys.argv[1]), [int(p) for p in sys.argv[2:]])
