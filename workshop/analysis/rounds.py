"""Speedups of a sweep recorded in rounds (``workshop sweep --rounds N``): each worker count
against the np=1 run of its own round, beside the raw compute of as many independent processes
(:func:`round_speedups`), and the ring-allreduce model checked round by round
(:func:`ring_check`).
"""

from __future__ import annotations

import pandas as pd

from workshop.analysis.benchmarks import paired_ratios
from workshop.frames import require_columns
from workshop.rules import ring_allreduce_time_s

__all__ = ["ring_check", "round_speedups"]


def round_speedups(runs: pd.DataFrame, baseline: pd.DataFrame | None = None) -> pd.DataFrame:
    """The throughput speedup of each worker count over np=1, per round, beside the raw compute
    speedup of as many independent processes measured in the same rounds.

    The ratio of the raw compute is the ceiling this machine puts on a speedup (shared memory
    bandwidth and caches); the gap between the two is what Horovod adds: its background thread,
    the allreduce and the waiting.

    Args:
        runs: a sweep's runs with ``round``, ``np`` and ``samples_per_s`` (``workshop sweep
            --rounds N``, read with :func:`workshop.readers.sweep.read_sweep`), one run with
            np=1 per round.
        baseline: :func:`workshop.readers.sweep.read_compute_baseline` of the same sweep, or
            None.

    Returns:
        One row per measured speedup: ``what`` (``"Horovod np=N"`` or ``"N independent
        processes"``), ``workers``, ``rounds``, ``speedup_min``, ``speedup_median``,
        ``speedup_max`` (over the rounds, each the ratio within its round) and ``verdict``
        (:func:`workshop.analysis.benchmarks.paired_ratios`'s).

    Raises:
        ValueError: a missing column, or a round without exactly one np=1 run.
    """
    require_columns(runs, ["round", "np", "samples_per_s"], "round_speedups", frame="runs")
    rows = []
    table = paired_ratios(runs.dropna(subset=["round"]), "np", "samples_per_s", 1)
    for row in table.iloc[1:].itertuples():
        rows.append((f"Horovod np={row.np}", row.np, row))
    if baseline is not None and len(baseline):
        raw = paired_ratios(baseline, "procs", "total_samples_per_s", 1)
        for row in raw.iloc[1:].itertuples():
            rows.append((f"{row.procs} independent processes", row.procs, row))
    return pd.DataFrame(
        [
            {"what": what, "workers": int(workers), "rounds": row.rounds,
             "speedup_min": row.ratio_min, "speedup_median": row.ratio_median,
             "speedup_max": row.ratio_max, "verdict": row.verdict}
            for what, workers, row in rows
        ]
    )  # fmt: skip


def ring_check(
    runs: pd.DataFrame,
    baseline: pd.DataFrame,
    *,
    bandwidth_bytes_per_s: float,
    alpha_s: float = 0.0,
) -> pd.DataFrame:
    """The ring-allreduce model checked against a sweep in rounds, round by round.

    For each round and worker count N > 1 the model predicts the step at N workers as the
    compute of one step at N (the np=1 step of the same round, slowed by the machine as
    the raw compute probe of the same round says: N / raw speedup) plus one ring allreduce of
    the network's gradients (:func:`workshop.rules.ring_allreduce_time_s`, no overlap with the
    backward pass), and from it the speedup.

    Args:
        runs: a sweep's runs with ``round``, ``np``, ``batch_size`` and ``samples_per_s``.
        baseline: the same sweep's :func:`workshop.readers.sweep.read_compute_baseline`
            (``gradient_bytes`` and the raw compute of 1 and N processes per round).
        bandwidth_bytes_per_s: B of the model (a capped link: its rate x the TCP payload
            share).
        alpha_s: the latency of one message.

    Returns:
        One row per round and N: ``round``, ``np``, ``step_np1_ms``, ``compute_ms`` (the
        step's compute at N), ``comm_model_ms``, ``step_predicted_ms``, ``step_measured_ms``,
        ``speedup_predicted``, ``speedup_measured``, ``error`` (predicted / measured - 1).

    Raises:
        ValueError: a missing column, or a round without its raw compute of 1 and N processes.
    """
    require_columns(runs, ["round", "np", "batch_size", "samples_per_s"], "ring_check")
    require_columns(baseline, ["round", "procs", "total_samples_per_s", "gradient_bytes"],
                    "ring_check", frame="baseline")  # fmt: skip
    raw = baseline.set_index(["round", "procs"])
    rows = []
    for round_, group in runs.dropna(subset=["round"]).groupby("round"):
        by_np = group.set_index("np")
        if 1 not in by_np.index:
            continue
        step1 = by_np.batch_size[1] / by_np.samples_per_s[1]
        for n in sorted(n for n in by_np.index if n > 1):
            if (round_, 1) not in raw.index or (round_, n) not in raw.index:
                raise ValueError(f"ring_check: round {round_} lacks the raw compute of 1 and "
                                 f"{n} processes (compute-baseline.jsonl)")  # fmt: skip
            slowdown = (
                n * raw.total_samples_per_s[(round_, 1)] / raw.total_samples_per_s[(round_, n)]
            )
            compute = step1 * slowdown
            comm = float(ring_allreduce_time_s(n, raw.gradient_bytes[(round_, n)], alpha_s,
                                               bandwidth_bytes_per_s))  # fmt: skip
            measured = n * by_np.batch_size[n] / by_np.samples_per_s[n]
            predicted = compute + comm
            rows.append({
                "round": int(round_), "np": int(n), "step_np1_ms": 1e3 * step1,
                "compute_ms": 1e3 * compute, "comm_model_ms": 1e3 * comm,
                "step_predicted_ms": 1e3 * predicted, "step_measured_ms": 1e3 * measured,
                "speedup_predicted": n * step1 / predicted,
                "speedup_measured": n * step1 / measured,
                "error": (n * step1 / predicted) / (n * step1 / measured) - 1,
            })  # fmt: skip
    return pd.DataFrame(rows)
