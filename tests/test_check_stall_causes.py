"""Stall causes from what the ranks did: a Keras callback that only rank 0 has (its collective
was submitted by the callback, the other rank's by the optimizer, both from one `model.fit`
line) against its near miss, names that really differ by rank."""

from __future__ import annotations

from pathlib import Path

import pytest

from workshop import check
from workshop.check import stalls
from workshop.check.observe import Recorder

SCRIPT = Path(__file__).parent / "check_scripts" / "tf_keras_rank0_callback.py"
FIT = "t.py:36: model.fit(x, y, epochs=3, callbacks=callbacks)"


def _item(name, via, where=FIT):
    return {"op": "allreduce", "name": name, "where": where, "via": via, "age_s": 11.0}


def _message(pending: dict) -> str:
    stall = stalls.Stall(pending, 10.0)
    return stalls.stall_message(stall, {r: {"pending": p} for r, p in pending.items()}, 2, "keras")


def test_a_rank_0_only_callback_is_named_not_different_names():
    # both ranks wait in collectives from the same model.fit line, with names of their own:
    # what submitted them tells them apart
    pending = {
        0: [_item(None, "callback MetricAverageCallback")],
        1: [_item("HorovodAllreduce_grads_0", "hvd.DistributedOptimizer")],
    }
    text = _message(pending)
    assert "rank 0 waits in allreduce '(no name)', submitted at " + FIT in text
    assert "by callback MetricAverageCallback; never submitted by rank 1" in text
    assert (
        "Likely cause: a Keras callback that only rank 0 has: rank 0 waits in the collective "
        "of MetricAverageCallback, rank 1 in other collectives (of hvd.DistributedOptimizer: "
        "the next step)"
    ) in text
    assert "hvd.callbacks.MetricAverageCallback(), ...] on every rank" in text
    assert "different names" not in text


def test_near_miss_names_that_really_differ_by_rank():
    line = "t.py:9: hvd.allreduce(a, name=f'acc{hvd.rank()}')"
    pending = {r: [_item(f"acc{r}", None, line)] for r in (0, 1)}
    text = _message(pending)
    assert "different names (a name built from hvd.rank()?)" in text
    assert "Keras callback" not in text


def test_names_that_differ_but_not_by_rank_are_not_called_rank_names():
    # one line, a name each, but not the rank's number in it: not "a name built from
    # hvd.rank()" (the branch-only cause is the general one)
    pending = {0: [_item("test_acc", None)], 1: [_item("grads_0", None)]}
    text = _message(pending)
    assert "different names" not in text and "only some ranks take" in text


# A callback and Horovod's op as if from library files (the walk stops at the script's frames).
LIBRARY = """
class Callback:  # keras.callbacks.Callback: the recorder knows it by its name
    pass


class MetricAverageCallback(Callback):
    def on_epoch_end(self, recorder):
        return horovod_op(recorder)


def horovod_op(recorder):  # the hook's frame
    return recorder.via()
"""


def _library(path: str) -> dict:
    found: dict = {}
    exec(compile(LIBRARY, path, "exec"), found)
    return found


def test_via_names_the_callback_or_horovods_wrapper_below_the_script(tmp_path):
    recorder = Recorder(tmp_path, 0, 2)
    recorder.script = __file__  # this test is "the script": the walk stops at its frame
    keras = _library("/venv/site-packages/tf_keras/callbacks.py")
    callback = keras["MetricAverageCallback"]()
    assert callback.on_epoch_end(recorder) == "callback MetricAverageCallback"
    # Horovod's optimizer wrapper, by its file
    optimizer = _library("/venv/site-packages/horovod/torch/optimizer.py")
    assert optimizer["horovod_op"](recorder) == "hvd.DistributedOptimizer"
    # near miss: a library frame that is neither: None (the script called Horovod itself)
    other = _library("/venv/site-packages/horovod/torch/mpi_ops.py")
    assert other["horovod_op"](recorder) is None


@pytest.mark.live
def test_live_a_rank_0_only_keras_callback_stall_is_named(tmp_path, cpu_lock, horovod_ready):
    # a 10 s stall timeout keeps the test short (the default is 20 s)
    report = check.check_script(SCRIPT, cwd=tmp_path, quiet=True, base_run=False, stall_s=10)
    print(report)
    assert report.exit_code == 2 and report.stalled
    assert "by callback MetricAverageCallback; never submitted by rank 1" in report.error
    assert "by hvd.DistributedOptimizer; never submitted by rank 0" in report.error
    assert "Likely cause: a Keras callback that only rank 0 has" in report.error
    assert "different names" not in report.error


@pytest.mark.live
def test_live_near_miss_the_callback_on_every_rank_runs_through(tmp_path, cpu_lock, horovod_ready):
    report = check.check_script(
        SCRIPT, args=("--everywhere",), cwd=tmp_path, quiet=True, base_run=False, stall_s=10
    )
    print(report)
    assert not report.stalled and report.error is None
    assert report.checks["averaged"].ok is True
