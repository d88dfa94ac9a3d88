"""An MPI profile explained in sentences (``workshop mpi report``), from the analyses of
:mod:`workshop.analysis.mpi`: each rule turns one analysis into sentences with its numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from workshop.analysis.mpi import (
    SMALL_BYTES,
    _default_rank,
    comm_fraction,
    comm_vs_training,
    dominant_routine,
    load_imbalance,
    negotiation_signature,
)
from workshop.frames import takes_run
from workshop.readers.mpitrace import MpiProfile
from workshop.units import format_bytes

__all__ = ["mpi_findings"]


@takes_run
def mpi_findings(
    profile: MpiProfile, small_bytes: float = SMALL_BYTES, metrics: pd.DataFrame | None = None
) -> list[str]:
    """The profile explained in sentences, each with its numbers.

    Each sentence comes from one rule of :data:`_FINDING_RULES`, in that order.

    Args:
        profile: the job's profile.
        small_bytes: bound for negotiation-size allreduces, bytes.
        metrics: the run's per-epoch metrics, when the profile is in a run directory: adds
            the MPI time against the training time (:func:`comm_vs_training`).

    Returns:
        Lines of text (no trailing newlines), in the order: the job, time in MPI, the dominant
        routine, the negotiation signature, the load imbalance, and what is missing.
    """
    facts = _Facts(
        profile=profile,
        rank=_default_rank(profile, None),
        small_bytes=small_bytes,
        metrics=metrics,
        fractions=comm_fraction(profile).set_index("rank"),
    )
    return [line for rule in _FINDING_RULES for line in rule(facts)]


@dataclass(frozen=True)
class _Facts:
    """What the rules of :func:`mpi_findings` read: the profile, its report rank, the bound
    for small allreduces (bytes), the run's metrics (or None) and :func:`comm_fraction` by
    rank."""

    profile: MpiProfile
    rank: int
    small_bytes: float
    metrics: pd.DataFrame | None
    fractions: pd.DataFrame


def _job_lines(f: _Facts) -> list[str]:
    p = f.profile
    return [
        f"Job {p.jobid}: {p.ntasks} MPI tasks; profile files for rank(s) "
        f"{', '.join(map(str, p.ranks))} ({p.layout} mpitrace layout)."
    ]


def _rank_time_lines(f: _Facts) -> list[str]:
    """The report rank's time inside MPI, and why it is not time lost."""
    fr, rank = f.fractions, f.rank
    if rank not in fr.index or math.isnan(fr.loc[rank, "comm_fraction"]):
        return []
    return [
        f"Rank {rank} spent {fr.loc[rank, 'comm_s']:.3f} s of {fr.loc[rank, 'elapsed_s']:.3f}"
        f" s ({100 * fr.loc[rank, 'comm_fraction']:.1f}%) inside MPI calls, summed over "
        "all its threads. In a Horovod run most of it is the background thread "
        "(negotiating every cycle, waiting for the other ranks) running alongside the "
        "training computation: it is not the share of training time lost."
    ]


def _training_lines(f: _Facts) -> list[str]:
    """The time in MPI against the training time, when the run's metrics are known."""
    if f.metrics is None or f.rank not in f.fractions.index:
        return []
    vs = comm_vs_training(f.profile, f.metrics, f.rank)
    text = (
        f"The run trained {vs['steps']} steps in {vs['train_s']:.3f} s "
        f"({vs['step_ms']:.1f} ms per step); its {vs['comm_s']:.3f} s in MPI are "
        f"{vs['comm_over_train']:.2f}x that"
    )
    if vs["comm_over_train"] > 1:
        text += (
            f": at most {vs['train_s']:.3f} s of one thread's MPI time fits inside the "
            "training loop, the rest was spent outside it (start-up, evaluation, shutdown)."
        )
    else:
        text += (
            ": how much of it delayed training the profile cannot tell (Horovod's "
            "background thread runs alongside the computation)."
        )
    return [text]


def _threads_lines(f: _Facts) -> list[str]:
    """More time in MPI than elapsed: several threads' times add up."""
    if not (f.fractions["comm_fraction"] > 1).any():
        return []
    return [
        "Some ranks spent more time in MPI than they ran: several threads were inside MPI "
        "at once, and their times add up (as in mpitrace)."
    ]


def _ranks_range_lines(f: _Facts) -> list[str]:
    fr = f.fractions
    if not (len(fr) > 1 and fr["comm_fraction"].notna().any()):
        return []
    return [
        f"Over {len(fr)} ranks the share of time in MPI ranges from "
        f"{100 * fr['comm_fraction'].min():.1f}% to {100 * fr['comm_fraction'].max():.1f}%."
    ]


def _dominant_lines(f: _Facts) -> list[str]:
    dom = dominant_routine(f.profile, f.rank)
    if dom["routine"] is None:
        return []
    return [
        f"{dom['routine']} dominates rank {f.rank}'s MPI time: {dom['time_s']:.3f} s "
        f"({100 * dom['time_share']:.1f}%) in {dom['calls']} calls of "
        f"{dom['avg_bytes']:.1f} bytes on average."
    ]


def _signature_lines(f: _Facts) -> list[str]:
    """Small (negotiation) against large (gradient) allreduces, from the best source there is."""
    sig = negotiation_signature(f.profile, f.rank, f.small_bytes)
    calls = sig["allreduce_calls"]
    if calls and sig["source"] == "message sizes":
        return _sized_signature_lines(sig, f.small_bytes)
    if calls and sig["source"] == "routine table":
        avg = sig["allreduce_avg_bytes"]
        if sig["large_calls"] == 0:
            return [
                f"No message size distribution for rank {f.rank}; its {calls} MPI_Allreduce "
                f"calls average {avg:.1f} bytes, so all are negotiation-sized: the gradients "
                "do not go through MPI."
            ]
        return [
            f"No message size distribution for rank {f.rank}; its {calls} MPI_Allreduce calls "
            f"average {avg:.1f} bytes, so small and large calls cannot be told apart."
        ]
    return ["No MPI_Allreduce calls: this run did not use MPI for Horovod's work."]


def _sized_signature_lines(sig: dict[str, object], small_bytes: float) -> list[str]:
    """The signature read from the message-size distribution."""
    lines = [
        f"Negotiation signature: {sig['small_calls']} of {sig['allreduce_calls']} MPI_Allreduce "
        f"calls ({100 * sig['small_call_share']:.1f}%) move <= {small_bytes:g} bytes, taking "
        f"{sig['small_time_s']:.3f} s ({100 * sig['small_time_share']:.1f}% of the allreduce"
        " time). In a Horovod run the 8-byte ones (16 while a timeline is recorded) are the "
        "response cache's bit vector, one allreduce per background cycle: a bit per cached "
        "tensor and 3 status bits in 64-bit words, so 8 bytes hold up to 61 cached tensors "
        "(none with the cache off, when rank 0 gathers every request instead); 4-byte ones are "
        "scalar tensors (e.g. averaged metrics)."
    ]
    if sig["large_calls"]:
        lines.append(
            f"{sig['large_calls']} larger MPI_Allreduce calls carry the tensors themselves: "
            f"{format_bytes(sig['large_bytes'])} in {sig['large_time_s']:.3f} s "  # type: ignore[arg-type]
            "(the gradients go through MPI)."
        )
    else:
        lines.append(
            "No MPI_Allreduce moves more than that: the gradients do not go through MPI "
            "(on GPUs Horovod sends them with NCCL; with HOROVOD_CPU_OPERATIONS=gloo, Gloo)."
        )
    return lines


def _imbalance_lines(f: _Facts) -> list[str]:
    """The least, median and most communication time over the tasks, and who waited."""
    imb = load_imbalance(f.profile)
    if imb["min_task"] is None or imb["max_task"] is None:
        return []
    text = (
        f"Communication time over the tasks: minimum {imb['min_comm_s']:.3f} s (task "
        f"{imb['min_task']}), median {imb['median_comm_s']:.3f} s (task "
        f"{imb['median_task']}), maximum {imb['max_comm_s']:.3f} s (task {imb['max_task']})"
    )
    if not math.isnan(imb["max_over_min"]):  # type: ignore[arg-type]
        text += f"; max/min = {imb['max_over_min']:.2f}"
    return [
        text + ". Time in MPI includes waiting for the others, so the task with the least "
        "of it is the one the others waited for (in Horovod, the rank whose background "
        "thread reached the collectives last)."
    ]


def _warning_lines(f: _Facts) -> list[str]:
    return [f"Warning: {warning}" for warning in f.profile.warnings]


_FINDING_RULES: tuple[Callable[[_Facts], list[str]], ...] = (
    _job_lines,
    _rank_time_lines,
    _training_lines,
    _threads_lines,
    _ranks_range_lines,
    _dominant_lines,
    _signature_lines,
    _imbalance_lines,
    _warning_lines,
)
"""The sentences of :func:`mpi_findings`, in report order."""
