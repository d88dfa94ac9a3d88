"""``averaged``: every rank applied the same, Horovod-averaged gradients."""

from __future__ import annotations

import math

from workshop.check.evidence import Check, differing, no_steps
from workshop.check.fixes import EQUAL_STEPS_FIX
from workshop.check.steps import unequal_steps


def check_averaged(ranks: list[dict], style: str = "torch") -> Check:
    """The gradients each step applied were identical on every rank, and Horovod reduced; the
    ranks made the same number of steps (:func:`unequal_steps`)."""
    if (empty := no_steps(ranks)) is not None:
        return empty
    unequal = unequal_steps(ranks)
    if unequal is not None:
        return Check(False, unequal, fix=EQUAL_STEPS_FIX[style])
    counts = [len(r["steps"]) for r in ranks]
    steps = min(counts)
    bad = []
    for k in range(steps):
        grads = [r["steps"][k]["grads"] for r in ranks]
        differ, total = differing(grads)
        if differ:
            bad.append((k + 1, differ, total))
    reduced = ranks[0]["steps"][-1]["allreduces"]
    if bad:
        k, differ, total = bad[0]
        norms = " vs ".join(
            f"{math.sqrt(sum(g[1] ** 2 for g in r['steps'][k - 1]['grads'])):.4g}" for r in ranks
        )
        names = ", ".join(str(r["env_rank"]) for r in ranks)
        return Check(
            False,
            f"step {k}: gradients differ on {differ} of {total} tensors "
            f"(gradient norm {norms} on ranks {names}); they differ at {len(bad)} of {steps} "
            "steps, so each rank applied its "
            f"own gradients ({reduced} tensors allreduced in all): wrap the optimizer "
            "in hvd.DistributedOptimizer (or the tape in hvd.DistributedGradientTape)",
        )
    tensors = len(ranks[0]["steps"][0]["grads"])
    if reduced == 0:
        return Check(
            False,
            f"gradients identical on all {len(ranks)} ranks at each of {steps} "
            "steps, but Horovod allreduced nothing: every rank computed the same "
            "gradients from the same samples (see sharded)",
        )
    return Check(
        True,
        f"gradients identical on all {len(ranks)} ranks at each of {steps} steps "
        f"({tensors} tensors; {reduced} tensors allreduced)",
    )
