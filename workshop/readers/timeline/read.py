"""The entry points: a file or bytes in, a :class:`~.model.Timeline` out.

:func:`scan_events` (all events at once) and :func:`event_batches` (batch by batch, for the
streaming pass of :mod:`.stream`) are the steps before any DataFrame; the DataFrames (and pandas)
are loaded only when a Timeline is built, so :mod:`.summary` reads a file without them."""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from pathlib import Path

from workshop.readers.timeline.events import Events
from workshop.readers.timeline.model import Timeline, TimelineFormatError
from workshop.readers.timeline.records import Reader
from workshop.readers.timeline.source import Source, from_bytes, open_file
from workshop.readers.timeline.stitch import BATCH_BYTES, scan_batches

UTF8_BOM = b"\xef\xbb\xbf"
HEAD_BYTES = 4096  # where the array (or the traceEvents key right after '{') must begin
KEY_SEARCH_BYTES = 1 << 20  # how far into a JSON object "traceEvents" is looked for
BODY_START = re.compile(rb'\s*(?:\[|\{\s*"traceEvents"\s*:\s*\[)')
TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
EMPTY_WRAPPER = b'{"traceEvents":['


def read_timeline(path: str | os.PathLike[str], *, progress: bool = False) -> Timeline:
    """Read a Horovod timeline file.

    Args:
        path: ``timeline.json`` (plain or gzip-compressed; a JSON array or the
            ``{"traceEvents": [...]}`` form), or a run directory that holds one.
        progress: show a progress bar (for files of hundreds of MB).

    Returns:
        A :class:`Timeline`. A cut file keeps its valid prefix and unreadable byte ranges are
        skipped; both raise a :class:`TimelineWarning` naming the byte offset.

    Raises:
        FileNotFoundError: no such file, or a run directory without ``timeline.json``.
        TimelineFormatError: the data is not a trace-event timeline (names file and offset).
    """
    p = timeline_path(path)
    src, problems, cut_at = open_file(p)
    try:
        return _build(*scan_events(src, str(p), problems, cut_at, progress))
    finally:
        src.close()


def timeline_path(path: str | os.PathLike[str]) -> Path:
    """The timeline file: ``path``, or the ``timeline.json`` of a run directory.

    Raises:
        FileNotFoundError: no such file, or a run directory without ``timeline.json``.
    """
    p = Path(path)
    if p.is_dir():
        if not (p / "timeline.json").exists():
            raise FileNotFoundError(f"{p}: run directory has no timeline.json (use --timeline)")
        p = p / "timeline.json"
    if not p.exists():
        raise FileNotFoundError(f"no timeline file {p}")
    return p


def parse_timeline(data: bytes | str, *, source: str = "<bytes>") -> Timeline:
    """Parse timeline data held in memory.

    Args:
        data: the file contents (plain or gzip bytes, or str).
        source: the name used in warnings and errors.

    Returns:
        A :class:`Timeline` (see :func:`read_timeline`).

    Raises:
        TimelineFormatError: the data is not a trace-event timeline.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    src, problems, cut_at = from_bytes(data)
    return _build(*scan_events(src, source, problems, cut_at, False))


def _build(rd: Reader, events: Events) -> Timeline:
    from workshop.readers.timeline.frames import build_timeline  # pandas, only now

    return build_timeline(rd, events)


def scan_events(
    src: Source, source: str, problems: list[str], cut_at: int | None, progress: bool
) -> tuple[Reader, Events]:
    """Every event record of ``src`` as columns, in file order, and the reader's state
    (metadata records, warnings, damage).

    Args:
        src, problems, cut_at: what :func:`~.source.open_file` returns.
        source: the name used in warnings and errors.
        progress: show a progress bar.

    Raises:
        TimelineFormatError: the data is not a trace-event timeline.
    """
    rd, batches = event_batches(src, source, problems, cut_at, progress, batch_bytes=None)
    (events,) = batches
    return rd, events


def event_batches(
    src: Source,
    source: str,
    problems: list[str],
    cut_at: int | None,
    progress: bool,
    *,
    batch_bytes: int | None = BATCH_BYTES,
) -> tuple[Reader, Generator[Events]]:
    """The event records of ``src`` in file order, a batch of about ``batch_bytes`` of data at a
    time (None: all in one batch; see :func:`~.stitch.scan_batches`), and the reader's state,
    complete once the batches are (arguments as :func:`scan_events`).

    Raises:
        TimelineFormatError: the data does not begin as a timeline (at once), or holds no
            trace event at all (after the last batch).
    """
    rd = Reader(source, src)
    for msg in problems:
        rd.warn(msg)
    body_lo = _body_start(rd, cut_at)
    return rd, _batches(rd, body_lo, cut_at, progress, batch_bytes)


def _batches(
    rd: Reader, body_lo: int | None, cut_at: int | None, progress: bool, batch_bytes: int | None
) -> Generator[Events]:
    if body_lo is None:
        rd.warn("empty file: no events")
        yield Events.empty()
        return
    yield from scan_batches(rd, body_lo, progress, batch_bytes=batch_bytes)
    if rd.records == 0 and rd.not_a_trace is not None:
        raise TimelineFormatError(rd.source, *rd.not_a_trace)
    if cut_at is not None and rd.closing is None:
        rd.truncated_at = rd.truncated_at if rd.truncated_at is not None else cut_at
    if rd.records == 0 and not rd.skipped:
        rd.warn("no events in the file")


def _body_start(rd: Reader, cut_at: int | None) -> int | None:
    """Offset of the first record: after '[' or after '{"traceEvents": ['; None for data with
    no events at all (then ``rd.truncated_at`` says whether it was cut)."""
    n = rd.n
    bom = len(UTF8_BOM) if bytes(rd.buf[: len(UTF8_BOM)]) == UTF8_BOM else 0
    head = bytes(rd.buf[bom : bom + HEAD_BYTES])
    compact = b"".join(head.split())
    if not compact or (n < HEAD_BYTES and EMPTY_WRAPPER.startswith(compact)):
        if compact or cut_at is not None:
            rd.truncated_at = cut_at if cut_at is not None else n
        return None
    first = bom + len(head) - len(head.lstrip())  # offset of the first non-blank byte
    m = BODY_START.match(head)
    if m:
        if not m.group(0).strip().startswith(b"["):
            rd.form = "traceEvents"
        return bom + m.end()
    if head.lstrip().startswith(b"{"):
        km = TRACE_EVENTS_KEY.search(bytes(rd.buf[: min(n, KEY_SEARCH_BYTES)]))
        if not km:
            raise TimelineFormatError(
                rd.source,
                first,
                'a JSON object without a "traceEvents" array: not a Chrome trace timeline',
            )
        rd.form = "traceEvents"
        return km.end()
    raise TimelineFormatError(
        rd.source, first, f"expected '[' or '{{\"traceEvents\": [', found {head.lstrip()[:20]!r}"
    )
