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
import time

from workshop.train.common import (
    PROCESS_START,
    build_parser,
    env_rank,
    epoch_record,
    inject_fault,
    lr_at,
    run_rank,
    run_summary,
    scaled_lr,
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
    import numpy as np
    import tensorflow as tf

    from workshop.train import data as datasets
    from workshop.train.device import (
        horovod_gpu_support,
        pin_tensorflow,
        select_device_from_env,
        tensorflow_gpu_count,
    )

    if args.backward_passes_per_step != 1:
        # Horovod 0.28.1: DistributedGradientTape takes no backward_passes_per_step.
        raise ValueError(
            "--backward-passes-per-step is not supported by the TensorFlow "
            "program (hvd.DistributedGradientTape has no such argument)"
        )
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    inject_fault(rank)
    choice = select_device_from_env(
        args.device,
        tensorflow_gpu_count(),
        horovod_gpu=horovod_gpu_support(hvd),
        local_rank=hvd.local_rank(),
        local_size=hvd.local_size(),
    )
    device_name = pin_tensorflow(choice)
    if choice.note and rank == 0:
        rank_io.print(f"device: {choice.note}")
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

    model = build_model(args.dataset)
    global_batch = args.batch_size * size
    base_batch = args.base_batch_size or args.batch_size
    base_lr = args.lr
    target_lr = scaled_lr(base_lr, global_batch, base_batch, args.lr_scaling)
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=base_lr, momentum=args.momentum)
    compression = getattr(hvd.Compression, args.compression)
    if regression:
        loss_fn = tf.keras.losses.MeanSquaredError()
    else:
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(inputs, targets, first_batch):
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            loss = loss_fn(targets, outputs)
        tape = hvd.DistributedGradientTape(tape, compression=compression)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        # Horovod practice: broadcast after the first step, once the optimizer has its slots.
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables(), root_rank=0)
        return loss, outputs

    shard_size = len(y_train) // size
    steps_per_epoch = max(1, shard_size // args.batch_size)
    if args.steps_per_epoch:
        steps_per_epoch = min(steps_per_epoch, args.steps_per_epoch)
    rank_io.print(
        f"workshop.train.tf_train: np={size} device={device_name} threads/rank={threads} "
        f"data={dataset.info['source']} batch={args.batch_size}/worker ({global_batch} global) "
        f"steps/epoch={steps_per_epoch} lr {base_lr:g} -> {target_lr:g} "
        f"({args.lr_scaling}, warmup {args.warmup_epochs:g} epochs) "
        f"compression={args.compression}"
    )
    init_time_s = time.time() - PROCESS_START
    train_start = time.perf_counter()
    step = 0
    lr = base_lr
    train_total_s = 0.0
    record = {}
    for epoch in range(1, args.epochs + 1):
        indices = shard_indices(len(y_train), rank, size, epoch, args.seed)
        epoch_start = time.perf_counter()
        loss_sum, correct, seen = 0.0, 0, 0
        for batch in range(steps_per_epoch):
            lr = lr_at(step, steps_per_epoch, base_lr, target_lr, args.warmup_epochs)
            optimizer.learning_rate.assign(lr)
            idx = indices[batch * args.batch_size : (batch + 1) * args.batch_size]
            loss, outputs = train_step(
                tf.constant(x_train[idx]), tf.constant(y_train[idx]), step == 0
            )
            step += 1
            loss_sum += float(loss) * len(idx)
            if not regression:
                correct += int(np.sum(np.argmax(outputs, axis=1) == y_train[idx]))
            seen += len(idx)
        train_time_s = time.perf_counter() - epoch_start

        test_start = time.perf_counter()
        outputs = model(x_test, training=False)
        test_loss = float(loss_fn(y_test, outputs))
        if regression:
            from workshop.train.materials import materials_score

            test_score = materials_score(y_test.numpy(), outputs.numpy())
        else:
            test_score = float(np.mean(np.argmax(outputs, axis=1) == y_test.numpy()))
        test_time_s = time.perf_counter() - test_start
        train_total_s += train_time_s

        def mean(value, name):
            return float(hvd.allreduce(tf.constant(value, tf.float32), op=hvd.Average, name=name))

        def slowest(value, name):
            return float(hvd.allreduce(tf.constant(value, tf.float64), op=hvd.Max, name=name))

        record = epoch_record(
            epoch,
            mean=mean,
            slowest=slowest,
            train_time_s=train_time_s,
            test_time_s=test_time_s,
            steps=steps_per_epoch,
            seen=seen,
            size=size,
            loss_sum=loss_sum,
            correct=correct,
            test_loss=test_loss,
            test_score=test_score,
            lr=lr,
            elapsed_s=time.perf_counter() - train_start,
            regression=regression,
        )
        rank_io.write_epoch(record, dataset.task)

    rank_io.write_summary(
        run_summary(
            "tensorflow",
            args,
            size=size,
            device=device_name,
            devices=hvd.allgather_object(device_name),
            threads=threads,
            data_info=dataset.info,
            init_time_s=init_time_s,
            train_time_s=train_total_s,
            steps_per_epoch=steps_per_epoch,
            global_batch=global_batch,
            lr_effective=target_lr,
            last_epoch=record,
        )
    )
    hvd.shutdown()


def main(argv: list[str] | None = None) -> int:
    args = build_parser("workshop.train.tf_train").parse_args(argv)
    return run_rank(env_rank(), args.run_dir, lambda rank_io: train(args, rank_io))


if __name__ == "__main__":
    sys.exit(main())
