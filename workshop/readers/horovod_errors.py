"""Horovod's own errors that a learner's script can cause: the cause, and the fix in the script's
API (PyTorch, a TensorFlow custom loop, Keras ``Model.fit``).

:func:`explain_horovod_error` matches a rank's error message against Horovod 0.28's wording
(``horovod/common/controller.cc``, ``common.h``, ``torch/optimizer.py``) and returns one
paragraph, or None (the report names the learner's own line above it). The errors, one rule
each (:data:`RULES`):

- mismatched root ranks in one broadcast (``root_rank=hvd.rank()``);
- mismatched shapes, data types, operations or reduction ops across ranks in one collective;
- ``backward_passes_per_step`` exceeded (gradient accumulation without telling Horovod);
- a tensor name submitted twice while the first is still in flight;
- Horovod used before ``hvd.init()``.

"Horovod has been shut down" depends on what the other ranks did: see
:func:`workshop.check.failures.explain_shutdown`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["RULES", "explain_horovod_error"]

_ROOT = re.compile(
    r"Mismatched (?P<op>\w+) root ranks: One rank specified root rank (?P<a>\d+), but another "
    r"rank specified root rank (?P<b>\d+)"
)
_SHAPE = re.compile(
    r"Mismatched (?P<op>\w+) tensor shapes: One rank sent a tensor of shape (?P<a>\[[^\]]*\]), "
    r"but another rank sent a tensor of shape (?P<b>\[[^\]]*\])"
)
_DTYPE = re.compile(
    r"Mismatched data types: One rank had type (?P<a>\w+), but another rank had type (?P<b>\w+)"
)
_OPS = re.compile(
    r"Mismatched operations: One rank did an (?P<a>\w+), but another rank did an (?P<b>\w+)"
)
_REDUCTION = re.compile(r"Mismatched reduction operation")
_PASSES = "Gradients were computed more than backward_passes_per_step times"
_DUPLICATE = "with the same name as another tensor that is currently being processed"
_NOT_INITIALIZED = "Horovod has not been initialized"

_BROADCAST_FIX = {
    "torch": "hvd.broadcast_parameters(model.state_dict(), root_rank=0) and "
    "hvd.broadcast_optimizer_state(optimizer, root_rank=0), the same on every rank",
    "tf": "hvd.broadcast_variables(model.variables, root_rank=0), the same on every rank",
    "keras": "hvd.callbacks.BroadcastGlobalVariablesCallback(0) in every rank's callbacks",
}
_PASSES_FIX = {
    "torch": "tell Horovod how many backward passes make one step: optimizer = "
    "hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(), "
    "backward_passes_per_step=N), with N the loss.backward() calls before each "
    "optimizer.step() (or call optimizer.step() after every backward)",
    "tf": "accumulate the gradients yourself and apply them once per N batches, or "
    "hvd.DistributedOptimizer(optimizer, backward_passes_per_step=N)",
    "keras": "hvd.DistributedOptimizer(optimizer, backward_passes_per_step=N, "
    "average_aggregated_gradients=True)",
}
_INIT_FIX = {
    "torch": "import horovod.torch as hvd; hvd.init() first thing in main(), before any other "
    "hvd call (hvd.rank(), hvd.size(), hvd.DistributedOptimizer, a broadcast)",
    "tf": "import horovod.tensorflow as hvd; hvd.init() first thing, before any other hvd call",
    "keras": "import horovod.tensorflow.keras as hvd; hvd.init() first thing, before any other "
    "hvd call",
}


def _root_ranks(error: dict, style: str) -> str | None:
    match = _ROOT.search(error.get("message") or "")
    if not match:
        return None
    return (
        f"the ranks called one {match['op'].lower()} with different root ranks "
        f"({match['a']} on one rank, {match['b']} on another): a root rank that depends on the "
        "rank (root_rank=hvd.rank(), or a variable set differently per rank). Every rank must "
        "name the same root, the rank whose values all start from. Fix: root_rank=0 on every "
        f"rank: {_BROADCAST_FIX[style]}"
    )


def _shapes(error: dict, style: str) -> str | None:
    match = _SHAPE.search(error.get("message") or "")
    if not match:
        return None
    return (
        f"the ranks submitted one {match['op'].lower()} with tensors of different "
        f"shapes ({match['a']} and {match['b']}): a tensor whose size depends on the rank's "
        "data (the last, smaller batch; a list of per-sample values) or a model built "
        "differently on one rank. Horovod pairs tensors by name and needs the same shape on "
        "every rank. Fix: reduce something of the same shape everywhere (a mean: "
        "hvd.allreduce(values.mean())), or use hvd.allgather(tensor) for tensors whose first "
        "dimension differs per rank"
    )


def _dtypes(error: dict, style: str) -> str | None:
    match = _DTYPE.search(error.get("message") or "")
    if not match:
        return None
    cast = "tensor.float()" if style == "torch" else "tf.cast(tensor, tf.float32)"
    return (
        f"the ranks submitted one collective with different data types "
        f"({match['a']} on one rank, {match['b']} on another): a tensor converted on some "
        "ranks only (.double(), .half(), a cast under `if hvd.rank() == 0:`) or built from "
        "data of another type on one rank. Fix: the same dtype on every rank; cast right "
        f"before the collective, e.g. {cast}"
    )


def _operations(error: dict, style: str) -> str | None:
    message = error.get("message") or ""
    match = _OPS.search(message)
    if match:
        what = f"one rank did an {match['a'].lower()}, another an {match['b'].lower()}"
    elif _REDUCTION.search(message):
        what = "different reductions: op=hvd.Average on one rank, hvd.Sum on another"
    else:
        return None
    return (
        f"the ranks submitted different collectives under one name ({what}): "
        "calls inside a branch on the rank (`if hvd.rank() == 0:`) or in a different order "
        "on each rank. Fix: every rank makes the same collectives, with the same op, in the "
        "same order; move them out of rank-only branches (only printing and saving belong "
        "there)"
    )


def _backward_passes(error: dict, style: str) -> str | None:
    if _PASSES not in (error.get("message") or ""):
        return None
    return (
        f"the script runs backward() more than once before optimizer.step() "
        "(gradient accumulation), but hvd.DistributedOptimizer allreduces the gradients after "
        f"every backward pass unless told otherwise. Fix: {_PASSES_FIX[style]}"
    )


def _duplicate_name(error: dict, style: str) -> str | None:
    if _DUPLICATE not in (error.get("message") or ""):
        return None
    return (
        "the script submitted a second tensor under a name that is still in "
        "flight (the same name= given to two async collectives, e.g. in a loop, before the "
        "first finished). Fix: a name of its own per tensor (name=f'metric.{i}'), or wait for "
        "each one (hvd.synchronize(handle)) before submitting the next under that name; "
        "leaving name out lets Horovod number them"
    )


def _not_initialized(error: dict, style: str) -> str | None:
    if _NOT_INITIALIZED not in (error.get("message") or ""):
        return None
    return (
        f"the script called Horovod before hvd.init() ran (hvd.rank(), hvd.size(), "
        "a collective, or hvd.DistributedOptimizer all need it). Fix: "
        f"{_INIT_FIX[style]}"
    )


RULES: tuple[Callable[[dict, str], str | None], ...] = (
    _root_ranks,
    _shapes,
    _dtypes,
    _operations,
    _backward_passes,
    _duplicate_name,
    _not_initialized,
)


def explain_horovod_error(error: dict, style: str = "torch") -> str | None:
    """The cause and the fix of a Horovod error a learner's script caused, or None.

    Args:
        error: the rank's ``error`` record (``type``, ``message``, ``traceback``, ``script``).
        style: ``torch``, ``tf`` or ``keras`` (:func:`workshop.check.fixes.style_of`): the
            API the fix is written in.

    >>> explain_horovod_error({"message": "Horovod has not been initialized; use hvd.init().",
    ...                        "traceback": ""}).split(". Fix:")[0]
    'the script called Horovod before hvd.init() ran (hvd.rank(), hvd.size(), a collective, or hvd.DistributedOptimizer all need it)'
    """  # noqa: E501
    for rule in RULES:
        found = rule(error, style)
        if found:
            return found
    return None
