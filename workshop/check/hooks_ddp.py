"""Observation hooks for PyTorch DDP scripts (``torch.distributed``, run under torchrun).

Installed with the PyTorch hooks (:func:`workshop.check.hooks_torch.install_torch`): ``import
torch`` has already imported ``torch.distributed`` and ``torch.nn.parallel``. The optimizer,
forward, sampler, checkpoint, clip and local-gradient hooks are PyTorch's, shared with Horovod
scripts; this layer adds what DDP does in Horovod's place (torch 2.14, named by file):

- ``init_process_group`` (``torch/distributed/distributed_c10d.py``) is the ``init`` of the
  practices: framework ``ddp``, with the group's rank and size.
- ``DistributedDataParallel.__init__`` broadcasts rank 0's parameters and buffers with
  ``_sync_module_states(..., src=0)`` (``torch/nn/parallel/distributed.py``, under
  ``init_sync``, the default): the values it leaves in the module are broadcast values, as
  Horovod's ``broadcast_parameters`` outputs are.
- DDP's gradient allreduce runs inside ``backward()`` (the C++ reducer): a forward pass of a
  DDP model in training mode that syncs (not under ``no_sync()``) counts its parameters as
  allreduced, and the ``backward()`` after it is in flight as ``DDP gradients`` (with the
  script's line) until it returns, so a stall sees what each rank waits in; so is the DDP
  model's forward pass (its bucket-order and buffer broadcasts).
- ``torch.distributed`` collectives the script calls (``all_reduce``, ``broadcast``,
  ``barrier``, ...): in flight from the call to its return, each with the script's line; an
  ``all_reduce``'s reduction op (``SUM``, ``AVG``) is recorded like Horovod's.
- ``Join.__exit__`` (``torch/distributed/algorithms/join.py``): the rank has run out of inputs
  and shadows the others' collectives until every rank has joined; recorded as a join
  (``joins``), as ``hvd.join`` is.
"""

from __future__ import annotations

import functools
import os
import time

from workshop.check.observe import MAX_RECORDS, Recorder, source_line

#: torch.distributed collectives watched (blocking calls; ``async_op=True`` ones are in flight
#: until the call returns only).
DIST_COLLECTIVES = (
    "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce", "gather",
    "scatter", "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "barrier",
    "all_gather_object", "broadcast_object_list", "gather_object",
)  # fmt: skip
_OPS = {"SUM": "Sum", "AVG": "Average", "PRODUCT": "Product", "MIN": "Min", "MAX": "Max"}


def install_ddp(recorder: Recorder, torch, fingerprint) -> None:
    """Hook ``torch.distributed`` and ``DistributedDataParallel`` (``fingerprint``: the PyTorch
    hooks' ``[hash, norm]`` of a tensor)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d
    from torch.nn.parallel import distributed as ddp_module

    if os.environ.get("TORCHELASTIC_RUN_ID"):
        # Started by torchrun: a DDP script, whether or not it reaches init_process_group (the
        # fixes then speak DDP's API).
        recorder.imported("ddp")
    _watch_init(recorder, dist, distributed_c10d)
    for name in DIST_COLLECTIVES:
        _watch_collective(recorder, name, dist, distributed_c10d)
    _watch_ddp(recorder, torch, ddp_module, fingerprint)
    _watch_join(recorder)


def _watch_init(recorder: Recorder, dist, c10d) -> None:
    original = c10d.init_process_group

    def started():
        recorder.horovod_init("ddp", dist.get_rank(), dist.get_world_size())
        recorder.imported("ddp")

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        result = original(*args, **kwargs)
        recorder.safely("init_process_group", started)
        return result

    c10d.init_process_group = dist.init_process_group = init_process_group


def _op_name(args, kwargs) -> str:
    op = kwargs.get("op", args[1] if len(args) > 1 else None)
    text = str(op).rpartition(".")[2] if op is not None else "SUM"
    return _OPS.get(text, text)


def _watch_collective(recorder: Recorder, name: str, dist, c10d) -> None:
    original = getattr(c10d, name, None)
    if original is None:
        return

    def submitted(key, args, kwargs):
        where = recorder.where()
        recorder.submitted(key, name, None, where)
        first = args[0] if args else kwargs.get("tensor")
        shape = list(first.shape) if hasattr(first, "shape") else None
        with recorder.lock:
            if len(recorder.dist_calls) < MAX_RECORDS:
                line = source_line(*where) if where else None
                recorder.dist_calls.append({"op": name, "shape": shape, "where": line})
        if name == "all_reduce":
            recorder.allreduced(1)
            recorder.reduced_with(_op_name(args, kwargs), where, None)

    @functools.wraps(original)
    def collective(*args, **kwargs):
        key = object()
        recorder.safely("torch.distributed", submitted, key, args, kwargs)
        try:
            return original(*args, **kwargs)
        finally:
            recorder.safely("torch.distributed", recorder.completed, key)

    setattr(c10d, name, collective)
    setattr(dist, name, collective)


def _watch_ddp(recorder: Recorder, torch, ddp_module, fingerprint) -> None:
    """DDP's broadcast at construction, and its gradient allreduce inside backward()."""
    cls = ddp_module.DistributedDataParallel
    original_sync = ddp_module._sync_module_states
    # sync: the parameters the next backward() allreduces; ready: when a DDP parameter's
    # gradient was last accumulated (its hook runs on the thread that runs backward)
    state: dict = {"sync": 0, "ready": None}

    def broadcast_values(module):
        tensors = [*module.parameters(), *module.buffers()]
        recorder.broadcasted(len(tensors))
        if recorder.wants_params():
            for tensor in tensors:
                recorder.broadcast_value(fingerprint(tensor)[0])

    @functools.wraps(original_sync)
    def sync_module_states(*args, **kwargs):
        result = original_sync(*args, **kwargs)
        module = kwargs.get("module", args[0] if args else None)
        if module is not None:
            recorder.safely("DDP broadcast", broadcast_values, module)
        return result

    ddp_module._sync_module_states = sync_module_states

    original_init = cls.__init__

    def built(model):
        trained = [p for p in model.module.parameters() if p.requires_grad]
        with recorder.lock:
            recorder.ddp.append({
                "where": _line(recorder), "params": len(trained),
                "find_unused_parameters": bool(model.find_unused_parameters),
                # DDP's knobs as built (workshop run --script records them as evidence)
                "bucket_cap_mb": round(model.bucket_bytes_cap / 2**20, 6),
                "gradient_as_bucket_view": bool(model.gradient_as_bucket_view),
                "static_graph": bool(model.static_graph),
            })  # fmt: skip
        if recorder.ddp_waited is not None:  # a timed run: see backward
            for p in trained:
                p.register_post_accumulate_grad_hook(gradient_ready)

    def gradient_ready(_param):
        state["ready"] = time.perf_counter()

    @functools.wraps(original_init)
    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        recorder.safely("DistributedDataParallel", built, self)

    cls.__init__ = init

    original_forward = cls.forward

    @functools.wraps(original_forward)
    def forward(self, *args, **kwargs):
        if self.training and torch.is_grad_enabled() and self.require_backward_grad_sync:
            state["sync"] = sum(1 for p in self.module.parameters() if p.requires_grad)
        # DDP's forward can hold collectives too (from the second iteration on it broadcasts
        # rank 0's rebuilt bucket order, and the buffers): in flight until it returns.
        key = object()
        recorder.safely("DDP forward", recorder.submitted, key, "DDP forward", None,
                        recorder.where())  # fmt: skip
        try:
            return original_forward(self, *args, **kwargs)
        finally:
            recorder.safely("DDP forward", recorder.completed, key)

    cls.forward = forward

    original_backward = torch.autograd.backward

    @functools.wraps(original_backward)
    def backward(*args, **kwargs):
        count, state["sync"], state["ready"] = state["sync"], 0, None
        key = object()
        if count:
            recorder.allreduced(count)
            recorder.safely("DDP backward", recorder.submitted, key, "DDP gradients", None,
                            recorder.where())  # fmt: skip
        try:
            return original_backward(*args, **kwargs)
        finally:
            if count:
                ended = time.perf_counter()
                recorder.safely("DDP backward", recorder.completed, key)
                if recorder.ddp_waited is not None and state["ready"] is not None:
                    # DDP's reducer launches a bucket's allreduce when its last gradient is
                    # ready and waits for all of them at the end of backward()
                    # (finalize_backward, torch/csrc/distributed/c10d/reducer.cpp): from the
                    # last gradient to backward()'s return the rank waits for communication
                    recorder.safely("DDP wait", recorder.ddp_waited, ended - state["ready"])
                if recorder.grad_watch is not None:  # DDP has averaged: watch what follows
                    recorder.safely("gradient writes", recorder.grad_watch.start)

    torch.autograd.backward = backward


def _line(recorder: Recorder) -> str | None:
    where = recorder.where()
    return source_line(*where) if where else None


def _watch_join(recorder: Recorder) -> None:
    """``with model.join():`` (DDP's ``Join`` context manager): the rank joins when its loop
    ends, at ``__exit__``, and waits there, shadowing the others' allreduces with zeros."""
    from torch.distributed.algorithms import join as join_module

    original = join_module.Join.__exit__

    def called(key):
        where = recorder.where()
        recorder.submitted(key, "join", None, where)
        return recorder.join_called(where)

    @functools.wraps(original)
    def exit_(self, kind, value, traceback):
        if kind is not None or not self._enable:
            return original(self, kind, value, traceback)
        key = object()
        entry = recorder.safely("Join", called, key)
        try:
            result = original(self, kind, value, traceback)
        finally:
            recorder.safely("Join", recorder.completed, key)
        if entry is not None:
            recorder.safely("Join", recorder.join_returned, entry, -1)
        return result

    join_module.Join.__exit__ = exit_
