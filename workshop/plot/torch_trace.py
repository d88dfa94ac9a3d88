"""A DDP run's torch.profiler traces as lanes, like a Horovod timeline's picture: per rank,
the training thread's ops (compute), the backward pass and the buckets' allreduces
(communication). Draws :func:`workshop.analysis.torch_trace.trace_lanes`; no analysis here."""

from __future__ import annotations

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.patches import Patch

from workshop.frames import require_columns
from workshop.plot._axes import _axes

__all__ = ["plot_torch_trace"]

LANES = ("compute", "backward", "communication")
LANE_COLORS = {"compute": "#6baed6", "backward": "#fdae6b", "communication": "#9e9ac8"}
PAGE_WIDTH_IN = 8.0


def plot_torch_trace(lanes: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """One band per rank, three lanes in it (top to bottom: compute, backward,
    communication); overlapping allreduces (Gloo runs two buckets at once) are drawn
    translucent, so a darker bar is two at a time; a grey line marks each step's start.

    Args:
        lanes: :func:`workshop.analysis.torch_trace.trace_lanes` (``rank``, ``lane``, ``start_ms``,
            ``end_ms``).
        ax: where to draw.

    Returns:
        The Axes: x in milliseconds from each rank's first profiled step (each rank on its
        own trace's clock), one labelled band per rank, rank 0 on top.
    """
    require_columns(
        lanes, ["rank", "lane", "start_ms", "end_ms"], "plot_torch_trace", frame="lanes"
    )
    ranks = sorted(lanes["rank"].unique())
    ax = _axes(ax, (PAGE_WIDTH_IN, 1.0 + 0.9 * max(1, len(ranks))), constrained=True)
    rows = len(LANES) + 1  # a gap between ranks
    for r_index, rank in enumerate(ranks):
        for l_index, lane in enumerate(LANES):
            part = lanes[(lanes["rank"] == rank) & (lanes["lane"] == lane)]
            y = -(r_index * rows + l_index)
            ax.barh(
                [y] * len(part),
                (part["end_ms"] - part["start_ms"]).to_numpy(),
                left=part["start_ms"].to_numpy(),
                height=0.8,
                color=LANE_COLORS[lane],
                alpha=0.6 if lane == "communication" else 1.0,
                edgecolor="none",
            )
        steps = lanes[(lanes["rank"] == rank) & (lanes["lane"] == "step")]
        top, bottom = -(r_index * rows) + 0.5, -(r_index * rows + len(LANES) - 1) - 0.5
        ax.vlines(steps["start_ms"], bottom, top, colors="#555555", linewidths=0.8)
    ax.set_yticks([-(i * rows + 1) for i in range(len(ranks))], [f"rank {r}" for r in ranks])
    ax.set_xlabel("time from the rank's first profiled step (ms)")
    ax.legend(
        handles=[Patch(color=LANE_COLORS[lane], label=lane) for lane in LANES],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.25),
        ncol=3,
        frameon=False,
    )
    return ax
