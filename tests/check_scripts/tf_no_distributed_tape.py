"""Practice missing: averaged (TensorFlow). The tape is a plain tf.GradientTape, not
hvd.DistributedGradientTape: each rank applies its own gradients.
Fixture of tests/test_check.py."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import horovod.tensorflow as hvd  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

hvd.init()
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.random.set_seed(0)

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 20)).astype("float32")
y = (x[:, 0] > 0).astype("int64")
x_shard, y_shard = x[hvd.rank() :: hvd.size()], y[hvd.rank() :: hvd.size()]

layers = tf.keras.layers
model = tf.keras.Sequential(
    [layers.Input((20,)), layers.Dense(32, activation="relu"), layers.Dense(2)]
)
optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=0.05 * hvd.size())
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(xb, yb, first_batch):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)
    return loss


for step in range(4):
    batch = slice(step * 16, (step + 1) * 16)
    train_step(x_shard[batch], y_shard[batch], step == 0)
