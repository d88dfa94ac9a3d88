"""One registry of the lessons' exercises and of the findings they state.

How a lesson uses it (lesson 05 is the first converted; its entries are in
:mod:`.mpi_profiling`)::

    # a markdown cell tagged `exercise`: "**Exercise 05.2** ... Predict ..."
    answer_05_2 = None  # your prediction: 8-byte allreduces on rank 0 at a 20 ms cycle time
    wk.exercise("05.2", answer_05_2, slow)

    # the worked solution, tagged `solution` and collapsed (jupyter.source_hidden)
    if SOLUTIONS:
        solution_05_2 = wk.analysis.comm_fraction(slow).elapsed_s[0] / 0.020
        wk.exercise("05.2", solution_05_2, slow, worked=True)
    else:
        wk.exercises.solution_hidden("05.2")

    wk.finding("05.cycles", run, slow)  # prose with its numbers (a Markdown display)

The check takes the lesson's data (the Run or frames the lesson has open: in a LIVE lesson,
the fresh run) and computes the expected value and the slips from it; the notebook holds no
expected value, tolerance, slip or hint. An unanswered check prints one short line
(:data:`workshop.lessons.engine.UNANSWERED_LINE`), which the book leaves out.

How to add an exercise (or convert one of a lesson not converted yet):

1. In the lesson's module here (``NN`` -> a module named after the lesson, listed in
   :data:`LESSON_MODULES`), add an :class:`~.entries.Exercise`: its id, the names of the data
   the check takes and the recording each is by default, ``expected`` as a function of that
   data (the analysis the lesson teaches: never a typed number), the tolerances, 1 to 3 hints (a
   question, then the idea), the classic slips (each a :class:`~.entries.Slip`: the mistake in
   words and its value computed from the same data) and the worked solution's idea.
2. In the notebook: the ``exercise`` markdown cell (task and prediction), ONE code cell
   ``answer_NN_k = None  # what to write`` + ``wk.exercise("NN.k", answer_NN_k, <data>)``, and
   the collapsed ``solution`` cell as above. A result that gives the answer away is a
   :class:`~.entries.Finding` with ``after=("NN.k",)``, shown by ``wk.finding`` in a collapsed
   cell (the book puts it in a block to open after answering).
3. tests/test_exercises.py then checks, for every registered exercise against its recorded
   data, that the tolerances reject each slip and that no hint or slip shows the answer;
   tests/test_notebooks.py replays the lesson (the worked solutions must match, a learner's
   run answers nothing) and keeps its results in ``data/expected/NN-*.json``.
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from workshop.lessons import answers, engine
from workshop.lessons.entries import Exercise, Finding
from workshop.readers.runs import Run, open_run

#: Each lesson's folder under ``workshop.lessons``, by its number: an id's first two digits
#: name its lesson, and only that lesson's ``exercises`` module (its exercises and findings)
#: is imported.
LESSON_MODULES = {
    "01": "l01_parallelism",
    "02": "l02_first_program",
    "03": "l03_launching",
    "04": "l04_timelines",
    "05": "l05_mpi",
    "06": "l06_scaling",
    "07": "l07_batch_lr",
    "08": "l08_tuning",
    "09": "l09_diagnose",
    "10": "l10_ddp",
}


def lesson(number: str) -> ModuleType:
    """The module of lesson ``number``'s exercises and findings (imported now, once).

    Raises:
        KeyError: no lesson of that number has entries (names the lessons that do).
    """
    if number not in LESSON_MODULES:
        known = ", ".join(LESSON_MODULES)
        raise KeyError(f"no lesson {number!r} has exercises or findings (lessons: {known})")
    return importlib.import_module(f"workshop.lessons.{LESSON_MODULES[number]}.exercises")


@cache
def _entries(number: str) -> tuple[dict[str, Exercise], dict[str, Finding]]:
    module = lesson(number)
    return {e.id: e for e in module.EXERCISES}, {f.id: f for f in module.FINDINGS}


def __getattr__(name: str):
    # every lesson's entries at once (tests/test_exercises.py): imported on first use
    if name == "LESSONS":
        return tuple(lesson(n) for n in LESSON_MODULES)
    if name == "REGISTRY":
        return {i: e for n in LESSON_MODULES for i, e in _entries(n)[0].items()}
    if name == "FINDINGS":
        return {i: f for n in LESSON_MODULES for i, f in _entries(n)[1].items()}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Prose(str):
    """Markdown a lesson shows as prose: a notebook renders it, the book too (MyST-NB renders a
    ``text/markdown`` output), and its plain text is the same words."""

    def _repr_markdown_(self) -> str:
        return str(self)

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(str(self))


def entry(exercise_id: str) -> Exercise:
    """The registered exercise ``exercise_id`` (KeyError naming the registered ones if none)."""
    number = str(exercise_id).split(".")[0]
    found = _entries(number)[0] if number in LESSON_MODULES else {}
    if exercise_id not in found:
        known = ", ".join(sorted(found)) or f"none of lesson {number}"
        raise KeyError(f"no exercise {exercise_id!r} in the registry (registered: {known})")
    return found[exercise_id]


def _data(item: Exercise | Finding, data: tuple) -> tuple:
    if len(data) != len(item.data):
        names = ", ".join(item.data)
        raise TypeError(f"[{item.id}] takes the lesson's {names} ({len(data)} given)")
    return data


def expected(exercise_id: str, *data):
    """The expected answer of ``exercise_id`` from the lesson's ``data``."""
    item = entry(exercise_id)
    return item.expected(*_data(item, data))


def slips(exercise_id: str, *data) -> list[tuple[str, object]]:
    """``(why, value)`` of each classic slip of ``exercise_id``, from the lesson's ``data``."""
    item = entry(exercise_id)
    return [(slip.why, slip.value(*_data(item, data))) for slip in item.slips]


def recorded(exercise_id: str) -> tuple[Run, ...]:
    """The data the lesson checks ``exercise_id`` against by default: its recordings, opened."""
    from workshop.paths import data_dir

    def opened(name: str) -> Run:
        # a recording under data/ first: "runs" is also the working folder's own runs/ (where
        # workshop run writes) wherever the tests or a learner start from
        under_data = data_dir() / item.recorded[name]
        return open_run(under_data if under_data.is_dir() else item.recorded[name])

    item = entry(exercise_id)
    return tuple(opened(name) for name in item.data)


def exercise(exercise_id: str, answer, *data, worked: bool = False) -> engine.Verdict:
    """Check ``answer`` to ``exercise_id`` against the lesson's ``data``, with the registered
    tolerances, hints and slips (:func:`.engine.check`); with ``worked=True``, check a worked
    solution instead (:func:`.engine.check_solution`, which prints the solution's idea under its
    value).

    Returns the verdict (truthy when right). Raises KeyError (no such exercise), TypeError
    (not the data it takes) and, in strict mode (CI), ExerciseError for a wrong answer.
    """
    item = entry(exercise_id)
    data = _data(item, data)
    want = item.expected(*data)
    tolerances = tolerances_of(item, want)
    if worked:
        return engine.check_solution(
            exercise_id, answer, expected=want, explanation=item.solution, **tolerances
        )
    return engine.check(
        exercise_id,
        answer,
        expected=want,
        hints=item.hints,
        behind=None if item.behind is None else item.behind(*data),
        slips=[(slip.why, slip.value(*data), slip.hint) for slip in item.slips],
        asks=item.asks,
        **tolerances,
    )


def tolerances_of(item: Exercise, want) -> dict[str, float]:
    """``rel_tol`` and ``abs_tol`` of ``item`` for the expected value ``want``: from the
    precision its question asks for (half a unit of the last digit), or as registered."""
    if item.sig_figs or item.decimals:
        tol = answers.precision_tolerance(want, sig_figs=item.sig_figs, decimals=item.decimals)
        return {"rel_tol": 0.0, "abs_tol": tol}
    return {"rel_tol": item.rel_tol, "abs_tol": item.abs_tol}


def finding(finding_id: str, *data) -> Prose | None:
    """The finding ``finding_id`` in prose, its numbers computed from ``data``; for one that
    gives an exercise's answer away, while that exercise waits, one line saying which to
    answer first (printed; nothing is returned). KeyError, TypeError as :func:`exercise`.
    """
    number = str(finding_id).split(".")[0]
    found = _entries(number)[1] if number in LESSON_MODULES else {}
    if finding_id not in found:
        known = ", ".join(sorted(found)) or f"none of lesson {number}"
        raise KeyError(f"no finding {finding_id!r} in the registry (registered: {known})")
    item = found[finding_id]
    data = _data(item, data)
    left = engine.waiting(item.after)
    if left:
        print(engine.waiting_line(left))
        return None
    return Prose(item.text(*data))
