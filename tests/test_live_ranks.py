"""Live Horovod ranks in a notebook (workshop.launch.live_ranks, issue 41): IPython Parallel MPI
engines with Horovod initialised, %%px in a real Jupyter kernel (papermill), and nothing left
running after stop() or after the kernel that started them is killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.live


def alive(pids) -> list[int]:
    left = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.append(pid)
    return left


def wait_gone(pids, timeout_s=15.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.3)
    return alive(pids)


def test_ranks_run_collectives_and_stop_leaves_nothing(cpu_lock, horovod_ready):
    from workshop.launch import live_ranks

    cluster = live_ranks.start(np=2)
    try:
        cluster.view.execute(
            "import torch\n"
            "mean = hvd.allreduce(torch.tensor([hvd.rank() * 1.0])).item()\n"
            "got = (hvd.rank(), hvd.size(), mean)"
        )
        got = sorted(cluster.view.pull("got"))
        # the near miss: a sum (op=Sum) would give 1.0; the default averages
        assert got == [(0, 2, 0.5), (1, 2, 0.5)]
        pids = [*cluster.pids["engines"], cluster.pids["controller"]]
        assert len(alive(pids)) == 5  # 2 engines, their 2 nannies, the controller
    finally:
        cluster.stop()
    assert wait_gone([*pids, cluster.watchdog.pid]) == []


def test_a_killed_kernel_leaves_no_rank(cpu_lock, horovod_ready, tmp_path):
    # the kernel cannot clean up after SIGKILL: the watchdog in its own session must
    script = (
        "import json, sys, time\nfrom workshop import launch\nr = launch.live_ranks.start(np=2)\n"
        "pids = [*r.pids['engines'], r.pids['controller'], r.watchdog.pid]\n"
        "print(json.dumps(pids), flush=True)\ntime.sleep(600)\n"
    )
    kernel = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=tmp_path)  # fmt: skip
    try:
        line = kernel.stdout.readline()
        while line and not line.startswith("["):  # after live_ranks.start's own line
            line = kernel.stdout.readline()
        pids = json.loads(line)
        assert len(alive(pids)) == len(pids)
    finally:
        kernel.send_signal(signal.SIGKILL)
        kernel.wait()
    assert wait_gone(pids) == [], "left running after the kernel was killed"


def test_px_cells_show_every_ranks_output_in_a_real_kernel(cpu_lock, horovod_ready, tmp_path):
    import nbformat
    import papermill

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "from workshop import launch\ncluster = launch.live_ranks.start(np=2)"
        ),
        nbformat.v4.new_code_cell(
            "%%px\nimport torch\nprint('rank', hvd.rank(), 'mean',"
            " hvd.allreduce(torch.tensor([float(hvd.rank())])).item())"
        ),
        nbformat.v4.new_code_cell("cluster.stop()"),
    ]
    source, done = tmp_path / "px.ipynb", tmp_path / "px-out.ipynb"
    nbformat.write(notebook, source)
    papermill.execute_notebook(str(source), str(done), kernel_name="python3", progress_bar=False,
                               cwd=str(tmp_path))  # fmt: skip
    cells = nbformat.read(done, as_version=4).cells
    shown = "".join(
        output.get("text", "") + json.dumps(output.get("data", {})) for output in cells[1].outputs
    )
    assert "rank 0 mean 0.5" in shown and "rank 1 mean 0.5" in shown, shown
    assert "stdout:0" in shown and "stdout:1" in shown, shown  # labelled per rank
    assert "stopped 2 ranks" in "".join(o.get("text", "") for o in cells[2].outputs)


def test_mpi_args_oversubscribe_only_beyond_the_cores():
    from workshop.launch.live_ranks import mpi_args

    assert mpi_args(2, cores=2) == ["--bind-to", "none"]
    assert mpi_args(2, cores=1) == ["--bind-to", "none", "--oversubscribe"]  # Binder: 1 CPU
    with pytest.raises(ValueError, match="np must be at least 1"):
        from workshop.launch import live_ranks

        live_ranks.start(np=0)


def test_the_module_runs_in_a_fresh_interpreter():
    # the watchdog's entry point: `python -m workshop.launch.live_ranks KERNEL PID...` returns at
    # once when the kernel is already gone (pid 0 names no process here)
    watchdog = [sys.executable, "-m", "workshop.launch.live_ranks", "999999999"]
    done = subprocess.run(watchdog, timeout=30, env=os.environ)
    assert done.returncode == 0


def test_the_engines_and_the_watchdog_load_no_pandas():
    # Each engine imports this module (ipyparallel finds the functions it runs there) and the
    # watchdog runs it: importing it loads workshop.launch's __init__, which imports nothing
    # until a name is used.
    code = "import sys, workshop.launch.live_ranks; print('pandas' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr
