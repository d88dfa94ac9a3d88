"""Lesson 10 as a replay loads it (issue 56's rule, tests/test_lesson_imports.py): checking
one of its exercises imports its own entries alone, and no package only live runs need."""

from __future__ import annotations

from test_lesson_imports import LIVE_ONLY, _imports

from workshop.lessons.registry import LESSON_MODULES


def test_checking_a_lesson_10_exercise_imports_its_lesson_alone():
    found = _imports("10.1")
    entries = {f"workshop.lessons.{m}.exercises" for m in LESSON_MODULES.values()}
    # lesson 08's findings (the Horovod fusion sweep's counts) are read, not its exercises
    assert entries & set(found["modules"]) == {"workshop.lessons.l10_ddp.exercises"}
    assert "workshop.lessons.l08_tuning.findings" in found["modules"]
    assert not [m for m in found["modules"] if m.startswith(LIVE_ONLY)], found["modules"]


def test_each_lesson_10_question_states_the_precision_its_check_uses():
    # issue 59's one rule (tests/test_exercise_rule.py), for lesson 10: 10.1 and 10.4 exact,
    # 10.2 to 1 decimal place, 10.3 to 2 significant figures, 10.5 a prediction within 20 %
    from test_exercise_rule import questions

    from workshop.lessons import registry

    asked = {e: registry.entry(e).asks for e in registry.REGISTRY if e.startswith("10.")}
    assert asked == {
        "10.1": "", "10.2": "to 1 decimal place", "10.3": "to 2 significant figures",
        "10.4": "", "10.5": "within 20 %",
    }  # fmt: skip
    found = questions()
    for exercise, asks in asked.items():
        assert asks in found[exercise], exercise
