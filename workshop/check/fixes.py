"""The fix of each practice in the script's own API (PyTorch, a TensorFlow custom loop, Keras
``Model.fit``), and how to tell which of them a script uses."""

from __future__ import annotations

from dataclasses import replace

from workshop.check.evidence import Check
from workshop.runspec import style_of_framework

#: How a script trains, for the fix to name its own API: PyTorch with Horovod, a TensorFlow 2
#: custom loop (GradientTape), tf-keras ``Model.fit``, or PyTorch DDP.
STYLES = ("torch", "tf", "keras", "ddp")

#: The fix of each practice, in each style's own code.
PRACTICE_FIXES = {
    "init": {
        "torch": "import horovod.torch as hvd; hvd.init() first thing in main(), on every rank",
        "tf": "import horovod.tensorflow as hvd; hvd.init() first thing, on every rank",
        "keras": "import horovod.tensorflow.keras as hvd; hvd.init() first thing, on every rank",
        "ddp": 'torch.distributed.init_process_group("gloo") first thing, on every rank (run '
        "under torchrun, which sets RANK, WORLD_SIZE and MASTER_ADDR)",
    },
    "broadcast": {
        "torch": "hvd.broadcast_parameters(model.state_dict(), root_rank=0) and "
        "hvd.broadcast_optimizer_state(optimizer, root_rank=0) after building the model and "
        "the optimizer (and after rank 0 loads a checkpoint)",
        "tf": "after the first step: if first_batch: hvd.broadcast_variables(model.variables, "
        "root_rank=0); hvd.broadcast_variables(optimizer.variables(), root_rank=0)",
        "keras": "model.fit(..., callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0), "
        "...])",
        "ddp": "model = DistributedDataParallel(model) before training (it broadcasts rank 0's "
        "parameters and buffers), after rank 0 loads a checkpoint; never init_sync=False",
    },
    "averaged": {
        "torch": "optimizer = hvd.DistributedOptimizer(optimizer, "
        "named_parameters=model.named_parameters())",
        "tf": "tape = hvd.DistributedGradientTape(tape) before tape.gradient(...)",
        "keras": "optimizer = hvd.DistributedOptimizer(optimizer) before model.compile(...)",
        "ddp": "model = DistributedDataParallel(model), and call the wrapped model in training "
        "(outside model.no_sync() on the step's last backward)",
    },
    "sharded": {
        "torch": "sampler = DistributedSampler(dataset, num_replicas=hvd.size(), "
        "rank=hvd.rank()); DataLoader(dataset, batch_size=..., sampler=sampler); "
        "sampler.set_epoch(epoch) at the start of each epoch",
        "tf": "dataset = dataset.shard(hvd.size(), hvd.rank()) before .shuffle() and .batch()",
        "keras": "x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()] (or "
        "dataset.shard(hvd.size(), hvd.rank())) before model.fit",
        "ddp": "sampler = DistributedSampler(dataset) (rank and size from the process group); "
        "DataLoader(dataset, batch_size=..., sampler=sampler); sampler.set_epoch(epoch) at the "
        "start of each epoch",
    },
    "rank0_checkpoint": {
        "torch": "if hvd.rank() == 0: torch.save(...)",
        "tf": "if hvd.rank() == 0: checkpoint.save(...)",
        "keras": "if hvd.rank() == 0: callbacks.append(keras.callbacks.ModelCheckpoint(...))",
        "ddp": "if dist.get_rank() == 0: torch.save(model.module.state_dict(), ...)",
    },
    "lr_scaled": {
        "torch": "lr = base_lr * hvd.size() (warm up to it over the first epoch), e.g. "
        "torch.optim.SGD(model.parameters(), lr=base_lr * hvd.size())",
        "tf": "optimizer = tf.keras.optimizers.SGD(base_lr * hvd.size())",
        "keras": "optimizer = keras.optimizers.SGD(base_lr * hvd.size()) with "
        "hvd.callbacks.LearningRateWarmupCallback(initial_lr=base_lr * hvd.size(), "
        "warmup_epochs=...)",
        "ddp": "lr = base_lr * dist.get_world_size() (warm up to it over the first epoch)",
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
    "ddp": "train under DDP's Join context manager: with model.join(): for batch in loader: "
    "... (the ranks that run out shadow the others' allreduces), or DistributedSampler(dataset) "
    "(it pads every shard to the same size), or DataLoader(..., drop_last=True)",
}


#: The fixes of a step that did not apply the mean of the ranks' own gradients: a Sum, a clip
#: while Horovod still reduces, a gradient changed after the reduction.
MEAN_FIXES = {
    "sum": {
        "torch": "average, Horovod's default: hvd.allreduce_(p.grad, op=hvd.Average), or "
        "hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters()) "
        "without op=hvd.Sum; then scale the lr by hvd.size() once, not the gradients too",
        "ddp": "let DDP average: model = DistributedDataParallel(model); by hand, "
        "dist.all_reduce(p.grad); p.grad /= dist.get_world_size()",
        "tf": "tape = hvd.DistributedGradientTape(tape) (op=hvd.Average, the default)",
        "keras": "hvd.DistributedOptimizer(optimizer) (op=hvd.Average, the default)",
    },
    "clip": {
        "torch": "loss.backward(); optimizer.synchronize(); "
        "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm); "
        "with optimizer.skip_synchronize(): optimizer.step()",
        "ddp": "clip after loss.backward() returns (DDP has averaged by then): "
        "torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm); optimizer.step()",
        "tf": "clip the gradients the DistributedGradientTape returns: grads = "
        "tape.gradient(loss, variables); grads, _ = tf.clip_by_global_norm(grads, max_norm)",
        "keras": "hvd.DistributedOptimizer(keras.optimizers.SGD(lr, clipnorm=max_norm))",
    },
    "after": {
        "torch": "change the gradients the same way on every rank, before the reduction (scale "
        "the loss instead) or right after optimizer.synchronize(), then "
        "with optimizer.skip_synchronize(): optimizer.step(); never on one rank only",
        "ddp": "change the gradients the same way on every rank after loss.backward() (or "
        "scale the loss instead); never on one rank only",
        "tf": "change the gradients the same way on every rank, after tape.gradient(...)",
        "keras": "change the gradients the same way on every rank",
    },
}


def style_of(ranks: list[dict], framework: str | None = None) -> str:
    """``keras`` when a rank trained with ``Model.fit``, ``tf`` for another TensorFlow script,
    ``ddp`` for a ``torch.distributed`` one, else ``torch`` (:data:`STYLES`)."""
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
    return style_of_framework(seen)


def with_fix(check: Check, name: str, style: str) -> Check:
    """``check`` with its practice's fix for ``style`` when it is a FAIL or WARN without one."""
    if check.ok is True or check.fix:
        return check
    return replace(check, fix=PRACTICE_FIXES[name][style])
