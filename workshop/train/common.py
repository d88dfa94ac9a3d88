"""What the PyTorch and TensorFlow training programs share: arguments, per-rank logging,
metrics and status files (the learning-rate rules they follow come from :mod:`workshop.rules`).

Each rank is one process started by ``horovodrun`` (laptop) or by the batch system's MPI
launcher (clusters), e.g. ``python -m workshop.train.torch_train --run-dir DIR --dataset mnist``.
Rank 0 alone prints to the console and writes ``metrics.jsonl`` and ``summary.json``; every rank
writes ``logs/rank.N.log``, its own time per training step in ``logs/rank.N.steps.csv``
(:class:`StepTimes`) and, when it ends, ``logs/rank.N.status`` (``ok``, ``failed`` or
``interrupted``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

# The LR rules live in workshop.rules (the analyses use the same ones); the training programs
# import them from here.
from workshop.rules import (  # noqa: F401
    STEP_FILE_COLUMNS,
    lr_at,
    run_queue_wait_s,
    scaled_lr,
    write_horovod_env,
)
from workshop.runspec import RUN_SPEC

if TYPE_CHECKING:
    from workshop.train.device import DeviceChoice

# Sample the process start as early as possible: init time is measured from here.
PROCESS_START = time.time()


def build_parser(prog: str) -> argparse.ArgumentParser:
    """Arguments of one training rank (the launcher passes them through): ``--run-dir``, the
    run options that have a ``program_flag`` in :data:`workshop.runspec.RUN_SPEC` (type,
    default, choices and help from there) and ``--momentum``.

    >>> args = build_parser("t").parse_args(["--run-dir", "r", "--compression", "fp16"])
    >>> args.compression, args.batch_size, args.data, args.threads
    ('fp16', 32, 'subset', None)
    """
    parser = argparse.ArgumentParser(prog=prog, description="One Horovod training rank.")
    parser.add_argument("--run-dir", type=Path, required=True)
    for option in RUN_SPEC:
        if option.program_flag is None:
            continue
        default, choices = option.default, option.choices
        if option.field == "data":
            # the launcher resolves "auto" before the ranks start (workshop.train.data.prepare)
            default, choices = "subset", tuple(mode for mode in choices if mode != "auto")
        parser.add_argument(
            option.program_flag,
            type=option.type,
            default=default,
            choices=choices,
            help=option.help or None,
        )
    parser.add_argument("--momentum", type=float, default=0.9)
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
        write_horovod_env(run_dir / "logs", rank)  # the settings workshop diagnose reads
        if os.environ.get("WORKSHOP_CLUSTER"):  # an emulated cluster: record the node it ran on
            (run_dir / "logs" / f"rank.{rank}.host").write_text(socket.gethostname() + "\n")

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

    def write_steps(self, steps: StepTimes) -> None:
        """Append the epoch's step times to ``logs/rank.N.steps.csv`` (header first)."""
        path = self.run_dir / "logs" / f"rank.{self.rank}.steps.csv"
        with path.open("a") as handle:
            if handle.tell() == 0:
                handle.write(",".join(STEP_FILE_COLUMNS) + "\n")
            handle.writelines(",".join(map(str, row)) + "\n" for row in steps.rows)
        steps.rows.clear()

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


def pin_device(
    hvd: Any, args, rank_io: RankIO, *, gpu_count: int, pin: Callable
) -> tuple[DeviceChoice, str]:
    """Choose this rank's device (``--device``, the launcher's environment and Horovod's local
    rank decide) and pin the framework to it; rank 0 prints the note of a surprising choice.

    Args:
        hvd: the initialised Horovod framework module.
        args: the parsed :func:`build_parser` arguments.
        rank_io: this rank's :class:`RankIO`.
        gpu_count: GPUs the framework sees.
        pin: the framework's pinning function (``pin_torch`` or ``pin_tensorflow``).

    Returns:
        The :class:`~workshop.train.device.DeviceChoice` and its description for the logs,
        e.g. ``"cpu"`` or ``"cuda:1 (NVIDIA A100-SXM4-40GB)"``.
    """
    from workshop.train.device import horovod_gpu_support, select_device_from_env

    choice = select_device_from_env(
        args.device,
        gpu_count,
        horovod_gpu=horovod_gpu_support(hvd),
        local_rank=hvd.local_rank(),
        local_size=hvd.local_size(),
    )
    device_name = pin(choice)
    if choice.note and hvd.rank() == 0:
        rank_io.print(f"device: {choice.note}")
    return choice, device_name


class StepTimes:
    """One rank's own time per training step, in seconds, split so that a rank slowed down by
    its own work can be told from one that waits for the others:

    - ``data_s``: taking the step's batches (indexing the in-memory data, copying to the device);
    - ``compute_s``: forward, backward and the optimizer's update, without waiting for Horovod;
    - ``wait_s``: waiting for the gradients' allreduces to finish (for the slower ranks and for
      the communication itself);
    - ``step_s``: the whole step, start to end (a little more than the three together);
    - ``cpu_wait_s``: how long the training thread was ready to run but waited for a CPU
      while it computed (:func:`workshop.rules.run_queue_wait_s`, between :meth:`computing`
      and :meth:`computed`): other work on its core.

    Every rank waits for the slowest one inside ``wait_s``, so ``step_s`` is about the same on
    every rank while ``compute_s`` is the rank's own. The program calls :meth:`start` when a
    step begins, :meth:`computing` / :meth:`computed` around its own work, and :meth:`add`
    when it ends; :meth:`RankIO.write_steps` writes the rows at
    the end of each epoch (columns: :data:`workshop.rules.STEP_FILE_COLUMNS`).
    """

    def __init__(self) -> None:
        self.rows: list[tuple] = []
        self._cpu_wait: float | None = 0.0
        self._cpu_wait_at: float | None = None

    def start(self) -> None:
        """A step begins: its CPU wait is counted afresh."""
        self._cpu_wait = 0.0

    def computing(self) -> None:
        """The rank's own work (forward, backward, update) begins, on the training thread."""
        self._cpu_wait_at = run_queue_wait_s()

    def computed(self) -> None:
        """The rank's own work ends: its CPU wait since :meth:`computing` counts (waiting for
        the allreduces does not: there the thread polls Horovod and shares its core with
        Horovod's own threads, which says nothing of other work on the core)."""
        now, then = run_queue_wait_s(), self._cpu_wait_at
        if None in (now, then, self._cpu_wait):
            self._cpu_wait = None
        else:
            self._cpu_wait += now - then

    def add(self, step: int, data_s: float, compute_s: float, wait_s: float, step_s: float):
        cpu_wait = round(self._cpu_wait, 7) if self._cpu_wait is not None else ""
        times = (round(x, 7) for x in (data_s, compute_s, wait_s, step_s))
        self.rows.append((step, *times, cpu_wait))


@dataclass(frozen=True)
class StepPlan:
    """Batch sizes, steps and learning rates of a run: the same on every rank."""

    batch_size: int  # samples per worker and backward pass
    passes: int  # backward passes (batches) per worker and optimizer step
    global_batch: int  # samples per optimizer step, all workers together
    steps_per_epoch: int
    base_lr: float  # the LR at the base batch size, where warmup starts
    target_lr: float  # the LR scaled to the global batch, reached after warmup

    @property
    def step_samples(self) -> int:
        """Samples per worker and optimizer step."""
        return self.batch_size * self.passes


def plan_steps(args, size: int, train_samples: int) -> StepPlan:
    """The :class:`StepPlan` of ``size`` workers sharing ``train_samples`` training samples.

    One optimizer step averages the gradients of ``--backward-passes-per-step`` batches on
    every worker; the LR is scaled from ``--base-batch-size`` (default: one worker's step) to
    that global batch; ``--steps-per-epoch`` caps the steps that one shard allows.

    >>> from argparse import Namespace
    >>> args = Namespace(batch_size=32, backward_passes_per_step=2, base_batch_size=None,
    ...                  lr=0.01, lr_scaling="linear", steps_per_epoch=None)
    >>> plan = plan_steps(args, size=2, train_samples=1000)  # 500 per shard, 64 per step
    >>> plan.global_batch, plan.steps_per_epoch, round(plan.target_lr, 6)
    (128, 7, 0.02)
    """
    passes = args.backward_passes_per_step
    step_samples = args.batch_size * passes
    global_batch = step_samples * size
    base_batch = args.base_batch_size or step_samples
    steps_per_epoch = max(1, (train_samples // size) // step_samples)
    if args.steps_per_epoch:
        steps_per_epoch = min(steps_per_epoch, args.steps_per_epoch)
    return StepPlan(
        batch_size=args.batch_size,
        passes=passes,
        global_batch=global_batch,
        steps_per_epoch=steps_per_epoch,
        base_lr=args.lr,
        target_lr=scaled_lr(args.lr, global_batch, base_batch, args.lr_scaling),
    )


@dataclass(frozen=True)
class Reductions:
    """A framework's Horovod allreduces of one scalar metric, ``f(value, name) -> float``:
    ``mean`` averages it over the ranks, ``slowest`` takes the largest (times)."""

    mean: Callable[[Any, str], float]
    slowest: Callable[[Any, str], float]


@dataclass(frozen=True)
class EpochTotals:
    """One rank's sums over one epoch's training steps, before the reduction over ranks
    (framework scalars or Python numbers)."""

    loss_sum: Any  # the batch losses times the batch sizes
    correct: Any  # correctly classified samples (unused for regression)
    seen: int  # samples this rank trained on
    lr: float  # the LR of the epoch's last step


def run_training(
    framework: str,
    args,
    rank_io: RankIO,
    hvd: Any,
    plan: StepPlan,
    *,
    dataset: Any,
    device: str,
    threads: int,
    reduce: Reductions,
    train_epoch: Callable[[np.ndarray, int, StepTimes], EpochTotals],
    evaluate: Callable[[], tuple[Any, Any]],
) -> None:
    """Train ``args.epochs`` epochs, timing training and testing apart; write each epoch,
    reduced over ranks, to metrics.jsonl and the console, and summary.json at the end (rank 0).

    Args:
        framework: ``"torch"`` or ``"tensorflow"`` (summary.json's ``framework``).
        args: the parsed :func:`build_parser` arguments.
        rank_io: this rank's :class:`RankIO`.
        hvd: the initialised Horovod framework module (rank, size, the devices of all ranks).
        plan: from :func:`plan_steps`.
        dataset: the :class:`workshop.train.data.Dataset` being trained on.
        device: this rank's device, as pinned (see :func:`pin_device`).
        threads: this rank's compute threads.
        reduce: the framework's allreduces.
        train_epoch: ``train_epoch(indices, first_step, step_times)`` runs
            ``plan.steps_per_epoch`` optimizer steps on the sample ``indices`` of this rank's
            shard, numbering the steps from ``first_step`` (the LR schedule counts them), and
            adds each step's times to ``step_times`` (:class:`StepTimes`); device work must be
            finished when it returns, so the time is right.
        evaluate: returns this rank's ``(test_loss, test_score)``.
    """
    init_time_s = time.time() - PROCESS_START
    rank, size = hvd.rank(), hvd.size()
    train_start = time.perf_counter()
    train_total_s = 0.0
    record = {}
    step_times = StepTimes()
    for epoch in range(1, args.epochs + 1):
        indices = shard_indices(len(dataset.y_train), rank, size, epoch, args.seed)
        epoch_start = time.perf_counter()
        totals = train_epoch(indices, (epoch - 1) * plan.steps_per_epoch, step_times)
        train_time_s = time.perf_counter() - epoch_start
        rank_io.write_steps(step_times)

        test_start = time.perf_counter()
        test_loss, test_score = evaluate()
        test_time_s = time.perf_counter() - test_start
        train_total_s += train_time_s

        record = epoch_record(
            epoch,
            totals,
            reduce,
            train_time_s=train_time_s,
            test_time_s=test_time_s,
            steps=plan.steps_per_epoch,
            size=size,
            test_loss=test_loss,
            test_score=test_score,
            elapsed_s=time.perf_counter() - train_start,
            regression=dataset.task == "regression",
        )
        rank_io.write_epoch(record, dataset.task)

    rank_io.write_summary(
        run_summary(
            framework,
            args,
            size=size,
            device=device,
            devices=hvd.allgather_object(device),
            threads=threads,
            data_info=dataset.info,
            init_time_s=init_time_s,
            train_time_s=train_total_s,
            plan=plan,
            last_epoch=record,
        )
    )


def epoch_record(
    epoch: int,
    totals: EpochTotals,
    reduce: Reductions,
    *,
    train_time_s: float,
    test_time_s: float,
    steps: int,
    size: int,
    test_loss,
    test_score,
    elapsed_s: float,
    regression: bool,
) -> dict:
    """One line of metrics.jsonl (see docs/run-directory.md), reduced over ranks.

    ``reduce`` holds the framework's Horovod allreduces (average and max); every rank must
    call this, in the same order.
    """
    train_time_s = reduce.slowest(train_time_s, "metric.train_time")
    samples = totals.seen * size
    test_time_s = reduce.slowest(test_time_s, "metric.test_time")
    return {
        "epoch": epoch,
        "train_time_s": round(train_time_s, 6),
        "test_time_s": round(test_time_s, 6),
        "epoch_time_s": round(train_time_s + test_time_s, 6),
        "samples_per_s": round(samples / train_time_s, 3) if train_time_s > 0 else None,
        "steps": steps,
        "samples": samples,
        "train_loss": reduce.mean(totals.loss_sum / totals.seen, "metric.train_loss"),
        "train_accuracy": (
            None
            if regression
            else reduce.mean(totals.correct / totals.seen, "metric.train_accuracy")
        ),
        "test_loss": reduce.mean(test_loss, "metric.test_loss"),
        "test_accuracy": reduce.mean(test_score, "metric.test_accuracy"),
        "lr": totals.lr,
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
    plan: StepPlan,
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
        "steps_per_epoch": plan.steps_per_epoch,
        "global_batch_size": plan.global_batch,
        "lr_effective": plan.target_lr,
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
