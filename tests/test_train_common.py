import numpy as np
import pytest

from workshop.train.common import lr_at, scaled_lr, shard_indices, threads_per_rank


def test_linear_and_sqrt_scaling_follow_the_global_batch():
    assert scaled_lr(0.01, 64, 32, "linear") == pytest.approx(0.02)
    assert scaled_lr(0.01, 128, 32, "sqrt") == pytest.approx(0.02)
    assert scaled_lr(0.01, 512, 32, "none") == 0.01
    with pytest.raises(ValueError, match="unknown LR scaling rule 'cubic'"):
        scaled_lr(0.01, 64, 32, "cubic")


def test_warmup_ramps_linearly_then_holds():
    lrs = [lr_at(step, 10, 0.01, 0.05, warmup_epochs=2) for step in range(25)]
    assert lrs[0] == pytest.approx(0.01)
    assert lrs[10] == pytest.approx(0.03)
    assert all(b > a for a, b in zip(lrs[:19], lrs[1:20], strict=True))
    assert lrs[20:] == [0.05] * 5
    assert lr_at(0, 10, 0.01, 0.05, warmup_epochs=0) == 0.05


def test_shards_are_disjoint_and_cover_the_data():
    shards = [shard_indices(103, rank, 4, epoch=3, seed=1) for rank in range(4)]
    combined = np.concatenate(shards)
    assert sorted(combined.tolist()) == list(range(103))
    assert not np.array_equal(shard_indices(103, 0, 4, 1, 1), shard_indices(103, 0, 4, 2, 1))


def test_threads_split_the_cores_between_local_ranks(monkeypatch):
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(8)))
    assert threads_per_rank(2, None) == 4
    assert threads_per_rank(16, None) == 1
    assert threads_per_rank(2, 3) == 3
