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

Command line (prints a summary)::

    python -m workshop.launch.parallelism --np 2 --steps 10

Every process uses one compute thread: one worker = one core, as on the 2-core machine the
workshop is written for. Timestamps come from ``time.perf_counter`` (CLOCK_MONOTONIC on Linux,
shared by all processes), so the events of different ranks share one time axis.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import weakref
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class DemoConfig:
    """What every experiment trains.

    Attributes:
        widths: layer sizes of the MLP, input first, classes last.
        global_batch: samples per step over all processes.
        steps: optimizer steps.
        lr: SGD learning rate.
        seed: seeds the initial parameters and the synthetic data.
    """

    widths: tuple[int, ...] = (256, 512, 512, 512, 256, 10)
    global_batch: int = 512
    steps: int = 10
    lr: float = 0.3
    seed: int = 0

    def check(self, world: int) -> None:
        """Raise ValueError naming the setting that cannot work with ``world`` processes."""
        if len(self.widths) < 2 or min(self.widths) < 1:
            raise ValueError(f"DemoConfig.widths must be >= 2 positive sizes: {self.widths}")
        if self.steps < 1 or self.global_batch < 1 or self.lr <= 0:
            raise ValueError(f"DemoConfig: steps, global_batch and lr must be > 0: {self}")
        if self.global_batch % world:
            raise ValueError(
                f"DemoConfig.global_batch={self.global_batch} is not divisible by {world} "
                "processes (equal shards are what makes the averaged gradient exact)"
            )


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


# --------------------------------------------------------------------------------------------
# What runs inside the worker processes (torch is imported there, not in the notebook kernel)


def _build_blocks(cfg: DemoConfig):
    """The MLP as a list of blocks (Linear + ReLU, the last one Linear only), seeded."""
    import torch
    from torch import nn

    torch.manual_seed(cfg.seed)
    last = len(cfg.widths) - 2
    return [
        nn.Sequential(nn.Linear(a, b), *([nn.ReLU()] if i < last else []))
        for i, (a, b) in enumerate(zip(cfg.widths[:-1], cfg.widths[1:], strict=True))
    ]


def _dataset(cfg: DemoConfig):
    """Synthetic classification data, one fresh batch per step: a Gaussian cluster per class
    (centres drawn from N(0, 1) in every input dimension, unit noise around them)."""
    import torch

    gen = torch.Generator().manual_seed(cfg.seed + 1)
    n, classes = cfg.steps * cfg.global_batch, cfg.widths[-1]
    y = torch.randint(0, classes, (n,), generator=gen)
    centres = torch.randn(classes, cfg.widths[0], generator=gen)
    return centres[y] + torch.randn(n, cfg.widths[0], generator=gen), y


def _sgd_step(params, lr: float) -> None:
    """Plain SGD, p -= lr * grad, then clear the gradients (no torch.optim: importing it
    costs seconds per process, and this is all it would do here)."""
    import torch

    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
            p.grad = None


def _params(blocks, offset: int = 0) -> dict[str, np.ndarray]:
    """Parameters as numpy arrays named by their block in the whole model: '3.0.weight'."""
    return {
        f"{offset + i}.{name}": p.detach().numpy().copy()
        for i, block in enumerate(blocks)
        for name, p in block.named_parameters()
    }


class _Recorder:
    """Collects (step, microbatch, phase, category, start_s, dur_s) events of one rank."""

    def __init__(self, rank: int):
        self.rank, self.rows = rank, []

    def __call__(self, step, microbatch, phase, category, start):
        end = time.perf_counter()
        self.rows.append((self.rank, step, microbatch, phase, category, start, end - start))
        return end


def _job_single(rank: int, world: int, cfg: DemoConfig) -> dict | None:
    """Rank 0 trains the whole model on the whole batch; the other ranks wait."""
    if rank != 0:
        return None
    import torch

    blocks = _build_blocks(cfg)
    model = torch.nn.Sequential(*blocks)
    initial = _params(blocks)
    x, y = _dataset(cfg)
    rec, losses = _Recorder(rank), []
    for step in range(cfg.steps):
        rows = slice(step * cfg.global_batch, (step + 1) * cfg.global_batch)
        t = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x[rows]), y[rows])
        loss.backward()
        t = rec(step, -1, "forward_backward", "compute", t)
        _sgd_step(model.parameters(), cfg.lr)
        rec(step, -1, "optimizer", "compute", t)
        losses.append(loss.item())
    return {"params": _params(blocks), "initial": initial, "events": rec.rows, "loss": losses}


def _job_data_parallel(rank: int, world: int, cfg: DemoConfig) -> dict:
    """Same model everywhere, 1/world of every batch, gradients averaged by one allreduce."""
    import torch
    import torch.distributed as dist

    blocks = _build_blocks(cfg)  # same seed on every rank = Horovod's broadcast of parameters
    model = torch.nn.Sequential(*blocks)
    params = list(model.parameters())
    x, y = _dataset(cfg)
    local = cfg.global_batch // world
    rec, losses = _Recorder(rank), []
    for step in range(cfg.steps):
        start = step * cfg.global_batch + rank * local  # this rank's shard of the global batch
        rows = slice(start, start + local)
        t = time.perf_counter()
        loss = torch.nn.functional.cross_entropy(model(x[rows]), y[rows])
        loss.backward()
        # one fused buffer: every gradient, and the loss for the log, in a single allreduce
        buffer = torch.cat([p.grad.reshape(-1) for p in params] + [loss.detach().reshape(1)])
        t = rec(step, -1, "forward_backward", "compute", t)
        dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
        buffer /= world
        t = rec(step, -1, "allreduce", "communication", t)
        offset = 0
        for p in params:
            p.grad.copy_(buffer[offset : offset + p.numel()].view_as(p))
            offset += p.numel()
        _sgd_step(params, cfg.lr)
        rec(step, -1, "optimizer", "compute", t)
        losses.append(buffer[-1].item())
    return {"params": _params(blocks), "events": rec.rows, "loss": losses}


def _job_model_parallel(rank: int, world: int, cfg: DemoConfig, microbatches: int) -> dict:
    """Rank r holds stage r of the layers; GPipe schedule with ``microbatches`` per batch.

    Stages before the last: forward every micro-batch (sending each output on), then
    backward every micro-batch as its gradient comes back. The last stage computes the loss
    and goes backward right after each forward. Sends are asynchronous (``isend``, waited for
    at the end of the step); receives block, and that blocking is the waiting time.
    """
    import torch
    import torch.distributed as dist

    first, last = rank == 0, rank == world - 1
    lo, hi = stage_bounds(cfg.widths, world)[rank]
    blocks = _build_blocks(cfg)[lo:hi]  # every rank builds all layers, keeps its own
    stage = torch.nn.Sequential(*blocks)
    x, y = _dataset(cfg)
    mb = cfg.global_batch // microbatches
    rec, losses = _Recorder(rank), []

    def send(tensor, dst: int, tag: int, step: int, m: int) -> None:
        start = time.perf_counter()
        sends.append(dist.isend(tensor, dst=dst, tag=tag))
        rec(step, m, "send", "communication", start)

    for step in range(cfg.steps):
        sends, kept, step_loss = [], [], 0.0
        for m in range(microbatches):
            rows = slice(step * cfg.global_batch + m * mb, step * cfg.global_batch + (m + 1) * mb)
            t = time.perf_counter()
            if first:
                inp = x[rows]
            else:
                inp = torch.empty(mb, cfg.widths[lo])
                dist.recv(inp, src=rank - 1, tag=m)
                inp.requires_grad_(True)
                t = rec(step, m, "recv_activation", "communication", t)
            out = stage(inp)
            if last:
                # loss of the global batch = mean over micro-batches of their mean losses
                loss = torch.nn.functional.cross_entropy(out, y[rows]) / microbatches
                t = rec(step, m, "forward", "compute", t)
                loss.backward()
                step_loss += loss.item()
                t = rec(step, m, "backward", "compute", t)
                if not first:
                    send(inp.grad, rank - 1, 10_000 + m, step, m)
            else:
                t = rec(step, m, "forward", "compute", t)
                send(out.detach(), rank + 1, m, step, m)
                kept.append((inp, out))
        for m, (inp, out) in enumerate(kept):  # backward, in micro-batch order
            t = time.perf_counter()
            grad = torch.empty_like(out)
            dist.recv(grad, src=rank + 1, tag=10_000 + m)
            t = rec(step, m, "recv_gradient", "communication", t)
            out.backward(grad)
            t = rec(step, m, "backward", "compute", t)
            if not first:
                send(inp.grad, rank - 1, 10_000 + m, step, m)
        t = time.perf_counter()
        for work in sends:
            work.wait()
        if sends:
            t = rec(step, -1, "send_wait", "communication", t)
        _sgd_step(stage.parameters(), cfg.lr)
        rec(step, -1, "optimizer", "compute", t)
        losses.append(step_loss)
    return {
        "params": _params(blocks, offset=lo),
        "events": rec.rows,
        "loss": losses if last else None,
        "layers": (lo, hi),
    }


_JOBS = {
    "single": _job_single,
    "data_parallel": _job_data_parallel,
    "model_parallel": _job_model_parallel,
}


def _warm_up() -> None:
    """Pay torch's first-call costs before any timing: the first ``backward(gradient)`` of a
    process imports sympy (half a second), which would land in the first pipeline step."""
    import torch

    layer = torch.nn.Linear(4, 4)
    out = layer(torch.zeros(2, 4))
    out.backward(torch.ones_like(out))
    torch.nn.functional.cross_entropy(layer(torch.zeros(2, 4)), torch.zeros(2).long()).backward()


def _worker_main(rank: int, world: int, port: int, threads: int, conn, timeout_s: float):
    """Process body: join the group, then run jobs sent by the parent until told to stop."""
    try:
        started = time.perf_counter()
        if sys.platform.startswith("linux"):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # stay on this machine
        import datetime

        import torch
        import torch.distributed as dist

        torch.set_num_threads(threads)
        _warm_up()
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{port}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        dist.barrier()
        conn.send(
            (
                "ready",
                {
                    "pid": os.getpid(),
                    "startup_s": time.perf_counter() - started,
                    "torch": torch.__version__,
                },
            )
        )
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            break
        if message is None:
            break
        name, cfg, kwargs = message
        try:
            dist.barrier()
            conn.send(("ok", _JOBS[name](rank, world, cfg, **kwargs)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
    dist.destroy_process_group()


def _worker_entry(argv: list[str]) -> int:
    """``python -m workshop.launch.parallelism --worker RANK NP PORT THREADS PARENT TIMEOUT``:
    connect to the parent (token from $WORKSHOP_DEMO_TOKEN), then run :func:`_worker_main`."""
    rank, world, port, threads, parent_port = (int(a) for a in argv[:5])
    sock = socket.create_connection(("127.0.0.1", parent_port), timeout=60)
    sock.settimeout(None)
    conn = Connection(sock.detach())
    conn.send(("hello", rank, os.environ.get("WORKSHOP_DEMO_TOKEN", "")))
    try:
        _worker_main(rank, world, port, threads, conn, float(argv[5]))
    finally:
        conn.close()
    return 0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Workers:
    """N real processes in one Gloo process group, kept alive for several experiments.

    The processes are started with ``python -m workshop.launch.parallelism --worker ...`` and
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
        self.np, self.timeout_s = np, timeout_s
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
                    "workshop.launch.parallelism",
                    "--worker",
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
        if not self._finalizer.alive:
            raise RuntimeError("Workers: already closed")
        cfg.check(self.np if name == "data_parallel" else 1)  # only data parallel splits it
        for conn in self._conns:
            conn.send((name, cfg, kwargs))
        return self._collect(name)

    def single_process(self, cfg: DemoConfig = DemoConfig()) -> dict:
        """Train on rank 0 alone with the global batch (the reference).

        Returns:
            dict with ``params`` (name -> array after training), ``initial`` (before),
            ``events`` (DataFrame, columns of :func:`_events`), ``loss`` (DataFrame: ``step``,
            ``loss``), ``config`` (dict).
        """
        result = self._run("single", cfg)[0]
        return _result(cfg, [result], result["loss"], {"initial": result["initial"]})

    def data_parallel(self, cfg: DemoConfig = DemoConfig()) -> dict:
        """Data-parallel training on all processes (gradients averaged by allreduce).

        Returns:
            dict with ``params`` (rank 0's, name -> array), ``rank_max_diff`` (largest
            difference between any rank's parameters and rank 0's: replicas must stay equal),
            ``events``, ``loss`` (global-batch mean), ``config``, ``processes``.
        """
        results = self._run("data_parallel", cfg)
        diff = max(
            float(np.max(np.abs(r["params"][k] - results[0]["params"][k])))
            for r in results
            for k in r["params"]
        )
        return _result(cfg, results, results[0]["loss"], {"rank_max_diff": diff})

    def model_parallel(self, cfg: DemoConfig = DemoConfig(), microbatches: int = 1) -> dict:
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
        results = self._run("model_parallel", cfg, microbatches=microbatches)
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
    np: int = 2, cfg: DemoConfig = DemoConfig(), microbatches: tuple[int, ...] = (1, 4)
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


def main(argv: list[str] | None = None) -> int:
    """Run every experiment and print step times and the parameter differences."""
    from workshop.analysis import parallelism as estimates

    parser = argparse.ArgumentParser(
        prog="python -m workshop.launch.parallelism", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--np", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--steps", type=int, default=DemoConfig.steps)
    parser.add_argument("--batch", type=int, default=DemoConfig.global_batch)
    parser.add_argument("--microbatches", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args(argv)
    cfg = DemoConfig(steps=args.steps, global_batch=args.batch)
    runs = run_all(args.np, cfg, tuple(args.microbatches))
    reference = runs["single process"]["params"]
    table = estimates.compare_runs({k: v["events"] for k, v in runs.items()})
    table["max_param_diff"] = [
        estimates.max_param_diff(reference, r["params"]) for r in runs.values()
    ]
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(_worker_entry(sys.argv[2:]))
    sys.exit(main())
