"""Predict-then-check exercises in the notebooks: the checking engine.

A lesson converted to the registry (:mod:`workshop.lessons.registry`: expected values,
tolerances, slips and hints in the package, lesson 05 first) checks with one line,
``wk.exercise("05.1", answer_05_1, run)``, which calls :func:`check` and
:func:`check_solution` below. A lesson not converted yet has four cells: a markdown cell tagged
``exercise`` (the task and what to predict), an answer cell the learner fills in
(``answer_05_1 = None``), a check cell, and the worked solution, tagged ``solution`` and
collapsed::

    exercises.check("05.1", answer_05_1, expected=measured_negotiations, rel_tol=0.15,
                    hints=("how often does Horovod negotiate?",
                           "one negotiation round per cycle: divide a time by a time"))

    if SOLUTIONS:
        solution_05_1 = elapsed_s / cycle_s  # the worked solution, explained
        exercises.check_solution("05.1", solution_05_1, expected=measured_negotiations,
                                 rel_tol=0.15)
    else:
        exercises.solution_hidden("05.1")

The expected value is always computed by the notebook from data (or from a formula the lesson
taught), never typed in. An unanswered exercise (``None``) is not an error: the check says what
to do, in one line (:data:`UNANSWERED_LINE`; the book leaves that line out).

One rule chooses the hint after a wrong answer, by what the answer looks like:

1. it matches one of the exercise's classic slips (the registry knows them): the check says
   which slip it looks like, and gives that slip's own hint, or else the exercise's last hint
   (the idea), whatever the number of tries;
2. it is a near miss, a number within ten times the tolerance
   (:data:`.answers.NEAR`): the check says so
   and names the precision the question asks for (``asks``), not a direction;
3. otherwise the hints come in order, one per such try: ``hints[0]``, then ``hints[1]``, and so
   on (the last one repeats).

The tolerance follows from the precision the question asks for, stated in the question: the
registry turns "to 2 significant figures" or "to 2 decimal places" into half a unit of the last
digit asked (:func:`.answers.precision_tolerance`); a prediction states its band ("within
15 %").

Solutions run only when the notebook's ``SOLUTIONS`` parameter is True (CI sets it through
papermill); they never touch ``answer_NN_k``, and :func:`passed` counts only the learner's
answers. ``WORKSHOP_EXERCISES_STRICT=1`` (set by the test harness) turns a wrong answer or a
solution that no longer matches the data into an error.

Every check and solution is recorded in :func:`registry` (expected value, tolerances, hints),
and, when ``WORKSHOP_EXERCISES_LOG`` names a file, appended to it as one JSON object per line,
so a test can read what a papermill run checked (tests/test_notebooks.py). With
``WORKSHOP_ROOM`` set, each check is also counted in the room folder (:mod:`workshop.room`).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from workshop.lessons import answers
from workshop.units import plain

STRICT_ENV = "WORKSHOP_EXERCISES_STRICT"
LOG_ENV = "WORKSHOP_EXERCISES_LOG"
MAX_HINTS = 3
#: The one line an unanswered check prints; the book leaves it out (tools/book/prepare.py).
UNANSWERED_LINE = re.compile(r"^\[\d\d\.\d+\] no answer yet\b[^\n]*\n?", re.M)


class ExerciseError(AssertionError):
    """A wrong answer while ``WORKSHOP_EXERCISES_STRICT=1`` (a solution that fails its check)."""


@dataclass(frozen=True)
class Verdict:
    """Outcome of one check: ``ok`` is None when there was no answer yet."""

    exercise: str
    ok: bool | None
    message: str

    def __bool__(self) -> bool:
        return bool(self.ok)

    def _ipython_display_(self) -> None:
        # check() has printed the message; a check cell ending in check(...) shows it once.
        pass


@dataclass(frozen=True)
class Record:
    """What an exercise checks against: the notebook's expected value, tolerances and hints."""

    exercise: str
    expected: object
    rel_tol: float
    abs_tol: float
    hints: tuple[str, ...]


_RESULTS: dict[str, bool] = {}
_WRONG_TRIES: dict[str, int] = {}
_REGISTRY: dict[str, Record] = {}
_SOLUTIONS: dict[str, bool] = {}


def _strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def _hints(exercise: str, hints: Sequence[str]) -> tuple[str, ...]:
    if isinstance(hints, str):
        raise TypeError(f"[{exercise}] hints= takes a tuple of strings, not one string")
    hints = tuple(hints)
    if len(hints) > MAX_HINTS or not all(isinstance(h, str) and h.strip() for h in hints):
        raise ValueError(
            f"[{exercise}] hints must be 1 to {MAX_HINTS} non-empty strings, got {hints!r}"
        )
    return hints


def _jsonable(value):
    """The expected value for the JSON log, with its kind (a ranking keeps its order)."""
    value = plain(value)
    if isinstance(value, bool):
        return {"kind": "bool", "value": value}
    if answers.is_number(value):
        return {"kind": "number", "value": value if math.isfinite(value) else repr(value)}
    if isinstance(value, str):
        return {"kind": "string", "value": value}
    if isinstance(value, (set, frozenset)):
        return {"kind": "set", "value": sorted((_jsonable(v)["value"] for v in value), key=str)}
    if isinstance(value, (tuple, list)):
        return {"kind": "ranking", "value": [_jsonable(v)["value"] for v in value]}
    return {"kind": "other", "value": repr(value)}


def _log(event: str, exercise: str, **fields) -> None:
    path = os.environ.get(LOG_ENV, "")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as log:
        log.write(json.dumps({"event": event, "exercise": exercise, **fields}) + "\n")


def _room(exercise: str, ok: bool | None) -> None:
    # Opt-in: with WORKSHOP_ROOM set, the instructor's room view counts this check
    # (workshop.room; it never raises into the lesson).
    if os.environ.get("WORKSHOP_ROOM"):
        from workshop import room

        room.record_attempt(exercise, ok)


def _register(exercise: str, expected, rel_tol: float, abs_tol: float, hints: tuple) -> None:
    # The learner's check carries the hints; a solution check keeps them.
    kept = hints or (_REGISTRY[exercise].hints if exercise in _REGISTRY else ())
    _REGISTRY[exercise] = Record(exercise, plain(expected), rel_tol, abs_tol, kept)


def _record_fields(expected, rel_tol: float, abs_tol: float) -> dict:
    return {"expected": _jsonable(expected), "rel_tol": rel_tol, "abs_tol": abs_tol}


def _hint(exercise, answer, expected, rel_tol, abs_tol, hints, slips, asks) -> str:
    """What a wrong answer is told, by the rule of the module's docstring: a slip's hint, a
    near miss's precision, or the next of the hints in order."""
    for why, value, *own in slips:
        if answers.matches(answer, value, rel_tol, abs_tol):
            hint = own[0] if own and own[0] else (hints[-1] if hints else "")
            return f" That looks like {why}." + (f" Hint: {hint}" if hint else "")
    if answers.near(answer, expected, rel_tol, abs_tol):
        wanted = asks or f"within {_tolerance_words(rel_tol, abs_tol)}"
        return f" Close, but not {wanted}: check your rounding and units, not the method."
    tries = _WRONG_TRIES.get(exercise, 0)
    _WRONG_TRIES[exercise] = tries + 1
    return f" Hint: {hints[min(tries, len(hints) - 1)]}" if hints else ""


def _tolerance_words(rel_tol: float, abs_tol: float) -> str:
    return f"{rel_tol * 100:.2g}%" if rel_tol else f"{abs_tol:g}"


def check(
    exercise: str,
    answer,
    *,
    expected,
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
    hints: Sequence[str] = (),
    behind: float | None = None,
    slips: Sequence[tuple] = (),
    asks: str = "",
) -> Verdict:
    """Say whether the learner's ``answer`` matches ``expected`` and print the verdict.

    Numbers match within ``rel_tol`` / ``abs_tol`` (``math.isclose``); strings match ignoring
    case, spaces and brackets (multiple choice: ``expected="c"`` accepts ``"(c)"``); sets match
    as sets, whatever iterable the learner gives; a tuple is a ranking: same items, same order.

    Args:
        exercise: the exercise id, "<notebook>.<n>", e.g. ``"05.1"``.
        answer: the learner's value; ``None`` means not answered yet.
        expected: the right value, computed by the notebook from data.
        rel_tol, abs_tol: tolerances for numbers.
        hints: 1 to 3 hints (a question first, then the idea; never the value): shown one
            per wrong try that is neither a slip nor a near miss; the last one repeats.
        behind: for a choice among ranges, the measured number the right letter stands for
            (not shown; logged, so that a test can look for it where the learner reads before
            answering).
        slips: ``(why, value)`` or ``(why, value, hint)``, the classic mistakes computed
            from the same data: a wrong answer that matches one (with the same tolerances) is
            told ``why`` and that slip's hint (or the last of ``hints``); logged, so that a
            test can check that the tolerances reject each of them.
        asks: the precision the question asks for, in its words ("to 2 significant
            figures"): what a near miss is told.

    Returns:
        A :class:`Verdict`; truthy when right.

    Raises:
        ExerciseError: a wrong answer while ``WORKSHOP_EXERCISES_STRICT=1``.
        ValueError, TypeError: malformed hints.

    >>> reset()
    >>> check("00.1", None, expected=42, hints=("what is six times seven?",)).ok is None
    [00.1] no answer yet: fill in your value, run the cell again.
    True
    >>> check("00.1", 30, expected=42, rel_tol=0.01, hints=("first?", "second")).ok
    [00.1] not yet: you said 30. Hint: first?
    False
    >>> check("00.1", 24, expected=42, rel_tol=0.01, hints=("first?", "second"),
    ...       slips=[("four times six", 24)]).ok
    [00.1] not yet: you said 24. That looks like four times six. Hint: second
    False
    >>> check("00.1", 41, expected=42, rel_tol=0.01, hints=("first?", "second"),
    ...       asks="to 2 significant figures").ok  # doctest: +NORMALIZE_WHITESPACE
    [00.1] not yet: you said 41. Close, but not to 2 significant figures: check your rounding
    and units, not the method.
    False
    >>> check("00.1", 35, expected=42, rel_tol=0.01, hints=("first?", "second")).ok
    [00.1] not yet: you said 35. Hint: second
    False
    >>> check("00.1", 41.9, expected=42, rel_tol=0.01, hints=("first?", "second")).ok
    [00.1] right: 42.
    True
    >>> passed()
    ['00.1']
    """
    hints = _hints(exercise, hints)
    _register(exercise, expected, rel_tol, abs_tol, hints)
    if answer is None:
        verdict = Verdict(
            exercise, None, f"[{exercise}] no answer yet: fill in your value, run the cell again."
        )
    elif answers.matches(answer, expected, rel_tol, abs_tol):
        verdict = Verdict(exercise, True, f"[{exercise}] right: {answers.show(expected)}.")
    else:
        message = f"[{exercise}] not yet: you said {answers.show(answer)}."
        message += answers.kind_note(answer, expected)
        message += _hint(exercise, answer, expected, rel_tol, abs_tol, hints, slips, asks)
        verdict = Verdict(exercise, False, message)
    if verdict.ok is not None:
        # A right answer stays right: a wrong try after it does not take it back.
        _RESULTS[exercise] = _RESULTS.get(exercise, False) or verdict.ok
    _log(
        "check",
        exercise,
        answered=answer is not None,
        ok=verdict.ok,
        hints=list(hints),
        **_record_fields(expected, rel_tol, abs_tol),
        **({} if behind is None else {"behind": float(plain(behind))}),
        **({"slips": [{"why": w, **_jsonable(v)} for w, v, *_ in slips]} if slips else {}),
    )
    _room(exercise, verdict.ok)
    print(verdict.message)
    if verdict.ok is False and _strict():
        raise ExerciseError(
            f"{verdict.message} Expected {answers.describe(expected, rel_tol, abs_tol)}."
        )
    return verdict


def check_solution(
    exercise: str,
    solution,
    *,
    expected,
    rel_tol: float = 0.0,
    abs_tol: float = 0.0,
    explanation: str = "",
) -> Verdict:
    """Check a worked solution against the data (not counted by :func:`passed`).

    Args:
        exercise: the exercise id, e.g. ``"05.1"``.
        solution: the value the worked solution computed.
        expected, rel_tol, abs_tol: as in :func:`check`.
        explanation: what the solution shows, in a sentence, printed after a match.

    Returns:
        A :class:`Verdict`; truthy when the solution matches.

    Raises:
        ExerciseError: the solution does not match while ``WORKSHOP_EXERCISES_STRICT=1``
            (the data or the lesson changed under it).

    >>> reset()
    >>> check_solution("00.1", 6 * 7, expected=42).ok
    [00.1] worked solution: 42, matches the data.
    True
    >>> passed()
    []
    """
    _register(exercise, expected, rel_tol, abs_tol, ())
    ok = answers.matches(solution, expected, rel_tol, abs_tol)
    if ok:
        message = f"[{exercise}] worked solution: {answers.show(solution)}, matches the data."
        message += f" {explanation}" if explanation else ""
    else:
        wanted = answers.describe(expected, rel_tol, abs_tol)
        shown = answers.show(solution)
        message = f"[{exercise}] worked solution gives {shown} but the data give {wanted}."
    _SOLUTIONS[exercise] = ok
    _log("solution", exercise, ok=ok, **_record_fields(expected, rel_tol, abs_tol))
    print(message)
    if not ok and _strict():
        raise ExerciseError(message)
    return Verdict(exercise, ok, message)


def solution_hidden(exercise: str) -> None:
    """Say how to see the worked solution that did not run (``SOLUTIONS = False``).

    >>> solution_hidden("00.1")  # doctest: +NORMALIZE_WHITESPACE
    [00.1] worked solution not run: expand this cell to read it, or set SOLUTIONS = True in
    the parameters cell, run that cell, then this one.
    """
    _log("hidden", exercise)
    print(
        f"[{exercise}] worked solution not run: expand this cell to read it, or set "
        "SOLUTIONS = True in the parameters cell, run that cell, then this one."
    )


@dataclass(frozen=True)
class Revealed:
    """What :func:`reveal` did: truthy when it printed the text; displays nothing itself (a cell
    ending in ``reveal(...)`` shows the printed line only)."""

    shown: bool

    def __bool__(self) -> bool:
        return self.shown

    def _ipython_display_(self) -> None:
        pass


def reveal(exercise: str | Sequence[str], text: str) -> Revealed:
    """Print ``text``, a finding that gives away the answer of ``exercise`` (one id or several),
    only once each of them was answered right or its worked solution ran in this kernel;
    otherwise print which exercise to answer first. A Summary cell or a printout below an
    exercise goes through this, so that Run All shows no answer before the learner's.

    Returns:
        A :class:`Revealed`, truthy when ``text`` was printed (``if reveal(...): display(...)``
        shows a table only then).

    >>> reset()
    >>> bool(reveal("00.1", "the answer was 42"))
    [00.1] answer exercise 00.1 above to see this line.
    False
    >>> _ = check("00.1", 42, expected=42, hints=("six times seven?",))
    [00.1] right: 42.
    >>> bool(reveal("00.1", "the answer was 42"))
    the answer was 42
    True
    """
    left = waiting(exercise)
    if left:
        print(waiting_line(left))
        return Revealed(False)
    print(text)
    return Revealed(True)


def waiting(exercise: str | Sequence[str]) -> list[str]:
    """The exercises among ``exercise`` (one id or several) that were neither answered right
    nor had their worked solution run in this kernel: what a reveal still waits for."""
    names = [exercise] if isinstance(exercise, str) else list(exercise)
    return [n for n in names if not (_RESULTS.get(n) or _SOLUTIONS.get(n))]


def waiting_line(names: Sequence[str]) -> str:
    """What a reveal shows while ``names`` are unanswered (the book refuses a page with it).

    >>> waiting_line(["05.1", "05.2"])
    '[05.1 and 05.2] answer exercises 05.1 and 05.2 above to see this line.'
    """
    listed = " and ".join(names)
    word = "exercise" if len(names) == 1 else "exercises"
    return f"[{listed}] answer {word} {listed} above to see this line."


def passed() -> list[str]:
    """Ids of the exercises the learner answered right in this kernel, sorted (worked
    solutions do not count)."""
    return sorted(name for name, ok in _RESULTS.items() if ok)


def solutions_checked() -> list[str]:
    """Ids of the worked solutions that ran in this kernel and matched the data, sorted."""
    return sorted(name for name, ok in _SOLUTIONS.items() if ok)


def registry() -> dict[str, Record]:
    """Every exercise checked in this kernel: id -> :class:`Record` (expected, tolerances,
    hints), for tests that look for leaks and binary exercises."""
    return dict(_REGISTRY)


def reset() -> None:
    """Forget every answer, wrong try, solution and record of this kernel (start over)."""
    for state in (_RESULTS, _WRONG_TRIES, _REGISTRY, _SOLUTIONS):
        state.clear()
