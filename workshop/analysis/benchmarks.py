"""Effects measured by interleaved repeats: each setting against the baseline of its own round.

A benchmark on a shared machine runs every setting once per round, back to back, so a round's
runs share the background load of the moment. Comparing each run with the baseline **of the
same round** removes the load that moves whole rounds; the spread of these per-round ratios is
what is left of the noise, and an effect is shown only when every round agrees on its side.
"""

from __future__ import annotations

import pandas as pd

from workshop.frames import require_columns


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
    require_columns(runs, ["round", by, metric], "paired_ratios", frame="runs")
    base = runs[runs[by] == baseline]
    if base.empty:
        raise ValueError(f"paired_ratios: no run with {by} = {baseline!r}")
    if base["round"].duplicated().any() or set(base["round"]) != set(runs["round"]):
        raise ValueError(
            f"paired_ratios: every round needs exactly one run with {by} = {baseline!r}"
        )
    per_round = base.set_index("round")[metric]
    ratio = runs[metric] / runs["round"].map(per_round)
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
