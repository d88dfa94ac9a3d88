"""The rank-0-only metric allreduce in a TensorFlow custom loop: after 4 steps rank 0 alone
averages the loss over the ranks (hvd.allreduce needs every rank); rank 1 goes on to step 5,
whose gradient allreduces rank 0 never reaches. Fixture of tests/test_check.py."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import horovod.tensorflow as hvd  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

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
optimizer = tf.keras.optimizers.legacy.SGD(learning_rate=0.05 * hvd.size(), momentum=0.9)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(xb, yb, first_batch):
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    if first_batch:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(optimizer.variables(), root_rank=0)
    return loss


for step in range(8):
    batch = slice((step % 4) * 16, (step % 4 + 1) * 16)
    loss = train_step(x_shard[batch], y_shard[batch], step == 0)
    if step == 3 and hvd.rank() == 0:
        loss = hvd.allreduce(loss, name="mean_loss")
        print(f"step {step + 1}: mean loss {float(loss):.4f}", flush=True)
