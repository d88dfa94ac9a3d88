"""The lessons' exercises and findings, one registry (:mod:`.registry` says how to add one);
``wk.exercise`` and ``wk.finding`` are :func:`.registry.exercise` and :func:`.registry.finding`.
The checking engine is :mod:`.engine` (``wk.exercises``).
"""

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
    tolerances_of,
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
    "recorded",
    "slips",
    "tolerances_of",
]
