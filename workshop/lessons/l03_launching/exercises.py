"""Lesson 03 (notebooks/03-launching-runs.ipynb): its exercises and the findings it states.

The lesson's data: ``sweep``, a Run whose folder holds run directories (the recordings in
``data/runs``, or the learner's ``RUN_DIR``); ``controllers``, the interleaved Gloo / MPI runs;
``killed``, ``cluster`` and ``slurm``, single recorded runs (or a LIVE Slurm job's).
"""

from __future__ import annotations

from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l03_launching import findings as said
from workshop.lessons.l03_launching.findings import (
    example,
    first_epoch_choice,
    first_epoch_x,
    steps_per_rank,
    throughput_speedup,
    worker_group,
)
from workshop.readers import read_metrics

#: The recordings the lesson opens by default (its parameters cell names the same).
RECORDINGS = {"sweep": "runs"}


def _steady_mean_ratio(sweep) -> float:
    by_np = worker_group(sweep).sort_values("np")
    rate = [
        read_metrics(p).samples_per_s.mean() for p in (by_np.path.iloc[-1], by_np.path.iloc[0])
    ]
    return rate[0] / rate[1]


EXERCISES = (
    Exercise(
        "03.1",
        data=("sweep",),
        recorded=RECORDINGS,
        expected=steps_per_rank,
        hints=(
            "Which numbers in the command and in the data decide how many batches a rank gets?",
            "Each rank's share of the images, cut into whole batches; a --steps-per-epoch "
            "option caps the count",
        ),
        slips=(
            Slip("the incomplete last batch counted", lambda sweep: steps_per_rank(sweep) + 1),
            Slip(
                "all the images on every rank (1/np forgotten)",
                lambda sweep: steps_per_rank(sweep) * int(example(sweep).np),
            ),
        ),
        solution="Training images // np // batch size, capped by --steps-per-epoch when the "
        "command has it.",
        minutes=5,
    ),
    Exercise(
        "03.2",
        data=("sweep",),
        recorded=RECORDINGS,
        expected=lambda sweep: first_epoch_choice(first_epoch_x(sweep).max()),
        behind=lambda sweep: float(first_epoch_x(sweep).max()),
        hints=(
            "What does TensorFlow do on the first call of a tf.function that PyTorch does not?",
            "Tracing and optimising the training step's graph takes seconds, once; compare that "
            "with how long a later epoch of these small runs takes (train_time_s above, divided "
            "by the epochs)",
        ),
        slips=(
            Slip(
                "the range below (a first epoch more like the others)",
                lambda sweep: chr(ord(first_epoch_choice(first_epoch_x(sweep).max())) - 1),
            ),
        ),
        solution="First-epoch time over a later epoch's, per run, from the runs table: the "
        "largest ratio's range.",
        minutes=3,
    ),
    Exercise(
        "03.3",
        data=("sweep",),
        recorded=RECORDINGS,
        expected=throughput_speedup,
        sig_figs=2,
        hints=(
            "Which lines of each metrics.jsonl are the steady state, and which field holds the "
            "throughput?",
            "For each of the two runs: json.loads every line, keep epochs >= 2, take the median "
            "of samples_per_s; then divide the most-workers run's median by the "
            "fewest-workers run's",
        ),
        slips=(
            Slip("the first epoch kept, a mean over all epochs", _steady_mean_ratio),
            Slip("fewest over most workers: upside down", lambda s: 1 / throughput_speedup(s)),
        ),
        solution="The median samples/s of the epochs after the first, per run, from its "
        "metrics.jsonl; the most-workers run's over the fewest-workers run's.",
        minutes=12,
    ),
)


FINDINGS = (
    Finding("03.runs", ("sweep",), said.runs_read),
    Finding("03.example", ("sweep",), said.example_data),
    Finding("03.synthetic", ("sweep",), said.synthetic),
    Finding("03.first-epoch", ("sweep",), said.first_epoch, after=("03.2",)),
    Finding("03.workers", ("sweep",), said.workers, after=("03.3",)),
    Finding("03.controllers", ("sweep",), said.controllers_pair),
    Finding("03.interleaved", ("sweep", "controllers"), said.controllers_repeated),
    Finding("03.killed", ("killed",), said.killed),
    Finding("03.cluster", ("cluster",), said.cluster_hosts),
    Finding("03.slurm", ("slurm",), said.slurm),
    Finding("03.summary-answers", ("sweep",), said.summary_answers, after=("03.1", "03.2")),
)
