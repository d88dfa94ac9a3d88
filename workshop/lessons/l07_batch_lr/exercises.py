"""Lesson 07 (notebooks/07-batch-size-and-learning-rate.ipynb): its exercises and the findings
it states.

The lesson's data: ``batch``, a sweep of one-worker runs at several batch sizes and a fixed
learning rate; ``lr``, a sweep of a small and a large global batch under every LR rule, with
and without warm-up (both the learner's ``RUN_DIR`` when set); ``materials``, the synthetic
small-model sweep; ``target``, the test accuracy of "time to accuracy".
"""

from __future__ import annotations

from workshop.lessons.entries import Exercise, Finding, Slip
from workshop.lessons.l07_batch_lr import findings as said

#: The recordings the lesson opens by default (its parameters cell names the same).
RECORDINGS = {
    "batch": "sweeps/batch-size-mnist",
    "lr": "sweeps/lr-rules-mnist",
    "materials": "sweeps/materials",
}


def _recovered(lr) -> float:
    return said.recovery(lr)["recovered"]


def _over_reference(lr) -> float:
    won = said.recovery(lr)
    gained = won["best"].final_test_accuracy - won["fixed"].final_test_accuracy
    return float(gained / won["reference_accuracy"])


def _k_without_workers(lr) -> float:
    run = said.big(lr)
    return float(run.lr * int(run.batch_size) / int(run.base_batch_size))


EXERCISES = (
    Exercise(
        "07.1",
        data=("batch",),
        recorded={"batch": RECORDINGS["batch"]},
        expected=lambda batch: int(said.largest(batch).steps),
        minutes=4,
        hints=(
            "How many full batches of that size fit into the training images?",
            "Divide the images by the batch size and drop the remainder: the last, incomplete "
            "batch is not a step.",
        ),
        slips=(
            Slip(
                "the incomplete last batch counted",
                lambda batch: int(said.largest(batch).steps) + 1,
            ),
        ),
        solution="One optimizer step per full batch; the incomplete last batch is dropped.",
    ),
    Exercise(
        "07.2",
        data=("lr",),
        recorded={"lr": RECORDINGS["lr"]},
        expected=lambda lr: said.scaled_lr_np4(lr, "linear"),
        sig_figs=2,
        minutes=5,
        hints=(
            "How many times larger than the base batch is the global batch at np = 4?",
            "That factor k is the global batch (workers x per-worker batch) over the base "
            "batch; the linear rule multiplies the base lr by k.",
        ),
        slips=(
            Slip("k without the workers", _k_without_workers),
            Slip("the square-root rule", lambda lr: said.scaled_lr_np4(lr, "sqrt")),
        ),
        solution="k = 4 x the per-worker batch / the base batch; the linear rule gives lr x k.",
    ),
    Exercise(
        "07.3",
        data=("lr",),
        recorded={"lr": RECORDINGS["lr"]},
        expected=lambda lr: said.scaled_lr_np4(lr, "sqrt"),
        sig_figs=2,
        minutes=3,
        hints=(
            "Which power of the batch factor k does the square-root rule use?",
            "The base lr times the square root of the same k as in exercise 07.2.",
        ),
        slips=(Slip("the linear rule", lambda lr: said.scaled_lr_np4(lr, "linear")),),
        solution="lr x sqrt(k), which keeps the variance of the update constant.",
    ),
    Exercise(
        "07.4",
        data=("lr",),
        recorded={"lr": RECORDINGS["lr"]},
        expected=_recovered,
        sig_figs=2,
        minutes=15,
        hints=(
            "Which three runs do you need, and which number from each?",
            "Read every run's config and the last line of its metrics; take the reference "
            "(smallest np x batch), the large-batch run with a fixed lr and no warm-up, and the "
            "best large-batch run; divide what the best won back by what the fixed one lost.",
        ),
        slips=(Slip("won back over the reference accuracy, not over the loss", _over_reference),),
        solution="(best - fixed) / (reference - fixed), medians where runs share a batch and "
        "a rule.",
    ),
)


FINDINGS = (
    Finding("07.runs", ("batch",), said.runs_read),
    Finding("07.plateau", ("batch",), said.plateau_found),
    Finding("07.fixed-lr", ("batch",), said.fixed_lr),
    Finding("07.fixed-lr-steps", ("batch",), said.fixed_lr_steps, after=("07.1",)),
    Finding("07.large-batch", ("lr",), said.large_batch),
    Finding("07.rules", ("lr",), said.rules_compared, after=("07.4",)),
    Finding("07.reached", ("lr", "target"), said.reached),
    Finding("07.reached-one-worker", ("batch", "target"), said.reached_one_worker),
    Finding("07.gap", ("lr",), said.gap),
    Finding("07.materials", ("materials",), said.materials),
    Finding("07.summary", ("batch", "lr", "materials", "target"), said.summary),
    Finding("07.summary-answers", ("batch", "lr"), said.summary_answers, after=("07.1", "07.4")),
)


def numbers(batch, lr, materials, target: float) -> dict:
    """The values the lesson's replay keeps (data/expected/07-*.json)."""
    plateau, won = said.plateau(batch), said.recovery(lr)
    best, speedups = won["best"], said.materials_speedups(materials)
    return {
        "steps_at_largest_batch": int(said.largest(batch).steps),
        "plateau_batch_size": plateau["plateau_batch_size"],
        "plateau_levels_off": plateau["levels_off"],
        "plateau_speedup": plateau["speedup_at_plateau"],
        "fixed_lr_accuracy_smallest_batch": said.smallest(batch).final_test_accuracy,
        "fixed_lr_accuracy_largest_batch": said.largest(batch).final_test_accuracy,
        "linear_lr_np4": said.scaled_lr_np4(lr, "linear"),
        "sqrt_lr_np4": said.scaled_lr_np4(lr, "sqrt"),
        "reference_accuracy": said.reference(lr).final_test_accuracy,
        "large_batch_fixed_lr_accuracy": won["fixed"].final_test_accuracy,
        "best_rule": f"{best.lr_scaling}, warmup {best.warmup_epochs:g}",
        "best_rule_accuracy": best.final_test_accuracy,
        "recovered_share": won["recovered"],
        "runs_reaching_target": int(said.time_to_accuracy(lr, target).reached.sum()),
        "materials_speedup_small_batch": speedups[min(speedups)],
        "materials_speedup_large_batch": speedups[max(speedups)],
    }
