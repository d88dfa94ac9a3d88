"""One rule for exercises (issue 59): a tolerance that follows from the precision the question
asks for, stated in the question; hints chosen by the slip an answer matches, or by a near miss,
before the number of tries. Every converted lesson's numeric exercise states the precision its
check uses; lesson 09's diagnoses (problem letter, evidence number, fix letter) state theirs for
the number, the letters being exact."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from workshop.lessons import answers, engine, registry

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CONVERTED = ("01", "02", "03", "04", "05", "06", "07", "08", "09")
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


# Lesson 09's tolerances and the slip each rejects, derived by hand from the recordings
# (data/capstone/case-N): each diagnosis's evidence number to 3 significant figures, 09.5's
# gain to 3 decimal places. 09.1, 2.786 (+- 0.005), rejects the ratio of medians (3.250), the
# upside-down ratio (0.359), step times (1.011), the readiness ticks (0.369) and the fixed
# run's (1.024); the old 10 % accepted 3.0. 09.2, 0.125 (+- 0.0005), rejects 8 (upside down),
# 0.25 (np forgotten), 0.354 (the square-root rule) and the fixed run's 1.0. 09.3, 8 responses
# per step (+- 0.005: exact), rejects 7 and 9 (off by one), 1 (tensors per response) and the
# fixed run's 1.908; the old 6 % accepted 8.4. 09.4, 50.08 ms (+- 0.05), rejects 0.05008
# (seconds), 19.97 (cycles per second) and the fixed run's 1.077. 09.5, 3.852 (+- 0.0005),
# rejects 0.2596 (upside down), 3.863 (the first epoch kept), 3.859 (the rounds' mean), 3.981
# (the ratio of the medians) and 4.130 (the single diagnosis pair). A slip with another letter
# (a wrong fix, the decoy) fails by its letter, whatever the number.
FIXED = "the fixed run's number, a healthy value"
LESSON_09 = {
    "09.1": (2.786189, 0.005, {
        FIXED: 1.0241,
        "the ratio of the ranks' medians: the menu asks for the lower quartiles": 3.250367,
        "the faster rank over the slower: upside down": 0.358913,
        "step times, waiting included: the other rank waits as long": 1.010554,
        "the readiness ticks the lesson warns about: cycles the latest rank is behind": 0.36875,
    }),
    "09.2": (0.125, 0.0005, {
        FIXED: 1.0,
        "the linear rule's LR over the one used: upside down": 8.0,
        "np forgotten: the per-worker batch over the base": 0.25,
        "the square-root rule's LR": 0.353553,
    }),
    "09.3": (8.0, 0.005, {
        FIXED: 1.908333,
        "off by one: a response fewer per step": 7.0,
        "off by one: a response more per step": 9.0,
        "tensors per response, not responses per step": 1.0,
    }),
    "09.4": (50.078, 0.05, {
        FIXED: 1.077,
        "seconds, not ms": 0.050078,
        "cycles per second, not ms between them": 19.968849,
    }),
    "09.5": (3.852290, 0.0005, {
        "broken over fixed: upside down": 0.259586,
        "the first epoch kept": 3.863072,
        "the mean of the rounds' gains": 3.858702,
        "the ratio of the medians, not the median of each round's ratio": 3.981273,
        "the single diagnosis pair": 4.130495,
    }),
}  # fmt: skip


def _number(value):
    return value[1] if isinstance(value, tuple) else value


@pytest.mark.filterwarnings("ignore::workshop.readers.TimelineWarning")
@pytest.mark.parametrize("exercise", sorted(LESSON_09))
def test_lesson_09s_tolerances_reject_each_named_slip(exercise):
    want, tolerance, slips = LESSON_09[exercise]
    data = registry.recorded(exercise)
    item = registry.entry(exercise)
    expected = registry.expected(exercise, *data)
    assert _number(expected) == pytest.approx(want, abs=1e-6)
    allowed = registry.tolerances_of(item, expected)
    assert allowed == {"rel_tol": 0.0, "abs_tol": pytest.approx(tolerance)}
    letters = (expected[0], expected[2]) if isinstance(expected, tuple) else None
    numbers, by_letter = {}, []
    for why, value in registry.slips(exercise, *data):
        if letters and (value[0], value[2]) != letters:
            by_letter.append(why)  # a wrong fix or the decoy: its letter fails it
        else:
            numbers[why] = _number(value)
    assert numbers == pytest.approx(slips, abs=1e-6)
    for why, value in slips.items():
        assert abs(value - want) > tolerance, f"{exercise}: {why} is within the tolerance"
        answer = (letters[0], value, letters[1]) if letters else value
        assert not registry.exercise(exercise, answer, *data).ok, why
    for why, value in registry.slips(exercise, *data):
        if why in by_letter:
            assert not registry.exercise(exercise, value, *data).ok, why


@pytest.mark.filterwarnings("ignore::workshop.readers.TimelineWarning")
def test_09_takes_3_figures_and_names_a_2_figure_diagnosis_a_near_miss(capsys):
    (run,) = registry.recorded("09.1")
    assert registry.exercise("09.1", ("c", 2.79, "f"), run).ok  # 2.786: 3 figures
    engine.reset()
    # 2.8 passed the old 10 %, and so did 3.0; now 2.8 is told it is close, 3.0 is not
    verdict = registry.exercise("09.1", ("c", 2.8, "f"), run)
    out = capsys.readouterr().out
    assert verdict.ok is False and "Close, but not to 3 significant figures" in out
    verdict = registry.exercise("09.1", ("c", 3.0, "f"), run)
    assert verdict.ok is False and "Close, but" not in capsys.readouterr().out
    # the right number with a wrong letter is no near miss: the letters are exact
    registry.exercise("09.1", ("c", 2.8, "b"), run)
    assert "Close, but" not in capsys.readouterr().out
    (slow,) = registry.recorded("09.3")
    assert not registry.exercise("09.3", ("b", 8.4, "e"), slow).ok  # the old 6 % took it
