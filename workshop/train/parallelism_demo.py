"""What runs inside the worker processes of lesson 01's data vs model parallelism demos.

:class:`workshop.launch.parallelism.Workers` starts each process as
``python -m workshop.train.parallelism_demo RANK NP PORT THREADS PARENT_PORT TIMEOUT_S``; it
connects back to the parent (proving itself with the token in ``$WORKSHOP_DEMO_TOKEN``), joins
a ``torch.distributed`` Gloo group on 127.0.0.1, and runs the jobs the parent sends (single
process, data parallel, model parallel) until told to stop. torch is imported only here, in
the workers, never in the notebook kernel.
"""

from __future__ import annotations

import os
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np

GRADIENT_TAG = 10_000  # send/recv tags: micro-batch m's activation is m, its gradient this + m


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


def build_blocks(cfg: DemoConfig):
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

    blocks = build_blocks(cfg)
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

    blocks = build_blocks(cfg)  # same seed on every rank = Horovod's broadcast of parameters
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


def _job_model_parallel(
    rank: int, world: int, cfg: DemoConfig, microbatches: int, stages: list[tuple[int, int]]
) -> dict:
    """Rank r holds stage r of the layers (``stages[r]``: the range of Linear layers, planned
    by the parent); GPipe schedule with ``microbatches`` per batch.

    Stages before the last: forward every micro-batch (sending each output on), then
    backward every micro-batch as its gradient comes back. The last stage computes the loss
    and goes backward right after each forward. Sends are asynchronous (``isend``, waited for
    at the end of the step); receives block, and that blocking is the waiting time.
    """
    import torch
    import torch.distributed as dist

    first, last = rank == 0, rank == world - 1
    lo, hi = stages[rank]
    blocks = build_blocks(cfg)[lo:hi]  # every rank builds all layers, keeps its own
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
                    send(inp.grad, rank - 1, GRADIENT_TAG + m, step, m)
            else:
                t = rec(step, m, "forward", "compute", t)
                send(out.detach(), rank + 1, m, step, m)
                kept.append((inp, out))
        for m, (inp, out) in enumerate(kept):  # backward, in micro-batch order
            t = time.perf_counter()
            grad = torch.empty_like(out)
            dist.recv(grad, src=rank + 1, tag=GRADIENT_TAG + m)
            t = rec(step, m, "recv_gradient", "communication", t)
            out.backward(grad)
            t = rec(step, m, "backward", "compute", t)
            if not first:
                send(inp.grad, rank - 1, GRADIENT_TAG + m, step, m)
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


JOBS = {
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


def _serve(rank: int, world: int, port: int, threads: int, conn, timeout_s: float):
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
            conn.send(("ok", JOBS[name](rank, world, cfg, **kwargs)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
    dist.destroy_process_group()


def main(argv: list[str]) -> int:
    """``RANK NP PORT THREADS PARENT_PORT TIMEOUT_S``: connect to the parent (token from
    $WORKSHOP_DEMO_TOKEN), then serve its jobs."""
    rank, world, port, threads, parent_port = (int(a) for a in argv[:5])
    sock = socket.create_connection(("127.0.0.1", parent_port), timeout=60)
    sock.settimeout(None)
    conn = Connection(sock.detach())
    conn.send(("hello", rank, os.environ.get("WORKSHOP_DEMO_TOKEN", "")))
    try:
        _serve(rank, world, port, threads, conn, float(argv[5]))
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
