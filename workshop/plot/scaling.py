"""Plots of scaling results: speedup/efficiency, per-epoch times, batch size, sync cost,
the alpha-beta communication model, tuning knobs and Horovod's autotune log.

Every function takes DataFrames from :mod:`workshop.analysis.scaling` /
:mod:`workshop.analysis.commodel` / :func:`workshop.readers.logs.read_autotune_log` and returns the
matplotlib Axes it drew on.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator

from workshop.analysis.scaling import METRICS, amdahl_speedup
from workshop.plot._axes import _axes

METRIC_LABELS = {
    "wall": "wall time (init included)",
    "train": "training time",
    "throughput": "steady-state throughput",
}


def _ax(ax: Axes | None) -> Axes:
    # constrained layout makes room for a legend outside the axes (legend_outside)
    return _axes(ax, (7.5, 4), constrained=True)


def legend_outside(ax: Axes, **kwargs) -> None:
    """Put the legend to the right of the axes, where it cannot cover a curve.

    Figures made with ``layout="constrained"`` (as the plot functions make them) keep room for
    it; pass the same to ``plt.subplots`` when drawing on your own axes.
    """
    options = {
        "loc": "upper left",
        "bbox_to_anchor": (1.02, 1.0),
        "borderaxespad": 0.0,
        "fontsize": "small",
    }
    ax.legend(**(options | kwargs))


def plot_speedup(
    table: pd.DataFrame,
    *,
    metrics: tuple[str, ...] = METRICS,
    amdahl: dict | None = None,
    linear: dict | None = None,
    labels: dict[str, str] | None = None,
    ax: Axes | None = None,
) -> Axes:
    """Speedup vs workers for each metric, with the ideal line and optional fits.

    Args:
        table: from :func:`workshop.analysis.scaling.speedup_table`.
        metrics: which of ``wall``, ``train``, ``throughput`` to draw (missing ones skipped).
        amdahl: from :func:`~workshop.analysis.scaling.amdahl_fit`; drawn as a dashed curve.
        linear: from :func:`~workshop.analysis.scaling.linear_fit`; drawn as a dotted line.
        labels: legend labels of metrics that measured something else than
            :data:`METRIC_LABELS` says (per-epoch logs: ``{"wall": "train + test time"}``).
        ax: Axes to draw on (a new figure if None).
    """
    ax = _ax(ax)
    names = METRIC_LABELS | (labels or {})
    n = table["np"].to_numpy(dtype=float)
    grid = np.linspace(n.min(), n.max(), 100)
    ax.plot(grid, grid, color="0.6", lw=1, label="ideal")
    for metric in metrics:
        column = f"speedup_{metric}"
        if column in table and table[column].notna().any():
            ax.plot(n, table[column], "o-", label=names[metric])
    if amdahl is not None:
        f = amdahl["serial_fraction"]
        ax.plot(grid, amdahl_speedup(grid, f), "--", color="k", lw=1, label=f"Amdahl f={f:.3f}")
    if linear is not None:
        ax.plot(
            grid,
            linear["slope"] * grid + linear["intercept"],
            ":",
            color="k",
            lw=1,
            label=f"linear fit, slope {linear['slope']:.2f}",
        )
    ax.set_xlabel("workers (np)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no 1.2 or 1.4 workers
    ax.set_ylabel("speedup")
    legend_outside(ax)
    return ax


def plot_efficiency(
    table: pd.DataFrame, *, metrics: tuple[str, ...] = METRICS, ax: Axes | None = None
) -> Axes:
    """Parallel efficiency S(N)/N vs workers for each metric (1.0 = ideal)."""
    ax = _ax(ax)
    ax.axhline(1.0, color="0.6", lw=1, label="ideal")
    for metric in metrics:
        column = f"efficiency_{metric}"
        if column in table and table[column].notna().any():
            ax.plot(table["np"], table[column], "o-", label=METRIC_LABELS[metric])
    ax.set_xlabel("workers (np)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("efficiency")
    ax.set_ylim(0, max(1.1, float(np.nanmax(table.filter(like="efficiency_").to_numpy())) + 0.05))
    legend_outside(ax)
    return ax


def plot_epoch_times(
    epochs: pd.DataFrame, *, by: str = "np", log: bool = True, ax: Axes | None = None
) -> Axes:
    """Training time of every epoch, one line per worker count or per run: the first-epoch
    spike.

    Args:
        epochs: with ``epoch``, ``train_time_s`` and the ``by`` column.
        by: ``np`` (runs sharing a worker count are combined by their median per epoch) or
            ``run`` (one line per run).
        log: logarithmic time axis (the spike can be 40x the steady state).
    """
    ax = _ax(ax)
    per = epochs.groupby([by, "epoch"], sort=False)["train_time_s"].median().reset_index()
    for key, group in per.groupby(by, sort=by == "np"):
        label = f"np={int(key)}" if by == "np" else str(key)
        ax.plot(group["epoch"], group["train_time_s"], "o-", label=label)
    if log:
        ax.set_yscale("log")
        plain = FuncFormatter(lambda value, _: f"{value:g}")  # 2, 5, 10 rather than 2x10^0
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(plain)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training time per epoch (s)")
    legend_outside(ax)
    return ax


def plot_batch_size(plateau: dict, *, ax: Axes | None = None) -> Axes:
    """Time per epoch vs batch size (one worker), with what the data shows in the title.

    When the time levels off (``plateau["levels_off"]``) the plateau point is marked and the
    title says from which batch; otherwise the title says that the time was still falling at
    the largest batch measured.

    Args:
        plateau: from :func:`workshop.analysis.scaling.batch_size_plateau`.
    """
    ax = _ax(ax)
    table = plateau["table"]
    ax.plot(table["batch_size"], table["time_s"], "o-")
    if plateau["levels_off"]:
        ax.axvline(plateau["plateau_batch_size"], color="C3", ls="--", lw=1)
        title = (
            f"levels off from batch {plateau['plateau_batch_size']} (within "
            f"{plateau['tolerance']:.0%} of the fastest)"
        )
    elif plateau["plateau_batch_size"] < plateau["largest_batch_size"]:
        title = f"lowest at batch {plateau['plateau_batch_size']}: no plateau measured"
    else:
        title = f"still falling at batch {plateau['largest_batch_size']}: no plateau measured"
    ax.set_title(title, fontsize="medium")
    ax.set_xscale("log", base=2)
    ax.set_xticks(table["batch_size"], [str(b) for b in table["batch_size"]])
    ax.minorticks_off()
    ax.set_xlabel("batch size (one worker)")
    ax.set_ylabel("time per epoch (s)")
    return ax


def plot_sync(sync: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Time per synchronisation (bars) and synchronisation time per epoch (line) vs workers.

    Args:
        sync: from :func:`workshop.analysis.scaling.sync_overhead`.
    """
    ax = _ax(ax)
    ax.bar(sync["np"].astype(str), sync["sync_time_per_step_ms"], color="C0", alpha=0.6)
    ax.set_xlabel("workers (np)")
    ax.set_ylabel("time per synchronisation (ms)", color="C0")
    twin = ax.twinx()
    twin.plot(sync["np"].astype(str), sync["sync_time_per_epoch_s"], "o-", color="C3")
    twin.set_ylabel("synchronisation time per epoch (s)", color="C3")
    return ax


def plot_comm_fit(ops: pd.DataFrame, fit: dict, *, ax: Axes | None = None) -> Axes:
    """Measured allreduce durations vs message size, with the fitted ring model per N.

    Args:
        ops: with ``np``, ``bytes``, ``dur_us`` (see
            :func:`workshop.analysis.commodel.fit_alpha_beta`).
        fit: the fit's result.
    """
    from workshop.analysis.commodel import ring_allreduce_time_s

    ax = _ax(ax)
    used = ops[ops["np"] >= 2]
    for n, group in used.groupby("np"):
        ax.scatter(group["bytes"], group["dur_us"], s=8, alpha=0.5, label=f"measured np={n}")
        sizes = np.geomspace(max(group["bytes"].min(), 1), group["bytes"].max(), 50)
        model = ring_allreduce_time_s(
            n, sizes, fit["alpha_us"] * 1e-6, fit["bandwidth_bytes_per_s"]
        )
        ax.plot(sizes, model * 1e6, "k-", lw=1, label=f"ring model np={n}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    bandwidth = fit["bandwidth_bytes_per_s"] / 1e6
    ax.set_title(f"alpha = {fit['alpha_us']:.1f} us, B = {bandwidth:.0f} MB/s", fontsize="medium")
    ax.set_xlabel("allreduce message (bytes)")
    ax.set_ylabel("duration (us)")
    legend_outside(ax)
    return ax


def plot_prediction(comparison: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Predicted vs measured throughput speedup (from
    :func:`workshop.analysis.commodel.compare_prediction`), with the ideal line."""
    ax = _ax(ax)
    n = comparison["np"]
    ax.plot(n, n, color="0.6", lw=1, label="ideal")
    ax.plot(n, comparison["speedup_predicted"], "s--", label="alpha-beta model")
    measured = comparison.dropna(subset=["speedup_measured"])
    ax.plot(measured["np"], measured["speedup_measured"], "o", ms=8, label="measured")
    ax.set_xlabel("workers (np)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no 1.2 or 1.4 workers
    ax.set_ylabel("speedup")
    legend_outside(ax)
    return ax


def plot_ratio_spread(
    table: pd.DataFrame,
    *,
    label: str = "what",
    ideal: float | None = None,
    xlabel: str = "ratio within a round (min - median - max)",
    ax: Axes | None = None,
) -> Axes:
    """Ratios measured in interleaved rounds: one line per row from its lowest to its highest
    round, a dot at the median, a dashed line at 1 (no change) and, if given, at ``ideal``.

    Args:
        table: :func:`workshop.analysis.rounds.round_speedups` (``speedup_min``,
            ``speedup_median``, ``speedup_max``) or
            :func:`workshop.analysis.benchmarks.paired_ratios` (``ratio_min``, ...).
        label: the column naming each row.
        ideal: e.g. 2 for a speedup at 2 workers.
        xlabel: the x-axis label.
        ax: Axes to draw on (a new figure if None).
    """
    prefix = "speedup" if "speedup_median" in table else "ratio"
    ax = _axes(ax, (6, 0.6 + 0.5 * len(table)))
    y = np.arange(len(table))[::-1]
    low, mid, high = (table[f"{prefix}_{k}"].to_numpy(float) for k in ("min", "median", "max"))
    ax.hlines(y, low, high, color="C0", linewidth=3, alpha=0.6)
    ax.plot(mid, y, "o", color="C0")
    for yi, m in zip(y, mid, strict=True):
        ax.annotate(f"{m:.2f}", (m, yi), textcoords="offset points", xytext=(0, 6), ha="center")
    ax.axvline(1, color="grey", linestyle="--", linewidth=1)
    if ideal is not None:
        ax.axvline(ideal, color="C2", linestyle=":", linewidth=1.5, label=f"ideal ({ideal:g}x)")
        ax.legend(loc="lower right", fontsize="small")
    ax.set_yticks(y, table[label].astype(str))
    ax.set_ylim(-0.7, len(table) - 0.3)
    ax.set_xlabel(xlabel)
    return ax
