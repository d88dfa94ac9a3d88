"""Step 4 of the book, and the whole build: replay (or take the replays), prepare, stage and
run Sphinx (see :mod:`tools.book`)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tools.book.replay import executed_copies, replay
from tools.book.repository import (
    BOOK_DIR,
    HOW_TO_SET_REPOSITORY,
    BookError,
    Links,
    lessons,
    repository_links,
)
from tools.book.stage import stage


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
    if not links.repository:  # for whoever builds it, never on a page
        print(f"workshop book: {HOW_TO_SET_REPOSITORY}", file=sys.stderr)
    progress(f"staging the book's sources in {out / 'src'} ({where})")
    stage(executed, out / "src", links)
    progress(f"building the site with Sphinx into {out / 'html'}")
    done = sphinx_build(out / "src", out / "html", links)
    if done.returncode != 0:
        raise BookError(f"sphinx-build failed (exit {done.returncode}):\n{done.stderr.strip()}")
    return Book(out / "html", sorted(executed), replay_s, time.perf_counter() - start)
