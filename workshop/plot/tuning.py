"""Plots of Horovod's tuning knobs (lesson 08): a knob's effect with the spread of repeated
runs, the throughput of each (fusion threshold, cycle time) tried, and what autotune tried.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from workshop.plot._axes import _axes


def _wide(ax: Axes | None) -> Axes:
    # the size (and constrained layout) of the scaling plots these sit beside in lesson 08
    return _axes(ax, (7.5, 4), constrained=True)


def readable(column: str) -> str:
    """A run option's column name as an axis label: ``cycle_time_ms`` -> ``cycle time (ms)``."""
    for suffix, unit in (("_mb", "MB"), ("_ms", "ms"), ("_s", "s")):
        if column.endswith(suffix):
            return f"{column.removesuffix(suffix).replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


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
    ax.set_xlabel(f"{readable(knob)} (first: the baseline)")
    ax.set_ylabel(metric_label or "median over repeated runs")
    return ax


def plot_tuning(tuning: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Throughput for each (fusion threshold, cycle time) tried, fastest first.

    Args:
        tuning: from :func:`workshop.analysis.tuning.tuning_table`.
    """
    ax = _wide(ax)
    labels = [
        f"{'default' if pd.isna(f) else f'{f:g} MB'} / {'default' if pd.isna(c) else f'{c:g} ms'}"
        for f, c in zip(tuning["fusion_threshold_mb"], tuning["cycle_time_ms"], strict=True)
    ]
    ax.barh(labels[::-1], tuning["samples_per_s"].to_numpy()[::-1])
    ax.set_xlabel("samples/s (all workers)")
    ax.set_ylabel("fusion threshold / cycle time")
    return ax


def plot_autotune(autotune: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """What Horovod's autotuner tried: cycle time vs fusion threshold, coloured by score,
    the best setting starred.

    Args:
        autotune: from :func:`workshop.readers.logs.read_autotune_log`.
    """
    ax = _wide(ax)
    samples = autotune[~autotune["final_best"]]
    points = ax.scatter(
        samples["cycle_time_ms"],
        samples["fusion_threshold_mb"],
        c=samples["score_bytes_per_us"],
        cmap="viridis",
        s=40,
    )
    best = autotune.loc[autotune["score_bytes_per_us"].idxmax()]
    ax.scatter(
        [best["cycle_time_ms"]],
        [best["fusion_threshold_mb"]],
        marker="*",
        s=300,
        c="C3",
        label=f"best: {best['cycle_time_ms']:.2g} ms, {best['fusion_threshold_mb']:.3g} MB",
    )
    ax.figure.colorbar(points, ax=ax, label="score (bytes/us)")
    ax.set_xlabel("cycle time (ms)")
    ax.set_ylabel("fusion threshold (MB)")
    ax.legend(fontsize="small")
    return ax


def plot_autotune_progress(autotune: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Autotune score of each sample in order, and the best so far."""
    ax = _wide(ax)
    samples = autotune[~autotune["final_best"]]
    ax.plot(samples["sample"], samples["score_bytes_per_us"], "o", label="sample score")
    ax.plot(samples["sample"], samples["best_so_far"], "-", label="best so far")
    ax.set_xlabel("autotune sample")
    ax.set_ylabel("score (bytes allreduced / us)")
    ax.legend(fontsize="small")
    return ax
