"""Unattended runs never hang at a widget cell (issue 48, item 6).

Under plain papermill or ``jupyter nbconvert --execute`` (nbclient, no frontend) a cell that
builds an ipywidgets panel sometimes never finishes: the kernel is idle, nbclient waits for a
reply (jupyter/nbclient#312, papermill#723). Lesson 07 hung that way in 3 runs of 8 with no
``WORKSHOP_STATIC_WIDGETS`` set. The explorers now see for themselves that nbclient started
their kernel and draw their static picture; a kernel a Jupyter server starts (JupyterLab)
keeps its panels. tests/test_browser.py checks a real JupyterLab.

These tests run papermill as anyone would: ``WORKSHOP_STATIC_WIDGETS`` is removed from the
environment the kernel inherits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager

from workshop import kernel

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO / "notebooks"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# A widget notebook under papermill takes ~10 s; a hung one waits forever. Well past a slow
# run on a loaded machine, well short of "forever".
RUN_S = 150
LESSON_RUN_S = 300
REPEATS = 5

EXPLORERS = """\
from workshop import data_path, readers, widgets

_, lr_epochs = readers.read_sweep(data_path("sweeps", "lr-rules-mnist"))
timeline = readers.read_timeline(data_path("timelines", "tl-torch-gloo-np2"))
_, scaling_epochs = readers.read_sweep(data_path("sweeps", "scaling-mnist"))
print("static_mode:", widgets.static_mode())
"""
CALLS = [
    "widgets.lr_explorer(lr_epochs)",
    "widgets.timeline_explorer(timeline)",
    "widgets.scaling_explorer(scaling_epochs)",
]


def _unattended_env() -> dict[str, str]:
    """This environment without the static switch, the repository importable in the kernel."""
    env = {k: v for k, v in os.environ.items() if k != "WORKSHOP_STATIC_WIDGETS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _papermill(source: Path, output: Path, cwd: Path, limit_s: float) -> float:
    """``papermill SOURCE OUTPUT -k python3`` from ``cwd``; its seconds, or a failure when it
    does not finish within ``limit_s`` (it and its kernel are then ended)."""
    command = [sys.executable, "-m", "papermill", str(source), str(output), "-k", "python3"]
    start = time.monotonic()
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=_unattended_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        log, _ = process.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        # The kernel watches its parent (JPY_PARENT_PID) and exits once papermill is gone.
        os.killpg(process.pid, signal.SIGKILL)
        log, _ = process.communicate()
        pytest.fail(f"papermill {source.name} did not finish in {limit_s} s:\n{log[-3000:]}")
    assert process.returncode == 0, f"papermill {source.name} failed:\n{log[-3000:]}"
    return time.monotonic() - start


def _widget_cells(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [
        cell
        for cell in notebook.cells
        if cell.cell_type == "code" and "widgets." in cell.source and "explorer(" in cell.source
    ]


def _assert_static(cell: nbformat.NotebookNode) -> None:
    """The cell drew its picture and built no widget."""
    kinds = [set(out.get("data", {})) for out in cell.outputs]
    assert not any(WIDGET_VIEW in kind for kind in kinds), f"{cell.source!r} built a widget"
    assert any("image/png" in kind for kind in kinds), f"{cell.source!r} drew no picture"


# --- the decision -------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "static"), [("1", True), ("0", False)])
def test_the_variable_still_decides(monkeypatch, value, static):
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher", kernel.NBCLIENT_KERNEL_ARGUMENT])
    monkeypatch.setattr(kernel, "unattended_kernel", lambda: not static)
    monkeypatch.setenv("WORKSHOP_STATIC_WIDGETS", value)
    assert kernel.static_mode() is static


def test_outside_a_kernel_nothing_changes(monkeypatch):
    # A script or pytest: no kernel, so no nbclient; the argument alone is not enough.
    monkeypatch.delenv("WORKSHOP_STATIC_WIDGETS", raising=False)
    monkeypatch.setattr(sys, "argv", ["python", kernel.NBCLIENT_KERNEL_ARGUMENT])
    assert kernel.static_mode() is False


def _kernel_says(code: str, extra_arguments: list[str], env: dict[str, str]) -> str:
    """Start a python3 kernel as a Jupyter server would (its kernelspec, ``extra_arguments``
    added), run ``code`` and return what it printed."""
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(extra_arguments=extra_arguments, env=env)
    client = manager.client()
    printed: list[str] = []

    def keep(msg):
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            printed.append("\n".join(msg["content"]["traceback"]))

    try:
        client.start_channels()
        client.wait_for_ready(timeout=60)
        client.execute_interactive(code, output_hook=keep, timeout=60)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return "".join(printed).strip()


ASK = "from workshop.widgets import static_mode; print(static_mode())"


def test_a_kernel_a_server_starts_stays_interactive(tmp_path):
    """JupyterLab starts the kernelspec's command line as it is; a site that keeps the IPython
    history in memory through its configuration (shared file systems) keeps its panels too."""
    env = _unattended_env()
    assert _kernel_says(ASK, [], env) == "False"
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_kernel_config.py").write_text("c.HistoryManager.hist_file = ':memory:'\n")
    assert _kernel_says(ASK, [], {**env, "IPYTHONDIR": str(tmp_path / "ipython")}) == "False"


def test_a_kernel_nbclient_starts_is_unattended():
    env = _unattended_env()
    assert _kernel_says(ASK, [kernel.NBCLIENT_KERNEL_ARGUMENT], env) == "True"
    assert (
        _kernel_says(
            ASK, [kernel.NBCLIENT_KERNEL_ARGUMENT], {**env, "WORKSHOP_STATIC_WIDGETS": "0"}
        )
        == "False"
    )


# --- plain papermill ----------------------------------------------------------------------


@pytest.mark.notebook
def test_every_explorer_under_plain_papermill_five_times(tmp_path):
    """The three explorers the lessons build, in one small notebook, five runs in a row: each
    finishes and draws pictures, with no variable set."""
    cells = [nbformat.v4.new_code_cell(EXPLORERS)]
    cells += [nbformat.v4.new_code_cell(call) for call in CALLS]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata.kernelspec = {"name": "python3", "display_name": "Python 3"}
    source = tmp_path / "explorers.ipynb"
    nbformat.write(notebook, source)
    for run in range(REPEATS):
        output = tmp_path / f"explorers-{run}.ipynb"
        _papermill(source, output, tmp_path, RUN_S)
        done = nbformat.read(output, as_version=4)
        assert "static_mode: True" in done.cells[0].outputs[0]["text"]
        widget_cells = _widget_cells(done)
        assert len(widget_cells) == len(CALLS)
        for cell in widget_cells:
            _assert_static(cell)


@pytest.mark.notebook
def test_lesson_07_under_plain_papermill(tmp_path):
    """The lesson that hung: ``papermill 07-... out.ipynb`` from notebooks/, nothing set."""
    lesson = NOTEBOOKS / "07-batch-size-and-learning-rate.ipynb"
    output = tmp_path / lesson.name
    _papermill(lesson, output, NOTEBOOKS, LESSON_RUN_S)
    (cell,) = _widget_cells(nbformat.read(output, as_version=4))
    _assert_static(cell)
