"""The workshop book: the reader's edition of the lessons, as a static website.

``bash scripts/book.sh`` (``workshop book``) does four things:

1. **Replay** every lesson with papermill as CI runs it: ``LIVE = False``, ``SOLUTIONS = True``
   (the worked solutions run, so every finding a lesson reveals after its exercises is
   there), no learner answer given, from the notebooks folder, with explorers drawing their
   static picture (``WORKSHOP_STATIC_WIDGETS=1``). ``--replays DIR`` takes already executed
   notebooks instead (the tests pass theirs).
2. **Prepare** each executed notebook for reading. What a learner sees only after answering
   goes into a collapsed block under its exercise: a worked solution ("Worked solution of
   exercise 05.1"), a cell that prints through ``exercises.reveal`` and a note collapsed in
   the notebook ("Show after you have answered"). What exists for the tests is left out:
   papermill's injected parameters, cells tagged ``test-only`` or holding nothing but a
   ``results.save(...)`` call, and the ``SOLUTIONS`` and ``RESULTS_PATH`` lines of the
   parameters cell; so are a widget's state (its static picture stays) and libraries' log
   noise (TensorFlow's and absl's start-up lines). Paths inside the clone are shown
   relative to it, a warning without the kernel's file name; each exercise's prompt goes in a
   box (class ``exercise``); each figure gets a caption and an alt text (the cell's
   ``caption`` metadata, else the sentence that introduces it); a line with "launch on
   Binder" and "download the notebook" goes under the title. An error output, a warning that
   names a package path, a ``None`` shown as a result, or a line "answer exercise ... above to
   see this line" (a replay without the solutions) stops the build and names the lesson and
   the cell.
3. **Stage** a Sphinx source folder: the landing page for learners (``book/index.md``, with
   the table of lessons and their times read from the lessons' own headers), the ten lessons
   in order, the README as "Install and develop", then docs/ (glossary, sources, instructor
   guide, clusters, run-directory contract); the committed notebooks (no outputs) are the
   download links' targets.
4. **Build** it with Sphinx + MyST-NB and the book theme into ``book/_build/html``.

The repository the Binder links and the GitHub button point to is ``--repository OWNER/NAME``,
else ``$WORKSHOP_BOOK_REPOSITORY``, else ``$GITHUB_REPOSITORY`` (set in GitHub Actions), else
the ``origin`` remote when it is on GitHub. When none is known the book has no Binder link and
no GitHub button, and says how to set it: it never links to a placeholder.
"""

from __future__ import annotations

import ast
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workshop.paths import REPO_DIR

BOOK_DIR = REPO_DIR / "book"
NOTEBOOKS_DIR = REPO_DIR / "notebooks"
DOCS = (
    "glossary.md",
    "sources.md",
    "instructor-guide.md",
    "clusters.md",
    "run-directory.md",
)
# The README, staged as the book's "Install and develop" page.
INSTALL_PAGE = "install-and-develop"
REPOSITORY_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
BINDER_BADGE = re.compile(r"\[!\[Binder\]\([^)]*\)\]\([^)]*\)\n?(\([^)]*OWNER/REPO[^)]*\)\n)?")
# The parameters only the tests and CI set: not on a reader's page.
TEST_PARAMETERS = ("SOLUTIONS", "RESULTS_PATH")
# A cell that exists for the tests only (the results file they read).
TEST_ONLY = "test-only"
# What exercises.reveal prints when the exercise was not answered: a reader's edition built
# without the solutions.
PLACEHOLDER_LINE = re.compile(r"answer exercises? [\d. and]+ above to see this line")
REVEAL_CALL = re.compile(r"exercises\.reveal\(\s*(\[[^\]]*\]|\"[^\"]*\")")
SOLUTION_CALL = re.compile(r"exercises\.(?:check_solution|solution_hidden)\(\s*\"([\d.]+)\"")
EXERCISE_ID = re.compile(r"\d\d\.\d+")
# Libraries' start-up lines that say nothing to a reader of a lesson (TensorFlow's and absl's),
# on stderr or in a run's log that a lesson prints (there behind a rank prefix "[1]<stderr>:").
LOG_NOISE = re.compile(
    r"^.*(?:Could not find cuda drivers|WARNING:tensorflow:|oneDNN custom operations"
    r"|TF_ENABLE_ONEDNN_OPTS|This TensorFlow binary is optimized"
    r"|rebuild TensorFlow with the appropriate compiler flags"
    r"|All log messages before absl::InitializeLog).*\n?"
    r"|^(?:\[\d+\]<std\w+>:)?[IWE]\d{4} [\d:.]+ +\d+ \w+\.cc:\d+\].*\n?",
    re.M,
)
TIME_TO_LEARN = re.compile(r"\*\*Time to learn\*\*: (\d+) minutes")
GITHUB_REMOTE = re.compile(
    r"(?:https://github\.com/|git@github\.com:)([\w.-]+/[\w.-]+?)(?:\.git)?$"
)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# A warning printed with the file that raised it: a path into an installed package, which a
# reader cannot act on (lessons explain their warnings in words, once).
PACKAGE_PATH = re.compile(r"(site-packages|dist-packages|/workshop/)[^\s:]*\.py:\d+")


# Python's warning format in a kernel: "<cell file>:<line>: Category: message" then the cell's
# source line; the book keeps "Category: message" (the cell is on the page right above).
KERNEL_WARNING = re.compile(r"^\S*ipykernel_\d+/\d+\.py:\d+: (\w+: [^\n]*)\n(?:  [^\n]*\n)?", re.M)


# The mark of a staging folder this module made (and may empty again).
STAGED = ".workshop-book"


class BookError(Exception):
    """A lesson cannot go into the book as it is: names the lesson, the cell and why."""


@dataclass(frozen=True)
class Links:
    """Where a lesson page's "launch on Binder" link and the GitHub button point (nowhere
    when ``repository`` is None: no such link on any page)."""

    repository: str | None  # OWNER/NAME on GitHub, None when not known
    branch: str  # what Binder builds ("HEAD": the default branch)

    @property
    def repository_url(self) -> str:
        """The repository on GitHub, "" when not known."""
        return f"https://github.com/{self.repository}" if self.repository else ""

    def binder(self, notebook: str) -> str | None:
        """mybinder.org, JupyterLab opened at ``notebooks/<notebook>`` (None: not known)."""
        if not self.repository:
            return None
        return (
            f"https://mybinder.org/v2/gh/{self.repository}/{self.branch}"
            f"?labpath=notebooks%2F{notebook}"
        )


HOW_TO_SET_REPOSITORY = (
    "This copy of the book was built without knowing where the repository is published, so it "
    "has no Binder link: build it with `workshop book --repository OWNER/NAME` (or "
    "`WORKSHOP_BOOK_REPOSITORY=OWNER/NAME bash scripts/book.sh`)."
)


def repository_links(
    env: dict[str, str] | None = None, repo: Path = REPO_DIR, repository: str | None = None
) -> Links:
    """The :class:`Links` of this build (see the module's docstring for the order).

    Raises:
        BookError: ``repository`` (or an environment variable) is not ``OWNER/NAME``.
    """
    env = dict(os.environ if env is None else env)
    branch = env.get("WORKSHOP_BOOK_BRANCH", "HEAD")
    given = [("--repository", repository)] + [
        (f"${name}", env.get(name)) for name in ("WORKSHOP_BOOK_REPOSITORY", "GITHUB_REPOSITORY")
    ]
    for where, value in given:
        if value:
            if not REPOSITORY_NAME.match(value) or value.upper() == "OWNER/REPO":
                raise BookError(
                    f"{where} {value!r}: not a GitHub repository OWNER/NAME "
                    "(letters, digits, _ . - on each side of one /)"
                )
            return Links(value, branch)
    try:
        origin = subprocess.run(
            ["git", "-C", str(repo), "remote", "get-url", "origin"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except OSError:
        origin = ""
    found = GITHUB_REMOTE.match(origin)
    return Links(found[1] if found else None, branch)


def lessons(notebooks_dir: Path = NOTEBOOKS_DIR) -> list[Path]:
    """The lessons in order: ``NN-title.ipynb``."""
    found = sorted(notebooks_dir.glob("[0-9][0-9]-*.ipynb"))
    if not found:
        raise BookError(f"no lessons (NN-title.ipynb) in {notebooks_dir}")
    return found


# --- 1. replay ----------------------------------------------------------------------------


def replay(
    notebooks: list[Path],
    into: Path,
    *,
    jobs: int = 2,
    progress: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Execute each notebook as CI runs it (``SOLUTIONS = True``, no answer given) into
    ``into``.

    Returns:
        notebook name -> the executed copy.
    """
    from workshop.notebook_check import execute

    into.mkdir(parents=True, exist_ok=True)
    done: dict[str, Path] = {}

    def one(path: Path) -> Path:
        output = into / path.name
        run = execute(path, output, {"SOLUTIONS": True}, cwd=path.parent)
        progress(f"  replayed {path.name} in {run.seconds:.1f} s")
        return output

    progress(f"replaying {len(notebooks)} lessons ({jobs} at a time) into {into}")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(one, path): path for path in notebooks}
        for future in concurrent.futures.as_completed(futures):
            path = futures[future]
            try:
                done[path.name] = future.result()
            except Exception as error:  # papermill names the cell; add the notebook
                raise BookError(f"{path}: the replay failed: {error}") from error
    return done


def executed_copies(folder: Path, notebooks: list[Path]) -> dict[str, Path]:
    """The executed notebooks already in ``folder`` (``--replays``), one per lesson.

    Raises:
        BookError: naming the lessons that have no executed copy there.
    """
    missing = [p.name for p in notebooks if not (folder / p.name).is_file()]
    if missing:
        raise BookError(f"{folder}: no executed copy of {', '.join(missing)}")
    return {p.name: folder / p.name for p in notebooks}


# --- 2. prepare ---------------------------------------------------------------------------


def _tags(cell) -> list[str]:
    return cell.metadata.get("tags", [])


def left_out(cell) -> bool:
    """Whether the book leaves ``cell`` out: papermill's injected parameters, a cell tagged
    ``test-only``, and a code cell that only saves the results file the tests read."""
    tags = _tags(cell)
    return "injected-parameters" in tags or TEST_ONLY in tags or _only_saves_results(cell)


def _only_saves_results(cell) -> bool:
    """A code cell whose one statement is ``results.save(...)`` (or ``x = results.save(...)``)."""
    if cell.cell_type != "code":
        return False
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        return False
    if len(body) != 1 or not isinstance(body[0], (ast.Assign, ast.Expr)):
        return False
    call = body[0].value
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "save"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "results"
    )


def _collapsed(cell) -> bool:
    return cell.metadata.get("jupyter", {}).get("source_hidden") is True


def _without_test_parameters(source: str) -> str:
    """The parameters cell without the lines that set what only the tests and CI set."""
    names = "|".join(TEST_PARAMETERS)
    return re.sub(rf"^(?:{names}) *=[^\n]*\n?", "", source, flags=re.M).rstrip("\n")


def _solution_body(source: str) -> str:
    """A worked solution as a reader reads it: the body of ``if SOLUTIONS:``, without the
    ``else:`` branch that says how to see it."""
    lines = source.splitlines()
    if not lines or lines[0].strip() != "if SOLUTIONS:":
        return source
    body = []
    for line in lines[1:]:
        if line.startswith("else:"):
            break
        body.append(line[4:] if line.startswith("    ") else line)
    return "\n".join(body).strip("\n")


def _hide(cell, mode: str, label: str) -> None:
    """Collapse ``cell`` (MyST-NB's ``hide-cell``/``hide-output``) behind ``label``."""
    cell.metadata["tags"] = [*_tags(cell), mode]
    options = cell.metadata.setdefault("mystnb", {})
    options["code_prompt_show"] = label
    options["code_prompt_hide"] = "Hide"


def _exercises_of(match: str) -> str:
    found = EXERCISE_ID.findall(match)
    return ", ".join(found[:-1]) + f" and {found[-1]}" if len(found) > 1 else found[0]


def _details(markdown: str, label: str) -> str:
    """Markdown behind an HTML ``details`` block (MyST passes the tags through and renders
    the markdown between them)."""
    return f'<details class="reveal">\n<summary>{label}</summary>\n\n{markdown}\n\n</details>'


def _figure_text(cell, introduction: str) -> str:
    """A figure's caption: the cell's ``caption`` metadata, else the first sentence of the
    markdown that introduces it."""
    given = cell.metadata.get("caption")
    if given:
        return given
    prose = re.sub(r"^#.*$", "", introduction, flags=re.M)  # headings are no sentence
    prose = re.sub(r"\[([^\]]*)\]\([^)\s]*\)", r"\1", prose)  # a link reads as its text
    plain = re.sub(r"[`*#>\[\]]", "", prose)
    plain = " ".join(plain.split())
    sentence = re.split(r"(?<=[.!?])\s", plain, maxsplit=1)[0].rstrip(":")
    return sentence[:200] or "A figure drawn from the recorded data"


def _output_problem(output) -> str | None:
    kind = output.get("output_type")
    if kind == "error":
        return f"an error: {output.get('ename')}: {output.get('evalue')}"
    if kind == "stream" and output.get("name") == "stderr":
        found = PACKAGE_PATH.search(output.get("text", ""))
        if found:
            return f"a message on stderr naming {found[0]!r}"
    if kind == "execute_result" and output.get("data", {}).get("text/plain") == "None":
        return "None shown as a result"
    if kind == "stream":
        placeholder = PLACEHOLDER_LINE.search(output.get("text", ""))
        if placeholder or "worked solution not run" in output.get("text", ""):
            return (
                f"{(placeholder[0] if placeholder else 'worked solution not run')!r}: "
                "replay the lesson with SOLUTIONS = True"
            )
    return None


def _for_reader(text: str, repo: Path) -> str:
    """Text as a reader of the website needs it: paths inside the clone relative to it
    (``data/runs``, not the build machine's ``/home/.../data/runs``), a warning without the
    kernel's temporary file name."""
    return KERNEL_WARNING.sub(r"\1\n", text.replace(f"{repo}/", ""))


def _readable(output, repo: Path):
    if "text" in output:
        output["text"] = LOG_NOISE.sub("", _for_reader(output["text"], repo))
    for kind, value in output.get("data", {}).items():
        if kind.startswith("text/") and isinstance(value, str):
            output["data"][kind] = _for_reader(value, repo)
    return output


def _without_widget_state(output):
    """A display output without its widget view (the explorer's static picture is its own
    output): None when nothing else is left but the widget's text stand-in."""
    data = output.get("data")
    if output.get("output_type") not in ("display_data", "execute_result") or WIDGET_VIEW not in (
        data or {}
    ):
        return output
    rest = {k: v for k, v in data.items() if k not in (WIDGET_VIEW, "text/plain")}
    if not rest:
        return None
    output["data"] = rest
    return output


def prepare(executed, name: str, links: Links, download: str, repo: Path = REPO_DIR):
    """The executed notebook ``name`` as the book shows it (see the module's docstring).

    Args:
        executed: the nbformat notebook, executed with ``SOLUTIONS = True``.
        name: the lesson's file name, for error messages and the Binder link.
        links: where the Binder link points.
        download: the download link's target, relative to the lesson's page.
        repo: the clone the replay ran in (paths under it are shown relative to it).

    Raises:
        BookError: an output a reader must not see, naming the lesson and the cell.
    """
    import nbformat

    cells, problems = [], []
    introduction = ""
    for index, cell in enumerate(executed.cells):
        tags = _tags(cell)
        if left_out(cell):
            continue
        if cell.cell_type == "markdown":
            if "exercise" in tags:
                # The prompt in a box of its own (four backticks: a prompt may hold a fence).
                cell.source = (
                    f"````{{admonition}} Your turn\n:class: tip exercise\n\n{cell.source}\n````"
                )
            elif _collapsed(cell):
                cell.source = _details(cell.source, "Show after you have answered")
            else:
                introduction = cell.source
        if cell.cell_type == "code":
            if "parameters" in tags:
                cell.source = _without_test_parameters(cell.source)
            outputs = []
            for output in cell.get("outputs", []):
                problem = _output_problem(output)
                if problem:
                    problems.append(f"{name} cell {index}: {problem}")
                kept = _without_widget_state(_readable(output, repo))
                if kept is not None and not (
                    kept.get("output_type") == "stream" and not kept.text
                ):
                    outputs.append(kept)
            cell.outputs = outputs
            solution = SOLUTION_CALL.search(cell.source)
            revealed = REVEAL_CALL.search(cell.source)
            if "solution" in tags:
                cell.source = _solution_body(cell.source)
                which = _exercises_of(solution[0]) if solution else ""
                _hide(cell, "hide-cell", f"Worked solution of exercise {which}".strip())
            elif revealed and outputs:
                label = f"Show after you have answered {_exercises_of(revealed[1])}"
                _hide(cell, "hide-output", label)
            elif _collapsed(cell):
                _hide(cell, "hide-cell", "Show after you have answered")
            if any(k.startswith("image/") for o in outputs for k in o.get("data", {})):
                text = _figure_text(cell, introduction)
                options = cell.metadata.setdefault("mystnb", {})
                options["image"] = {"alt": text}
                options["figure"] = {"caption": text}
        cells.append(cell)
    if problems:
        raise BookError("\n".join(problems))
    headings = [c.cell_type == "markdown" and c.source.startswith("# ") for c in cells]
    title = headings.index(True) if True in headings else None
    if title is None:
        raise BookError(f"{name}: no title (a markdown cell starting with '# ')")
    binder = links.binder(name)
    launch = (
        f"[Launch this lesson on Binder]({binder}) (live, nothing to install) · " if binder else ""
    )
    line = (
        f"{launch}{{download}}`Download the notebook <{download}>` (to run it yourself). "
        "Answer each exercise first: the worked solutions, and the results that would give an "
        "answer away, sit in collapsed blocks under it."
    )
    cells.insert(title + 1, nbformat.v4.new_markdown_cell(line))
    executed.cells = cells
    for cell in executed.cells:  # collapsing is the blocks' job now
        cell.metadata.pop("jupyter", None)
    executed.metadata.pop("widgets", None)
    executed.metadata.pop("papermill", None)
    return executed


# --- 3. stage -----------------------------------------------------------------------------

TOCTREE = """

```{{toctree}}
:hidden:
:caption: Lessons
:maxdepth: 1

{lessons}
```

```{{toctree}}
:hidden:
:caption: Reference
:maxdepth: 1

{reference}
```

```{{toctree}}
:hidden:
:caption: For instructors
:maxdepth: 1

{instructors}
```
"""
REFERENCE = (INSTALL_PAGE, "docs/glossary", "docs/sources")
INSTRUCTORS = ("docs/instructor-guide", "docs/clusters", "docs/run-directory")
# The tracks of the instructor guide: which lessons each teaches (the capstone in all).
TRACKS = {
    "3-hour": ("00", "04", "08", "09"),
    "half-day (4 hours)": ("00", "04", "07", "08", "09"),
    "full (two half-days)": ("00", "01", "02", "03", "04", "05", "06", "07", "08", "09"),
}


@dataclass(frozen=True)
class Lesson:
    """A lesson as the landing page and the guide list it."""

    name: str  # NN-title.ipynb
    title: str  # its H1, without "NN · "
    minutes: int  # its header's "Time to learn"


def lesson_table(notebooks: list[Path]) -> list[Lesson]:
    """Each lesson's title and time to learn, read from the lesson itself (its H1 and its
    "**Time to learn**: N minutes"), so that the landing page, the guide and the lessons
    cannot disagree.

    Raises:
        BookError: a lesson without a title or a time to learn.
    """
    import nbformat

    found = []
    for path in notebooks:
        text = "\n".join(
            c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"
        )
        title = re.search(r"^# (?:\d\d · )?(.+)$", text, re.M)
        minutes = TIME_TO_LEARN.search(text)
        if not title or not minutes:
            raise BookError(f"{path.name}: no title (# ...) or no '**Time to learn**: N minutes'")
        found.append(Lesson(path.name, title[1].strip(), int(minutes[1])))
    return found


def times_table(table: list[Lesson]) -> str:
    """The Markdown table of the lessons' times and of the tracks (landing page and guide)."""
    rows = ["| lesson | time to learn |", "| --- | --- |"]
    rows += [f"| {lesson.name[:2]} · {lesson.title} | {lesson.minutes} min |" for lesson in table]
    rows.append(f"| all ten | {sum(lesson.minutes for lesson in table)} min |")
    by_number = {lesson.name[:2]: lesson.minutes for lesson in table}
    rows += ["", "| track | lessons | time to learn |", "| --- | --- | --- |"]
    for track, numbers in TRACKS.items():
        total = sum(by_number[n] for n in numbers)
        rows.append(f"| {track} | {', '.join(numbers)} | {total} min |")
    return "\n".join(rows)


def landing_page(template: str, links: Links, table: list[Lesson]) -> str:
    """``book/index.md`` with its lesson list, its Binder line and the navigation filled in."""
    lessons_md = "\n".join(
        f"| [{lesson.name[:2]} · {lesson.title}](notebooks/{lesson.name}) | {lesson.minutes} min |"
        for lesson in table
    )
    binder = links.binder(table[0].name)
    start = (
        f"[Launch the workshop on Binder]({binder}): JupyterLab in your browser, "
        "nothing to install (it takes a few minutes to start)."
        if binder
        else HOW_TO_SET_REPOSITORY
    )
    text = (
        template.replace("{{lessons}}", lessons_md)
        .replace("{{total_minutes}}", str(sum(lesson.minutes for lesson in table)))
        .replace("{{total_hours}}", f"{sum(lesson.minutes for lesson in table) / 60:.0f}")
        .replace("{{binder}}", start)
        .replace("{{times}}", times_table(table))
    )
    return text + TOCTREE.format(
        lessons="\n".join(f"notebooks/{lesson.name.removesuffix('.ipynb')}" for lesson in table),
        reference="\n".join(REFERENCE),
        instructors="\n".join(INSTRUCTORS),
    )


def install_page(readme: str, links: Links) -> str:
    """The README as the book's "Install and develop" page: its own title, and its Binder badge
    (an image from mybinder.org that an offline reader cannot load, pointing to a placeholder)
    a plain link when the repository is known, else left out."""
    body = readme.split("\n", 1)[1] if readme.startswith("# ") else readme
    binder = links.binder("00-welcome.ipynb")
    badge = f"[Launch the workshop on Binder]({binder})\n" if binder else ""
    body = BINDER_BADGE.sub(lambda _: badge, body, count=1)
    return (
        "# Install and develop\n\nThe repository's README: setting the workshop up on your own "
        "machine, the command line, the tests and a map of the code.\n" + body
    )


def stage(executed: dict[str, Path], src: Path, links: Links, repo: Path = REPO_DIR) -> None:
    """Write the Sphinx source folder ``src`` (emptied first; it lives under the build
    folder) from the executed lessons, ``book/index.md``, the README, docs/ and
    ``book/conf.py``."""
    import nbformat

    if src.exists():
        if not (src / STAGED).exists():
            raise BookError(
                f"{src} exists and was not staged by workshop book (no {STAGED} in it): "
                "nothing removed; choose another --out"
            )
        shutil.rmtree(src)
    (src / "notebooks").mkdir(parents=True)
    (src / STAGED).write_text("staged by workshop book: emptied by the next build\n")
    (src / "docs").mkdir()
    (src / "_downloads").mkdir()
    shutil.copy(repo / "book" / "conf.py", src / "conf.py")
    shutil.copytree(repo / "book" / "_static", src / "_static")
    names = sorted(executed)
    for name in names:
        try:
            notebook = nbformat.read(executed[name], as_version=4)
        except Exception as error:
            raise BookError(f"{executed[name]}: not a readable notebook: {error}") from error
        shutil.copy(repo / "notebooks" / name, src / "_downloads" / name)
        prepared = prepare(notebook, name, links, f"../_downloads/{name}", repo)
        nbformat.write(prepared, src / "notebooks" / name)
    for doc in DOCS:
        shutil.copy(repo / "docs" / doc, src / "docs" / doc)
    readme = (repo / "README.md").read_text()
    (src / f"{INSTALL_PAGE}.md").write_text(install_page(readme, links))
    table = lesson_table([repo / "notebooks" / name for name in names])
    template = (repo / "book" / "index.md").read_text()
    (src / "index.md").write_text(landing_page(template, links, table))


# --- 4. build -----------------------------------------------------------------------------


def sphinx_build(src: Path, html: Path, links: Links) -> subprocess.CompletedProcess:
    """Run ``sphinx-build`` (HTML, warnings are errors: a broken link or a missing lesson stops
    the build)."""
    env = {
        **os.environ,
        "WORKSHOP_BOOK_REPOSITORY_URL": links.repository_url,
        "WORKSHOP_BOOK_BRANCH": links.branch,
    }
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q"]
    return subprocess.run(
        [*command, str(src), str(html)], env=env, capture_output=True, text=True, check=False
    )


@dataclass
class Book:
    """What :func:`build_book` made."""

    html: Path  # the site: open html/index.html
    lessons: list[str]
    replay_s: float
    build_s: float


def build_book(
    out: Path = BOOK_DIR / "_build",
    *,
    replays: Path | None = None,
    jobs: int = 2,
    repository: str | None = None,
    progress: Callable[[str], None] = print,
) -> Book:
    """Replay (or take ``replays``), prepare, stage and build: ``out/html``; the Binder links
    and the GitHub button point to ``repository`` (OWNER/NAME) or what the environment names
    (:func:`repository_links`).

    Raises:
        BookError: a lesson that cannot go into the book, or a failed Sphinx build (its
            messages included).
    """
    notebooks = lessons()
    links = repository_links(repository=repository)
    start = time.perf_counter()
    if replays is None:
        executed = replay(notebooks, out / "replays", jobs=jobs, progress=progress)
    else:
        executed = executed_copies(replays, notebooks)
        progress(f"taking the executed lessons from {replays}")
    replay_s = time.perf_counter() - start
    start = time.perf_counter()
    where = links.repository_url or "no repository known: no Binder link"
    progress(f"staging the book's sources in {out / 'src'} ({where})")
    stage(executed, out / "src", links)
    progress(f"building the site with Sphinx into {out / 'html'}")
    done = sphinx_build(out / "src", out / "html", links)
    if done.returncode != 0:
        raise BookError(f"sphinx-build failed (exit {done.returncode}):\n{done.stderr.strip()}")
    return Book(out / "html", sorted(executed), replay_s, time.perf_counter() - start)
