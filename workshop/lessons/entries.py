"""An exercise and a finding as the registry holds them (:mod:`.registry` says how to add
one)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

ID = re.compile(r"^\d\d\.\d+$")
FINDING_ID = re.compile(r"^\d\d\.[a-z][a-z0-9-]*$")
MAX_HINTS = 3
#: A relative tolerance this small is no precision asked, only floating-point rounding.
EXACT = 1e-6


@dataclass(frozen=True)
class Slip:
    """A classic mistake: ``why`` in words (the learner reads "That looks like <why>."; it
    must not give the answer away) and ``value``, computed from the same data as the expected
    value; ``hint``, what a learner who made it is told (empty: the exercise's last hint, its
    idea). The exercise's tolerance must reject it (tests/test_exercises.py)."""

    why: str
    value: Callable[..., object]
    hint: str = ""


@dataclass(frozen=True)
class Exercise:
    """One predict-then-check exercise: ``id`` ("NN.k"); ``data``, the names of what the
    lesson passes to the check, in order (``("gpu", "cpu")``: runs or frames it has open), and
    ``recorded``, the recording each is by default (what the tests check against); ``expected``
    and each slip's value as functions of that data (never a typed number); 1 to 3 ``hints`` (a
    question, then the idea, never the value); ``solution``, the worked solution's idea in a
    sentence; tolerances for a number (``math.isclose``); ``behind``, for a choice among
    ranges, the number the right letter stands for (logged for the screen's leak test);
    ``minutes``, what a newcomer needs for it (the lesson's stated time adds them up).

    The tolerance follows from the precision the question asks for, which the question
    states in the words of :attr:`asks`: ``sig_figs`` or ``decimals`` (half a unit of the last
    digit asked, :func:`.answers.precision_tolerance`), or ``rel_tol`` for a prediction ("within
    15 %"); none of them: an exact answer (a count, a letter; ``rel_tol`` up to
    :data:`EXACT` only absorbs floating-point rounding)."""

    id: str
    data: tuple[str, ...]
    recorded: Mapping[str, str]
    expected: Callable[..., object]
    hints: tuple[str, ...]
    slips: tuple[Slip, ...]
    solution: str
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    behind: Callable[..., float] | None = None
    minutes: int = 5
    sig_figs: int = 0
    decimals: int = 0

    def __post_init__(self) -> None:
        where = f"exercise {self.id!r}"
        if not ID.match(self.id):
            raise ValueError(f"{where}: an id is 'NN.k', e.g. '05.1'")
        if set(self.recorded) != set(self.data):
            raise ValueError(f"{where}: recorded names {sorted(self.recorded)}, data {self.data}")
        if isinstance(self.hints, str) or not 1 <= len(self.hints) <= MAX_HINTS:
            raise ValueError(f"{where}: 1 to {MAX_HINTS} hints, a tuple of strings")
        if not self.slips:
            raise ValueError(f"{where}: name at least one classic slip its tolerance rejects")
        if self.rel_tol < 0 or self.abs_tol < 0:
            raise ValueError(f"{where}: tolerances are >= 0")
        asked = [n for n in ("sig_figs", "decimals", "abs_tol") if getattr(self, n)]
        if len(asked) + (self.rel_tol > EXACT) > 1:
            raise ValueError(f"{where}: one precision: sig_figs, decimals or a tolerance")

    @property
    def asks(self) -> str:
        """The precision the question asks for, in the words its text states ("" when the
        answer is exact)."""
        if self.sig_figs:
            return f"to {self.sig_figs} significant figure{'s' if self.sig_figs > 1 else ''}"
        if self.decimals:
            return f"to {self.decimals} decimal place{'s' if self.decimals > 1 else ''}"
        if self.rel_tol > EXACT:
            return f"within {self.rel_tol * 100:g} %"
        if self.abs_tol:
            return f"within {self.abs_tol:g}"
        return ""


@dataclass(frozen=True)
class Finding:
    """A finding a lesson states in prose, with its numbers computed: ``text(*data)`` returns
    Markdown. One that gives an exercise's answer away names it in ``after``: it shows only
    once that exercise was answered right or its worked solution ran (and the lesson's cell
    is collapsed, so that the book puts it in a block to open after answering)."""

    id: str
    data: tuple[str, ...]
    text: Callable[..., str]
    after: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not FINDING_ID.match(self.id):
            raise ValueError(f"finding {self.id!r}: an id is 'NN.name', e.g. '05.cpu-vs-gpu'")
        bad = [a for a in self.after if not ID.match(a) or a[:2] != self.id[:2]]
        if bad:
            raise ValueError(f"finding {self.id!r}: after names exercises of its lesson: {bad}")
