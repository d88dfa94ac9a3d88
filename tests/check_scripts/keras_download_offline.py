"""A script that downloads its data set first, as tf.keras.datasets.mnist.load_data() does,
with Keras' own get_file. Offline the download fails; here the origin is a closed port on this
machine (MNIST_ORIGIN, default http://127.0.0.1:9/mnist.npz), so the test fails the same way
without any traffic leaving the machine. Fixture of tests/test_check.py (it does not import
workshop).
"""

import os

import horovod.tensorflow.keras as hvd
import tensorflow as tf

hvd.init()
origin = os.environ.get("MNIST_ORIGIN", "http://127.0.0.1:9/mnist.npz")
path = tf.keras.utils.get_file(f"mnist-{hvd.rank()}.npz", origin=origin)
print("downloaded", path)
