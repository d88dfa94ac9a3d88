"""The workshop book (workshop/book.py, scripts/book.sh).

Unit tests of what goes into the book (a lesson's cells and outputs as a reader sees them, the
landing page, the links); then the book built from the learner runs of tests/test_notebooks.py
(every lesson executed with its defaults: SOLUTIONS False, no answers) and read in headless
Chromium: the landing page reaches every lesson, every image loads, no error or solution shows,
and no exercise's expected value is visible. A screenshot of one lesson page is kept in
test-artifacts/book-04-horovod-timelines.png.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from test_browser import CHROMIUM, CHROMIUM_ARGS
from test_notebooks import NOT_A_LEAK, NOTEBOOKS, learner_replay, screen_leaks

from workshop import book

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts"
SCREENSHOT = ARTIFACTS / "book-04-horovod-timelines.png"
LINKS = book.Links("someone/horovod-workshop", "HEAD")


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


def test_prepare_leaves_out_collapsed_cells_and_papermills_parameters():
    solution = _code(
        "if SOLUTIONS:\n    solution_05_1 = 42",
        tags=["solution"],
        jupyter={"source_hidden": True},
    )
    revealed = nbformat.v4.new_markdown_cell("The answer was 42.")
    revealed.metadata["jupyter"] = {"source_hidden": True}
    injected = _code("RESULTS_PATH = 'x'", tags=["injected-parameters"])
    shown = _code("print(1 + 1)", {"output_type": "stream", "name": "stdout", "text": "2\n"})
    notebook = _notebook(_title(), injected, shown, solution, revealed)

    prepared = book.prepare(notebook, "05-a-lesson.ipynb", LINKS, "../_downloads/x.ipynb")

    sources = [cell.source for cell in prepared.cells]
    assert sources[0].startswith("# 05")
    assert "mybinder.org/v2/gh/someone/horovod-workshop/HEAD" in sources[1]
    assert "labpath=notebooks%2F05-a-lesson.ipynb" in sources[1]
    assert "{download}`Download the notebook <../_downloads/x.ipynb>`" in sources[1]
    assert sources[2:] == ["print(1 + 1)"]
    assert prepared.cells[2].outputs[0].text == "2\n"


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
    with pytest.raises(book.BookError, match=re.escape(f"05-a-lesson.ipynb {says}")):
        book.prepare(notebook, "05-a-lesson.ipynb", LINKS, "x.ipynb")


def test_prepare_keeps_a_warning_without_a_path_and_plain_stderr():
    # A lesson may print on stderr (a progress line, a warning it explains): only a package
    # path, which a reader cannot act on, is refused.
    said = {"output_type": "stream", "name": "stderr", "text": "UserWarning: 2 spans ...\n"}
    prepared = book.prepare(_notebook(_title(), _code("x", said)), "05-a.ipynb", LINKS, "x")
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

    prepared = book.prepare(notebook, "04-x.ipynb", LINKS, "x", Path("/home/r/ws"))

    warning, printed, shown = prepared.cells[-1].outputs
    assert warning.text == "TimelineWarning: data/t/timeline.json: 2 spans have no 'E'\n"
    assert printed.text == "analysing data/runs\n"
    assert shown.data == {"text/html": "<td>data/x</td>", "text/plain": "y"}


def test_prepare_keeps_a_widgets_picture_not_its_state():
    view = {"model_id": "abc", "version_major": 2, "version_minor": 0}
    widget_only = {
        "output_type": "display_data",
        "data": {book.WIDGET_VIEW: view, "text/plain": "interactive(children=(...))"},
        "metadata": {},
    }
    png = {"image/png": "iVBORw0KGgo="}
    picture = {"output_type": "display_data", "data": png, "metadata": {}}
    notebook = _notebook(_title(), _code("widgets.timeline_explorer(tl)", picture, widget_only))
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {}}

    prepared = book.prepare(notebook, "04-x.ipynb", LINKS, "x")

    assert [list(o.data) for o in prepared.cells[-1].outputs] == [["image/png"]]
    assert "widgets" not in prepared.metadata


def test_prepare_needs_a_title():
    with pytest.raises(book.BookError, match="04-x.ipynb: no title"):
        book.prepare(_notebook(_code("x")), "04-x.ipynb", LINKS, "x")


def test_the_landing_page_links_binder_without_its_badge_and_lists_every_page():
    readme = (REPO / "README.md").read_text()
    names = [p.name for p in book.lessons()]
    page = book.landing_page(readme, LINKS, names)
    assert "badge_logo.svg" in readme and "badge_logo.svg" not in page
    assert f"[Launch the workshop on Binder]({LINKS.binder(names[0])})" in page
    toctree = page[page.index("```{toctree}") :]
    listed = re.findall(r"^(notebooks/\S+|docs/\S+)$", toctree, re.M)
    assert listed == [f"notebooks/{n.removesuffix('.ipynb')}" for n in names] + [
        f"docs/{d.removesuffix('.md')}" for d in book.DOCS
    ]


@pytest.mark.parametrize(
    ("env", "origin", "repository"),
    [
        ({"WORKSHOP_BOOK_REPOSITORY": "a/b", "GITHUB_REPOSITORY": "c/d"}, None, "a/b"),
        ({"GITHUB_REPOSITORY": "c/d"}, None, "c/d"),
        ({}, "https://github.com/e/f.git", "e/f"),
        ({}, "git@github.com:g/h-i.git", "g/h-i"),
        ({}, "/somewhere/else", book.PLACEHOLDER_REPOSITORY),
    ],
)
def test_where_the_links_point(tmp_path, env, origin, repository):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    if origin:
        subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", origin], check=True)
    assert book.repository_links(env, tmp_path).repository == repository


def test_executed_copies_names_the_missing_lessons(tmp_path):
    lessons = book.lessons()
    nbformat.write(_notebook(_title()), tmp_path / lessons[0].name)
    with pytest.raises(book.BookError, match=re.escape(f"no executed copy of {lessons[1].name}")):
        book.executed_copies(tmp_path, lessons)


# --- the book, built and read in a browser -------------------------------------------------

# The lessons whose pages the test reads in full (images, outputs, leaks); every lesson is
# reached through the navigation.
READ_IN_FULL = ("04-horovod-timelines", "06-scaling-experiments", "09-diagnose-a-run")
PAGE_MS = 30_000
BROKEN_IMAGES_JS = """() => Array.from(document.images)
    .filter((img) => !(img.complete && img.naturalWidth > 0)).map((img) => img.src)"""


@pytest.fixture(scope="module")
def built_book(tmp_path_factory):
    """The book built from the learner runs (no replay of its own)."""
    replays = tmp_path_factory.mktemp("book-replays")
    runs = {}
    for path in NOTEBOOKS:
        runs[path.stem] = learner_replay(path, tmp_path_factory)
        nbformat.write(runs[path.stem].for_reader(), replays / path.name)
    out = tmp_path_factory.mktemp("book")
    made = book.build_book(out, replays=replays, progress=lambda _: None)
    return made, runs


def _figures(notebook) -> int:
    """The pictures among a notebook's outputs (cells collapsed or injected left out)."""
    return sum(
        any(kind.startswith("image/") for kind in output.get("data", {}))
        for cell in notebook.cells
        if cell.cell_type == "code" and not book.left_out(cell)
        for output in cell.outputs
    )


def _solution_lines(notebook) -> list[str]:
    """The lines of a lesson's worked solutions that name a solution variable (no other cell
    does)."""
    lines = []
    for cell in notebook.cells:
        if "solution" in cell.metadata.get("tags", []):
            lines += [line.strip() for line in cell.source.splitlines() if "solution_" in line]
    return lines


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
            nav = page.locator("nav.bd-links a.reference.internal")
            hrefs = {nav.nth(i).get_attribute("href") for i in range(nav.count())}
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
                if stem in READ_IN_FULL or stem == "00-welcome":
                    problems += _read_page(page, stem, runs[stem])
                if stem == SCREENSHOT.stem.removeprefix("book-"):
                    page.locator("main .cell_output img").first.scroll_into_view_if_needed()
                    page.screenshot(path=str(SCREENSHOT))
        finally:
            browser.close()
    assert not problems, "\n".join(problems)
    assert SCREENSHOT.stat().st_size > 10_000


def _read_page(page, stem: str, run) -> list[str]:
    problems = []
    broken = page.evaluate(BROKEN_IMAGES_JS)
    if broken:
        problems.append(f"{stem}: broken images: {broken}")
    figures, drawn = page.locator("main .cell_output img").count(), _figures(run.for_reader())
    if figures != drawn:
        problems.append(f"{stem}: {figures} figures, the replay drew {drawn}")
    text = page.locator("main").inner_text()
    markers = ("Traceback", "Error:", "site-packages", "widget-view+json", "interactive(")
    for marker in (*markers, "ipykernel_", f"{REPO}/"):
        if marker in text:
            problems.append(f"{stem}: {marker!r} on the page")
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
    problems += [
        f"{stem}: a solution's line is on the page: {line!r}"
        for line in _solution_lines(run.notebook)
        if line in text
    ]
    # What the page shows besides code (as test_notebooks.py judges a learner's screen: every
    # output and the markdown; code names the variables, not their values).
    # The exercises' prompts are judged as the notebook test judges a prompt (a choice's letter
    # stands beside its option there).
    prompts = page.locator("main .exercise")
    if prompts.count() != len(run.records()):
        problems.append(f"{stem}: {prompts.count()} exercise boxes, {len(run.records())} checks")
    shown = {"prompt": "\n".join(prompts.all_inner_texts())}
    page.add_style_tag(content=".cell_input, .exercise { display: none !important; }")
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


def test_a_staging_folder_not_made_by_the_book_is_not_emptied(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "mine.txt").write_text("keep me")
    with pytest.raises(book.BookError, match="was not staged by workshop book"):
        book.stage({}, src, LINKS)
    assert (src / "mine.txt").read_text() == "keep me"
