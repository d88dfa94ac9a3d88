"""``workshop check`` on PyTorch DDP scripts (issue 57): recognised and run under torchrun (2 CPU
ranks, Gloo) by the same runner and hooks as Horovod scripts, judged on the same practices with
fixes in DDP's API, and DDP's own failures explained cause first. Each verdict against its near
miss: ``set_epoch`` against none, ``Join`` against uneven inputs without it."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from workshop import check
from workshop.check.ddp_failures import explain_ddp_error, mismatched_collective
from workshop.check.verdicts import PRACTICE_FIXES, style_of
from workshop.launch.torchrun import TAKES, script_launcher

SCRIPTS = Path(__file__).parent / "check_scripts"


def test_the_launcher_is_chosen_from_the_scripts_imports():
    assert script_launcher(SCRIPTS / "ddp_correct.py") == "ddp"
    assert script_launcher(SCRIPTS / "ddp_uneven.py") == "ddp"
    assert script_launcher(SCRIPTS / "torch_correct.py") == "horovod"
    # A Horovod script with torch.utils.data.distributed's sampler is still Horovod's.
    assert script_launcher(SCRIPTS / "torch_sum_by_hand.py") == "horovod"
    assert script_launcher(SCRIPTS / "torch_no_horovod.py") is None


def test_a_ddp_script_gets_its_fixes_in_ddps_api():
    ranks = [{"init": {"framework": "ddp"}, "horovod_imported": ["ddp"]}]
    assert style_of(ranks) == "ddp"
    assert "init_process_group" in PRACTICE_FIXES["init"]["ddp"]
    assert "set_epoch" in PRACTICE_FIXES["sharded"]["ddp"]
    assert "hvd." not in " ".join(fixes["ddp"] for fixes in PRACTICE_FIXES.values())


def test_ddps_own_errors_are_explained_with_their_line_and_fix():
    frame = 'File "/w/train.py", line 12, in <module>\n    sampler = DistributedSampler(data)\n'
    no_init = {
        "type": "ValueError",
        "message": "Default process group has not been initialized, please make sure to call "
        "init_process_group.",
        "traceback": f"Traceback (most recent call last):\n  {frame}ValueError: ...\n",
        "script": "/w/train.py",
    }
    found = explain_ddp_error(no_init)
    assert found.startswith("line 12 of train.py (sampler = DistributedSampler(data)): ")
    assert 'dist.init_process_group("gloo") first thing' in found
    unused = {
        "type": "RuntimeError",
        "message": "Expected to have finished reduction in the prior iteration before starting "
        "a new one.\nParameters which did not receive grad for rank 1: head.bias, head.weight",
    }
    found = explain_ddp_error(unused)
    assert "(head.bias, head.weight on rank 1)" in found
    assert "find_unused_parameters=True" in found
    # torch 2.14's text for init_process_group("nccl") on this CPU machine (a torchrun run)
    nccl = {"type": "ValueError", "message": "ProcessGroupNCCL is only supported with GPUs, "
            "no GPUs found!"}  # fmt: skip
    assert 'use init_process_group("gloo") on a CPU' in explain_ddp_error(nccl)
    # The near miss: another RuntimeError is not DDP's.
    assert explain_ddp_error({"type": "RuntimeError", "message": "shape mismatch"}) is None


def test_collectives_called_differently_are_compared_in_order():
    def calls(*shapes):
        return {"dist_calls": [{"op": "all_reduce", "shape": s, "where": "t.py:4: x"} for s in
                               shapes]}  # fmt: skip

    same = {0: calls([1], [3]), 1: calls([1], [3])}
    assert mismatched_collective(same) is None
    # The near miss: the second call's shape depends on the rank.
    differ = {0: calls([1], [3]), 1: calls([1], [4])}
    found = mismatched_collective(differ)
    assert found.startswith(
        "the ranks' collective number 2 does not match (rank 0 all_reduce of shape [3] at "
        "t.py:4: x; rank 1 all_reduce of shape [4] at t.py:4: x)"
    )


# -- live: each script checked once, on 2 torchrun ranks ----------------------------------
@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """``checked(script, *args, base_run=...)``: the report of one check, run once per module
    (with the time it took, printed for the report)."""
    reports: dict = {}

    def run(name: str, *args: str, base_run: bool = False) -> check.Report:
        key = (name, args, base_run)
        if key not in reports:
            folder = tmp_path_factory.mktemp(name.removesuffix(".py"))
            start = time.monotonic()
            reports[key] = check.check_script(
                SCRIPTS / name, args=args, cwd=folder, quiet=True, base_run=base_run,
                stall_s=6,
            )  # fmt: skip
            print(reports[key], f"\ncheck time {time.monotonic() - start:.1f} s")
        return reports[key]

    return run


@pytest.mark.live
def test_live_a_correct_ddp_script_passes_every_practice(checked, cpu_lock):
    report = checked("ddp_correct.py", base_run=True)
    assert report.exit_code == 0, report
    assert report.framework == "ddp" and report.error is None
    checks = report.checks
    assert checks["init"].evidence == (
        "init_process_group() ran on 2 of 2 ranks (torch.distributed, size 2)"
    )
    # DDP's construction broadcast set every parameter from rank 0 (each rank seeds apart).
    assert "each set from rank 0 by a broadcast" in checks["broadcast"].evidence
    assert "each the mean of the ranks' own gradients" in checks["averaged"].evidence
    assert "epochs: set_epoch calls" in checks["sharded"].evidence
    assert checks["rank0_checkpoint"].ok is True
    assert checks["lr_scaled"].evidence.startswith("linear scaling: lr 0.1 at np=2 vs 0.05")


@pytest.mark.live
def test_live_ddp_without_set_epoch_warns_with_ddps_fix(checked, cpu_lock):
    report = checked("ddp_correct.py", "--no-set-epoch", "--epochs", "3")
    sharded = report.checks["sharded"]
    assert report.exit_code == 0 and sharded.ok is None, report
    assert "set_epoch" in sharded.evidence
    assert sharded.fix == PRACTICE_FIXES["sharded"]["ddp"]


@pytest.mark.live
def test_live_uneven_inputs_crash_cause_first_and_join_covers_them(checked, cpu_lock):
    uneven = checked("ddp_uneven.py")
    assert uneven.exit_code == 2
    assert uneven.error.startswith("rank 1 left first: its script ended after 3 steps")
    assert (
        "What happened: uneven inputs: the ranks made different numbers of optimizer steps "
        "(rank 0 4, rank 1 3)" in uneven.error
    )
    assert "with model.join():" in uneven.error
    joined = checked("ddp_uneven.py", "--join")
    assert joined.exit_code == 0, joined
    averaged = joined.checks["averaged"].evidence
    assert "(rank 0 5, rank 1 3) and every rank called DDP's Join (with model.join():)" in (
        averaged
    )
    assert "covered rank 0's 2 extra steps" in averaged


@pytest.mark.live
def test_live_unused_parameters_are_named_and_childfailederror_is_the_consequence(
    checked, cpu_lock
):
    report = checked("ddp_unused_parameter.py")
    assert report.exit_code == 2
    assert "What happened: line 35 of ddp_unused_parameter.py" in report.error
    assert "(unused.bias, unused.weight on rank" in report.error
    assert "torchrun's ChildFailedError only says that a rank failed" in report.error


@pytest.mark.live
def test_live_a_missing_init_process_group_is_named(checked, cpu_lock):
    report = checked("ddp_correct.py", "--no-init")
    assert report.exit_code == 2
    assert "the script uses the process group before any" in report.error
    # the first use of the group, named with the learner's line
    assert (
        "What happened: line 29 of ddp_correct.py (torch.manual_seed(1000 + dist.get_rank()))"
        in report.error
    )
    assert "torchrun's ChildFailedError only says that a rank failed" in report.error
    assert TAKES not in report.error  # it is a DDP script: no "what check takes" message


@pytest.mark.live
def test_live_a_collective_only_rank_0_calls_is_named_as_a_stall(checked, cpu_lock):
    report = checked("ddp_rank0_collective.py")
    assert report.exit_code == 2 and report.stalled, report
    assert (
        "rank 0 waits in all_reduce '(no name)', submitted at ddp_rank0_collective.py:22: "
        "dist.all_reduce(loss.detach()); never submitted by rank 1" in report.error
    )
    assert "rank 1 waits in DDP forward" in report.error
    assert "if dist.get_rank() == 0: print(loss.item()" in report.error


@pytest.mark.live
def test_live_mismatched_shapes_are_named(checked, cpu_lock):
    report = checked("ddp_mismatched_shapes.py")
    assert report.exit_code == 2
    assert (
        "What happened: the ranks' collective number 1 does not match (rank 0 all_reduce of "
        "shape [3] at ddp_mismatched_shapes.py:12: dist.all_reduce(counts); rank 1 all_reduce "
        "of shape [4]" in report.error
    )
