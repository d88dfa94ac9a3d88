"""LR scaling rules, warmup schedule, accuracy vs batch, rule comparison, gap."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from workshop.analysis import lr
from workshop.train import common


@pytest.mark.parametrize("rule", ["none", "linear", "sqrt"])
def test_rules_match_the_training_programs(rule):
    for global_batch in (32, 64, 512):
        assert lr.scaled_lr(0.01, global_batch, 32, rule) == pytest.approx(
            common.scaled_lr(0.01, global_batch, 32, rule)
        )


def test_schedule_matches_the_training_programs_warmup():
    schedule = lr.lr_schedule(0.01, 256, 32, "linear", warmup_epochs=1.5, epochs=3,
                              steps_per_epoch=10)  # fmt: skip
    target = common.scaled_lr(0.01, 256, 32, "linear")
    expected = [common.lr_at(step, 10, 0.01, target, 1.5) for step in range(30)]
    assert schedule["lr"].tolist() == pytest.approx(expected)
    assert schedule["lr"].iloc[0] == 0.01 and schedule["lr"].iloc[-1] == pytest.approx(0.08)
    flat = lr.lr_schedule(0.01, 128, 32, "sqrt", epochs=1, steps_per_epoch=4)
    assert flat["lr"].tolist() == pytest.approx([0.02] * 4)
    with pytest.raises(ValueError, match="unknown LR scaling rule"):
        lr.scaled_lr(0.01, 64, 32, "cubic")


RUNS = pd.DataFrame({
    "run": list("abcdef"),
    "global_batch_size": [32, 128, 512, 512, 512, 512],
    "lr_scaling": ["none", "none", "none", "linear", "linear", "sqrt"],
    "warmup_epochs": [0, 0, 0, 0, 1, 0],
    "lr_effective": [0.01, 0.01, 0.01, 0.16, 0.16, 0.04],
    "final_test_accuracy": [0.95, 0.90, 0.70, 0.80, 0.93, 0.85],
    "best_test_accuracy": [0.95, 0.91, 0.72, 0.85, 0.93, 0.86],
})  # fmt: skip


def test_accuracy_vs_batch_at_fixed_lr():
    acc = lr.accuracy_vs_batch(RUNS)
    assert acc["global_batch_size"].tolist() == [32, 128, 512]
    assert acc["drop_vs_smallest"].tolist() == pytest.approx([0, 0.05, 0.25])
    with pytest.raises(ValueError, match="no run with lr_scaling='sqrt' and no warmup"):
        lr.accuracy_vs_batch(RUNS[RUNS["lr_scaling"] == "none"], rule="sqrt")


def test_compare_rules_picks_the_large_batch_and_ranks():
    rules = lr.compare_lr_rules(RUNS)
    assert set(rules["global_batch_size"]) == {512}
    assert rules.iloc[0][["lr_scaling", "warmup_epochs"]].tolist() == ["linear", 1]
    assert rules.iloc[-1]["lr_scaling"] == "none"
    with pytest.raises(ValueError, match="more than one LR rule"):
        lr.compare_lr_rules(RUNS.iloc[:3])
    lines = lr.lr_findings(RUNS)
    assert "0.950 at global batch 32 to 0.700 at 512" in lines[0]
    assert any("linear, 1 warmup epochs" in line and "0.930" in line for line in lines)


def test_time_to_accuracy_and_gap():
    epochs = pd.DataFrame({
        "run": ["a"] * 3 + ["b"] * 3, "epoch": [1, 2, 3] * 2,
        "elapsed_s": [1.0, 2.0, 3.0, 0.5, 1.0, 1.5],
        "test_accuracy": [0.5, 0.8, 0.9, 0.3, 0.4, 0.5],
        "train_accuracy": [0.6, 0.9, 0.99, 0.3, 0.45, 0.6],
    })  # fmt: skip
    hit = lr.time_to_accuracy(epochs, 0.75).set_index("run")
    assert hit.loc["a", "epoch"] == 2 and hit.loc["a", "elapsed_s"] == 2.0
    assert not hit.loc["b", "reached"] and math.isnan(hit.loc["b", "elapsed_s"])
    gap = lr.train_test_gap(epochs)
    assert gap["accuracy_gap"].iloc[2] == pytest.approx(0.09)
    assert "loss_gap" not in gap
