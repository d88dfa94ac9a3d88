"""A correct Horovod Keras program (model.fit with horovod.tensorflow.keras): distributed
optimizer, broadcast callback, a shard per rank (reshuffled every epoch: ``--epochs``),
weights saved on rank 0, scaled lr. Fixture of tests/test_check.py (it does not import
workshop)."""

import argparse
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import horovod.tensorflow.keras as hvd  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()

hvd.init()
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.random.set_seed(1000 + hvd.rank())

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 20)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
x_shard, y_shard = x[hvd.rank() :: hvd.size()], y[hvd.rank() :: hvd.size()]

layers = tf.keras.layers
model = tf.keras.Sequential(
    [layers.Input((20,)), layers.Dense(32, activation="relu"), layers.Dense(2)]
)
optimizer = hvd.DistributedOptimizer(
    tf.keras.optimizers.legacy.SGD(learning_rate=0.05 * hvd.size(), momentum=0.9)
)
model.compile(
    optimizer=optimizer,
    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
)
model.fit(
    x_shard[:64],
    y_shard[:64],
    batch_size=16,
    epochs=args.epochs,
    shuffle=True,
    callbacks=[hvd.callbacks.BroadcastGlobalVariablesCallback(0)],
    verbose=2 if hvd.rank() == 0 else 0,
)
if hvd.rank() == 0:
    model.save_weights("checkpoint/weights")
