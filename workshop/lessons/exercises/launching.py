"""Lesson 03 (notebooks/03-launching-runs.ipynb): its exercises and the findings it states."""

from __future__ import annotations

from workshop.lessons.exercises.entry import Exercise, Finding

EXERCISES: tuple[Exercise, ...] = ()
FINDINGS: tuple[Finding, ...] = ()
