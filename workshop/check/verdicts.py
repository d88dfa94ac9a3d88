"""Verdicts on the Horovod practices, from what each rank did (pure functions, no Horovod).

Each practice's verdict is a function of ``ranks``, the per-rank observation dicts written by
:mod:`workshop.check.runner` (schema in :mod:`workshop.check.observe`), sorted by rank, that
returns a :class:`Check`: ``ok`` is True (the practice held), False (it did not) or None (a
warning: it could not be judged, or it is advice rather than an error), and ``evidence`` says
why in numbers. They live one module each in :mod:`workshop.check.practices`; the fixes in
:mod:`workshop.check.fixes`; step counting (and what ``hvd.join`` covered) in
:mod:`workshop.check.steps`. :func:`judge` runs them all; the names are re-exported here, the
one place the rest of the package imports from.
"""

from __future__ import annotations

from workshop.check.evidence import CHECK_NAMES, Check, ranks_text
from workshop.check.fixes import EQUAL_STEPS_FIX, PRACTICE_FIXES, STYLES, style_of, with_fix
from workshop.check.practices.averaged import check_averaged
from workshop.check.practices.broadcast import check_broadcast
from workshop.check.practices.checkpoint import check_rank0_checkpoint
from workshop.check.practices.init import check_init
from workshop.check.practices.lr import check_lr_scaled
from workshop.check.practices.mean import reduction_factor
from workshop.check.practices.sharded import check_sharded
from workshop.check.steps import join_cover, paired_steps, split_epochs, unequal_steps

__all__ = [
    "CHECK_NAMES",
    "EQUAL_STEPS_FIX",
    "PRACTICE_FIXES",
    "STYLES",
    "Check",
    "check_averaged",
    "check_broadcast",
    "check_init",
    "check_lr_scaled",
    "check_rank0_checkpoint",
    "check_sharded",
    "join_cover",
    "judge",
    "paired_steps",
    "ranks_text",
    "split_epochs",
    "style_of",
    "unequal_steps",
    "with_fix",
]


def judge(
    ranks: list[dict],
    base: dict | None = None,
    base_note: str = "no np=1 run",
    framework: str | None = None,
) -> dict[str, Check]:
    """Every practice's verdict, in :data:`CHECK_NAMES` order; each FAIL and WARN carries its
    fix in the script's own API (:data:`PRACTICE_FIXES`, :func:`style_of`)."""
    ranks = sorted(ranks, key=lambda r: r["env_rank"])
    style = style_of(ranks, framework)
    checks = {
        "init": check_init(ranks, framework),
        "broadcast": check_broadcast(ranks),
        "averaged": check_averaged(ranks, style),
        "sharded": check_sharded(ranks),
        "rank0_checkpoint": check_rank0_checkpoint(ranks),
        "lr_scaled": check_lr_scaled(
            ranks, base, base_note, reduction_factor(ranks, paired_steps(ranks))
        ),
    }
    return {name: with_fix(check, name, style) for name, check in checks.items()}
