"""Run a notebook with papermill and measure it: wall time and peak memory of the kernel.

Used by tests/test_notebooks.py and benchmarks/notebooks_replay.py.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass
class NotebookRun:
    """Outcome of one papermill execution."""

    path: Path
    seconds: float
    peak_rss_bytes: int


def _descendants_rss(root: psutil.Process) -> int:
    """Resident memory of every process below ``root`` (the kernel and what it starts)."""
    total = 0
    for proc in root.children(recursive=True):
        try:
            total += proc.memory_info().rss
        except psutil.Error:
            continue
    return total


def execute(
    notebook: Path, output: Path, parameters: dict, cwd: Path | None = None
) -> NotebookRun:
    """Execute ``notebook`` into ``output`` with papermill, sampling the memory of this process
    and its children (the kernel) every 50 ms; returns time and the peak of kernel + children."""
    import papermill

    # Explorers draw one static plot when nobody can move their sliders (workshop.widgets).
    os.environ["WORKSHOP_STATIC_WIDGETS"] = "1"
    # Solutions run under papermill: a solution that fails its own check fails the run.
    os.environ["WORKSHOP_EXERCISES_STRICT"] = "1"
    me = psutil.Process(os.getpid())
    peak = 0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _descendants_rss(me))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(notebook),
            str(output),
            parameters=parameters,
            kernel_name="python3",
            cwd=str(cwd or notebook.parent),
            progress_bar=False,
        )
    finally:
        done.set()
        sampler.join()
    return NotebookRun(output, time.perf_counter() - start, peak)
