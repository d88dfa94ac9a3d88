"""``workshop check`` and ``hvd.join()``: uneven shards whose ranks join at the end of each epoch
(Horovod's way to train on uneven data) are judged correct, and the evidence says what join
covered; the same unequal step counts without join are still a FAIL, word for word as before.
The hooks that record each join, and one live run of tests/check_scripts/torch_uneven_join.py.
"""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from workshop.check import verdicts
from workshop.check.observe import Recorder

SCRIPTS = Path(__file__).parent / "check_scripts"
SHARED = ["shared", 1.0]


def observed(r, batches_per_epoch, *, joins=(), status="ok", grads=None, size=25):
    """A rank that read its own shard in order each epoch (``batches_per_epoch`` full batches
    of ``size``) and called ``hvd.join`` after the steps in ``joins``. Every step's gradient is
    the same on every rank (``SHARED``) unless ``grads`` gives one per step."""
    samples, batches = [], []
    for count in batches_per_epoch:
        for b in range(count):
            samples += [f"{r}-{b}-{i}" for i in range(size)]
            batches.append(size)
    made = sum(batches_per_epoch)
    steps = [
        {"lr": [0.1], "grads": [grads[k] if grads else SHARED], "allreduces": 2 * (k + 1),
         "broadcasts": 2}
        for k in range(made)
    ]  # fmt: skip
    return {
        "env_rank": r,
        "init": {"calls": 1, "framework": "torch", "rank": r, "size": 2},
        "steps": steps,
        "steps_started": made,
        "samples": samples,
        "batches": batches,
        "status": status,
        "saves": [],
        "horovod_imported": ["torch"],
        "joins": [
            {"steps": k, "started": k, "samples": k * size, "epoch": None, "last_rank": 0}
            for k in joins
        ],
    }


def per_epoch_join():
    """Rank 0 24 steps per epoch, rank 1 16, both join at the end of each of 2 epochs."""
    return [observed(0, [24, 24], joins=[24, 48]), observed(1, [16, 16], joins=[16, 32])]


# -- the judgement ---------------------------------------------------------------------------
def test_uneven_shards_that_join_each_epoch_are_averaged_and_say_what_join_covered():
    ranks = per_epoch_join()
    assert verdicts.unequal_steps(ranks) is None
    averaged = verdicts.judge(ranks)["averaged"]
    assert averaged.ok is True, averaged.evidence
    assert "gradients identical on all 2 ranks at each of the 32 steps they made together" in (
        averaged.evidence
    )
    assert (
        "the ranks made different numbers of optimizer steps (rank 0 48, rank 1 32) and every "
        "rank called hvd.join at the end of each of its 2 epochs: rank 1 made 32 steps and "
        "joined; hvd.join covered rank 0's 16 extra steps (8 in each of 2 epochs)"
    ) in averaged.evidence
    assert not averaged.fix
    assert "parameters differ" not in averaged.evidence
    # The joined rank skipped rank 0's extra steps: when the final parameters differ, say so.
    ranks[0]["final_params"], ranks[1]["final_params"] = [["p0", 1.0]], [["p1", 1.0]]
    averaged = verdicts.judge(ranks)["averaged"]
    assert averaged.ok is True
    assert "so the parameters differ between ranks at the end" in averaged.evidence
    assert "root_rank=hvd.join()" in averaged.evidence


def test_unequal_steps_without_join_fail_exactly_as_before():
    joined = per_epoch_join()
    bare = [{k: v for k, v in r.items() if k != "joins"} for r in joined]
    no_calls = [r | {"joins": []} for r in joined]
    expected = (
        "the ranks made different numbers of optimizer steps (rank 0 48, rank 1 32): per epoch "
        "rank 0 24 steps per epoch (600 samples); rank 1 16 steps per epoch (400 samples), "
        "unequal shards; Horovod pairs collectives by name, so one rank's extra step is "
        "averaged with another rank's next step, and at the end a rank waits for ranks that "
        "have finished (a crash: 'Horovod has been shut down', or a hang)"
    )
    for ranks in (bare, no_calls):
        averaged = verdicts.judge(ranks)["averaged"]
        assert averaged.ok is False
        assert averaged.evidence == expected == verdicts.unequal_steps(ranks)
        assert averaged.fix == verdicts.EQUAL_STEPS_FIX["torch"]


def test_one_join_after_the_last_step_covers_the_whole_difference():
    # A finished run proves every collective found its partners; the join after the last step
    # covered rank 0's 16 last steps (rank 0's step 25 was paired with rank 1's epoch-2 step 9).
    ranks = [observed(0, [24, 24], joins=[48]), observed(1, [16, 16], joins=[32])]
    averaged = verdicts.judge(ranks)["averaged"]
    assert averaged.ok is True, averaged.evidence
    assert "every rank called hvd.join once, after its last step: rank 1 made 32 steps" in (
        averaged.evidence
    )
    assert "hvd.join covered rank 0's 16 extra steps, averaged with zeros" in averaged.evidence


@pytest.mark.parametrize(
    "ranks",
    [
        # only rank 1 joined: nothing made up for rank 0's extra steps
        [observed(0, [24, 24]), observed(1, [16, 16], joins=[16, 32])],
        # rank 1 joined after epoch 1 only: epoch 2's 8 extra steps of rank 0 are not covered
        [observed(0, [24, 24], joins=[24]), observed(1, [16, 16], joins=[16])],
        # different numbers of joins (a run like this could not have finished well)
        [observed(0, [24, 24], joins=[24, 48]), observed(1, [16, 16], joins=[32])],
        # a crashed run: epoch 1 ended in a join on rank 0 only
        [observed(0, [24, 10], joins=[24], status="stopped"),
         observed(1, [16, 10], status="error")],
    ],
    ids=["one-rank-joined", "steps-after-the-last-join", "join-counts-differ", "crashed"],
)  # fmt: skip
def test_joins_that_do_not_cover_the_difference_still_fail(ranks):
    assert verdicts.join_cover(ranks) is None
    averaged = verdicts.judge(ranks)["averaged"]
    assert averaged.ok is False and "different numbers of optimizer steps" in averaged.evidence
    assert averaged.fix == verdicts.EQUAL_STEPS_FIX["torch"]


def test_a_crashed_run_with_joins_is_not_blamed_on_its_joined_epochs():
    # Rank 1 raised in epoch 2 (its 10th batch); epoch 1 ended in a join on both ranks, so its
    # 24 against 16 batches are not unequal shards. The same epochs without joins are.
    joined = [
        observed(0, [24, 10], joins=[24], status="stopped"),
        observed(1, [16, 10], joins=[16], status="error"),
    ]
    assert verdicts.unequal_steps(joined) is None
    bare = [r | {"joins": []} for r in joined]
    assert "rank 0 24 steps per epoch" in verdicts.unequal_steps(bare)


def test_equal_steps_with_joins_judge_as_before():
    ranks = [observed(0, [20, 20], joins=[20, 40]), observed(1, [20, 20], joins=[20, 40])]
    assert verdicts.join_cover(ranks) is None
    averaged = verdicts.judge(ranks)["averaged"]
    assert averaged.ok is True
    assert averaged.evidence == (
        "gradients identical on all 2 ranks at each of 40 steps (1 tensors; 80 tensors allreduced)"
    )


def test_gradients_are_compared_where_horovod_paired_them():
    # Rank 0's extra steps (averaged with zeros) have gradients of their own; the paired steps
    # are step k of each epoch on both ranks, not step k of the run.
    own = {k: [f"own-{k}", 0.5] for k in (*range(16, 24), *range(40, 48))}
    grads0 = [own.get(k, [f"pair-{k if k < 24 else k - 8}", 1.0]) for k in range(48)]
    grads1 = [[f"pair-{k}", 1.0] for k in range(32)]
    ranks = [
        observed(0, [24, 24], joins=[24, 48], grads=grads0),
        observed(1, [16, 16], joins=[16, 32], grads=grads1),
    ]
    assert verdicts.paired_steps(ranks)[15:17] == [(15, 15), (24, 16)]
    assert len(verdicts.paired_steps(ranks)) == 32
    assert verdicts.judge(ranks)["averaged"].ok is True
    # A paired step whose gradients differ is still found (epoch 2's first step).
    ranks[1]["steps"][16]["grads"] = [["rank-1-only", 3.0]]
    averaged = verdicts.judge(ranks)["averaged"]
    assert averaged.ok is False and averaged.evidence.startswith("step 17: gradients differ")
    # Without joins, step k of the run on each rank, as before.
    bare = [observed(0, [20]), observed(1, [20])]
    assert verdicts.paired_steps(bare) == [(k, k) for k in range(20)]


# -- the hooks -------------------------------------------------------------------------------
def test_recorder_keeps_each_join_with_the_steps_before_it(tmp_path):
    recorder = Recorder(tmp_path, 1, 2)
    recorder.step([0.1], [], None)
    recorder.batch(["a", "b"])
    recorder.sampler_pass(True, 2, 1, 3)
    entry = recorder.join_called((__file__, 1))
    assert entry["last_rank"] is None and entry["waited_s"] is None
    recorder.join_returned(entry, 0)
    (found,) = recorder.to_dict("ok", 0)["joins"]
    assert found["steps"] == 1 and found["samples"] == 2 and found["epoch"] == 3
    assert found["last_rank"] == 0 and found["waited_s"] >= 0
    assert found["where"].startswith("test_check_join.py:1")


def test_torch_hook_records_hvd_join_and_keeps_it_in_flight_while_it_waits(tmp_path):
    recorder = Recorder(tmp_path, 0, 2)
    recorder.script = __file__
    seen = {}

    def join(device=-1):
        seen["pending"] = [p["op"] for p in recorder.to_dict("ok", 0)["pending"]]
        return 1

    mpi_ops = types.SimpleNamespace(join=join, synchronize=lambda handle: None)
    from workshop.check.hooks_torch import install_horovod_torch_ops

    install_horovod_torch_ops(recorder, mpi_ops)
    recorder.step([0.1], [], None)
    assert mpi_ops.join() == 1
    assert seen["pending"] == ["join"]
    data = recorder.to_dict("ok", 0)
    assert data["pending"] == []
    assert [(j["steps"], j["last_rank"]) for j in data["joins"]] == [(1, 1)]
    assert data["joins"][0]["where"].startswith("test_check_join.py:")
    assert data["hook_errors"] == []


def test_tensorflow_hook_records_hvd_join_eagerly_and_in_a_graph(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from workshop.check.hooks_tf import _watch_join

    recorder = Recorder(tmp_path, 0, 2)
    library = types.SimpleNamespace(horovod_join=lambda: tf.constant(1, dtype=tf.int32))
    _watch_join(recorder, tf, library)
    assert int(library.horovod_join()) == 1
    graph = tf.function(lambda: library.horovod_join())
    graph()
    graph()
    joins = recorder.to_dict("ok", 0)["joins"]
    assert [j["last_rank"] for j in joins] == [1, 1, 1]
    assert recorder.to_dict("ok", 0)["pending"] == [] and recorder.hook_errors == []


# -- live ------------------------------------------------------------------------------------
@pytest.mark.live
def test_uneven_shards_with_join_pass_workshop_check(tmp_path, cpu_lock, horovod_ready):
    from workshop import check

    report = check.check_script(SCRIPTS / "torch_uneven_join.py", cwd=tmp_path, quiet=True)
    print(report)
    assert report.exit_code == 0 and report.error is None, report.text()
    # every practice holds; the script saves no checkpoint, so that one is a warning
    assert all(c.ok is not False for c in report.checks.values()), report.text()
    assert report.checks["averaged"].ok is True and report.checks["rank0_checkpoint"].ok is None
    averaged = report.checks["averaged"].evidence
    assert "(rank 0 48, rank 1 32)" in averaged
    assert "every rank called hvd.join at the end of each of its 2 epochs" in averaged
    assert "rank 1 made 32 steps and joined; hvd.join covered rank 0's 16 extra steps" in averaged
    # rank 1 joined and skipped rank 0's extra steps: their final parameters differ
    assert "so the parameters differ between ranks at the end" in averaged
