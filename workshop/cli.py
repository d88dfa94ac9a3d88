"""The ``workshop`` command: a thin layer over the package.

Each sub-command lives in ``workshop/commands/<name>.py``, is listed in ``COMMAND_MODULES``, and
exposes ``register(subparsers)``, which adds the parser of the command of the same name and sets
``func`` to a callable taking the parsed arguments and returning an exit code. ``workshop NAME
...`` imports only that module (a command's heavy imports, pandas or the launch code, are not
paid by the others); ``workshop --help`` and anything that is not a command name import all.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMAND_MODULES = [
    "doctor",
    "run",
    "sweep",
    "timeline",
    "trace",
    "diagnose",
    "mpi",
    "scaling",
    "jobscript",
    "profiler",
    "check",
    "parallelism",
    "cluster",
    "book",
    "room",
]


def build_parser(commands: Sequence[str] = COMMAND_MODULES) -> argparse.ArgumentParser:
    """The parser, with ``commands`` (default: all) registered."""
    parser = argparse.ArgumentParser(
        prog="workshop", description="Hands-on Horovod performance workshop."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands:
        importlib.import_module(f"workshop.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    named = argv[:1] if argv and argv[0] in COMMAND_MODULES else COMMAND_MODULES
    parser = build_parser(named)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
