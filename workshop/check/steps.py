"""Step and epoch counting: where each rank's epochs start, whether the ranks made the same
number of optimizer steps (unequal shards), and whether ``hvd.join`` made up for it.

``hvd.join()`` (Horovod 0.28.1: ``horovod/torch/mpi_ops.py`` ``join``, ``horovod/tensorflow/
mpi_ops.py`` ``join``) is the documented way to train on uneven data: a rank that has run out of
batches calls it, and until every rank has called it, Horovod's controller answers the other
ranks' allreduces for it with zeros (``horovod/common/controller.cc``, ``joined_size``;
``tensor_queue.cc`` allocates the zeros); an ``Average`` still divides by the full size
(``gloo_operations.cc``). The joins cut each rank's steps into rounds (:func:`join_rounds`):
the k-th step of a round on one rank is paired with the k-th step of the same round on the
others, and the extra steps of a round on some ranks are covered by the others' join.
"""

from __future__ import annotations

import itertools


def _ddp(ranks: list[dict]) -> bool:
    """The ranks ran a PyTorch DDP script (``init_process_group``), not a Horovod one."""
    return any((r.get("init") or {}).get("framework") == "ddp" for r in ranks)


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


def _count(observed: dict) -> int:
    """Optimizer steps a rank made or began."""
    return max(len(observed.get("steps") or []), observed.get("steps_started", 0))


def join_rounds(observed: dict, total: int | None = None) -> list[int]:
    """The optimizer steps one rank made in each round of ``hvd.join``: before its first join,
    between each two, and after its last; ``[all its steps]`` when it never joined.

    ``total``: the steps to share out (default: the steps made or begun)."""
    total = _count(observed) if total is None else total
    marks = [min(max(j.get("steps", 0), 0), total) for j in observed.get("joins") or []]
    bounds = [0, *marks, total]
    return [b - a for a, b in itertools.pairwise(bounds)]


def paired_steps(ranks: list[dict]) -> list[tuple[int, ...]]:
    """The steps Horovod averaged together: one index into each rank's ``steps`` per pair, in
    order. Without joins, step k of every rank; with joins, step k of each join round on every
    rank (the extra steps of a round on a rank, which the others' join covered, pair with none),
    up to the last round every rank has reached."""
    rounds = [join_rounds(r, len(r.get("steps") or [])) for r in ranks]
    pairs: list[tuple[int, ...]] = []
    starts = [0] * len(ranks)
    for j in range(min(len(x) for x in rounds)):
        column = [x[j] for x in rounds]
        pairs.extend(tuple(start + k for start in starts) for k in range(min(column)))
        starts = [start + n for start, n in zip(starts, column, strict=True)]
    return pairs


def _epoch_ends(observed: dict) -> list[int]:
    """``len(samples)`` at the end of each of one rank's epochs (:func:`split_epochs`)."""
    epochs, _ = split_epochs(observed)
    return list(itertools.accumulate(len(epoch) for epoch in epochs))


def _joined_epochs(observed: dict) -> set[int]:
    """The epochs (0-based, :func:`split_epochs`) after whose last batch the rank called
    ``hvd.join`` (before any batch of the next epoch)."""
    at = {j.get("samples") for j in observed.get("joins") or []}
    if not at or not observed.get("samples"):
        return set()
    return {e for e, end in enumerate(_epoch_ends(observed)) if end in at}


def _where_joined(ranks: list[dict]) -> tuple[str, str]:
    """Where the ranks called ``hvd.join``, in words (at the end of each epoch, once after the
    last step, or how many times), and what a join round is there (``epoch``, ``join round``).
    """
    joins = len(ranks[0]["joins"])
    ends = [_epoch_ends(r) for r in ranks]
    if joins > 1 and all(
        len(_joined_epochs(r)) == joins == len(e) for r, e in zip(ranks, ends, strict=True)
    ):
        return f"at the end of each of its {joins} epochs", "epoch"
    if joins == 1 and all(r["joins"][0]["steps"] == _count(r) for r in ranks):
        return "once, after its last step", "join round"
    return f"{joins} times", "join round"


def join_cover(ranks: list[dict]) -> str | None:
    """How ``hvd.join`` made up for ranks that made different numbers of optimizer steps, or
    None when it did not (or there was nothing to make up for).

    The rule: every rank ran to the end (a finished run proves that each collective found its
    partners), every rank called ``hvd.join`` the same number of times (a join completes only
    when every rank has joined: a rank with one more would wait for ranks that had finished),
    and every rank made the same number of steps after its last join (no join is left to cover
    a difference there; usually none). Then the differences lie in join rounds, where the ranks
    that ran out of batches joined and answered the others' allreduces with zeros. Joining at
    the end of each epoch or once after the last step are both covered: the last step of
    training is what join must follow.
    """
    if not ranks or any(r.get("status", "ok") != "ok" or not r.get("joins") for r in ranks):
        return None
    rounds = [join_rounds(r) for r in ranks]
    if len({len(x) for x in rounds}) > 1 or len({x[-1] for x in rounds}) > 1:
        return None
    columns = list(zip(*rounds, strict=True))
    if all(len(set(column)) == 1 for column in columns):
        return None
    extra = [sum(n - min(column) for n, column in zip(x, columns, strict=True)) for x in rounds]
    counts = [_count(r) for r in ranks]
    steps = ", ".join(f"rank {r['env_rank']} {c}" for r, c in zip(ranks, counts, strict=True))
    joined = "; ".join(
        f"rank {r['env_rank']} made {c} steps and joined"
        for r, c, e in zip(ranks, counts, extra, strict=True)
        if e == 0
    )
    where, unit = _where_joined(ranks)
    # DDP's Join (torch 2.14, torch/distributed/algorithms/join.py) shadows the allreduces of
    # the ranks still training; DDP divides by the initial world size (divide_by_initial_
    # world_size=True, torch/nn/parallel/distributed.py), so the joined ranks count as zeros.
    join = "DDP's Join (with model.join():)" if _ddp(ranks) else "hvd.join"
    covered = []
    for r, x, e in zip(ranks, rounds, extra, strict=True):
        if e == 0:
            continue
        per = [
            n - min(column) for n, column in zip(x, columns, strict=True) if len(set(column)) > 1
        ]
        detail = (
            f" ({per[0]} in each of {len(per)} {unit}s)"
            if len(set(per)) == 1 and len(per) > 1
            else ""
        )
        covered.append(f"rank {r['env_rank']}'s {e} extra step{'s' if e != 1 else ''}{detail}")
    text = (
        f"the ranks made different numbers of optimizer steps ({steps}) and every rank called "
        f"{join} {where}: "
        + (f"{joined}; " if joined else "")
        + f"{join} covered {' and '.join(covered)}, averaged with zeros from the ranks that "
        "had joined"
    )
    finals = [r.get("final_params") for r in ranks]
    # DDP's Join ends by broadcasting the last joiner's model (its join hook's post_hook calls
    # _sync_final_model, torch/nn/parallel/distributed.py): only hvd.join leaves them apart.
    if all(finals) and len({tuple(p[0] for p in f) for f in finals}) > 1 and not _ddp(ranks):
        text += (
            "; the ranks that joined did not apply those steps, so the parameters differ "
            "between ranks at the end (keep rank 0's model, or after each join broadcast from "
            "the last rank to join: hvd.broadcast_parameters(model.state_dict(), "
            "root_rank=hvd.join()))"
        )
    return text


def unequal_steps(ranks: list[dict]) -> str | None:
    """Why the ranks make different numbers of optimizer steps, or None when they do not.

    Ranks that ran to the end and made different numbers of steps, or (in a run that crashed
    or hung) an epoch with more training batches on one rank than the same, complete epoch
    on another: each rank's own shard of a different size (``x[hvd.rank()::hvd.size()]`` of
    1,001 samples). Horovod pairs collectives by name, so a rank's extra step is averaged with
    another rank's next step, and the last one waits for a rank that has finished. Epochs are
    those of :func:`split_epochs`; a rank whose complete epochs differ among themselves (an
    unseeded shuffle of the whole data, cut at random) is not compared epoch by epoch.

    ``hvd.join`` makes up for the difference in a finished run (:func:`join_cover`); in one
    that crashed or hung, an epoch after which both ranks compared called ``hvd.join`` is not
    compared either.
    """
    if join_cover(ranks) is not None:
        return None
    counts = [max(len(r.get("steps") or []), r.get("steps_started", 0)) for r in ranks]
    if _ddp(ranks):  # a DDP rank waits inside backward(), before its step begins
        counts = [max(c, len(r.get("batches") or [])) for c, r in zip(counts, ranks, strict=True)]
    per_rank = [_epoch_batches(r) for r in ranks]
    finished = [r.get("status", "ok") == "ok" for r in ranks]
    uneven = all(finished) and len(set(counts)) > 1
    regular = all(
        len(set(batches[: len(batches) if done else len(batches) - 1])) <= 1
        for batches, _, done in per_rank
    )
    if regular and not uneven:
        joined = [_joined_epochs(r) for r in ranks]
        for a, b in itertools.permutations(range(len(ranks)), 2):
            batches_a, _, _ = per_rank[a]
            batches_b, _, done_b = per_rank[b]
            complete_b = len(batches_b) if done_b else len(batches_b) - 1
            if any(
                batches_a[e] > batches_b[e] and e not in joined[a] & joined[b]
                for e in range(min(complete_b, len(batches_a)))
            ):
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
        why = (
            "DDP allreduces every backward()'s gradients, so the rank with more batches waits "
            "in backward() for a rank that has finished (a crash: 'Connection closed by peer', "
            "or a hang)"
            if _ddp(ranks)
            else "Horovod pairs collectives by name, so one rank's extra step is averaged with "
            "another rank's next step, and at the end a rank waits for ranks that have "
            "finished (a crash: 'Horovod has been shut down', or a hang)"
        )
        text += f": per epoch {epochs}, unequal shards; {why}"
    return text
