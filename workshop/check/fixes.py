"""The fix of each practice in the script's own API (PyTorch, a TensorFlow custom loop, Keras
``Model.fit``), and how to tell which of them a script uses."""

from __future__ import annotations

from dataclasses import replace

from workshop.check.evidence import Check

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
