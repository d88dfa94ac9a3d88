"""LR scaling rules, warmup schedule, accuracy vs batch, rule comparison, gap."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from workshop.analysis import lr
from workshop.findings.lr import lr_findings

# (global batch, rule) -> expected LR from lr = 0.01 tuned for batch 32, k = global / 32:
# linear: 0.01 k; sqrt: 0.01 sqrt(k); none: 0.01.
EXPECTED_LR = [
    (32, "linear", 0.01),  # k = 1: every rule leaves the LR alone
    (32, "sqrt", 0.01),
    (64, "linear", 0.02),  # k = 2
    (64, "sqrt", 0.01 * math.sqrt(2)),  # 0.014142...
    (512, "linear", 0.16),  # k = 16
    (512, "sqrt", 0.04),  # sqrt(16) = 4
    (512, "none", 0.01),
    (48, "linear", 0.015),  # k = 1.5: global batches need not be multiples of the base
]


@pytest.mark.parametrize(("global_batch", "rule", "expected"), EXPECTED_LR)
def test_scaling_rules_give_the_published_values(global_batch, rule, expected):
    assert lr.scaled_lr(0.01, global_batch, 32, rule) == pytest.approx(expected)


def test_analysis_and_training_use_the_one_rule():
    # One home (workshop.rules): the analysis must not carry a second copy that could drift.
    from workshop import rules
    from workshop.train import common

    assert lr.scaled_lr is rules.scaled_lr and common.scaled_lr is rules.scaled_lr
    assert lr.lr_at is rules.lr_at and common.lr_at is rules.lr_at


def test_schedule_warms_up_linearly_to_the_scaled_lr():
    schedule = lr.lr_schedule(
        0.01, 256, 32, "linear", warmup_epochs=1.5, epochs=3, steps_per_epoch=10
    )
    # target 0.01 x 256/32 = 0.08, reached after 1.5 x 10 = 15 steps: +0.07/15 per step
    expected = [0.01 + 0.07 * step / 15 for step in range(15)] + [0.08] * 15
    assert schedule["lr"].tolist() == pytest.approx(expected)
    assert schedule["lr"].iloc[7] == pytest.approx(0.01 + 0.07 * 7 / 15)  # 0.04267
    assert schedule["epoch"].tolist()[:3] == pytest.approx([0.0, 0.1, 0.2])
    flat = lr.lr_schedule(0.01, 128, 32, "sqrt", epochs=1, steps_per_epoch=4)
    assert flat["lr"].tolist() == pytest.approx([0.02] * 4)  # 0.01 x sqrt(4), no warmup
    with pytest.raises(ValueError, match="unknown LR scaling rule 'cubic'"):
        lr.scaled_lr(0.01, 64, 32, "cubic")


RUNS = pd.DataFrame(
    {
        "run": list("abcdef"),
        "global_batch_size": [32, 128, 512, 512, 512, 512],
        "lr_scaling": ["none", "none", "none", "linear", "linear", "sqrt"],
        "warmup_epochs": [0, 0, 0, 0, 1, 0],
        "lr_effective": [0.01, 0.01, 0.01, 0.16, 0.16, 0.04],
        "final_test_accuracy": [0.95, 0.90, 0.70, 0.80, 0.93, 0.85],
        "best_test_accuracy": [0.95, 0.91, 0.72, 0.85, 0.93, 0.86],
    }
)


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
    lines = lr_findings(RUNS)
    assert "0.950 at global batch 32 to 0.700 at 512" in lines[0]
    assert any("linear, 1 warmup epochs" in line and "0.930" in line for line in lines)


def test_time_to_accuracy_and_gap():
    epochs = pd.DataFrame(
        {
            "run": ["a"] * 3 + ["b"] * 3,
            "epoch": [1, 2, 3] * 2,
            "elapsed_s": [1.0, 2.0, 3.0, 0.5, 1.0, 1.5],
            "test_accuracy": [0.5, 0.8, 0.9, 0.3, 0.4, 0.5],
            "train_accuracy": [0.6, 0.9, 0.99, 0.3, 0.45, 0.6],
        }
    )
    hit = lr.time_to_accuracy(epochs, 0.75).set_index("run")
    assert hit.loc["a", "epoch"] == 2 and hit.loc["a", "elapsed_s"] == 2.0
    assert not hit.loc["b", "reached"] and math.isnan(hit.loc["b", "elapsed_s"])
    gap = lr.train_test_gap(epochs)
    assert gap["accuracy_gap"].iloc[2] == pytest.approx(0.09)
    assert "loss_gap" not in gap
