"""The findings lesson 02 (notebooks/02-your-first-horovod-program.ipynb) states, in sentences
with their numbers: from the live ranks' spreads, the runs' epoch tables
(:func:`workshop.lessons.epochs`), the Keras probe's pieces and the Horovod vs DDP benchmark
(:mod:`workshop.lessons`). Each function returns Markdown; the lesson shows them through
``wk.finding`` (the registry, :mod:`workshop.lessons.l02_first_program.exercises`, says which give
an answer away).
"""

from __future__ import annotations

import pandas as pd

#: Replicas whose weights differ by less than this hold the same model (float32 rounding).
SAME_WEIGHTS = 1e-6


def replicas_differ(spread: float) -> str:
    return f"The replicas' weights differ by up to **{spread:.3g}** before a broadcast."


def after_broadcast(spread: float) -> str:
    same = "the same model on both ranks" if spread < SAME_WEIGHTS else "still different"
    return f"After the broadcast they differ by **{spread:.3g}**: {same}."


def drift(spread: float) -> str:
    return (
        f"Without `DistributedOptimizer` the replicas drifted apart: up to **{spread:.3g}** "
        "after one step, and further with every step after it."
    )


def together(spread: float, drifted: float) -> str:
    return (
        f"With it they differ by **{spread:.3g}** after the step (without it: {drifted:.3g}): "
        "every rank applied the same averaged gradient."
    )


def lr_as_printed(schedule_lr, epochs: pd.DataFrame) -> str:
    """The schedule's LR at each epoch's last step against the LR the run printed."""
    rows = [
        f"| {int(e)} | {s:.5f} | {p:.5f} |"
        for e, s, p in zip(epochs.epoch, schedule_lr, epochs.lr, strict=True)
    ]
    agree = max(abs(s - p) for s, p in zip(schedule_lr, epochs.lr, strict=True)) < 1e-4
    verdict = "they agree" if agree else "**they differ**"
    return (
        "| epoch | schedule, last step | printed by the run |\n| ---: | ---: | ---: |\n"
        + "\n".join(rows)
        + f"\n\nTo the printed digits {verdict}."
    )


def resume(resumed: pd.DataFrame, whole: pd.DataFrame) -> str:
    """The resumed run's first epoch against the same epoch of the uninterrupted run."""
    first = resumed.iloc[0]
    same_epoch = whole.set_index("epoch").loc[int(first.epoch)]
    equal = first.train_loss == same_epoch.train_loss
    verdict = "the same, to the last printed digit" if equal else "**not** the same"
    return (
        f"Epoch {int(first.epoch)} after resuming: train loss {first.train_loss}; without "
        f"stopping: {same_epoch.train_loss}: {verdict}."
    )


def keras_here(here: pd.DataFrame) -> str:
    failing = sorted(here[(here.source == "horovod") & ~here.works].piece)
    return "Failing with the workshop's build: " + (", ".join(failing) or "**none**") + "."


def seeded(pieces: pd.DataFrame) -> str:
    equal = int(pieces.seeded_weights_equal.sum())
    return (
        f"Equal initial weights on both ranks after `tf.random.set_seed(0)`: in **{equal} of "
        f"{len(pieces)}** probe runs."
    )


def ddp_same(ddp: pd.DataFrame, hvd: pd.DataFrame) -> str:
    gap = (ddp.train_loss - hvd.train_loss).abs().max()
    return (
        f"Largest train-loss difference between the DDP and the Horovod run, over {len(ddp)} "
        f"epochs: **{gap:.4f}**."
    )


def ddp_speed(bench: dict) -> str:
    pairs = bench["ddp_over_horovod_per_repeat"]
    return (
        f"DDP / Horovod samples/s: **{bench['ddp_over_horovod_median']:.3f}** (ratio of the "
        f"medians); per interleaved pair from {min(pairs):.3f} to {max(pairs):.3f}, median "
        f"{bench['ddp_over_horovod_pair_median']:.3f}. {bench['verdict'].rstrip('.')}."
    )


def summary(serial: pd.DataFrame, hvd: pd.DataFrame) -> str:
    return (
        f"- Horovod on 2 processes: train loss {hvd.train_loss.iloc[0]:.3f} -> "
        f"{hvd.train_loss.iloc[-1]:.3f} in {len(hvd)} epochs of 20 steps; the serial script "
        f"{serial.train_loss.iloc[-1]:.3f} after as many steps."
    )


def skeleton_report(report) -> str:
    """`workshop check`'s report of the untouched skeleton, as it printed it, and its verdicts
    counted as exercise 02.3 counts them (its last line counts only the FAILs as missing)."""
    checks = report.checks
    ok = sum(c.ok is True for c in checks.values())
    fail = sum(c.ok is False for c in checks.values())
    warn = [name for name, c in checks.items() if c.ok is None]
    counted = f"\n\n**{ok} of {len(checks)} OK**"
    if fail or warn:
        counted += f": {fail} FAIL" + (
            f", {len(warn)} WARN ({', '.join(warn)}: the evidence could not settle it)"
            if warn
            else ""
        )
        counted += ". The report's last line counts only the FAILs as missing; a WARN is not OK."
    return "```\n" + report.text().rstrip() + "\n```" + counted


def summary_answers(
    skeleton_ok: int, solution_ok: int, practices: int, failing: set, failing_here: set
) -> str:
    return (
        f"- `workshop check`: {skeleton_ok} of {practices} practices OK in the untouched "
        f"skeleton, {solution_ok} of {practices} in the solution.\n"
        f"- Horovod 0.28.1's Keras pieces that fail with tf-keras as released: "
        f"{', '.join(sorted(failing)) or 'none'} (the workshop's build: "
        f"{', '.join(sorted(failing_here)) or 'none'})."
    )
