"""Predict-then-check exercises in the notebooks.

Each exercise in a lesson has four cells: a markdown cell tagged ``exercise`` (the task and what
to predict), an answer cell the learner fills in (``answer_05_1 = None``), a check cell, and the
worked solution, tagged ``solution`` and collapsed, which ends by checking its own answer::

    exercises.check("05.1", answer_05_1, expected=measured_negotiations, rel_tol=0.15,
                    hint="one negotiation round per cycle: elapsed time / cycle time")

The expected value is always computed by the notebook from data (or from a formula the lesson
taught), never typed in. An unanswered exercise (``None``) is not an error: the check says what
to do. Under papermill the solutions run too; ``WORKSHOP_EXERCISES_STRICT=1`` (set by the test
harness) turns a wrong answer into an error, so a solution that no longer matches the data fails
the notebook test.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass

STRICT_ENV = "WORKSHOP_EXERCISES_STRICT"


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


_RESULTS: dict[str, bool] = {}


def _strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0")


def _plain(value):
    return value.item() if hasattr(value, "item") else value


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _matches(answer, expected, rel_tol: float, abs_tol: float) -> bool:
    answer, expected = _plain(answer), _plain(expected)
    if isinstance(expected, str):
        return isinstance(answer, str) and answer.strip().lower() == expected.strip().lower()
    if isinstance(expected, (set, frozenset)):
        if isinstance(answer, str) or not isinstance(answer, Iterable):
            return False
        return {_plain(a) for a in answer} == {_plain(e) for e in expected}
    if isinstance(expected, bool) or not _is_number(expected):
        return answer == expected
    if not _is_number(answer) or math.isnan(answer):
        return False
    return math.isclose(answer, expected, rel_tol=rel_tol, abs_tol=abs_tol)


def _describe(expected, rel_tol: float, abs_tol: float) -> str:
    expected = _plain(expected)
    if not _is_number(expected):
        return repr(sorted(expected)) if isinstance(expected, (set, frozenset)) else repr(expected)
    text = f"{expected:,.4g}"
    if rel_tol:
        text += f" (within {rel_tol:.0%})"
    elif abs_tol:
        text += f" (within {abs_tol:g})"
    return text


def check(
    exercise: str, answer, *, expected, rel_tol: float = 0.0, abs_tol: float = 0.0, hint: str = ""
) -> Verdict:
    """Say whether ``answer`` matches ``expected`` and print the verdict.

    Numbers match within ``rel_tol`` / ``abs_tol`` (``math.isclose``); strings match ignoring
    case and surrounding spaces (use them for multiple choice: ``expected="b"``); sets match as
    sets, whatever iterable the learner gives.

    Args:
        exercise: the exercise id, "<notebook>.<n>", e.g. ``"05.1"``.
        answer: the learner's value; ``None`` means not answered yet.
        expected: the right value, computed by the notebook from data.
        rel_tol, abs_tol: tolerances for numbers.
        hint: what to think about when the answer is wrong.

    Returns:
        A :class:`Verdict`; truthy when right.

    Raises:
        ExerciseError: a wrong answer while ``WORKSHOP_EXERCISES_STRICT=1``.

    >>> check("00.1", 41.5, expected=42, rel_tol=0.05).ok  # 41.5 is within 5 % of 42
    [00.1] right: 42.
    True
    >>> check("00.2", None, expected=42).ok is None
    [00.2] no answer yet: fill in your value, run the cell again.
    True
    """
    if answer is None:
        verdict = Verdict(
            exercise, None, f"[{exercise}] no answer yet: fill in your value, run the cell again."
        )
    elif _matches(answer, expected, rel_tol, abs_tol):
        verdict = Verdict(exercise, True, f"[{exercise}] right: {_describe(expected, 0, 0)}.")
    else:
        got = _plain(answer)
        shown = f"{got:,.4g}" if _is_number(got) else repr(got)
        message = f"[{exercise}] not yet: you said {shown}."
        if hint:
            message += f" Hint: {hint}"
        verdict = Verdict(exercise, False, message)
    if verdict.ok is not None:
        # A right answer stays right: the learner's wrong try before the solution is no failure.
        _RESULTS[exercise] = _RESULTS.get(exercise, False) or verdict.ok
    print(verdict.message)
    if verdict.ok is False and _strict():
        raise ExerciseError(f"{verdict.message} Expected {_describe(expected, rel_tol, abs_tol)}.")
    return verdict


def passed() -> list[str]:
    """Ids of the exercises answered right in this kernel, sorted (for the notebook's results)."""
    return sorted(name for name, ok in _RESULTS.items() if ok)
