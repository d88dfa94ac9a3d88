"""``averaged``: every rank applied the same, Horovod-averaged gradients."""

from __future__ import annotations

import math

from workshop.check.evidence import Check, differing, no_steps
from workshop.check.fixes import EQUAL_STEPS_FIX
from workshop.check.steps import join_cover, paired_steps, unequal_steps


def check_averaged(ranks: list[dict], style: str = "torch") -> Check:
    """The gradients each step applied were identical on every rank, and Horovod reduced; the
    ranks made the same number of steps (:func:`unequal_steps`), or ``hvd.join`` covered the
    extra steps (:func:`join_cover`; the steps compared are those Horovod paired,
    :func:`paired_steps`)."""
    if (empty := no_steps(ranks)) is not None:
        return empty
    unequal = unequal_steps(ranks)
    if unequal is not None:
        return Check(False, unequal, fix=EQUAL_STEPS_FIX[style])
    joined = join_cover(ranks)
    pairs = paired_steps(ranks)
    steps = len(pairs)
    bad = []
    for k, pair in enumerate(pairs):
        grads = [r["steps"][i]["grads"] for r, i in zip(ranks, pair, strict=True)]
        differ, total = differing(grads)
        if differ:
            bad.append((k + 1, differ, total, pair))
    reduced = ranks[0]["steps"][-1]["allreduces"]
    if bad:
        k, differ, total, pair = bad[0]
        norms = " vs ".join(
            f"{math.sqrt(sum(g[1] ** 2 for g in r['steps'][i]['grads'])):.4g}"
            for r, i in zip(ranks, pair, strict=True)
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
    if joined is not None:
        return Check(
            True,
            f"gradients identical on all {len(ranks)} ranks at each of the {steps} steps they "
            f"made together ({tensors} tensors; {reduced} tensors allreduced on rank "
            f"{ranks[0]['env_rank']}); {joined}",
        )
    return Check(
        True,
        f"gradients identical on all {len(ranks)} ranks at each of {steps} steps "
        f"({tensors} tensors; {reduced} tensors allreduced)",
    )
