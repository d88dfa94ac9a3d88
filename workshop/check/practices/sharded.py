"""``sharded``: each rank trained on its own samples, judged against chance."""

from __future__ import annotations

import itertools
import math

from workshop.check.evidence import Check, plural, ranks_text
from workshop.check.steps import split_epochs

# Below this share of common samples, overlap is reported as a warning: a few exact duplicates
# happen with real data sets, DistributedSampler's padding or independent sampling per rank.
FEW_COMMON_SAMPLES = 0.01


def check_sharded(ranks: list[dict]) -> Check:
    """Each rank trained on its own samples, judged against what chance gives.

    Epochs are compared one by one (see :func:`split_epochs`): a sampler's new shuffle each
    epoch rightly hands a rank samples another rank had the epoch before. No common sample in
    any epoch: OK (a warning when a shuffling ``DistributedSampler`` never got ``set_epoch``).
    Otherwise the ranks' sample streams are compared position by position: the same samples at
    the same positions (one global seed, no shard: the classic mistake) FAIL. Ranks that each
    draw their own random order from the whole data set (unseeded shuffles, ``.shard()`` after
    an unseeded shuffle) share samples at the rate independent draws give: a warning that says
    so, with the measured overlap and the chance level (from the data set's size, when the
    runner saw it). Overlap well above chance, in different orders, FAILs.
    """
    missing = [r["env_rank"] for r in ranks if not r["samples"]]
    if missing:
        return Check(
            None,
            f"no training batch was seen on {ranks_text(missing)} (the checker "
            "hashes the rows of the model's first input in training mode)",
        )
    split = [split_epochs(r) for r in ranks]
    epochs = [found for found, _ in split]
    count = min(len(found) for found in epochs)
    worst = _worst_epoch_overlap(epochs, count)
    share, common, i, j, e, size_i, size_j = worst
    if common == 0:
        if count > 1:
            text = _sharded_epochs_text(ranks, epochs, count, split[0][1])
        else:
            text = (
                f"rank {ranks[i]['env_rank']} and rank {ranks[j]['env_rank']} saw 0 common "
                f"samples of {size_i} and {size_j}"
            ) + (" (every pair of ranks: none)" if len(ranks) > 2 else "")
        return _sampler_without_set_epoch(ranks, text) or Check(True, text)
    pair = (
        f"rank {ranks[i]['env_rank']} and rank {ranks[j]['env_rank']} saw {common} common "
        f"samples of {size_i} and {size_j}"
    )
    where = f" in epoch {e + 1} of {count}" if count > 1 else ""
    aligned = _aligned(ranks)
    if aligned is not None:
        matched, compared, a, b = aligned
        spread = ""
        if count > 1:
            overlapping = sum(1 for k in range(count) if set(epochs[a][k]) & set(epochs[b][k]))
            spread = f"; {overlapping} of {count} epochs overlap"
        return Check(
            False,
            f"{pair}{where} ({share:.0%}{spread}), {matched} of {compared} at the same "
            f"position on rank {ranks[a]['env_rank']} and rank {ranks[b]['env_rank']}: the "
            f"ranks trained on the same data in the same order (one seed and no shard); "
            f"{SHARD_FIX}",
        )
    if share <= FEW_COMMON_SAMPLES:
        return Check(
            None,
            f"{pair}{where} ({share:.1%}): a few samples on two ranks (duplicates in "
            "the data, DistributedSampler padding, or each rank drawing at random "
            "from the whole data set?)",
        )
    return _overlap_against_chance(ranks)


#: The fix both sharded failures name.
SHARD_FIX = (
    "give each its own shard (DistributedSampler(num_replicas=hvd.size(), rank=hvd.rank()), "
    "dataset.shard(hvd.size(), hvd.rank()) or x[hvd.rank()::hvd.size()])"
)


def _worst_epoch_overlap(epochs: list[list[list[str]]], count: int) -> tuple:
    """(share, common, i, j, epoch, size_i, size_j) of the pair of ranks and epoch that share
    the largest part of their samples."""
    worst = None
    for i, j in itertools.combinations(range(len(epochs)), 2):
        for e in range(count):
            a, b = set(epochs[i][e]), set(epochs[j][e])
            common = len(a & b)
            share = common / min(len(a), len(b))
            if worst is None or share > worst[0]:
                worst = (share, common, i, j, e, len(a), len(b))
    return worst


# At least this share of the positions both ranks reached holds the same sample on both: the
# ranks read the same stream (independent orders of a data set of D samples match at about 1
# position in D).
SAME_POSITION_SHARE = 0.5


def _aligned(ranks: list[dict]) -> tuple[int, int, int, int] | None:
    """(matching positions, positions compared, i, j) of the first pair of ranks whose sample
    streams hold the same sample at most positions, else None."""
    for i, j in itertools.combinations(range(len(ranks)), 2):
        a, b = ranks[i]["samples"], ranks[j]["samples"]
        compared = min(len(a), len(b))
        matched = sum(1 for x, y in zip(a, b, strict=False) if x == y)
        if compared and matched / compared >= SAME_POSITION_SHARE:
            return matched, compared, i, j
    return None


def _data_size(ranks: list[dict]) -> int | None:
    """The training data set's size as the runner saw it (the largest data source: a torch
    Dataset, tf.data's from_tensor_slices, the arrays given to Keras' fit), or None when no
    size was seen or it is smaller than what a rank drew."""
    sizes = [size for r in ranks for size in r.get("data_sizes") or []]
    drawn = max(len(set(r["samples"])) for r in ranks)
    if not sizes or max(sizes) < drawn:
        return None
    return max(sizes)


def _overlap_against_chance(ranks: list[dict]) -> Check:
    """Ranks whose samples overlap in different orders: a warning at the overlap independent
    random draws give, a failure well above it. Over the whole run, two ranks that drew a and b
    distinct samples at random from D share a*b/D on average (hypergeometric spread)."""
    size = _data_size(ranks)
    pairs = []
    for i, j in itertools.combinations(range(len(ranks)), 2):
        a, b = set(ranks[i]["samples"]), set(ranks[j]["samples"])
        pairs.append((len(a & b) / min(len(a), len(b)), len(a & b), i, j, len(a), len(b)))
    share, common, i, j, a, b = max(pairs)
    pair = (
        f"over the whole run rank {ranks[i]['env_rank']} and rank {ranks[j]['env_rank']} drew "
        f"{a} and {b} distinct samples, {common} in common ({share:.0%}), in different orders"
    )
    n = len(ranks)
    # .shard() after an unseeded shuffle: each rank keeps an independent 1/n of the data, so a
    # sample is in no rank's share with probability (1 - 1/n)^n.
    advice = (
        "each rank draws in an order of its own: with no shard, every rank goes over the whole "
        f"data set, so an 'epoch' of the job is {n} passes over it; with .shard() after an "
        f"unseeded shuffle, each rank takes every {n}th sample of its own order, so in one "
        f"epoch the ranks together see about {1 - (1 - 1 / n) ** n:.0%} of the data, some "
        "samples twice and others not at all; fine for SGD either way: shard before "
        "shuffling (DistributedSampler, dataset.shard(hvd.size(), hvd.rank()) first) for "
        "exact epochs"
    )
    if size is None:
        return Check(
            None,
            f"{pair}: independent random draws? (the data set's size was not seen, so the "
            f"chance level is unknown); {advice}",
        )
    expected = a * b / size
    spread = math.sqrt(expected * (1 - b / size) * (size - a) / max(size - 1, 1))
    chance = (
        f"independent random draws from the {size:,} samples of the data set share about "
        f"{expected:,.0f} ({expected / min(a, b):.0%})"
    )
    if common > expected + max(4 * spread, 0.05 * min(a, b)) + 2:
        return Check(
            False,
            f"{pair}; {chance}: {common / expected:.1f}x more than chance, so the ranks read "
            f"overlapping parts of the data; {SHARD_FIX}",
        )
    return Check(None, f"{pair}; {chance}: the overlap of chance, {advice}")


def _sampler_without_set_epoch(ranks: list[dict], text: str) -> Check | None:
    """A warning when a rank iterated a shuffling DistributedSampler but never called
    ``set_epoch``: every epoch then repeats the first epoch's order."""
    for r in ranks:
        shuffled = [s for s in r.get("samplers") or [] if s.get("shuffle")]
        if shuffled and not r.get("epoch_marks"):
            passes = len(shuffled)
            seen = (
                f"it was iterated {plural(passes, 'time')} without a set_epoch call"
                if passes > 1
                else "no set_epoch call was seen"
            )
            return Check(
                None,
                f"{text}; but rank {r['env_rank']} used DistributedSampler(shuffle=True) and "
                f"{seen}: every epoch repeats the first epoch's order; call "
                "sampler.set_epoch(epoch) at the start of each epoch",
            )
    return None


def _sharded_epochs_text(ranks: list[dict], epochs: list[list], count: int, how: str) -> str:
    """The evidence of a run of several epochs with no sample on two ranks in any epoch."""
    totals = " and ".join(str(sum(len(x) for x in found[:count])) for found in epochs[:2])
    cuts = "set_epoch calls" if how == "set_epoch" else "cut where a rank's samples repeat"
    text = (
        f"rank {ranks[0]['env_rank']} and rank {ranks[1]['env_rank']} saw 0 common samples "
        f"within each of {count} epochs ({totals} samples in all; epochs: {cuts})"
    )
    if len(ranks) > 2:
        text += " (every pair of ranks: none)"
    across = len(set().union(*epochs[0][:count]) & set().union(*epochs[1][:count]))
    if across:
        text += f"; {across} common across different epochs (a new shuffle each epoch)"
    same_order = all(
        found[e] == found[0][: len(found[e])] for found in epochs for e in range(1, count)
    )
    if same_order:
        text += "; every epoch in the same order on each rank (a shuffle needs set_epoch(epoch))"
    return text
