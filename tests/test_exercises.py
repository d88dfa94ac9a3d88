"""workshop.exercises: the learner's check (escalating hints, passed() counts only the learner),
the worked solution's check, the registry and the JSON log a papermill test reads."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workshop import exercises


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv(exercises.STRICT_ENV, raising=False)
    monkeypatch.delenv(exercises.LOG_ENV, raising=False)
    exercises.reset()
    yield
    exercises.reset()


HINTS = ("a question?", "the idea", "the method")


def test_no_hint_before_a_wrong_answer(capsys):
    exercises.check("05.1", None, expected=3.0, hints=HINTS)
    exercises.check("05.1", 3.0, expected=3.0, hints=HINTS)
    out = capsys.readouterr().out
    assert "Hint" not in out
    assert "no answer yet" in out and "right" in out


def test_hints_escalate_one_per_wrong_try_and_the_last_repeats(capsys):
    shown = []
    for wrong in (1, 2, 4, 5):
        exercises.check("05.1", wrong, expected=3.0, rel_tol=0.01, hints=HINTS)
        shown.append(capsys.readouterr().out.split("Hint: ")[1].strip())
    assert shown == ["a question?", "the idea", "the method", "the method"]


def test_hints_count_per_exercise(capsys):
    exercises.check("05.1", 1, expected=3, hints=HINTS)
    exercises.check("05.2", 1, expected=3, hints=("other first", "other second"))
    assert capsys.readouterr().out.count("Hint: ") == 2
    exercises.check("05.2", 2, expected=3, hints=("other first", "other second"))
    assert "other second" in capsys.readouterr().out


def test_the_older_hint_keyword_is_gone():
    # Every notebook gives hints=(question, idea); a single hint= would skip the escalation.
    with pytest.raises(TypeError, match="hint"):
        exercises.check("05.1", 1, expected=3, hint="think")


@pytest.mark.parametrize(
    "hints", [("a",) * 4, ("",), "one string"], ids=["four", "empty", "string"]
)
def test_malformed_hints_are_refused(hints):
    with pytest.raises((TypeError, ValueError), match=r"\[05\.1\]"):
        exercises.check("05.1", 1, expected=1, hints=hints)


def test_passed_counts_only_the_learner():
    exercises.check_solution("05.1", 3.0, expected=3.0)
    exercises.check("05.2", None, expected=2.0, hints=HINTS)
    assert exercises.passed() == []
    assert exercises.solutions_checked() == ["05.1"]
    exercises.check("05.2", 2.0, expected=2.0, hints=HINTS)
    exercises.check("05.2", 7.0, expected=2.0, hints=HINTS)  # a wrong try after a right one
    assert exercises.passed() == ["05.2"]


def test_check_solution_raises_only_in_strict_mode(monkeypatch, capsys):
    verdict = exercises.check_solution("05.1", 4.0, expected=3.0, rel_tol=0.1)
    assert verdict.ok is False and "data give 3 (within 10%)" in capsys.readouterr().out
    monkeypatch.setenv(exercises.STRICT_ENV, "1")
    with pytest.raises(exercises.ExerciseError, match=r"\[05\.1\] worked solution gives 4"):
        exercises.check_solution("05.1", 4.0, expected=3.0, rel_tol=0.1)
    assert exercises.check_solution("05.1", 3.2, expected=3.0, rel_tol=0.1).ok


def test_strict_learner_check_raises_on_wrong_not_on_blank(monkeypatch):
    monkeypatch.setenv(exercises.STRICT_ENV, "1")
    assert exercises.check("05.1", None, expected=3, hints=HINTS).ok is None
    with pytest.raises(exercises.ExerciseError, match="Expected 3"):
        exercises.check("05.1", 4, expected=3, hints=HINTS)


def test_solution_hidden_says_how_to_see_it(capsys):
    exercises.solution_hidden("05.1")
    out = capsys.readouterr().out
    assert out.startswith("[05.1]") and "SOLUTIONS = True" in out and "expand" in out
    assert exercises.solutions_checked() == [] and exercises.passed() == []


@pytest.mark.parametrize(
    "answer, expected, ok",
    [
        ("(C)", "c", True),
        (" c. ", "c", True),
        ("b", "c", False),
        (["b", "a", "c"], ("b", "a", "c"), True),
        (("a", "b", "c"), ("b", "a", "c"), False),
        (["b", "a"], ("b", "a", "c"), False),
        ("bac", ("b", "a", "c"), False),
        ({"B", "a"}, {"a", "b"}, True),
        ([1.01, 2.0], (1.0, 2.0), True),  # a ranking of numbers keeps the tolerance
        (np.float64(2.95), 3, True),
        (np.int64(7428), np.int64(7428), True),
        (float("nan"), 3, False),
        ("3", 3, False),
        (True, 1, False),
    ],
)
def test_matching(answer, expected, ok):
    verdict = exercises.check("01.1", answer, expected=expected, rel_tol=0.02, hints=HINTS)
    assert verdict.ok is ok


def test_registry_keeps_the_learners_hints_when_the_solution_checks():
    exercises.check("05.1", None, expected=np.float64(3.5), rel_tol=0.1, hints=HINTS)
    exercises.check_solution("05.1", 3.5, expected=np.float64(3.5), rel_tol=0.1)
    record = exercises.registry()["05.1"]
    assert record == exercises.Record("05.1", 3.5, 0.1, 0.0, HINTS)
    assert type(record.expected) is float  # numpy scalars become plain Python


def test_the_log_has_one_json_line_per_event(tmp_path, monkeypatch):
    log = tmp_path / "exercises.jsonl"
    monkeypatch.setenv(exercises.LOG_ENV, str(log))
    exercises.check("05.1", None, expected=np.float64(3.5), rel_tol=0.1, hints=HINTS)
    exercises.check("05.2", 2, expected=("b", "a", "c"), hints=HINTS)
    exercises.check("05.3", "x", expected={"a", "b"}, hints=HINTS)
    exercises.check_solution("05.1", 3.5, expected=3.5, rel_tol=0.1)
    exercises.solution_hidden("05.2")
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(e["event"], e["exercise"]) for e in events] == [
        ("check", "05.1"),
        ("check", "05.2"),
        ("check", "05.3"),
        ("solution", "05.1"),
        ("hidden", "05.2"),
    ]
    first, ranking, choice, solution = events[:4]
    assert first["answered"] is False and first["ok"] is None and first["hints"] == list(HINTS)
    assert first["expected"] == {"kind": "number", "value": 3.5} and first["rel_tol"] == 0.1
    assert ranking["answered"] is True and ranking["ok"] is False
    assert ranking["expected"] == {"kind": "ranking", "value": ["b", "a", "c"]}
    assert choice["expected"] == {"kind": "set", "value": ["a", "b"]}
    assert solution["ok"] is True and "hints" not in solution


def test_messages_show_plain_numbers(capsys):
    # issue 32: "right: 3.208e+05" for a byte count, "(np.float64(0.69...), ...)" for a tuple
    exercises.check("08.1", 320808.0, expected=np.float64(320808.0), rel_tol=0.01, hints=HINTS)
    exercises.check(
        "06.2",
        (np.float64(0.5), 3.3, 0.76),
        expected=(np.float64(0.6967), 3.274, 0.7595),
        rel_tol=0.01,
        hints=HINTS,
    )
    out = capsys.readouterr().out
    assert "[08.1] right: 320,808." in out
    assert "you said (0.5, 3.3, 0.76)" in out and "np.float64" not in out and "e+05" not in out


def test_a_number_given_as_text_is_named_as_a_type_problem(capsys):
    exercises.check("01.2", "19", expected=19, hints=HINTS)
    exercises.check("03.2", 3, expected="c", hints=HINTS)
    first, second = capsys.readouterr().out.splitlines()
    assert "you said '19'. That is text (in quotes): write the number without quotes." in first
    assert 'The answer is text: write it in quotes, e.g. "a".' in second


def test_reveal_prints_a_finding_only_after_its_exercise(capsys):
    shown = exercises.reveal(["05.1", "05.2"], "5,670 and 922")
    assert not shown and "answer exercises 05.1 and 05.2 above" in capsys.readouterr().out
    exercises.check("05.1", 5670, expected=5670, hints=HINTS)
    exercises.check_solution("05.2", 922, expected=922)  # a worked solution that ran counts
    capsys.readouterr()
    assert exercises.reveal(["05.1", "05.2"], "5,670 and 922")
    assert capsys.readouterr().out == "5,670 and 922\n"
    exercises.reset()
    exercises.check("05.1", 1, expected=5670, hints=HINTS)  # a wrong answer reveals nothing
    assert not exercises.reveal("05.1", "5,670")


def test_a_tolerance_under_one_percent_is_not_shown_as_zero(capsys):
    # 09.5's gain is held to 0.3 %: "within 0%" would tell the learner an exact match is needed.
    exercises.check_solution("05.1", 2.0, expected=1.7616, rel_tol=0.003)
    assert "data give 1.762 (within 0.3%)" in capsys.readouterr().out
