"""``workshop profiler``: build the workshop's MPI profiler library, or print its path."""

from __future__ import annotations

import argparse
import sys

from workshop.launch import profiler


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``workshop profiler build|path``."""
    parser = subparsers.add_parser(
        "profiler",
        help="build the MPI profiler library (mpitrace-layout profiles)",
        description=(
            "The workshop's own PMPI profiler: preloaded into every rank by "
            "`workshop run --controller mpi --mpi-profile`, it writes mpi_profile.<jobid>.<rank> "
            "files in mpitrace's layout. It is compiled with mpicc into the user cache."
        ),
    )
    sub = parser.add_subparsers(dest="profiler_command", metavar="ACTION", required=True)
    build = sub.add_parser("build", help="compile the library (nothing to do if up to date)")
    build.add_argument("--quiet", action="store_true", help="print nothing but errors")
    build.add_argument("--force", action="store_true", help="recompile even if up to date")
    build.set_defaults(func=_build)
    path = sub.add_parser("path", help="print the library's path (building it if needed)")
    path.set_defaults(func=_path)


def _build(args: argparse.Namespace) -> int:
    progress = None if args.quiet else print
    try:
        lib = profiler.build(force=args.force, progress=progress)
    except profiler.ProfilerBuildError as exc:
        print(f"workshop profiler build: {exc}", file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"MPI profiler library: {lib}")
    return 0


def _path(args: argparse.Namespace) -> int:
    try:
        print(profiler.library_path())
    except profiler.ProfilerBuildError as exc:
        print(f"workshop profiler path: {exc}", file=sys.stderr)
        return 1
    return 0
