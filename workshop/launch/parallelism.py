"""Data vs model parallelism with real processes on one CPU machine (no GPU, no Horovod).

:class:`Workers` starts N Python processes that join one ``torch.distributed`` group (Gloo
backend, TCP on 127.0.0.1), the way ``horovodrun`` starts ranks, and keeps them for several
experiments so that the start-up (importing torch: seconds) is paid once. Each experiment
trains the same small multi-layer perceptron on the same synthetic data and returns what it
measured:

* :meth:`Workers.single_process` -- rank 0 alone, the whole global batch (the reference);
* :meth:`Workers.data_parallel` -- every rank holds the whole model and 1/N of each batch;
  the gradients are averaged with one ``all_reduce`` per step (one fused buffer, as Horovod's
  tensor fusion does);
* :meth:`Workers.model_parallel` -- the layers are split into N contiguous stages, one per
  rank; activations go forward with ``send``/``recv``, their gradients come back the same way.
  With ``microbatches`` > 1 every batch is cut into micro-batches that flow through the stages
  one after another (GPipe), so the stages overlap and wait less.

The numbers are comparable: with equal shards, the mean of the shard gradients *is* the
gradient of the global batch, so all three runs end with the same parameters up to float32
rounding (the notebook shows the difference).

The processes run :mod:`workshop.train.parallelism_demo`; this module starts them, plans the
pipeline stages and gathers the results. Command line (prints a summary)::

    workshop parallelism --np 2 --steps 10

Every process uses one compute thread: one worker = one core, as on the 2-core machine the
workshop is written for. Timestamps come from ``time.perf_counter`` (CLOCK_MONOTONIC on Linux,
shared by all processes), so the events of different ranks share one time axis.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import asdict
from multiprocessing.connection import Connection

import numpy as np
import pandas as pd

from workshop.train.parallelism_demo import DemoConfig
from workshop.train.parallelism_demo import build_blocks as _build_blocks  # noqa: F401 (tests)

__all__ = ["DemoConfig", "Workers", "run_all", "split_layers", "stage_bounds"]

DEFAULT_CONFIG = DemoConfig()


def split_layers(costs: list[float], stages: int) -> list[tuple[int, int]]:
    """Cut a chain of layers into contiguous stages with the smallest maximum stage cost.

    Args:
        costs: cost of every layer in order (e.g. multiply-accumulates).
        stages: number of stages (processes), 1 <= stages <= len(costs).

    Returns:
        ``[(start, stop), ...]`` layer index ranges, one per stage.

    >>> split_layers([1, 2, 2, 1, 0], 2)
    [(0, 2), (2, 5)]
    """
    n = len(costs)
    if not 1 <= stages <= n:
        raise ValueError(f"split_layers: cannot cut {n} layers into {stages} stages")
    prefix = np.concatenate([[0.0], np.cumsum(costs)])
    # best[k][i]: smallest max-stage cost of layers [0, i) cut into k stages
    best = np.full((stages + 1, n + 1), np.inf)
    cut = np.zeros((stages + 1, n + 1), dtype=int)
    best[0][0] = 0.0
    for k in range(1, stages + 1):
        for i in range(k, n + 1):
            for j in range(k - 1, i):
                value = max(best[k - 1][j], prefix[i] - prefix[j])
                if value < best[k][i]:
                    best[k][i], cut[k][i] = value, j
    bounds, i = [], n
    for k in range(stages, 0, -1):
        bounds.append((int(cut[k][i]), int(i)))
        i = int(cut[k][i])
    return bounds[::-1]


def stage_bounds(widths: tuple[int, ...], stages: int) -> list[tuple[int, int]]:
    """Which Linear layers of the MLP each pipeline stage holds (balanced by MACs)."""
    return split_layers([a * b for a, b in zip(widths[:-1], widths[1:], strict=True)], stages)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Workers:
    """N real processes in one Gloo process group, kept alive for several experiments.

    The processes are started with ``python -m workshop.train.parallelism_demo ...`` and
    connect back to this one over a local socket. Use as a context manager (they are stopped
    at the end; they also stop by themselves when this process goes away)::

        with Workers(2) as workers:
            dp = workers.data_parallel(DemoConfig(steps=10))

    Args:
        np: number of processes (>= 1; the model-parallel demo needs >= 2).
        threads: compute threads per process.
        timeout_s: how long any collective, or the parent waiting for a result, may take
            before the experiment is declared failed.

    Raises:
        RuntimeError: if a process fails to start, naming the rank and its traceback.
    """

    def __init__(self, np: int = 2, *, threads: int = 1, timeout_s: float = 120.0):
        if np < 1:
            raise ValueError(f"Workers: np must be >= 1, got {np}")
        self.np, self.threads, self.timeout_s = np, threads, timeout_s
        self.last_foreign_cores: float | None = None  # other work during the last experiment
        started = time.perf_counter()
        token = secrets.token_hex(16)
        env = dict(os.environ, WORKSHOP_DEMO_TOKEN=token, OMP_NUM_THREADS=str(threads))
        self._conns: list = [None] * np
        self._procs: list[subprocess.Popen] = []
        self._logs = [tempfile.TemporaryFile() for _ in range(np)]
        self._finalizer = weakref.finalize(self, _stop, self._procs, self._conns, self._logs)
        with socket.create_server(("127.0.0.1", 0)) as server:
            server.settimeout(0.5)
            port, parent_port = _free_port(), server.getsockname()[1]
            for rank in range(np):
                cmd = [
                    sys.executable,
                    "-m",
                    "workshop.train.parallelism_demo",
                    str(rank),
                    str(np),
                    str(port),
                    str(threads),
                    str(parent_port),
                    str(timeout_s),
                ]
                self._procs.append(
                    subprocess.Popen(
                        cmd,
                        env=env,
                        stdout=self._logs[rank],
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                    )
                )
            try:
                self._accept(server, token)
                ready = self._collect("start")
            except BaseException:
                self.close()
                raise
        self.startup_s = time.perf_counter() - started
        self.info = pd.DataFrame([{"rank": r, **info} for r, info in enumerate(ready)])

    def _accept(self, server: socket.socket, token: str) -> None:
        """Wait until every rank has connected back (or one died / the time is up)."""
        deadline = time.monotonic() + self.timeout_s
        while any(c is None for c in self._conns):
            self._check_alive("start")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"parallelism demo: the processes did not connect within "
                    f"{self.timeout_s:.0f} s{self._logs_tail()}"
                )
            try:
                sock, _ = server.accept()
            except TimeoutError:
                continue
            sock.settimeout(None)
            conn = Connection(sock.detach())
            _, rank, their_token = conn.recv()
            if their_token != token or not 0 <= rank < self.np or self._conns[rank]:
                conn.close()  # not one of ours
                continue
            self._conns[rank] = conn

    def _check_alive(self, what: str) -> None:
        dead = [(r, p.returncode) for r, p in enumerate(self._procs) if p.poll() is not None]
        if dead:
            raise RuntimeError(
                f"parallelism demo, {what}: process(es) exited: "
                + ", ".join(f"rank {r} (exit code {code})" for r, code in dead)
                + self._logs_tail()
            )

    def _logs_tail(self, chars: int = 3000) -> str:
        """The end of every rank's output, for error messages."""
        parts = []
        for rank, log in enumerate(self._logs):
            log.seek(0)
            text = log.read().decode(errors="replace")[-chars:]
            if text.strip():
                parts.append(f"\n--- rank {rank} output ---\n{text}")
        return "".join(parts)

    def _collect(self, what: str) -> list:
        """One reply per rank; raises RuntimeError with the failing ranks' tracebacks."""
        replies, errors = [], []
        deadline = time.monotonic() + self.timeout_s + 30
        for rank, (conn, proc) in enumerate(zip(self._conns, self._procs, strict=True)):
            while not conn.poll(0.1):
                if proc.poll() is not None:
                    errors.append(f"rank {rank}: process exited with code {proc.returncode}")
                    break
                if time.monotonic() > deadline:
                    errors.append(f"rank {rank}: no reply within {self.timeout_s + 30:.0f} s")
                    break
            else:
                try:
                    status, payload = conn.recv()
                except (EOFError, OSError):
                    errors.append(f"rank {rank}: connection lost (exit code {proc.poll()})")
                    continue
                if status == "error":
                    errors.append(f"rank {rank}:\n{payload}")
                replies.append(payload)
        if errors:
            raise RuntimeError(
                f"parallelism demo, {what} failed:\n" + "\n".join(errors) + self._logs_tail()
            )
        return replies

    def _run(self, name: str, cfg: DemoConfig, **kwargs) -> list:
        from workshop.launch.quiet import ForeignLoad

        if not self._finalizer.alive:
            raise RuntimeError("Workers: already closed")
        cfg.check(self.np if name == "data_parallel" else 1)  # only data parallel splits it
        # Other work on the machine slows the demo's timings: measure how much there was.
        with ForeignLoad(pids=tuple(p.pid for p in self._procs)) as load:
            for conn in self._conns:
                conn.send((name, cfg, kwargs))
            replies = self._collect(name)
        self.last_foreign_cores = load.foreign_cores
        return replies

    def single_process(self, cfg: DemoConfig = DEFAULT_CONFIG) -> dict:
        """Train on rank 0 alone with the global batch (the reference).

        Returns:
            dict with ``params`` (name -> array after training), ``initial`` (before),
            ``events`` (DataFrame, columns of :func:`_events`), ``loss`` (DataFrame: ``step``,
            ``loss``), ``config`` (dict), ``foreign_cores`` (other work on the machine
            while it ran, in cores: :class:`workshop.launch.quiet.ForeignLoad`).
        """
        result = self._run("single", cfg)[0]
        extra = {"initial": result["initial"], "foreign_cores": self.last_foreign_cores}
        return _result(cfg, [result], result["loss"], extra)

    def data_parallel(self, cfg: DemoConfig = DEFAULT_CONFIG) -> dict:
        """Data-parallel training on all processes (gradients averaged by allreduce).

        Returns:
            dict with ``params`` (rank 0's, name -> array), ``rank_max_diff`` (largest
            difference between any rank's parameters and rank 0's: replicas must stay equal),
            ``events``, ``loss`` (global-batch mean), ``config``, ``processes``,
            ``foreign_cores`` (other work while it ran).
        """
        results = self._run("data_parallel", cfg)
        diff = max(
            float(np.max(np.abs(r["params"][k] - results[0]["params"][k])))
            for r in results
            for k in r["params"]
        )
        extra = {"rank_max_diff": diff, "foreign_cores": self.last_foreign_cores}
        return _result(cfg, results, results[0]["loss"], extra)

    def model_parallel(self, cfg: DemoConfig = DEFAULT_CONFIG, microbatches: int = 1) -> dict:
        """Pipeline model parallelism: one stage of layers per process.

        Args:
            cfg: what to train.
            microbatches: micro-batches per global batch (1 = plain model parallelism).

        Returns:
            dict with ``params`` (all stages merged, name -> array), ``stages`` (DataFrame:
            ``rank``, ``first_layer``, ``last_layer`` (exclusive), ``params``), ``events``,
            ``loss``, ``config``, ``processes``, ``microbatches``.
        """
        if self.np < 2:
            raise ValueError("model_parallel needs >= 2 processes (one stage each)")
        if self.np > len(cfg.widths) - 1:
            raise ValueError(
                f"model_parallel: {self.np} stages but only "
                f"{len(cfg.widths) - 1} layers in {cfg.widths}"
            )
        if microbatches < 1 or cfg.global_batch % microbatches:
            raise ValueError(
                f"model_parallel: global_batch={cfg.global_batch} is not "
                f"divisible into {microbatches} micro-batches"
            )
        stages = stage_bounds(cfg.widths, self.np)  # planned here, the same for every rank
        results = self._run("model_parallel", cfg, microbatches=microbatches, stages=stages)
        stages = pd.DataFrame(
            [
                {
                    "rank": r,
                    "first_layer": res["layers"][0],
                    "last_layer": res["layers"][1],
                    "params": int(sum(v.size for v in res["params"].values())),
                }
                for r, res in enumerate(results)
            ]
        )
        merged = {k: v for res in results for k, v in res["params"].items()}
        return _result(
            cfg,
            results,
            results[-1]["loss"],
            {"params": merged, "stages": stages, "microbatches": microbatches},
        )

    def close(self) -> None:
        """Stop the processes (politely, then by force after a few seconds)."""
        self._finalizer()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _stop(procs: list[subprocess.Popen], conns: list, logs: list) -> None:
    """Tell the processes to leave, wait a little, then kill the ones still running."""
    for conn in conns:
        if conn is not None:
            try:
                conn.send(None)
                conn.close()
            except OSError:
                pass
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for log in logs:
        log.close()


def _events(results: list[dict]) -> pd.DataFrame:
    """All ranks' events in one DataFrame.

    Columns: ``rank``, ``step``, ``microbatch`` (-1: the whole batch), ``phase``
    (forward_backward, forward, backward, optimizer, allreduce, recv_activation, recv_gradient,
    send (posting an isend), send_wait), ``category`` (``compute`` or ``communication``:
    posting or blocked in a transfer),
    ``start_s`` (since the first event of the run, any rank), ``dur_s``.
    """
    rows = [row for res in results if res for row in res["events"]]
    columns = ["rank", "step", "microbatch", "phase", "category", "start_s", "dur_s"]
    df = pd.DataFrame(rows, columns=columns)
    df["start_s"] -= df["start_s"].min()
    return df.sort_values(["start_s", "rank"], ignore_index=True)


def _result(cfg: DemoConfig, results: list[dict], losses, extra: dict) -> dict:
    real = [r for r in results if r]
    out = {
        "params": real[0]["params"],
        "events": _events(real),
        "loss": pd.DataFrame({"step": range(len(losses)), "loss": losses}),
        "config": asdict(cfg),
        "processes": len(real),
    }
    out.update(extra)
    return out


def run_all(
    np: int = 2, cfg: DemoConfig = DEFAULT_CONFIG, microbatches: tuple[int, ...] = (1, 4)
) -> dict:
    """Start ``np`` processes once and run every experiment: single, data parallel, and model
    parallel with each micro-batch count. Returns label -> result dict (see :class:`Workers`).
    """
    with Workers(np) as workers:
        runs = {
            "single process": workers.single_process(cfg),
            f"data parallel x{np}": workers.data_parallel(cfg),
        }
        for m in microbatches:
            runs[f"model parallel x{np}, {m} micro-batch(es)"] = workers.model_parallel(cfg, m)
    return runs
