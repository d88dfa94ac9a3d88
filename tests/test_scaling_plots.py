"""Smoke-and-content tests of the scaling and LR plots (Agg backend, no display)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from workshop.analysis import commodel, lr, scaling, tuning  # noqa: E402
from workshop.plot import lr as plot_lr  # noqa: E402
from workshop.plot import scaling as plot_scaling  # noqa: E402
from workshop.plot import tuning as plot_tuning  # noqa: E402
from workshop.readers import logs  # noqa: E402


def two_runs_epochs() -> pd.DataFrame:
    """Two constructed runs of two epochs each: a small batch without LR scaling, a large one
    with linear scaling and warmup (the columns plot_lr's curves read)."""
    return pd.DataFrame(
        {
            "run": ["a"] * 2 + ["b"] * 2,
            "epoch": [1, 2] * 2,
            "elapsed_s": [1, 2, 0.5, 1],
            "test_accuracy": [0.5, 0.8, 0.3, 0.4],
            "train_accuracy": [0.6, 0.9, 0.3, 0.5],
            "global_batch_size": [32, 32, 512, 512],
            "lr_scaling": ["none"] * 2 + ["linear"] * 2,
            "warmup_epochs": [0, 0, 1, 1],
        }
    )


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_speedup_efficiency_and_epoch_plots(seed000_logs):
    epochs = logs.read_epoch_logs(seed000_logs)
    table = scaling.speedup_table(scaling.runs_from_epochs(epochs))
    ax = plot_scaling.plot_speedup(
        table,
        amdahl=scaling.amdahl_fit(table["np"], table["speedup_throughput"]),
        linear=scaling.linear_fit(table["np"], table["speedup_throughput"]),
    )
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0] == "ideal" and len(labels) == 6
    assert any(label.startswith("Amdahl f=") for label in labels)
    throughput = ax.get_lines()[3]
    assert np.allclose(throughput.get_ydata(), table["speedup_throughput"])
    ax = plot_scaling.plot_efficiency(table)
    assert len(ax.get_lines()) == 4
    ax = plot_scaling.plot_epoch_times(epochs)
    assert ax.get_yscale() == "log" and len(ax.get_lines()) == 3
    assert ax.get_lines()[1].get_ydata()[0] == pytest.approx(23.069223165512085)
    # per-epoch logs have no init time: a caller can say what "wall" measured
    ax = plot_scaling.plot_speedup(table, metrics=("wall",), labels={"wall": "train + test"})
    assert [line.get_label() for line in ax.get_lines()] == ["ideal", "train + test"]


def test_epoch_times_one_line_per_run():
    epochs = pd.DataFrame(
        {
            "run": ["b-np2", "b-np2", "a-np2", "a-np2"],
            "np": [2] * 4,
            "epoch": [1, 2, 1, 2],
            "train_time_s": [9.0, 1.0, 3.0, 2.0],
        }
    )
    ax = plot_scaling.plot_epoch_times(epochs, by="run")
    # two runs with the same np stay two lines (by np they would be pooled into one median),
    # in the order the runs come, labelled by name
    assert [line.get_label() for line in ax.get_lines()] == ["b-np2", "a-np2"]
    assert ax.get_lines()[0].get_ydata().tolist() == [9.0, 1.0]
    assert len(plot_scaling.plot_epoch_times(epochs).get_lines()) == 1


def _legend_right_of_axes(ax) -> bool:
    """True when the legend is drawn entirely to the right of the plotting area."""
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    return legend.x0 >= ax.get_window_extent().x1


def test_legends_never_cover_curves():
    table = pd.DataFrame(
        {"np": [1, 2, 4, 8], "total_time_s": [10, 6, 4, 3], "train_time_s": [8, 4.4, 2.5, 1.6]}
    )
    table = scaling.speedup_table(table)
    assert _legend_right_of_axes(plot_scaling.plot_speedup(table))
    assert _legend_right_of_axes(plot_scaling.plot_efficiency(table))
    epochs = two_runs_epochs()
    assert _legend_right_of_axes(plot_lr.plot_accuracy_curves(epochs))
    assert plot_lr.plot_accuracy_curves(epochs, legend=False).get_legend() is None
    gap = plot_lr.plot_train_test_gap(lr.train_test_gap(epochs))
    assert _legend_right_of_axes(gap)
    # runs are labelled by batch and LR rule, not by folder name
    assert gap.get_legend().get_texts()[1].get_text() == "batch 512, lr linear + 1 ep warmup"


def test_batch_size_plot_says_what_the_data_shows():
    df = pd.DataFrame({"batch_size": [16, 32, 64, 128], "steady_epoch_time_s": [4, 2, 1.1, 1]})
    ax = plot_scaling.plot_batch_size(scaling.batch_size_plateau(df))
    assert ax.get_lines()[0].get_xdata().tolist() == [16, 32, 64, 128]
    # 1.1 s at 64 is within 10% of 1 s and 128 was measured too: levels off, marked at 64
    assert ax.get_title() == "levels off from batch 64 (within 10% of the fastest)"
    assert ax.get_lines()[1].get_xdata()[0] == 64
    # still falling at the largest batch: no plateau claimed, nothing marked
    ax = plot_scaling.plot_batch_size(scaling.batch_size_plateau(df.iloc[:3]))
    assert ax.get_title() == "still falling at batch 64: no plateau measured"
    assert len(ax.get_lines()) == 1


def test_batch_sync_comm_tuning_plots():
    sync = scaling.sync_overhead(
        pd.DataFrame({"np": [1, 2], "steps": [10, 5], "steady_epoch_time_s": [1.0, 0.6]})
    )
    ax = plot_scaling.plot_sync(sync)
    # step time np=1: 1.0 s / 10 steps = 100 ms; np=2: 0.6 s / 5 = 120 ms -> 20 ms of sync per
    # step at np=2 (0 at np=1), x 5 steps = 0.1 s per epoch
    assert [bar.get_height() for bar in ax.patches] == pytest.approx([0, 20])
    twin = next(other for other in ax.figure.axes if other is not ax)
    assert twin.get_lines()[0].get_ydata().tolist() == pytest.approx([0, 0.1])
    sizes = np.geomspace(100, 1e6, 10)
    ops = pd.DataFrame(
        {
            "np": 2,
            "bytes": sizes,
            "dur_us": 1e6 * commodel.ring_allreduce_time_s(2, sizes, 2e-5, 1e9),
        }
    )
    fit = commodel.fit_alpha_beta(ops)
    ax = plot_scaling.plot_comm_fit(ops, fit)
    assert "alpha = 20.0 us" in ax.get_title()
    pred = commodel.predict_scaling(
        fit, compute_time_s=0.01, bytes_per_step=1e6, allreduces_per_step=1, batch_size=32
    )
    measured = pd.DataFrame({"np": [1, 2], "speedup_throughput": [1.0, 1.8]})
    ax = plot_scaling.plot_prediction(commodel.compare_prediction(pred, measured))
    ideal, model, meas = ax.get_lines()
    assert ideal.get_xdata().tolist() == [1, 2, 4, 8, 16, 32]
    # np=2: ring time 2 x 20 us + 1e6 B / 1e9 B/s = 1.04 ms, step 10 + 1.04 ms; speedup =
    # (2 x 32 / 11.04 ms) / (32 / 10 ms) = 20 / 11.04 = 1.8116
    assert model.get_ydata()[1] == pytest.approx(20 / 11.04, rel=1e-3)
    assert meas.get_xdata().tolist() == [1, 2] and meas.get_ydata().tolist() == [1.0, 1.8]
    table = tuning.tuning_table(
        pd.DataFrame(
            {
                "fusion_threshold_mb": [0, 64, None],
                "cycle_time_ms": [1, 5, None],
                "samples_per_s": [10.0, 20.0, 15.0],
            }
        )
    )
    ax = plot_tuning.plot_tuning(table)
    assert [t.get_text() for t in ax.get_yticklabels()][-1] == "64 MB / 5 ms"


def test_autotune_plots(tmp_path):
    path = tmp_path / "autotune.csv"
    path.write_text(
        "hierarchical_allreduce,hierarchical_allgather,torus_allreduce,cache_enabled,"
        "cycle_time_ms,tensor_fusion_threshold,score\n"
        "0,0,0, 1,5,64,120\n0,0,0, 1,2,16,180\n0,0,0, 1,2,16,180\n"
    )
    tune = logs.read_autotune_log(path)
    ax = plot_tuning.plot_autotune(tune)
    assert "best: 2 ms, 16 MB" in ax.get_legend().get_texts()[0].get_text()
    ax = plot_tuning.plot_autotune_progress(tune)
    assert ax.get_lines()[1].get_ydata().tolist() == [120, 180]


def test_lr_plots():
    epochs = two_runs_epochs()
    ax = plot_lr.plot_accuracy_curves(epochs, x="elapsed_s")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "batch 32, lr none",
        "batch 512, lr linear + 1 ep warmup",
    ]
    assert ax.get_xlabel() == "training time (s)"
    acc = pd.DataFrame(
        {
            "global_batch_size": [32, 512],
            "final_test_accuracy": [0.9, 0.7],
            "best_test_accuracy": [0.9, 0.75],
        }
    )
    ax = plot_lr.plot_accuracy_vs_batch(acc)
    final, best = ax.get_lines()
    assert final.get_ydata().tolist() == [0.9, 0.7] and best.get_ydata().tolist() == [0.9, 0.75]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["32", "512"]
    schedules = {"linear + warmup": lr.lr_schedule(0.01, 512, 32, "linear", warmup_epochs=1)}
    ax = plot_lr.plot_lr_schedules(schedules)
    assert max(ax.get_lines()[0].get_ydata()) == pytest.approx(0.16)
    ax = plot_lr.plot_train_test_gap(lr.train_test_gap(epochs))
    zero, run_a, run_b = ax.get_lines()
    assert list(zero.get_ydata()) == [0, 0]
    # train - test accuracy: a: 0.6-0.5, 0.9-0.8; b: 0.3-0.3, 0.5-0.4
    assert run_a.get_ydata().tolist() == pytest.approx([0.1, 0.1])
    assert run_b.get_ydata().tolist() == pytest.approx([0.0, 0.1])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "batch 32, lr none",
        "batch 512, lr linear + 1 ep warmup",
    ]


def _legend_matches_lines(ax) -> list[str]:
    """The legend's entries, after checking they are exactly the lines drawn with data."""
    entries = [t.get_text() for t in ax.get_legend().get_texts()]
    drawn = [
        line.get_label()
        for line in ax.get_lines()
        if not line.get_label().startswith("_") and np.isfinite(line.get_ydata()).any()
    ]
    assert entries == drawn
    return entries


def test_lr_legends_list_exactly_the_lines_drawn():
    """Lesson 07's near miss: a run with no test accuracy (an all-NaN series) and two runs with
    the same curve got a legend entry each, 6 entries for 4 visible lines."""
    epochs = two_runs_epochs()
    empty = epochs[epochs.run == "a"].assign(run="empty", test_accuracy=np.nan, warmup_epochs=3)
    twin = epochs[epochs.run == "b"].assign(run="twin", warmup_epochs=0)
    ax = plot_lr.plot_accuracy_curves(pd.concat([epochs, empty, twin]), x="epoch")
    assert _legend_matches_lines(ax) == [
        "batch 32, lr none",
        "batch 512, lr linear, with or without 1 ep warmup (same line)",
    ]
    schedules = {
        f"{rule}, {w} warm-up epochs": lr.lr_schedule(0.01, 512, 32, rule, warmup_epochs=w)
        for rule in ("none", "linear")
        for w in (0, 1)
    }
    schedules["empty"] = schedules["linear, 0 warm-up epochs"].assign(lr=np.nan)
    ax = plot_lr.plot_lr_schedules(schedules)
    assert _legend_matches_lines(ax) == [
        "none, 0 / 1 warm-up epochs (same line)",
        "linear, 0 warm-up epochs",
        "linear, 1 warm-up epochs",
    ]


def test_worker_axes_have_whole_numbers_and_knob_axes_readable_names():
    import pandas as pd

    from workshop import plot
    from workshop.plot.tuning import readable

    table = pd.DataFrame({"np": [1, 2], "speedup_throughput": [1.0, 1.4],
                          "efficiency_throughput": [1.0, 0.7]})  # fmt: skip
    for draw in (plot.plot_speedup, plot.plot_efficiency):
        ax = draw(table, metrics=("throughput",))
        ax.figure.canvas.draw()
        ticks = [t for t in ax.get_xticks() if 1 <= t <= 2]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks  # not 1.2, 1.4
    assert readable("cycle_time_ms") == "cycle time (ms)"
    assert readable("fusion_threshold_mb") == "fusion threshold (MB)"
    assert readable("cache_capacity") == "cache capacity"
