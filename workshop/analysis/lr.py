"""Batch size and learning rate: accuracy at large batches, LR scaling rules, warmup.

With data parallelism the effective (global) batch is the per-worker batch times the number of
workers, so an epoch has k = global / base times fewer optimizer steps than with the base
batch. At a fixed learning rate the model then learns less per epoch (seed 003: at batch 700
the test error is an order of magnitude worse than at 75). The remedies the workshop compares:

* ``linear`` scaling (Goyal et al. 2017): lr x k,
* ``sqrt`` scaling (Krizhevsky 2014): lr x sqrt(k),
* gradual warmup: ramp from the base lr to the scaled lr over the first epochs, so the large
  lr does not blow up the still-random network.

Inputs are the runs / epochs DataFrames of :func:`workshop.readers.sweep.read_sweep`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from workshop.frames import require_columns

# The rules the training programs follow (one home for both), so the analysis can never
# drift from what ran.
from workshop.rules import LR_SCALINGS, lr_at, scaled_lr  # noqa: F401

RULES = LR_SCALINGS


def lr_schedule(
    base_lr: float,
    global_batch: int,
    base_batch: int,
    rule: str,
    *,
    warmup_epochs: float = 0.0,
    epochs: int = 5,
    steps_per_epoch: int = 100,
) -> pd.DataFrame:
    """Learning rate at every step: warmup from ``base_lr`` to the scaled lr, then constant.

    Args:
        base_lr: learning rate that suits ``base_batch``.
        global_batch: per-worker batch x workers.
        base_batch: the batch ``base_lr`` was tuned for.
        rule: ``none``, ``linear`` or ``sqrt``.
        warmup_epochs: length of the linear warmup, in epochs (0 = none).
        epochs: epochs to tabulate.
        steps_per_epoch: optimizer steps per epoch.

    Returns:
        DataFrame ``step``, ``epoch`` (fractional, 0 at the start), ``lr``.
    """
    target = scaled_lr(base_lr, global_batch, base_batch, rule)
    steps = np.arange(epochs * steps_per_epoch)
    lr = [lr_at(int(step), steps_per_epoch, base_lr, target, warmup_epochs) for step in steps]
    return pd.DataFrame({"step": steps, "epoch": steps / steps_per_epoch, "lr": lr})


def accuracy_vs_batch(runs: pd.DataFrame, *, rule: str = "none") -> pd.DataFrame:
    """Final and best test accuracy against the global batch size at one LR rule.

    Args:
        runs: one row per run with ``global_batch_size``, ``lr_scaling``, ``warmup_epochs``,
            ``final_test_accuracy`` and ``best_test_accuracy``; optional ``steps``.
        rule: keep runs with this LR rule and no warmup (``none`` = fixed LR).

    Returns:
        One row per global batch: ``global_batch_size``, ``runs``, ``final_test_accuracy``,
        ``best_test_accuracy`` (medians), ``drop_vs_smallest`` (final accuracy of the smallest
        batch minus this one's).

    Raises:
        ValueError: if a column is missing or no run matches.
    """
    cols = ["global_batch_size", "lr_scaling", "warmup_epochs", "final_test_accuracy"]
    require_columns(runs, cols, "accuracy_vs_batch")
    sel = runs[(runs["lr_scaling"] == rule) & (runs["warmup_epochs"].fillna(0) == 0)]
    if sel.empty:
        raise ValueError(f"accuracy_vs_batch: no run with lr_scaling={rule!r} and no warmup")
    best = "best_test_accuracy" if "best_test_accuracy" in sel else "final_test_accuracy"
    g = (
        sel.groupby("global_batch_size")
        .agg(
            runs=("final_test_accuracy", "size"),
            final_test_accuracy=("final_test_accuracy", "median"),
            best_test_accuracy=(best, "median"),
        )
        .reset_index()
        .sort_values("global_batch_size")
        .reset_index(drop=True)
    )
    g["drop_vs_smallest"] = g["final_test_accuracy"].iloc[0] - g["final_test_accuracy"]
    return g


def compare_lr_rules(runs: pd.DataFrame, *, global_batch: int | None = None) -> pd.DataFrame:
    """Final accuracy per LR rule and warmup at one large global batch.

    Args:
        runs: one row per run with ``global_batch_size``, ``lr_scaling``, ``warmup_epochs``,
            ``lr_effective``, ``final_test_accuracy``; optional ``best_test_accuracy``,
            ``train_time_s``.
        global_batch: the batch to compare at (default: the largest one that has more than one
            LR rule).

    Returns:
        One row per (lr_scaling, warmup_epochs), best first: those two, ``global_batch_size``,
        ``lr_effective``, ``final_test_accuracy``, ``best_test_accuracy``, ``runs``.

    Raises:
        ValueError: if a column is missing or no batch has several rules.
    """
    cols = ["global_batch_size", "lr_scaling", "warmup_epochs", "final_test_accuracy"]
    require_columns(runs, cols, "compare_lr_rules")
    df = runs.copy()
    df["warmup_epochs"] = df["warmup_epochs"].fillna(0)
    if global_batch is None:
        variety = df.groupby("global_batch_size").apply(
            lambda g: len(g[["lr_scaling", "warmup_epochs"]].drop_duplicates()),
            include_groups=False,
        )
        candidates = variety[variety > 1]
        if candidates.empty:
            raise ValueError("compare_lr_rules: no batch size was run with more than one LR rule")
        global_batch = int(candidates.index.max())
    sel = df[df["global_batch_size"] == global_batch]
    if "lr_effective" not in sel:
        sel = sel.assign(lr_effective=math.nan)
    best = "best_test_accuracy" if "best_test_accuracy" in sel else "final_test_accuracy"
    g = (
        sel.groupby(["lr_scaling", "warmup_epochs"])
        .agg(
            lr_effective=("lr_effective", "median"),
            final_test_accuracy=("final_test_accuracy", "median"),
            best_test_accuracy=(best, "median"),
            runs=("final_test_accuracy", "size"),
        )
        .reset_index()
        .sort_values("final_test_accuracy", ascending=False)
        .reset_index(drop=True)
    )
    g.insert(2, "global_batch_size", global_batch)
    return g


def time_to_accuracy(epochs: pd.DataFrame, target: float) -> pd.DataFrame:
    """First epoch, and the training time, at which each run reaches a test accuracy.

    Args:
        epochs: one row per epoch with ``run``, ``epoch``, ``test_accuracy`` and ``elapsed_s``.
        target: the test accuracy to reach.

    Returns:
        One row per run: ``run``, ``reached`` (bool), ``epoch`` and ``elapsed_s`` of the first
        epoch at or above ``target`` (NaN if never).

    Raises:
        ValueError: if a column is missing.
    """
    require_columns(epochs, ["run", "epoch", "test_accuracy", "elapsed_s"], "time_to_accuracy")
    rows = []
    for run, g in epochs.sort_values("epoch").groupby("run", sort=False):
        hit = g[g["test_accuracy"] >= target]
        rows.append(
            {
                "run": run,
                "reached": not hit.empty,
                "epoch": float(hit["epoch"].iloc[0]) if len(hit) else math.nan,
                "elapsed_s": float(hit["elapsed_s"].iloc[0]) if len(hit) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def train_test_gap(epochs: pd.DataFrame) -> pd.DataFrame:
    """Generalisation gap per epoch: training minus test accuracy (and test minus train loss).

    Args:
        epochs: one row per epoch with ``run``, ``epoch``, ``train_accuracy``,
            ``test_accuracy``; optional ``train_loss``, ``test_loss``.

    Returns:
        ``run``, ``epoch``, ``train_accuracy``, ``test_accuracy``, ``accuracy_gap`` and, with
        losses, ``loss_gap`` (test_loss - train_loss). A positive, growing gap means the model
        fits the training set better than it generalises (seed 003's warning for very large
        batches). The run's ``global_batch_size``, ``lr_scaling`` and ``warmup_epochs`` come
        along when ``epochs`` has them (for labels).

    Raises:
        ValueError: if a column is missing.
    """
    require_columns(epochs, ["run", "epoch", "train_accuracy", "test_accuracy"], "train_test_gap")
    labels = [c for c in ("global_batch_size", "lr_scaling", "warmup_epochs") if c in epochs]
    out = epochs[["run", "epoch", "train_accuracy", "test_accuracy", *labels]].copy()
    out["accuracy_gap"] = out["train_accuracy"] - out["test_accuracy"]
    if {"train_loss", "test_loss"} <= set(epochs):
        out["loss_gap"] = epochs["test_loss"] - epochs["train_loss"]
    return out.reset_index(drop=True)
