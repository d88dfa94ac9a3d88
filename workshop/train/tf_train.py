"""One rank of a Horovod data-parallel TensorFlow training run.

Started by ``workshop run --framework tensorflow`` (through horovodrun) or directly by a
cluster's MPI launcher::

    python -m workshop.train.tf_train --run-dir RUN_DIR --dataset mnist --epochs 3

Uses ``horovod.tensorflow`` with ``hvd.DistributedGradientTape``. With TensorFlow >= 2.16 Keras 3
variables break Horovod (upstream issue 4290), so this program runs Keras 2 from the tf-keras
package: ``TF_USE_LEGACY_KERAS=1`` must be set before TensorFlow starts (set below, and by the
launcher). Horovod's Keras callbacks (e.g. LearningRateWarmupCallback) fail in this setup, so
warmup is our own code (:func:`workshop.train.common.lr_at`).
"""

from __future__ import annotations

import os
import sys
from functools import partial

from workshop.train.common import (
    EpochTotals,
    Reductions,
    StepPlan,
    StepTimes,
    build_parser,
    env_rank,
    inject_fault,
    lr_at,
    pin_device,
    plan_steps,
    run_rank,
    run_training,
    shard_indices,
    threads_per_rank,
)

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build_model(dataset: str):
    """The network trained on each dataset (same architecture as the PyTorch program)."""
    import tensorflow as tf

    if dataset == "materials":
        from workshop.train.materials import keras_model

        return keras_model()
    layers = tf.keras.layers
    if dataset == "mnist":
        return tf.keras.Sequential(
            [
                layers.Input((28, 28, 1)),
                layers.Conv2D(16, 5, activation="relu"),
                layers.MaxPooling2D(2),
                layers.Conv2D(32, 5, activation="relu"),
                layers.MaxPooling2D(2),
                layers.Flatten(),
                layers.Dense(128, activation="relu"),
                layers.Dense(10),
            ]
        )
    return tf.keras.Sequential(
        [
            layers.Input((32, 32, 3)),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(256, activation="relu"),
            layers.Dense(10),
        ]
    )


def channels_last(x):
    """Images (N, C, H, W) -> (N, H, W, C); curves (N, C, L) -> (N, L, C)."""
    return x.transpose(0, 2, 3, 1) if x.ndim == 4 else x.transpose(0, 2, 1)


def train(args, rank_io) -> None:
    import horovod.tensorflow as hvd
    import tensorflow as tf

    from workshop.train import data as datasets
    from workshop.train.device import pin_tensorflow, tensorflow_gpu_count

    reject_gradient_accumulation(args.backward_passes_per_step)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    inject_fault(rank)
    _, device_name = pin_device(
        hvd, args, rank_io, gpu_count=tensorflow_gpu_count(), pin=pin_tensorflow
    )
    threads = threads_per_rank(hvd.local_size(), args.threads)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.random.set_seed(args.seed)

    dataset = datasets.load(args.dataset, args.data, seed=args.seed)
    regression = dataset.task == "regression"
    x_train, y_train = channels_last(dataset.x_train), dataset.y_train
    test_idx = shard_indices(len(dataset.y_test), rank, size, epoch=0, seed=args.seed)
    x_test = tf.constant(channels_last(dataset.x_test[test_idx]))
    y_test = tf.constant(dataset.y_test[test_idx])

    plan = plan_steps(args, size, len(y_train))
    model = build_model(args.dataset)
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=plan.base_lr, momentum=args.momentum)
    loss_fn = loss_function(regression)
    step_fn = distributed_step(hvd, model, optimizer, loss_fn, args.compression)
    rank_io.print(
        f"workshop.train.tf_train: np={size} device={device_name} threads/rank={threads} "
        f"data={dataset.info['source']} batch={args.batch_size}/worker "
        f"({plan.global_batch} global) steps/epoch={plan.steps_per_epoch} "
        f"lr {plan.base_lr:g} -> {plan.target_lr:g} "
        f"({args.lr_scaling}, warmup {args.warmup_epochs:g} epochs) "
        f"compression={args.compression}"
    )
    run_training(
        "tensorflow",
        args,
        rank_io,
        hvd,
        plan,
        dataset=dataset,
        device=device_name,
        threads=threads,
        reduce=tensorflow_reductions(hvd),
        train_epoch=partial(
            train_epoch,
            step_fn=step_fn,
            optimizer=optimizer,
            x_train=x_train,
            y_train=y_train,
            plan=plan,
            warmup_epochs=args.warmup_epochs,
            regression=regression,
        ),
        evaluate=partial(evaluate, model, loss_fn, x_test, y_test, regression=regression),
    )
    hvd.shutdown()


def reject_gradient_accumulation(backward_passes_per_step: int) -> None:
    """Stop before Horovod starts: this program cannot accumulate gradients."""
    if backward_passes_per_step != 1:
        # Horovod 0.28.1: DistributedGradientTape takes no backward_passes_per_step.
        raise ValueError(
            "--backward-passes-per-step is not supported by the TensorFlow "
            "program (hvd.DistributedGradientTape has no such argument)"
        )


def loss_function(regression: bool):
    """Mean squared error for the regression, cross-entropy of the logits for the classes."""
    import tensorflow as tf

    if regression:
        return tf.keras.losses.MeanSquaredError()
    return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def distributed_step(hvd, model, optimizer, loss_fn, compression: str):
    """The compiled training step ``step_fn(inputs, targets, first_batch) -> (loss, outputs,
    marks)``: gradients averaged over the workers by ``hvd.DistributedGradientTape``.

    ``marks`` are two ``tf.timestamp()`` values in seconds, taken inside the graph: every local
    gradient computed, and every averaged gradient back from Horovod. Horovod's tape computes
    the local gradients and then hands them to its ``_allreduce_grads``
    (horovod/tensorflow/__init__.py:1038 and 1076 at 0.28.1); the step wraps that function on
    its own tape object to take the two marks, so this rank's compute is timed apart from its
    wait, and the allreduces themselves are unchanged.
    """
    import tensorflow as tf

    compressor = getattr(hvd.Compression, compression)

    @tf.function
    def step_fn(inputs, targets, first_batch):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            loss = loss_fn(targets, outputs)
        tape = hvd.DistributedGradientTape(tape, compression=compressor)
        marks = []
        allreduce_grads = tape._allreduce_grads

        def timed_allreduce(grads, *args):
            with tf.control_dependencies([g for g in grads if g is not None]):
                marks.append(tf.timestamp())
            reduced = allreduce_grads(grads, *args)
            with tf.control_dependencies([marks[-1], *[g for g in reduced if g is not None]]):
                marks.append(tf.timestamp())
            return reduced

        tape._allreduce_grads = timed_allreduce
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        # Horovod practice: broadcast after the first step, once the optimizer has its slots.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables(), root_rank=0)
        return loss, outputs, tf.stack(marks)

    return step_fn


def train_epoch(
    indices,
    first_step: int,
    step_times: StepTimes,
    *,
    step_fn,
    optimizer,
    x_train,
    y_train,
    plan: StepPlan,
    warmup_epochs: float,
    regression: bool,
) -> EpochTotals:
    """One epoch's optimizer steps on this rank's shard ``indices`` (see
    :func:`workshop.train.common.run_training`), each step's times added to ``step_times``
    (compute and wait from the marks of :func:`distributed_step`)."""
    import time

    import numpy as np
    import tensorflow as tf

    loss_sum, correct, seen = 0.0, 0, 0
    lr = plan.base_lr
    for batch in range(plan.steps_per_epoch):
        step_times.start()
        step_start = time.perf_counter()
        step = first_step + batch
        lr = lr_at(step, plan.steps_per_epoch, plan.base_lr, plan.target_lr, warmup_epochs)
        optimizer.learning_rate.assign(lr)
        idx = indices[batch * plan.batch_size : (batch + 1) * plan.batch_size]
        fetch = time.perf_counter()
        inputs, targets = tf.constant(x_train[idx]), tf.constant(y_train[idx])
        begin = time.perf_counter()
        # the tape reduces inside the step's call: its CPU wait includes that of the wait
        step_times.computing()
        loss, outputs, marks = step_fn(inputs, targets, step == 0)
        local, reduced = marks.numpy()
        step_times.computed()
        # all of the call but the wait counts as compute (its dispatch and return too)
        call_s = time.perf_counter() - begin
        loss_sum += float(loss) * len(idx)
        if not regression:
            correct += int(np.sum(np.argmax(outputs, axis=1) == y_train[idx]))
        seen += len(idx)
        wait_s = reduced - local
        step_times.add(
            step, begin - fetch, call_s - wait_s, wait_s, time.perf_counter() - step_start
        )
    return EpochTotals(loss_sum=loss_sum, correct=correct, seen=seen, lr=lr)


def evaluate(model, loss_fn, x_test, y_test, *, regression: bool) -> tuple[float, float]:
    """This rank's test loss and score (accuracy, or R2 for the materials regression)."""
    import numpy as np

    outputs = model(x_test, training=False)
    test_loss = float(loss_fn(y_test, outputs))
    if regression:
        from workshop.train.materials import materials_score

        return test_loss, materials_score(y_test.numpy(), outputs.numpy())
    return test_loss, float(np.mean(np.argmax(outputs, axis=1) == y_test.numpy()))


def tensorflow_reductions(hvd) -> Reductions:
    """Average and maximum of a metric over the ranks, with horovod.tensorflow's allreduce."""
    import tensorflow as tf

    def mean(value, name):
        return float(hvd.allreduce(tf.constant(value, tf.float32), op=hvd.Average, name=name))

    def slowest(value, name):
        return float(hvd.allreduce(tf.constant(value, tf.float64), op=hvd.Max, name=name))

    return Reductions(mean=mean, slowest=slowest)


def main(argv: list[str] | None = None) -> int:
    args = build_parser("workshop.train.tf_train").parse_args(argv)
    return run_rank(env_rank(), args.run_dir, lambda rank_io: train(args, rank_io))


if __name__ == "__main__":
    sys.exit(main())
