"""Real-browser test: notebook 04's timeline explorer works in JupyterLab, not only in papermill.

The test starts JupyterLab on 127.0.0.1 (random free port, random token) over a temporary copy
of notebooks/, opens 04-horovod-timelines.ipynb in headless Chromium (Debian's package, driven
by Playwright for Python), runs all cells, picks one tensor in the explorer's "tensor" dropdown
and checks that the widget's output area shows a new plot. The screenshot lands in
test-artifacts/browser-04-timeline-explorer.png (and the view before the change in
browser-04-timeline-explorer-before.png). The server is stopped in the fixture's teardown.

Requirements: ``bash scripts/setup.sh --test`` (Chromium and Playwright). No browser download
is needed: Playwright drives /usr/bin/chromium.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from workshop import data_path, readers

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
NOTEBOOK = "04-horovod-timelines.ipynb"
SCREENSHOT = ARTIFACTS / "browser-04-timeline-explorer.png"
SCREENSHOT_BEFORE = ARTIFACTS / "browser-04-timeline-explorer-before.png"
CHROMIUM = os.environ.get("WORKSHOP_CHROMIUM", "/usr/bin/chromium")
# Without the background-networking flags Chromium keeps calling home, which floods a closed
# network (and slows the test down).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SERVER_START_S = 60
SERVER_STOP_S = 15
NOTEBOOK_OPEN_MS = 60_000
RUN_ALL_MS = 120_000
REDRAW_MS = 30_000
START_RUN_MS = 30_000

# The open notebook's kernel is connected, started and idle (not merely "no kernel yet").
KERNEL_IDLE_JS = """() => {
    const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    const context = panel && panel.sessionContext;
    const kernel = context && context.session && context.session.kernel;
    return Boolean(context && context.isReady && kernel
        && kernel.connectionStatus === 'connected' && kernel.status === 'idle');
}"""
# Some code cell of the open notebook has an execution count.
EXECUTED_JS = """() => {
    const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
    return Boolean(panel && panel.content && panel.content.widgets.some(
        (cell) => cell.model.type === 'code' && cell.model.executionCount));
}"""

# JupyterLab's "would you like news?" toast would cover the screenshot.
NO_NEWS_SETTINGS = '{"fetchNews": "false", "checkForUpdates": false}\n'


@dataclass
class LabServer:
    """A running JupyterLab: where it listens and the token that opens it."""

    url: str
    token: str
    log_path: Path

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server log, for failure messages."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _answers(url: str, token: str) -> bool:
    request = urllib.request.Request(
        f"{url}/api/status", headers={"Authorization": f"token {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen, url: str, token: str) -> None:
    """Ask the server to shut down (it stops its kernels), then insist."""
    request = urllib.request.Request(
        f"{url}/api/shutdown", method="POST", headers={"Authorization": f"token {token}"}
    )
    try:
        urllib.request.urlopen(request, timeout=5).close()
    except (urllib.error.URLError, OSError):
        process.terminate()
    try:
        process.wait(timeout=SERVER_STOP_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=SERVER_STOP_S)
    # The server ran in its own session: take down any kernel it left behind.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory) -> Iterator[LabServer]:
    """JupyterLab over a temporary copy of notebooks/ (the committed files stay untouched)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} not found: run `bash scripts/setup.sh --test` (installs chromium)"
        )
    base = tmp_path_factory.mktemp("lab")
    root = base / "notebooks"
    shutil.copytree(REPO / "notebooks", root, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    settings = base / "config" / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(NO_NEWS_SETTINGS)

    env = dict(os.environ)
    # Interactive widgets are the point: the harness's static switch must not leak in, and the
    # kernel must use the inline backend, not one forced from outside.
    env.pop("WORKSHOP_STATIC_WIDGETS", None)
    env.pop("MPLBACKEND", None)
    env["JUPYTER_CONFIG_DIR"] = str(base / "config")
    env["JUPYTER_RUNTIME_DIR"] = str(base / "runtime")
    env["JUPYTER_PLATFORM_DIRS"] = "1"

    token = secrets.token_hex(24)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = base / "jupyterlab.log"
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--allow-root",
        f"--ServerApp.token={token}",
        f"--ServerApp.port={port}",
        "--ServerApp.ip=127.0.0.1",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        # window.jupyterapp lets the test wait for the kernel connection, as JupyterLab's own
        # UI tests (galata) do; the clicks still go through the menu like a learner's.
        "--LabApp.expose_app_in_browser=True",
    ]
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = LabServer(url=url, token=token, log_path=log_path)
    try:
        deadline = time.monotonic() + SERVER_START_S
        while not _answers(url, token):
            if process.poll() is not None:
                pytest.fail(f"JupyterLab exited with {process.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(
                    f"JupyterLab did not answer {url}/api/status within {SERVER_START_S} s:\n"
                    f"{server.log_tail()}"
                )
            time.sleep(0.5)
        yield server
    finally:
        _stop(process, url, token)


def _output_image_src(page, selector: str) -> str | None:
    """The src of the plot inside the explorer's output area, or None while there is none."""
    return page.evaluate(
        """(selector) => {
            const img = document.querySelector(selector);
            return img && img.complete && img.naturalWidth > 0 ? img.getAttribute('src') : null;
        }""",
        selector,
    )


def _window_ms(readout: str) -> tuple[float, float]:
    """The (low, high) window in ms from the range slider's readout, e.g. "12.00 - 212.00"."""
    numbers = [float(n) for n in re.findall(r"\d+(?:\.\d+)?", readout.replace(",", ""))]
    assert len(numbers) == 2, f"cannot read the time window from the slider readout {readout!r}"
    return numbers[0], numbers[1]


def _busiest_tensor_in_window(names: list[str], window_ms: tuple[float, float]) -> str:
    """The tensor with the most span time inside the window, so its plot shows bars.

    Many tensors have no span in the default window (a learner picking one sees an empty
    plot); the test picks the one the recorded timeline shows best.
    """
    cells = nbformat.read(REPO / "notebooks" / NOTEBOOK, as_version=4).cells
    source = next(c.source for c in cells if "parameters" in c.metadata.get("tags", []))
    timeline = {
        node.targets[0].id: ast.literal_eval(node.value)
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
    }["RECORDING"]  # the run directory the notebook analyses when RUN_DIR is empty
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the recorded file's known truncation warning
        spans = readers.read_timeline(data_path(timeline) / "timeline.json").spans
    low_us, high_us = window_ms[0] * 1e3, window_ms[1] * 1e3
    inside_us = spans["end_us"].clip(upper=high_us) - spans["start_us"].clip(lower=low_us)
    visible = inside_us[inside_us > 0].groupby(spans["tensor"].astype(str)).sum()
    visible = visible[visible.index.isin(names)]
    assert len(visible), f"no tensor of {names} has spans in the window {window_ms} ms"
    return str(visible.idxmax())


@pytest.mark.browser
def test_timeline_explorer_redraws_in_jupyterlab(lab_server: LabServer):
    """Run notebook 04 in JupyterLab, choose one tensor, see the explorer draw a new plot."""
    try:
        from playwright import sync_api
    except ImportError:
        pytest.fail("Playwright for Python is missing: run `bash scripts/setup.sh --test`")
    ARTIFACTS.mkdir(exist_ok=True)
    plot_img = ".widget-interact .widget-output .jp-OutputArea-output img"

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.set_default_timeout(NOTEBOOK_OPEN_MS)
            page.goto(f"{lab_server.url}/lab/tree/{NOTEBOOK}?token={lab_server.token}")

            notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
            try:
                notebook.wait_for(state="visible", timeout=NOTEBOOK_OPEN_MS)
                page.wait_for_function(KERNEL_IDLE_JS, timeout=NOTEBOOK_OPEN_MS)
            except sync_api.TimeoutError:
                page.screenshot(path=SCREENSHOT)
                pytest.fail(
                    f"{NOTEBOOK} did not open with an idle kernel within "
                    f"{NOTEBOOK_OPEN_MS / 1000:.0f} s (screenshot {SCREENSHOT}); server log:\n"
                    f"{lab_server.log_tail()}"
                )

            notebook.click()  # focus the notebook so the menu command applies to it
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
            try:
                page.wait_for_function(EXECUTED_JS, timeout=START_RUN_MS)
            except sync_api.TimeoutError:
                page.screenshot(path=SCREENSHOT)
                pytest.fail(
                    f"Run All Cells executed no cell within {START_RUN_MS / 1000:.0f} s "
                    f"(screenshot {SCREENSHOT})"
                )

            explorer = page.locator(".widget-interact")
            try:
                page.wait_for_function(
                    "(selector) => { const img = document.querySelector(selector);"
                    " return img && img.complete && img.naturalWidth > 0; }",
                    arg=plot_img,
                    timeout=RUN_ALL_MS,
                )
            except sync_api.TimeoutError:
                page.screenshot(path=SCREENSHOT)
                errors = page.locator(
                    ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
                ).all_inner_texts()
                pytest.fail(
                    f"after Run All Cells no explorer plot appeared within "
                    f"{RUN_ALL_MS / 1000:.0f} s (explorers found: {explorer.count()}; "
                    f"screenshot {SCREENSHOT}); stderr outputs: {errors[-3:]}"
                )
            assert explorer.count() == 1, "expected one interactive explorer in the notebook"
            first_src = _output_image_src(page, plot_img)
            assert first_src and first_src.startswith("data:image/png"), first_src

            try:
                page.wait_for_function(KERNEL_IDLE_JS, timeout=RUN_ALL_MS)
            except sync_api.TimeoutError:
                page.screenshot(path=SCREENSHOT)
                pytest.fail(
                    f"the kernel stayed busy after Run All Cells (screenshot {SCREENSHOT})"
                )

            readout = explorer.locator(".widget-hslider", has_text="window (ms)").locator(
                ".widget-readout"
            )
            # textContent, not innerText: JupyterLab (4.6) skips rendering cells out of view
            # (content-visibility), and innerText of what is not rendered is empty.
            explorer.scroll_into_view_if_needed()
            window_ms = _window_ms(readout.text_content() or "")
            tensor_select = explorer.locator(".widget-dropdown", has_text="tensor").locator(
                "select"
            )
            options = tensor_select.locator("option").all_text_contents()
            assert options[0] == "all" and len(options) > 1, f"tensor options: {options}"
            chosen = _busiest_tensor_in_window(options[1:], window_ms)
            explorer.scroll_into_view_if_needed()
            page.screenshot(path=SCREENSHOT_BEFORE)
            tensor_select.select_option(label=chosen)

            try:
                page.wait_for_function(
                    "([selector, before]) => { const img = document.querySelector(selector);"
                    " return img && img.complete && img.naturalWidth > 0"
                    " && img.getAttribute('src') !== before; }",
                    arg=[plot_img, first_src],
                    timeout=REDRAW_MS,
                )
                redrawn = True
            except sync_api.TimeoutError:
                redrawn = False
            explorer.scroll_into_view_if_needed()
            page.screenshot(path=SCREENSHOT)
            assert redrawn, (
                f"choosing tensor {chosen!r} drew no new plot within {REDRAW_MS / 1000:.0f} s"
                f" (screenshot {SCREENSHOT})"
            )
            second_src = _output_image_src(page, plot_img)
            assert second_src and second_src.startswith("data:image/png"), second_src
            assert second_src != first_src
            assert tensor_select.input_value() == chosen
            widget_errors = explorer.locator(
                ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
            ).all_inner_texts()
            assert not widget_errors, f"the explorer wrote to stderr: {widget_errors}"
            assert explorer.locator(".widget-output img").count() == 1, "one plot, not stacked"
        finally:
            browser.close()
    assert SCREENSHOT.stat().st_size > 10_000, f"{SCREENSHOT} looks empty"
