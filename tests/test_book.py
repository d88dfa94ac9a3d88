"""The workshop book (tools/book/, workshop book, scripts/book.sh).

Unit tests of what goes into the book (a lesson's cells and outputs as a reader sees them, the
landing page, the links, the one table of times); then the book built from the lessons run as
CI runs them (SOLUTIONS True, no answers) and read in headless Chromium. On the landing page:
no build instructions, no link to a placeholder. On every lesson page: no placeholder line, no
link to OWNER/REPO, no element whose content is wider than its box, every figure with an alt
text in words, an exercise box and at least one block to open after answering per exercise,
no error, no test plumbing or library noise, and no exercise's answer outside a closed block.
Screenshots of lessons 04 and 09 are kept in test-artifacts/book-<lesson>.png.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_browser import CHROMIUM, CHROMIUM_ARGS
from test_notebooks import NOT_A_LEAK, NOTEBOOKS, screen_leaks, solutions_replay

from tools.book.build import build_book
from tools.book.prepare import WIDGET_VIEW, left_out, prepare
from tools.book.replay import executed_copies
from tools.book.repository import (
    HOW_TO_SET_REPOSITORY,
    BookError,
    Links,
    lessons,
    repository_links,
)
from tools.book.stage import (
    DOCS,
    INSTRUCTORS,
    REFERENCE,
    install_page,
    landing_page,
    lesson_table,
    stage,
    times_table,
)
from tools.book.tracks import TRACKS, minutes_text, track_minutes
from workshop.commands import book as book_command

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
#: Lessons whose live-rank section is photographed: lesson -> its heading.
LIVE_RANK_SECTIONS = {
    "01-data-vs-model-parallelism": "collectives by hand",
    "02-your-first-horovod-program": "one training step on live ranks",
}
LINKS = Links("someone/horovod-workshop", "HEAD")


def _notebook(*cells):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = list(cells)
    return notebook


def _code(source, *outputs, **metadata):
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output(**o) for o in outputs]
    cell.metadata.update(metadata)
    return cell


def _title():
    return nbformat.v4.new_markdown_cell("# 05 · A lesson\n\nWhat it teaches.")


def test_prepare_collapses_what_follows_an_answer_and_drops_what_is_for_tests():
    parameters = _code(
        'LIVE = False\nSOLUTIONS = False  # CI sets it\nRESULTS_PATH = ""\nNP = 2',
        tags=["parameters"],
    )
    injected = _code("SOLUTIONS = True\nRESULTS_PATH = 'x'", tags=["injected-parameters"])
    solution = _code(
        "if SOLUTIONS:\n    solution_05_1 = 42\n"
        '    exercises.check_solution("05.1", solution_05_1, expected=42)\n'
        'else:\n    exercises.solution_hidden("05.1")',
        {"output_type": "stream", "name": "stdout", "text": "[05.1] worked solution: 42\n"},
        tags=["solution"],
        jupyter={"source_hidden": True},
    )
    revealed = _code(
        'exercises.reveal(["05.1", "05.2"], f"the answer was {x}")',
        {"output_type": "stream", "name": "stdout", "text": "the answer was 42\n"},
    )
    note = nbformat.v4.new_markdown_cell("Where the problem lay: *rank 1*.")
    note.metadata["jupyter"] = {"source_hidden": True}
    saved = _code('found = results.save(RESULTS_PATH, {"x": 42})')
    tagged = _code("found = {}\nfound", tags=["test-only"])
    shown = _code("print(1 + 1)", {"output_type": "stream", "name": "stdout", "text": "2\n"})
    notebook = _notebook(
        _title(), parameters, injected, shown, solution, revealed, note, saved, tagged
    )

    prepared = prepare(notebook, "05-a-lesson.ipynb", LINKS, "../_downloads/x.ipynb")

    sources = [cell.source for cell in prepared.cells]
    assert sources[0].startswith("# 05")
    assert "mybinder.org/v2/gh/someone/horovod-workshop/HEAD" in sources[1]
    assert "labpath=notebooks%2F05-a-lesson.ipynb" in sources[1]
    assert "{download}`Download the notebook <../_downloads/x.ipynb>`" in sources[1]
    # The parameters without SOLUTIONS and RESULTS_PATH; papermill's cell and the two cells
    # for the tests left out.
    assert sources[2] == "LIVE = False\nNP = 2"
    assert sources[3] == "print(1 + 1)" and prepared.cells[3].outputs[0].text == "2\n"
    assert len(sources) == 7
    # The worked solution without its `if SOLUTIONS:`, collapsed under its own label.
    solution_cell, revealed_cell, note_cell = prepared.cells[4:]
    assert solution_cell.source.startswith("solution_05_1 = 42\nexercises.check_solution(")
    assert "SOLUTIONS" not in solution_cell.source and "hidden" not in solution_cell.source
    assert "hide-cell" in solution_cell.metadata.tags
    assert solution_cell.metadata.mystnb["code_prompt_show"] == "Worked solution of exercise 05.1"
    assert "hide-output" in revealed_cell.metadata.tags
    assert revealed_cell.metadata.mystnb["code_prompt_show"] == (
        "Show after you have answered 05.1 and 05.2"
    )
    assert note_cell.source.startswith('<details class="reveal">\n<summary>Show after you have')
    assert "*rank 1*" in note_cell.source and note_cell.source.endswith("</details>")
    assert all("jupyter" not in cell.metadata for cell in prepared.cells)


def test_prepare_refuses_a_replay_without_the_solutions():
    # A reader's edition built from a learner's run would show placeholders instead of results.
    said = {
        "output_type": "stream",
        "name": "stdout",
        "text": "[05.1 and 05.2] answer exercises 05.1 and 05.2 above to see this line.\n",
    }
    with pytest.raises(BookError, match="05-a.ipynb cell 1: 'answer exercises 05.1 and "):
        prepare(_notebook(_title(), _code("x", said)), "05-a.ipynb", LINKS, "x")


def test_prepare_leaves_out_library_log_noise_and_gives_figures_a_caption():
    noise = {
        "output_type": "stream",
        "name": "stderr",
        "text": "2026-11-27 02:00:00.1: I external/local_xla/xla/tsl/cuda/cudart_stub.cc:31] "
        "Could not find cuda drivers on your machine, GPU will not be used.\n"
        "WARNING:tensorflow:From x: The name tf.losses is deprecated.\n"
        "UserWarning: kept\n",
    }
    only_noise = {"output_type": "stream", "name": "stderr", "text": "WARNING:tensorflow:x\n"}
    # A run's log that a lesson prints carries the ranks' lines behind a prefix.
    log = {
        "output_type": "stream",
        "name": "stdout",
        "text": "[1]<stderr>:WARNING:tensorflow:Callback method is slow\nepoch 1: 2.1 s\n",
    }
    picture = {"output_type": "display_data", "data": {"image/png": "iVBO"}, "metadata": {}}
    intro = nbformat.v4.new_markdown_cell(
        "## Who waits\n\nThe **[tensor time](../docs/glossary.md#term-tensor-time)** per rank "
        "(lesson [04](04-a.ipynb)): rank 1 waits. More."
    )
    notebook = _notebook(
        _title(), _code("x", noise, only_noise, log), intro, _code("plot()", picture)
    )

    prepared = prepare(notebook, "05-a.ipynb", LINKS, "x")

    texts = [o.text for o in prepared.cells[2].outputs]
    assert texts == ["UserWarning: kept\n", "epoch 1: 2.1 s\n"]
    options = prepared.cells[-1].metadata.mystnb
    # no caption metadata: the figure's number, never a sentence copied from the markdown
    # around it (issue 48; tests/test_book_pages.py holds the caption rules)
    assert options["figure"]["caption"] == "Figure 05.1"
    assert "tensor time" not in options["image"]["alt"]


def test_without_a_repository_no_binder_link_and_no_build_message_on_the_page():
    nowhere = Links(None, "HEAD")
    prepared = prepare(_notebook(_title()), "05-a.ipynb", nowhere, "x")
    assert "mybinder" not in prepared.cells[1].source and "OWNER" not in prepared.cells[1].source
    table = lesson_table(lessons())
    page = landing_page((REPO / "book" / "index.md").read_text(), nowhere, table)
    # the build message is for whoever builds the book (stderr), never on the landing page
    assert "mybinder" not in page and HOW_TO_SET_REPOSITORY not in page
    install = install_page((REPO / "docs" / "install.md").read_text(), nowhere)
    assert "mybinder.org/v2/gh/OWNER" not in install and "{{" not in install


@pytest.mark.parametrize(
    ("output", "says"),
    [
        (
            {"output_type": "error", "ename": "KeyError", "evalue": "'np'", "traceback": []},
            "cell 1: an error: KeyError: 'np'",
        ),
        (
            {
                "output_type": "stream",
                "name": "stderr",
                "text": "/x/.venv/lib/python3.11/site-packages/pandas/core/frame.py:12: "
                "FutureWarning: soon\n",
            },
            "cell 1: a message on stderr naming 'site-packages/pandas/core/frame.py:12'",
        ),
        (
            {"output_type": "execute_result", "data": {"text/plain": "None"}, "metadata": {}},
            "cell 1: None shown as a result",
        ),
    ],
    ids=["error", "warning-with-package-path", "none-result"],
)
def test_prepare_refuses_what_a_reader_would_take_for_a_failure(output, says):
    notebook = _notebook(_title(), _code("x", output))
    with pytest.raises(BookError, match=re.escape(f"05-a-lesson.ipynb {says}")):
        prepare(notebook, "05-a-lesson.ipynb", LINKS, "x.ipynb")


def test_prepare_keeps_a_warning_without_a_path_and_plain_stderr():
    # A lesson may print on stderr (a progress line, a warning it explains): only a package
    # path, which a reader cannot act on, is refused.
    said = {"output_type": "stream", "name": "stderr", "text": "UserWarning: 2 spans ...\n"}
    prepared = prepare(_notebook(_title(), _code("x", said)), "05-a.ipynb", LINKS, "x")
    assert prepared.cells[-1].outputs[0].text == said["text"]


def test_prepare_shows_paths_in_the_clone_relative_and_warnings_without_the_kernels_file():
    warned = {
        "output_type": "stream",
        "name": "stderr",
        "text": "/tmp/ipykernel_15213/224282047.py:3: TimelineWarning: /home/r/ws/data/t/"
        "timeline.json: 2 spans have no 'E'\n  tl = readers.read_timeline(run_dir)\n",
    }
    said = {"output_type": "stream", "name": "stdout", "text": "analysing /home/r/ws/data/runs\n"}
    table = {"output_type": "execute_result", "metadata": {}, "execution_count": 1}
    table["data"] = {"text/html": "<td>/home/r/ws/data/x</td>", "text/plain": "/home/r/ws/y"}
    notebook = _notebook(_title(), _code("x", warned, said, table))

    prepared = prepare(notebook, "04-x.ipynb", LINKS, "x", Path("/home/r/ws"))

    warning, printed, shown = prepared.cells[-1].outputs
    assert warning.text == "TimelineWarning: data/t/timeline.json: 2 spans have no 'E'\n"
    assert printed.text == "analysing data/runs\n"
    assert shown.data == {"text/html": "<td>data/x</td>", "text/plain": "y"}


def test_prepare_keeps_a_widgets_picture_not_its_state():
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    widget_only = {
        "output_type": "display_data",
        "data": {WIDGET_VIEW: view, "text/plain": "interactive(children=(...))"},
        "metadata": {},
    }
    png = {"image/png": "iVBORw0KGgo="}
    picture = {"output_type": "display_data", "data": png, "metadata": {}}
    notebook = _notebook(_title(), _code("widgets.timeline_explorer(tl)", picture, widget_only))
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}

    prepared = prepare(notebook, "04-x.ipynb", LINKS, "x")

    assert [list(o.data) for o in prepared.cells[-1].outputs] == [["image/png"]]
    assert "widgets" not in prepared.metadata


def test_prepare_needs_a_title():
    with pytest.raises(BookError, match="04-x.ipynb: no title"):
        prepare(_notebook(_code("x")), "04-x.ipynb", LINKS, "x")


def test_the_landing_page_is_for_learners_and_lists_every_page():
    table = lesson_table(lessons())
    page = landing_page((REPO / "book" / "index.md").read_text(), LINKS, table)
    assert f"[Launch the workshop on Binder]({LINKS.binder(table[0].name)})" in page
    assert "{{" not in page
    # Every lesson with its time, as the lesson's own header gives it; no build instructions.
    for lesson in table:
        assert f"[{lesson.name[:2]} · {lesson.title}](notebooks/{lesson.name}) | " in page
    four = next(lesson for lesson in table if lesson.number == "04")
    assert (
        f"| [04 · {four.title}](notebooks/04-horovod-timelines.ipynb) | {minutes_text(four)} |"
        in page
    )
    for build_word in ("cmake", "gcc", "g++", "apt-get", "pytest", "setup.sh"):
        assert build_word not in page, build_word
    toctree = page[page.index("```{toctree}") :]
    listed = re.findall(r"^(notebooks/\S+|docs/\S+)$", toctree, re.M)
    assert listed == [f"notebooks/{n.name.removesuffix('.ipynb')}" for n in table] + [
        *REFERENCE,
        *INSTRUCTORS,
    ]
    assert sorted(d.removesuffix(".md") for d in DOCS) == sorted(
        p.removeprefix("docs/") for p in [*REFERENCE, *INSTRUCTORS] if "docs/" in p
    )


def test_one_table_of_times_for_the_landing_page_the_guide_and_the_lessons():
    # The lessons' own headers give each time; the tracks add them up (the guide's copy and
    # the tracks' rules: tests/test_lesson_times.py).
    table = lesson_table(lessons())
    times = times_table(table)
    for lesson in table:
        assert f"| {lesson.number} · {lesson.title} | {minutes_text(lesson)} |" in times
    for track, (numbers, optional) in TRACKS.items():
        minutes = track_minutes(table, numbers, optional)
        assert f"| {track} | {', '.join(numbers)} | {minutes} min |" in times


def test_the_install_page_is_docs_install_md_for_learners():
    page = install_page((REPO / "docs" / "install.md").read_text(), LINKS)
    assert page.startswith("# Install the workshop on your laptop\n")
    assert f"[Launch the workshop on Binder]({LINKS.binder('00-welcome.ipynb')})" in page
    assert "OWNER/REPO" not in page and "## The two commands" in page


@pytest.mark.parametrize(
    ("env", "origin", "given", "repository"),
    [
        ({"WORKSHOP_BOOK_REPOSITORY": "a/b", "GITHUB_REPOSITORY": "c/d"}, None, "x/y", "x/y"),
        ({"WORKSHOP_BOOK_REPOSITORY": "a/b", "GITHUB_REPOSITORY": "c/d"}, None, None, "a/b"),
        ({"GITHUB_REPOSITORY": "c/d"}, None, None, "c/d"),
        ({}, "https://github.com/e/f.git", None, "e/f"),
        ({}, "git@github.com:g/h-i.git", None, "g/h-i"),
        ({}, "/somewhere/else", None, None),
    ],
)
def test_where_the_links_point(tmp_path, env, origin, given, repository):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    if origin:
        subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", origin], check=True)
    assert repository_links(env, tmp_path, given).repository == repository


@pytest.mark.parametrize("name", ["OWNER/REPO", "just-a-name", "a/b/c", "a b/c"])
def test_a_repository_that_is_not_owner_slash_name_is_refused(tmp_path, name):
    with pytest.raises(BookError, match=re.escape(f"--repository {name!r}: not a GitHub")):
        repository_links({}, tmp_path, name)


def test_executed_copies_names_the_missing_lessons(tmp_path):
    found = lessons()
    nbformat.write(_notebook(_title()), tmp_path / found[0].name)
    with pytest.raises(BookError, match=re.escape(f"no executed copy of {found[1].name}")):
        executed_copies(tmp_path, found)


# --- the book, built and read in a browser -------------------------------------------------

PAGE_MS = 30_000
SCREENSHOTS = ("04-horovod-timelines", "09-diagnose-a-run")
BROKEN_IMAGES_JS = """() => Array.from(document.images)
    .filter((img) => !(img.complete && img.naturalWidth > 0)).map((img) => img.src)"""
OPEN_ALL_JS = "() => document.querySelectorAll('details').forEach((d) => { d.open = true; })"
CLOSE_ALL_JS = "() => document.querySelectorAll('details').forEach((d) => { d.open = false; })"
# Text cut by the column: an element of the page's text whose content is wider than its box.
CUT_JS = """() => Array.from(document.querySelectorAll(
        'main pre, main table, main .cell_output, main .output, main p, main li, main figure'))
    .filter((el) => el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 2)
    .map((el) => el.tagName + ': ' + el.innerText.split('\\n')[0].slice(0, 80))"""
ALT_JS = """() => Array.from(document.querySelectorAll('main img'))
    .filter((img) => !img.closest('.bd-header-article'))
    .map((img) => img.getAttribute('alt') || '')"""
REVEAL_LABELS_JS = """() => Array.from(document.querySelectorAll('main details > summary'))
    .map((s) => s.textContent.trim().split('\\n')[0])"""
# A figure's alt text a reader can use: words, not a hashed file name.
FILE_NAME = re.compile(r"^[\w-]*[0-9a-f]{16,}[\w-]*(\.\w+)?$|\.(png|svg|jpe?g)$")


@pytest.fixture(scope="module")
def built_book(tmp_path_factory):
    """The book built from the lessons run with their solutions (no replay of its own), its
    Binder links pointing to a repository given on the command line's behalf."""
    replays = tmp_path_factory.mktemp("book-replays")
    runs = {}
    for path in NOTEBOOKS:
        # the lesson run as CI runs it (SOLUTIONS True, no answer given), once per session:
        # the same run test_notebooks.py's test_replay_matches_expected_values checks
        runs[path.stem] = solutions_replay(path, tmp_path_factory)
        nbformat.write(runs[path.stem].for_reader(), replays / path.name)
    out = tmp_path_factory.mktemp("book")
    made = build_book(out, replays=replays, repository=LINKS.repository, progress=lambda _: None)
    return made, runs


def _figures(notebook) -> int:
    """The pictures among a notebook's outputs (cells the book leaves out not counted)."""
    return sum(
        any(kind.startswith("image/") for kind in output.get("data", {}))
        for cell in notebook.cells
        if cell.cell_type == "code" and not left_out(cell)
        for output in cell.outputs
    )


@pytest.mark.browser
@pytest.mark.notebook
def test_the_book_reads_in_a_browser(built_book):
    made, runs = built_book
    sync_api = pytest.importorskip("playwright.sync_api", reason="bash scripts/setup.sh --test")
    ARTIFACTS.mkdir(exist_ok=True)
    problems = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(PAGE_MS)
            page.goto((made.html / "index.html").as_uri())
            assert "Horovod" in page.title()
            problems += [
                f"index.html: broken image {src}" for src in page.evaluate(BROKEN_IMAGES_JS)
            ]
            landing = page.locator("main").inner_text()
            problems += [
                f"index.html: build instructions on the landing page ({word!r})"
                for word in ("cmake", "apt-get", "g++", "pytest", "bash scripts/")
                if word in landing
            ]
            problems += _dead_links(page, "index.html")
            nav = page.locator("nav.bd-links a.reference.internal")
            hrefs = {nav.nth(i).get_attribute("href") for i in range(nav.count())}
            for href in ("docs/install.html", "docs/glossary.html", "docs/sources.html"):
                if href not in hrefs:
                    problems.append(f"the navigation has no link to {href}")
            for stem in runs:
                href = f"notebooks/{stem}.html"
                if href not in hrefs:
                    problems.append(f"the navigation has no link to {href}: {sorted(hrefs)}")
                    continue
                page.goto((made.html / "index.html").as_uri())
                page.click(f"nav.bd-links a[href='{href}']")
                heading = page.locator("main h1").first.inner_text()
                if not heading.startswith(stem[:2]):
                    problems.append(f"{href} opens a page titled {heading!r}")
                problems += _read_page(page, stem, runs[stem])
        finally:
            browser.close()
    assert not problems, "\n".join(problems)
    for stem in SCREENSHOTS:
        assert (ARTIFACTS / f"book-{stem}.png").stat().st_size > 10_000


def _dead_links(page, where: str) -> list[str]:
    placeholder = page.locator("a[href*='OWNER/REPO'], a[href*='OWNER.github.io']")
    return [
        f"{where}: a link to a placeholder: {placeholder.nth(i).get_attribute('href')}"
        for i in range(placeholder.count())
    ]


def _read_page(page, stem: str, run) -> list[str]:
    problems = _dead_links(page, stem)
    page.evaluate(OPEN_ALL_JS)  # every block open: its images, its width
    broken = page.evaluate(BROKEN_IMAGES_JS)
    if broken:
        problems.append(f"{stem}: broken images: {broken}")
    figures, drawn = page.locator("main .cell_output img").count(), _figures(run.for_reader())
    if figures != drawn:
        problems.append(f"{stem}: {figures} figures, the replay drew {drawn}")
    problems += [
        f"{stem}: alt text {alt!r} is no caption"
        for alt in page.evaluate(ALT_JS)
        if len(alt.split()) < 3 or FILE_NAME.search(alt)
    ]
    problems += [f"{stem}: cut by the column: {cut}" for cut in page.evaluate(CUT_JS)]
    text = page.locator("main").inner_text()
    if re.search(r"^\w*Error: ", text, re.M):
        problems.append(f"{stem}: an error on the page")
    markers = ("Traceback", "site-packages", "widget-view+json", "interactive(")
    noise = (
        "above to see this line",
        "worked solution not run",
        "Could not find cuda",
        "WARNING:tensorflow",
        "RESULTS_PATH",
        "results.save",
        "SOLUTIONS",
    )
    for marker in (*markers, *noise, "ipykernel_", f"{REPO}/"):
        if marker in text:
            problems.append(f"{stem}: {marker!r} on the page")
    if stem in SCREENSHOTS:
        page.evaluate(CLOSE_ALL_JS)
        target = page.locator("main .cell_output img").first
        if target.count():
            target.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"book-{stem}.png"))
    if stem in LIVE_RANK_SECTIONS:  # what a learner sees of the live ranks (issue 41)
        page.evaluate(CLOSE_ALL_JS)
        heading = page.get_by_role("heading", name=re.compile(LIVE_RANK_SECTIONS[stem]))
        if not heading.count():
            problems.append(f"{stem}: no section {LIVE_RANK_SECTIONS[stem]!r}")
        else:
            heading.first.evaluate("e => e.scrollIntoView({block: 'start'})")
            page.screenshot(path=str(ARTIFACTS / f"book-{stem}-live-ranks.png"))
            if "stdout:1" not in text:
                problems.append(f"{stem}: no output of rank 1 on the page")
    downloads = page.locator("a.download.reference")
    if not downloads.count():
        problems.append(f"{stem}: no download link")
    else:
        href = downloads.first.get_attribute("href")
        target = (Path(page.url.removeprefix("file://")).parent / href).resolve()
        if nbformat.read(target, as_version=4) != run.notebook:
            problems.append(f"{stem}: the download ({href}) is not the committed lesson")
    if page.locator(f"a[href*='mybinder.org'][href*='{stem}.ipynb']").count() == 0:
        problems.append(f"{stem}: no Binder link to notebooks/{stem}.ipynb")
    # Each exercise: its prompt in a box, and at least one block to open after answering.
    labels = page.evaluate(REVEAL_LABELS_JS)
    prompts = page.locator("main .exercise")
    if prompts.count() != len(run.records()):
        problems.append(f"{stem}: {prompts.count()} exercise boxes, {len(run.records())} checks")
    problems += [
        f"{stem} {exercise}: no block to open after answering"
        for exercise in run.records()
        if not any(exercise in label for label in labels)
    ]
    # What the page shows besides code, its prompts and its closed blocks (as test_notebooks.py
    # judges a learner's screen: every output and the markdown; code names the variables, not
    # their values). The prompts are judged as the notebook test judges a prompt.
    page.evaluate(CLOSE_ALL_JS)
    shown = {"prompt": "\n".join(prompts.all_inner_texts())}
    page.add_style_tag(
        content=".cell_input, .exercise, details > :not(summary) { display: none !important; }"
    )
    shown["page"] = page.locator("main").inner_text()
    for exercise, record in sorted(run.records().items()):
        if any(e == exercise for e, _ in NOT_A_LEAK):
            continue  # a coincidence in one cell, judged cell by cell by test_notebooks.py
        problems += [f"{stem} {exercise}: {leak}" for leak in screen_leaks(record, shown)]
    return problems


def test_the_command_names_what_is_wrong(tmp_path):
    # bad input: an error that names the folder and the lessons missing there, nothing built
    empty = tmp_path / "replays"
    empty.mkdir()
    out = tmp_path / "out"
    command = [sys.executable, "-m", "workshop.cli", "book", "--out", str(out)]
    done = subprocess.run([*command, "--replays", str(empty)], capture_output=True, text=True)
    assert done.returncode == 1
    assert f"workshop book: {empty}: no executed copy of 00-welcome.ipynb, " in done.stderr
    assert not out.exists()
    zero = subprocess.run([*command, "--jobs", "0"], capture_output=True, text=True)
    assert zero.returncode == 2 and "--jobs 0: at least 1" in zero.stderr
    # a placeholder for the repository: refused, nothing built
    placeholder = [*command, "--replays", str(empty), "--repository", "OWNER/REPO"]
    done = subprocess.run(placeholder, capture_output=True, text=True)
    assert done.returncode == 1 and "--repository 'OWNER/REPO': not a GitHub" in done.stderr
    assert not out.exists()


def test_the_command_outside_a_checkout_names_what_is_missing(tmp_path, monkeypatch, capsys):
    # the package installed without a clone around it: the book's tool (tools/book/), its
    # Sphinx configuration and the lessons are not there; the error names them, nothing built
    monkeypatch.setattr(book_command, "REPO_DIR", tmp_path)
    out = tmp_path / "out"
    args = argparse.Namespace(out=out, replays=None, jobs=1, repository=None)
    assert book_command._build(args) == 1
    error = capsys.readouterr().err
    assert (
        f"workshop book: the book is built from a clone of the repository, and {tmp_path} "
        in error
    )
    assert "has no tools/book/build.py, book/conf.py, notebooks: clone the repository" in error
    assert not out.exists()


def test_a_staging_folder_not_made_by_the_book_is_not_emptied(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "mine.txt").write_text("keep me")
    with pytest.raises(BookError, match="was not staged by workshop book"):
        stage({}, src, LINKS)
    assert (src / "mine.txt").read_text() == "keep me"


def test_the_setup_time_is_stated_once_and_is_the_measured_one():
    # issue 38: the guide said "about 25 minutes", the README "4 to 6 minutes" for the build:
    # now both quote data/benchmarks/setup-time/result.json, and no other guess is left
    result = json.loads((REPO / "data" / "benchmarks" / "setup-time" / "result.json").read_text())
    assert result["exit_code"] == 0 and result["horovod_build_s"] < result["seconds"]
    guide = (REPO / "docs" / "instructor-guide.md").read_text()
    readme = (REPO / "README.md").read_text()
    assert f"**{result['seconds']} s (5 minutes), {result['horovod_build_s']} s of them" in guide
    assert f"{result['horovod_build_s']} s of a {result['seconds']} s first setup" in readme
    for text in (guide, readme):
        assert "25 minutes" not in text and "4 to 6 minutes" not in text
        assert "30 minutes or more" not in text
