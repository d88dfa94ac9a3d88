"""Plots for the batch-size and learning-rate experiments: accuracy curves by LR rule (vs epoch
and vs wall time), accuracy vs batch size, LR schedules, the train/test gap.

Inputs come from :func:`workshop.readers.sweep.read_sweep` and :mod:`workshop.analysis.lr`.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes

from workshop.plot._axes import _axes
from workshop.plot.scaling import legend_outside


def _ax(ax: Axes | None) -> Axes:
    # constrained layout makes room for the legend outside the axes
    return _axes(ax, (7.5, 4), constrained=True)


def run_label(row: pd.Series) -> str:
    """A short legend label for a run: global batch, LR rule, warmup."""
    warm = row.get("warmup_epochs") or 0
    label = f"batch {int(row['global_batch_size'])}, lr {row['lr_scaling']}"
    return label + (f" + {warm:g} ep warmup" if warm else "")


def plot_accuracy_curves(
    epochs: pd.DataFrame,
    *,
    x: str = "epoch",
    y: str = "test_accuracy",
    runs: list[str] | None = None,
    legend: bool = True,
    ax: Axes | None = None,
) -> Axes:
    """Test accuracy of each run vs epoch or vs training time.

    Args:
        epochs: from :func:`workshop.readers.sweep.read_sweep` (``run``, ``epoch``, ``elapsed_s``,
            ``test_accuracy``, ``global_batch_size``, ``lr_scaling``, ``warmup_epochs``).
        x: ``epoch`` or ``elapsed_s`` (seed 003: the curves look alike against time).
        y: the metric column to draw.
        runs: the runs to draw (default all).
        legend: draw the legend (outside the axes, right); False for the left one of two
            panels showing the same runs.
    """
    ax = _ax(ax)
    data = epochs if runs is None else epochs[epochs["run"].isin(runs)]
    for _, group in data.groupby("run", sort=False):
        group = group.sort_values("epoch")
        ax.plot(group[x], group[y], "o-", ms=3, label=run_label(group.iloc[0]))
    ax.set_xlabel({"epoch": "epoch", "elapsed_s": "training time (s)"}.get(x, x))
    ax.set_ylabel(y.replace("_", " "))
    if legend:
        legend_outside(ax)
    return ax


def plot_accuracy_vs_batch(accuracy: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Final (and best) test accuracy vs global batch size at a fixed LR.

    Args:
        accuracy: from :func:`workshop.analysis.lr.accuracy_vs_batch`.
    """
    ax = _ax(ax)
    ax.plot(accuracy["global_batch_size"], accuracy["final_test_accuracy"], "o-", label="final")
    if "best_test_accuracy" in accuracy:
        ax.plot(accuracy["global_batch_size"], accuracy["best_test_accuracy"], "s--", label="best")
    ax.set_xscale("log", base=2)
    ax.set_xticks(accuracy["global_batch_size"], [str(b) for b in accuracy["global_batch_size"]])
    ax.minorticks_off()
    ax.set_xlabel("global batch size")
    ax.set_ylabel("test accuracy")
    legend_outside(ax)
    return ax


def plot_lr_schedules(schedules: dict[str, pd.DataFrame], *, ax: Axes | None = None) -> Axes:
    """Learning rate vs epoch for several rules.

    Args:
        schedules: label -> DataFrame from :func:`workshop.analysis.lr.lr_schedule`.
    """
    ax = _ax(ax)
    for label, schedule in schedules.items():
        ax.plot(schedule["epoch"], schedule["lr"], label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("learning rate")
    legend_outside(ax)
    return ax


def plot_train_test_gap(gap: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Training minus test accuracy per epoch, one line per run.

    Args:
        gap: from :func:`workshop.analysis.lr.train_test_gap`; runs are labelled with
            :func:`run_label` when it carries ``global_batch_size`` and ``lr_scaling``, else
            with their name.
    """
    ax = _ax(ax)
    ax.axhline(0, color="0.6", lw=1)
    labelled = {"global_batch_size", "lr_scaling"} <= set(gap)
    for run, group in gap.groupby("run", sort=False):
        label = run_label(group.iloc[0]) if labelled else str(run)
        ax.plot(group["epoch"], group["accuracy_gap"], "o-", ms=3, label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("train - test accuracy")
    legend_outside(ax)
    return ax
