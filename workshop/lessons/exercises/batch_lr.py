"""Lesson 07 (notebooks/07-batch-size-and-learning-rate.ipynb): its exercises and the findings it states."""

from __future__ import annotations

from workshop.lessons.exercises.entry import Exercise, Finding

EXERCISES: tuple[Exercise, ...] = ()
FINDINGS: tuple[Finding, ...] = ()
