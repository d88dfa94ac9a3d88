"""`workshop run`'s crash summary says a crashed rank as `workshop check` does (issue 42): the
innermost line outside the libraries and the exception, not the log's last line, and for a
Horovod error a learner can cause its cause and fix; a log without a traceback keeps its last
line. Real 2-rank runs (Gloo): the check's error script under horovodrun, and `workshop run`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workshop.analysis.failure import attribute
from workshop.launch.programs import find_program
from workshop.launch.record import failure_message
from workshop.readers.exits import rank_ends_in

SCRIPT = Path(__file__).parent / "check_scripts" / "torch_horovod_errors.py"


def _message(run_dir: Path, exit_code: int, statuses: dict[int, str] | None = None) -> str:
    """``workshop run``'s failure message of a run folder's logs (2 ranks)."""
    for rank, status in (statuses or {}).items():
        (run_dir / "logs" / f"rank.{rank}.status").write_text(status + "\n")
    return failure_message(run_dir, exit_code, attribute(rank_ends_in(run_dir, 2)))


def _horovod_error_run(run_dir: Path, error: str) -> int:
    """Run the error script on 2 ranks, each rank's output in logs/rank.N.log as `workshop
    run`'s ranks write it; the launcher's exit code."""
    (run_dir / "logs").mkdir(parents=True)
    rank_command = (
        f'exec {sys.executable} {SCRIPT} --error {error} '
        f'> {run_dir}/logs/rank.$HOROVOD_RANK.log 2>&1'
    )  # fmt: skip
    return subprocess.run(
        [find_program("horovodrun"), "-np", "2", "--gloo", "-H", "localhost:2",
         "sh", "-c", rank_command],
        capture_output=True, text=True, timeout=300, cwd=run_dir,
    ).returncode  # fmt: skip


@pytest.mark.live
def test_live_a_horovod_error_is_summarized_at_the_learners_line_with_cause_and_fix(
    tmp_path, cpu_lock, horovod_ready
):
    exit_code = _horovod_error_run(tmp_path, "root_rank")
    assert exit_code != 0
    log = (tmp_path / "logs" / "rank.1.log").read_text()
    assert "site-packages/horovod" in log  # the traceback ends in Horovod's own frames
    message = _message(tmp_path, exit_code, {0: "failed", 1: "failed"})
    print(message)
    line = (
        "crashed at line 37 of torch_horovod_errors.py "
        "(hvd.broadcast_parameters(model.state_dict(), root_rank=root)): "
    )
    assert f"rank 0 {line}" in message and f"rank 1 {line}" in message
    assert "Mismatched BROADCAST root ranks" in message
    assert "site-packages" not in message
    assert "cause: the ranks called one broadcast with different root ranks" in message
    assert "Fix: root_rank=0 on every rank: hvd.broadcast_parameters(" in message


@pytest.mark.live
def test_live_workshop_run_names_the_line_that_raised(tmp_path, cpu_lock, tiny_run_argv):
    result = subprocess.run(
        [sys.executable, "-m", "workshop.cli", *tiny_run_argv(tmp_path, "raised")],
        capture_output=True, text=True, timeout=300,
        env=os.environ | {"WORKSHOP_FAIL_RANK": "1"},
    )  # fmt: skip
    print(result.stderr)
    assert result.returncode == 1
    crashed = next(line for line in result.stderr.splitlines() if "rank 1 crashed" in line)
    assert crashed.startswith("  rank 1 crashed at line ") and "of common.py (raise " in crashed
    assert ": RuntimeError: fault injected on rank 1" in crashed
    assert "cause:" not in result.stderr  # not a Horovod error: no cause of Horovod's


def test_near_miss_a_log_without_a_traceback_keeps_its_last_line(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rank.1.log").write_text("Epoch 1: loss 2.1\nKilled\n")
    message = _message(tmp_path, 1, {0: "ok", 1: "failed"})
    assert f"  rank 1 crashed: Killed  (log: {logs / 'rank.1.log'})" in message.splitlines()
    # a traceback's text without its exception line is no traceback either
    (logs / "rank.1.log").write_text('Traceback (most recent call last):\n  File "x.py"\n')
    message = _message(tmp_path, 1, {0: "ok", 1: "failed"})
    assert 'File "x.py"  (log: ' in message and "crashed at" not in message
