"""The explorers: ipywidgets panels built on analysis + plot.

In JupyterLab each explorer is a small control panel that redraws its plot. Where no one can
move a slider (papermill, nbconvert --execute, CI, a static HTML export) they degrade to one
static plot of the default view: :func:`workshop.kernel.static_mode` decides, from the kernel
itself, with no variable to set; ``WORKSHOP_STATIC_WIDGETS=1`` forces it and ``=0`` forbids it.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from workshop import analysis, plot
from workshop.frames import takes_run
from workshop.kernel import static_mode
from workshop.readers.timeline import Timeline


def _show(draw, defaults: dict, controls, static: bool | None):
    """Draw ``defaults`` once as a picture, then, unless static, return the panel
    ``interactive(draw, **controls())``.

    Static (unattended): no widget is built at all; a widget opens a channel (a comm) to a
    frontend that an unattended run does not have. Interactive: the picture stays in the saved
    notebook and in an export, which keep only the panel's state (nbconvert prints
    ``interactive(children=...)`` for it).
    """
    if static if static is not None else static_mode():
        draw(**defaults)
        return None
    import ipywidgets as widgets

    print(
        "The default view as a picture (a saved or exported notebook keeps it); the panel "
        "below redraws it:"
    )
    draw(**defaults)
    return widgets.interactive(draw, **controls())


@takes_run
def timeline_explorer(tl: Timeline, *, static: bool | None = None):
    """Explore a timeline: time window (ms), one tensor or all, the ticks of one rank or all.

    Returns:
        The ipywidgets ``interactive`` panel (``None`` in static mode, after drawing).
    """
    spans, ticks = tl.spans, tl.ticks
    start_ms, end_ms = spans["start_us"].min() / 1e3, spans["end_us"].max() / 1e3
    defaults = {
        "window": (start_ms, min(end_ms, start_ms + 200.0)),
        "tensor": "all",
        "rank": "all",
    }

    def controls():
        import ipywidgets as widgets

        window = widgets.FloatRangeSlider(
            value=defaults["window"],
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
        return {"window": window, "tensor": tensor, "rank": rank}

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

    return _show(draw, defaults, controls, static)


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
    defaults = {
        "metric": next(iter(SPEEDUP_METRICS)),
        "skip_first": False,
        "show_model": prediction is not None,
    }

    def controls():
        import ipywidgets as widgets

        return {
            "metric": widgets.Dropdown(options=list(SPEEDUP_METRICS), description="metric"),
            "skip_first": widgets.Checkbox(value=False, description="exclude first epoch"),
            "show_model": widgets.Checkbox(
                value=defaults["show_model"], description="show model", disabled=prediction is None
            ),
        }

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

    return _show(draw, defaults, controls, static)


def lr_explorer(epochs: pd.DataFrame, *, static: bool | None = None):
    """Explore recorded LR experiments: global batch size, LR scaling rule, warmup epochs;
    accuracy against epochs and against training time side by side."""

    def options(column):
        return ["all", *sorted(epochs[column].dropna().unique().tolist())]

    defaults = {"batch": "all", "rule": "all", "warmup": "all"}

    def controls():
        import ipywidgets as widgets

        return {
            "batch": widgets.Dropdown(options=options("global_batch_size"), description="batch"),
            "rule": widgets.Dropdown(options=options("lr_scaling"), description="LR rule"),
            "warmup": widgets.Dropdown(options=options("warmup_epochs"), description="warmup"),
        }

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

    return _show(draw, defaults, controls, static)
