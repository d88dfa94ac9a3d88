"""Run a notebook with papermill and measure it: wall time and, when asked, peak memory of the
kernel.

Memory is the kernel and every process it starts, taken two ways every :data:`SAMPLE_S`:

- ``peak_memory_bytes``: the sum of each process's proportional set size (PSS), in which a
  page shared by several processes (torch's libraries, mapped by the kernel and by each Gloo
  worker) is split among them, so it counts once in the sum. That is close to what a memory
  cgroup (Binder's 2 GiB limit) charges, and it is what the tests hold to the budget;
- ``peak_rss_bytes``: the sum of resident set sizes, which counts a shared page once per
  process that maps it: an upper bound, reported beside it.

Reading PSS walks each process's page tables (``/proc/PID/smaps_rollup``): with live runs
under the kernel (ranks that import TensorFlow) that sampling cost more CPU than some of the
runs (34 CPU-s of lesson 02's live run), so it happens only with ``memory=True``, and twice a
second: one read of a process that has torch loaded took 12.6 ms of CPU here (50 reads, the
machine idle), so with notebook 01's five such processes (its kernel, two Gloo workers, two
IPython Parallel engines) a sample every 50 ms, as this module once took, kept more than half
a core busy (63 ms of reading per 113 ms), and one every 0.5 s keeps an eighth of one. What a
twice-a-second sample can miss is a peak shorter than half a second; the budget is about the
libraries and models that the processes hold for the whole lesson (notebook 01 peaked at
1,419 and 1,421 MiB sampled either way).

Used by tests/test_notebooks.py, tests/conftest.py, tests/test_notebook_run_dir.py, the book's
replay (tools/book/replay.py) and benchmarks/notebooks_replay.py.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

# Seconds one cell may run before papermill stops the notebook with an error: a live lesson's
# longest cell (lesson 02's programs on a loaded 2-core machine) takes a few minutes; a cell that
# waits for a message that never comes would otherwise wait for ever (one replay of lesson 07
# did, at its explorer cell, with the kernel idle).
CELL_TIMEOUT_S = 600
#: Seconds between two memory samples (the module says why not more often).
SAMPLE_S = 0.5


@dataclass
class NotebookRun:
    """Outcome of one papermill execution."""

    path: Path
    seconds: float
    peak_memory_bytes: int | None  # None: not sampled (memory=False)
    peak_rss_bytes: int | None


def _descendants_memory(root: psutil.Process) -> tuple[int, int]:
    """(sum of PSS, sum of RSS) of every process below ``root`` (the kernel and what it
    starts); a process that ends while it is read is left out."""
    pss = rss = 0
    for proc in root.children(recursive=True):
        try:
            info = proc.memory_full_info()
        except psutil.Error:
            continue
        pss += info.pss
        rss += info.rss
    return pss, rss


def execute(
    notebook: Path,
    output: Path,
    parameters: dict,
    cwd: Path | None = None,
    *,
    memory: bool = False,
    cell_timeout_s: float = CELL_TIMEOUT_S,
) -> NotebookRun:
    """Execute ``notebook`` into ``output`` with papermill; returns the time and, with
    ``memory=True``, the peaks of this process's children (the kernel and what it starts),
    sampled every :data:`SAMPLE_S`. A cell that runs longer than ``cell_timeout_s`` stops the
    run with an error (papermill's ``execution_timeout``)."""
    import papermill

    # The kernel inherits this process's environment: both variables are set for the run and
    # restored after it, so that they do not leak into what the caller does next (a test
    # process runs other tests after this one).
    # Explorers draw one static plot when nobody can move their sliders (workshop.widgets);
    # solutions run under papermill, and a solution that fails its own check fails the run.
    kernel_env = {"WORKSHOP_STATIC_WIDGETS": "1", "WORKSHOP_EXERCISES_STRICT": "1"}
    saved = {name: os.environ.get(name) for name in kernel_env}
    os.environ.update(kernel_env)
    me = psutil.Process(os.getpid())
    peak_pss = peak_rss = 0 if memory else None
    done = threading.Event()

    def sample():
        nonlocal peak_pss, peak_rss
        while not done.is_set():
            pss, rss = _descendants_memory(me)
            peak_pss, peak_rss = max(peak_pss, pss), max(peak_rss, rss)
            done.wait(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    if memory:
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
            execution_timeout=cell_timeout_s,
        )
    finally:
        done.set()
        if memory:
            sampler.join()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return NotebookRun(output, time.perf_counter() - start, peak_pss, peak_rss)
