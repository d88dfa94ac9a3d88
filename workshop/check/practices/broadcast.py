"""``broadcast``: every rank started from rank 0's parameters."""

from __future__ import annotations

from workshop.check.evidence import Check, differing, no_steps


def _covered(ranks: list[dict], k: int) -> int:
    """Parameters set from rank 0 by a broadcast before step ``k + 1``, on the rank with the
    fewest (old observations without ``covered``: 0)."""
    return min(r["steps"][k].get("covered", 0) for r in ranks)


def _object_note(ranks: list[dict]) -> str:
    """What a script that broadcast only Python objects broadcast instead of the parameters."""
    objects = max(r.get("object_broadcasts", 0) for r in ranks)
    if not objects:
        return ""
    calls = "call" if objects == 1 else "calls"
    return (
        f"; its only broadcast before it was {objects} hvd.broadcast_object {calls} (a Python "
        "object, such as the resume epoch: not the parameters)"
    )


def check_broadcast(ranks: list[dict]) -> Check:
    """Every rank started from rank 0's parameters: before the first step (or right after it,
    TensorFlow's pattern) the parameters are identical on every rank AND each one holds a value
    that came out of a Horovod broadcast (rank 0's). Identical parameters that no broadcast set
    matched only because every rank used the same seed: a failure. A broadcast of anything
    else (``hvd.broadcast_object`` of the resume epoch, a metric) does not count."""
    if (empty := no_steps(ranks)) is not None:
        return empty
    first = [r["steps"][0].get("params") or [] for r in ranks]
    differ, total = differing(first)
    covered = _covered(ranks, 0)
    final = _final_params_note(ranks)
    n = len(ranks)
    if differ == 0:
        if covered >= total:
            return Check(
                True,
                f"parameters identical on all {n} ranks before the first step ({total} "
                f"tensors), each set from rank 0 by a broadcast{final}",
            )
        never = "none" if covered == 0 else f"{total - covered}"
        return Check(
            False,
            f"parameters identical on all {n} ranks before the first step ({total} tensors), "
            f"but {never} of the {total} came from a broadcast of rank 0's: they matched only "
            f"because every rank used the same seed (another seed, or a checkpoint loaded on "
            f"rank 0, and the ranks would train different models){_object_note(ranks)}",
        )
    start = f"parameters differ on {differ} of {total} tensors before the first step"
    if all(len(r["steps"]) > 1 for r in ranks):
        second = [r["steps"][1].get("params") or [] for r in ranks]
        differ2, _ = differing(second)
        covered2 = _covered(ranks, 1)
        if differ2 == 0 and covered2 >= total:
            return Check(
                True,
                f"{start}, identical from step 2 on, each set from rank 0 by a broadcast "
                f"after the first step (TensorFlow's pattern){final}",
            )
        return Check(
            False,
            f"{start} and on {differ2} of {total} before step 2; {covered2} of {total} were "
            "set from rank 0 by a broadcast: the ranks trained different models",
        )
    return Check(
        False,
        f"{start}; {covered} of {total} were set from rank 0 by a broadcast: the ranks "
        "started from different models",
    )


def _final_params_note(ranks: list[dict]) -> str:
    finals = [r.get("final_params") for r in ranks]
    if any(not f for f in finals):
        return ""
    differ, total = differing(finals)
    if differ == 0:
        return "; still identical after the last step"
    return f"; after the last step they differ on {differ} of {total} tensors"


def broadcast_before_crash(ranks: list[dict]) -> Check | None:
    """A crash before the first step, after Horovod broadcast tensors on every rank and none
    was left in flight or failed: OK on what ran (the parameters are not compared: they are
    recorded at a step). None when a rank broadcast nothing, or a broadcast failed."""
    counts = [r.get("broadcasts") or 0 for r in ranks]
    in_flight = any(
        "broadcast" in (item.get("op") or "") for r in ranks for item in r.get("pending") or []
    )
    failed = any(
        "broadcast" in ((r.get("error") or {}).get("message") or "").lower() for r in ranks
    )
    if min(counts) == 0 or in_flight or failed:
        return None
    return Check(
        True,
        f"Horovod broadcast {min(counts)} tensors on every rank before the crash (no "
        "optimizer step ran, so whether they were rank 0's parameters was not compared)",
    )
