"""What a reader meets in the book (issue 48): numbered figures with captions written for them,
never a sentence copied from the text around them; a first screen without build messages; the
book's weight in visible code; one home for Horovod's defaults that the glossary states."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tools.book.prepare import copied_from, figure_problems, prepare
from tools.book.repository import HOW_TO_SET_REPOSITORY, Links, lessons
from tools.book.stage import install_page, landing_page
from tools.book.tracks import CORE, OPTIONAL, Lesson
from tools.book.weight import MAX_LINES, MAX_SHARE, Weight, book_weight, table, weigh
from workshop import rules

REPO = Path(__file__).resolve().parents[1]
LINKS = Links("someone/horovod-workshop", "HEAD")
NOWHERE = Links(None, "HEAD")
# Captions the book once made by cutting the paragraph before a figure (issue 48), with that
# paragraph.
OLD_COPIED = [
    (
        "The ring's steps for N_WORKERS workers.",
        "## Ring allreduce\n\nThe ring's steps for N_WORKERS workers. Each worker sends one "
        "chunk to its right neighbour per step.",
    ),
    (
        "On a GPU cluster with NCCL the full negotiation ... keep the c",
        "On a GPU cluster with NCCL the full negotiation costs more than here, so keep the cache "
        "on. Autotune searches the knobs for you.",
    ),
    (
        "Time per epoch of each run, in seconds.",
        "Time per epoch of each run, in seconds. The larger batches finish an epoch sooner.",
    ),
]


def _picture_cell(source: str, caption: str | None = None):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": "iVBO"}, metadata={})
    ]
    if caption:
        cell.metadata["caption"] = caption
    return cell


def _notebook(*cells):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# 05 · A lesson"), *cells]
    return notebook


@pytest.mark.parametrize(("caption", "markdown"), OLD_COPIED)
def test_a_caption_copied_from_the_text_is_rejected(caption, markdown):
    assert copied_from(caption, markdown)
    notebook = _notebook(nbformat.v4.new_markdown_cell(markdown), _picture_cell("plot()", caption))
    assert figure_problems(notebook, "05-x.ipynb") == [
        f"05-x.ipynb cell 2: caption copied from the text: {copied_from(caption, markdown)!r}"
    ]


def test_a_caption_written_for_the_figure_passes_and_none_is_named():
    markdown = "## Who waits\n\nThe tensor time per rank: rank 1 waits at every allreduce."
    fresh = "Bars of each rank's tensor time per step: the taller bar is the one they wait for."
    notebook = _notebook(
        nbformat.v4.new_markdown_cell(markdown),
        _picture_cell("plot.plot_breakdown(x)", fresh),
        nbformat.v4.new_code_cell("plot.plot_speedup(table);"),  # no output yet: a drawing call
    )
    assert copied_from(fresh, markdown) is None
    assert figure_problems(notebook, "05-x.ipynb") == [
        "05-x.ipynb cell 3: a figure without 'caption' metadata"
    ]


def test_figures_are_numbered_per_lesson_with_their_own_caption():
    intro = nbformat.v4.new_markdown_cell("The first epoch is the slowest. More text here.")
    notebook = _notebook(
        intro,
        _picture_cell("plot(a)", "Each epoch's seconds: the first bar stands out."),
        _picture_cell("plot(b)"),
    )
    prepared = prepare(notebook, "05-a-lesson.ipynb", LINKS, "x")
    first, second = (c.metadata.mystnb for c in prepared.cells[-2:])
    assert first["figure"]["caption"] == (
        "Figure 05.1: Each epoch's seconds: the first bar stands out."
    )
    assert first["image"]["alt"] == "Each epoch's seconds: the first bar stands out."
    numbered = _notebook(_picture_cell("plot(c)", "Figure 3. Its own number: replaced."))
    own = prepare(numbered, "05-a-lesson.ipynb", LINKS, "x").cells[-1].metadata.mystnb
    assert own["figure"]["caption"] == "Figure 05.1: Its own number: replaced."
    # without a caption: its number, never the introduction's first sentence
    assert second["figure"]["caption"] == "Figure 05.2"
    assert "first epoch" not in second["image"]["alt"] and len(second["image"]["alt"].split()) >= 3


@pytest.mark.parametrize("path", lessons(), ids=lambda p: p.name[:2])
def test_every_figure_of_every_lesson_has_a_caption_of_its_own(path):
    problems = figure_problems(nbformat.read(path, as_version=4), path.name)
    assert not problems, "\n".join(problems)


def _table() -> list[Lesson]:
    """A lesson table as the headers could state it (the lessons themselves change)."""
    return [
        Lesson(f"{n}-lesson-{n}.ipynb", f"Lesson {n}", 20, 10 if n in CORE else 0)
        for n in sorted(CORE + OPTIONAL)
    ]


def test_the_landing_page_has_three_ways_to_start_and_no_build_message():
    table = _table()
    setup = json.loads((REPO / "data/benchmarks/setup-time/result.json").read_text())
    for links in (LINKS, NOWHERE):
        page = landing_page((REPO / "book" / "index.md").read_text(), links, table)
        start = page[page.index("## Three ways to start") :]
        assert "**Read here.**" in start and "**Binder.**" in start and "Linux" in start
        assert f"about {setup['virtualenv_installed_gb']:g} GB" in start
        assert f"about {setup['seconds'] / 60:.0f}\n   minutes" in start or (
            f"about {setup['seconds'] / 60:.0f} minutes" in start
        )
        assert "(docs/install.md)" in start and "install-and-develop" not in page
        for build_message in (HOW_TO_SET_REPOSITORY, "workshop book", "--repository", "this copy"):
            assert build_message not in page, build_message
        assert "{{" not in page


def test_a_build_without_repository_says_so_on_stderr_only(tmp_path, capsys, monkeypatch):
    from tools.book import build

    monkeypatch.setattr(build, "repository_links", lambda repository=None: NOWHERE)
    monkeypatch.setattr(build, "executed_copies", lambda replays, notebooks: {})

    def stop(*args):
        raise SystemExit("staged")

    monkeypatch.setattr(build, "stage", stop)
    with pytest.raises(SystemExit):
        build.build_book(tmp_path, replays=tmp_path, progress=lambda _: None)
    said = capsys.readouterr()
    assert HOW_TO_SET_REPOSITORY in said.err and HOW_TO_SET_REPOSITORY not in said.out


def test_the_install_page_is_for_learners():
    text = (REPO / "docs" / "install.md").read_text()
    setup = json.loads((REPO / "data/benchmarks/setup-time/result.json").read_text())
    page = install_page(text, LINKS)
    assert LINKS.binder("00-welcome.ipynb") in page
    assert "OWNER" not in install_page(text, NOWHERE) and "{{" not in install_page(text, NOWHERE)
    assert "Linux" in text and "macOS is not\n  supported" in text
    assert f"{setup['virtualenv_installed_gb']:g} GB" in text
    assert f"{setup['seconds']} s" in text and f"{setup['horovod_build_s']} s" in text
    assert "bash scripts/setup.sh" in text and "## When it fails" in text
    for developer in ("pytest", "trixie", "scripts/test.sh"):
        assert developer not in text, developer


# --- the book's weight ----------------------------------------------------------------------


def test_weight_counts_visible_code_machinery_and_prints():
    parameters = nbformat.v4.new_code_cell('LIVE = False\nSOLUTIONS = False\nRESULTS_PATH = ""')
    parameters.metadata["tags"] = ["parameters"]
    answer = nbformat.v4.new_code_cell(
        'answer_05_1 = None  # your guess\nwk.exercise("05.1", answer_05_1, run)'
    )
    old_check = nbformat.v4.new_code_cell(
        'exercises.check("05.2", answer_05_2, expected=x,\n                hints=("a", "b"))'
    )
    printed = nbformat.v4.new_code_cell('for r in rows:\n    print(f"{r}")\nx = 1')
    solution = nbformat.v4.new_code_cell("if SOLUTIONS:\n    solution = 1")
    solution.metadata["tags"] = ["solution"]
    hidden = nbformat.v4.new_code_cell("secret = 2")
    hidden.metadata["jupyter"] = {"source_hidden": True}
    test_only = nbformat.v4.new_code_cell("found = results.save(RESULTS_PATH, {})")
    notebook = _notebook(parameters, answer, old_check, printed, solution, hidden, test_only)
    weight = weigh(notebook, "05")
    # LIVE line (1) + answer cell (2) + the check over two lines (2) + the loop (3)
    assert (weight.lines, weight.machinery, weight.prints) == (8, 4, 1)
    assert weight.unanswered == 0
    assert "all" in table([weight])


def test_the_books_visible_code_is_brief_and_mostly_teaching():
    weights = book_weight()
    total = Weight(
        "all",
        sum(w.lines for w in weights),
        sum(w.machinery for w in weights),
        sum(w.prints for w in weights),
        sum(w.unanswered for w in weights),
    )
    assert total.unanswered == 0, "a 'no answer yet' line reaches the book"
    assert total.lines <= MAX_LINES, table(weights)
    assert total.share <= MAX_SHARE, table(weights)


# --- one home for Horovod's facts -----------------------------------------------------------


def test_the_glossary_states_horovods_defaults_from_their_one_home():
    glossary = " ".join((REPO / "docs" / "glossary.md").read_text().split())
    for fact, sentence in rules.glossary_facts().items():
        assert sentence in glossary, f"docs/glossary.md: the {fact}: {sentence!r}"
    assert rules.FUSION_THRESHOLD_DEFAULT_BYTES == 128 * 2**20
    # the old text (issue 48): a 64 MB default, "a few" allreduces per negotiation
    for old in ("(64 MB by default)", "a few small (8-byte) MPI allreduces"):
        assert old not in glossary, old


def test_the_old_glossary_text_fails_the_fact_check():
    old = (
        "`HOROVOD_FUSION_THRESHOLD` (64 MB by default). On the CPU each negotiation is a few "
        "small (8-byte) MPI allreduces, the signature of lesson 05."
    )
    facts = rules.glossary_facts()
    assert facts["fusion threshold"] not in old and facts["negotiation"] not in old
