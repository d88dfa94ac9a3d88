"""Lesson 02's helpers: the learner's scripts, the changes that make them data-parallel, and
launching them.

The scripts themselves live in ``workshop/lessons/first_program/`` as ordinary files that do
not import ``workshop`` (a learner copies them anywhere):

- ``serial_torch.py`` / ``serial_tf.py``: plain one-process training loops on MNIST;
- ``hvd_torch_solution.py`` / ``hvd_tf_loop_solution.py``: the same loops with Horovod, every
  change marked ``# [hvd:<change>]`` (:data:`CHANGES` lists them in teaching order);
- ``hvd_torch_skeleton.py`` / ``hvd_tf_loop_skeleton.py``: the serial loops with a
  ``# TODO [hvd:<change>]`` comment where each change goes, for the learner to fill in;
- ``serial_keras.py`` / ``hvd_keras_fit_solution.py``: Keras ``model.fit`` with
  ``horovod.tensorflow.keras``;
- ``ddp_torch.py``: the PyTorch solution written with ``torch.distributed`` (DDP) instead.

::

    from workshop import lessons
    mine = lessons.write_skeleton("hvd_torch_skeleton.py", ".")   # never overwrites your edits
    lessons.change("init")                   # serial vs Horovod, side by side (HTML)
    run = lessons.horovodrun(mine, np=2, args=("--epochs", "2", "--steps", "20"))
    lessons.epochs(run.output)               # the epoch lines as a DataFrame
"""

from workshop.lazy import exports

#: Each module's names, imported on first use (:mod:`workshop.lazy`): a lesson that checks
#: an exercise loads the registry and its own entries, not lesson 02's scripts.
__getattr__, __dir__, __all__ = exports(
    __name__,
    {
        "ddp": [
            "BENCHMARK",
            "benchmark",
            "benchmark_table",
        ],
        "edits": [
            "CHANGES",
            "EPOCH_LINE",
            "MARK",
            "SCRIPTS_DIR",
            "SERIAL_OF",
            "TODO",
            "Change",
            "Hunk",
            "change",
            "changes",
            "script_path",
            "shard_sizes",
            "source",
            "todos",
            "write_skeleton",
        ],
        "replay": [
            "check_or_replay",
            "keras_pieces",
            "run_or_replay",
            "work_dir",
        ],
        "scripts": [
            "CHECK_ARGS",
            "NOISE",
            "Launch",
            "LaunchError",
            "epochs",
            "horovodrun",
            "horovodrun_path",
            "python",
            "run_check",
            "torchrun",
            "torchrun_command",
        ],
        "slurm_job": [
            "slurm_job_live",
        ],
    },
)
