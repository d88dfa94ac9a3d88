"""Speedup three ways, first-epoch overhead, fits and the other scaling analyses; the seed
numbers must come out of reader + analysis."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from workshop.analysis import scaling, tuning
from workshop.findings.scaling import plateau_findings, scaling_findings
from workshop.paths import data_path
from workshop.readers import logs

SEED000 = ["000-pytorch_cifar10.out.1", "000-pytorch_cifar10.out.2", "000-pytorch_cifar10.out.4"]


@pytest.fixture(scope="module")
def seed004():
    tables = [
        logs.read_table(data_path("seeds", "004-resnet_v2_101-walltime.tsv")),
        logs.read_table(data_path("seeds", "004-resnet_v2_101-throughput.tsv")),
    ]
    return scaling.speedup_table(logs.merge_tables(tables)).set_index("np")


@pytest.fixture(scope="module")
def seed000_epochs():
    return logs.read_epoch_logs([data_path("seeds", name) for name in SEED000])


def test_seed004_three_speedups(seed004):
    # Training time without init: 163 s / 14 s.
    assert seed004.loc[32, "speedup_train"] == pytest.approx(11.64, abs=0.005)
    # Throughput: the table's examples/s are per GPU and rounded to integers, so
    # 32 * 190 / 202 = 30.099 against the report's 30.09 (computed from unrounded rates).
    assert seed004.loc[32, "speedup_throughput"] == pytest.approx(30.09, abs=0.015)
    assert seed004.loc[32, "speedup_reported_throughput"] == pytest.approx(30.09)
    assert seed004.loc[32, "speedup_reported_train"] == pytest.approx(11.64)
    # Wall time with init: 231 s / 125 s; init does not shrink with GPUs.
    assert seed004.loc[32, "speedup_wall"] == pytest.approx(231 / 125)
    assert seed004.loc[32, "efficiency_throughput"] == pytest.approx(30.099 / 32, abs=1e-3)
    ordered = seed004.loc[32, ["speedup_wall", "speedup_train", "speedup_throughput"]]
    assert ordered.is_monotonic_increasing


def test_seed004_throughput_is_per_gpu():
    thr = logs.read_table(data_path("seeds", "004-resnet_v2_101-throughput.tsv"))
    assert scaling.infer_throughput_per_worker(thr) is True
    total = thr.assign(examples_per_s=thr["examples_per_s"] * thr["np"])
    assert scaling.infer_throughput_per_worker(total) is False
    table = scaling.speedup_table(thr, throughput_per_worker=False).set_index("np")
    assert table.loc[32, "speedup_throughput"] == pytest.approx(190 / 202)


def test_seed000_scaling_problem_is_the_first_epoch(seed000_epochs):
    overhead = scaling.first_epoch_overhead(seed000_epochs).set_index("np")
    assert overhead.loc[2, "first_epoch_overhead_s"] == pytest.approx(23.0692 - 0.8955, abs=0.01)
    assert overhead.loc[4, "steady_epoch_s"] == pytest.approx(0.5024, abs=0.001)
    # More than 70% of the multi-GPU training time is the first epoch's one-off cost ...
    assert (overhead.loc[[2, 4], "overhead_share"] > 0.7).all()
    assert overhead.loc[1, "overhead_share"] < 0.15
    table = scaling.speedup_table(scaling.runs_from_epochs(seed000_epochs)).set_index("np")
    # ... so counting every epoch, 2 and 4 GPUs are slower than 1 ...
    assert (table.loc[[2, 4], "speedup_train"] < 1).all()
    # ... while the steady-state epochs scale well.
    assert table.loc[4, "speedup_throughput"] == pytest.approx(1.6394 / 0.5024, rel=0.01)
    assert table.loc[4, "speedup_throughput"] > 3


def test_speedup_table_fills_total_and_uses_baseline():
    runs = pd.DataFrame(
        {"np": [2, 4, 4], "init_time_s": [10, 10, 10], "train_time_s": [100, 60, 40]}
    )
    table = scaling.speedup_table(runs).set_index("np")
    # baseline np=2 counts as a perfect 2x; np=4 uses the median of its two runs (50 s)
    assert table.loc[2, "speedup_train"] == 2
    assert table.loc[4, "speedup_train"] == pytest.approx(2 * 100 / 50)
    assert table.loc[4, "speedup_wall"] == pytest.approx(2 * 110 / 60)
    assert math.isnan(table.loc[4, "speedup_throughput"])
    with pytest.raises(ValueError, match="baseline np=1"):
        scaling.speedup_table(runs, baseline_np=1)
    with pytest.raises(ValueError, match="no column"):
        scaling.speedup_table(pd.DataFrame({"workers": [1]}))


def test_amdahl_fit_recovers_serial_fraction_and_karp_flatt_is_constant():
    n = np.array([1, 2, 4, 8, 16, 32])
    s = scaling.amdahl_speedup(n, 0.05)
    fit = scaling.amdahl_fit(n, s)
    assert fit["serial_fraction"] == pytest.approx(0.05)
    assert fit["max_speedup"] == pytest.approx(20)
    assert fit["rmse"] == pytest.approx(0, abs=1e-9)
    assert fit["points"] == 5
    kf = scaling.karp_flatt(n, s)
    assert math.isnan(kf[0])
    assert kf[1:] == pytest.approx([0.05] * 5)
    with pytest.raises(ValueError, match="N > 1"):
        scaling.amdahl_fit([1], [1.0])
    assert scaling.amdahl_fit(n, n)["max_speedup"] == math.inf


def test_linear_fit():
    fit = scaling.linear_fit([1, 2, 4, 8], [1.0, 1.45, 2.35, 4.15])
    assert fit["slope"] == pytest.approx(0.45)
    assert fit["intercept"] == pytest.approx(0.55)
    assert fit["r2"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="two or more"):
        scaling.linear_fit([2, 2], [1, 1])


def test_syncs_per_epoch_seed003_example():
    # Seed 003: on 2 workers even 1 ms per sync costs ~5 s per epoch: ~5,000 syncs per epoch.
    syncs = scaling.syncs_per_epoch(750_000, 75, [1, 2, 10]).set_index("np")
    assert syncs.loc[2, "syncs_per_epoch"] == 5000
    assert syncs.loc[2, "syncs_per_epoch"] * 1e-3 == pytest.approx(5.0)
    assert syncs.loc[10, "global_batch_size"] == 750
    assert syncs["syncs_per_epoch"].is_monotonic_decreasing


def test_sync_overhead_from_step_times():
    runs = pd.DataFrame(
        {"np": [1, 2, 4], "steps": [100, 50, 25], "steady_epoch_time_s": [1.0, 0.6, 0.35]}
    )
    sync = scaling.sync_overhead(runs).set_index("np")
    assert sync.loc[1, "sync_time_per_step_ms"] == 0
    assert sync.loc[2, "sync_time_per_step_ms"] == pytest.approx(2.0)
    assert sync.loc[4, "sync_time_per_step_ms"] == pytest.approx(4.0)
    assert sync.loc[2, "sync_time_per_epoch_s"] == pytest.approx(0.1)
    assert sync.loc[4, "sync_share"] == pytest.approx(0.1 / 0.35)


def test_batch_size_plateau():
    df = pd.DataFrame(
        {
            "batch_size": [16, 32, 64, 128, 256, 512],
            "steady_epoch_time_s": [8.0, 4.2, 2.3, 1.35, 1.3, 1.25],
        }
    )
    p = scaling.batch_size_plateau(df)
    assert p["plateau_batch_size"] == 128
    assert p["min_time_s"] == 1.25
    assert p["speedup_at_plateau"] == pytest.approx(8.0 / 1.35)
    # 256 and 512 were measured beyond 128 and stayed within 10% of 1.25 s: a plateau
    assert p["levels_off"] and p["largest_batch_size"] == 512
    assert plateau_findings(p) == [
        "Epoch time levels off from batch 128 (within 10% of the fastest, 1.250 s, up to "
        "batch 512): 5.93x faster than batch 16."
    ]  # 8.0 / 1.35 = 5.926
    # within 1% only the fastest, 512, qualifies: nothing larger was measured, no plateau
    tight = scaling.batch_size_plateau(df, tolerance=0.01)
    assert tight["plateau_batch_size"] == 512 and not tight["levels_off"]
    assert plateau_findings(tight) == [
        "Time per epoch is still falling at the largest batch measured (512: 1.250 s, 6.40x "
        "faster than batch 16): no plateau within batch 16-512."
    ]  # 8.0 / 1.25 = 6.4
    with pytest.raises(ValueError, match=r"two or more batch sizes, got \[16\]"):
        scaling.batch_size_plateau(df.iloc[:1])


def test_batch_size_plateau_that_rises_again():
    # the recorded sweep's shape: flat from 64 to 256, then slower at 512; the plateau ends
    # at 256, and the finding does not claim 512 stayed within 10 %
    df = pd.DataFrame(
        {
            "batch_size": [16, 32, 64, 128, 256, 512],
            "steady_epoch_time_s": [0.44, 0.377, 0.36, 0.353, 0.331, 0.497],
        }
    )
    p = scaling.batch_size_plateau(df)
    assert p["plateau_batch_size"] == 64 and p["plateau_end_batch_size"] == 256
    assert p["levels_off"]
    assert plateau_findings(p) == [
        "Epoch time levels off from batch 64 (within 10% of the fastest, 0.331 s, up to batch "
        "256): 1.22x faster than batch 16. Beyond it the time rises again: batch 512 takes "
        "1.50x the fastest."
    ]  # 0.44 / 0.36 = 1.222, 0.497 / 0.331 = 1.502
    # a lowest point with nothing beside it within 1 %: neither a plateau nor still falling
    tight = scaling.batch_size_plateau(df, tolerance=0.01)
    assert tight["plateau_batch_size"] == 256 and not tight["levels_off"]
    assert plateau_findings(tight) == [
        "Epoch time is lowest at batch 256 (0.331 s, 1.33x faster than batch 16), with no "
        "larger batch within 1% of the fastest: no plateau measured. Beyond it the time rises "
        "again: batch 512 takes 1.50x the fastest."
    ]  # 0.44 / 0.331 = 1.329


def test_tuning_table_orders_by_throughput():
    runs = pd.DataFrame(
        {
            "fusion_threshold_mb": [0, 64, 64, None],
            "cycle_time_ms": [1, 1, 1, None],
            "samples_per_s": [100.0, 150.0, 170.0, 120.0],
        }
    )
    table = tuning.tuning_table(runs)
    assert table.iloc[0]["samples_per_s"] == 160
    assert table.iloc[0]["runs"] == 2
    assert table["relative"].iloc[-1] == pytest.approx(100 / 160)
    assert len(table) == 3


def test_scaling_groups_keep_like_with_like():
    runs = pd.DataFrame(
        {
            "np": [1, 2, 1, 1, 2],
            "batch_size": [32, 32, 64, 128, 128],
            "lr_scaling": ["none"] * 5,
            "fusion_threshold_mb": [None] * 5,
        }
    )
    groups = scaling.scaling_groups(runs)
    assert [sorted(g["np"]) for _, g in groups] == [[1, 2], [1, 2]]
    assert {k["batch_size"] for k, _ in groups} == {32, 128}
    assert groups[0][0]["fusion_threshold_mb"] is None


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("compression", ["none", "fp16"]),
        ("backward_passes_per_step", [1, 4]),
        ("cache_capacity", [1024, 0]),
        ("data", ["real", "synthetic"]),
        ("mpi_profile", [False, True]),
    ],
)
def test_scaling_groups_split_runs_with_different_work_per_step(column, values):
    # np=1 with one value and np=2 with the other do different work (or measure differently)
    # per step: no like-for-like group; with the same value on both they form one.
    runs = pd.DataFrame({"np": [1, 2], "batch_size": [32, 32], column: values})
    assert scaling.scaling_groups(runs) == []
    same = runs.assign(**{column: [values[0]] * 2})
    assert [sorted(g["np"]) for _, g in scaling.scaling_groups(same)] == [[1, 2]]


def test_findings_state_numbers(seed004):
    lines = scaling_findings(seed004.reset_index())
    text = "\n".join(lines)
    assert "11.64x" in text and "30.10x" in text and "1.85x" in text
    assert "Amdahl" in text


def test_round_speedups_pair_each_round_with_its_own_np1_and_the_raw_compute():
    import pandas as pd

    from workshop.analysis import round_speedups

    runs = pd.DataFrame({"round": [1, 1, 2, 2, 3, 3], "np": [1, 2, 1, 2, 1, 2],
                         "samples_per_s": [100.0, 150.0, 50.0, 80.0, 100.0, 140.0]})  # fmt: skip
    raw = pd.DataFrame({"round": [1, 1, 2, 2, 3, 3], "procs": [1, 2, 1, 2, 1, 2],
                        "total_samples_per_s": [10.0, 19.0, 10.0, 18.0, 10.0, 19.5]})  # fmt: skip
    table = round_speedups(runs, raw).set_index("what")
    horovod = table.loc["Horovod np=2"]
    # within rounds: 1.5, 1.6, 1.4 (round 2's slow minute moved both runs); the near miss,
    # pooled medians across rounds, would give 140 / 100 = 1.4
    assert (horovod.speedup_min, horovod.speedup_median, horovod.speedup_max) == (1.4, 1.5, 1.6)
    assert horovod.verdict == "higher in every round" and horovod.rounds == 3
    assert table.loc["2 independent processes"].speedup_median == 1.9
    with pytest.raises(ValueError, match="every round needs exactly one run with np = 1"):
        round_speedups(runs.drop(index=2))  # round 2 lost its np=1 run


def test_ring_check_adds_the_machines_slowdown_and_one_ring_allreduce():
    import pandas as pd

    from workshop.analysis import ring_check

    runs = pd.DataFrame({"round": [1, 1], "np": [1, 2], "batch_size": [32, 32],
                         "samples_per_s": [1000.0, 1200.0]})  # fmt: skip
    raw = pd.DataFrame({"round": [1, 1], "procs": [1, 2], "total_samples_per_s": [10.0, 19.0],
                        "gradient_bytes": [320_808, 320_808]})  # fmt: skip
    row = ring_check(runs, raw, bandwidth_bytes_per_s=12.5e6).iloc[0]
    # 32 ms alone; 2 / 1.9 of it at np=2 (33.7 ms); the ring at N=2 moves m bytes: 25.7 ms
    assert row.compute_ms == pytest.approx(32 * 2 / 1.9)
    assert row.comm_model_ms == pytest.approx(320_808 / 12.5e6 * 1e3)
    assert row.speedup_measured == pytest.approx(1.2)
    assert row.speedup_predicted == pytest.approx(64 / (32 * 2 / 1.9 + 25.66464), rel=1e-4)
    # the near miss: the machine's own slowdown left out would predict 1.11, not 1.08
    assert abs(row.speedup_predicted - 64 / (32 + 25.66464)) > 0.02
    with pytest.raises(ValueError, match="round 1 lacks the raw compute of 1 and 2 processes"):
        ring_check(runs, raw.iloc[:1], bandwidth_bytes_per_s=12.5e6)
