"""Horovod's own TensorFlow 2 MNIST example (examples/tensorflow2/tensorflow2_mnist.py, 0.28.1),
kept as written where it matters to ``workshop check``: every rank builds the whole data set and
shuffles it with its own unseeded order (``dataset.repeat().shuffle(10000).batch(128)``, no
shard), DistributedGradientTape, a broadcast after the first step, Adam(0.001 * size).

Differences, each an option with the example's behaviour as default except the data: MNIST is
read from ``--data`` (an npz with Keras' keys, which the test lays out from real MNIST images)
instead of ``tf.keras.datasets.mnist.load_data``, which downloads; ``--steps`` (the example:
10000 // size); ``--seed S`` sets one global seed on every rank (the classic mistake: every
rank then draws the same order); ``--shard-after-shuffle`` adds ``.shard(size, rank)`` after
the unseeded shuffle. Fixture of tests/test_check.py (it does not import workshop).
"""

import argparse

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="mnist.npz")
parser.add_argument("--steps", type=int, default=None)
parser.add_argument("--seed", type=int, default=None)
parser.add_argument("--shard-after-shuffle", action="store_true")
args = parser.parse_args()

# Initialize Horovod
hvd.init()

# Pin GPU to be used to process local rank (one GPU per process)
gpus = tf.config.experimental.list_physical_devices("GPU")
for gpu in gpus:
    tf.config.experimental.set_memory_growth(gpu, True)
if gpus:
    tf.config.experimental.set_visible_devices(gpus[hvd.local_rank()], "GPU")
tf.config.threading.set_intra_op_parallelism_threads(1)
if args.seed is not None:
    tf.random.set_seed(args.seed)

with np.load(args.data) as mnist:
    mnist_images, mnist_labels = mnist["x_train"], mnist["y_train"]

dataset = tf.data.Dataset.from_tensor_slices(
    (tf.cast(mnist_images[..., tf.newaxis] / 255.0, tf.float32), tf.cast(mnist_labels, tf.int64))
)
dataset = dataset.repeat().shuffle(10000)
if args.shard_after_shuffle:
    dataset = dataset.shard(hvd.size(), hvd.rank())
dataset = dataset.batch(128)

mnist_model = tf.keras.Sequential(
    [
        tf.keras.layers.Conv2D(8, [3, 3], activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax"),
    ]
)
loss = tf.losses.SparseCategoricalCrossentropy()

# Horovod: adjust learning rate based on number of GPUs.
opt = tf.optimizers.Adam(0.001 * hvd.size())

checkpoint_dir = "./checkpoints"
checkpoint = tf.train.Checkpoint(model=mnist_model, optimizer=opt)


@tf.function
def training_step(images, labels, first_batch):
    with tf.GradientTape() as tape:
        probs = mnist_model(images, training=True)
        loss_value = loss(labels, probs)

    # Horovod: add Horovod Distributed GradientTape.
    tape = hvd.DistributedGradientTape(tape)

    grads = tape.gradient(loss_value, mnist_model.trainable_variables)
    opt.apply_gradients(zip(grads, mnist_model.trainable_variables, strict=True))

    # Horovod: broadcast initial variable states from rank 0 to all other processes.
    if first_batch:
        hvd.broadcast_variables(mnist_model.variables, root_rank=0)
        hvd.broadcast_variables(opt.variables(), root_rank=0)

    return loss_value


# Horovod: adjust number of steps based on number of GPUs.
steps = args.steps if args.steps is not None else 10000 // hvd.size()
for batch, (images, labels) in enumerate(dataset.take(steps)):
    loss_value = training_step(images, labels, batch == 0)

    if batch % 10 == 0 and hvd.local_rank() == 0:
        print("Step #%d\tLoss: %.6f" % (batch, loss_value))  # noqa: UP031 (as written)

# Horovod: save checkpoints only on worker 0 to prevent other workers from corrupting it.
if hvd.rank() == 0:
    checkpoint.save(checkpoint_dir)
