"""The lessons' exercises and findings, one registry (:mod:`.registry` says how to add one);
``wk.exercise`` and ``wk.finding`` are :func:`.registry.exercise` and :func:`.registry.finding`.
The checking engine is :mod:`.engine`; a notebook's solution cells call three of its names
through ``wk.exercises`` (``solution_hidden``, ``passed``, ``solutions_checked``).
"""

from workshop.lessons.exercises.engine import passed, solution_hidden, solutions_checked
from workshop.lessons.exercises.entry import Exercise, Finding, Slip
from workshop.lessons.exercises.registry import (
    FINDINGS,
    LESSONS,
    REGISTRY,
    Prose,
    entry,
    exercise,
    expected,
    finding,
    recorded,
    slips,
)

__all__ = [
    "FINDINGS",
    "LESSONS",
    "REGISTRY",
    "Exercise",
    "Finding",
    "Prose",
    "Slip",
    "entry",
    "exercise",
    "expected",
    "finding",
    "passed",
    "recorded",
    "slips",
    "solution_hidden",
    "solutions_checked",
]
