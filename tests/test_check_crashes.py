"""Crash reports a learner can act on (`workshop check`): the learner's own line first, the cause
and the fix of each Horovod error a script can cause, library and checker frames folded away
(kept in --verbose and --json), and the practices that ran before the crash judged on what ran.
Each error from a real 2-rank run (tests/check_scripts/torch_horovod_errors.py), against its
near miss: the same script without the error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from workshop import check
from workshop.check.launch import _before_first_step
from workshop.readers.horovod_errors import explain_horovod_error
from workshop.readers.tracebacks import fold

SCRIPT = Path(__file__).parent / "check_scripts" / "torch_horovod_errors.py"

CHAINED = """\
Traceback (most recent call last):
  File "/v/lib/python3.11/site-packages/horovod/torch/mpi_ops.py", line 1287, in synchronize
    mpi_lib.horovod_torch_wait_and_clear(handle)
RuntimeError: Mismatched BROADCAST root ranks

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/w/train.py", line 34, in <module>
    hvd.broadcast_parameters(model.state_dict(), root_rank=hvd.rank())
  File "/v/lib/python3.11/site-packages/horovod/torch/functions.py", line 58, in broadcast_p
    synchronize(handle)
  File "/r/workshop/check/hooks_torch.py", line 240, in wrapper
    return original(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^^^^^^^^
horovod.common.exceptions.HorovodInternalError: Mismatched BROADCAST root ranks
"""


def test_fold_keeps_the_learners_frames_and_drops_a_library_only_chained_traceback():
    folded = fold(CHAINED, "/w/train.py")
    assert folded.splitlines() == [
        "Traceback (most recent call last):",
        '  File "/w/train.py", line 34, in <module>',
        "    hvd.broadcast_parameters(model.state_dict(), root_rank=hvd.rank())",
        "  [2 frames of libraries and the checker folded: --verbose shows them]",
        "horovod.common.exceptions.HorovodInternalError: Mismatched BROADCAST root ranks",
    ]
    # near miss: a traceback of the learner's frames only is left as it is
    own = 'Traceback (most recent call last):\n  File "/w/train.py", line 3, in f\n    g()\nE: x'
    assert fold(own, "/w/train.py") == own


# Horovod 0.28.1's messages, as the live runs below print them.
MESSAGES = {
    "root_rank": "Mismatched BROADCAST root ranks: One rank specified root rank 0, but another "
    "rank specified root rank 1.",
    "shape": "Mismatched ALLREDUCE tensor shapes: One rank sent a tensor of shape [2], but "
    "another rank sent a tensor of shape [1].",
    "dtype": "Mismatched data types: One rank had type float32, but another rank had type "
    "float64.",
    "op": "Mismatched reduction operation: One rank sent reduction op 0, but another rank sent "
    "reduction op 1.",
    "passes": "Gradients were computed more than backward_passes_per_step times before call to "
    "step(). Increase backward_passes_per_step to accumulate gradients locally.",
    "duplicate": "Requested to allreduce, allgather, or broadcast a tensor with the same name as "
    "another tensor that is currently being processed.  If you want to request another tensor, "
    "use a different tensor name.",
    "no_init": "Horovod has not been initialized; use hvd.init().",
}
# The words of each cause and fix.
EXPLAINED = {
    "root_rank": ("different root ranks (0 on one rank, 1 on another)", "root_rank=0 on every"),
    "shape": ("different shapes ([2] and [1])", "hvd.allgather(tensor)"),
    "dtype": ("different data types (float32 on one rank, float64 on another)", "tensor.float()"),
    "op": ("op=hvd.Average on one rank, hvd.Sum on another", "with the same op"),
    "passes": ("backward() more than once before optimizer.step()", "backward_passes_per_step=N"),
    "duplicate": ("a name that is still in flight", "hvd.synchronize(handle)"),
    "no_init": ("before hvd.init() ran", "hvd.init() first thing"),
}


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_each_horovod_error_gets_its_cause_and_fix(kind):
    text = explain_horovod_error({"message": MESSAGES[kind], "traceback": ""}, "torch")
    cause, fix = EXPLAINED[kind]
    assert cause in text and "Fix: " in text and fix in text.split("Fix: ")[1]


def test_the_fix_speaks_the_scripts_api_and_other_errors_are_left_alone():
    keras = explain_horovod_error({"message": MESSAGES["root_rank"]}, "keras")
    assert "BroadcastGlobalVariablesCallback(0)" in keras
    assert "tf.cast(tensor, tf.float32)" in explain_horovod_error(
        {"message": MESSAGES["dtype"]}, "tf"
    )
    # near misses: an error of the script's own, and a Horovod shutdown (explained elsewhere)
    assert explain_horovod_error({"message": "batch 3 is corrupt"}) is None
    assert explain_horovod_error({"message": "Horovod has been shut down. This was ..."}) is None


def _rank(rank: int, broadcasts: int, message: str) -> dict:
    return {
        "env_rank": rank,
        "init": {"calls": 1, "framework": "torch", "rank": rank, "size": 2},
        "steps": [],
        "broadcasts": broadcasts,
        "pending": [],
        "status": "error",
        "error": {"message": message},
    }


def test_a_crash_before_the_first_step_judges_what_ran():
    ranks = {r: _rank(r, 2, MESSAGES["passes"]) for r in (0, 1)}
    checks = _before_first_step(ranks, None)
    assert checks["init"].ok is True and checks["init"].partial
    assert checks["broadcast"].ok is True and checks["broadcast"].partial
    assert checks["broadcast"].evidence.startswith("Horovod broadcast 2 tensors on every rank")
    assert checks["averaged"].ok is None and "not judged" in checks["averaged"].evidence
    # near miss: the broadcast itself failed (mismatched root ranks): not called OK
    failed = {r: _rank(r, 2, MESSAGES["root_rank"]) for r in (0, 1)}
    assert _before_first_step(failed, None)["broadcast"].ok is None
    # and a rank that broadcast nothing: not judged
    none = {0: _rank(0, 2, "x"), 1: _rank(1, 0, "x")}
    assert _before_first_step(none, None)["broadcast"].ok is None


# ---------------------------------------------------------------------------------------------
# Live: each error from a real 2-rank run (Gloo)

# The script's line each error points to.
LINES = {
    "root_rank": "hvd.broadcast_parameters(model.state_dict(), root_rank=root)",
    "shape": 'hvd.allreduce(loss.repeat(1 + hvd.rank()), name="loss")',
    "dtype": 'hvd.allreduce(loss.double() if hvd.rank() == 1 else loss, name="loss")',
    "op": 'hvd.allreduce(loss, name="loss", op=hvd.Sum if hvd.rank() == 1 else hvd.Average)',
    "passes": "model(x[16:]).sum().backward()",
    "duplicate": 'second = hvd.allreduce_async(loss * 2, name="loss")',
    "no_init": 'print("rank", hvd.rank())',
}


def _check(kind: str, tmp_path) -> check.Report:
    report = check.check_script(
        SCRIPT, args=("--error", kind), cwd=tmp_path, quiet=True, base_run=False
    )
    print(report)
    return report


@pytest.mark.live
@pytest.mark.parametrize("kind", sorted(LINES))
def test_live_each_horovod_error_is_named_with_its_line_cause_and_fix(
    kind, tmp_path, cpu_lock, horovod_ready
):
    report = _check(kind, tmp_path)
    assert report.exit_code == 2
    first, at, what = report.error.splitlines()[:3]
    assert first.startswith("the script crashed on rank ") and MESSAGES[kind][:40] in first
    assert at.startswith("  at line ") and at.endswith(
        f"of torch_horovod_errors.py ({LINES[kind]})"
    )
    cause, fix = EXPLAINED[kind]
    # which rank reports first decides the order of the two values: the words before them
    assert what.startswith("What happened: ") and cause.split(" (")[0] in what and fix in what
    # library and checker frames are folded in the text, kept in the full traceback
    assert "site-packages" not in report.error and "workshop/check/" not in report.error
    assert "frames of libraries and the checker folded" in report.error or kind == "no_init"
    assert "site-packages" in report.traceback
    if kind != "no_init":  # hvd.init() ran before the error: judged on what ran
        assert report.checks["init"].ok is True and report.checks["init"].partial


@pytest.mark.live
def test_live_near_miss_the_same_script_without_an_error(tmp_path, cpu_lock, horovod_ready):
    report = _check("none", tmp_path)
    assert report.exit_code == 0 and report.error is None and report.traceback == ""
    assert report.checks["broadcast"].ok is True and not report.checks["broadcast"].partial


@pytest.mark.live
def test_live_verbose_and_json_keep_the_full_traceback(tmp_path, cpu_lock, horovod_ready):
    argv = [sys.executable, "-m", "workshop.cli", "check", str(SCRIPT), "--no-base-run"]
    verbose = subprocess.run(
        [*argv, "--verbose", "--", "--error", "passes"], capture_output=True, text=True,
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert verbose.returncode == 2, verbose.stderr
    short, full = verbose.stdout.split("full traceback of the rank that crashed first:")
    assert "site-packages" not in short and "horovod/torch/optimizer.py" in full
    as_json = subprocess.run(
        [*argv, "--json", "--", "--error", "passes"], capture_output=True, text=True,
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    found = json.loads(as_json.stdout)
    assert "horovod/torch/optimizer.py" in found["traceback"]
    assert found["checks"]["init"] == {
        "ok": True,
        "evidence": "hvd.init() ran on 2 of 2 ranks (horovod.torch, size 2)",
        "partial": True,
    }


def _shut_down(rank: int) -> dict:
    message = "Horovod has been shut down. This was caused by an exception on one of the ranks"
    return {"status": "error", "error": {"message": message, "traceback": ""}, "steps": []}


def test_horovod_shut_down_names_the_rank_that_left_first():
    from workshop.check.failures import explain_shutdown

    # rank 1 left with sys.exit(3)
    exited = {0: _shut_down(0), 1: {"status": "exit", "exit_code": 3, "steps": []}}
    text = explain_shutdown(exited, 0, 2)
    assert text.startswith("rank 1 left first (sys.exit: rank 1 status 3), and Horovod shut")
    # rank 1 left no observations (killed)
    text = explain_shutdown({0: _shut_down(0)}, 0, 2)
    assert text.startswith("rank 1 ended without reporting (killed, out of memory")
    # near miss: every rank failed with the shutdown (no rank left first that we can name)
    assert explain_shutdown({0: _shut_down(0), 1: _shut_down(1)}, 0, 2) is None


@pytest.mark.live
def test_live_horovod_shut_down_after_a_rank_exited(tmp_path, cpu_lock, horovod_ready):
    report = _check("exit", tmp_path)
    assert report.exit_code == 2
    # the cause first (issue 49): rank 1's exit with its line; rank 0's shutdown follows it
    assert report.error.startswith(
        "the script exited with status 3 on rank 1 (sys.exit) at line 46 of "
        "torch_horovod_errors.py (sys.exit(3)); then rank 0 failed at line 59"
    )
    assert "(HorovodInternalError: Horovod has been shut down" in report.error
    assert "What happened: rank 1 left first (sys.exit: rank 1 status 3)" in report.error
    assert 'at line 59 of torch_horovod_errors.py (hvd.allreduce(loss, name="loss"))' in (
        report.error
    )
