"""A lesson's live run or its recording: run (or replay) a learner script, ``workshop check`` it
(or replay the check), and the Keras probe's verdicts.

What lesson 02 teaches with them: see :mod:`workshop.lessons`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from workshop.lessons.l02_first_program.edits import script_path
from workshop.lessons.l02_first_program.scripts import Launch, run_check

__all__ = [
    "check_or_replay",
    "keras_pieces",
    "run_or_replay",
    "work_dir",
]


def run_or_replay(name: str, live: bool, *, work_dir: str | os.PathLike = ".") -> Launch:
    """A run of :data:`workshop.lessons.l02_first_program.recording.RUNS`: for real when
    ``live`` (checkpoints in ``work_dir/checkpoints``), else its recording, with a line saying
    which."""
    from workshop.lessons.l02_first_program import recording

    if live:
        ckpt = Path(work_dir) / "checkpoints"
        ckpt.mkdir(parents=True, exist_ok=True)
        run = recording.run(name, ckpt)
        print(f"ran {name} here: $ {' '.join(run.command)}  ({run.seconds:.1f} s)")
        return run
    found = recording.recorded(name)
    print(
        f"replaying the recording {name} ({found['np']} process(es), {found['recorded_at']}, "
        f"{found['host']['cpu']}, {found['host']['cores']} cores):\n"
        f"$ {found['launcher']} {found['script']} "
        f"{' '.join(found['args']).replace('{ckpt}', 'CHECKPOINT_DIR')}"
    )
    return Launch(found["command"], found["returncode"], found["output"], found["seconds"])


def work_dir(folder: str | os.PathLike = "") -> Path:
    """The learner's folder for this lesson: ``folder``, or ``my-first-horovod`` in the current
    folder (the notebook's own, where JupyterLab runs it) when empty, as an absolute path."""
    return Path(folder or "my-first-horovod").absolute()


#: The lessons' folder of a checkout: a command a lesson prints names paths from there, where the
#: notebook runs (papermill and the book may run it from elsewhere).
NOTEBOOKS_DIR = Path(__file__).resolve().parents[3] / "notebooks"


def from_notebooks(path: str | os.PathLike) -> str:
    """``path`` as the notebooks' folder sees it
    (``../workshop/lessons/l02_first_program/programs/...``), whatever the current folder;
    absolute where there is no such folder (an installed package).

    >>> from_notebooks(NOTEBOOKS_DIR.parent / "workshop" / "cli.py")
    '../workshop/cli.py'
    """
    if not NOTEBOOKS_DIR.is_dir():
        return str(Path(path).absolute())
    return os.path.relpath(Path(path).absolute(), NOTEBOOKS_DIR)


def check_or_replay(name: str, live: bool, *, script: str | os.PathLike = ""):
    """``workshop check`` for real when ``live`` (see :func:`run_check`), else the recorded
    report ``name`` (``check_skeleton`` or ``check_solution``), as a ``check.Report``."""
    from workshop.check import Check, Report
    from workshop.lessons.l02_first_program import recording

    if live:
        return run_check(name, script)
    found = recording.recorded(name)
    report = found["report"]
    # The recording machine's paths mean nothing here: the script as a path from this folder to
    # the shipped file, the check's temporary checkpoint folder by the placeholder the args use.
    checks = {
        key: Check(value["ok"], re.sub(r"/tmp/tmp\w+", "CHECKPOINT_DIR", value["evidence"]))
        for key, value in report["checks"].items()
    }
    script_here = from_notebooks(script_path(Path(report["script"]).name))
    args = " ".join(found["args"]).replace("{ckpt}", "CHECKPOINT_DIR")
    print(f"replaying `workshop check {script_here} -- {args}`, recorded {found['recorded_at']}")
    return Report(
        script_here,
        report["np"],
        report["framework"],
        checks,
        report["exit_code"],
        report["seconds"],
        report["error"],
    )


def keras_pieces(live: bool, *, build: str = "workshop") -> pd.DataFrame:
    """Which of Horovod's Keras pieces work (:mod:`.keras_probe`).

    ``build="workshop"``: with the Horovod that ``scripts/build_horovod.sh`` builds (its Keras
    module patched to take tf-keras' backend), probed for real when ``live`` (about a minute),
    else its recording. ``build="upstream"``: the recording of Horovod 0.28.1 as released
    (``pip install horovod==0.28.1``, no patch), which cannot be probed here (``live`` is
    ignored: the installed build is the patched one).

    Returns:
        DataFrame ``piece``, ``source`` (``horovod`` or the lesson's replacement),
        ``works``, ``evidence``, ``error``, ``seeded_weights_equal`` (whether
        ``tf.random.set_seed(0)`` gave both ranks the same initial weights in that run).
    """
    from workshop.lessons.l02_first_program import keras_probe, recording

    if build not in ("workshop", "upstream"):
        raise ValueError(f"build={build!r}: 'workshop' or 'upstream'")
    if live and build == "workshop":
        print(f"probing the installed Horovod (Keras backend: "
              f"{keras_probe.horovod_keras_backend()})")  # fmt: skip
        pieces = keras_probe.probe()
    else:
        name = "keras_pieces" if build == "workshop" else "keras_pieces_upstream"
        found = recording.recorded(name)
        backend = found.get("horovod_keras_backend", "keras")  # recorded before fix 7: keras
        print(
            f"replaying the Keras probe recorded {found['recorded_at']} ({name}: Horovod's Keras "
            f"module takes the {backend} backend) with horovod "
            f"{found['versions']['horovod']}, tensorflow {found['versions']['tensorflow']}, "
            f"tf-keras {found['versions']['tf_keras']}"
        )
        pieces = found["pieces"]
    columns = ["piece", "source", "works", "evidence", "error", "seeded_weights_equal"]
    return pd.DataFrame(pieces)[columns]
