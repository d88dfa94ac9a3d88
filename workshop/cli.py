"""The ``workshop`` command: a thin layer over the package.

Each sub-command lives in ``workshop/commands/<name>.py`` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking the parsed
arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = ["doctor", "run", "sweep", "timeline", "mpi", "scaling", "jobscript", "profiler"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="workshop", description="Hands-on Horovod performance workshop."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"workshop.commands.{name}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
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
