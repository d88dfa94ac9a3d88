"""Whether the gradient each step applied is the mean of the ranks' own gradients.

Each PyTorch rank records, per parameter and step, a projection of its own gradient as backward
left it (``local``) and of the gradient the optimizer applied (``applied``):
:func:`workshop.check.hooks_torch.projection`, linear, so the projection of the mean is the
mean of the projections. The applied one is compared with the mean of the ranks' local ones
within float tolerance, which tells the mechanism apart from its symptom: ranks that applied
identical gradients may still have applied their sum (``op=Sum``), and gradients clipped while
Horovod reduces them in the background are neither the mean nor the same on every rank.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Relative tolerance of a projection against the bound of its rounding error: float32
#: rounding is 1.2e-7 of it; Horovod's fp16 compression 1e-3.
MEAN_REL_TOL = 2e-3


@dataclass(frozen=True)
class MeanStep:
    """One paired step compared with the mean: ``step`` (1-based), ``factor`` per rank (the
    applied gradient over the mean, least squares over every tensor), ``off`` per rank (tensors
    whose applied gradient is not the mean), ``own`` per rank (tensors where the rank applied
    its own local gradient instead, when the ranks' local gradients differ), ``tensors``."""

    step: int
    factor: list[float]
    off: list[int]
    own: list[int]
    tensors: int

    @property
    def mean(self) -> bool:
        return not any(self.off)


def _vector(entry: list | None) -> list[float]:
    return [0.0, 0.0, 0.0] if entry is None else entry


def _close(a: list[float], b: list[float], bound: float) -> bool:
    tol = MEAN_REL_TOL * bound + 1e-30
    return all(abs(x - y) <= tol for x, y in zip(a[:2], b[:2], strict=True))


def compare_step(ranks: list[dict], pair: tuple[int, ...], number: int) -> MeanStep | None:
    """The paired step ``pair`` (one index per rank) against the mean, or None when a rank
    did not record its local gradients (TensorFlow, an older observation)."""
    steps = [r["steps"][i] for r, i in zip(ranks, pair, strict=True)]
    if any(s.get("local") is None or s.get("applied") is None for s in steps):
        return None
    tensors = min(len(s["local"]) for s in steps)
    n = len(steps)
    off, own, top, bottom = [0] * n, [0] * n, [0.0] * n, 0.0
    for t in range(tensors):
        local = [_vector(s["local"][t]) for s in steps]
        applied = [_vector(s["applied"][t]) for s in steps]
        mean = [sum(v[c] for v in local) / n for c in range(2)]
        bound = max(v[2] for v in local + applied)
        differ = any(not _close(v, local[0], bound) for v in local)
        for r in range(n):
            if not _close(applied[r], mean, bound):
                off[r] += 1
                own[r] += differ and _close(applied[r], local[r], bound)
            top[r] += sum(a * m for a, m in zip(applied[r][:2], mean, strict=True))
        bottom += sum(m * m for m in mean)
    factor = [x / bottom if bottom else 1.0 for x in top]
    return MeanStep(number, factor, off, own, tensors)


def compare_steps(ranks: list[dict], pairs: list[tuple[int, ...]]) -> list[MeanStep] | None:
    """Every paired step against the mean (:func:`compare_step`), or None when they cannot be
    compared."""
    found = []
    for k, pair in enumerate(pairs, start=1):
        step = compare_step(ranks, pair, k)
        if step is None:
            return None
        found.append(step)
    return found


def reduction_factor(ranks: list[dict], pairs: list[tuple[int, ...]]) -> float | None:
    """How many times the mean of the ranks' own gradients the steps applied, on every rank at
    every paired step (2.0: a Sum at np=2); None when it was not one number (or not seen)."""
    steps = compare_steps(ranks, pairs)
    if not steps or any(any(s.off) and not all(s.off) for s in steps):
        return None
    factors = [f for s in steps for f in s.factor]
    low, high = min(factors), max(factors)
    if high - low > MEAN_REL_TOL * max(abs(high), 1.0):
        return None
    return (low + high) / 2
