"""Plots for the batch-size and learning-rate experiments: accuracy curves by LR rule (vs epoch
and vs wall time), accuracy vs batch size, LR schedules, the train/test gap.

Inputs come from :func:`workshop.readers.sweep.read_sweep` and :mod:`workshop.analysis.lr`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from workshop.plot._axes import _axes
from workshop.plot.scaling import legend_outside


def _ax(ax: Axes | None) -> Axes:
    # constrained layout makes room for the legend outside the axes
    return _axes(ax, (7.5, 4), constrained=True)


def _merged_label(labels: list[str]) -> str:
    """One legend label for lines drawn on top of each other: the words the labels share are
    said once (``none, 0 / 2 warm-up epochs (same line)``, ``batch 512, lr none, with or without
    2 ep warmup (same line)``)."""
    if len(labels) == 1:
        return labels[0]
    words = [label.split(" ") for label in labels]
    head = 0
    while all(len(w) > head and w[head] == words[0][head] for w in words):
        head += 1
    tail = 0
    while all(len(w) > head + tail and w[-1 - tail] == words[0][-1 - tail] for w in words):
        tail += 1
    middles = [" ".join(w[head : len(w) - tail]) for w in words]
    added = [m.removeprefix("+ ") for m in middles if m]
    if tail == 0 and len(added) == len(middles) - 1:
        # "lr none" and "lr none + 2 ep warmup": the words only one of them has made no difference
        return f"{' '.join(words[0][:head])}, with or without {' / '.join(added)} (same line)"
    parts = [
        " ".join(words[0][:head]),
        " / ".join(middles),
        " ".join(words[0][len(words[0]) - tail :]),
    ]
    return " ".join(p for p in parts if p) + " (same line)"


def _plot_lines(ax: Axes, lines: list[tuple[str, pd.Series, pd.Series]], *args, **kwargs) -> None:
    """Draw ``(label, x, y)`` lines so that the legend lists exactly the lines one sees: a line
    with no finite point is not drawn (and gets no entry), and lines with the same points are
    drawn once, under one label that names them all. A line keeps the colour of its place in
    ``lines`` (``C0``, ``C1`` ...), so two panels of the same runs match whatever is merged."""
    drawn: list[tuple[list[str], np.ndarray, np.ndarray, str]] = []
    for place, (label, x, y) in enumerate(lines):
        xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        if not np.isfinite(ys).any():
            continue
        for labels, dx, dy, _ in drawn:
            if (
                dx.shape == xs.shape
                and np.array_equal(dx, xs, equal_nan=True)
                and np.allclose(dy, ys, equal_nan=True)
            ):
                labels.append(label)
                break
        else:
            drawn.append(([label], xs, ys, f"C{place % 10}"))
    for labels, xs, ys, color in drawn:
        ax.plot(xs, ys, *args, color=color, label=_merged_label(labels), **kwargs)


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
    lines = []
    for _, group in data.groupby("run", sort=False):
        group = group.sort_values("epoch")
        lines.append((run_label(group.iloc[0]), group[x], group[y]))
    _plot_lines(ax, lines, "o-", ms=3)
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

    Returns:
        The Axes; schedules with the same points (the ``none`` rule with and without warm-up)
        are one line with one legend entry naming them all.
    """
    ax = _ax(ax)
    _plot_lines(ax, [(label, s["epoch"], s["lr"]) for label, s in schedules.items()])
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
    lines = []
    for run, group in gap.groupby("run", sort=False):
        label = run_label(group.iloc[0]) if labelled else str(run)
        lines.append((label, group["epoch"], group["accuracy_gap"]))
    _plot_lines(ax, lines, "o-", ms=3)
    ax.set_xlabel("epoch")
    ax.set_ylabel("train - test accuracy")
    legend_outside(ax)
    return ax
