"""The findings lesson 07 (notebooks/07-batch-size-and-learning-rate.ipynb) states, in
sentences with their numbers, from :mod:`workshop.analysis.scaling` and the LR rules: each
function takes the lesson's sweeps (Runs of folders of run directories) and returns Markdown.
The registry (:mod:`workshop.lessons.l07_batch_lr.exercises`) says which give an answer away.
"""

from __future__ import annotations

from functools import cache

import pandas as pd

from workshop import analysis, readers
from workshop.findings.scaling import plateau_findings


@cache
def _sweep(folder: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return readers.read_sweep(folder)


def one_worker(batch) -> pd.DataFrame:
    """The one-worker runs at a fixed learning rate, one per batch size."""
    runs = _sweep(str(batch.path))[0]
    return runs[(runs.np == 1) & (runs.lr_scaling == "none")]


def batch_epochs(batch) -> pd.DataFrame:
    return _sweep(str(batch.path))[1]


def train_images(batch) -> int:
    return int(readers.read_run(one_worker(batch).path.iloc[0])["data"]["train_samples"])


def largest(batch) -> pd.Series:
    runs = one_worker(batch)
    return runs.loc[runs.batch_size.idxmax()]


def smallest(batch) -> pd.Series:
    runs = one_worker(batch)
    return runs.loc[runs.batch_size.idxmin()]


def plateau(batch) -> dict:
    return analysis.batch_size_plateau(one_worker(batch))


def lr_runs(lr) -> pd.DataFrame:
    runs = _sweep(str(lr.path))[0].copy()
    runs["base_batch_size"] = runs.base_batch_size.fillna(runs.batch_size)  # the default
    return runs


def lr_epochs(lr) -> pd.DataFrame:
    return _sweep(str(lr.path))[1]


def by_rule(lr) -> pd.DataFrame:
    """Median accuracy per rule at the large global batch, best first."""
    return analysis.compare_lr_rules(lr_runs(lr))


def big(lr) -> pd.Series:
    """A large-batch run with a scaled learning rate: its np, batch, base lr and base batch."""
    runs, rules = lr_runs(lr), by_rule(lr)
    chosen = runs[
        (runs.global_batch_size == rules.global_batch_size.iloc[0]) & (runs.lr_scaling != "none")
    ]
    return chosen.iloc[0]


def scaled_lr_np4(lr, rule: str) -> float:
    """The learning rate ``rule`` gives the large-batch runs' configuration at np = 4."""
    run = big(lr)
    return analysis.scaled_lr(run.lr, 4 * int(run.batch_size), int(run.base_batch_size), rule)


def reference(lr) -> pd.Series:
    runs = lr_runs(lr)
    return runs.loc[runs.global_batch_size.idxmin()]


def recovery(lr) -> dict:
    """The reference accuracy (median at the smallest global batch), the fixed-LR and the best
    large-batch rows of :func:`by_rule`, and the share of the lost accuracy won back."""
    runs, rules = lr_runs(lr), by_rule(lr)
    small = runs[runs.global_batch_size == runs.global_batch_size.min()]
    reference_accuracy = float(small.final_test_accuracy.median())
    fixed = rules[(rules.lr_scaling == "none") & (rules.warmup_epochs == 0)].iloc[0]
    best = rules.iloc[0]
    lost = reference_accuracy - fixed.final_test_accuracy
    return {
        "reference_accuracy": reference_accuracy,
        "fixed": fixed,
        "best": best,
        "recovered": float((best.final_test_accuracy - fixed.final_test_accuracy) / lost),
    }


def time_to_accuracy(lr, target: float) -> pd.DataFrame:
    runs = lr_runs(lr)
    return analysis.time_to_accuracy(lr_epochs(lr), target).merge(
        runs[["run", "global_batch_size", "lr_scaling", "warmup_epochs"]]
    )


def materials_speedups(materials) -> dict[int, float]:
    """Throughput speedup of np=2 over np=1 per batch size of the synthetic model's sweep."""
    runs = _sweep(str(materials.path))[0]
    return {
        key["batch_size"]: float(
            analysis.speedup_table(group).set_index("np").speedup_throughput[2]
        )
        for key, group in analysis.scaling_groups(runs)
    }


def changed(ratio: float, noun: str) -> str:
    """``noun`` rose/fell by a measured ratio, the verb chosen by the value."""
    if abs(ratio - 1) < 0.005:
        return f"{noun} stayed the same ({ratio:.2f}x)"
    return f"{noun} {'rose' if ratio > 1 else 'fell'} to {ratio:.2f}x"


# --- the findings ------------------------------------------------------------------------


def runs_read(batch) -> str:
    runs = one_worker(batch)
    return (
        f"{len(runs)} one-worker runs at a fixed learning rate, batch sizes "
        f"{sorted(runs.batch_size)}, **{train_images(batch):,} training images**."
    )


def plateau_found(batch) -> str:
    return " ".join(plateau_findings(plateau(batch)))


def fixed_lr(batch) -> str:
    small, large = smallest(batch), largest(batch)
    return (
        f"After {small.epochs_done} epochs at lr {small.lr_effective:g}: test accuracy "
        f"**{small.final_test_accuracy:.3f}** at batch {small.batch_size}, "
        f"**{large.final_test_accuracy:.3f}** at batch {large.batch_size} (chance is 0.100), "
        f"while {changed(large.samples_per_s / small.samples_per_s, 'throughput (samples/s)')}"
        f" and {changed(large.steady_epoch_time_s / small.steady_epoch_time_s, 'epoch time')}"
        " of batch "
        f"{small.batch_size}'s."
    )


def fixed_lr_steps(batch) -> str:
    small, large = smallest(batch), largest(batch)
    return (
        f"An epoch at batch {large.batch_size} trains {large.steps * large.batch_size:,.0f} of "
        f"the {train_images(batch):,} images (the incomplete last batch is dropped), and "
        f"{small.steps * small.batch_size:,.0f} at batch {small.batch_size}; steps: "
        f"{small.steps * small.epochs_done:.0f} and {large.steps * large.epochs_done:.0f} in "
        "all."
    )


def large_batch(lr) -> str:
    run = big(lr)
    return (
        f"Large-batch runs: np={run.np}, **{run.batch_size} per worker** (global batch "
        f"{run.global_batch_size}), **base lr {run.lr:g}** tuned for **batch "
        f"{run.base_batch_size:.0f}**."
    )


def rules_compared(lr) -> str:
    ref, won = reference(lr), recovery(lr)
    fixed, best = won["fixed"], won["best"]
    return (
        f"Global batch {ref.global_batch_size:.0f}: {ref.final_test_accuracy:.3f}. Global batch "
        f"{best.global_batch_size:.0f}: {fixed.final_test_accuracy:.3f} at a fixed lr, "
        f"**{best.final_test_accuracy:.3f}** with {best.lr_scaling} scaling and "
        f"{best.warmup_epochs:g} warm-up epochs: **{won['recovered']:.0%}** of the lost "
        f"accuracy back in the same {ref.epochs_done} epochs."
    )


def reached(lr, target: float) -> str:
    from workshop.plot import run_label

    epochs, runs = lr_epochs(lr), lr_runs(lr)
    done = time_to_accuracy(lr, target)
    horizon = epochs.groupby("run").elapsed_s.max().min()
    at = epochs[epochs.elapsed_s <= horizon].sort_values("epoch").groupby("run").last()
    leader = runs.set_index("run").loc[at.test_accuracy.idxmax()]
    same = runs[
        (runs.global_batch_size == big(lr).global_batch_size) & (runs.lr_scaling == "none")
    ]
    text = (
        f"{done.reached.sum()} of {len(done)} runs reach test accuracy {target}. After "
        f"{horizon:.1f} s of training (the shortest run) the best test accuracy is "
        f"**{at.test_accuracy.max():.3f}**, by {run_label(leader)}."
    )
    if len(same) > 1:
        text += (
            f" Warm-up changes nothing under the 'none' rule (lr stays "
            f"{same.lr_effective.iloc[0]:g}): its {len(same)} runs end at test accuracy "
            f"{', '.join(f'{a:.3f}' for a in same.final_test_accuracy)} and trained for "
            f"{', '.join(f'{t:.1f}' for t in same.train_time_s)} s: run-to-run timing noise "
            "(one run each)."
        )
    return text


def reached_one_worker(batch, target: float) -> str:
    runs = one_worker(batch)
    epochs = batch_epochs(batch)
    done = analysis.time_to_accuracy(epochs[epochs.run.isin(runs.run)], target).merge(
        runs[["run", "batch_size"]]
    )
    first = done.loc[done.elapsed_s.idxmin()]
    return (
        f"One worker: {done.reached.sum()} of {len(done)} batch sizes reach {target}; the "
        f"first is batch {first.batch_size} after {first.elapsed_s:.1f} s (epoch "
        f"{first.epoch:.0f})."
    )


#: Training accuracies that differ by at most this much count as comparable, the condition of
#: Keskar et al. (2017)'s generalisation gap (our choice: they compare runs that both fit their
#: training set, near 100 %).
COMPARABLE_TRAIN_ACCURACY = 0.02


def gap(lr) -> str:
    """Each run's training minus test accuracy, and the generalisation gap as Keskar et al.
    (2017) define it: the large-batch runs' test deficit against the small-batch reference, a
    gap only where their training accuracies are comparable (else it is under-training)."""
    runs, ref = lr_runs(lr), reference(lr)
    final = analysis.train_test_gap(lr_epochs(lr)).sort_values("epoch").groupby("run").last()
    large = final.loc[runs[runs.global_batch_size == big(lr).global_batch_size].run]
    deficit = final.test_accuracy[ref.run] - large.test_accuracy
    behind = final.train_accuracy[ref.run] - large.train_accuracy
    comparable = behind.abs() <= COMPARABLE_TRAIN_ACCURACY
    text = (
        f"Global batch {big(lr).global_batch_size:.0f}: final training accuracy "
        f"{large.train_accuracy.min():.3f} to {large.train_accuracy.max():.3f}, training minus "
        f"test {large.accuracy_gap.min():+.3f} to {large.accuracy_gap.max():+.3f}. Global batch "
        f"{ref.global_batch_size:.0f}: training accuracy {final.train_accuracy[ref.run]:.3f}, "
        f"training minus test {final.accuracy_gap[ref.run]:+.3f}.\n\n"
        f"Keskar et al.'s generalisation gap: the large-batch runs' test accuracy is "
        f"{deficit.min():.3f} to {deficit.max():.3f} below the reference's, "
    )
    if not comparable.any():
        return text + (
            f"but their training accuracy is {behind.min():.3f} to {behind.max():.3f} below it "
            f"too (comparable: within {COMPARABLE_TRAIN_ACCURACY}). That deficit is "
            "under-training, not the gap: these runs cannot measure it."
        )
    fit = deficit[comparable]
    return text + (
        f"and {comparable.sum()} of {len(large)} reach a training accuracy within "
        f"{COMPARABLE_TRAIN_ACCURACY} of it: their test deficit, {fit.min():.3f} to "
        f"{fit.max():.3f}, is the gap."
    )


def materials(materials) -> str:
    runs = _sweep(str(materials.path))[0]
    source = readers.read_run(runs.path.iloc[0])["data"]["source"]
    lines = [f"Synthetic data in every run: {bool(runs.synthetic_data.all())} ({source})."]
    for key, group in analysis.scaling_groups(runs):
        sync = analysis.sync_overhead(group).set_index("np")
        speedup = analysis.speedup_table(group).set_index("np").speedup_throughput[2]
        lines.append(
            f"- batch {key['batch_size']}: one worker computes a step in "
            f"{sync.step_time_ms[1]:.1f} ms; at np=2 a step takes {sync.step_time_ms[2]:.1f} ms "
            f"({sync.sync_share[2]:.0%} synchronisation); throughput speedup {speedup:.2f}x"
        )
    return "\n".join(lines)


def summary(batch, lr, materials, target: float) -> str:
    done, speedups = time_to_accuracy(lr, target), materials_speedups(materials)
    low, high = min(speedups), max(speedups)
    return (
        f"- One worker: {plateau_found(batch)}\n"
        f"- {done.reached.sum()} of {len(done)} LR runs reach test accuracy {target}.\n"
        f"- The tiny synthetic model: a second worker gives {speedups[low]:.2f}x throughput at "
        f"batch {low} and {speedups[high]:.2f}x at batch {high}."
    )


def summary_answers(batch, lr) -> str:
    small, large = smallest(batch), largest(batch)
    ref, won = reference(lr), recovery(lr)
    return (
        f"- At a fixed learning rate, test accuracy went from {small.final_test_accuracy:.3f} "
        f"(batch {small.batch_size}) to {large.final_test_accuracy:.3f} (batch "
        f"{large.batch_size}, {large.steps:.0f} steps per epoch) in the same epochs.\n"
        f"- Global batch {won['best'].global_batch_size:.0f}: "
        f"{won['fixed'].final_test_accuracy:.3f} at a fixed lr, "
        f"{won['best'].final_test_accuracy:.3f} with {won['best'].lr_scaling} scaling and "
        f"{won['best'].warmup_epochs:g} warm-up epochs ({won['recovered']:.0%} of the loss "
        f"recovered; global batch {ref.global_batch_size:.0f} reached "
        f"{ref.final_test_accuracy:.3f})."
    )
