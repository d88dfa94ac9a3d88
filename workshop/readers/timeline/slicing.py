"""A window of a timeline of any size, written as a valid timeline in one streaming pass
(``workshop timeline slice`` and ``repair``).

The pass reads the file batch by batch (:mod:`.stream`) and writes, in file order, every
record of what overlaps the window ``[start_us, end_us]`` (inclusive): the ``B`` and ``E`` of
each span that overlaps it, clipped to its edges; the readiness ticks and cycle marks inside
it; before a tensor's first record, its ``M`` records (name and sort index), as Horovod does.
Spans the data never closes, or that the pass leaves open when it stops, are closed at the
end, inner ones first; orphan ``E`` records are left out. The result is what
:func:`.write.write_timeline` writes for the whole Timeline and the same window (the same
spans, ticks, cycles and tensors; only the position of the metadata records differs).

Two choices make it one pass with bounded memory, exact for Horovod's files, whose records
are in time order (one writer thread, ``horovod/common/timeline.cc``):

* a span that begins before the window and is still open when the batch holding the window's
  first record ends counts as overlapping it;
* the pass stops after a whole batch of records later than the window (``stopped_early``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import IO, Any

import numpy as np

from workshop.readers.timeline.columns import KIND_OP, cut_warning
from workshop.readers.timeline.events import Events
from workshop.readers.timeline.read import event_batches, timeline_path
from workshop.readers.timeline.records import Reader
from workshop.readers.timeline.source import open_file
from workshop.readers.timeline.stitch import BATCH_BYTES
from workshop.readers.timeline.stream import Codes, Pairing, Spans, cycles_of, ticks_of
from workshop.readers.timeline.write import (
    begin_record,
    cycle_record,
    end_args,
    end_record,
    epoch_records,
    tensor_records,
    tick_record,
)

NO_LIMIT = 2**62  # beyond any timestamp the reader accepts


def slice_file(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    start_us: int | None = None,
    end_us: int | None = None,
    progress: bool = False,
    batch_bytes: int = BATCH_BYTES,
) -> dict[str, Any]:
    """Write the window ``[start_us, end_us]`` of a timeline file as a new, valid timeline.

    Args:
        path: as for :func:`~.read.read_timeline`.
        out: the file to write; it must not exist (written to a temporary file in the same
            folder, then linked into place, so nothing is ever overwritten).
        start_us, end_us: the window, in timeline microseconds (inclusive); None: the
            file's start or end (both None: a repaired copy of the whole file).
        progress: show a progress bar.
        batch_bytes: data read per batch.

    Returns:
        Counts written: ``events`` (records, metadata included), ``spans``, ``ticks``,
        ``cycles``, ``tensors``; ``stopped_early`` (True when the pass stopped after the
        window, before the end of the file); ``warnings`` (the reader's, about the input).

    Raises:
        FileExistsError: ``out`` exists.
        ValueError: an empty window (``end_us`` < ``start_us``).
        FileNotFoundError, TimelineFormatError: as :func:`~.read.read_timeline`.
    """
    target = Path(out)
    if target.exists():
        raise FileExistsError(
            f"{target} exists: choose a new output file (nothing is overwritten)"
        )
    lo = -NO_LIMIT if start_us is None else int(start_us)
    hi = NO_LIMIT if end_us is None else int(end_us)
    if hi < lo:
        raise ValueError(f"empty window: end_us {end_us} < start_us {start_us}")
    p = timeline_path(path)
    src, problems, cut_at = open_file(p)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    try:
        with open(fd, "w", encoding="utf-8") as fh:
            rd, batches = event_batches(
                src, str(p), problems, cut_at, progress, batch_bytes=batch_bytes
            )
            writer = _Writer(fh, rd, lo, hi)
            counts = writer.run(batches)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's file is private; the result is not
        _link_new(Path(tmp), target)
    finally:
        src.close()
        Path(tmp).unlink(missing_ok=True)
    return {**counts, "warnings": list(rd.warnings)}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _link_new(tmp: Path, target: Path) -> None:
    """Put ``tmp`` in place as ``target`` unless ``target`` exists by now."""
    try:
        os.link(tmp, target)  # fails if target exists: never overwrites
    except FileExistsError:
        raise FileExistsError(
            f"{target} appeared while writing: nothing was overwritten"
        ) from None
    except OSError:  # a file system without hard links
        if target.exists():
            raise FileExistsError(f"{target} exists: nothing was overwritten") from None
        os.replace(tmp, target)


class _Writer:
    """The state of one pass: the spans whose ``B`` was written (their ``E`` is owed), the
    tensors introduced, and the counts."""

    def __init__(self, fh: IO[str], rd: Reader, lo: int, hi: int) -> None:
        self.fh, self.rd, self.lo, self.hi = fh, rd, lo, hi
        self.codes = Codes(rd.vocab)
        self.pairing = Pairing()
        self.names: list[str] = []  # JSON text of each code's string
        self.owed: set[int] = set()  # seq of spans whose B is written and E is not
        self.started = False  # a record inside the window has been met
        self.tensors: set[int] = set()
        self.n = {"events": 0, "spans": 0, "ticks": 0, "cycles": 0}
        self.last_ts: int | None = None

    def run(self, batches: Generator[Events]) -> dict[str, Any]:
        self.fh.write("[")
        stopped = False
        for ev in batches:
            self.codes.update()
            self.names += [json.dumps(s) for s in self.rd.vocab.strings[len(self.names) :]]
            if len(ev.ts):
                top = int(ev.ts.max())
                self.last_ts = top if self.last_ts is None else max(self.last_ts, top)
            self._batch(ev)
            if self.started and len(ev.ts) and int(ev.ts.min()) > self.hi:
                stopped = True
                break
        if stopped:
            batches.close()  # stops the scan's workers
        self._close_open(stopped)
        if self.rd.truncated_at is not None:
            self.rd.warn(cut_warning(self.rd.truncated_at, self.pairing.events))
        if not self.n["events"]:
            self._header()
        self.fh.write("\n]\n")
        return {**self.n, "tensors": len(self.tensors), "stopped_early": stopped}

    def _batch(self, ev: Events) -> None:
        """Write the records of one batch that belong to the window, in file order."""
        lo, hi = self.lo, self.hi
        base = self.pairing.events
        closed = self.pairing.feed(ev, self.codes)
        still = self.pairing.open
        ticks, ranks = ticks_of(ev, self.codes)
        ticks_in = (ev.ts[ticks] >= lo) & (ev.ts[ticks] <= hi)
        ticks, ranks = ticks[ticks_in], ranks[ticks_in]
        cycles = cycles_of(ev, self.codes)
        cycles = cycles[(ev.ts[cycles] >= lo) & (ev.ts[cycles] <= hi)]
        # which spans show: begun in the window, or before it and ending in or after it (a span
        # still open counts as ending after it)
        c_show = (closed.start <= hi) & (closed.end >= lo)
        o_show = still.start <= hi
        if not self.started:
            if not (
                len(ticks) or len(cycles) or c_show.any() or (o_show & (still.start >= lo)).any()
            ):
                return  # nothing in the window yet
            self.started = True
            self._header()
        # B records not yet written: of this batch, and (when the window starts here) carried
        # ones that began before the window
        c_owed = np.isin(closed.seq, list(self.owed))
        c_new = c_show & ~c_owed
        o_new = o_show & ~np.isin(still.seq, list(self.owed))
        rows: list[tuple[int, str, int]] = []  # (position in the batch, record, pid)
        rows += self._begins(closed.take(np.flatnonzero(c_new)), base)
        rows += self._begins(still.take(np.flatnonzero(o_new)), base)
        self.owed.update(still.seq[o_new].tolist())
        ends = c_show | c_owed
        rows += self._ends(closed.take(np.flatnonzero(ends)), ev)
        self.owed.difference_update(closed.seq[c_owed].tolist())
        self.n["spans"] += int(c_new.sum() + o_new.sum())
        for i, rank in zip(ticks.tolist(), ranks.tolist(), strict=True):
            pid = int(ev.pid[i])
            rows.append((i, tick_record(rank, int(ev.ts[i]), pid), pid))
        rows += [(i, cycle_record(int(ev.ts[i])), -1) for i in cycles.tolist()]
        self.n["ticks"] += len(ticks)
        self.n["cycles"] += len(cycles)
        rows.sort(key=lambda r: r[0])
        self._emit(rows)

    def _begins(self, sp: Spans, base: int) -> list[tuple[int, str, int]]:
        """``B`` records at their place in the file (carried ones first, in file order)."""
        ts = np.maximum(sp.start, self.lo)
        return [
            (seq - base, begin_record(self.names[name] if name >= 0 else '""', t, pid), pid)
            for seq, name, t, pid in zip(
                sp.seq.tolist(), sp.name.tolist(), ts.tolist(), sp.pid.tolist(), strict=True
            )
        ]

    def _ends(self, sp: Spans, ev: Events) -> list[tuple[int, str, int]]:
        """``E`` records at their place in the file, clipped to the window; an op's keeps its
        ``dtype`` and ``shape``."""
        ts = np.clip(sp.end, self.lo, self.hi)
        is_op = sp.kind == KIND_OP  # only an op's E carries them (frames._spans)
        dtype = np.where(is_op, ev.dtype[sp.e_at], -1)
        shape = np.where(is_op, ev.shape[sp.e_at], -1)
        out = []
        for at, t, pid, d, s in zip(
            sp.e_at.tolist(), ts.tolist(), sp.pid.tolist(), dtype.tolist(), shape.tolist(),
            strict=True,
        ):  # fmt: skip
            args = end_args(self.names[d], self.names[s] if s >= 0 else '""') if d >= 0 else ""
            out.append((at, end_record(t, pid, args), pid))
        return out

    def _close_open(self, stopped: bool) -> None:
        """Close the spans still open: at the last timestamp of the data (or the window's end
        when the pass stopped early), clipped to the window; inner ones first."""
        last = self.hi if stopped or self.last_ts is None else self.last_ts
        rest = self.pairing.rest(last)
        show = rest.start <= self.hi
        show &= rest.end >= self.lo
        if not self.started:
            if not show.any():
                return
            self.started = True
            self._header()
        fresh = show & ~np.isin(rest.seq, list(self.owed))
        rows = self._begins(rest.take(np.flatnonzero(fresh)), 0)
        self.n["spans"] += int(fresh.sum())
        order = np.flatnonzero(show)[np.argsort(-rest.seq[show], kind="stable")]
        ts = np.clip(rest.end[order], self.lo, self.hi)
        pids = rest.pid[order].tolist()
        rows += [(0, end_record(t, p), p) for t, p in zip(ts.tolist(), pids, strict=True)]
        self._emit(rows)

    def _header(self) -> None:
        if self.rd.start_epoch_us is not None:
            self._write(epoch_records(int(self.rd.start_epoch_us)))

    def _emit(self, rows: list[tuple[int, str, int]]) -> None:
        """Write ``rows`` in order, each tensor's ``M`` records before its first record."""
        out: list[str] = []
        for _, record, pid in rows:
            if pid >= 0 and pid not in self.tensors:
                self.tensors.add(pid)
                name = self.rd.tensor_names.get(pid, f"pid {pid}")
                out += tensor_records(pid, name, self.rd.sort_index.get(pid, pid))
            out.append(record)
        self._write(out)

    def _write(self, records: list[str]) -> None:
        if not records:
            return
        sep = ",\n" if self.n["events"] else "\n"
        self.fh.write(sep + ",\n".join(records))
        self.n["events"] += len(records)
