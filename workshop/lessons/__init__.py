"""The lessons' code, one folder per lesson, and what they share.

- ``lNN_name/`` (``l01_parallelism`` ... ``l09_diagnose``): a lesson's ``exercises`` (its
  entries in the registry: exercises and findings), its ``findings`` (the prose it states, with
  its numbers) and its own glue (lesson 02's learner programs in ``programs/``, their changes
  and launches; lesson 09's capstone cases and their recorder);
- ``registry``: ``wk.exercise`` and ``wk.finding``; it finds an id's lesson by its number and
  imports that lesson alone;
- ``engine``: the checking engine (``wk.exercises``), with ``answers`` (how an answer matches)
  and ``entries`` (what an exercise, a finding and a slip are);
- ``results``: what a notebook found, as JSON for the tests.

Lesson 02's helpers are handed on here too, as the notebook calls them::

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
        "l02_first_program.ddp": [
            "BENCHMARK",
            "benchmark",
            "benchmark_table",
        ],
        "l02_first_program.edits": [
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
        "l02_first_program.replay": [
            "check_or_replay",
            "keras_pieces",
            "run_or_replay",
            "work_dir",
        ],
        "l02_first_program.scripts": [
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
        "l03_launching.slurm_job": [
            "slurm_job_live",
        ],
        "registry": ["exercise", "finding"],
    },
    (
        "engine",
        "registry",
        "results",
        "l01_parallelism",
        "l02_first_program",
        "l03_launching",
        "l04_timelines",
        "l05_mpi",
        "l06_scaling",
        "l07_batch_lr",
        "l08_tuning",
        "l09_diagnose",
    ),
)
