"""Observation hooks for TensorFlow scripts (tf-keras, ``TF_USE_LEGACY_KERAS=1``).

Training steps usually run inside ``tf.function``, where Python code runs once while the graph
is traced. So each hook records at run time through a ``tf.numpy_function`` it adds to the
graph (stateful, so ``tf.function`` always executes it); in eager mode it records directly.

- Optimizer steps: ``apply_gradients`` of tf-keras's optimizer base classes (legacy
  ``OptimizerV2`` and the newer ``Optimizer``). ``hvd.DistributedGradientTape`` hands it
  allreduced gradients; ``horovod.tensorflow.keras.DistributedOptimizer`` allreduces in
  ``_compute_gradients`` and then calls the base ``apply_gradients``. Recorded: the learning
  rate, the gradients, and the variables' values right before the update.
- Training samples: ``Model.__call__`` of the outermost model while a ``tf.GradientTape`` is
  recording (or with ``training=True``): the rows of its first input.
- Checkpoints: ``Model.save``, ``Model.save_weights``, ``tf.train.Checkpoint.save`` / ``write``.
- Horovod traffic: the op functions of Horovod's TensorFlow library
  (``MPI_LIB.horovod_allreduce`` ...), which ``horovod.tensorflow`` looks up at call time. What
  ``horovod_broadcast`` returns is fingerprinted when it has run: a variable assigned that value
  (``hvd.broadcast_variables``, the Keras broadcast callback) was set from rank 0.
- ``hvd.join`` (``horovod.tensorflow.join``; ``horovod.tensorflow.keras`` does not export it):
  the library's ``horovod_join``, which ``join`` looks up at call time: each call, with the
  steps made before it and the last rank to join, when it runs (eagerly, or each time a traced
  graph runs it).
"""

from __future__ import annotations

import functools
import threading

from workshop.check.observe import Recorder, array_fingerprint, row_digests

_local = threading.local()


def _depth(name: str) -> int:
    return getattr(_local, name, 0)


def _enter(name: str) -> None:
    setattr(_local, name, _depth(name) + 1)


def _leave(name: str) -> None:
    setattr(_local, name, max(0, _depth(name) - 1))


def _first_value(tf, tensor):
    """At most one element of ``tensor``: a cheap input that still waits for the op that makes
    it (``tf.size`` of a tensor whose shape is known is a constant, ready at once)."""
    return tf.reshape(tensor, [-1])[:1]


def _run_or_add(tf, callback, tensors: list) -> None:
    """Call ``callback(*numpy values)`` now (eager) or each time the graph runs (tf.function)."""
    import numpy as np

    if tf.executing_eagerly():
        callback(*[t.numpy() for t in tensors])
        return

    def numpy_callback(*arrays):
        callback(*arrays)
        return np.int64(0)

    tf.numpy_function(numpy_callback, tensors, tf.int64, stateful=True)


def _learning_rate(tf, optimizer):
    """The learning rate the next update uses, as a float32 tensor."""
    decayed = getattr(optimizer, "_decayed_lr", None)
    if decayed is not None:  # legacy OptimizerV2: schedules applied to the iteration count
        return tf.cast(decayed(tf.float32), tf.float32)
    lr = optimizer.learning_rate
    if callable(lr):
        lr = lr(optimizer.iterations)
    return tf.cast(tf.convert_to_tensor(lr), tf.float32)


def _wrap_apply_gradients(recorder: Recorder, tf, cls) -> None:
    original = cls.__dict__["apply_gradients"]

    def observe_step(optimizer, pairs):
        kept = [(g, v) for g, v in pairs if g is not None]
        grads = [tf.convert_to_tensor(g) for g, _ in kept]
        variables = [v for _, v in kept]
        values = [tf.convert_to_tensor(v) for v in variables]
        count = len(grads)

        def record(lr, *arrays):
            recorder.step_started()
            fingerprints = [array_fingerprint(a) for a in arrays]
            params = fingerprints[count:] if recorder.wants_params() else None
            recorder.step([float(lr)], fingerprints[:count], params)

        recorder.final_params_reader = lambda: [array_fingerprint(v.numpy()) for v in variables]
        _run_or_add(
            tf,
            lambda *a: recorder.safely("optimizer step", record, *a),
            [_learning_rate(tf, optimizer), *grads, *values],
        )

    @functools.wraps(original)
    def apply_gradients(self, grads_and_vars, *args, **kwargs):
        if _depth("apply") > 0:  # a subclass's apply_gradients calling its base
            return original(self, grads_and_vars, *args, **kwargs)
        pairs = list(grads_and_vars)
        recorder.safely("apply_gradients", observe_step, self, pairs)
        _enter("apply")
        try:
            return original(self, pairs, *args, **kwargs)
        finally:
            _leave("apply")

    cls.apply_gradients = apply_gradients


def install_keras_optimizers(recorder: Recorder, module) -> None:
    """Hook the optimizer base classes of one tf-keras optimizer module."""
    import tensorflow as tf

    for name in ("OptimizerV2", "_BaseOptimizer", "Optimizer"):
        cls = getattr(module, name, None)
        if cls is not None and "apply_gradients" in cls.__dict__:
            _wrap_apply_gradients(recorder, tf, cls)


def _first_input(tf, args, kwargs):
    inputs = args[0] if args else kwargs.get("inputs")
    flat = tf.nest.flatten(inputs) if inputs is not None else []
    return flat[0] if flat else None


def install_keras_model(recorder: Recorder, training_module) -> None:
    """Hook the model's training forward pass and its save methods."""
    import tensorflow as tf

    model_cls = training_module.Model
    original_call = model_cls.__dict__["__call__"]

    def record_rows(array):
        recorder.safely("training batch", lambda: recorder.batch(row_digests(array)))

    def observe_batch(args, kwargs):
        first = _first_input(tf, args, kwargs)
        if first is not None:
            tensor = tf.convert_to_tensor(first)
            if tensor.shape.rank:
                _run_or_add(tf, record_rows, [tensor])

    @functools.wraps(original_call)
    def call(self, *args, **kwargs):
        training = kwargs.get("training")
        outermost = _depth("model") == 0
        if outermost and training is not False and (training or _depth("tape") > 0):
            recorder.safely("training batch", observe_batch, args, kwargs)
        _enter("model")
        try:
            return original_call(self, *args, **kwargs)
        finally:
            _leave("model")

    model_cls.__call__ = call

    original_fit = model_cls.__dict__["fit"]

    @functools.wraps(original_fit)
    def fit(self, *args, **kwargs):
        recorder.used("keras_fit")
        x = args[0] if args else kwargs.get("x")
        if hasattr(x, "shape") and len(x.shape):
            recorder.safely("Model.fit", recorder.data_source, int(x.shape[0]))
        return original_fit(self, *args, **kwargs)

    model_cls.fit = fit
    for method in ("save", "save_weights"):
        _wrap_save(recorder, model_cls, method, f"Model.{method}")


def _wrap_save(recorder: Recorder, cls, method: str, how: str) -> None:
    original = cls.__dict__[method]

    @functools.wraps(original)
    def save(self, *args, **kwargs):
        if _depth("save") == 0:
            path = args[0] if args else next(iter(kwargs.values()), "?")
            recorder.saved(str(path), how)
        _enter("save")
        try:
            return original(self, *args, **kwargs)
        finally:
            _leave("save")

    setattr(cls, method, save)


def _wrap_from_tensor_slices(recorder: Recorder, tf) -> None:
    """Record the number of slices of each ``tf.data.Dataset.from_tensor_slices``."""
    dataset_cls = tf.data.Dataset
    original = dataset_cls.from_tensor_slices

    def size_of(tensors):
        flat = tf.nest.flatten(tensors)
        shape = getattr(flat[0], "shape", None) if flat else None
        if shape is not None and len(shape) and shape[0] is not None:
            recorder.data_source(int(shape[0]))

    @functools.wraps(original)
    def from_tensor_slices(*args, **kwargs):
        tensors = args[0] if args else kwargs.get("tensors")
        recorder.safely("from_tensor_slices", size_of, tensors)
        return original(*args, **kwargs)

    dataset_cls.from_tensor_slices = staticmethod(from_tensor_slices)


def install_tensorflow(recorder: Recorder, tf) -> None:
    """Track GradientTape scopes; hook tf.train.Checkpoint saves."""
    tape_cls = tf.GradientTape
    original_enter, original_exit = tape_cls.__enter__, tape_cls.__exit__

    def enter(self):
        _enter("tape")
        return original_enter(self)

    def exit_(self, *exc):
        _leave("tape")
        return original_exit(self, *exc)

    tape_cls.__enter__, tape_cls.__exit__ = enter, exit_
    _wrap_from_tensor_slices(recorder, tf)
    checkpoint_cls = tf.train.Checkpoint
    for method in ("save", "write"):
        _wrap_save(recorder, checkpoint_cls, method, f"tf.train.Checkpoint.{method}")


def install_horovod_tf_ops(recorder: Recorder, mpi_ops) -> None:
    """Count the tensors Horovod's TensorFlow ops allreduce and broadcast, when they run."""
    import numpy as np
    import tensorflow as tf

    recorder.imported("tensorflow")
    library = mpi_ops.MPI_LIB

    def counted(name: str, count, event):
        original = getattr(library, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            n = count(args, kwargs)
            if tf.executing_eagerly():
                event(n)
                return result

            def count_when_done(*_):
                event(n)
                return np.int64(0)

            # Depends on the op's output, so it counts after the collective has run.
            done = [_first_value(tf, t) for t in tf.nest.flatten(result) if tf.is_tensor(t)][:1]
            tf.numpy_function(count_when_done, done, tf.int64, stateful=True)
            return result

        setattr(library, name, wrapper)

    def first(args, kwargs, key):
        return args[0] if args else kwargs.get(key)

    def one(args, kwargs):
        return 1

    def group(args, kwargs):
        return len(first(args, kwargs, "tensors") or [])

    def variables(args, kwargs):
        return len(first(args, kwargs, "variables") or first(args, kwargs, "resources") or [])

    counted("horovod_allreduce", one, recorder.allreduced)
    counted("horovod_grouped_allreduce", group, recorder.allreduced)
    counted("horovod_broadcast", one, recorder.broadcasted)
    _fingerprint_broadcasts(recorder, tf, library)
    for name, op in _COLLECTIVES:
        _track_in_flight(recorder, tf, library, name, op)
    counted("horovod_broadcast_inplace", variables, recorder.broadcasted)
    counted("horovod_broadcast_inplace_resource", variables, recorder.broadcasted)
    _watch_join(recorder, tf, library)


def _watch_join(recorder: Recorder, tf, library) -> None:
    """Record each ``horovod_join`` (``hvd.join()``) when it runs: called after how many steps,
    and what it returned (the last rank to join); in flight while it waits."""
    import numpy as np

    original = getattr(library, "horovod_join", None)
    if original is None:
        return

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        where, key, entry = recorder.where(), object(), []

        def called(*_):
            recorder.submitted(key, "join", None, where)
            entry.append(recorder.join_called(where))
            return np.int64(0)

        def returned(last):
            recorder.completed(key)
            if entry:
                recorder.join_returned(entry.pop(), int(np.asarray(last).reshape(-1)[0]))
            return np.int64(0)

        if tf.executing_eagerly():
            recorder.safely("hvd.join", called)
            try:
                result = original(*args, **kwargs)
            except BaseException:
                recorder.safely("hvd.join", recorder.completed, key)
                raise
            recorder.safely("hvd.join", returned, result.numpy())
            return result
        marker = tf.numpy_function(
            lambda: recorder.safely("hvd.join", called) or np.int64(0),
            [],
            tf.int64,
            stateful=True,
        )
        with tf.control_dependencies([marker]):
            result = original(*args, **kwargs)
        tf.numpy_function(
            lambda last: recorder.safely("hvd.join", returned, last) or np.int64(0),
            [result], tf.int64, stateful=True,
        )  # fmt: skip
        return result

    library.horovod_join = wrapper


def _fingerprint_broadcasts(recorder: Recorder, tf, library) -> None:
    """Record the fingerprint of each ``horovod_broadcast`` result (rank 0's value), while the
    first steps' parameters are still being recorded."""
    original = getattr(library, "horovod_broadcast", None)
    if original is None:
        return

    def record(array):
        if recorder.wants_params():
            recorder.broadcast_value(array_fingerprint(array)[0])

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        result = original(*args, **kwargs)
        # Added to a traced graph whatever the step: the graph may run at any step.
        _run_or_add(tf, lambda a: recorder.safely("broadcast value", record, a), [result])
        return result

    library.horovod_broadcast = wrapper


# Horovod's TensorFlow collectives (the library's op functions) and their names in the report.
_COLLECTIVES = (
    ("horovod_allreduce", "allreduce"),
    ("horovod_grouped_allreduce", "grouped_allreduce"),
    ("horovod_allgather", "allgather"),
    ("horovod_grouped_allgather", "grouped_allgather"),
    ("horovod_broadcast", "broadcast"),
    ("horovod_alltoall", "alltoall"),
    ("horovod_reducescatter", "reducescatter"),
    ("horovod_grouped_reducescatter", "grouped_reducescatter"),
)


def _track_in_flight(recorder: Recorder, tf, library, function: str, op: str) -> None:
    """Keep each collective in flight from the moment its inputs are ready until its output
    is: eagerly around the call; in a graph, through a ``tf.numpy_function`` the op waits for
    (a control dependency on its inputs) and one on its output."""
    import numpy as np

    original = getattr(library, function, None)
    if original is None:
        return

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        name = kwargs.get("name")
        name = name if isinstance(name, str) else None
        where, via = recorder.where(), recorder.via()
        key = object()
        if tf.executing_eagerly():
            recorder.submitted(key, op, name, where, via)
            try:
                return original(*args, **kwargs)
            finally:
                recorder.completed(key)
        inputs = args[0] if args else None
        flat = (
            [t for t in tf.nest.flatten(inputs) if tf.is_tensor(t)] if inputs is not None else []
        )
        if not flat:
            return original(*args, **kwargs)

        def submitted(*_):
            recorder.submitted(key, op, name, where, via)
            return np.int64(0)

        def completed(*_):
            recorder.completed(key)
            return np.int64(0)

        marker = tf.numpy_function(submitted, [_first_value(tf, flat[0])], tf.int64, stateful=True)
        with tf.control_dependencies([marker]):
            held = tf.nest.map_structure(
                lambda t: tf.identity(t) if tf.is_tensor(t) else t, inputs
            )
        result = original(held, *args[1:], **kwargs)
        done = [t for t in tf.nest.flatten(result) if tf.is_tensor(t)][:1]
        if done:
            tf.numpy_function(completed, [_first_value(tf, done[0])], tf.int64, stateful=True)
        return result

    setattr(library, function, wrapper)
