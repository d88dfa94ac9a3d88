"""Which line of the script changed a gradient after its reduction, before the optimizer step.

Between the end of the reduction (Horovod: the last ``synchronize`` of a gradient; DDP: the
end of ``backward()``) and the optimizer's step, a PyTorch ``TorchFunctionMode`` watches the
calls the script makes: an in-place call on a parameter's gradient (``p.grad.mul_(2)``,
``p.grad *= 2``, ``torch._foreach_mul_`` inside ``clip_grad_norm_``) is recorded with the
script's line (``grad_writes``: ``{"how", "where", "step"}``). The mode is on only in that
window, so the rest of the script runs as it would without the checker; ``averaged`` names the
line when one rank applied something other than the mean.
"""

from __future__ import annotations

from workshop.check.observe import MAX_RECORDS, Recorder, source_line

#: In-place operators that go through ``__torch_function__`` under their dunder names.
_IN_PLACE_DUNDERS = {"__imul__", "__iadd__", "__isub__", "__itruediv__", "__setitem__"}


class GradWrites:
    """The watcher of one rank: :meth:`start` when the reduction has ended, :meth:`stop` at
    the optimizer step (``params``: a callable giving the parameters the optimizers hold)."""

    def __init__(self, recorder: Recorder, torch, params):
        self.recorder = recorder
        self.torch = torch
        self.params = params
        self.mode = None
        self.in_step = False

    def start(self) -> None:
        if self.mode is not None or self.in_step or not self.recorder.local_gradients:
            return
        grads = {id(p.grad) for p in self.params() if p.grad is not None}
        if not grads:
            return
        self.mode = _mode(self.torch, self.recorder, grads)
        self.mode.__enter__()

    def stop(self) -> None:
        if self.mode is not None:
            mode, self.mode = self.mode, None
            mode.__exit__(None, None, None)


def _mode(torch, recorder: Recorder, grads: set[int]):
    from torch.overrides import TorchFunctionMode

    def touches(value) -> bool:
        if isinstance(value, list | tuple):
            return any(touches(item) for item in value)
        return isinstance(value, torch.Tensor) and id(value) in grads

    class Watch(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            name = getattr(func, "__name__", "")
            in_place = name.endswith("_") and not name.startswith("__")
            if (in_place or name in _IN_PLACE_DUNDERS) and args and touches(args[0]):
                recorder.safely("gradient write", written, name)
            return func(*args, **(kwargs or {}))

    def written(name: str) -> None:
        where = recorder.where()
        with recorder.lock:
            if len(recorder.grad_writes) < MAX_RECORDS:
                recorder.grad_writes.append({
                    "how": name, "where": source_line(*where) if where else None,
                    "step": len(recorder.steps) + 1,
                })  # fmt: skip

    return Watch()
