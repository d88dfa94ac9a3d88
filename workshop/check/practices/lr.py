"""``lr_scaled``: the learning rate was scaled with the number of ranks."""

from __future__ import annotations

import math

from workshop.check.evidence import Check, no_steps

LR_REL_TOL = 1e-3


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= LR_REL_TOL * max(abs(a), abs(b))


def _ranks_lr_differ(ranks: list[dict], series: list[list[float]]) -> Check | None:
    """A failure at the first step where the ranks' learning rates differ, else None."""
    for k in range(min(len(lrs) for lrs in series)):
        if any(not _close(lrs[k], series[0][k]) for lrs in series):
            detail = ", ".join(
                f"rank {r['env_rank']} {lrs[k]:g}" for r, lrs in zip(ranks, series, strict=True)
            )
            at = "the first step" if k == 0 else f"step {k + 1}"
            return Check(
                False,
                f"the ranks used different learning rates at {at} "
                f"({detail}): with identical averaged gradients the models drift apart",
            )
    return None


def check_lr_scaled(
    ranks: list[dict],
    base: dict | None = None,
    base_note: str = "no np=1 run",
    reduction: float | None = None,
) -> Check:
    """The learning rate the run reached at np=N against the one at np=1 (``base``, the
    first-step record of the same script run alone).

    The LR judged is the highest of the run: a warmup starts from the one-worker LR at any np
    and rises to the scaled one, a decay comes after it. A schedule scaled from its first step
    (a warmup from zero, say) passes on its first step. An LR that stays at its np=1 value is a
    failure, and so are ranks disagreeing at any step; a base that was not seen, a warmup still
    rising at the last step, or a factor that is neither rule's is a warning.
    """
    if (empty := no_steps(ranks)) is not None:
        return empty
    n = len(ranks)
    if any(not r["steps"][0]["lr"] for r in ranks):
        return Check(None, "the optimizer showed no learning rate")
    series = [[s["lr"][0] for s in r["steps"] if s["lr"]] for r in ranks]
    if (differ := _ranks_lr_differ(ranks, series)) is not None:
        return differ
    lrs = series[0]
    first, peak, last = lrs[0], max(lrs), lrs[-1]
    warmed = peak > first * (1 + LR_REL_TOL)
    # Ended at its highest after rising: a warmup that may not be over.
    rising = warmed and _close(last, peak)
    reached = next(k for k, lr in enumerate(lrs, start=1) if _close(lr, peak))
    if not base or not base.get("steps") or not base["steps"][0]["lr"]:
        rise = f", up to {peak:g} at step {reached}" if warmed else ""
        return Check(
            None,
            f"lr {first:g} at the first step{rise} on all {n} ranks; its base value "
            f"(the lr the same script uses at np=1) was not seen: {base_note}",
        )
    base_lr = base["steps"][0]["lr"][0]
    by = 1.0 if reduction is None or _close(reduction, 1.0) else reduction

    def times(lr: float) -> float:
        return lr * by / base_lr if base_lr else float("inf")

    rules = (("linear", n), ("square-root", math.sqrt(n)))
    vs = f"vs {base_lr:g} at np=1"
    if warmed:
        top = (
            f"lr {peak:g} at np={n} (reached at step {reached} of {len(lrs)}, after a "
            f"warmup from {first:g}) {vs} (x{times(peak):.3g})"
        )
    else:
        top = f"lr {peak:g} at np={n} {vs} (x{times(peak):.3g})"
    if by != 1.0:
        top = (
            f"effective step x{times(peak):.3g} of the np=1 one: lr {peak:g} at np={n} {vs} "
            f"(x{peak / base_lr:.3g}) times the reduction's x{by:.3g} (the applied gradient "
            "over the mean of the ranks' own)"
        )
        if times(peak) > n * (1 + LR_REL_TOL):
            return Check(
                False,
                f"{top}: each step is x{times(peak):.3g} the serial one, above the linear "
                f"rule's x{n}: the lr is scaled and the gradients are summed, not averaged",
                fix="average the gradients (see averaged) and scale the lr by the number of "
                "ranks once",
            )
    for name, factor in rules:
        if _close(times(peak), factor) and (factor == n or not rising):
            return Check(True, f"{name} scaling: {top}")
    for name, factor in rules:
        if _close(times(first), factor):
            return Check(
                True,
                f"{name} scaling from the first step: lr {first:g} at np={n} {vs} "
                f"(x{times(first):.3g}); the schedule then reached {peak:g} at step {reached}",
            )
    if _close(times(peak), 1.0):
        return Check(
            False,
            f"not scaled: {top}; the global batch is {n}x larger, so the usual "
            f"rules give {base_lr * n:g} (linear) or {base_lr * math.sqrt(n):g} (sqrt)",
        )
    if rising and times(peak) < n:
        return Check(
            None,
            f"lr rose from {first:g} to {last:g} over {len(lrs)} steps at np={n} "
            f"(x{times(first):.3g} to x{times(last):.3g} of {base_lr:g} at np=1) and was still "
            f"rising at the last step: a warmup longer than the run? run more steps to see "
            f"whether it reaches x{n} ({base_lr * n:g})",
        )
    return Check(
        None, f"{top}: neither linear (x{n}) nor square-root (x{math.sqrt(n):.3g}) scaling"
    )
