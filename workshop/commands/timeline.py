"""``workshop timeline``: read a Horovod timeline and report what it shows.

    workshop timeline report FILE               a diagnosis in words, with numbers
    workshop timeline summary FILE [--json]     the key numbers (one JSON object with --json)
    workshop timeline slice FILE (--steps A:B | --window-us S:E) [-o OUT]
                                                a valid timeline of some steps, for a viewer
    workshop timeline repair FILE -o OUT [--start-us A] [--end-us B]
                                                a valid, closed copy for chrome://tracing

FILE is a ``timeline.json`` (plain or gzip) or a run directory holding one.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

PROGRESS_BYTES = 200 * 1024 * 1024


def register(subparsers: Any) -> None:
    """Add ``workshop timeline`` and its sub-commands."""
    parser = subparsers.add_parser(
        "timeline",
        help="analyse a Horovod timeline (report, summary, slice, repair)",
        description="Read a Horovod timeline (HOROVOD_TIMELINE) and report what it shows.",
    )
    sub = parser.add_subparsers(dest="timeline_command", metavar="ACTION")
    sub.required = True

    report = sub.add_parser("report", help="a diagnosis in words, with numbers")
    report.add_argument("file", help="timeline.json (plain or .gz) or a run directory")
    report.set_defaults(func=_report)

    summary = sub.add_parser("summary", help="the key numbers")
    summary.add_argument("file", help="timeline.json (plain or .gz) or a run directory")
    summary.add_argument("--json", action="store_true", help="print one JSON object")
    summary.set_defaults(func=_summary)

    cut = sub.add_parser(
        "slice",
        help="write some steps (or a time window) as a timeline a trace viewer opens",
        description="Write the spans, ticks and cycle marks of some training steps (or of a "
        "time window) as a new, valid timeline, in one pass over a file of any size: spans "
        "that cross the window's edges are closed at them, tensor names are kept. Open the "
        "result in https://ui.perfetto.dev ('Open trace file': it stays on your machine).",
    )
    cut.add_argument("file", help="timeline.json (plain or .gz) or a run directory")
    which = cut.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--steps", metavar="A:B", help="training steps A to B-1 (0-based; e.g. 10:12)"
    )
    which.add_argument(
        "--window-us", metavar="S:E", help="timeline microseconds S to E (inclusive)"
    )
    cut.add_argument(
        "-o", "--output", help="new file to write (default: here, named after FILE and the window)"
    )
    cut.set_defaults(func=_slice)

    repair = sub.add_parser(
        "repair", help="write a valid, closed copy that chrome://tracing and Perfetto load"
    )
    repair.add_argument("file", help="timeline.json (plain or .gz) or a run directory")
    repair.add_argument(
        "-o", "--output", required=True, help="new file to write (not overwritten)"
    )
    repair.add_argument("--start-us", type=int, help="keep only from this time (microseconds)")
    repair.add_argument("--end-us", type=int, help="keep only up to this time (microseconds)")
    repair.set_defaults(func=_repair)


def _read(path: str, *, summary: bool = False) -> Any:
    """Read the timeline (or with ``summary``, only its summary numbers, without pandas),
    printing warnings on stderr; None (after a message) on failure."""
    from workshop.readers.timeline.model import TimelineFormatError, TimelineWarning

    if summary:
        from workshop.readers.timeline.summary import summarize_file as read
    else:
        from workshop.readers.timeline import read_timeline as read

    p = Path(path)
    size = p.stat().st_size if p.is_file() else 0
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TimelineWarning)
            tl = read(p, progress=size > PROGRESS_BYTES and sys.stderr.isatty())
    except (FileNotFoundError, TimelineFormatError, IsADirectoryError, PermissionError) as exc:
        print(f"workshop timeline: {exc}", file=sys.stderr)
        return None
    for w in caught:
        print(f"warning: {w.message}", file=sys.stderr)
    return tl


def _report(args: argparse.Namespace) -> int:
    from workshop.findings import timeline_findings

    tl = _read(args.file)
    if tl is None:
        return 2
    print("\n".join([*_verdict(Path(args.file), tl), *timeline_findings(tl)]))
    return 0


def _verdict(path: Path, tl: Any) -> list[str]:
    """``workshop diagnose``'s verdict on the run the timeline belongs to (its run directory:
    the timeline's folder, with or without run.json), then an empty line."""
    from workshop.findings.diagnose import diagnose_run, verdict_line
    from workshop.readers.runs import Run

    run = Run(path if path.is_dir() else path.parent, timeline=tl)
    try:
        result = diagnose_run(run)
    except (FileNotFoundError, ValueError) as exc:
        return [f"(no verdict: {exc})", ""]
    where = f"workshop diagnose {run.path}" if run.record else (
        "the timeline alone: workshop diagnose RUN_DIR uses the whole run directory"
    )  # fmt: skip
    return [f"{verdict_line(result)} ({where} for the evidence)", ""]


def _summary(args: argparse.Namespace) -> int:
    # the numbers of analysis.timeline.timeline_summary, counted without DataFrames
    summary = _read(args.file, summary=True)
    if summary is None:
        return 2
    if args.json:
        print(json.dumps(summary))
        return 0
    for key, value in summary.items():
        if key == "tensor_names":
            continue
        if isinstance(value, dict):
            print(f"{key}:")
            for k, v in value.items():
                print(f"  {k}: {v}")
        elif isinstance(value, list) and key == "warnings":
            for v in value:
                print(f"warning: {v}")
        else:
            print(f"{key}: {value}")
    return 0


def _slice(args: argparse.Namespace) -> int:
    from workshop.readers.timeline.model import TimelineFormatError
    from workshop.readers.timeline.read import timeline_path
    from workshop.readers.timeline.steps import step_window

    what = "--steps" if args.steps is not None else "--window-us"
    pair = _pair(args.steps if args.steps is not None else args.window_us)
    if pair is None:
        print(f"workshop timeline slice: {what} expects A:B with integers A <= B", file=sys.stderr)
        return 2
    try:
        path = timeline_path(args.file)
        if args.steps is not None:
            window = step_window(path, *pair)
            lo, hi = window.start_us, window.end_us
            label = f"steps-{pair[0]}-{pair[1]}"
            said = (
                f"steps {pair[0]} to {pair[1] - 1} of {window.steps}, marked by tensor "
                f"{window.tensor}: {lo} to {hi} us"
            )
        else:
            lo, hi = pair
            label, said = f"window-{lo}-{hi}", f"{lo} to {hi} us"
    except (FileNotFoundError, TimelineFormatError, ValueError, PermissionError) as exc:
        print(f"workshop timeline slice: {exc}", file=sys.stderr)
        return 2
    out = Path(args.output) if args.output else Path(f"{_stem(path)}.{label}.json")
    return _write_window(path, out, lo, hi, said, "slice")


def _pair(text: str) -> tuple[int, int] | None:
    """``A:B`` as two integers with A <= B, or None."""
    a, sep, b = text.partition(":")
    try:
        pair = int(a), int(b)
    except ValueError:
        return None
    return pair if sep and pair[0] <= pair[1] else None


def _stem(path: Path) -> str:
    name = path.name.removesuffix(".gz")
    return name.removesuffix(".json")


def _write_window(
    path: Path, out: Path, lo: int | None, hi: int | None, said: str, cmd: str
) -> int:
    """Write the window with :func:`slice_file`, printing what was written; 0, or 2 after a
    message naming the file."""
    from workshop.readers.timeline.model import TimelineFormatError
    from workshop.readers.timeline.slicing import slice_file

    size = path.stat().st_size if path.is_file() else 0
    try:
        counts = slice_file(
            path,
            out,
            start_us=lo,
            end_us=hi,
            progress=size > PROGRESS_BYTES and sys.stderr.isatty(),
        )
    except FileExistsError:
        print(f"workshop timeline {cmd}: {out} exists; nothing was overwritten", file=sys.stderr)
        return 2
    except (FileNotFoundError, TimelineFormatError, ValueError, PermissionError) as exc:
        print(f"workshop timeline {cmd}: {exc}", file=sys.stderr)
        return 2
    for w in counts["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    print(
        f"wrote {out} ({said}); {counts['events']} records ({counts['spans']} spans, "
        f"{counts['ticks']} ticks, {counts['cycles']} cycle marks, {counts['tensors']} tensors); "
        "open it in https://ui.perfetto.dev ('Open trace file': the file stays on this machine) "
        "or chrome://tracing"
    )
    return 0


def _repair(args: argparse.Namespace) -> int:
    if args.start_us is not None and args.end_us is not None and args.end_us < args.start_us:
        print(
            f"workshop timeline repair: --end-us {args.end_us} is before --start-us "
            f"{args.start_us}",
            file=sys.stderr,
        )
        return 2
    out = Path(args.output)
    if out.exists():
        print(f"workshop timeline repair: {out} exists; nothing was overwritten", file=sys.stderr)
        return 2
    from workshop.readers.timeline.read import timeline_path

    try:
        path = timeline_path(args.file)
    except FileNotFoundError as exc:
        print(f"workshop timeline repair: {exc}", file=sys.stderr)
        return 2
    lo = "start" if args.start_us is None else f"{args.start_us} us"
    hi = "end" if args.end_us is None else f"{args.end_us} us"
    return _write_window(path, out, args.start_us, args.end_us, f"{lo} to {hi}", "repair")
