"""Lesson 02 (notebooks/02-your-first-horovod-program.ipynb): its exercises and the findings it states."""

from __future__ import annotations

from workshop.lessons.exercises.entry import Exercise, Finding

EXERCISES: tuple[Exercise, ...] = ()
FINDINGS: tuple[Finding, ...] = ()
