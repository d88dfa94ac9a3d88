"""Timeline plots draw what the analyses return (real recording, Agg backend)."""

from __future__ import annotations

import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from workshop.analysis import timeline as A  # noqa: E402
from workshop.paths import data_path  # noqa: E402
from workshop.plot import timeline as P  # noqa: E402
from workshop.readers.timeline import TimelineWarning, read_timeline  # noqa: E402


@pytest.fixture(scope="module")
def tl():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TimelineWarning)
        return read_timeline(data_path("timelines", "tl-torch-gloo-np2-cycles"))


def test_gantt_window(tl) -> None:
    steps = A.step_starts(tl.spans)
    lo, hi = steps["start_us"].iloc[10], steps["start_us"].iloc[12]
    ax = P.plot_timeline_gantt(tl.spans, start_us=lo, end_us=hi, ticks=tl.ticks)
    inside = tl.spans[(tl.spans["end_us"] >= lo) & (tl.spans["start_us"] <= hi)]
    assert len(ax.patches) == len(inside)
    assert ax.get_xlim() == pytest.approx((lo / 1e3, hi / 1e3))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert set(labels) == set(inside["tensor"].astype(str))
    plt.close(ax.figure)


def test_breakdown_bars(tl) -> None:
    bd = A.breakdown(tl.spans, by="op")
    ax = P.plot_breakdown(bd)
    widths = pd.Series([p.get_width() for p in ax.patches]).sum()
    assert widths == pytest.approx(bd["total_us"].sum() / 1e6)
    # every phase in the legend has a colour of its own (issue 32: four greys, three purples)
    colours = [tuple(bars.patches[0].get_facecolor()) for bars in ax.containers]
    assert len(set(colours)) == len(colours) == bd["phase"].nunique()
    plt.close(ax.figure)


def test_lateness_heatmap(tl) -> None:
    m = A.lateness_matrix(tl.ticks)
    ax = P.plot_lateness_heatmap(m)
    # at most 25 tensor names, each large enough to read (lesson 04's were 6 pt, one per column)
    labels = ax.get_xticklabels()
    assert 0 < len(labels) <= 25 and all(label.get_fontsize() >= 8 for label in labels)
    assert ax.images[0].get_array().shape == m.shape
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="no readiness ticks"):
        P.plot_lateness_heatmap(A.lateness_matrix(tl.ticks.iloc[:0]))


def test_negotiation_share_over_time(tl) -> None:
    ev = A.evolution(tl.spans, edges=A.step_starts(tl.spans)["start_us"])
    fig, ax = plt.subplots()
    assert P.plot_negotiation_share(ev, ax=ax) is ax
    assert len(ax.patches) == 2 * len(ev)
    plt.close(fig)


def test_negotiation_share_shows_every_bar_and_keeps_the_legend_off_the_data(tl) -> None:
    ev = A.evolution(tl.spans, bins=30)  # the first bins hold the start-up broadcasts
    ax = P.plot_negotiation_share(ev)
    tallest = ((ev["negotiate_us"] + ev["processing_us"]) / 1e6).max()
    assert ax.get_ylim()[1] > tallest  # no bar is cut off at the top
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert legend.y1 <= ax.get_window_extent().y0  # below the axes, over no bar or curve
    plt.close(ax.figure)


def test_allreduce_overlap_draws_one_step(tl) -> None:
    ov = A.allreduce_overlap(tl.spans, cycles=tl.cycles)
    ax = P.plot_allreduce_overlap(ov, step=20)
    one = ov[ov["step"] == 20]
    bars = [p for p in ax.patches if p.get_width() > 0 or p.get_height() > 0]
    assert len(ax.patches) == 2 * len(one)  # a negotiation and an allreduce bar per gradient
    assert sum(bool(p.get_hatch()) for p in bars) == one["in_backward_all"].sum()
    lines = sorted(line.get_xdata()[0] for line in ax.get_lines())
    assert lines == pytest.approx(
        sorted([one["backward_end_us"].iloc[0] / 1e3, one["all_backward_end_us"].iloc[0] / 1e3])
    )
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="no step 999"):
        P.plot_allreduce_overlap(ov, step=999)


def _legible_at_page_width(ax) -> None:
    """Lesson 04's Gantt and overlap charts were 10-12 inches wide with 7 pt labels: the
    book's column shrank them to about 4 pt. Now: the column's width, 8 pt or more, at most
    25 rows, the legend under the axes (it takes no width from the bars)."""
    ax.figure.canvas.draw()
    assert ax.figure.get_size_inches()[0] <= P.PAGE_WIDTH_IN
    labels = ax.get_yticklabels()
    assert 0 < len(labels) <= 25 and all(label.get_fontsize() >= 8 for label in labels)
    legend = ax.get_legend()
    assert all(text.get_fontsize() >= 8 for text in legend.get_texts())
    assert legend.get_window_extent().y1 <= ax.get_window_extent().y0
    assert legend.get_window_extent().x1 <= ax.figure.bbox.x1  # not cut at the right edge


def test_gantt_and_overlap_legible_at_page_width(tl) -> None:
    ax = P.plot_timeline_gantt(tl.spans, ticks=tl.ticks)  # the whole run
    _legible_at_page_width(ax)
    plt.close(ax.figure)
    ax = P.plot_allreduce_overlap(A.allreduce_overlap(tl.spans, cycles=tl.cycles))
    _legible_at_page_width(ax)
    plt.close(ax.figure)


def test_lesson_04s_other_charts_legible_at_page_width(tl) -> None:
    # the breakdown (10 in, a 7 pt legend beside the bars) and the negotiation-share chart
    # (10 in) were wider than the column too; the two-threads chart was 11 in
    ax = P.plot_breakdown(A.breakdown(tl.spans, by="op"))
    _legible_at_page_width(ax)
    ax = P.plot_negotiation_share(A.evolution(tl.spans, bins=30))
    _legible_at_page_width(ax)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TimelineWarning)
        marked = read_timeline(data_path("timelines", "tl-torch-gloo-np2-cycles"))
    overlap = A.allreduce_overlap(marked.spans, cycles=marked.cycles)
    _legible_at_page_width(P.plot_two_threads(overlap, marked.cycles, step=30))
    plt.close("all")


def test_two_threads_draws_one_step_of_the_cycle_marked_recording() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TimelineWarning)
        marked = read_timeline(data_path("timelines", "tl-torch-gloo-np2-cycles"))
    overlap = A.allreduce_overlap(marked.spans, cycles=marked.cycles)
    ax = P.plot_two_threads(overlap, marked.cycles, step=30)
    one = overlap[overlap.step == 30]
    # one tick per gradient handed over (the backward lane), one allreduce bar per gradient
    assert len(ax.lines) == len(one)
    assert [t.get_text() for t in ax.get_yticklabels()][1].startswith("training thread")
    assert f"{len(one)} gradients" in ax.get_title()
    with pytest.raises(ValueError, match="no step 10000"):
        P.plot_two_threads(overlap, marked.cycles, step=10_000)
    plt.close("all")
