"""Lesson 05 (notebooks/05-mpi-profiling.ipynb): its exercises and the findings it states.

The lesson's data: ``run``, our profiled run (a Run with an mpitrace profile and metrics;
the recording :data:`RECORDINGS` names, or the learner's own or LIVE run), ``slow``, the same
run at a 20 ms cycle time, and ``cpu`` / ``gpu``, the ALCF tutorial's ThetaGPU profiles.
"""

from __future__ import annotations

import math

from workshop.analysis.mpi import comm_vs_training, message_size_bins, negotiation_signature
from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l05_mpi import findings as said
from workshop.lessons.l05_mpi.findings import (
    ALLREDUCE,
    HOROVOD_DEFAULT_CYCLE_MS,
    negotiations,
    rank0,
)

#: The recordings the lesson opens by default (its parameters cell names the same).
RECORDINGS = {
    "run": "mpi/torch-mnist-mpi-ops-np2",
    "slow": "mpi/torch-mnist-mpi-ops-cycle20ms-np2",
    "cpu": "mpi/seed001-thetagpu-cpu",
    "gpu": "mpi/seed001-thetagpu-gpu",
}
#: Exercise 05.3's choices: MPI time over training time, [low, high).
RANGES = {"a": (0, 0.25), "b": (0.25, 1), "c": (1, 3), "d": (3, 10), "e": (10, math.inf)}


def choice(ratio: float) -> str:
    """The letter of :data:`RANGES` that ``ratio`` falls in."""
    return next(k for k, (low, high) in RANGES.items() if low <= ratio < high)


def _over_train(run) -> float:
    return comm_vs_training(run, run.metrics)["comm_over_train"]


EXERCISES = (
    Exercise(
        "05.1",
        data=("run",),
        recorded={"run": RECORDINGS["run"]},
        expected=negotiations,
        hints=(
            "Which block of the file lists MPI_Allreduce's calls by size, and where does it end?",
            "Split the text into lines, find the line that starts with 'MPI_Allreduce' and has "
            "'#calls' in it, read the rows below it up to the first blank line, and add up the "
            "#calls of the rows whose avg. bytes are 8.0",
        ),
        slips=(
            Slip(
                "every MPI_Allreduce call, not only the 8-byte ones",
                lambda run: int(message_size_bins(run, routine=ALLREDUCE).calls.sum()),
            ),
            Slip("both ranks' calls: the file is rank 0's", lambda run: 2 * negotiations(run)),
        ),
        solution="The rows of the MPI_Allreduce block whose average is 8 bytes are the "
        "negotiation's bit vectors: one allreduce per background cycle.",
    ),
    Exercise(
        "05.2",
        data=("slow",),
        recorded={"slow": RECORDINGS["slow"]},
        expected=negotiations,
        rel_tol=0.15,
        hints=(
            "How often does the background thread send an 8-byte allreduce?",
            "One negotiation per background cycle, and a cycle starts at most once per "
            "HOROVOD_CYCLE_TIME: how many cycles fit in the elapsed time?",
        ),
        slips=(
            Slip(
                "Horovod's default 1 ms cycle, not this run's 20 ms",
                lambda slow: round(rank0(slow, "elapsed_s") / (HOROVOD_DEFAULT_CYCLE_MS / 1e3)),
            ),
            Slip("both ranks' calls", lambda slow: 2 * negotiations(slow)),
        ),
        solution="Elapsed time over the cycle time is the most cycles there can be; a cycle "
        "that moves gradients outlasts 20 ms, so the count comes out a little lower.",
    ),
    Exercise(
        "05.3",
        data=("run",),
        recorded={"run": RECORDINGS["run"]},
        expected=lambda run: choice(_over_train(run)),
        behind=_over_train,
        hints=(
            "Which thread calls MPI, and from when to when does it run?",
            "The background loop runs from hvd.init() to shutdown, through start-up and "
            "evaluation, and a blocking allreduce counts its waiting in full",
        ),
        slips=(
            Slip(
                "the range below: as if the MPI time fitted inside the training loop more",
                lambda run: chr(ord(choice(_over_train(run))) - 1),
            ),
        ),
        solution="The background thread is inside MPI from hvd.init() to shutdown, waiting "
        "included, while the training loop runs only part of that time.",
    ),
    Exercise(
        "05.4",
        data=("gpu", "cpu"),
        recorded={"gpu": RECORDINGS["gpu"], "cpu": RECORDINGS["cpu"]},
        expected=lambda gpu, cpu: negotiation_signature(gpu)["small_call_share"],
        abs_tol=0.02,
        hints=(
            "Which calls are left in MPI when NCCL moves the gradients?",
            "Horovod still negotiates over MPI on GPUs; only the gradients moved to NCCL",
        ),
        slips=(
            Slip(
                "the CPU run's share, as if MPI still moved the gradients",
                lambda gpu, cpu: negotiation_signature(cpu)["small_call_share"],
            ),
        ),
        solution="NCCL carries every gradient: what is left in MPI is the negotiation's bit "
        "vectors.",
    ),
)


FINDINGS = (
    Finding("05.mpi-time", ("run",), said.mpi_time),
    Finding("05.slow-elapsed", ("slow",), said.slow_elapsed),
    Finding("05.signature", ("run",), said.signature, after=("05.1",)),
    Finding("05.cycles", ("run", "slow"), said.cycles, after=("05.1", "05.2")),
    Finding("05.training", ("run",), said.training, after=("05.3",)),
    Finding("05.cpu-signature", ("cpu",), said.cpu_signature),
    Finding("05.cpu-ranks", ("cpu",), said.cpu_ranks),
    Finding("05.mpi-totals", ("cpu", "gpu"), said.mpi_totals),
    Finding("05.cpu-vs-gpu", ("cpu", "gpu"), said.cpu_vs_gpu),
    Finding("05.summary", ("cpu", "gpu"), said.summary),
    Finding(
        "05.summary-answers",
        ("run", "slow", "gpu"),
        said.summary_answers,
        after=("05.2", "05.3", "05.4"),
    ),
)
