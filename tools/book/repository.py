"""The checkout the book is built from (its lessons) and the GitHub repository its links point
to (see :mod:`tools.book` for the order in which the repository is found)."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from workshop.paths import REPO_DIR

BOOK_DIR = REPO_DIR / "book"
NOTEBOOKS_DIR = REPO_DIR / "notebooks"
REPOSITORY_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
GITHUB_REMOTE = re.compile(
    r"(?:https://github\.com/|git@github\.com:)([\w.-]+/[\w.-]+?)(?:\.git)?$"
)


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
