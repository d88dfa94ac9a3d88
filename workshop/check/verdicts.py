"""Verdicts on the Horovod practices, from what each rank did (pure functions, no Horovod).

Each function takes ``ranks``, the per-rank observation dicts written by
:mod:`workshop.check.runner` (schema in :mod:`workshop.check.observe`), sorted by rank, and
returns a :class:`Check`: ``ok`` is True (the practice held), False (it did not) or None (a
warning: it could not be judged, or it is advice rather than an error), and ``evidence`` says
why in numbers.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

CHECK_NAMES = ("init", "broadcast", "averaged", "sharded", "rank0_checkpoint", "lr_scaled")
# Below this share of common samples, overlap is reported as a warning: a few exact duplicates
# happen with real data sets, DistributedSampler's padding or independent sampling per rank.
FEW_COMMON_SAMPLES = 0.01
LR_REL_TOL = 1e-3


@dataclass(frozen=True)
class Check:
    """One practice's verdict: ``ok`` True / False / None (warning), the evidence, whether it
    was judged on partial evidence (steps before a crash), and the fix: the line of code that
    makes the practice hold (every FAIL and WARN has one; see :func:`judge`)."""

    ok: bool | None
    evidence: str
    partial: bool = False
    fix: str = ""

    @property
    def label(self) -> str:
        return {True: "OK", False: "FAIL", None: "WARN"}[self.ok]

    def as_partial(self) -> Check:
        """The same verdict, marked as judged on partial evidence (the script crashed)."""
        return replace(self, partial=True)

    def to_dict(self) -> dict:
        """``{"ok", "evidence"}``, ``"fix"`` for a FAIL or WARN, and ``"partial": true`` for a
        verdict on partial evidence."""
        found = {"ok": self.ok, "evidence": self.evidence}
        if self.fix:
            found["fix"] = self.fix
        return found | {"partial": True} if self.partial else found


#: How a script trains, for the fix to name its own API: PyTorch, a TensorFlow 2 custom loop
#: (GradientTape), or tf-keras ``Model.fit``.
STYLES = ("torch", "tf", "keras")

#: The fix of each practice, in each style's own code.
FIXES = {
    "init": {
        "torch": "import horovod.torch as hvd; hvd.init() first thing in main(), on every rank",
        "tf": "import horovod.tensorflow as hvd; hvd.init() first thing, on every rank",
        "keras": "import horovod.tensorflow.keras as hvd; hvd.init() first thing, on every rank",
    },
    "broadcast": {
        "torch": "hvd.broadcast_parameters(model.state_dict(), root_rank=0) and "
        "hvd.broadcast_optimizer_state(optimizer, root_rank=0) after building the model and "
        "the optimizer (and after rank 0 loads a checkpoint)",
        "tf": "after the first step: if first_batch: hvd.broadcast_variables(model.variables, "
        "root_rank=0); hvd.broadcast_variables(optimizer.variables(), root_rank=0)",
        "keras": "model.fit(..., callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), "
        "...])",
    },
    "averaged": {
        "torch": "optimizer = hvd.DistributedOptimizer(optimizer, "
        "named_parameters=model.named_parameters())",
        "tf": "tape = hvd.DistributedGradientTape(tape) before tape.gradient(...)",
        "keras": "optimizer = hvd.DistributedOptimizer(optimizer) before model.compile(...)",
    },
    "sharded": {
        "torch": "sampler = DistributedSampler(dataset, num_replicas=hvd.size(), "
        "rank=hvd.rank()); DataLoader(dataset, batch_size=..., sampler=sampler); "
        "sampler.set_epoch(epoch) at the start of each epoch",
        "tf": "dataset = dataset.shard(hvd.size(), hvd.rank()) before .shuffle() and .batch()",
        "keras": "x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()] (or "
        "dataset.shard(hvd.size(), hvd.rank())) before model.fit",
    },
    "rank0_checkpoint": {
        "torch": "if hvd.rank() == 0: torch.save(...)",
        "tf": "if hvd.rank() == 0: checkpoint.save(...)",
        "keras": "if hvd.rank() == 0: callbacks.append(keras.callbacks.ModelCheckpoint(...))",
    },
    "lr_scaled": {
        "torch": "lr = base_lr * hvd.size() (warm up to it over the first epoch), e.g. "
        "torch.optim.SGD(model.parameters(), lr=base_lr * hvd.size())",
        "tf": "optimizer = tf.keras.optimizers.SGD(base_lr * hvd.size())",
        "keras": "optimizer = keras.optimizers.SGD(base_lr * hvd.size()) with "
        "hvd.callbacks.LearningRateWarmupCallback(initial_lr=base_lr * hvd.size(), "
        "warmup_epochs=...)",
    },
}

#: The fix of ranks that make different numbers of steps (unequal shards).
EQUAL_STEPS_FIX = {
    "torch": "DistributedSampler(dataset, num_replicas=hvd.size(), rank=hvd.rank()) (it pads "
    "every shard to the same size), or DataLoader(..., drop_last=True), or trim the data to a "
    "multiple of hvd.size() first: n = len(x) // hvd.size() * hvd.size(); "
    "x[:n][hvd.rank()::hvd.size()]",
    "tf": "trim the data to a multiple of hvd.size() before .shard() (n = len(x) // hvd.size() "
    "* hvd.size()), or take the same number of batches on every rank: "
    "dataset.repeat().take(steps_per_epoch)",
    "keras": "trim the data to a multiple of hvd.size() before slicing (n = len(x) // "
    "hvd.size() * hvd.size(); x[:n][hvd.rank()::hvd.size()]), or model.fit(dataset.repeat(), "
    "steps_per_epoch=N // hvd.size())",
}


def style_of(ranks: list[dict], framework: str | None = None) -> str:
    """``keras`` when a rank trained with ``Model.fit``, ``tf`` for another TensorFlow script,
    else ``torch`` (:data:`STYLES`)."""
    if any("keras_fit" in (r.get("apis") or []) for r in ranks):
        return "keras"
    seen = (
        framework
        or next(
            (
                r["init"]["framework"]
                for r in ranks
                if r.get("init") and r["init"].get("framework")
            ),
            None,
        )
        or next((f for r in ranks for f in r.get("horovod_imported") or []), None)
    )
    return "tf" if seen == "tensorflow" else "torch"


def with_fix(check: Check, name: str, style: str) -> Check:
    """``check`` with its practice's fix for ``style`` when it is a FAIL or WARN without one."""
    if check.ok is True or check.fix:
        return check
    return replace(check, fix=FIXES[name][style])


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def ranks_text(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _differing(per_rank: list[list]) -> tuple[int, int]:
    """(tensors whose hash is not the same on every rank, tensors compared)."""
    count = min(len(tensors) for tensors in per_rank)
    differ = sum(1 for i in range(count) if len({tensors[i][0] for tensors in per_rank}) > 1)
    return differ + max(len(t) for t in per_rank) - count, max(len(t) for t in per_rank)


def _no_steps(ranks: list[dict]) -> Check | None:
    missing = [r["env_rank"] for r in ranks if not r["steps"]]
    if missing:
        return Check(
            None,
            f"no optimizer step was seen on {ranks_text(missing)}: nothing to "
            "compare (the checker watches torch.optim optimizers and tf-keras "
            "optimizers' apply_gradients)",
        )
    return None


def check_init(ranks: list[dict], framework: str | None = None) -> Check:
    """``hvd.init()`` ran on every rank (of the expected framework, when one is given)."""
    n = len(ranks)
    inited = [r for r in ranks if r["init"]]
    if not inited:
        imported = sorted({f for r in ranks for f in r.get("horovod_imported", [])})
        also = f" (it imported horovod.{', horovod.'.join(imported)})" if imported else ""
        return Check(
            False,
            f"hvd.init() never ran on any of the {n} ranks{also}: each process "
            "trained alone, unaware of the others",
        )
    missing = [r["env_rank"] for r in ranks if not r["init"]]
    if missing:
        return Check(
            False, f"hvd.init() ran on {len(inited)} of {n} ranks; not on {ranks_text(missing)}"
        )
    frameworks = sorted({str(r["init"]["framework"]) for r in inited})
    sizes = sorted({r["init"]["size"] for r in inited})
    where = f"horovod.{'/'.join(frameworks)}, size {'/'.join(str(s) for s in sizes)}"
    if framework and frameworks != [framework]:
        return Check(
            False,
            f"hvd.init() ran on {n} of {n} ranks, but with {where}; expected horovod.{framework}",
        )
    if sizes != [n]:
        return Check(
            False,
            f"hvd.init() ran on {n} of {n} ranks but Horovod's size is "
            f"{'/'.join(str(s) for s in sizes)}, not {n}",
        )
    return Check(True, f"hvd.init() ran on {n} of {n} ranks ({where})")


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
    if (empty := _no_steps(ranks)) is not None:
        return empty
    first = [r["steps"][0].get("params") or [] for r in ranks]
    differ, total = _differing(first)
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
        differ2, _ = _differing(second)
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
    differ, total = _differing(finals)
    if differ == 0:
        return "; still identical after the last step"
    return f"; after the last step they differ on {differ} of {total} tensors"


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


def check_averaged(ranks: list[dict], style: str = "torch") -> Check:
    """The gradients each step applied were identical on every rank, and Horovod reduced; the
    ranks made the same number of steps (:func:`unequal_steps`)."""
    if (empty := _no_steps(ranks)) is not None:
        return empty
    unequal = unequal_steps(ranks)
    if unequal is not None:
        return Check(False, unequal, fix=EQUAL_STEPS_FIX[style])
    counts = [len(r["steps"]) for r in ranks]
    steps = min(counts)
    bad = []
    for k in range(steps):
        grads = [r["steps"][k]["grads"] for r in ranks]
        differ, total = _differing(grads)
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
                f"it was iterated {_plural(passes, 'time')} without a set_epoch call"
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


def check_rank0_checkpoint(ranks: list[dict]) -> Check:
    """Files were saved (torch.save / model.save / save_weights ...) by rank 0 only."""
    saves = {r["env_rank"]: r["saves"] for r in ranks}
    total = sum(len(s) for s in saves.values())
    if total == 0:
        return Check(
            None,
            "no rank saved a file with torch.save / model.save / save_weights "
            "/ tf.train.Checkpoint: nothing to judge",
        )
    others = {rank: s for rank, s in saves.items() if rank != 0 and s}
    if others:
        detail = "; ".join(
            f"rank {rank} saved {_plural(len(s), 'file')} "
            f"({', '.join(sorted({x['path'] for x in s})[:3])})"
            for rank, s in others.items()
        )
        return Check(
            False,
            f"{detail}: save on rank 0 only (if hvd.rank() == 0: ...), the "
            "other ranks hold the same model and overwrite or duplicate its files",
        )
    paths = sorted({x["path"] for x in saves[0]})
    return Check(
        True,
        f"{_plural(total, 'save')}, all by rank 0 ({', '.join(paths[:3])}"
        f"{', ...' if len(paths) > 3 else ''})",
    )


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
    ranks: list[dict], base: dict | None = None, base_note: str = "no np=1 run"
) -> Check:
    """The learning rate the run reached at np=N against the one at np=1 (``base``, the
    first-step record of the same script run alone).

    The LR judged is the highest of the run: a warmup starts from the one-worker LR at any np
    and rises to the scaled one, a decay comes after it. A schedule scaled from its first step
    (a warmup from zero, say) passes on its first step. An LR that stays at its np=1 value is a
    failure, and so are ranks disagreeing at any step; a base that was not seen, a warmup still
    rising at the last step, or a factor that is neither rule's is a warning.
    """
    if (empty := _no_steps(ranks)) is not None:
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

    def times(lr: float) -> float:
        return lr / base_lr if base_lr else float("inf")

    rules = (("linear", n), ("square-root", math.sqrt(n)))
    vs = f"vs {base_lr:g} at np=1"
    if warmed:
        top = (
            f"lr {peak:g} at np={n} (reached at step {reached} of {len(lrs)}, after a "
            f"warmup from {first:g}) {vs} (x{times(peak):.3g})"
        )
    else:
        top = f"lr {peak:g} at np={n} {vs} (x{times(peak):.3g})"
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


def judge(
    ranks: list[dict],
    base: dict | None = None,
    base_note: str = "no np=1 run",
    framework: str | None = None,
) -> dict[str, Check]:
    """Every practice's verdict, in :data:`CHECK_NAMES` order; each FAIL and WARN carries its
    fix in the script's own API (:data:`FIXES`, :func:`style_of`)."""
    ranks = sorted(ranks, key=lambda r: r["env_rank"])
    style = style_of(ranks, framework)
    checks = {
        "init": check_init(ranks, framework),
        "broadcast": check_broadcast(ranks),
        "averaged": check_averaged(ranks, style),
        "sharded": check_sharded(ranks),
        "rank0_checkpoint": check_rank0_checkpoint(ranks),
        "lr_scaled": check_lr_scaled(ranks, base, base_note),
    }
    return {name: with_fix(check, name, style) for name, check in checks.items()}
