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


def test_the_mistake_script_is_lesson_02s_ddp_program_but_for_its_training_sampler():
    # a copy a learner edits, kept in step with the program it copies: below the docstrings
    # every line but the training set's sharding is lesson 02's ddp_torch.py (the near miss,
    # a change to lesson 02's program that the copy lacks, fails here)
    import ast
    import difflib
    from pathlib import Path

    programs = Path(__file__).resolve().parents[1] / "workshop" / "lessons"
    fixed = (programs / "l02_first_program" / "programs" / "ddp_torch.py").read_text()
    mistake = (programs / "l10_ddp" / "programs" / "ddp_torch_mistake.py").read_text()

    def body(text: str) -> list[str]:
        docstring_end = ast.parse(text).body[0].end_lineno
        return text.splitlines()[docstring_end:]

    changed = [
        line[1:].strip()
        for line in difflib.unified_diff(body(fixed), body(mistake), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert changed and all(
        "sampler" in line or "train_loader" in line or "[ddp:shard]" in line for line in changed
    ), changed
