"""Figures of notebook 01: they draw what they are given and refuse incomplete input."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from workshop.analysis import parallelism as est  # noqa: E402
from workshop.plot import parallelism as figs  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _events():
    rows = [
        (0, 1, 0, "forward", "compute", 0.000, 0.010),
        (0, 1, 0, "send", "communication", 0.010, 0.001),
        (0, 1, 0, "recv_gradient", "communication", 0.011, 0.020),
        (1, 1, 0, "recv_activation", "communication", 0.000, 0.011),
        (1, 1, 0, "forward", "compute", 0.011, 0.010),
        (1, 2, 0, "backward", "compute", 0.021, 0.010),
    ]
    return pd.DataFrame(rows, columns=est.EVENT_COLUMNS)


def test_demo_events_draws_one_bar_per_event_and_filters_steps():
    ax = figs.plot_demo_events(_events())
    assert sum(len(c.get_paths()) for c in ax.collections) == 6
    assert [t.get_text() for t in ax.get_yticklabels()] == ["rank 0", "rank 1"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["forward", "backward", "recv_activation", "recv_gradient", "send"]
    ax = figs.plot_demo_events(_events(), steps=(2, 2))
    assert sum(len(c.get_paths()) for c in ax.collections) == 1


def test_step_breakdown_stacks_to_the_step_time():
    table = est.compare_runs({"a": _events()})
    ax = figs.plot_step_breakdown(table)
    widths = [p.get_width() for p in ax.patches]
    assert sum(widths) == pytest.approx(table["step_s"].iloc[0] * 1e3)


def test_memory_and_costs_plots():
    e = est.model_estimates()
    ax = figs.plot_memory(e, gpu_memory_bytes=11 * 2**30)
    assert len(ax.patches) == 3 * len(e) and ax.get_xscale() == "log"
    # the line the lesson's verdicts compare with is drawn too: 9.9 of the 11 GiB (lesson 01's
    # plot showed only the 11 while its verdicts said 9.9)
    lines = {line.get_label(): line.get_xdata()[0] for line in ax.get_lines()}
    assert lines["GPU memory 11.0 GiB"] == 11 * 2**30
    assert lines["usable 9.9 GiB (10% for the framework)"] == pytest.approx(0.9 * 11 * 2**30)
    costs = est.exchange_costs([1, 2, 4], [8, 1e8])
    ax = figs.plot_exchange_costs(costs)
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["ring, 8 B", "PS, 8 B", "ring, 95.4 MiB", "PS, 95.4 MiB"]
    assert len(ax.get_lines()[0].get_xdata()) == 2  # N = 1 has no ring point on a log axis


def test_loss_plot_one_line_per_run():
    loss = pd.DataFrame({"step": [0, 1], "loss": [2.3, 2.2]})
    ax = figs.plot_loss({"a": loss, "b": loss})
    assert len(ax.get_lines()) == 2


@pytest.mark.parametrize(
    "call",
    [
        lambda: figs.plot_demo_events(pd.DataFrame({"rank": [0]})),
        lambda: figs.plot_step_breakdown(pd.DataFrame({"run": ["a"]})),
        lambda: figs.plot_memory(pd.DataFrame({"model": ["a"]})),
        lambda: figs.plot_exchange_costs(pd.DataFrame({"n_workers": [2]})),
        lambda: figs.plot_loss({"a": pd.DataFrame({"step": [0]})}),
    ],
)
def test_missing_columns_are_named(call):
    with pytest.raises(ValueError, match="no column"):
        call()
