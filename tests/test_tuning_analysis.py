"""workshop.analysis.tuning on recorded runs (data/timelines, data/mpi, data/sweeps) and on
small hand-made tables whose expected values are derived in the comments."""

from __future__ import annotations

import math
import warnings

import matplotlib
import pandas as pd
import pytest

from workshop import analysis, readers
from workshop.paths import data_path

matplotlib.use("Agg")

# The MNIST model's gradients: conv1 16*1*5*5+16 = 416, conv2 32*16*5*5+32 = 12,832,
# fc1 512*128+128 = 65,664, fc2 128*10+10 = 1,290 parameters: 80,202 float32 = 320,808 bytes,
# in 8 tensors (a weight and a bias per layer).
GRADIENT_BYTES = 80_202 * 4


def _timelines(*names: str) -> dict:
    with warnings.catch_warnings():
        # open spans at shutdown are possible (the killed run; data/timelines/README.md)
        warnings.simplefilter("ignore", readers.TimelineWarning)
        return {name: readers.read_timeline(data_path("timelines", name)) for name in names}


def test_fusion_off_sends_the_same_bytes_in_one_operation_per_tensor():
    table = analysis.comm_table(
        _timelines("tl-torch-gloo-np2", "tl-torch-gloo-np2-fusion0"), 2
    ).set_index("run")
    default, off = table.loc["tl-torch-gloo-np2"], table.loc["tl-torch-gloo-np2-fusion0"]
    # 2 epochs x 30 steps; every step allreduces the 8 gradient tensors
    assert default["steps"] == off["steps"] == 60
    assert default["tensors_per_step"] == off["tensors_per_step"] == 8
    assert default["bytes_per_step"] == off["bytes_per_step"] == GRADIENT_BYTES
    assert default["gradient_dtypes"] == "float32"
    # fusion off: one collective per tensor; on: several tensors share one
    assert off["ops_per_step"] == 8 and off["tensors_per_op"] == 1
    assert default["ops_per_step"] < 8 and default["tensors_per_op"] > 1


def test_ticks_every_step_only_without_the_response_cache():
    table = analysis.comm_table(
        _timelines("tl-torch-gloo-np2", "tl-torch-gloo-np2-nocache"), 2
    ).set_index("run")
    # with the cache, only the first negotiation of each tensor is ticked: 8 tensors x 2 ranks
    assert table.loc["tl-torch-gloo-np2", "ticks"] == 16
    # without it every negotiation is: 8 tensors x 2 ranks per step
    assert table.loc["tl-torch-gloo-np2-nocache", "ticks_per_step"] == 16


def test_negotiation_table_reads_the_negotiation_signature():
    profiles = {
        name: readers.read_mpitrace(data_path("mpi", name))
        for name in ("torch-mnist-mpi-ops-np2", "torch-mnist-mpi-ops-cycle20ms-np2")
    }
    table = analysis.negotiation_table(profiles).set_index("run")
    default = table.loc["torch-mnist-mpi-ops-np2"]
    # rank 0's message sizes: 1,173 calls of 8 bytes (the bit vector); the 6 calls of 4 bytes
    # are the epoch's metrics (float32 scalars)
    assert default["bitvector_allreduces"] == 1173
    assert default["gathers"] == 18 and default["bcasts"] == 54
    # 1 + 21 + 6 + 52 + 60 larger calls
    assert default["gradient_allreduces"] == 140
    assert default["negotiation_rounds"] == 1173
    assert default["rounds_per_s"] == pytest.approx(1173 / 2.49)  # rank 0 elapsed 2.49 s
    slow = table.loc["torch-mnist-mpi-ops-cycle20ms-np2"]
    assert slow["negotiation_rounds"] < default["negotiation_rounds"] / 5


def test_knob_effect_compares_ranges_of_repeats():
    runs = pd.DataFrame(
        {
            "cache": [1024, 1024, 1024, 0, 0, 0, 7],
            "rate": [100.0, 120.0, 80.0, 50.0, 60.0, 70.0, 130.0],
        }
    )
    effect = analysis.knob_effect(runs, "cache", "rate", 1024).set_index("cache")
    assert list(effect.index) == [1024, 0, 7]  # the baseline first
    assert effect.loc[1024, "median"] == 100 and effect.loc[1024, "runs"] == 3
    assert effect.loc[1024, "spread"] == pytest.approx((120 - 80) / 100)
    assert effect.loc[0, "ratio"] == pytest.approx(60 / 100)
    # 50..70 lies below 80..120: outside the spread; 130 lies above it
    assert not effect.loc[0, "overlaps"] and not effect.loc[7, "overlaps"]
    runs.loc[5, "rate"] = 90.0  # 50..90 now reaches into 80..120
    assert analysis.knob_effect(runs, "cache", "rate", 1024).set_index("cache").loc[0, "overlaps"]
    with pytest.raises(ValueError, match="no run with cache=64"):
        analysis.knob_effect(runs, "cache", "rate", 64)
    with pytest.raises(ValueError, match="no column"):
        analysis.knob_effect(runs, "fusion", "rate", 0)


def test_autotune_summary_of_the_recorded_log():
    (run_dir,) = readers.run_dirs(data_path("sweeps", "autotune-mnist"))
    log = readers.read_autotune_log(run_dir / "autotune.csv")
    summary = analysis.autotune_summary(log)
    assert summary["samples"] == len(log) - int(log["final_best"].sum())
    assert summary["best_score"] == log["score_bytes_per_us"].max()
    best = log.loc[log["score_bytes_per_us"].idxmax()]
    assert summary["best_cycle_time_ms"] == best["cycle_time_ms"]
    assert summary["gain_vs_first"] == pytest.approx(
        best["score_bytes_per_us"] / log["score_bytes_per_us"].iloc[0]
    )
    assert summary["finished"] == bool(log["final_best"].any())
    assert math.isclose(summary["worst_score"], log["score_bytes_per_us"].min())


def test_plot_knob_effect_draws_one_bar_per_setting():
    from workshop import plot

    effect = analysis.knob_effect(
        pd.DataFrame({"k": [1, 1, 2], "m": [1.0, 3.0, 5.0]}), "k", "m", 1
    )
    ax = plot.plot_knob_effect(effect, "k", metric_label="samples/s")
    assert len(ax.patches) == 2 and ax.get_ylabel() == "samples/s"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2"]
