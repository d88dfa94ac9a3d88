"""The tuning sweeps recorded for lesson 08 (data/sweeps/*-mnist, see its README): their
options reached Horovod, and the counts the lesson teaches hold. Timings vary between repeats
even on the quiet recording machine; only what the lesson claims about them is checked (that it
compares them with the spread of repeats), not a speed-up."""

from __future__ import annotations

import json
import warnings

import pytest

from workshop import analysis, readers
from workshop.paths import data_path

# The MNIST model's gradients: 80,202 float32 parameters in 8 tensors (test_tuning_analysis.py).
GRADIENT_BYTES = 80_202 * 4


def _runs(name: str):
    runs, _ = readers.read_sweep(data_path("sweeps", name))
    return runs


def _comm(runs):
    traced = runs[runs["timeline"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", readers.TimelineWarning)
        timelines = {run.run: readers.read_timeline(run.path) for run in traced.itertuples()}
    # comm_table's steps are the timeline's (all epochs); read_sweep's are per epoch
    table = analysis.comm_table(timelines, traced.set_index("run")["np"])
    return table.merge(traced.drop(columns="steps"), on="run")


def _profiles(runs):
    return analysis.negotiation_table(
        {run.run: readers.read_mpitrace(run.path) for run in runs.itertuples()}
    ).merge(runs)


@pytest.mark.parametrize(
    ("name", "option", "flag"),
    [
        ("fusion-mnist", "fusion_threshold_mb", "--fusion-threshold-mb"),
        ("cycle-time-mnist", "cycle_time_ms", "--cycle-time-ms"),
        ("cache-mnist", "cache_capacity", "--cache-capacity"),
    ],
)
def test_horovod_knobs_reached_horovodrun(name, option, flag):
    for run_dir in readers.run_dirs(data_path("sweeps", name)):
        record = json.loads((run_dir / "run.json").read_text())
        value = record["config"][option]
        argv = record["launch_command"]
        assert argv[argv.index(flag) + 1] == f"{value:g}", run_dir


@pytest.mark.parametrize(
    ("name", "option", "flag"),
    [
        ("compression-mnist", "compression", "--compression"),
        ("accumulation-mnist", "backward_passes_per_step", "--backward-passes-per-step"),
    ],
)
def test_training_options_reached_the_ranks(name, option, flag):
    seen = set()
    for run_dir in readers.run_dirs(data_path("sweeps", name)):
        record = json.loads((run_dir / "run.json").read_text())
        value = record["config"][option]
        seen.add(value)
        argv = record["launch_command"]
        if value in ("none", 1):  # the default is not passed on
            assert flag not in argv
        else:
            assert argv[argv.index(flag) + 1] == str(value)
    assert len(seen) >= 2


def test_fusion_off_one_operation_per_tensor_same_bytes():
    comm = _comm(_runs("fusion-mnist")).set_index("fusion_threshold_mb")
    assert comm.loc[0, "ops_per_step"] == 8 and comm.loc[0, "tensors_per_step"] == 8
    assert comm.loc[128, "ops_per_step"] < 8
    assert comm.loc[0, "bytes_per_step"] == comm.loc[128, "bytes_per_step"] == GRADIENT_BYTES


def test_longer_cycles_fewer_negotiation_rounds():
    table = _profiles(_runs("cycle-time-mnist"))
    rounds = table.groupby("cycle_time_ms")["rounds_per_s"].median()
    assert list(rounds.index) == [1, 5, 20]
    # a cycle lasts at least the cycle time: at most 1000 / cycle_time_ms rounds per second
    for cycle, rate in rounds.items():
        assert rate <= 1000 / cycle
    assert rounds[1] > rounds[5] > rounds[20]


def test_without_the_cache_every_cycle_is_a_full_negotiation():
    table = _profiles(_runs("cache-mnist"))
    on, off = table[table["cache_capacity"] == 1024], table[table["cache_capacity"] == 0]
    assert len(on) == len(off) == 3
    # cache on: one bit-vector allreduce per cycle, full negotiations only for new tensors
    assert (on["bitvector_allreduces"] > 10 * on["gathers"]).all()
    # cache off: no bit vector at all, a gather of requests (and two broadcasts) per cycle
    assert (off["bitvector_allreduces"] == 0).all()
    assert (off["gathers"] > 10 * on["gathers"].max()).all()
    assert (off["bcasts"] >= 2 * off["gathers"]).all()


def test_fp16_halves_the_bytes_and_keeps_the_accuracy_within_the_seeds():
    runs = _runs("compression-mnist")
    comm = _comm(runs).set_index("compression")
    assert comm.loc["none", "bytes_per_step"] == GRADIENT_BYTES
    assert comm.loc["fp16", "bytes_per_step"] == GRADIENT_BYTES / 2
    assert comm.loc["fp16", "gradient_dtypes"] == "float16"
    assert comm.loc["none", "gradient_dtypes"] == "float32"
    accuracy = analysis.knob_effect(runs, "compression", "final_test_accuracy", "none")
    assert list(accuracy["runs"]) == [3, 3]
    assert accuracy.set_index("compression").loc["fp16", "overlaps"]


def test_accumulation_divides_the_allreduces_per_epoch():
    runs = _runs("accumulation-mnist")
    comm = _comm(runs).set_index("backward_passes_per_step")
    per_epoch = comm["allreduce_ops"] / comm["epochs"]
    # same samples per epoch, K times fewer optimizer steps (62, 31, 15 of 2,000 images each)
    assert list(comm["steps"] / comm["epochs"]) == [62, 31, 15]
    assert per_epoch[4] / per_epoch[1] == pytest.approx(1 / 4, rel=0.2)
    assert (comm["bytes_per_step"] == GRADIENT_BYTES).all()
    fixed = runs[runs["lr_scaling"] == "none"]
    assert sorted(fixed["global_batch_size"].unique()) == [64, 128, 256]
