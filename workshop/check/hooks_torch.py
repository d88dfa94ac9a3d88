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
  ``_grouped_allreduce_async`` and ``_broadcast_async`` (every public collective goes through
  them, looked up at call time).
"""

from __future__ import annotations

import functools
import os

from workshop.check.observe import Recorder, row_digests


def _tensor_array(tensor):
    """A detached CPU numpy view of a tensor (bfloat16 as its raw 16-bit words)."""
    import torch

    tensor = tensor.detach().to("cpu").contiguous()
    if tensor.dtype == torch.bfloat16:
        tensor = tensor.view(torch.int16)
    return tensor.numpy()


def _fingerprint(tensor) -> list:
    from workshop.check.observe import array_fingerprint

    if tensor is None:
        return ["none", 0.0]
    return array_fingerprint(_tensor_array(tensor))


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
        lr = [float(group.get("lr", float("nan"))) for group in optimizer.param_groups]
        params = [_fingerprint(p) for p in _params(optimizer)] if recorder.wants_params() else None
        state["pending"] = (lr, params)
        recorder.final_params_reader = lambda: [_fingerprint(p) for p in _params(optimizer)]
        if recorder.probe:
            recorder.step(lr, [], None)

    def after_step(optimizer):
        lr, params = state.pop("pending", ([], None))
        recorder.step(lr, [_fingerprint(p.grad) for p in _params(optimizer)], params)

    def step_pre(optimizer, args, kwargs):
        state["step_depth"] += 1
        if state["step_depth"] == 1 and not recorder.muted:
            recorder.safely("optimizer step", before_step, optimizer)

    def step_post(optimizer, args, kwargs):
        state["step_depth"] -= 1
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


def install_horovod_torch_ops(recorder: Recorder, mpi_ops) -> None:
    """Count the tensors Horovod allreduces and broadcasts."""
    recorder.imported("torch")

    def counted(name: str, count, event):
        original = getattr(mpi_ops, name)

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            event(count(args))
            return original(*args, **kwargs)

        setattr(mpi_ops, name, wrapper)

    counted("_allreduce_async", lambda args: 1, recorder.allreduced)
    counted("_grouped_allreduce_async", lambda args: len(args[0]), recorder.allreduced)
    counted("_broadcast_async", lambda args: 1, recorder.broadcasted)


def install_horovod_torch_functions(recorder: Recorder, functions) -> None:
    """``hvd.broadcast_optimizer_state`` makes a step with zero gradients to create the
    optimizer's state before broadcasting it: that step is not training, so it is not counted.
    """
    original = functions.broadcast_optimizer_state

    @functools.wraps(original)
    def broadcast_optimizer_state(*args, **kwargs):
        recorder.muted += 1
        try:
            return original(*args, **kwargs)
        finally:
            recorder.muted -= 1

    functions.broadcast_optimizer_state = broadcast_optimizer_state
