"""``workshop book``: build the workshop book, the reader's edition of the lessons as a static
website (``bash scripts/book.sh`` runs it).

The build is tooling of the repository's checkout (tools/book/, beside the lessons, docs/ and
book/conf.py it reads), not part of the installed package: this command runs it from the
checkout the package is installed from, and says so when there is none.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

from workshop.paths import REPO_DIR


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``workshop book``."""
    parser = subparsers.add_parser(
        "book",
        help="build the workshop book (the reader's edition of the lessons, a static website)",
        description=(
            "Replay every lesson as CI does (the worked solutions run, no answer given), then "
            "build the reader's edition with Sphinx + MyST-NB and the book theme: a landing "
            "page for learners, the ten lessons with every solution and every result that "
            "gives an answer away in a collapsed block under its exercise, then the reference "
            "and instructor pages. Open OUT/html/index.html."
        ),
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=REPO_DIR / "book" / "_build",
        help="build folder (default book/_build): replays/, src/ and html/ go there",
    )
    parser.add_argument(
        "--replays",
        type=Path,
        help="a folder of already executed lessons (NN-title.ipynb) to take instead of "
        "replaying them",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="lessons replayed at a time (default: 2, or 1 on one core)",
    )
    parser.add_argument(
        "--repository",
        metavar="OWNER/NAME",
        help="the GitHub repository the Binder links and the GitHub button point to (default: "
        "$WORKSHOP_BOOK_REPOSITORY, $GITHUB_REPOSITORY, or the origin remote on GitHub; "
        "with none known the book has no such links)",
    )
    parser.set_defaults(func=_build)


class NoCheckout(Exception):
    """The package is not installed from a clone of the repository: no book tool to run."""


def _from_checkout(module: str) -> ModuleType:
    """``tools.book.<module>`` from the checkout the package is installed from.

    Raises:
        NoCheckout: naming the folder searched and what is missing there.
    """
    missing = [
        part
        for part in ("tools/book/build.py", "book/conf.py", "notebooks")
        if not (REPO_DIR / part).exists()
    ]
    if missing:
        raise NoCheckout(
            f"the book is built from a clone of the repository, and {REPO_DIR} (where the "
            f"workshop package is installed from) has no {', '.join(missing)}: clone the "
            "repository, then run `bash scripts/book.sh` in it"
        )
    if str(REPO_DIR) not in sys.path:
        sys.path.insert(0, str(REPO_DIR))
    found = importlib.import_module(f"tools.book.{module}")
    if not Path(found.__file__).resolve().is_relative_to(REPO_DIR):
        raise NoCheckout(f"tools.book was imported from {found.__file__}, not from {REPO_DIR}")
    return found


def _build(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        print(f"workshop book: --jobs {args.jobs}: at least 1", file=sys.stderr)
        return 2
    try:
        build, repository = _from_checkout("build"), _from_checkout("repository")
    except NoCheckout as error:
        print(f"workshop book: {error}", file=sys.stderr)
        return 1
    try:
        made = build.build_book(
            args.out, replays=args.replays, jobs=args.jobs, repository=args.repository
        )
    except repository.BookError as error:
        print(f"workshop book: {error}", file=sys.stderr)
        return 1
    print(
        f"built {len(made.lessons)} lessons in {made.replay_s + made.build_s:.0f} s "
        f"(replays {made.replay_s:.0f} s, Sphinx {made.build_s:.0f} s): "
        f"open {made.html / 'index.html'}"
    )
    return 0
