"""``workshop book``: build the workshop book, a static website of the lessons as a learner
first meets them (``bash scripts/book.sh`` runs it; see workshop/book.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from workshop import book


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``workshop book``."""
    parser = subparsers.add_parser(
        "book",
        help="build the workshop book (the lessons replayed, as a static website)",
        description=(
            "Replay every lesson with its default parameters (no answers, no solutions), "
            "then build a static website with Sphinx + MyST-NB and the book theme: the README "
            "as the landing page, the ten lessons, then docs/. Open OUT/html/index.html."
        ),
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=book.BOOK_DIR / "_build",
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
    parser.set_defaults(func=_build)


def _build(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        print(f"workshop book: --jobs {args.jobs}: at least 1", file=sys.stderr)
        return 2
    try:
        made = book.build_book(args.out, replays=args.replays, jobs=args.jobs)
    except book.BookError as error:
        print(f"workshop book: {error}", file=sys.stderr)
        return 1
    print(
        f"built {len(made.lessons)} lessons in {made.replay_s + made.build_s:.0f} s "
        f"(replays {made.replay_s:.0f} s, Sphinx {made.build_s:.0f} s): "
        f"open {made.html / 'index.html'}"
    )
    return 0
