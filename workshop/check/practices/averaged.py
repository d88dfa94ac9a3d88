"""``averaged``: every rank applied the same, Horovod-averaged gradients."""

from __future__ import annotations

import math

from workshop.check.evidence import Check, differing, no_steps, plural
from workshop.check.fixes import EQUAL_STEPS_FIX, MEAN_FIXES
from workshop.check.practices.mean import MEAN_REL_TOL, MeanStep, compare_steps
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
    compared = compare_steps(ranks, pairs)
    if compared is not None:
        found = _against_the_mean(ranks, compared, style)
        if found is not None:
            return found
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
            f"own gradients ({reduced} tensors allreduced in all)",
        )
    tensors = len(ranks[0]["steps"][0]["grads"])
    mean = "" if compared is None else ", each the mean of the ranks' own gradients"
    if reduced == 0:
        nothing = "nothing was allreduced" if style == "ddp" else "Horovod allreduced nothing"
        return Check(
            False,
            f"gradients identical on all {len(ranks)} ranks at each of {steps} "
            f"steps, but {nothing}: every rank computed the same "
            "gradients from the same samples (see sharded)",
        )
    if joined is not None:
        return Check(
            True,
            f"gradients identical on all {len(ranks)} ranks at each of the {steps} steps they "
            f"made together ({tensors} tensors{mean}; {reduced} tensors allreduced on rank "
            f"{ranks[0]['env_rank']}); {joined}",
        )
    return Check(
        True,
        f"gradients identical on all {len(ranks)} ranks at each of {steps} steps "
        f"({tensors} tensors{mean}; {reduced} tensors allreduced)",
    )


def _factors(step: MeanStep, ranks: list[dict]) -> str:
    return ", ".join(
        f"x{f:.3g} on rank {r['env_rank']}" for f, r in zip(step.factor, ranks, strict=True)
    )


def _reduced_with(ranks: list[dict], op: str) -> str:
    """``(op=Sum, 12 allreduces from LINE)`` of rank 0's reductions with ``op``."""
    seen = (ranks[0].get("reduce_ops") or {}).get(op)
    if not seen:
        return ""
    via = f" through {seen['via']}" if seen.get("via") else ""
    at = f" from {seen['where']}" if seen.get("where") else ""
    return f" (op={op}: {plural(seen['count'], 'allreduce')}{via}{at})"


def _writes(ranks: list[dict], step: MeanStep, off_ranks: list[dict]) -> str:
    """`` (rank 1 at LINE: mul_)``: the script's lines that changed an off rank's gradient
    after the reduction at that step (``grad_writes``, :mod:`workshop.check.gradwrites`)."""
    pair = paired_steps(ranks)[step.step - 1]
    off = {r["env_rank"] for r in off_ranks}
    found = []
    for r, i in zip(ranks, pair, strict=True):
        writes = [w for w in r.get("grad_writes") or [] if w["step"] == i + 1 and w["where"]]
        if r["env_rank"] in off and writes:
            found.append(f"rank {r['env_rank']} at {writes[0]['where']}: {writes[0]['how']}")
    return f" ({'; '.join(found)})" if found else ""


def _identical(ranks: list[dict], pair: tuple[int, ...]) -> bool:
    """The gradients the paired step ``pair`` applied were bitwise the same on every rank."""
    return not differing([r["steps"][i]["grads"] for r, i in zip(ranks, pair, strict=True)])[0]


def _same_on_every_rank(ranks: list[dict]) -> str:
    """``identical on every rank at K of S steps`` of the applied gradients' hashes."""
    pairs = paired_steps(ranks)
    same = sum(1 for pair in pairs if _identical(ranks, pair))
    return f"the applied gradients identical on every rank at {same} of {len(pairs)} steps"


def _against_the_mean(ranks: list[dict], compared: list[MeanStep], style: str) -> Check | None:
    """A FAIL when a step applied anything but the mean of the ranks' own gradients (or a clip
    raced the reduction), naming the mechanism; None when every step applied the mean."""
    n = len(ranks)
    bad = [s for s in compared if not s.mean]
    clips = [c for c in ranks[0].get("clips") or [] if c.get("reducing")]
    if clips:
        clip = clips[0]
        effect = (
            f"at {len(bad)} of {len(compared)} steps the applied gradient was not the mean of "
            f"the ranks' own (step {bad[0].step}: {_factors(bad[0], ranks)}, "
            f"{max(bad[0].off)} of {bad[0].tensors} tensors)"
            if bad
            else "in this run the clip changed no applied gradient (the norm stayed under the "
            "limit, or the reduction had finished), but it races with the reduction"
        )
        return Check(
            False,
            f"{clip['where'] or 'the script'}: {clip['how']} ran before step {clip['step']} "
            f"while {plural(clip['reducing'], 'gradient reduction')} were still in flight "
            "(Horovod reduces in the background from backward() until the optimizer's "
            f"synchronize()): {effect}, {_same_on_every_rank(ranks)}; a clip there "
            "races the reduction: depending on timing it scales each rank's own gradient, a "
            "partial sum or nothing, so the ranks may apply different gradients and drift apart",
            fix=MEAN_FIXES["clip"][style],
        )
    if not bad:
        return None
    first = bad[0]
    off_ranks = [r for r, off in zip(ranks, first.off, strict=True) if off]
    if all(own == off for own, off in zip(first.own, first.off, strict=True)):
        return None  # each rank applied its own gradient: the verdict on differing hashes
    # The same change on every rank keeps the ranks in step: bitwise equal applied gradients.
    pairs = paired_steps(ranks)
    common = all(_identical(ranks, pairs[s.step - 1]) for s in bad)
    if common and not all(abs(f - n) <= MEAN_REL_TOL * n for f in first.factor):
        after = [c for c in ranks[0].get("clips") or [] if not c.get("reducing")]
        how = (
            f"clipped after the reduction ({after[0]['where']})"
            if after
            else "scaled after the reduction, or before it alike on every rank"
        )
        reduced = ranks[0]["steps"][-1]["allreduces"]
        return Check(
            True,
            f"at {len(bad)} of {len(compared)} steps every rank applied the same multiple of "
            f"the mean of the ranks' own gradients (step {first.step}: "
            f"{_factors(first, ranks)}): {how}, the same on every rank, so the ranks stay in "
            f"step; at the other steps, the mean ({reduced} tensors allreduced)",
        )
    if len(off_ranks) == n and all(abs(f - n) <= MEAN_REL_TOL * n for f in first.factor):
        op = _reduced_with(ranks, "Sum")
        return Check(
            False,
            f"the applied gradient is {n}x the mean of the ranks' own gradients at "
            f"{len(bad)} of {len(compared)} steps (step {first.step}: {_factors(first, ranks)}, "
            f"{max(first.off)} of {first.tensors} tensors): the allreduce summed them"
            f"{op} instead of averaging. The ranks applied identical gradients, but each step "
            f"is {n}x the averaged one, as if the learning rate were {n}x larger (and it grows "
            "with the number of ranks)",
            fix=MEAN_FIXES["sum"][style],
        )
    if len(off_ranks) < n:
        names = ", ".join(str(r["env_rank"]) for r in off_ranks)
        means = ", ".join(str(r["env_rank"]) for r in ranks if r not in off_ranks)
        return Check(
            False,
            f"step {first.step}: rank {means} applied the mean of the ranks' own gradients, "
            f"rank {names} did not ({_factors(first, ranks)}; {max(first.off)} of "
            f"{first.tensors} tensors; {len(bad)} of {len(compared)} steps): the gradient was "
            f"changed on rank {names} after the reduction{_writes(ranks, first, off_ranks)}, "
            "so the ranks apply different gradients and their models drift apart",
            fix=MEAN_FIXES["after"][style],
        )
    return Check(
        False,
        f"the applied gradient is not the mean of the ranks' own gradients at {len(bad)} of "
        f"{len(compared)} steps (step {first.step}: {_factors(first, ranks)}, "
        f"{max(first.off)} of {first.tensors} tensors): it was changed between backward() and "
        "the reduction, or the reduction is not an average",
        fix=MEAN_FIXES["after"][style],
    )
