"""More threads than cores is a finding of its own in ``workshop diagnose``, above the numbers it
distorts; its near miss: a communication-bound run on cores of its own."""

from __future__ import annotations

import pandas as pd
import pytest

from workshop.analysis import diagnose as d
from workshop.findings.diagnose import diagnose, diagnose_lines, diagnose_run
from workshop.paths import data_path

PLACEMENT = data_path("cluster", "mnist-placement")


def steps_frame(ranks: int, compute_ms: float, wait_ms: float) -> pd.DataFrame:
    """``ranks`` ranks, 6 steps each of 0.1 ms data + compute + wait."""
    rows = [
        (rank, step, 1e-4, compute_ms / 1e3, wait_ms / 1e3, (0.1 + compute_ms + wait_ms) / 1e3)
        for rank in range(ranks)
        for step in range(6)
    ]
    return pd.DataFrame(rows, columns=list(d.STEP_COLUMNS))


# Healthy runs show at most 10 % of a step as the communication estimator's saving (its noise)
NOISE = pd.DataFrame(
    [{"problem": "small_batch", "estimator": "", "runs": 5, "min": 0.0, "median": 0.05,
      "max": 0.10}]
)  # fmt: skip


def record(np_: int, cores: int, threads: int | None = 1, **extra) -> dict:
    return {
        "status": "ok",
        "config": {"np": np_, "lr": 0.01, "batch_size": 32, "threads_per_rank": None},
        "host": {"hostname": "vm", "cores": cores},
        "result": {"threads_per_rank": threads},
    } | extra


def test_core_sharing_counts_ranks_times_threads_per_core():
    # 4 ranks x 1 thread on 2 cores: 2 per core; 2 ranks x 2 threads on 2 cores: 2 per core;
    # 2 ranks x 1 thread on 2 cores: 1 (each rank a core: not oversubscribed)
    assert d.core_sharing(record(4, 2))["threads_per_core"].tolist() == [2.0]
    assert d.core_sharing(record(2, 2, threads=2))["threads_per_core"].tolist() == [2.0]
    assert d.core_sharing(record(2, 2))["threads_per_core"].tolist() == [1.0]
    # no cores recorded: no table (never a guess)
    assert d.core_sharing({"config": {"np": 4}}).empty


def test_a_real_clusters_ranks_are_counted_per_node():
    # 4 ranks, 2 per node, on 2-core nodes: 1 per core on each node
    spread = {"rank_hosts": {"0": "a", "1": "a", "2": "b", "3": "b"}, "emulated": False}
    table = d.core_sharing(record(4, 2, cluster=spread))
    assert table[["host", "ranks", "threads_per_core"]].values.tolist() == [
        ["a", 2, 1.0],
        ["b", 2, 1.0],
    ]
    # the same ranks on one emulated machine: its 2 cores serve all 4
    emulated = spread | {"emulated": True, "nodes": ["a", "b"]}
    assert d.core_sharing(record(4, 2, cluster=emulated))["threads_per_core"].tolist() == [2.0]


def test_oversubscribed_comes_first_and_the_communication_numbers_are_called_distorted():
    # every rank waits 6 of 0.1 + 4 + 6 = 10.1 ms, all of it communication: twice the compute
    # per allreduce saves half, 3 ms (30 % > the 10 % noise): a small_batch finding
    steps = steps_frame(4, compute_ms=4.0, wait_ms=6.0)
    result = diagnose(record(4, 2), pd.DataFrame(), steps, None, NOISE, "t")
    assert [f["problem"] for f in result["findings"]] == ["oversubscribed", "small_batch"]
    top = result["findings"][0]
    assert top["value"] == 2.0 and top["evidence"].startswith(
        "4 ranks x 1 thread on 2 cores of vm: 2 threads per core"
    )
    assert result["findings"][1]["saving_ms"] == pytest.approx(3.0)
    assert "fewer ranks per host" in top["fix"]
    assert result["notes"][0].startswith("small_batch: measured while the ranks shared cores")
    lines = diagnose_lines(result)
    assert lines[0].startswith(
        "most likely: more threads than cores: the ranks share cores: 4 ranks x 1 thread on 2 "
        "cores of vm: 2 threads per core"
    )


def test_near_miss_a_communication_bound_run_on_cores_of_its_own():
    # the same steps at np=2 on 2 cores: communication-bound, and nothing else
    steps = steps_frame(2, compute_ms=4.0, wait_ms=6.0)
    result = diagnose(record(2, 2), pd.DataFrame(), steps, None, NOISE, "t")
    assert [f["problem"] for f in result["findings"]] == ["small_batch"]
    assert not any("shared cores" in n for n in result["notes"])


@pytest.mark.parametrize("run", ["r0-np4-4+0", "r0-np4-2+2"])
def test_recorded_np4_runs_on_two_cores_are_oversubscribed(run):
    # data/cluster/mnist-placement: 4 ranks on an emulated 2-node cluster of one 2-core machine
    result = diagnose_run(PLACEMENT / run)
    top = result["findings"][0]
    assert top["problem"] == "oversubscribed" and top["value"] == 2.0
    assert "4 ranks x 1 thread on 2 cores of this machine" in top["evidence"]


@pytest.mark.parametrize("run", ["r0-np2-1+1", "r0-np2-2+0"])
def test_recorded_np2_runs_on_two_cores_are_not(run):
    result = diagnose_run(PLACEMENT / run)
    assert "oversubscribed" not in [f["problem"] for f in result["findings"]]


def test_near_miss_a_recorded_communication_bound_run_is_not_oversubscribed():
    # data/cluster/scaling-100mbit: 1 + 1 ranks across a 100 Mbit/s link on the 2-core machine
    # (recorded on a quiet machine), the allreduce most of each step: communication-bound
    # (small_batch), and its ranks do not share cores
    result = diagnose_run(data_path("cluster", "scaling-100mbit", "r1-p01-np2"))
    problems = [f["problem"] for f in result["findings"]]
    assert "small_batch" in problems and "oversubscribed" not in problems
