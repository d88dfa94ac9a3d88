"""One rule for exercises (issue 59): a tolerance that follows from the precision the question
asks for, stated in the question; hints chosen by the slip an answer matches, or by a near miss,
before the number of tries. Lesson 09 keeps its registered tolerances (its owner converts them);
every other lesson's numeric exercise states the precision its check uses."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from workshop.lessons import answers, engine, registry

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CONVERTED = ("01", "02", "03", "04", "05", "06", "07", "08")
EXERCISE_ID = re.compile(r"\*\*Exercise (\d\d\.\d+)\*\*")


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv(engine.STRICT_ENV, raising=False)
    monkeypatch.delenv(engine.LOG_ENV, raising=False)
    monkeypatch.delenv("WORKSHOP_ROOM", raising=False)
    engine.reset()
    yield
    engine.reset()


def questions() -> dict[str, str]:
    """Each exercise's question (its markdown cell tagged ``exercise``), whitespace folded."""
    found = {}
    for path in NOTEBOOKS.glob("[0-9][0-9]-*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            text = " ".join("".join(cell["source"]).split())
            if "exercise" in cell.get("metadata", {}).get("tags", []):
                found.update({m: text for m in EXERCISE_ID.findall(text)})
    return found


MINE = sorted(e for e in registry.REGISTRY if e[:2] in CONVERTED)


@pytest.mark.parametrize("exercise", MINE)
def test_each_question_states_the_precision_its_check_uses(exercise):
    item = registry.entry(exercise)
    question = questions()[exercise]
    if item.asks:
        assert item.asks in question, f"{exercise}: the question does not say {item.asks!r}"
    else:  # exact: a count, a letter, a set, or a value the rules give exactly
        assert item.rel_tol <= 1e-6 and not item.abs_tol, exercise


def test_a_question_without_its_precision_fails_the_rule():
    # the old 06.1 asked for "the efficiency" and accepted 1 % (0.3602-0.3675): 0.36 failed
    old = "Compute the lab report's parallel **efficiency** at 32 GPUs ... Use the definitions."
    assert registry.entry("06.1").asks not in old


def test_precision_gives_half_a_unit_of_the_last_digit():
    # 0.3638 to 2 significant figures: 0.36 +- 0.005; 6.993 to 2: 7.0 +- 0.05
    assert answers.precision_tolerance(0.3638, sig_figs=2) == 0.005
    assert answers.precision_tolerance(6.993, sig_figs=2) == 0.05
    assert answers.precision_tolerance((0.6967, 3.274, 0.7595), decimals=2) == 0.005
    with pytest.raises(ValueError, match="one of them"):
        answers.precision_tolerance(1.0, sig_figs=2, decimals=2)


def test_06_1_accepts_the_two_figures_it_asks_for(capsys):
    (seeds,) = registry.recorded("06.1")
    assert registry.exercise("06.1", 0.36, seeds).ok  # 0.3638: 2 figures, issue 59's case
    assert registry.exercise("06.1", 0.364, seeds).ok
    # 0.37 is off by more than half a unit: a near miss, told so, not pointed the other way
    engine.reset()
    verdict = registry.exercise("06.1", 0.37, seeds)
    out = capsys.readouterr().out
    assert verdict.ok is False and "Close, but not to 2 significant figures" in out
    assert "Which is larger" not in out


def test_06_4_in_mib_is_a_near_miss_that_names_units(capsys):
    (timed,) = registry.recorded("06.4")
    want = registry.expected("06.4", timed)  # 8.36 ms with B in MB/s (10^6 bytes)
    mib = want * 1e6 / 2**20  # B read as MiB/s: 8.0 ms, issue 59's 8.05
    verdict = registry.exercise("06.4", mib, timed)
    out = capsys.readouterr().out
    assert verdict.ok is False and "check your rounding and units" in out


def test_a_slip_gets_its_hint_on_the_first_try_and_a_plain_miss_the_first_hint(capsys):
    (seeds,) = registry.recorded("06.1")
    item = registry.entry("06.1")
    speedup = registry.slips("06.1", seeds)[0][1]  # the speedup, not divided by N: 11.64
    registry.exercise("06.1", speedup, seeds)
    out = capsys.readouterr().out
    assert "That looks like the speedup, not divided by N." in out
    assert f"Hint: {item.hints[-1]}" in out  # the idea, though this is the first wrong try
    registry.exercise("06.1", 0.9, seeds)  # far, no slip: the hints in order, the first
    assert f"Hint: {item.hints[0]}" in capsys.readouterr().out


def test_a_slip_with_its_own_hint_shows_that_hint(capsys):
    engine.check(
        "00.1",
        24,
        expected=42,
        hints=("first?", "second"),
        slips=[("four times six", 24, "six times seven, not four times six")],
    )
    out = capsys.readouterr().out
    assert "That looks like four times six. Hint: six times seven, not four times six" in out


def test_one_precision_per_exercise():
    item = registry.entry("06.1")
    with pytest.raises(ValueError, match="one precision"):
        type(item)(**{**item.__dict__, "rel_tol": 0.01})


def test_a_prediction_three_times_too_large_is_no_near_miss(capsys):
    # 05.2 asks for a prediction within 15 %: 3 x 130 is far (and no slip), the first hint
    (slow,) = registry.recorded("05.2")
    registry.exercise("05.2", 3 * registry.expected("05.2", slow), slow)
    out = capsys.readouterr().out
    assert (
        "Close, but" not in out
        and "looks like" not in out
        and f"Hint: {registry.entry('05.2').hints[0]}" in out
    )


# Lesson 04's tolerances and the slip each rejects, derived by hand from the recordings
# (data/timelines/tl-torch-gloo-np2*): 04.2, 0.8097 to 2 figures (+- 0.005), rejects 4.256
# (0.8097 / 0.1903: over op time alone); 04.3, 512 ticks per rank within 2 % (+- 10.2), rejects
# 34 (the cache-on recording's: 18 broadcasts, 14 allreduces, 2 allgathers) and 1,024 (both
# ranks'); 04.4, 3.507 to 2 figures (+- 0.05), rejects 0.2852 (73 / 256, upside down).
LESSON_04 = {
    "04.2": (0.8097, 0.005, {"negotiation over op time, not over both": 4.2555}),
    "04.3": (512, 10.24, {"the cache-on recording's ticks": 34, "both ranks' ticks": 1024}),
    "04.4": (3.5068, 0.05, {"responses with fusion over without: upside down": 0.28516}),
}


@pytest.mark.filterwarnings("ignore::workshop.readers.TimelineWarning")
@pytest.mark.parametrize("exercise", sorted(LESSON_04))
def test_lesson_04s_tolerances_reject_each_named_slip(exercise):
    want, tolerance, slips = LESSON_04[exercise]
    data = registry.recorded(exercise)
    item = registry.entry(exercise)
    assert registry.expected(exercise, *data) == pytest.approx(want, abs=1e-4)
    allowed = item.rel_tol * want or answers.precision_tolerance(want, sig_figs=item.sig_figs)
    assert allowed == pytest.approx(tolerance)
    assert dict(registry.slips(exercise, *data)) == pytest.approx(slips, abs=1e-4)
    for why, value in slips.items():
        assert abs(value - want) > allowed, f"{exercise}: {why} is within the tolerance"
        assert not registry.exercise(exercise, value, *data).ok, why


@pytest.mark.filterwarnings("ignore::workshop.readers.TimelineWarning")
def test_04_2_takes_the_two_figures_it_asks_for_and_names_a_one_figure_answer(capsys):
    (run,) = registry.recorded("04.2")
    assert registry.exercise("04.2", 0.81, run).ok  # 0.8097: 2 figures
    engine.reset()
    # issue 59's case: 0.8 was rejected at 1 % with no precision asked; now the question asks
    # for 2 figures, and 0.8 is told it is a near miss, not sent back to the method
    verdict = registry.exercise("04.2", 0.8, run)
    out = capsys.readouterr().out
    assert verdict.ok is False and "Close, but not to 2 significant figures" in out
