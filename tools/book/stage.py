"""Step 3 of the book: the Sphinx source folder (landing page, lessons, docs/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tools.book.prepare import prepare
from tools.book.repository import BookError, Links
from tools.book.tracks import (
    CORE,
    OPTIONAL,
    TRACKS,
    Lesson,
    lesson_table,
    minutes_text,
    track_minutes,
    with_tracks,
)
from workshop.paths import REPO_DIR

DOCS = (
    "install.md",
    "glossary.md",
    "sources.md",
    "instructor-guide.md",
    "clusters.md",
    "run-directory.md",
)
# The measured first setup (size and time the landing page quotes).
SETUP_TIME = "data/benchmarks/setup-time/result.json"

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
REFERENCE = ("docs/install", "docs/glossary", "docs/sources")
INSTRUCTORS = ("docs/instructor-guide", "docs/clusters", "docs/run-directory")


def times_table(table: list[Lesson]) -> str:
    """The Markdown table of the lessons' times and of the tracks (the landing page)."""
    rows = ["| lesson | time to learn |", "| --- | --- |"]
    rows += [f"| {lesson.number} · {lesson.title} | {minutes_text(lesson)} |" for lesson in table]
    rows += ["", "| track | lessons | time to learn |", "| --- | --- | --- |"]
    for track, (numbers, optional) in TRACKS.items():
        rows.append(
            f"| {track} | {', '.join(numbers)} | {track_minutes(table, numbers, optional)} min |"
        )
    return "\n".join(rows)


def landing_page(template: str, links: Links, table: list[Lesson], repo: Path = REPO_DIR) -> str:
    """``book/index.md`` with its lesson list, its Binder line and the navigation filled in."""
    lessons_md = "\n".join(
        f"| [{lesson.number} · {lesson.title}](notebooks/{lesson.name}) | "
        f"{minutes_text(lesson)} | {'core' if lesson.number in CORE else 'optional'} |"
        for lesson in table
    )
    binder = links.binder(table[0].name)
    start = (
        f"[Launch the workshop on Binder]({binder}): JupyterLab in your browser, "
        "nothing to install (it takes a few minutes to start)."
        if binder
        else "The repository's README has a *launch binder* badge: JupyterLab in your browser, "
        "nothing to install (it takes a few minutes to start)."
    )
    setup = json.loads((repo / SETUP_TIME).read_text())
    core = track_minutes(table, CORE, False)
    text = (
        template.replace("{{lessons}}", lessons_md)
        .replace("{{core_lessons}}", ", ".join(CORE))
        .replace("{{core_minutes}}", str(core))
        .replace("{{core_hours}}", f"{core / 60:.1f}")
        .replace("{{optional_lessons}}", ", ".join(OPTIONAL))
        .replace("{{binder}}", start)
        .replace("{{setup_gb}}", f"{setup['virtualenv_installed_gb']:g}")
        .replace("{{setup_minutes}}", f"{setup['seconds'] / 60:.0f}")
        .replace("{{times}}", times_table(table))
    )
    return text + TOCTREE.format(
        lessons="\n".join(f"notebooks/{lesson.name.removesuffix('.ipynb')}" for lesson in table),
        reference="\n".join(REFERENCE),
        instructors="\n".join(INSTRUCTORS),
    )


def install_page(text: str, links: Links) -> str:
    """docs/install.md as the book shows it: its Binder line pointing to the repository when
    it is known (``{{binder}}``), else to the README's badge."""
    binder = links.binder("00-welcome.ipynb")
    line = (
        f"[Launch the workshop on Binder]({binder})"
        if binder
        else "the *launch binder* badge of the repository's README"
    )
    return text.replace("{{binder}}", line)


def stage(executed: dict[str, Path], src: Path, links: Links, repo: Path = REPO_DIR) -> None:
    """Write the Sphinx source folder ``src`` (emptied first; it lives under the build
    folder) from the executed lessons, ``book/index.md``, docs/ and
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
    table = lesson_table([repo / "notebooks" / name for name in names])
    for doc in DOCS:
        text = (repo / "docs" / doc).read_text()
        if doc == "install.md":
            text = install_page(text, links)
        elif doc == "instructor-guide.md":
            text = with_tracks(text, table)  # the tracks as the lessons state them now
        (src / "docs" / doc).write_text(text)
    template = (repo / "book" / "index.md").read_text()
    (src / "index.md").write_text(landing_page(template, links, table, repo))
