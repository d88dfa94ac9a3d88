"""Lesson 10's LIVE path for real (issue 58 item 3): lesson 02's DDP model under ``workshop run
--script ... --profile-steps``, as the notebook runs it with ``LIVE = True`` and as
scripts/record_lesson10.py records data/ddp-lesson/, writes one readable trace per rank; DDP's
default buckets reduce the model in one allreduce per step, ``bucket_cap_mb=0`` in one per
gradient tensor."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from workshop.analysis import step_breakdown
from workshop.lessons.l10_ddp import findings, record


@pytest.mark.live
def test_the_profiled_ddp_program_records_a_trace_per_rank(tmp_path, cpu_lock):
    # one run, bucket_cap_mb=0 (DDP's default buckets: the recordings, and the workshop run
    # --script tests of tests/test_run_ddp.py)
    cap0 = record.record_traces(tmp_path / "cap0", bucket_cap_mb=0)
    run = json.loads((cap0 / "run.json").read_text())
    shown = "workshop/lessons/l10_ddp/programs/ddp_buckets.py"
    assert run["command"][:6] == ["workshop", "run", "-np", "2", "--script", shown]
    assert run["command"][-2:] == ["--bucket-cap-mb", "0"] and run["engine"] == "ddp"
    assert run["ddp_settings"]["bucket_cap_mb"] == 0
    assert sorted(p.name for p in (cap0 / "traces").iterdir()) == [
        "rank0.json.gz", "rank1.json.gz"
    ]  # fmt: skip
    table = step_breakdown(findings.traces(cap0))
    # workshop.check.profiled's schedule(wait=1, warmup=1, active=5): five steps on each rank
    assert sorted(table["rank"].unique()) == [0, 1]
    assert table.groupby("rank").step.nunique().tolist() == [5, 5]
    # the CNN's 8 gradient tensors (2 convolutions, 2 linear layers: weight and bias each),
    # each a bucket of its own
    assert findings.buckets_per_step(cap0) == 8


@pytest.mark.live
def test_the_rank_branch_program_runs_with_find_unused_parameters(cpu_lock):
    # the lesson's remedy for a rank whose graph differs: DDP marks the parameters that got no
    # gradient as ready after each forward pass, and every rank finishes every step
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node"]
    command = [*launch, "2", str(record.BRANCH), "--steps", "3", "--find-unused"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    for rank in (0, 1):
        assert f"rank {rank}: step 2 done" in done.stdout
