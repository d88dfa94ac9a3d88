"""Horovod's own Keras MNIST example (examples/tensorflow2/tensorflow2_keras_mnist.py, 0.28.1),
kept as written where it matters to ``workshop check``: the whole data set on every rank with its
own unseeded shuffle (``dataset.repeat().shuffle(10000).batch(128)``, no shard), the
DistributedOptimizer, and Horovod's three callbacks: BroadcastGlobalVariablesCallback,
MetricAverageCallback and LearningRateWarmupCallback (from 0.001 to 0.001 * size), with a
checkpoint on rank 0.

Differences, each an option with the example's value as default except the data: MNIST is read
from ``--data`` (an npz with Keras' keys, laid out by the test from real MNIST images);
``--epochs`` (24), ``--steps-per-epoch`` (500 // size), ``--warmup-epochs`` (3); ``--seed S``
sets one global seed on every rank. Fixture of tests/test_check.py (it does not import
workshop).
"""

import argparse

import horovod.tensorflow.keras as hvd
import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="mnist.npz")
parser.add_argument("--epochs", type=int, default=24)
parser.add_argument("--steps-per-epoch", type=int, default=None)
parser.add_argument("--warmup-epochs", type=float, default=3)
parser.add_argument("--seed", type=int, default=None)
args = parser.parse_args()

# Horovod: initialize Horovod.
hvd.init()

# Horovod: pin GPU to be used to process local rank (one GPU per process)
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
dataset = dataset.repeat().shuffle(10000).batch(128)

mnist_model = tf.keras.Sequential(
    [
        tf.keras.layers.Conv2D(8, [3, 3], activation="relu", input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(pool_size=(2, 2)),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(32, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax"),
    ]
)

# Horovod: adjust learning rate based on number of GPUs.
scaled_lr = 0.001 * hvd.size()
opt = tf.optimizers.Adam(scaled_lr)

# Horovod: add Horovod DistributedOptimizer.
opt = hvd.DistributedOptimizer(opt, backward_passes_per_step=1, average_aggregated_gradients=True)

# Horovod: Specify `experimental_run_tf_function=False` to ensure TensorFlow
# uses hvd.DistributedOptimizer() to compute gradients.
mnist_model.compile(
    loss=tf.losses.SparseCategoricalCrossentropy(),
    optimizer=opt,
    metrics=["accuracy"],
    experimental_run_tf_function=False,
)

callbacks = [
    # Horovod: broadcast initial variable states from rank 0 to all other processes.
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    # Horovod: average metrics among workers at the end of every epoch.
    hvd.callbacks.MetricAverageCallback(),
    # Horovod: using `lr = 1.0 * hvd.size()` from the very beginning leads to worse final
    # accuracy. Scale the learning rate `lr = 1.0` ---> `lr = 1.0 * hvd.size()` during
    # the first three epochs.
    hvd.callbacks.LearningRateWarmupCallback(
        initial_lr=scaled_lr, warmup_epochs=args.warmup_epochs, verbose=1
    ),
]

# Horovod: save checkpoints only on worker 0 to prevent other workers from corrupting them.
if hvd.rank() == 0:
    callbacks.append(tf.keras.callbacks.ModelCheckpoint("./checkpoint-{epoch}.h5"))

# Horovod: write logs on worker 0.
verbose = 1 if hvd.rank() == 0 else 0

# Train the model.
# Horovod: adjust number of steps based on number of GPUs.
steps = args.steps_per_epoch if args.steps_per_epoch is not None else 500 // hvd.size()
mnist_model.fit(
    dataset, steps_per_epoch=steps, callbacks=callbacks, epochs=args.epochs, verbose=verbose
)
