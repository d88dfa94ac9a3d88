"""Lessons 06 and 07 as a reader meets them (issue 48): the contradictions the issue found,
each tested against the lesson's text and data; brief lessons, captions and honest times."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

import workshop as wk
from workshop.lessons.l06_scaling import exercises as scaling
from workshop.lessons.l06_scaling import findings as scaling_lesson
from workshop.lessons.l07_batch_lr import exercises as batch_lr
from workshop.lessons.l07_batch_lr import findings as lr_lesson

ROOT = Path(__file__).resolve().parents[1]
L06 = ROOT / "notebooks" / "06-scaling-experiments.ipynb"
L07 = ROOT / "notebooks" / "07-batch-size-and-learning-rate.ipynb"
WORDS_PER_MINUTE = 150
TIME = re.compile(r"\*\*Time to learn\*\*: (\d+) minutes \((core|optional lesson)\)(?:, \+(\d+))?")


def cells(path: Path) -> list:
    return nbformat.read(path, as_version=4).cells


def source(path: Path, kind: str | None = None) -> str:
    return "\n".join(c.source for c in cells(path) if kind in (None, c.cell_type))


# --- lesson 06: a model the lesson calls unusable is never used --------------------------


def test_06_never_predicts_with_the_loopback_fit_it_calls_unusable():
    text = source(L06)
    assert "must not be used to predict" in text  # the lesson still says so
    after = text.split("must not be used to predict", 1)[1]
    # the loopback fit is `fit` / comm_model(...)["fit"]: no ring_check may take its alpha or B
    code = after + (ROOT / "workshop" / "lessons" / "l06_scaling" / "findings.py").read_text()
    for call in re.findall(r"ring_check\((.*?)\)\n", code, flags=re.S):
        assert not re.search(r"\bfit\[|comm_model\(", call), call
    assert "The model on the compute-bound sweep" not in text
    expected = (ROOT / "data" / "expected" / "06-scaling-experiments.json").read_text()
    assert "cpu_ring_predicted" not in expected


def test_06_ring_model_is_applied_only_with_the_links_known_bandwidth():
    check = scaling_lesson.net_check(
        wk.open_run("cluster/scaling-100mbit"), wk.open_run("cluster/allreduce")
    )
    assert abs(check.error.median()) < 0.5  # a model the lesson trusts: within its tested error


# --- lesson 06: sources named by what they are -----------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        source(L06),
        (ROOT / "workshop" / "lessons" / "l06_scaling" / "findings.py").read_text(),
        (ROOT / "workshop" / "lessons" / "l06_scaling" / "exercises.py").read_text(),
    ],
    ids=["notebook", "findings", "exercises"],
)
def test_06_names_its_sources_not_seed_numbers(text):
    assert not re.findall(r"\bseeds? ?0\d\d\b", text, flags=re.I)
    assert "lesson 00 lists" not in text


def test_06_links_the_list_of_sources_and_each_name_is_there():
    markdown = source(L06, "markdown")
    assert "(../docs/sources.md)" in markdown
    listed = (ROOT / "docs" / "sources.md").read_text()
    for name in ("the Horovod lab report", "the ALCF timeline tutorial", "the thesis talk"):
        assert name in markdown
        assert f"| {name} |" in listed
        row = next(line for line in listed.splitlines() if line.startswith(f"| {name} |"))
        assert "06" in row, f"docs/sources.md: {name} should name lesson 06"


# --- lesson 07: sentences about measured ratios, and where it leads -------------------------


@pytest.mark.parametrize("ratio, verb", [(0.79, "fell"), (1.27, "rose"), (1.001, "stayed")])
def test_07_a_ratio_chooses_its_verb(ratio, verb):
    assert verb in lr_lesson.changed(ratio, "throughput")


def test_07_the_recorded_throughput_sentence_matches_its_number():
    batch = wk.open_run(batch_lr.RECORDINGS["batch"])
    small, large = lr_lesson.smallest(batch), lr_lesson.largest(batch)
    ratio = large.samples_per_s / small.samples_per_s
    text = lr_lesson.fixed_lr(batch)
    assert f"throughput (samples/s) {'rose' if ratio > 1 else 'fell'} to {ratio:.2f}x" in text
    # no hand-written verb in front of a computed ratio in the lesson's code
    assert not re.search(r"\b(rose|fell)\b \{", source(L07, "code"))


def test_07_whats_next_points_to_the_next_lesson():
    markdown = source(L07, "markdown")
    after = markdown.split("## What's next", 1)[1]
    assert "(08-tuning-horovod.ipynb)" in after
    assert "Back to" not in after and "00-welcome" not in after


# --- both: brief, captioned, honest times -----------------------------------------------


def _visible_code(path: Path) -> list[str]:
    return [
        c.source
        for c in cells(path)
        if c.cell_type == "code"
        and "solution" not in c.metadata.get("tags", [])
        and not c.metadata.get("jupyter", {}).get("source_hidden")
    ]


@pytest.mark.parametrize("path", [L06, L07], ids=["06", "07"])
def test_prose_first_and_brief(path):
    visible = [line for s in _visible_code(path) for line in s.splitlines()]
    assert not any("print(f" in line for line in visible)
    assert "What the check below compares with" not in source(path)
    assert "exercises.check(" not in source(path) and "exercises.reveal(" not in source(path)
    machinery = [line for line in visible if "wk.exercise(" in line or "answer_" in line]
    assert len(machinery) <= 0.2 * len(visible)
    assert len(visible) <= 110, len(visible)


@pytest.mark.parametrize("path", [L06, L07], ids=["06", "07"])
def test_every_figure_has_a_fresh_caption(path):
    notebook = cells(path)
    markdown = source(path, "markdown")
    draws = re.compile(r"\bplot\.plot_|\bwidgets\.\w+_explorer")
    for cell in notebook:
        if cell.cell_type != "code" or not draws.search(cell.source):
            continue
        caption = cell.metadata.get("caption", "")
        assert caption, f"no caption: {cell.source[:60]}"
        for sentence in re.split(r"(?<=[.:])\s+", caption):
            assert sentence[:60] not in markdown, f"caption copies the text: {sentence}"


def _estimate(part: list) -> float:
    words = sum(len(c.source.split()) for c in part if c.cell_type == "markdown")
    code = sum(
        1
        for c in part
        if c.cell_type == "code"
        and "solution" not in c.metadata.get("tags", [])
        and not c.metadata.get("jupyter", {}).get("source_hidden")
    )
    return words / WORDS_PER_MINUTE + code


def _minutes(module, ids: set[str]) -> int:
    return sum(e.minutes for e in module.EXERCISES if e.id in ids)


def _exercise_ids(part: list) -> set[str]:
    return set(re.findall(r'wk\.exercise\("(\d\d\.\d+)"', "".join(c.source for c in part)))


def test_06_stated_times_are_honest():
    notebook = cells(L06)
    split = next(i for i, c in enumerate(notebook) if c.source.startswith("## Optional: "))
    core, optional = notebook[:split], notebook[split:]
    stated = TIME.search(source(L06, "markdown"))
    assert stated and stated.group(2) == "core"
    core_min, optional_min = int(stated.group(1)), int(stated.group(3))
    assert core_min <= 35
    want_core = _estimate(core) + _minutes(scaling, _exercise_ids(core))
    want_optional = _estimate(optional) + _minutes(scaling, _exercise_ids(optional))
    assert 0.8 * want_core <= core_min <= 1.25 * want_core, want_core
    assert 0.8 * want_optional <= optional_min <= 1.25 * want_optional, want_optional
    # every Optional section comes after the core's Summary and What's next
    headings = [c.source.splitlines()[0] for c in notebook if c.cell_type == "markdown"]
    h2 = [h for h in headings if h.startswith("## ")]
    first_optional = next(i for i, h in enumerate(h2) if h.startswith("## Optional: "))
    assert all(h.startswith("## Optional: ") for h in h2[first_optional:])


def test_07_stated_time_is_honest_and_optional():
    stated = TIME.search(source(L07, "markdown"))
    assert stated and stated.group(2) == "optional lesson"
    want = _estimate(cells(L07)) + _minutes(batch_lr, {e.id for e in batch_lr.EXERCISES})
    assert 0.8 * want <= int(stated.group(1)) <= 1.25 * want, want
