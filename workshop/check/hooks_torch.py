"""Observation hooks for PyTorch scripts (installed when the script imports torch / Horovod).

- Optimizer steps: torch's global optimizer step pre/post hooks. ``hvd.DistributedOptimizer``
  makes a subclass whose ``step`` synchronizes the allreduced gradients and then calls the
  wrapped optimizer's ``step``, so the hooks fire twice per step; only the outermost call
  counts. Before it: the learning rates and (first steps) the parameters; after it: the
  gradients the step applied.
- Training samples: global forward hooks; the outermost module that has parameters, called in
  training mode with autograd on, is the model, and the rows of its first tensor input are the
  samples of the batch.
- Epochs: ``DistributedSampler.set_epoch`` (each call starts an epoch; the samples of an epoch
  are compared across ranks, since its new shuffle rightly hands a rank samples another rank
  had the epoch before).
- Checkpoints: ``torch.save``.
- The zero-gradient step ``hvd.broadcast_optimizer_state`` makes to create the optimizer's
  state is not a training step: steps inside it are not recorded.
- Horovod traffic: ``horovod.torch.mpi_ops``'s private ``_allreduce_async``,
  ``_grouped_allreduce_async``, ``_broadcast_async`` and the other ``_*_async`` functions
  (every public collective goes through them, looked up at call time), with the line of the
  script that submitted each, until ``synchronize`` completes it. What a broadcast wrote (its
  output tensor) is fingerprinted at the next recorded step: a parameter holding that value
  was set from rank 0.
- ``hvd.join`` (``horovod.torch.mpi_ops.join``, which ``horovod.torch`` imports after this
  hook has replaced it): each call, with the steps made before it and what it returned (the
  last rank to join); in flight (op ``join``) while it waits for the other ranks.
- ``hvd.broadcast_object``: a Python object, counted apart (the resume epoch is not the
  parameters); tensors inside the object it returns (a broadcast ``state_dict``) count as
  broadcast values.
"""

from __future__ import annotations

import functools
import os

from workshop.check.gradwrites import GradWrites
from workshop.check.observe import Recorder, row_digests


def _dense(tensor):
    """A detached CPU dense tensor (a sparse gradient, ``nn.Embedding(sparse=True)``'s, summed
    over its duplicate indices)."""
    tensor = tensor.detach()
    if tensor.is_sparse:
        tensor = tensor.coalesce().to_dense()
    return tensor.to("cpu")


def _tensor_array(tensor):
    """A detached CPU numpy view of a tensor (bfloat16 as its raw 16-bit words)."""
    import torch

    tensor = _dense(tensor).contiguous()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    return tensor.numpy()


def _fingerprint(tensor) -> list:
    from workshop.check.observe import array_fingerprint

    if tensor is None:
        return ["none", 0.0]
    return array_fingerprint(_tensor_array(tensor))


_DIRECTIONS: dict[int, object] = {}


def projection(tensor) -> list | None:
    """``[sum, dot, bound]`` of a gradient in float64: the sum of its elements and its dot
    product with a fixed random direction (the same on every rank: seeded by the size), both
    linear, so the projection of the ranks' mean gradient is the mean of their projections;
    ``bound`` (the sum of ``|g| * (1 + |direction|)``) scales the rounding error a comparison
    allows. None for no gradient."""
    import torch

    if tensor is None:
        return None
    flat = _dense(tensor).to(torch.float64).reshape(-1)
    size = flat.numel()
    direction = _DIRECTIONS.get(size)
    if direction is None:
        generator = torch.Generator().manual_seed(size)
        direction = _DIRECTIONS[size] = torch.randn(size, generator=generator, dtype=torch.float64)
    bound = flat.abs() @ (1 + direction.abs())
    return [float(flat.sum()), float(flat @ direction), float(bound)]


def _params(optimizer) -> list:
    return [p for group in optimizer.param_groups for p in group["params"]]


def _first_tensor(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            found = _first_tensor(item)
            if found is not None:
                return found
    return None


def install_torch(recorder: Recorder, torch) -> None:
    """Hook optimizer steps, the model's forward pass and ``torch.save``."""
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module

    state = {"step_depth": 0, "forward_depth": 0, "skipped": []}

    def before_step(optimizer):
        recorder.step_started()
        lr = [float(group.get("lr", float("nan"))) for group in optimizer.param_groups]
        params = None
        if recorder.wants_params():
            outputs, recorder.broadcast_outputs = recorder.broadcast_outputs, []
            for output in outputs:
                recorder.broadcast_value(_fingerprint(output)[0])
            params = [_fingerprint(p) for p in _params(optimizer)]
        state["pending"] = (lr, params)
        recorder.final_params_reader = lambda: [_fingerprint(p) for p in _params(optimizer)]
        if recorder.probe:
            recorder.step(lr, [], None)

    def after_step(optimizer):
        lr, params = state.pop("pending", ([], None))
        found = _params(optimizer)
        with recorder.lock:
            local, recorder.local = recorder.local, {}
        mean = recorder.local_gradients  # the projections compared with the mean
        recorder.step(
            lr, [_fingerprint(p.grad) for p in found], params,
            [local.get(id(p)) for p in found] if mean else None,
            [projection(p.grad) for p in found] if mean else None,
        )  # fmt: skip

    def step_pre(optimizer, args, kwargs):
        state["step_depth"] += 1
        watch.in_step = True
        recorder.safely("gradient writes", watch.stop)
        if state["step_depth"] == 1 and not recorder.muted:
            recorder.safely("optimizer step", before_step, optimizer)

    def step_post(optimizer, args, kwargs):
        state["step_depth"] -= 1
        watch.in_step = state["step_depth"] > 0
        if state["step_depth"] == 0 and not recorder.muted:
            recorder.safely("optimizer step", after_step, optimizer)

    def record_batch(args):
        tensor = _first_tensor(args)
        if tensor is not None and tensor.dim() > 0:
            recorder.batch(row_digests(_tensor_array(tensor)))

    def forward_pre(module, args):
        state["forward_depth"] += 1
        if state["forward_depth"] > 1 or not module.training or not torch.is_grad_enabled():
            return
        if next(module.parameters(), None) is None:
            # A loss function or a wrapper, not the model: the next module down is outermost.
            state["forward_depth"] -= 1
            state["skipped"].append(module)
            return
        recorder.safely("training batch", record_batch, args)

    def forward_post(module, args, output):
        if state["skipped"] and state["skipped"][-1] is module:
            state["skipped"].pop()
            return
        state["forward_depth"] = max(0, state["forward_depth"] - 1)

    hooked = _watch_local_gradients(recorder, optim_module.Optimizer)
    watch = recorder.grad_watch = GradWrites(
        recorder, torch, lambda: [p for p in (ref() for ref in hooked.values()) if p is not None]
    )
    _watch_clips(recorder, torch)
    optim_module.register_optimizer_step_pre_hook(step_pre)
    optim_module.register_optimizer_step_post_hook(step_post)
    nn_module.register_module_forward_pre_hook(forward_pre)
    nn_module.register_module_forward_hook(forward_post, always_call=True)

    from torch.utils.data.distributed import DistributedSampler as sampler_cls

    original_set_epoch = sampler_cls.set_epoch

    @functools.wraps(original_set_epoch)
    def set_epoch(self, *args, **kwargs):
        recorder.safely("set_epoch", recorder.new_epoch)
        return original_set_epoch(self, *args, **kwargs)

    sampler_cls.set_epoch = set_epoch

    original_sampler_iter = sampler_cls.__iter__

    @functools.wraps(original_sampler_iter)
    def sampler_iter(self):
        recorder.safely(
            "DistributedSampler",
            recorder.sampler_pass,
            self.shuffle, self.num_replicas, self.rank, self.epoch,
        )  # fmt: skip
        return original_sampler_iter(self)

    sampler_cls.__iter__ = sampler_iter

    from torch.utils.data import DataLoader

    original_loader_iter = DataLoader.__iter__

    @functools.wraps(original_loader_iter)
    def loader_iter(self):
        recorder.safely("DataLoader", recorder.data_source, len(self.dataset))
        return original_loader_iter(self)

    DataLoader.__iter__ = loader_iter

    original_save = torch.save

    @functools.wraps(original_save)
    def save(obj, f, *args, **kwargs):
        if isinstance(f, str | os.PathLike):
            path = os.fspath(f)
        else:
            path = str(getattr(f, "name", type(f).__name__))
        recorder.saved(path, "torch.save")
        return original_save(obj, f, *args, **kwargs)

    torch.save = save
    torch.serialization.save = save

    if torch.distributed.is_available():
        from workshop.check.hooks_ddp import install_ddp

        install_ddp(recorder, torch, _fingerprint)


def _watch_local_gradients(recorder: Recorder, optimizer_cls) -> dict:
    """Each parameter an optimizer takes gets a post-accumulate-grad hook: it sees the gradient
    backward left in ``.grad`` before any reduction. Torch runs these hooks inside
    ``AccumulateGrad`` before the node's post hooks (torch 2.14
    ``torch/csrc/autograd/functions/accumulate_grad.cpp``), and both Horovod's
    ``DistributedOptimizer`` (``grad_acc.register_hook``, horovod/torch/optimizer.py) and DDP's
    reducer (``add_post_hook``, reducer.cpp) start their reduction from such a post hook; a
    2-rank DDP run confirmed it (the hook saw each rank's own gradient, with and without
    ``gradient_as_bucket_view``). Returns the parameters hooked (id -> weak reference)."""
    import weakref

    # id -> weak reference (a WeakSet would compare tensors with ==, elementwise)
    hooked: dict[int, weakref.ref] = {}
    original = optimizer_cls.add_param_group

    def local(param):
        if recorder.local_gradients and not recorder.muted:
            value = projection(param.grad)
            with recorder.lock:
                recorder.local[id(param)] = value

    def hook(param):
        recorder.safely("local gradient", local, param)

    @functools.wraps(original)
    def add_param_group(self, param_group):
        result = original(self, param_group)
        for param in self.param_groups[-1]["params"]:
            seen = hooked.get(id(param))
            if param.requires_grad and (seen is None or seen() is not param):
                hooked[id(param)] = weakref.ref(param)
                param.register_post_accumulate_grad_hook(hook)
        return result

    optimizer_cls.add_param_group = add_param_group
    return hooked


def _watch_clips(recorder: Recorder, torch) -> None:
    """``torch.nn.utils.clip_grad_norm_`` / ``clip_grad_value_``: the script's line, and whether
    a reduction of the gradients was in flight (Horovod reduces in the background from
    backward until ``synchronize()``)."""
    from torch.nn.utils import clip_grad

    for name in ("clip_grad_norm_", "clip_grad_value_"):
        original = getattr(clip_grad, name)

        def clip(*args, _original=original, _name=name, **kwargs):
            recorder.safely("clip", recorder.clipped, _name, recorder.where())
            return _original(*args, **kwargs)

        functools.update_wrapper(clip, original)
        setattr(clip_grad, name, clip)
        setattr(torch.nn.utils, name, clip)


# (private function, Horovod's op, index of the name argument, index of the output argument)
_COLLECTIVES = (
    ("_allreduce_async", "allreduce", 2, None),
    ("_grouped_allreduce_async", "grouped_allreduce", 2, None),
    ("_broadcast_async", "broadcast", 3, 1),
    ("_allgather_async", "allgather", 2, None),
    ("_grouped_allgather_async", "grouped_allgather", 2, None),
    ("_alltoall_async", "alltoall", 4, None),
    ("_reducescatter_async", "reducescatter", 2, None),
    ("_grouped_reducescatter_async", "grouped_reducescatter", 2, None),
)


def install_horovod_torch_ops(recorder: Recorder, mpi_ops) -> None:
    """Count the tensors Horovod allreduces and broadcasts; keep each collective in flight
    (with the script line that submitted it) until ``synchronize`` returns."""
    recorder.imported("torch")
    ops = {getattr(mpi_ops, op): op for op in ("Average", "Sum", "Adasum", "Min", "Max", "Product")
           if hasattr(mpi_ops, op)}  # fmt: skip
    counts = {
        "_allreduce_async": (lambda args: 1, recorder.allreduced),
        "_grouped_allreduce_async": (lambda args: len(args[0]), recorder.allreduced),
        "_broadcast_async": (lambda args: 1, recorder.broadcasted),
    }

    def watched(function: str, op: str, name_at: int, output_at: int | None):
        original = getattr(mpi_ops, function, None)
        if original is None:
            return

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            if function in counts:
                count, event = counts[function]
                event(count(args))
            handle = original(*args, **kwargs)
            recorder.safely("collective", observe, args, handle)
            return handle

        def observe(args, handle):
            name = args[name_at] if len(args) > name_at else None
            if function in counts and function != "_broadcast_async" and len(args) > 3:
                recorder.reduced_with(ops.get(args[3], str(args[3])), recorder.where(),
                                      recorder.via())  # fmt: skip
            recorder.submitted(handle, op, name, recorder.where(), recorder.via())
            if output_at is not None and recorder.wants_params():
                recorder.broadcast_outputs.append(args[output_at])

        setattr(mpi_ops, function, wrapper)

    for function, op, name_at, output_at in _COLLECTIVES:
        watched(function, op, name_at, output_at)

    _watch_join(recorder, mpi_ops)

    original_synchronize = mpi_ops.synchronize

    def reduced():
        if recorder.grad_watch is not None and not recorder.reducing():
            recorder.grad_watch.start()

    @functools.wraps(original_synchronize)
    def synchronize(handle):
        try:
            return original_synchronize(handle)
        finally:
            recorder.completed(handle)
            recorder.safely("gradient writes", reduced)

    mpi_ops.synchronize = synchronize


def _watch_join(recorder: Recorder, mpi_ops) -> None:
    """Record each ``hvd.join()``: when it was called (after how many steps) and what it
    returned; it is in flight while it waits for the ranks that have not joined yet."""
    original = getattr(mpi_ops, "join", None)
    if original is None:
        return

    def called(key):
        where = recorder.where()
        recorder.submitted(key, "join", None, where)
        return recorder.join_called(where)

    @functools.wraps(original)
    def join(*args, **kwargs):
        key = object()
        entry = recorder.safely("hvd.join", called, key)
        try:
            last = original(*args, **kwargs)
        finally:
            recorder.safely("hvd.join", recorder.completed, key)
        if entry is not None:
            recorder.safely("hvd.join", recorder.join_returned, entry, last)
        return last

    mpi_ops.join = join


def _tensors_in(value, torch, found: list, depth: int = 0) -> list:
    """The tensors inside a (nested) dict / list / tuple, e.g. a broadcast ``state_dict``."""
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif depth < 4 and isinstance(value, dict):
        for item in value.values():
            _tensors_in(item, torch, found, depth + 1)
    elif depth < 4 and isinstance(value, list | tuple):
        for item in value:
            _tensors_in(item, torch, found, depth + 1)
    return found


def install_horovod_torch_functions(recorder: Recorder, functions) -> None:
    """``hvd.broadcast_optimizer_state`` makes a step with zero gradients to create the
    optimizer's state before broadcasting it: that step is not training, so it is not counted
    (nor is the ``broadcast_object`` of its scalars). ``hvd.broadcast_object`` called by the
    script is counted apart, and the tensors of the object it returns are broadcast values.
    """
    import torch

    original = functions.broadcast_optimizer_state

    @functools.wraps(original)
    def broadcast_optimizer_state(*args, **kwargs):
        recorder.muted += 1
        try:
            return original(*args, **kwargs)
        finally:
            recorder.muted -= 1

    functions.broadcast_optimizer_state = broadcast_optimizer_state

    original_object = functions.broadcast_object

    def values_of(result):
        if recorder.wants_params():
            for tensor in _tensors_in(result, torch, []):
                recorder.broadcast_value(_fingerprint(tensor)[0])

    @functools.wraps(original_object)
    def broadcast_object(*args, **kwargs):
        if not recorder.muted:
            recorder.object_broadcasts += 1
        result = original_object(*args, **kwargs)
        recorder.safely("broadcast_object", values_of, result)
        return result

    functions.broadcast_object = broadcast_object
