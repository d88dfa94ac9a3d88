"""A script written for a GPU cluster and run on a laptop: it pins a GPU by local rank without
Horovod's ``if gpus:`` guard, so on a machine without a GPU the list is empty and the line
raises IndexError. Fixture of tests/test_check.py (it does not import workshop).
"""

import horovod.tensorflow as hvd
import tensorflow as tf

hvd.init()
gpus = tf.config.list_physical_devices("GPU")
tf.config.set_visible_devices(gpus[hvd.local_rank()], "GPU")
print("never reached on a CPU machine")
