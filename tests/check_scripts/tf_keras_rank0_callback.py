"""A Horovod Keras program whose MetricAverageCallback is appended on rank 0 only (under
``if hvd.rank() == 0:``): at the end of epoch 1 rank 0 allreduces its metrics while rank 1 is
already in epoch 2's gradient allreduce, and both wait for ever. ``--everywhere`` gives every
rank the callback (the near miss: it runs to its end). Fixture of tests/test_check_stall_causes.py
(it does not import workshop)."""

import argparse
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import horovod.tensorflow.keras as hvd  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--everywhere", action="store_true")
args = parser.parse_args()

hvd.init()
tf.config.threading.set_intra_op_parallelism_threads(1)
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 20)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
x_shard, y_shard = x[hvd.rank() :: hvd.size()], y[hvd.rank() :: hvd.size()]

model = tf.keras.Sequential([tf.keras.layers.Input((20,)), tf.keras.layers.Dense(2)])
optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.legacy.SGD(0.05 * hvd.size()))
model.compile(
    optimizer=optimizer,
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0)]
if args.everywhere or hvd.rank() == 0:
    callbacks.append(hvd.callbacks.MetricAverageCallback())
model.fit(x_shard[:64], y_shard[:64], batch_size=16, epochs=3, callbacks=callbacks, verbose=0)
