"""Lesson 01 (notebooks/01-data-vs-model-parallelism.ipynb): its exercises and the findings it states."""

from __future__ import annotations

from workshop.lessons.exercises.entry import Exercise, Finding

EXERCISES: tuple[Exercise, ...] = ()
FINDINGS: tuple[Finding, ...] = ()
