"""Plots of Horovod's tuning knobs (lesson 08): a knob's effect with the spread of repeated
runs. The fusion/cycle-time grid and the autotune log are drawn by
:func:`workshop.plot.scaling.plot_tuning`, :func:`~workshop.plot.scaling.plot_autotune` and
:func:`~workshop.plot.scaling.plot_autotune_progress`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from workshop.plot._axes import _axes


def plot_knob_effect(
    effect: pd.DataFrame, knob: str, *, metric_label: str = "", ax: Axes | None = None
) -> Axes:
    """Median of a metric per knob setting (bars) and the range of its repeated runs
    (whiskers from the lowest to the highest run), the baseline setting first.

    Args:
        effect: from :func:`workshop.analysis.tuning.knob_effect`.
        knob: the knob column of ``effect``.
        metric_label: the y-axis label.
        ax: Axes to draw on (a new figure if None).
    """
    ax = _axes(ax, (5, 3.5))
    labels = [
        "default" if pd.isna(v) else f"{v:g}" if isinstance(v, float) else str(v)
        for v in effect[knob]
    ]
    x = np.arange(len(effect))
    colors = ["C0"] + ["C1"] * (len(effect) - 1)
    ax.bar(x, effect["median"], color=colors, alpha=0.7)
    below = (effect["median"] - effect["low"]).to_numpy()
    above = (effect["high"] - effect["median"]).to_numpy()
    ax.errorbar(x, effect["median"], yerr=[below, above], fmt="none", color="k", capsize=4)
    for i, row in enumerate(effect.itertuples()):
        ax.annotate(
            f"n={row.runs}",
            (i, row.high),
            textcoords="offset points",
            xytext=(0, 4),
            ha="center",
            fontsize="small",
        )
    ax.set_xticks(x, labels)
    ax.set_xlabel(f"{knob} (first: baseline)")
    ax.set_ylabel(metric_label or "median over repeated runs")
    return ax
