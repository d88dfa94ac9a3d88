"""Plots of Horovod timelines (matplotlib). Each takes what :mod:`workshop.readers.timeline` or
:mod:`workshop.analysis.timeline` returns and draws it; no analysis happens here."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from workshop.frames import takes_run
from workshop.plot._axes import _axes

__all__ = [
    "plot_allreduce_overlap",
    "plot_breakdown",
    "plot_lateness_heatmap",
    "plot_negotiation_share",
    "plot_timeline_gantt",
]

# the trace viewer's idea: negotiation in one colour family, each library in its own
PHASE_COLORS = {
    "NEGOTIATE": "#c7c7c7",
    "OP": "#6baed6",
    "WAIT_FOR_DATA": "#fdd0a2",
    "WAIT_FOR_OTHER_TENSOR_DATA": "#fdae6b",
    "QUEUE": "#fd8d3c",
    "MEMCPY": "#a1d99b",
    "INIT": "#74c476",
    "ALLOCATE": "#74c476",
    "GLOO": "#9e9ac8",
    "MPI": "#e6550d",
    "NCCL": "#31a354",
    "CCL": "#756bb1",
    "OTHER": "#e7cb94",  # not a grey: the negotiation family is grey
}

# The book's column is about 8 inches at 100 dpi: a figure this wide is shown unscaled, so
# labels keep their point size (9 pt tick labels and legend, as the heatmap's 8 pt and more).
PAGE_WIDTH_IN = 8.0
LABEL_PT = 9


def phase_color(name: str) -> str:
    """Colour of a span or phase name (``NEGOTIATE_ALLREDUCE``, ``GLOO_ALLREDUCE`` ...)."""
    if name in PHASE_COLORS:
        return PHASE_COLORS[name]
    for prefix in ("NEGOTIATE", "WAIT_FOR_OTHER_TENSOR_DATA", "WAIT_FOR_DATA", "MEMCPY", "INIT"):
        if name.startswith(prefix):
            return PHASE_COLORS[prefix]
    head = name.split("_", 1)[0]
    if head in PHASE_COLORS:
        return PHASE_COLORS[head]
    if name == "OTHER_PROCESSING":
        return PHASE_COLORS["OTHER"]
    return PHASE_COLORS["OP"]


@takes_run
def plot_timeline_gantt(
    spans: pd.DataFrame,
    *,
    start_us: float | None = None,
    end_us: float | None = None,
    tensors: Sequence[str] | None = None,
    ticks: pd.DataFrame | None = None,
    max_tensors: int = 25,
    ax: Axes | None = None,
) -> Axes:
    """Tensors over time, like chrome://tracing: one row per tensor, negotiation and op bars
    with their activities drawn inside.

    Args:
        spans: ``Timeline.spans``.
        start_us, end_us: the time window (default: everything).
        tensors: which tensors, top to bottom (default: the first ``max_tensors`` seen in the
            window).
        ticks: ``Timeline.ticks`` to mark each rank's readiness with its rank number.
        max_tensors: row limit when ``tensors`` is not given (25 rows stay legible at a
            page's width).
        ax: where to draw.

    Returns:
        The Axes (x in milliseconds since the timeline start); the legend sits below the axes,
        so the bars keep the figure's width.
    """
    lo = spans["start_us"].min() if start_us is None else start_us
    hi = spans["end_us"].max() if end_us is None else end_us
    sp = spans[(spans["end_us"] >= lo) & (spans["start_us"] <= hi)]
    names = sp["tensor"].astype(str)
    rows = list(dict.fromkeys(names))[:max_tensors] if tensors is None else list(tensors)
    ax = _axes(ax, (PAGE_WIDTH_IN, max(3.0, 0.32 * len(rows) + 2.2)), constrained=True)
    y_of = {t: i for i, t in enumerate(rows)}
    sp = sp[names.isin(y_of)]
    y = sp["tensor"].astype(str).map(y_of).to_numpy(dtype=float)
    x0 = np.maximum(sp["start_us"].to_numpy(), lo) / 1e3
    x1 = np.minimum(sp["end_us"].to_numpy(), hi) / 1e3
    depth = sp["depth"].to_numpy()
    kind = sp["kind"].astype(str).to_numpy()
    label = sp["name"].astype(str).to_numpy()
    legend: dict[str, str] = {}
    for name in dict.fromkeys(label):
        for d in (0, 1, 2):
            m = (label == name) & (np.minimum(depth, 2) == d)
            if not m.any():
                continue
            color = phase_color(name) if kind[m][0] != "op" else PHASE_COLORS["OP"]
            height = 0.8 if d == 0 else 0.5
            ax.barh(
                y[m],
                x1[m] - x0[m],
                left=x0[m],
                height=height,
                color=color,
                edgecolor="none",
                align="center",
            )
            legend.setdefault("NEGOTIATE" if name.startswith("NEGOTIATE") else name, color)
    if ticks is not None and len(ticks):
        tk = ticks[(ticks["ts_us"] >= lo) & (ticks["ts_us"] <= hi)]
        tk = tk[tk["tensor"].astype(str).isin(y_of)]
        ty = tk["tensor"].astype(str).map(y_of).to_numpy(dtype=float)
        ax.scatter(tk["ts_us"] / 1e3, ty, marker="|", s=80, color="black", linewidths=1)
    ax.set_yticks(range(len(rows)), rows, fontsize=LABEL_PT)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(lo / 1e3, hi / 1e3)
    ax.set_xlabel("time since timeline start (ms)")
    ax.set_title("Horovod timeline: tensors over time")
    handles = [Patch(color=c, label=n) for n, c in legend.items()]
    if handles:
        _legend_below(ax, handles)
    return ax


def _legend_below(ax: Axes, handles: list, *, ncol: int = 3) -> None:
    """The legend under the axes (the figure keeps its width for the bars), legible at
    :data:`LABEL_PT`, centred on the figure rather than on the axes: long tensor names push
    the axes to the right, and a legend centred on them ran off the figure's right edge
    (its width depends on which entries share a column, i.e. on the order of the spans)."""
    from matplotlib.transforms import blended_transform_factory

    ax.legend(
        handles=handles,
        fontsize=LABEL_PT,
        ncol=ncol,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
        bbox_transform=blended_transform_factory(ax.figure.transFigure, ax.transAxes),
        frameon=False,
    )


def _distinct_shades(names: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """A colour per name: its family's colour (:func:`phase_color`), darkened step by step
    for each further name of the same family, so that no two legend entries look alike."""
    from matplotlib.colors import to_rgb

    families: dict[str, list[str]] = {}
    for name in names:
        families.setdefault(phase_color(name), []).append(name)
    shades = {}
    for base, members in families.items():
        rgb = np.array(to_rgb(base))
        for j, name in enumerate(members):
            darker = 0.5 * j / max(len(members) - 1, 1)
            shades[name] = tuple(rgb * (1 - darker))
    return shades


def plot_breakdown(breakdown: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Stacked bars of where collective time goes, per group.

    Args:
        breakdown: :func:`workshop.analysis.timeline.breakdown` output (its first column is
            the group: op, tensor or all).
        ax: where to draw.

    Returns:
        The Axes (x in seconds of tensor time).
    """
    if breakdown.empty:
        raise ValueError("the breakdown is empty: nothing to plot")
    by = breakdown.columns[0]
    wide = breakdown.pivot_table(
        index=by, columns="phase", values="total_us", aggfunc="sum", fill_value=0
    )
    order = breakdown.groupby("phase")["total_us"].sum().sort_values(ascending=False).index
    negotiate_first = sorted(order, key=lambda p: not str(p).startswith("NEGOTIATE"))
    wide = wide[negotiate_first] / 1e6
    ax = _axes(ax, (PAGE_WIDTH_IN, max(3.0, 0.35 * len(wide) + 2.2)), constrained=True)
    left = np.zeros(len(wide))
    colors = _distinct_shades([str(p) for p in wide.columns])
    for phase in wide.columns:
        ax.barh(
            wide.index.astype(str),
            wide[phase],
            left=left,
            color=colors[str(phase)],
            label=str(phase),
        )
        left += wide[phase].to_numpy()
    ax.invert_yaxis()
    ax.set_xlabel("tensor time (s)")
    ax.set_title(f"Negotiation and processing per {by}")
    ax.tick_params(axis="y", labelsize=LABEL_PT)
    _legend_below(ax, ax.get_legend_handles_labels()[0])
    return ax


def plot_lateness_heatmap(
    matrix: pd.DataFrame, *, ax: Axes | None = None, max_tensors: int = 60
) -> Axes:
    """Rank x tensor lateness: who was ready last, for which tensor.

    Args:
        matrix: :func:`workshop.analysis.timeline.lateness_matrix` output.
        ax: where to draw.
        max_tensors: column limit.

    Returns:
        The Axes (colour: milliseconds behind the first rank).
    """
    if matrix.empty:
        raise ValueError(
            "no readiness ticks to plot (Horovod writes them only when the response cache "
            "misses; HOROVOD_CACHE_CAPACITY=0 records them every step)"
        )
    m = matrix.iloc[:, :max_tensors] / 1e3
    ax = _axes(ax, (min(14, 2 + 0.25 * m.shape[1]), 1.2 + 0.45 * m.shape[0]))
    im = ax.imshow(m.to_numpy(dtype=float), aspect="auto", cmap="magma_r", interpolation="none")
    ax.set_yticks(range(len(m.index)), [f"rank {r}" for r in m.index])
    # at most 25 tensor names, at a size that can be read at a page's width
    shown = range(0, m.shape[1], max(1, -(-m.shape[1] // 25)))
    ax.set_xticks(list(shown), [str(m.columns[i]) for i in shown], rotation=90, fontsize=8)
    ax.figure.colorbar(im, ax=ax, label="late behind the first rank (ms)")
    ax.set_title("Readiness lateness per rank and tensor")
    return ax


def plot_negotiation_share(evolution: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Negotiation share of collective time over the run (first steps vs steady state).

    Args:
        evolution: :func:`workshop.analysis.timeline.evolution` output.
        ax: where to draw.

    Returns:
        The Axes: bars of negotiation and processing tensor time per interval (left axis, s;
        every bar whole, the start-up ones included) and the negotiation share (right axis,
        %); the legend sits below the axes, clear of the bars and the curve.
    """
    if evolution.empty:
        raise ValueError("the evolution table is empty: nothing to plot")
    ax = _axes(ax, (PAGE_WIDTH_IN, 3.5))
    mid = (evolution["start_us"] + evolution["end_us"]) / 2e6
    width = (evolution["end_us"] - evolution["start_us"]) / 1e6 * 0.9
    ax.bar(
        mid,
        evolution["negotiate_us"] / 1e6,
        width=width,
        color=PHASE_COLORS["NEGOTIATE"],
        label="negotiation",
    )
    ax.bar(
        mid,
        evolution["processing_us"] / 1e6,
        width=width,
        bottom=evolution["negotiate_us"] / 1e6,
        color=PHASE_COLORS["OP"],
        label="processing",
    )
    top = float((evolution["negotiate_us"] + evolution["processing_us"]).max()) / 1e6
    ax.set_ylim(0, 1.08 * top if top > 0 else 1.0)
    ax.set_xlabel("time since timeline start (s)")
    ax.set_ylabel("tensor time (s)")
    share = ax.twinx()
    share.plot(
        mid,
        100 * evolution["negotiation_share"],
        color="black",
        marker="o",
        ms=3,
        label="negotiation share",
    )
    share.set_ylim(0, 105)
    share.set_ylabel("negotiation share (%)")
    lines = ax.get_legend_handles_labels()
    more = share.get_legend_handles_labels()
    ax.legend(
        lines[0] + more[0],
        lines[1] + more[1],
        fontsize=LABEL_PT,
        ncol=3,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.2),
    )
    ax.set_title("Negotiation over time (tensor time: summed over tensors in flight)")
    return ax


def plot_allreduce_overlap(
    overlap: pd.DataFrame, *, step: int | None = None, ax: Axes | None = None
) -> Axes:
    """One step: each gradient's negotiation and allreduce against the backward marks.

    Args:
        overlap: :func:`workshop.analysis.timeline.allreduce_overlap` output.
        step: the step to draw (default: the middle one).
        ax: where to draw.

    Returns:
        The Axes (x in ms since the step's first gradient was seen): one row per gradient, a
        grey negotiation bar (some rank ready -> every rank ready) and a blue allreduce bar;
        dashed line: the last gradient seen (the first rank's backward is over by then);
        dotted line: the last negotiation end (every rank's). With cycle columns, allreduces
        that certainly ran inside every rank's backward pass are hatched.
    """
    if overlap.empty:
        raise ValueError("the overlap table is empty: no gradient allreduces to draw")
    steps = np.sort(overlap["step"].unique())
    step = int(steps[len(steps) // 2]) if step is None else step
    one = overlap[overlap["step"] == step]
    if one.empty:
        raise ValueError(f"no step {step} in the overlap table (steps {steps[0]}-{steps[-1]})")
    ax = _axes(ax, (PAGE_WIDTH_IN, max(3.0, 0.4 * len(one) + 2.6)), constrained=True)
    y = np.arange(len(one))
    ms = {c: one[c].to_numpy() / 1e3 for c in one.columns if c.endswith("_us")}
    ax.barh(
        y,
        ms["all_ready_us"] - ms["ready_us"],
        left=ms["ready_us"],
        height=0.35,
        color=PHASE_COLORS["NEGOTIATE"],
        align="edge",
    )
    bars = ax.barh(
        y - 0.4,
        ms["op_end_us"] - ms["op_start_us"],
        left=ms["op_start_us"],
        height=0.35,
        color=PHASE_COLORS["OP"],
        align="edge",
    )
    handles = [
        Patch(color=PHASE_COLORS["NEGOTIATE"], label="negotiation"),
        Patch(color=PHASE_COLORS["OP"], label="allreduce"),
    ]
    if "in_backward_all" in one:
        for bar, inside in zip(bars, one["in_backward_all"], strict=True):
            bar.set_hatch("//" if inside else "")
        handles.append(
            Patch(
                facecolor=PHASE_COLORS["OP"],
                hatch="//",
                label="allreduce inside every rank's backward (cycle-exact)",
            )
        )
    marks = (
        (ms["backward_end_us"][0], "--", "last gradient seen (first rank done)"),
        (ms["all_backward_end_us"][0], ":", "last gradient on every rank"),
    )
    for x, style, label in marks:
        ax.axvline(x, color="black", ls=style, lw=1)
        handles.append(Line2D([], [], color="black", ls=style, lw=1, label=label))
    ax.set_yticks(y - 0.025, one["tensor"].astype(str), fontsize=LABEL_PT)
    ax.set_ylim(len(one) - 0.3, -0.7)
    ax.set_xlabel("ms since the step's first gradient was seen by Horovod")
    ax.set_title(f"Step {step}: allreduces against the backward pass")
    _legend_below(ax, handles, ncol=2)
    return ax


def plot_two_threads(
    overlap: pd.DataFrame, cycles: pd.DataFrame, *, step: int | None = None, ax: Axes | None = None
) -> Axes:
    """One step seen as two threads: the training thread handing gradients over during its
    backward pass, and Horovod's background thread working in cycles.

    Args:
        overlap: :func:`workshop.analysis.timeline.allreduce_overlap` output (with cycles).
        cycles: the timeline's cycle starts (``Timeline.cycles``: ``start_us``, ``end_us``).
        step: the step to draw (default: the middle one).
        ax: where to draw.

    Returns:
        The Axes (x in ms since the step's first gradient was seen): top lane, the backward pass
        up to the first rank's last gradient, a tick per gradient handed over; bottom lane, the
        background thread's cycles (alternating shades), each gradient's negotiation (some rank
        ready -> every rank ready) and its allreduce, which start only inside a cycle.
    """
    if overlap.empty:
        raise ValueError("the overlap table is empty: no gradient allreduces to draw")
    steps = np.sort(overlap["step"].unique())
    step = int(steps[len(steps) // 2]) if step is None else step
    one = overlap[overlap["step"] == step]
    if one.empty:
        raise ValueError(f"no step {step} in the overlap table (steps {steps[0]}-{steps[-1]})")
    ax = _axes(ax, (PAGE_WIDTH_IN, 3.8), constrained=True)
    origin = one["step_start_us"].iloc[0]
    end_ms = one["op_end_us"].max() / 1e3 * 1.05
    backward_ms = one["backward_end_us"].iloc[0] / 1e3
    ax.barh(1, backward_ms, left=0, height=0.5, color="tab:green", alpha=0.4)
    for ready in one["ready_us"] / 1e3:
        ax.plot([ready, ready], [0.75, 1.25], color="black", lw=1)
    starts = (cycles["start_us"] - origin) / 1e3
    ends = (cycles["end_us"] - origin) / 1e3
    shown = cycles[(ends > 0) & (starts < end_ms)]
    for i, (start, end) in enumerate(zip(starts[shown.index], ends[shown.index], strict=True)):
        ax.axvspan(
            max(start, 0),
            min(end, end_ms),
            ymin=0.0,
            ymax=0.45,
            color="0.92" if i % 2 else "0.8",
            lw=0,
        )
    for row in one.itertuples():
        ax.barh(
            0.15,
            (row.all_ready_us - row.ready_us) / 1e3,
            left=row.ready_us / 1e3,
            height=0.12,
            color="tab:orange",
        )
        ax.barh(
            -0.15,
            (row.op_end_us - row.op_start_us) / 1e3,
            left=row.op_start_us / 1e3,
            height=0.2,
            color=PHASE_COLORS["OP"],
        )
    ax.set_yticks([0, 1], ["Horovod's\nbackground thread", "training thread\n(backward)"])
    ax.set_ylim(-0.5, 1.5)
    ax.set_xlim(0, end_ms)
    ax.set_xlabel("ms since the step's first gradient was seen by Horovod")
    ax.set_title(
        f"Step {step}: {len(shown)} background cycles (grey shades), "
        f"{len(one)} gradients handed over (ticks)",
        fontsize="medium",
    )
    ax.legend(
        handles=[
            Patch(color="tab:green", alpha=0.4, label="backward until the last gradient"),
            Patch(color="tab:orange", label="negotiation: some rank -> every rank ready"),
            Patch(color=PHASE_COLORS["OP"], label="allreduce (starts inside a cycle)"),
            Patch(color="0.8", label="one background cycle (shades alternate)"),
        ],
        fontsize=LABEL_PT,
        ncol=2,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.25),
        frameon=False,
    )
    return ax
