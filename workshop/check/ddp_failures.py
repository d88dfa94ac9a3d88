"""Plain words for PyTorch DDP's own failures, cause first (torch 2.14; each error text quoted
here is the one its source raises, named by file).

- No ``init_process_group``: ``ValueError: Default process group has not been initialized,
  please make sure to call init_process_group.`` (``torch/distributed/distributed_c10d.py``,
  ``_get_default_group``), raised by the first thing that needs the group
  (``DistributedSampler``, ``DistributedDataParallel``, ``dist.get_rank()``).
- A backend this machine cannot run: ``init_process_group("nccl")`` without a GPU
  (``ProcessGroupNCCL is only supported with GPUs, no GPUs found!``).
- Unused parameters: ``RuntimeError: Expected to have finished reduction in the prior
  iteration before starting a new one`` (the reducer, ``torch/csrc/distributed/c10d/
  reducer.cpp``); under ``TORCH_DISTRIBUTED_DEBUG=INFO``, which ``workshop check`` sets, it
  goes on with ``Parameters which did not receive grad for rank N: NAME, ...``.
- Uneven inputs: a rank that ran out of batches leaves, and the other's ``backward()`` fails in
  Gloo (``Connection closed by peer``; ``third_party/gloo/gloo/transport/tcp/pair.cc``):
  the fix is the ``Join`` context manager or equal shards.
- Mismatched shapes: the ranks' collectives are compared in order
  (:func:`mismatched_collective`); Gloo itself does not check them.
- torchrun's ``ChildFailedError`` (``torch/distributed/elastic/multiprocessing/errors``) is
  only torchrun saying a rank failed: the rank's own error is the cause.
"""

from __future__ import annotations

import re

from workshop.check.fixes import EQUAL_STEPS_FIX
from workshop.check.steps import unequal_steps
from workshop.readers.tracebacks import script_frame, where

_UNUSED = re.compile(r"Parameters which did not receive grad for rank (\d+): ([^\n]+)")
_UNUSED_INDICES = re.compile(
    r"Parameter indices which did not receive grad for rank (\d+): ([^\n]+)"
)


def _place(error: dict) -> str:
    frame = script_frame(error)
    return f"{where(frame)}: " if frame else ""


def _no_init(error: dict, output: str) -> str | None:
    if "Default process group has not been initialized" not in (error.get("message") or ""):
        return None
    return (
        f"{_place(error)}the script uses the process group before any "
        "torch.distributed.init_process_group(...) call: the ranks never joined a group, so "
        "DistributedSampler, DistributedDataParallel and dist.get_rank() have nothing to ask. "
        'Call dist.init_process_group("gloo") first thing on every rank (torchrun sets RANK, '
        "WORLD_SIZE, MASTER_ADDR and MASTER_PORT for it)"
    )


def _nccl_without_gpu(error: dict, output: str) -> str | None:
    message = error.get("message") or ""
    if "NCCL" not in message or "GPU" not in message:
        return None
    return (
        f"{_place(error)}the script asks for the NCCL backend, which needs a GPU per rank, and "
        'this machine has none: use init_process_group("gloo") on a CPU (or '
        '"nccl" if torch.cuda.is_available() else "gloo")'
    )


def _unused_parameters(error: dict, output: str) -> str | None:
    message = error.get("message") or ""
    if "Expected to have finished reduction in the prior iteration" not in message:
        return None
    text = f"{message}\n{output}"
    found = _UNUSED.search(text) or _UNUSED_INDICES.search(text)
    which = f" ({found.group(2).strip()} on rank {found.group(1)})" if found else ""
    return (
        f"{_place(error)}the model has parameters that did not take part in the loss{which}: "
        "DDP waits for a gradient of every parameter before it allreduces the last bucket, so "
        "the previous step's reduction never finished. Remove the unused parameters from the "
        "model (or use them), or pass DistributedDataParallel(model, "
        "find_unused_parameters=True), which marks them ready after each forward at the cost "
        "of a walk of the autograd graph every step"
    )


_RULES = (_no_init, _nccl_without_gpu, _unused_parameters)


def explain_ddp_error(error: dict, output: str = "") -> str | None:
    """Plain words for a DDP rank's own error, or None when no rule knows it.

    >>> explain_ddp_error({"type": "ValueError", "message": "bad batch"}) is None
    True
    """
    for rule in _RULES:
        found = rule(error, output)
        if found:
            return found
    return None


def _call(rank: int, call: dict) -> str:
    at = f" at {call['where']}" if call.get("where") else ""
    return f"rank {rank} {call['op']} of shape {call['shape']}{at}"


def mismatched_collective(observations: dict[int, dict]) -> str | None:
    """The first ``torch.distributed`` collective the ranks called differently (another op,
    or another shape at the same place in their order), in words; None when they agree.

    Gloo does not check: an ``all_reduce`` of 3 elements on rank 0 against 4 on rank 1 returns
    on rank 0 (with a sum of what it got) while rank 1 waits for the rest (torch 2.14, Gloo,
    2 CPU ranks: rank 0 went on, rank 1 failed with "Connection closed by peer" once rank 0
    left)."""
    calls = {r: obs.get("dist_calls") or [] for r, obs in sorted(observations.items())}
    if len(calls) < 2:
        return None
    for k in range(min(len(c) for c in calls.values())):
        seen = {r: c[k] for r, c in calls.items()}
        if len({(x["op"], str(x["shape"])) for x in seen.values()}) > 1:
            each = "; ".join(_call(r, x) for r, x in seen.items())
            return (
                f"the ranks' collective number {k + 1} does not match ({each}): a "
                "torch.distributed collective must be called by every rank with the same op "
                "and shape (Gloo does not check: one rank returns with a wrong result, another "
                "waits). Fix: give every rank tensors of the same shape (pad, or all_gather the "
                "sizes first), or gather objects with dist.all_gather_object"
            )
    return None


def explain_ddp_consequence(observations: dict[int, dict], output: str = "") -> str | None:
    """Why a DDP rank failed because another left or failed first: a collective the ranks
    called differently (:func:`mismatched_collective`), uneven inputs (the ranks' unequal step
    counts, and the ``Join`` fix), and torchrun's ``ChildFailedError`` as the consequence of a
    rank's own error. None when none applies."""
    parts = []
    ranks = [observations[r] for r in sorted(observations)]
    mismatch = mismatched_collective(observations)
    if mismatch:
        parts.append(mismatch)
    unequal = unequal_steps(ranks)
    if unequal:
        parts.append(f"uneven inputs: {unequal}. Fix: {EQUAL_STEPS_FIX['ddp']}")
    if "ChildFailedError" in output:
        parts.append(
            "torchrun's ChildFailedError only says that a rank failed: the cause is the first "
            "rank's own error above"
        )
    return "; ".join(parts) or None
