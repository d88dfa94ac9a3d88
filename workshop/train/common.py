"""What the PyTorch and TensorFlow training programs share: arguments, per-rank logging,
metrics and status files (the learning-rate rules they follow come from :mod:`workshop.rules`).

Each rank is one process started by ``horovodrun`` (laptop) or by the batch system's MPI
launcher (clusters), e.g. ``python -m workshop.train.torch_train --run-dir DIR --dataset mnist``.
Rank 0 alone prints to the console and writes ``metrics.jsonl`` and ``summary.json``; every rank
writes ``logs/rank.N.log`` and, when it ends, ``logs/rank.N.status`` (``ok``, ``failed`` or
``interrupted``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import numpy as np

# The LR rules live in workshop.rules (the analyses use the same ones); the training programs
# import them from here.
from workshop.rules import LR_SCALINGS, lr_at, scaled_lr  # noqa: F401

# Sample the process start as early as possible: init time is measured from here.
PROCESS_START = time.time()

#: Gradient compression for the allreduce: names of ``hvd.Compression`` members (the same in
#: horovod.torch and horovod.tensorflow 0.28.1: ``none``, and ``fp16`` which sends float32
#: gradients as float16 and casts them back after the allreduce).
COMPRESSIONS = ("none", "fp16")


def build_parser(prog: str) -> argparse.ArgumentParser:
    """Arguments of one training rank (the launcher passes them through)."""
    from workshop.train.data import DATA_MODES, DATASETS
    from workshop.train.device import MODES as DEVICES

    parser = argparse.ArgumentParser(prog=prog, description="One Horovod training rank.")
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--dataset", default="mnist", choices=DATASETS)
    # the launcher resolves "auto" before the ranks start (workshop.train.data.prepare)
    parser.add_argument(
        "--data", default="subset", choices=[mode for mode in DATA_MODES if mode != "auto"]
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32, help="per worker")
    parser.add_argument("--lr", type=float, default=0.01, help="LR at the base batch size")
    parser.add_argument("--base-batch-size", type=int, default=None)
    parser.add_argument("--lr-scaling", default="linear", choices=LR_SCALINGS)
    parser.add_argument("--warmup-epochs", type=float, default=0.0)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--steps-per-epoch", type=int, default=None)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=None, help="compute threads per rank")
    parser.add_argument("--device", default="auto", choices=DEVICES)
    parser.add_argument(
        "--compression",
        default="none",
        choices=COMPRESSIONS,
        help="hvd.Compression of the gradients' allreduce",
    )
    parser.add_argument(
        "--backward-passes-per-step",
        type=int,
        default=1,
        help="batches accumulated per allreduce and optimizer step",
    )
    return parser


RANK_VARS = ("HOROVOD_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID")


def env_rank() -> int:
    """This process's rank as the launcher announced it (known before ``hvd.init()``, so a
    failure during start-up is still logged under the right rank)."""
    for name in RANK_VARS:
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


def inject_fault(rank: int) -> None:
    """Fault injection for the failure-handling lesson and tests: the rank named by
    ``WORKSHOP_FAIL_RANK`` raises, so learners see how a crashed rank is reported."""
    if os.environ.get("WORKSHOP_FAIL_RANK") == str(rank):
        raise RuntimeError(f"fault injected on rank {rank} (WORKSHOP_FAIL_RANK={rank})")


def threads_per_rank(local_size: int, requested: int | None) -> int:
    """Compute threads per rank so ``local_size`` ranks do not oversubscribe the cores."""
    if requested:
        return requested
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cores or 1) // max(1, local_size))


def shard_indices(n: int, rank: int, size: int, epoch: int, seed: int) -> np.ndarray:
    """This rank's sample indices for one epoch: one permutation shared by all ranks (same
    seed and epoch), every ``size``-th element from ``rank`` (like torch's DistributedSampler)."""
    order = np.random.default_rng(seed + epoch).permutation(n)
    return order[rank::size]


class RankIO:
    """Per-rank log file, rank-0-only console, and the run directory's result files."""

    def __init__(self, run_dir: Path, rank: int):
        self.run_dir = run_dir
        self.rank = rank
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.log = (run_dir / "logs" / f"rank.{rank}.log").open("a", buffering=1)

    def print(self, message: str) -> None:
        """Log a line; rank 0 also prints it."""
        self.log.write(message + "\n")
        if self.rank == 0:
            print(message, flush=True)

    def write_epoch(self, record: dict, task: str) -> None:
        """Append the epoch to metrics.jsonl and print it (rank 0)."""
        if self.rank == 0:
            with (self.run_dir / "metrics.jsonl").open("a") as handle:
                handle.write(json.dumps(record) + "\n")
        self.print(format_epoch(record, task))

    def write_summary(self, summary: dict) -> None:
        if self.rank == 0:
            (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    def finish(self, status: str) -> None:
        (self.run_dir / "logs" / f"rank.{self.rank}.status").write_text(status + "\n")
        self.log.close()


def run_rank(rank: int, run_dir: Path, body: Callable[[RankIO], None]) -> int:
    """Run ``body`` for one rank, recording ``ok`` or ``failed`` (with the traceback in the
    rank's log) so the launcher can name the rank that crashed."""
    rank_io = RankIO(run_dir, rank)
    try:
        body(rank_io)
    except BaseException as exc:
        rank_io.log.write(traceback.format_exc())
        status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        rank_io.finish(status)
        print(f"[rank {rank}] {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 130 if status == "interrupted" else 1
    rank_io.finish("ok")
    return 0


def epoch_record(
    epoch: int,
    *,
    mean: Callable,
    slowest: Callable,
    train_time_s: float,
    test_time_s: float,
    steps: int,
    seen: int,
    size: int,
    loss_sum,
    correct,
    test_loss,
    test_score,
    lr: float,
    elapsed_s: float,
    regression: bool,
) -> dict:
    """One line of metrics.jsonl (see docs/run-directory.md), reduced over ranks.

    ``mean(value, name)`` and ``slowest(value, name)`` are the framework's Horovod allreduces
    (average and max); every rank must call this, in the same order.
    """
    train_time_s = slowest(train_time_s, "metric.train_time")
    samples = seen * size
    test_time_s = slowest(test_time_s, "metric.test_time")
    return {
        "epoch": epoch,
        "train_time_s": round(train_time_s, 6),
        "test_time_s": round(test_time_s, 6),
        "epoch_time_s": round(train_time_s + test_time_s, 6),
        "samples_per_s": round(samples / train_time_s, 3) if train_time_s > 0 else None,
        "steps": steps,
        "samples": samples,
        "train_loss": mean(loss_sum / seen, "metric.train_loss"),
        "train_accuracy": None if regression else mean(correct / seen, "metric.train_accuracy"),
        "test_loss": mean(test_loss, "metric.test_loss"),
        "test_accuracy": mean(test_score, "metric.test_accuracy"),
        "lr": lr,
        "elapsed_s": round(elapsed_s, 6),
    }


def run_summary(
    framework: str,
    args,
    *,
    size: int,
    device: str,
    devices: list[str],
    threads: int,
    data_info: dict,
    init_time_s: float,
    train_time_s: float,
    steps_per_epoch: int,
    global_batch: int,
    lr_effective: float,
    last_epoch: dict,
) -> dict:
    """summary.json: rank 0's end-of-run numbers (see docs/run-directory.md)."""
    return {
        "framework": framework,
        "np": size,
        "device": device,
        "devices": devices,
        "threads_per_rank": threads,
        "data": data_info,
        "init_time_s": round(init_time_s, 6),
        "train_time_s": round(train_time_s, 6),
        "total_time_s": round(time.time() - PROCESS_START, 6),
        "epochs": args.epochs,
        "steps_per_epoch": steps_per_epoch,
        "global_batch_size": global_batch,
        "lr_effective": lr_effective,
        "final_test_accuracy": last_epoch.get("test_accuracy"),
    }


def format_epoch(record: dict, task: str) -> str:
    """The console line of an epoch, in the style of seed 000's logs."""
    metric = "R2" if task == "regression" else "acc"
    return (
        f"Epoch {record['epoch']}:  training {record['train_time_s']:.3f}(s) - "
        f"testing {record['test_time_s']:.3f}(s)  loss {record['train_loss']:.4f}  "
        f"test {metric} {record['test_accuracy']:.4f}  {record['samples_per_s']:.0f} samples/s  "
        f"lr {record['lr']:.5g}"
    )
