"""The explorers: ipywidgets panels built on analysis + plot.

In JupyterLab each explorer is a small control panel that redraws its plot. Where no one can
move a slider (papermill, CI, a static HTML export) they degrade to one static plot of the
default view: :func:`static_mode` decides, and ``WORKSHOP_STATIC_WIDGETS=1`` forces it.
"""

from __future__ import annotations

import os

import matplotlib.pyplot as plt
import pandas as pd

from workshop import analysis, plot
from workshop.readers.timeline import Timeline


def static_mode() -> bool:
    """True when the notebook runs unattended (papermill / the workshop's test harness)."""
    return os.environ.get("WORKSHOP_STATIC_WIDGETS") == "1"


def _show(draw, controls: dict, static: bool | None):
    """Build ``interactive(draw, **controls)``, or draw once with the defaults when static."""
    import ipywidgets as widgets

    if static if static is not None else static_mode():
        defaults = {name: control.value for name, control in controls.items()}
        draw(**defaults)
        return None
    return widgets.interactive(draw, **controls)


def timeline_explorer(tl: Timeline, *, static: bool | None = None):
    """Explore a timeline: time window (ms), one tensor or all, the ticks of one rank or all.

    Returns:
        The ipywidgets ``interactive`` panel (``None`` in static mode, after drawing).
    """
    import ipywidgets as widgets

    spans, ticks = tl.spans, tl.ticks
    start_ms, end_ms = spans["start_us"].min() / 1e3, spans["end_us"].max() / 1e3
    window = widgets.FloatRangeSlider(
        value=(start_ms, min(end_ms, start_ms + 200.0)),
        min=start_ms,
        max=end_ms,
        step=1.0,
        description="window (ms)",
        continuous_update=False,
        layout=widgets.Layout(width="90%"),
        style={"description_width": "initial"},
    )
    tensor = widgets.Dropdown(
        options=["all", *sorted(spans["tensor"].unique())], description="tensor"
    )
    rank = widgets.Dropdown(
        options=["all", *sorted(ticks["rank"].unique().tolist())], description="rank"
    )

    def draw(window, tensor, rank):
        chosen = spans if tensor == "all" else spans[spans["tensor"] == tensor]
        marks = ticks if rank == "all" else ticks[ticks["rank"] == rank]
        start_us, end_us = window[0] * 1e3, window[1] * 1e3
        _, ax = plt.subplots(figsize=(11, 5))
        if chosen[(chosen["end_us"] >= start_us) & (chosen["start_us"] <= end_us)].empty:
            first_ms = chosen["start_us"].min() / 1e3
            ax.set_title(
                f"{tensor}: nothing in this window; its first span starts at "
                f"{first_ms:.0f} ms (move the window)"
            )
            ax.set_axis_off()
        else:
            plot.plot_timeline_gantt(chosen, start_us=start_us, end_us=end_us, ticks=marks, ax=ax)
        plt.show()

    return _show(draw, {"window": window, "tensor": tensor, "rank": rank}, static)


SPEEDUP_METRICS = {
    "epoch wall time (train + test)": "wall",
    "training time (no init)": "train",
    "throughput (samples/s)": "throughput",
}


def scaling_explorer(
    epochs: pd.DataFrame, *, prediction: pd.DataFrame | None = None, static: bool | None = None
):
    """Explore speedup: which metric, with or without the first epoch, model vs measured.

    Args:
        epochs: per-epoch rows of several runs (``read_sweep``'s second table).
        prediction: optional model prediction with ``np`` and ``speedup`` columns
            (e.g. from :func:`workshop.analysis.compare_prediction`).
    """
    import ipywidgets as widgets

    metric = widgets.Dropdown(options=list(SPEEDUP_METRICS), description="metric")
    skip_first = widgets.Checkbox(value=False, description="exclude first epoch")
    show_model = widgets.Checkbox(
        value=prediction is not None, description="show model", disabled=prediction is None
    )

    def draw(metric, skip_first, show_model):
        chosen = epochs[epochs["epoch"] > 1] if skip_first else epochs
        table = analysis.speedup_table(analysis.runs_from_epochs(chosen))
        _, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
        plot.plot_speedup(
            table,
            metrics=(SPEEDUP_METRICS[metric],),
            ax=ax,
            labels={"wall": "epoch wall time (train + test)"},
        )
        if show_model and prediction is not None:
            ax.plot(prediction["np"], prediction["speedup"], "k--", label="model")
            plot.scaling.legend_outside(ax)
        plt.show()

    return _show(
        draw, {"metric": metric, "skip_first": skip_first, "show_model": show_model}, static
    )


def lr_explorer(epochs: pd.DataFrame, *, static: bool | None = None):
    """Explore recorded LR experiments: global batch size, LR scaling rule, warmup epochs;
    accuracy against epochs and against training time side by side."""
    import ipywidgets as widgets

    def options(column):
        return ["all", *sorted(epochs[column].dropna().unique().tolist())]

    batch = widgets.Dropdown(options=options("global_batch_size"), description="batch")
    rule = widgets.Dropdown(options=options("lr_scaling"), description="LR rule")
    warmup = widgets.Dropdown(options=options("warmup_epochs"), description="warmup")

    def draw(batch, rule, warmup):
        chosen = epochs
        for column, value in (
            ("global_batch_size", batch),
            ("lr_scaling", rule),
            ("warmup_epochs", warmup),
        ):
            if value != "all":
                chosen = chosen[chosen[column] == value]
        _, (left, right) = plt.subplots(1, 2, figsize=(13, 4.5), layout="constrained")
        if chosen.empty:
            left.set_title("no recorded run with these settings")
        else:
            plot.plot_accuracy_curves(chosen, x="epoch", legend=False, ax=left)
            plot.plot_accuracy_curves(chosen, x="elapsed_s", ax=right)
        plt.show()

    return _show(draw, {"batch": batch, "rule": rule, "warmup": warmup}, static)
