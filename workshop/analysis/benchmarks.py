"""Effects measured by interleaved repeats: each setting against the baseline of its own round.

A benchmark on a shared machine runs every setting once per round, back to back, so a round's
runs share the background load of the moment. Comparing each run with the baseline **of the
same round** removes the load that moves whole rounds; the spread of these per-round ratios is
what is left of the noise, and an effect is shown only when every round agrees on its side.
Also here: what a repeated run is measured by (:data:`RUN_MEASURES`, from its per-epoch
metrics), and the range of a measure over each group of runs (:func:`value_ranges`).
"""

from __future__ import annotations

import pandas as pd

from workshop.frames import require_columns, takes_run


def ranges_overlap(low, high, other_low, other_high):
    """Whether two ranges of repeated measurements overlap: then their difference lies within
    the spread of the repeats (this machine's noise), and neither is measurably ahead. The one
    rule for "within the noise" (tuning, launching, parallelism, the capstone); works on numbers
    and, element by element, on pandas Series.

    >>> ranges_overlap(1.0, 2.0, 1.9, 3.0), ranges_overlap(1.0, 2.0, 2.1, 3.0)
    (True, False)
    """
    return (low <= other_high) & (other_low <= high)


def round_ratios(runs: pd.DataFrame, by: str, metric: str, baseline) -> pd.Series:
    """Each run's ``metric`` divided by that of the baseline run of its own round.

    Args:
        runs: one row per run with ``round``, ``by`` and ``metric`` (one baseline run per
            round).
        by: the column naming the setting.
        metric: the measured column.
        baseline: the value of ``by`` that the others are divided by.

    Returns:
        The ratio per run, on the index of ``runs`` (1 for the baseline runs).

    Raises:
        ValueError: a missing column, no baseline run, or a round without exactly one
            baseline run.

    >>> runs = pd.DataFrame({"round": [1, 1, 2, 2], "ms": [1, 5, 1, 5],
    ...                      "step_ms": [10.0, 12.0, 20.0, 21.0]})
    >>> round_ratios(runs, "ms", "step_ms", 1).tolist()
    [1.0, 1.2, 1.0, 1.05]
    """
    require_columns(runs, ["round", by, metric], "paired_ratios", frame="runs")
    base = runs[runs[by] == baseline]
    if base.empty:
        raise ValueError(f"paired_ratios: no run with {by} = {baseline!r}")
    if base["round"].duplicated().any() or set(base["round"]) != set(runs["round"]):
        raise ValueError(
            f"paired_ratios: every round needs exactly one run with {by} = {baseline!r}"
        )
    per_round = base.set_index("round")[metric]
    return runs[metric] / runs["round"].map(per_round)


def paired_ratios(runs: pd.DataFrame, by: str, metric: str, baseline) -> pd.DataFrame:
    """Each setting's ``metric`` divided by the baseline's in the same round, summarised.

    Args:
        runs: one row per run with ``round``, ``by`` and ``metric`` (one baseline run per
            round), e.g. :func:`workshop.readers.benchmarks.read_benchmark_runs`.
        by: the column naming the setting (``cycle_time_ms``, ``kind``).
        metric: the measured column (``step_time_ms``, ``samples_per_s``).
        baseline: the value of ``by`` that the others are divided by.

    Returns:
        One row per setting, the baseline first: ``<by>``, ``rounds``, ``min``, ``median``,
        ``max`` (of ``metric`` over the rounds), ``ratio_min``, ``ratio_median``,
        ``ratio_max`` (of ``metric`` / the same round's baseline; 1 for the baseline), and
        ``verdict``: ``"higher in every round"``, ``"lower in every round"``, ``"within the
        noise"`` (the per-round ratios fall on both sides of 1), or ``"baseline"``.

    Raises:
        ValueError: a missing column, no baseline run, or a round without exactly one
            baseline run.

    >>> runs = pd.DataFrame({"round": [1, 1, 2, 2], "ms": [1, 5, 1, 5],
    ...                      "step_ms": [10.0, 12.0, 20.0, 21.0]})
    >>> paired_ratios(runs, "ms", "step_ms", 1)[["ms", "ratio_min", "ratio_max", "verdict"]]
       ms  ratio_min  ratio_max                verdict
    0   1       1.00        1.0               baseline
    1   5       1.05        1.2  higher in every round
    """
    ratio = round_ratios(runs, by, metric, baseline)
    rows = []
    settings = [baseline, *[s for s in dict.fromkeys(runs[by]) if s != baseline]]
    for setting in settings:
        mine = runs[by] == setting
        values, ratios = runs.loc[mine, metric], ratio[mine]
        if setting == baseline:
            verdict = "baseline"
        elif ratios.min() > 1:
            verdict = "higher in every round"
        elif ratios.max() < 1:
            verdict = "lower in every round"
        else:
            verdict = "within the noise"
        rows.append(
            {
                by: setting,
                "rounds": int(mine.sum()),
                "min": values.min(),
                "median": values.median(),
                "max": values.max(),
                "ratio_min": ratios.min(),
                "ratio_median": ratios.median(),
                "ratio_max": ratios.max(),
                "verdict": verdict,
            }
        )
    return pd.DataFrame(rows)


@takes_run
def steady_samples_per_s(metrics: pd.DataFrame) -> float:
    """Training throughput after the first epoch (start-up and warm-up left out): the samples
    of epochs 2.. divided by their training time.

    Args:
        metrics: one row per epoch, in order, with ``samples`` and ``train_time_s``
            (:func:`workshop.readers.runs.read_metrics`).

    Raises:
        ValueError: a missing column, or fewer than two epochs.

    >>> steady_samples_per_s(pd.DataFrame({"samples": [100, 200, 200],
    ...                                    "train_time_s": [9.0, 1.0, 3.0]}))
    100.0
    """
    require_columns(metrics, ["samples", "train_time_s"], "steady_samples_per_s", frame="metrics")
    later = metrics.iloc[1:]
    if later.empty:
        raise ValueError("steady_samples_per_s: needs >= 2 epochs for a steady throughput")
    return float(later["samples"].sum() / later["train_time_s"].sum())


@takes_run
def final_test_accuracy(metrics: pd.DataFrame) -> float:
    """The test accuracy after the last epoch (``metrics``: one row per epoch, in order, with
    ``test_accuracy``)."""
    require_columns(metrics, ["test_accuracy"], "final_test_accuracy", frame="metrics")
    return float(metrics["test_accuracy"].iloc[-1])


#: What a run is measured by in a comparison of repeated runs, by name: a function of the
#: run's per-epoch metrics (higher is better for both).
RUN_MEASURES = {"samples_per_s": steady_samples_per_s, "test_accuracy": final_test_accuracy}


def value_ranges(runs: pd.DataFrame, by: str, value: str) -> pd.DataFrame:
    """The range of ``value`` in each group of runs: whether two groups can be told apart by
    one run (the smallest of one above the largest of the other), which medians do not say.

    Args:
        runs: one row per run with ``by`` and ``value``.
        by: the column naming the group.
        value: the measured column.

    Returns:
        One row per group (the index, sorted): ``runs``, ``min``, ``median``, ``max``.

    Raises:
        ValueError: a missing column.

    >>> runs = pd.DataFrame({"group": ["a", "a", "b"], "late": [0.5, 2.0, 1.0]})
    >>> value_ranges(runs, "group", "late")[["min", "median", "max"]].to_dict("index")
    {'a': {'min': 0.5, 'median': 1.25, 'max': 2.0}, 'b': {'min': 1.0, 'median': 1.0, 'max': 1.0}}
    """
    require_columns(runs, [by, value], "value_ranges", frame="runs")
    return runs.groupby(by)[value].agg(runs="count", min="min", median="median", max="max")
