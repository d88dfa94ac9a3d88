"""Figures of notebook 01 (data vs model parallelism). Plotting only: the numbers come from
:mod:`workshop.analysis.parallelism` and :mod:`workshop.launch.parallelism`."""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from workshop.frames import require_columns
from workshop.plot._axes import _axes
from workshop.units import format_bytes

PHASE_COLORS = {
    "forward_backward": "tab:blue",
    "forward": "tab:blue",
    "backward": "tab:orange",
    "optimizer": "tab:green",
    "allreduce": "tab:red",
    "recv_activation": "lightgray",
    "recv_gradient": "darkgray",
    "send": "tab:pink",
    "send_wait": "tab:purple",
}


def plot_demo_events(
    events: pd.DataFrame, *, steps: tuple[int, int] | None = None, ax: Axes | None = None
) -> Axes:
    """What every process of a parallelism demo did over time: one row per rank, one bar per
    event (for a Horovod timeline file, see :func:`workshop.plot.timeline.plot_timeline_gantt`).

    Args:
        events: ``events`` of a demo result (``rank``, ``step``, ``phase``, ``start_s``,
            ``dur_s``).
        steps: ``(first, last)`` steps to show (inclusive); default all.
        ax: where to draw; a new figure if None.

    Returns:
        The Axes. Gaps between bars are time the process spent neither computing nor
        blocked in a transfer (Python, scheduling).
    """
    require_columns(events, ["rank", "step", "phase", "start_s", "dur_s"], "plot_demo_events")
    ax = _axes(ax, (8, 3))
    ev = events if steps is None else events[events["step"].between(*steps)]
    for phase, group in ev.groupby("phase"):
        for rank, bars in group.groupby("rank"):
            ax.broken_barh(
                list(zip(bars["start_s"] * 1e3, bars["dur_s"] * 1e3, strict=True)),
                (rank - 0.4, 0.8),
                color=PHASE_COLORS.get(phase, "black"),
            )
    ranks = sorted(ev["rank"].unique())
    ax.set_yticks(ranks, [f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    shown = [p for p in PHASE_COLORS if p in set(ev["phase"])]
    ax.legend(
        handles=[Patch(color=PHASE_COLORS[p], label=p) for p in shown],
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
        fontsize="small",
    )
    return ax


def plot_step_breakdown(comparison: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Mean step time of each run, split into compute, communication and the rest.

    Args:
        comparison: output of ``analysis.parallelism.compare_runs`` (``run``, ``compute_s``,
            ``communication_s``, ``other_s``).
    """
    require_columns(
        comparison, ["run", "compute_s", "communication_s", "other_s"], "plot_step_breakdown"
    )
    ax = _axes(ax, (9, 0.6 * len(comparison) + 1), constrained=True)
    y = range(len(comparison))
    compute = comparison["compute_s"] * 1e3
    comm = comparison["communication_s"] * 1e3
    rest = comparison["other_s"] * 1e3
    ax.barh(y, compute, color="tab:blue", label="compute (per process)")
    ax.barh(y, comm, left=compute, color="tab:red", label="blocked in communication")
    ax.barh(y, rest, left=compute + comm, color="lightgray", label="other")
    ax.set_yticks(list(y), comparison["run"])
    ax.invert_yaxis()
    ax.set_xlabel("mean time per step (ms)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")  # off the bars
    return ax


def plot_loss(losses: dict[str, pd.DataFrame], *, ax: Axes | None = None) -> Axes:
    """Training loss per step of several runs on one axis (they should lie on top of each
    other when the runs compute the same thing).

    Args:
        losses: label -> DataFrame with ``step`` and ``loss``.
    """
    ax = _axes(ax, (6, 3))
    styles = ["-", "--", ":", "-."]
    for i, (label, df) in enumerate(losses.items()):
        require_columns(df, ["step", "loss"], f"plot_loss ({label})")
        ax.plot(df["step"], df["loss"], styles[i % len(styles)], lw=2, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.legend(fontsize="small")
    return ax


def plot_memory(
    estimates: pd.DataFrame,
    *,
    gpu_memory_bytes: float | None = None,
    reserve_fraction: float = 0.1,
    ax: Axes | None = None,
) -> Axes:
    """Model state and activation memory per model (log scale), with the GPU's memory.

    Args:
        estimates: output of ``analysis.parallelism.model_estimates`` (``model``,
            ``state_bytes``, ``activation_bytes``, ``total_bytes``).
        gpu_memory_bytes: draws a vertical line at this size, and one at what a model may use
            of it (``analysis.parallelism_table``'s rule, the same ``reserve_fraction`` kept
            for the framework), the size the lesson's verdicts compare with.
    """
    require_columns(
        estimates, ["model", "state_bytes", "activation_bytes", "total_bytes"], "plot_memory"
    )
    ax = _axes(ax, (8, 0.5 * len(estimates) + 1.5))
    y = pd.RangeIndex(len(estimates))
    h = 0.27
    ax.barh(
        y - h, estimates["state_bytes"], h, color="tab:blue", label="params + grads + optimizer"
    )
    ax.barh(y, estimates["activation_bytes"], h, color="tab:orange", label="activations (batch)")
    ax.barh(y + h, estimates["total_bytes"], h, color="tab:gray", label="total")
    if gpu_memory_bytes:
        ax.axvline(
            gpu_memory_bytes,
            color="black",
            ls="--",
            label=f"GPU memory {gpu_memory_bytes / 2**30:.1f} GiB",
        )
        usable = gpu_memory_bytes * (1 - reserve_fraction)
        ax.axvline(
            usable,
            color="black",
            ls=":",
            label=f"usable {usable / 2**30:.1f} GiB ({reserve_fraction:.0%} for the framework)",
        )
    ax.set_xscale("log")
    ax.set_yticks(list(y), estimates["model"])
    ax.invert_yaxis()
    ax.set_xlabel("bytes")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small")
    return ax


def plot_exchange_costs(costs: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Gradient exchange time vs number of workers: ring allreduce vs parameter server.

    Args:
        costs: output of ``analysis.parallelism.exchange_costs`` (``n_workers``, ``bytes``,
            ``ring_s``, ``ps_s``); several message sizes may be concatenated.
    """
    require_columns(costs, ["n_workers", "bytes", "ring_s", "ps_s"], "plot_exchange_costs")
    ax = _axes(ax, (7, 4))
    for i, (nbytes, group) in enumerate(costs.groupby("bytes")):
        color = f"C{i}"
        label = format_bytes(nbytes)
        ring = group[group["ring_s"] > 0]  # N = 1 sends nothing: no point on a log axis
        ax.plot(ring["n_workers"], ring["ring_s"], "o-", color=color, label=f"ring, {label}")
        ax.plot(group["n_workers"], group["ps_s"], "s--", color=color, label=f"PS, {label}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("workers N")
    ax.set_ylabel("time per exchange (s)")
    ax.legend(fontsize="small")
    return ax


def plot_ring_allreduce(schedule: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """The steps of a ring allreduce: one row per step, one column per worker; each cell names
    the chunk the worker sends to its right-hand neighbour, coloured by chunk.

    Args:
        schedule: output of ``analysis.parallelism.ring_allreduce_schedule`` (``step``,
            ``phase``, ``worker``, ``chunk``, ``to_worker``).
    """
    require_columns(
        schedule, ["step", "phase", "worker", "chunk", "to_worker"], "plot_ring_allreduce"
    )
    grid = schedule.pivot(index="step", columns="worker", values="chunk")
    n_steps, n_workers = grid.shape
    ax = _axes(ax, (1.1 * n_workers + 2, 0.42 * n_steps + 1.2), constrained=True)
    ax.imshow(grid.to_numpy(), cmap="tab10", vmin=0, vmax=9, aspect="auto", alpha=0.55)
    for row in schedule.itertuples():
        ax.text(
            row.worker,
            row.step,
            f"{row.chunk}\u2192w{row.to_worker}",
            ha="center",
            va="center",
            fontsize="small",
        )
    phases = schedule.drop_duplicates("step").set_index("step")["phase"]
    split = int((phases == phases.iloc[0]).sum())
    ax.axhline(split - 0.5, color="black", linewidth=1.5)
    ax.set_xticks(range(n_workers), [f"w{w}" for w in grid.columns])
    ax.set_yticks(range(n_steps), [f"{s + 1}" for s in grid.index])
    ax.set_xlabel("worker (each sends to the next, the last to the first)")
    ax.set_ylabel("step")
    ax.set_title(
        f"ring allreduce, N = {n_workers}: chunk sent in each step (1/N of the bytes each); "
        f"{phases.iloc[0]} above the line, {phases.iloc[-1]} below",
        fontsize="medium",
    )
    return ax
