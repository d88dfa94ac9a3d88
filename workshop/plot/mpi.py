"""Plots of MPI profiles; each takes the DataFrame an analysis function returns.

* :func:`plot_routine_times` <- :func:`workshop.analysis.mpi.routine_table`
* :func:`plot_message_sizes` <- :func:`workshop.analysis.mpi.message_size_bins`
* :func:`plot_comm_vs_elapsed` <- :func:`workshop.analysis.mpi.comm_fraction`
"""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes

from workshop.frames import require_columns
from workshop.plot._axes import _axes

#: What the plots below take: the results of workshop.analysis.mpi's functions.
FROM_ANALYSIS = "pass the result of the matching workshop.analysis.mpi function"


def plot_routine_times(
    table: pd.DataFrame, *, ax: Axes | None = None, top: int = 10, title: str | None = None
) -> Axes:
    """Horizontal bars of time per MPI routine, labelled with the number of calls.

    Args:
        table: from :func:`workshop.analysis.mpi.routine_table` (``routine``, ``calls``,
            ``time_s``).
        ax: axes to draw on (default: a new figure).
        top: show at most this many routines (those with the most time).
        title: axes title.

    Returns:
        The axes.
    """
    require_columns(
        table, ["routine", "calls", "time_s"], "plot_routine_times", hint=FROM_ANALYSIS
    )
    ax = _axes(ax, (7, 3.5))
    shown = table.sort_values("time_s", ascending=False).head(top).iloc[::-1]
    bars = ax.barh(shown["routine"], shown["time_s"], color="tab:blue")
    for bar, calls in zip(bars, shown["calls"], strict=True):
        ax.annotate(
            f" {int(calls):,} calls",
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            va="center",
            fontsize=8,
        )
    ax.set_xlabel("time in routine (s)")
    ax.margins(x=0.25)
    ax.set_title(title or "Time per MPI routine")
    return ax


def plot_message_sizes(
    bins: pd.DataFrame,
    *,
    weight: str = "calls",
    ax: Axes | None = None,
    title: str | None = None,
) -> Axes:
    """Histogram of messages on power-of-two size bins, one bar per routine in each bin.

    Args:
        bins: from :func:`workshop.analysis.mpi.message_size_bins` (``routine``,
            ``log2_bin``, ``bin_label`` and the ``weight`` column).
        weight: bar height: ``calls``, ``time_s`` or ``bytes``.
        ax: axes to draw on (default: a new figure).
        title: axes title.

    Returns:
        The axes.
    """
    require_columns(
        bins,
        ["routine", "log2_bin", "bin_label", weight],
        "plot_message_sizes",
        hint=FROM_ANALYSIS,
    )
    ax = _axes(ax, (8, 3.5))
    routines = sorted(bins["routine"].unique())
    width = 0.8 / max(len(routines), 1)
    for i, routine in enumerate(routines):
        group = bins[bins["routine"] == routine]
        xs = [int(b) - 0.4 + width * (i + 0.5) for b in group["log2_bin"]]
        ax.bar(xs, group[weight], width=width, label=str(routine))
    labels = bins.drop_duplicates("log2_bin").set_index("log2_bin")["bin_label"].sort_index()
    ax.set_xticks(list(labels.index))
    ax.set_xticklabels(list(labels), rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("message size (power-of-two bins)")
    ax.set_ylabel({"calls": "calls", "time_s": "time (s)", "bytes": "bytes"}.get(weight, weight))
    if weight == "calls" and len(bins) and bins["calls"].max() > 100 * max(bins["calls"].min(), 1):
        ax.set_yscale("log")
    if bins["routine"].nunique() > 1:
        ax.legend(fontsize=8)
    ax.set_title(title or f"Message sizes ({weight})")
    return ax


def plot_comm_vs_elapsed(
    frame: pd.DataFrame, *, ax: Axes | None = None, title: str | None = None
) -> Axes:
    """Per rank: elapsed time with the time inside MPI calls drawn over it (the legend sits
    outside the axes, over no bar). Time inside MPI sums all threads: in a Horovod run it is
    mostly the background thread, alongside the computation, not time lost by training.

    Args:
        frame: from :func:`workshop.analysis.mpi.comm_fraction` (``rank``, ``comm_s``,
            ``elapsed_s``, ``comm_fraction``).
        ax: axes to draw on (default: a new figure).
        title: axes title.

    Returns:
        The axes.
    """
    require_columns(
        frame,
        ["rank", "comm_s", "elapsed_s", "comm_fraction"],
        "plot_comm_vs_elapsed",
        hint=FROM_ANALYSIS,
    )
    ax = _axes(ax, (7, 3.5))
    ranks = frame["rank"].astype(int)
    ax.bar(ranks, frame["elapsed_s"], color="lightgray", label="elapsed (MPI_Init to Finalize)")
    ax.bar(ranks, frame["comm_s"], color="tab:orange", label="inside MPI calls (all threads)")
    for rank, comm, frac in zip(ranks, frame["comm_s"], frame["comm_fraction"], strict=True):
        if pd.notna(frac):
            ax.annotate(f"{100 * frac:.0f}%", (rank, comm), ha="center", va="bottom", fontsize=7)
    ax.set_xlabel("rank")
    ax.set_ylabel("seconds")
    if len(ranks) <= 32:
        ax.set_xticks(list(ranks))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.set_title(title or "Time inside MPI vs elapsed time per rank")
    return ax
