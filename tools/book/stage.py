"""Step 3 of the book: the Sphinx source folder (landing page, lessons, README, docs/)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from tools.book.prepare import prepare
from tools.book.repository import HOW_TO_SET_REPOSITORY, BookError, Links
from workshop.paths import REPO_DIR

DOCS = (
    "glossary.md",
    "sources.md",
    "instructor-guide.md",
    "clusters.md",
    "run-directory.md",
)
# The README, staged as the book's "Install and develop" page.
INSTALL_PAGE = "install-and-develop"
BINDER_BADGE = re.compile(r"\[!\[Binder\]\([^)]*\)\]\([^)]*\)\n?(\([^)]*OWNER/REPO[^)]*\)\n)?")
TIME_TO_LEARN = re.compile(r"\*\*Time to learn\*\*: (\d+) minutes")

# The mark of a staging folder this module made (and may empty again).
STAGED = ".workshop-book"


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
