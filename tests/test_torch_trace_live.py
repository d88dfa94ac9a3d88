"""``workshop trace`` on torch.profiler traces that real DDP ranks record (issue 58, item 2):
tests/check_scripts/ddp_profiled.py under torchrun (2 CPU ranks, Gloo), twice, with a rank
slowed by 40 ms before each backward pass: rank 1, and the near miss, rank 0. The summary is
checked against what the traces' own events add up to, read straight from the JSON."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_torch_trace import summary_matches_events

from workshop.analysis.torch_trace import slowest_rank, step_breakdown, waited_for
from workshop.readers.torch_trace import read_torch_traces

pytestmark = pytest.mark.live

SCRIPT = Path(__file__).parent / "check_scripts" / "ddp_profiled.py"
ACTIVE = 3
SLOW_MS = 40
# The script's MLP: 256*512 + 512, 512*256 + 256 and 256*10 + 10 parameters, float32
PARAM_BYTES = 4 * (256 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10)  # 1,061,928 B


def _record(out: Path, slow_rank: int) -> Path:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(SCRIPT), str(out), "--active", str(ACTIVE),
        "--slow-rank", str(slow_rank), "--slow-ms", str(SLOW_MS),
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        output, _ = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # torchrun and its ranks: one session
        output, _ = process.communicate()
        pytest.fail(f"torchrun did not end in 240 s: {output[-3000:]}")
    assert process.returncode == 0, output[-3000:]
    # every rank and torchrun itself ended: nothing left with the folder on its command line
    left = subprocess.run(["pgrep", "-af", str(out)], capture_output=True, text=True)
    assert left.stdout == ""
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory, cpu_lock_module):
    root = tmp_path_factory.mktemp("ddp-traces")
    return {slow: _record(root / f"slow-rank-{slow}", slow) for slow in (1, 0)}


def test_one_trace_per_rank_with_the_profiled_steps(recorded):
    traces = read_torch_traces([recorded[1]])
    assert [t.rank for t in traces] == [0, 1]
    assert {(t.world_size, t.backend) for t in traces} == {(2, "gloo")}
    # schedule(wait=1, warmup=1, active=3): steps 0 and 1 are not recorded
    assert [t.steps["step"].tolist() for t in traces] == [[2, 3, 4], [2, 3, 4]]


@pytest.mark.parametrize("slow", [1, 0])
def test_the_summary_adds_up_to_the_traces_own_events(recorded, slow):
    summary_matches_events(read_torch_traces([recorded[slow]]), ACTIVE, PARAM_BYTES)


@pytest.mark.parametrize("slow", [1, 0])
def test_the_rank_the_others_wait_for_is_the_slowed_one(recorded, slow):
    # the slowed rank's backward ends ~40 ms after the other's: the other waits for it
    who = slowest_rank(waited_for(step_breakdown(read_torch_traces([recorded[slow]]))))
    assert who["rank"] == slow
    assert who["steps_last"] >= 2 and who["steps"] == ACTIVE
    assert SLOW_MS * 1e3 / 2 < who["median_lag_us"] < SLOW_MS * 1e3 * 2


def test_workshop_trace_report_names_the_slowed_rank(recorded):
    result = subprocess.run(
        [sys.executable, "-m", "workshop.cli", "trace", "report", str(recorded[1])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "The others wait for rank 1:" in result.stdout
    assert "2 bucket allreduce(s) per step, 1.01 MiB" in result.stdout
