"""Lesson 09 (notebooks/09-diagnose-a-run.ipynb): its exercises and the findings it states."""

from __future__ import annotations

from workshop.lessons.exercises.entry import Exercise, Finding

EXERCISES: tuple[Exercise, ...] = ()
FINDINGS: tuple[Finding, ...] = ()
