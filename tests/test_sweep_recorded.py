"""The sweeps recorded on this machine (data/sweeps/, real Horovod runs, see its README):
their provenance, and the findings the workshop teaches, computed by the readers and
analyses. If a re-recording no longer shows a finding, these tests say so."""

from __future__ import annotations

import json
import math

import pytest

from workshop.analysis import lr, scaling, tuning
from workshop.cli import main
from workshop.paths import data_path
from workshop.readers.sweep import read_manifest, read_sweep, run_dirs

SWEEPS = [
    "scaling-mnist",
    "batch-size-mnist",
    "lr-rules-mnist",
    "materials",
    "fusion-tuning-mnist",
    "autotune-mnist",
    # lesson 08's tuning sweeps (their findings: tests/test_tuning_recorded.py)
    "fusion-mnist",
    "cycle-time-mnist",
    "cache-mnist",
    "compression-mnist",
    "accumulation-mnist",
]


@pytest.mark.parametrize("name", SWEEPS)
def test_every_run_carries_provenance(name):
    folder = data_path("sweeps", name)
    manifest = read_manifest(folder)
    assert manifest is not None and manifest["host"]["cores"] >= 1
    for run_dir in run_dirs(folder):
        record = json.loads((run_dir / "run.json").read_text())
        assert record["status"] == "ok", run_dir
        assert record["command"][:2] == ["workshop", "sweep"]
        assert record["launch_command"][0] == "horovodrun"
        assert record["versions"]["horovod"] and record["versions"]["torch"]
        assert record["host"]["cores"] == manifest["host"]["cores"]
        assert record["started_at"] and record["config"]["np"] <= record["host"]["cores"]
        assert not record["config"]["oversubscribe"]
        assert (run_dir / "metrics.jsonl").exists() and (run_dir / "summary.json").exists()


def test_scaling_sweep_three_speedups(capsys):
    assert main(["scaling", "report", str(data_path("sweeps", "scaling-mnist")), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["np"] == [1, 2] and len(report["groups"]) == 2
    for group in report["groups"]:
        for metric in ("wall", "train", "throughput"):
            assert group["speedup"][metric]["1"] == 1.0
            assert math.isfinite(group["speedup"][metric]["2"])
        assert set(group["first_epoch_overhead_s"]) == {"1", "2"}
        # start-up does not shrink with workers, so the wall-time speedup (init included)
        # lies between the training speedup and 1: below it where a second worker speeds
        # training up (batch 128), above it where it slows training down (batch 32, the
        # quiet recording: 0.74x training, 0.85x wall); not "always the lowest of the three"
        wall, train = group["speedup"]["wall"]["2"], group["speedup"]["train"]["2"]
        assert min(train, 1.0) < wall < max(train, 1.0)
    runs, _ = read_sweep(data_path("sweeps", "scaling-mnist"))
    outside = (runs["total_time_s"] - runs["train_time_s"]).groupby(runs["np"]).min()
    assert outside[2] > outside[1]  # the time outside the training loop grows with workers
    by_batch = {g["key"]["batch_size"]: g for g in report["groups"]}
    # a larger per-worker batch means fewer synchronisations per sample: better scaling
    assert by_batch[128]["speedup"]["throughput"]["2"] > by_batch[32]["speedup"]["throughput"]["2"]


def test_batch_size_sweep_throughput_and_accuracy():
    runs, epochs = read_sweep(data_path("sweeps", "batch-size-mnist"))
    assert sorted(runs["batch_size"]) == [16, 32, 64, 128, 256, 512]
    assert set(runs["np"]) == {1}
    plateau = scaling.batch_size_plateau(runs)
    table = plateau["table"].set_index("batch_size")
    # bigger batches are faster per epoch on one worker, up to batch 256 ...
    fastest = table["time_s"].idxmin()
    assert fastest == 256 and table.loc[256, "speedup"] > 1.3
    # ... and the epoch time levels off: within 10% of the fastest from batch 64 on (the
    # quiet recording; the noisy one had its fastest epoch at 512 and no plateau)
    assert plateau["plateau_batch_size"] == 64 and plateau["levels_off"]
    assert plateau["speedup_at_plateau"] > 1.2
    # batch 512 is slower than 256 in every epoch, not by noise: the epochs do not overlap
    # (one run each; its 3 epochs are the spread)
    per_epoch = epochs.groupby("batch_size")["train_time_s"]
    assert per_epoch.min()[512] > per_epoch.max()[256]
    # ... but at a fixed LR and a fixed number of epochs they reach a much lower accuracy
    acc = lr.accuracy_vs_batch(runs)
    assert acc["final_test_accuracy"].iloc[0] > 0.9
    assert acc["drop_vs_smallest"].iloc[-1] > 0.5


def test_lr_rules_recover_large_batch_accuracy():
    runs, epochs = read_sweep(data_path("sweeps", "lr-rules-mnist"))
    assert set(runs["global_batch_size"]) == {32, 512}
    reference = runs[runs["global_batch_size"] == 32]["final_test_accuracy"].iloc[0]
    rules = lr.compare_lr_rules(runs).set_index(["lr_scaling", "warmup_epochs"])
    fixed = rules.loc[("none", 0.0), "final_test_accuracy"]
    linear_warm = rules.loc[("linear", 2.0), "final_test_accuracy"]
    # the large batch at the small-batch LR loses accuracy ...
    assert reference - fixed > 0.3
    # ... linear scaling with warmup recovers most of it (not all, in the same 6 epochs)
    assert linear_warm - fixed > 0.3
    assert linear_warm > rules.loc[("linear", 0.0), "final_test_accuracy"]
    assert linear_warm == rules["final_test_accuracy"].max()
    assert rules.loc[("linear", 2.0), "lr_effective"] == pytest.approx(0.16)
    assert rules.loc[("sqrt", 0.0), "lr_effective"] == pytest.approx(0.04)
    # warmup ramps the LR up over the first two epochs
    warm = epochs[(epochs["lr_scaling"] == "linear") & (epochs["warmup_epochs"] == 2)]
    assert warm.sort_values("epoch")["lr"].iloc[0] < 0.16 <= warm["lr"].max() + 1e-9
    gap = lr.train_test_gap(epochs)
    assert len(gap) == len(epochs)


def test_materials_small_model_is_communication_bound():
    runs, _ = read_sweep(data_path("sweeps", "materials"))
    assert set(runs["dataset"]) == {"materials"}
    assert runs["synthetic_data"].all()  # labelled synthetic in every run.json
    for run_dir in run_dirs(data_path("sweeps", "materials")):
        data = json.loads((run_dir / "run.json").read_text())["data"]
        assert data["source"].startswith("synthetic:")
    groups = {key["batch_size"]: group for key, group in scaling.scaling_groups(runs)}
    speedup = {
        batch: scaling.speedup_table(group).set_index("np").loc[2, "speedup_throughput"]
        for batch, group in groups.items()
    }
    # a ~4,500-parameter model: a second worker slows training down at batch 32 (the
    # allreduce costs more than the step's compute); a larger batch amortises it
    assert speedup[32] < 1
    assert speedup[256] > speedup[32]


def test_fusion_sweep_tuning_and_comm_model(capsys):
    folder = data_path("sweeps", "fusion-tuning-mnist")
    runs, _ = read_sweep(folder)
    tuned = runs[runs["fusion_threshold_mb"].notna()]
    table = tuning.tuning_table(tuned)
    assert len(table) == 6
    # without tensor fusion (threshold 0) every gradient is negotiated and reduced on its own.
    # The noisy recording made fusion off the two slowest settings; the quiet one does not:
    # fusion off (4,719 and 4,740 samples/s) is slower than fusion at a 1 ms cycle (6,580 and
    # 6,688) but faster than 4 MB at a 10 ms cycle (3,918), one run per setting, and one
    # run's two epochs differ by up to 22% (4 MB at 10 ms: 4,829 then 3,918)
    off = table[table["fusion_threshold_mb"] == 0]
    fused = table[table["fusion_threshold_mb"] > 0]
    assert table["fusion_threshold_mb"].iloc[0] > 0  # the fastest setting fuses
    fast_cycle = fused[fused["cycle_time_ms"] == 1]
    assert off["samples_per_s"].max() < fast_cycle["samples_per_s"].min()
    assert set(table.tail(2)["fusion_threshold_mb"]) != {0.0}  # no longer the two slowest
    assert main(["scaling", "report", str(folder), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    comm = report["comm_model"]
    assert comm["timelines"] == len(runs[runs["np"] == 2])
    fit = comm["fit"]
    # both coefficients are constrained to >= 0; the quiet recording's fit sits on alpha's
    # bound (alpha 0, R^2 0.06): rank 0's spans hold waiting, not a latency-bandwidth law
    assert fit["alpha_us"] >= 0 and 0 < fit["bandwidth_bytes_per_s"] < math.inf
    assert fit["nps"] == [2] and fit["bytes_max"] > 1e5
    # the prediction starts from the run with Horovod's default knobs, and is compared with
    # the measured np=1 -> np=2 speedup of the same configuration
    assert comm["run"].endswith("np2")
    rows = {row["np"]: row for row in comm["table"]}
    assert rows[1]["speedup_predicted"] == 1.0
    assert rows[2]["speedup_measured"] is not None
    assert rows[32]["speedup_measured"] is None and rows[32]["speedup_predicted"] < 32
    # The transfer model does not explain the np=2 step on this 2-core machine: what it
    # leaves out (or, in the quiet recording, over-counts: the unexplained part is negative)
    # is reported, not hidden.
    inputs = comm["inputs"]
    assert inputs["np1_step_time_s"] > 0
    assert inputs["unexplained_s"] == pytest.approx(
        inputs["compute_time_s"] - inputs["np1_step_time_s"]
    )


def test_autotune_log_recorded():
    from workshop.readers.logs import read_autotune_log

    (run_dir,) = run_dirs(data_path("sweeps", "autotune-mnist"))
    record = json.loads((run_dir / "run.json").read_text())
    assert record["config"]["autotune"] is True
    assert "--autotune" in record["launch_command"]
    tune = read_autotune_log(run_dir / "autotune.csv")
    assert len(tune) >= 3
    assert (tune["score_bytes_per_us"] > 0).all()
    assert tune["cycle_time_ms"].nunique() > 1 or tune["fusion_threshold_mb"].nunique() > 1
    assert tune["best_so_far"].is_monotonic_increasing
