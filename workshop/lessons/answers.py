"""How an answer compares with an exercise's expected value, and how a value is shown to a
learner: the matching half of the checking engine (:mod:`.engine` keeps the state, the log and
the messages).

Numbers match within a relative or absolute tolerance (``math.isclose``); a question that asks
for a precision ("to 2 significant figures", "to 2 decimal places") gets half a unit of its last
digit (:func:`precision_tolerance`); strings match ignoring case, spaces and brackets; sets as
sets; a tuple is a ranking, item by item.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from workshop.units import plain

#: A wrong number within this many tolerances of the expected value is a near miss...
NEAR = 10
#: ... and at most this far from it, relatively: a prediction's wide band (15 %) makes no
#: answer twice too large "close".
NEAR_AT_MOST = 0.1


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _word(text: str) -> str:
    # "(c)", " C ", "c)" and "c." all name option c; words compare without case.
    return text.strip().strip("().").strip().lower()


def matches(answer, expected, rel_tol: float, abs_tol: float) -> bool:
    answer, expected = plain(answer), plain(expected)
    if isinstance(expected, str):
        return isinstance(answer, str) and _word(answer) == _word(expected)
    if isinstance(expected, (set, frozenset)):
        if isinstance(answer, str) or not isinstance(answer, Iterable):
            return False
        normal = {_word(a) if isinstance(a, str) else plain(a) for a in answer}
        return normal == {_word(e) if isinstance(e, str) else plain(e) for e in expected}
    if isinstance(expected, (tuple, list)):
        # A ranking: the order matters, each item compared like a single answer.
        if isinstance(answer, str) or not isinstance(answer, Sequence):
            return False
        return len(answer) == len(expected) and all(
            matches(a, e, rel_tol, abs_tol) for a, e in zip(answer, expected, strict=True)
        )
    if isinstance(expected, bool) or not is_number(expected):
        return answer == expected
    if not is_number(answer) or math.isnan(answer):
        return False
    return math.isclose(answer, expected, rel_tol=rel_tol, abs_tol=abs_tol)


def precision_tolerance(expected, *, sig_figs: int = 0, decimals: int = 0) -> float:
    """Half a unit of the last digit a question asks for: the absolute tolerance of an answer
    given "to ``sig_figs`` significant figures" (of ``expected``; of its smallest number for a
    tuple: a ranking of numbers, or a diagnosis (letter, number, letter), whose letters match
    exactly) or "to ``decimals`` decimal places" (one of the two).

    >>> precision_tolerance(0.3638, sig_figs=2), precision_tolerance(8.36, sig_figs=2)
    (0.005, 0.05)
    >>> precision_tolerance(3.27, decimals=2), precision_tolerance(46.05, sig_figs=2)
    (0.005, 0.5)
    >>> precision_tolerance(("c", 2.786, "f"), sig_figs=3)
    0.005
    """
    if bool(sig_figs) == bool(decimals) or min(sig_figs, decimals) < 0:
        raise ValueError("precision: give sig_figs or decimals, one of them, > 0")
    if decimals:
        return 0.5 * 10.0**-decimals
    values = [plain(v) for v in expected] if isinstance(expected, (tuple, list)) else [expected]
    numbers = [v for v in values if is_number(v)]
    if not numbers:
        raise ValueError(f"precision: no number in {expected!r}")
    smallest = min(abs(float(v)) for v in numbers)
    if smallest == 0:
        raise ValueError("precision: significant figures of 0 are undefined; ask for decimals")
    return round(0.5 * 10.0 ** (math.floor(math.log10(smallest)) - sig_figs + 1), 12)


def near(answer, expected, rel_tol: float, abs_tol: float) -> bool:
    """A number (or a tuple's numbers, its letters right) within :data:`NEAR` tolerances of
    ``expected``, and within :data:`NEAR_AT_MOST` of it relatively.

    >>> near(0.37, 0.3638, 0.0, 0.005), near(0.30, 0.3638, 0.0, 0.005)
    (True, False)
    >>> near(150, 130, 0.15, 0.0), near(260, 130, 0.15, 0.0)
    (False, False)
    >>> right = ("c", 2.786, "f")
    >>> near(("c", 2.78, "f"), right, 0.0, 0.005), near(("c", 2.78, "b"), right, 0.0, 0.005)
    (True, False)
    """
    answer, expected = plain(answer), plain(expected)
    if not (rel_tol or abs_tol):
        return False
    if isinstance(expected, (tuple, list)):
        # each number near its own, each letter right: ("c", 2.78, "f") for ("c", 2.786, "f")
        return (
            isinstance(answer, (tuple, list))
            and len(answer) == len(expected)
            and any(is_number(e) for e in expected)
            and all(
                near(a, e, rel_tol, abs_tol) if is_number(e) else matches(a, e, 0.0, 0.0)
                for a, e in zip(answer, expected, strict=True)
            )
        )
    if not (is_number(expected) and is_number(answer)) or math.isnan(answer):
        return False
    cap = NEAR_AT_MOST * abs(expected)
    return math.isclose(
        answer,
        expected,
        rel_tol=min(NEAR * rel_tol, NEAR_AT_MOST),
        abs_tol=min(NEAR * abs_tol, cap),
    )


def show(value) -> str:
    """A value as a learner reads it: plain numbers (1,234 and 0.6931, not 1.234e+03 or
    np.float64(0.6931)), a ranking as (a, b), a set as {a, b}, text in quotes."""
    value = plain(value)
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value) or value == 0:
            return repr(value)
        if abs(value) >= 1e4 or value.is_integer():
            return f"{value:,.0f}"
        return f"{value:.4g}" if abs(value) >= 1e-4 else f"{value:.3e}"
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(show(v) for v in sorted(value, key=str)) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(show(v) for v in value) + ")"
    return repr(value)


def describe(expected, rel_tol: float, abs_tol: float) -> str:
    text = show(expected)
    if is_number(plain(expected)):
        if rel_tol:
            text += f" (within {rel_tol * 100:.2g}%)"  # 10%, 15%, 0.3%: never "0%"
        elif abs_tol:
            text += f" (within {abs_tol:g})"
    return text


def kind_note(answer, expected) -> str:
    """Why an answer of the wrong kind cannot match: a number in quotes, a letter without."""
    answer, expected = plain(answer), plain(expected)
    if is_number(expected) or (
        isinstance(expected, (tuple, list)) and all(is_number(plain(e)) for e in expected)
    ):
        if isinstance(answer, str):
            return " That is text (in quotes): write the number without quotes."
        if isinstance(answer, bool):
            return " That is True or False: the answer is a number."
    if isinstance(expected, str) and not isinstance(answer, str):
        return ' The answer is text: write it in quotes, e.g. "a".'
    return ""
