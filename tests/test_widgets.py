"""workshop.widgets: an unattended run builds no widget at all, and an interactive one draws the
default view once as a picture before the panel (what a saved or exported notebook keeps)."""

from __future__ import annotations

import ipywidgets
import matplotlib
import pytest

from workshop import data_path, readers, widgets

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def timeline():
    # Any timeline will do; the recording's own completeness is tests/test_timeline*'s to check.
    return readers.read_timeline(data_path("timelines", "tl-torch-gloo-np2"))


def test_static_mode_builds_no_widget(timeline, monkeypatch):
    # A widget opens a comm to a frontend; papermill has none (issue 32: one run of lesson 07
    # waited at the explorer cell with the kernel idle).
    def refuse(self, **kwargs):
        raise AssertionError("a widget was built in static mode")

    monkeypatch.setattr(ipywidgets.Widget, "__init__", refuse)
    drawn = []
    monkeypatch.setattr(widgets.explorers.plt, "show", lambda: drawn.append(1))
    assert widgets.timeline_explorer(timeline, static=True) is None
    assert drawn == [1]


def test_interactive_mode_draws_a_picture_then_the_panel(timeline, monkeypatch, capsys):
    drawn = []
    monkeypatch.setattr(widgets.explorers.plt, "show", lambda: drawn.append(1))
    panel = widgets.timeline_explorer(timeline, static=False)
    assert isinstance(panel, ipywidgets.interactive)
    assert [c.description for c in panel.children[:3]] == ["window (ms)", "tensor", "rank"]
    assert "picture" in capsys.readouterr().out
    assert len(drawn) == 2  # the picture, and the panel's own first drawing
