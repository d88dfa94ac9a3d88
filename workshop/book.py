"""The workshop book: the lessons as a learner first meets them, as a static website.

``bash scripts/book.sh`` (``workshop book``) does four things:

1. **Replay** every lesson with papermill and its default parameters (``LIVE = False``,
   ``SOLUTIONS = False``, no answers given), from the notebooks folder as a learner runs it,
   with explorers drawing their static picture (``WORKSHOP_STATIC_WIDGETS=1``). ``--replays
   DIR`` takes already executed notebooks instead (the tests pass theirs).
2. **Prepare** each executed notebook for reading: cells collapsed in the notebook (the worked
   solutions, and the explanations a learner opens after answering) are left out, as are
   papermill's injected-parameters cell and a widget's state (its static picture stays); paths
   inside the clone are shown relative to it, and a warning without the kernel's file name; each
   exercise's prompt goes in a box (class ``exercise``), and a line with "launch on Binder"
   and "download the notebook" goes under the title. An error
   output, a warning that names a package path, or a ``None`` shown as a result stops the build
   and names the lesson and the cell: the book never shows what a learner would take for a
   failure.
3. **Stage** a Sphinx source folder: the README as the landing page, the ten lessons in order,
   then docs/ (instructor guide, clusters, run-directory contract); the committed notebooks
   (no outputs) are the download links' targets.
4. **Build** it with Sphinx + MyST-NB and the book theme into ``book/_build/html``.

The repository the Binder and download links point to is ``$WORKSHOP_BOOK_REPOSITORY`` (as
``OWNER/REPO``), else ``$GITHUB_REPOSITORY`` (set in GitHub Actions), else the ``origin``
remote when it is on GitHub, else the README's placeholder ``OWNER/REPO``.
"""

from __future__ import annotations

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
DOCS = ("instructor-guide.md", "clusters.md", "run-directory.md")
PLACEHOLDER_REPOSITORY = "OWNER/REPO"
BINDER_BADGE = re.compile(r"\[!\[Binder\]\([^)]*\)\]\([^)]*\)")
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
    """Where a lesson page's "launch on Binder" and "download" links point."""

    repository: str  # OWNER/REPO on GitHub
    branch: str  # what Binder builds ("HEAD": the default branch)

    @property
    def repository_url(self) -> str:
        return f"https://github.com/{self.repository}"

    def binder(self, notebook: str) -> str:
        """mybinder.org, JupyterLab opened at ``notebooks/<notebook>``."""
        return (
            f"https://mybinder.org/v2/gh/{self.repository}/{self.branch}"
            f"?labpath=notebooks%2F{notebook}"
        )


def repository_links(env: dict[str, str] | None = None, repo: Path = REPO_DIR) -> Links:
    """The :class:`Links` of this build (see the module's docstring for the order)."""
    env = dict(os.environ if env is None else env)
    branch = env.get("WORKSHOP_BOOK_BRANCH", "HEAD")
    for name in ("WORKSHOP_BOOK_REPOSITORY", "GITHUB_REPOSITORY"):
        if env.get(name):
            return Links(env[name], branch)
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
    return Links(found[1] if found else PLACEHOLDER_REPOSITORY, branch)


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
    """Execute each notebook as a learner first runs it (default parameters) into ``into``.

    Returns:
        notebook name -> the executed copy.
    """
    from workshop.notebook_check import execute

    into.mkdir(parents=True, exist_ok=True)
    done: dict[str, Path] = {}

    def one(path: Path) -> Path:
        output = into / path.name
        run = execute(path, output, {}, cwd=path.parent)
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
    """Whether the book leaves ``cell`` out: papermill's injected parameters, and every cell
    collapsed in the notebook (a worked solution, a note opened after answering)."""
    collapsed = cell.metadata.get("jupyter", {}).get("source_hidden") is True
    return collapsed or "injected-parameters" in _tags(cell)


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
    return None


def _for_reader(text: str, repo: Path) -> str:
    """Text as a reader of the website needs it: paths inside the clone relative to it
    (``data/runs``, not the build machine's ``/home/.../data/runs``), a warning without the
    kernel's temporary file name."""
    return KERNEL_WARNING.sub(r"\1\n", text.replace(f"{repo}/", ""))


def _readable(output, repo: Path):
    if "text" in output:
        output["text"] = _for_reader(output["text"], repo)
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
        executed: the nbformat notebook, executed with the lesson's default parameters.
        name: the lesson's file name, for error messages and the Binder link.
        links: where the Binder link points.
        download: the download link's target, relative to the lesson's page.
        repo: the clone the replay ran in (paths under it are shown relative to it).

    Raises:
        BookError: an output a reader must not see, naming the lesson and the cell.
    """
    import nbformat

    cells, problems = [], []
    for index, cell in enumerate(executed.cells):
        tags = _tags(cell)
        if left_out(cell):
            continue
        if "exercise" in tags and cell.cell_type == "markdown":
            # The prompt in a box of its own (four backticks: a prompt may hold a code fence).
            cell.source = (
                f"````{{admonition}} Your turn\n:class: tip exercise\n\n{cell.source}\n````"
            )
        if cell.cell_type == "code":
            outputs = []
            for output in cell.get("outputs", []):
                problem = _output_problem(output)
                if problem:
                    problems.append(f"{name} cell {index}: {problem}")
                kept = _without_widget_state(_readable(output, repo))
                if kept is not None:
                    outputs.append(kept)
            cell.outputs = outputs
        cells.append(cell)
    if problems:
        raise BookError("\n".join(problems))
    headings = [c.cell_type == "markdown" and c.source.startswith("# ") for c in cells]
    title = headings.index(True) if True in headings else None
    if title is None:
        raise BookError(f"{name}: no title (a markdown cell starting with '# ')")
    line = (
        f"[Launch this lesson on Binder]({links.binder(name)}) (live, nothing to install) · "
        f"{{download}}`Download the notebook <{download}>` (to run it yourself). The worked "
        "solutions, and the notes a learner opens after answering, are collapsed in the "
        "notebook and left out here: the exercises are yours to answer first."
    )
    cells.insert(title + 1, nbformat.v4.new_markdown_cell(line))
    executed.cells = cells
    for cell in executed.cells:  # the book shows every cell as it is, none collapsed
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
:caption: For instructors
:maxdepth: 1

{docs}
```
"""


def landing_page(readme: str, links: Links, lesson_names: list[str]) -> str:
    """The README as the book's first page: its Binder badge (an image from mybinder.org that
    an offline reader cannot load) becomes a link, and the navigation follows it."""
    link = f"[Launch the workshop on Binder]({links.binder(lesson_names[0])})"
    text = BINDER_BADGE.sub(link, readme, count=1)
    return text + TOCTREE.format(
        lessons="\n".join(f"notebooks/{n.removesuffix('.ipynb')}" for n in lesson_names),
        docs="\n".join(f"docs/{d.removesuffix('.md')}" for d in DOCS),
    )


def stage(executed: dict[str, Path], src: Path, links: Links, repo: Path = REPO_DIR) -> None:
    """Write the Sphinx source folder ``src`` (emptied first; it lives under the build
    folder) from the executed lessons, the README, docs/ and ``book/conf.py``."""
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
    (src / "index.md").write_text(landing_page(readme, links, names))


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
    progress: Callable[[str], None] = print,
) -> Book:
    """Replay (or take ``replays``), prepare, stage and build: ``out/html``.

    Raises:
        BookError: a lesson that cannot go into the book, or a failed Sphinx build (its
            messages included).
    """
    notebooks = lessons()
    links = repository_links()
    start = time.perf_counter()
    if replays is None:
        executed = replay(notebooks, out / "replays", jobs=jobs, progress=progress)
    else:
        executed = executed_copies(replays, notebooks)
        progress(f"taking the executed lessons from {replays}")
    replay_s = time.perf_counter() - start
    start = time.perf_counter()
    progress(f"staging the book's sources in {out / 'src'} (links to {links.repository_url})")
    stage(executed, out / "src", links)
    progress(f"building the site with Sphinx into {out / 'html'}")
    done = sphinx_build(out / "src", out / "html", links)
    if done.returncode != 0:
        raise BookError(f"sphinx-build failed (exit {done.returncode}):\n{done.stderr.strip()}")
    return Book(out / "html", sorted(executed), replay_s, time.perf_counter() - start)
