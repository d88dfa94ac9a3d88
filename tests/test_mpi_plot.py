"""The MPI plots draw what the analyses return."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from workshop.analysis import mpi as analysis  # noqa: E402
from workshop.paths import data_path  # noqa: E402
from workshop.plot import mpi as plots  # noqa: E402
from workshop.readers.mpitrace import read_mpitrace  # noqa: E402


@pytest.fixture(scope="module")
def cpu():
    return read_mpitrace(data_path("mpi", "seed001-thetagpu-cpu"))


def test_routine_times(cpu):
    table = analysis.routine_table(cpu)
    ax = plots.plot_routine_times(table, top=3)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["MPI_Gather", "MPI_Bcast", "MPI_Allreduce"]
    widths = sorted(p.get_width() for p in ax.patches)
    assert widths[-1] == pytest.approx(10.575)
    plt.close("all")


def test_message_sizes_one_bar_per_routine_and_bin(cpu):
    bins = analysis.message_size_bins(cpu)
    ax = plots.plot_message_sizes(bins)
    assert len(ax.patches) == len(bins)
    eight = [p for p in ax.patches if abs(p.get_x() + p.get_width() / 2 - 3) < 0.4]
    assert sorted(p.get_height() for p in eight) == [1, 7428]  # one 8-byte bcast, allreduces
    assert ax.get_yscale() == "log"
    ax = plots.plot_message_sizes(bins, weight="time_s")
    assert ax.get_yscale() == "linear"
    plt.close("all")


def test_comm_vs_elapsed(cpu):
    frame = analysis.comm_fraction(cpu)
    ax = plots.plot_comm_vs_elapsed(frame)
    assert len(ax.patches) == 2 * 16
    ax.figure.canvas.draw()
    # the legend sits beside the axes, over no bar
    assert ax.get_legend().get_window_extent().x0 >= ax.get_window_extent().x1
    plt.close("all")


def test_wrong_frame_is_named():
    with pytest.raises(ValueError, match=r"no column\(s\) \[.time_s.\]"):
        plots.plot_routine_times(pd.DataFrame({"routine": [], "calls": []}))
