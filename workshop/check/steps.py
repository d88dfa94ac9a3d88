"""Step and epoch counting: where each rank's epochs start, and whether the ranks made the same
number of optimizer steps (unequal shards)."""

from __future__ import annotations

import itertools


def split_epochs(observed: dict) -> tuple[list[list[str]], str]:
    """One rank's training samples cut into epochs, and how the cuts were found.

    An epoch begins at each call of the sampler's ``set_epoch`` (``epoch_marks``) when the
    rank made any. Without them (TensorFlow, a sampler without ``set_epoch``, plain slicing),
    an epoch ends before the first batch holding a sample already seen in an earlier batch of
    that epoch: one pass through the rank's data. Cuts fall between batches (``batches``; one
    sample per batch when they are missing).

    Returns:
        (epochs, how): the samples of each epoch in order, and ``"set_epoch"`` or ``"repeat"``.
    """
    samples = observed["samples"]
    sizes = observed.get("batches") or []
    if sum(sizes) != len(samples):
        sizes = [1] * len(samples)
    marks = sorted(set(observed.get("epoch_marks") or []))
    how = "set_epoch" if marks else "repeat"
    epochs: list[list[str]] = []
    current: list[str] = []
    seen: set[str] = set()
    start = previous = 0
    for size in sizes:
        if not size:
            continue
        batch = samples[start : start + size]
        if marks:
            cut = any(previous < mark <= start for mark in marks)
        else:
            cut = not seen.isdisjoint(batch)
        if cut and current:
            epochs.append(current)
            current, seen = [], set()
        current.extend(batch)
        seen.update(batch)
        previous, start = start, start + size
    if current:
        epochs.append(current)
    return epochs, how


def _epoch_batches(observed: dict) -> tuple[list[int], list[int], bool]:
    """(batches, samples) of each epoch of one rank, and whether its last epoch is complete
    (the rank ran to its end)."""
    sizes = observed.get("batches") or []
    if not sizes or sum(sizes) != len(observed.get("samples") or []):
        return [], [], False
    epochs, _ = split_epochs(observed)
    batches, samples, start = [], [], 0
    for epoch in epochs:
        count, taken = 0, 0
        while taken < len(epoch) and start < len(sizes):
            taken += sizes[start]
            start += 1
            count += 1
        batches.append(count)
        samples.append(len(epoch))
    return batches, samples, observed.get("status", "ok") == "ok"


def unequal_steps(ranks: list[dict]) -> str | None:
    """Why the ranks make different numbers of optimizer steps, or None when they do not.

    Ranks that ran to the end and made different numbers of steps, or (in a run that crashed
    or hung) an epoch with more training batches on one rank than the same, complete epoch
    on another: each rank's own shard of a different size (``x[hvd.rank()::hvd.size()]`` of
    1,001 samples). Horovod pairs collectives by name, so a rank's extra step is averaged with
    another rank's next step, and the last one waits for a rank that has finished. Epochs are
    those of :func:`split_epochs`; a rank whose complete epochs differ among themselves (an
    unseeded shuffle of the whole data, cut at random) is not compared epoch by epoch.
    """
    counts = [max(len(r.get("steps") or []), r.get("steps_started", 0)) for r in ranks]
    per_rank = [_epoch_batches(r) for r in ranks]
    finished = [r.get("status", "ok") == "ok" for r in ranks]
    uneven = all(finished) and len(set(counts)) > 1
    regular = all(
        len(set(batches[: len(batches) if done else len(batches) - 1])) <= 1
        for batches, _, done in per_rank
    )
    if regular and not uneven:
        for a, b in itertools.permutations(range(len(ranks)), 2):
            batches_a, _, _ = per_rank[a]
            batches_b, _, done_b = per_rank[b]
            complete_b = len(batches_b) if done_b else len(batches_b) - 1
            if any(batches_a[e] > batches_b[e] for e in range(min(complete_b, len(batches_a)))):
                uneven = True
                break
    if not uneven:
        return None
    steps = ", ".join(f"rank {r['env_rank']} {c}" for r, c in zip(ranks, counts, strict=True))
    text = f"the ranks made different numbers of optimizer steps ({steps})"
    if regular and all(batches for batches, _, _ in per_rank):
        epochs = "; ".join(
            f"rank {r['env_rank']} {batches[0]} steps per epoch ({samples[0]:,} samples)"
            for r, (batches, samples, _) in zip(ranks, per_rank, strict=True)
        )
        text += (
            f": per epoch {epochs}, unequal shards; Horovod pairs collectives by name, so one "
            "rank's extra step is averaged with another rank's next step, and at the end a "
            "rank waits for ranks that have finished (a crash: 'Horovod has been shut down', "
            "or a hang)"
        )
    return text
