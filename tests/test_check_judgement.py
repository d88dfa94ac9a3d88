"""``workshop check``'s judgement on the mistakes lesson 02 teaches, without Horovod: unequal
step counts, the fix under every FAIL and WARN, Horovod's stall warnings read into a stall, and
the plain words for a crash (the learner's own line, a cluster's data path)."""

from __future__ import annotations

import pytest

from workshop.check import failures, stalls, verdicts

A, B = ["a", 1.0], ["b", 2.0]


def steps(n):
    return [{"lr": [0.1], "grads": [A], "allreduces": 2 * k, "broadcasts": 2} for k in range(n)]


def rank(r, batches_per_epoch, *, status="ok", steps_made=None, started=None, size=25):
    """A rank that read its own shard in order each epoch: ``batches_per_epoch`` batches of
    ``size`` samples (the last one of an epoch may be a single sample)."""
    samples, batches = [], []
    for count in batches_per_epoch:
        for b in range(count):
            rows = [f"{r}-{b}-{i}" for i in range(size if b < count - 1 else 1)]
            samples += rows
            batches.append(len(rows))
    made = sum(batches_per_epoch) if steps_made is None else steps_made
    return {
        "env_rank": r,
        "init": {"calls": 1, "framework": "torch", "rank": r, "size": 2},
        "steps": steps(made),
        "steps_started": made if started is None else started,
        "samples": samples,
        "batches": batches,
        "status": status,
        "saves": [],
        "horovod_imported": ["torch"],
    }


# -- unequal step counts ---------------------------------------------------------------------
def test_unequal_shards_that_finished_fail_averaged_with_counts_and_the_fix():
    # x[rank::2] of 1,001 samples, batches of 25: 501 -> 21 batches, 500 -> 20.
    ranks = [rank(0, [21, 21], size=25), rank(1, [20, 20], size=25)]
    result = verdicts.judge(ranks)["averaged"]
    assert result.ok is False
    assert "(rank 0 42, rank 1 40)" in result.evidence
    assert "rank 0 21 steps per epoch (501 samples); rank 1 20 steps per epoch" in result.evidence
    assert result.fix == verdicts.EQUAL_STEPS_FIX["torch"]
    assert "DistributedSampler" in result.fix and "drop_last" in result.fix


def test_unequal_shards_found_in_a_crashed_run_whose_step_counts_look_equal():
    # What Horovod does: rank 1 finished its 40 steps; rank 0's step 41 (epoch 2, batch 20)
    # failed with "Horovod has been shut down": 40 completed steps each, the old "OK at each of
    # 40 steps". Epoch 1 is complete on both ranks: 21 batches against 20.
    ranks = [
        rank(0, [21, 20], status="error", steps_made=40, started=41),
        rank(1, [20, 20]),
    ]
    text = verdicts.unequal_steps(ranks)
    assert text is not None and "(rank 0 41, rank 1 40)" in text
    assert "rank 0 21 steps per epoch" in text and "rank 1 20 steps per epoch" in text
    # One epoch: rank 0's only epoch already has more batches than rank 1's complete one.
    one = [rank(0, [21], status="error", steps_made=20, started=21), rank(1, [20])]
    assert verdicts.unequal_steps(one) is not None


def test_equal_shards_are_not_called_unequal_near_misses():
    # Stopped (a stall, a timeout) one batch apart in the last, incomplete epoch: not unequal.
    stopped = [rank(0, [20, 7], status="stopped"), rank(1, [20, 6], status="stopped")]
    assert verdicts.unequal_steps(stopped) is None
    # Finished with the same counts.
    assert verdicts.unequal_steps([rank(0, [20, 20]), rank(1, [20, 20])]) is None
    # A crashed rank whose complete epochs are irregular (independent shuffles of the whole
    # data, cut at random where a sample repeats) is not compared epoch by epoch.
    irregular = [rank(0, [9, 14, 3], status="error"), rank(1, [12, 12])]
    assert verdicts.unequal_steps(irregular) is None


# -- a fix under every FAIL and WARN ---------------------------------------------------------
@pytest.mark.parametrize("style", verdicts.STYLES)
def test_every_practice_has_a_fix_in_each_style(style):
    for name in verdicts.CHECK_NAMES:
        assert verdicts.PRACTICE_FIXES[name][style]
    assert verdicts.EQUAL_STEPS_FIX[style]


def test_judge_gives_every_fail_and_warn_the_fix_of_the_scripts_own_api():
    bare = {"env_rank": 0, "init": None, "horovod_imported": [], "steps": [], "samples": [],
            "saves": []}  # fmt: skip
    torch_ranks = [bare, bare | {"env_rank": 1}]
    checks = verdicts.judge(torch_ranks)
    assert all(c.fix for c in checks.values() if c.ok is not True)
    assert checks["init"].fix == verdicts.PRACTICE_FIXES["init"]["torch"]
    keras = [dict(r, apis=["keras_fit"], horovod_imported=["tensorflow"]) for r in torch_ranks]
    assert verdicts.judge(keras)["broadcast"].fix == verdicts.PRACTICE_FIXES["broadcast"]["keras"]
    assert "BroadcastGlobalVariablesCallback" in verdicts.PRACTICE_FIXES["broadcast"]["keras"]
    tape = [dict(r, horovod_imported=["tensorflow"]) for r in torch_ranks]
    assert verdicts.judge(tape)["averaged"].fix == verdicts.PRACTICE_FIXES["averaged"]["tf"]
    assert verdicts.style_of(tape) == "tf" and verdicts.style_of(torch_ranks) == "torch"
    # An OK carries no fix.
    assert verdicts.with_fix(verdicts.Check(True, "fine"), "init", "torch").fix == ""


# -- stalls ----------------------------------------------------------------------------------
ACC = {"op": "allreduce", "name": "test_acc", "where": "t.py:33: acc = hvd.allreduce(acc, "
       "name='test_acc')", "age_s": 23.0}  # fmt: skip
GRADS = [{"op": "allreduce", "name": n, "where": "t.py:28: loss.backward()", "age_s": 22.0}
         for n in ("0.weight", "0.bias", "2.weight", "2.bias")]  # fmt: skip


def progress(counters, pending):
    return {"counters": counters, "pending": pending}


def test_a_stall_is_named_when_nothing_moves_and_every_rank_waits_for_another():
    watch = stalls.StallWatch(stall_s=20)
    stuck = {0: progress("8 8 128 32 2 34", [ACC]), 1: progress("9 8 144 36 2 36", GRADS)}
    assert watch.feed(stuck, now=100.0) is None  # first sight of these counters
    assert watch.feed(stuck, now=119.0) is None  # frozen 19 s
    stall = watch.feed(stuck, now=120.0)
    assert stall is not None and stall.frozen_s == 20.0 and stall.waited_s == 23.0
    assert stall.pending[0] == [ACC]


def test_slow_ranks_are_not_stalls_near_misses():
    # Rank 0 evaluates for 25 s (no collective in flight) while rank 1 waits in allreduce.
    watch = stalls.StallWatch(stall_s=20)
    evaluating = {0: progress("8 8 128 32 2 34", []), 1: progress("9 8 144 36 2 36", GRADS)}
    assert [watch.feed(evaluating, now=100.0 + t) for t in (0, 10, 25, 40)] == [None] * 4
    # Both wait 40 s in the same collectives (a slow allreduce of a large model): not missing
    # a rank.
    same = {0: progress("1", GRADS), 1: progress("2", GRADS)}
    watch = stalls.StallWatch(stall_s=20)
    assert [watch.feed(same, now=100.0 + t) for t in (0, 40)] == [None, None]
    # Progress between readings restarts the clock.
    watch = stalls.StallWatch(stall_s=20)
    for t in range(0, 60, 5):
        moving = {0: progress(f"{t}", [ACC]), 1: progress("9", GRADS)}
        assert watch.feed(moving, now=100.0 + t) is None
    # A rank that has not written its progress yet.
    assert stalls.StallWatch(stall_s=0).feed({0: None, 1: progress("1", GRADS)}, 1.0) is None


def test_stall_message_names_the_collective_the_ranks_the_lines_and_the_fix():
    stall = stalls.Stall({0: [ACC], 1: GRADS}, 20.0)
    text = stalls.stall_message(stall, {0: {"pending": [ACC]}, 1: {"pending": GRADS}}, 2, "torch")
    assert text.startswith("the ranks stalled: for 20 s no rank made progress")
    assert "(the oldest had waited 23 s)" in text
    assert (
        "rank 0 waits in allreduce 'test_acc', submitted at t.py:33: acc = hvd.allreduce(acc, "
        "name='test_acc'); never submitted by rank 1" in text
    )
    assert (
        "rank 1 waits in allreduce of 4 tensors (0.weight, 0.bias, 2.weight, 2.bias), "
        "submitted at t.py:28: loss.backward(); never submitted by rank 0" in text
    )
    assert "only some ranks take (if hvd.rank() == 0" in text
    assert "Fix: call it on every rank" in text


def test_a_stall_of_names_that_differ_by_rank_says_so():
    line = "t.py:9: hvd.allreduce(a, name=f'acc{hvd.rank()}')"
    pending = {r: [{"op": "allreduce", "name": f"acc{r}", "where": line, "age_s": 21.0}]
               for r in (0, 1)}  # fmt: skip
    stall = stalls.Stall(pending, 20.0)
    text = stalls.stall_message(stall, {r: {"pending": p} for r, p in pending.items()}, 2, "tf")
    assert "different names (a name built from hvd.rank()?)" in text
    assert "rank 0 waits in allreduce 'acc0'" in text and "never submitted by rank 1" in text


# -- crashes in plain words ------------------------------------------------------------------
def test_a_cuda_call_names_the_learners_line_not_torchs():
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "/home/me/train.py", line 12, in <module>\n'
        "    torch.cuda.set_device(hvd.local_rank())\n"
        '  File "/venv/lib/python3.11/site-packages/torch/cuda/__init__.py", line 591, in '
        "set_device\n    torch._C._cuda_setDevice(device)\n"
    )
    error = {"type": "AssertionError", "message": "Torch not compiled with CUDA enabled",
             "traceback": traceback, "script": "/home/me/train.py"}  # fmt: skip
    text = failures.explain_crash(error)
    assert "line 12 of train.py (torch.cuda.set_device(hvd.local_rank()))" in text
    assert "__init__.py" not in text
    # Without the runner's script path: the innermost frame outside the libraries.
    assert "line 12 of train.py" in failures.explain_crash(error | {"script": None})


def test_a_cluster_data_path_is_named_with_what_to_do():
    traceback = (
        '  File "/home/me/train.py", line 30, in main\n'
        "    train = datasets.MNIST('/soft/datascience/MNIST-datasets', train=True)\n"
        '  File "/venv/lib/python3.11/site-packages/torchvision/datasets/mnist.py", line 104\n'
        "    raise RuntimeError('Dataset not found. You can use download=True to download it')\n"
    )
    error = {"type": "RuntimeError", "traceback": traceback, "script": "/home/me/train.py",
             "message": "Dataset not found. You can use download=True to download it"}  # fmt: skip
    text = failures.explain_crash(error)
    assert "line 30 of train.py" in text
    assert "reads its data from /soft/datascience/MNIST-datasets, which does not exist" in text
    assert "download=True" in text and "./data" in text
    # Near miss: a folder that exists is not this problem.
    assert failures.explain_crash(error | {"traceback": traceback.replace(
        "/soft/datascience/MNIST-datasets", "/tmp")}) is None  # fmt: skip


def test_horovod_shut_down_is_explained_by_the_rank_that_finished():
    crashed = rank(0, [21, 20], status="error", steps_made=40, started=41)
    crashed["error"] = {
        "type": "HorovodInternalError",
        "message": "Horovod has been shut down. This was caused by an exception on one of the "
        "ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the "
        "ranks finished execution.",
        "traceback": '  File "/w/unequal.py", line 24, in <module>\n    optimizer.step()\n',
        "script": "/w/unequal.py",
    }
    text = failures.explain_shutdown({0: crashed, 1: rank(1, [20, 20])}, 0)
    assert text.startswith("rank 1 finished (rank 1 after 40 steps) and shut Horovod down")
    assert "at line 24 of unequal.py (optimizer.step()), in its step 41" in text
    assert "rank 0 21 steps per epoch" in text
    # Near miss: no other rank finished (they all crashed): not this explanation.
    other = rank(1, [20, 20], status="error")
    assert failures.explain_shutdown({0: crashed, 1: other}, 0) is None
