"""The whole data, in file order: the fast scanner on chunks (in worker threads), its records
stitched together with metadata records and with what the tolerant parser reads in the gaps
between them, and the end of the data (closed, open or cut)."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from workshop.readers.timeline.events import Events, Store, concat
from workshop.readers.timeline.records import Reader
from workshop.readers.timeline.scanner import (
    LONGEST_RECORD_CHECKED,
    Found,
    find_records,
    give_codes,
)
from workshop.readers.timeline.words import Words

CHUNK = 1 << 22  # bytes per scan task (cache-sized)
THREADS = min(2, os.cpu_count() or 1)  # scan workers at most
KEEP_MAPPED = 1 << 16  # bytes before the scan position kept mapped (gaps are read again)
BATCH_BYTES = 1 << 24  # data per batch of a streaming pass (about 270k Horovod records)
TAIL_BYTES = 64  # enough to see how the data ends
NEWER_LAYOUT_WINDOW = 1 << 20  # bytes before the end searched for the newer '},{' joins


def scan_batches(
    rd: Reader, body_lo: int, progress: bool, *, batch_bytes: int | None = BATCH_BYTES
) -> Iterator[Events]:
    """The event records after ``body_lo`` in file order, a batch at a time: the records of
    about ``batch_bytes`` of data each (None: one batch), the tolerant parser's among them.
    Metadata, warnings and damage go to ``rd``; the end of the data is read before the last
    batch is given.

    A batch's columns view a buffer that the next batch overwrites: use them (or copy them)
    before asking for the next."""
    n = rd.n
    sc = Words(rd.buf, n)
    bar = None
    if progress:
        from workshop.kernel import progress_bar

        bar = progress_bar(total=n - body_lo, unit="B", unit_scale=True, desc="reading timeline")
    span = n - body_lo if batch_bytes is None else min(n - body_lo, batch_bytes + CHUNK)
    store = Store(span)
    prev_end = body_lo  # end of the last record taken
    fast_hi = max(n - LONGEST_RECORD_CHECKED, body_lo)
    bounds = [(lo, min(fast_hi, lo + CHUNK)) for lo in range(body_lo, fast_hi, CHUNK)]
    results = _chunk_results(sc, bounds)
    batch_lo = body_lo
    try:
        for (lo, hi), found in zip(bounds, results, strict=True):
            evs, ends = give_codes(found, rd.vocab)
            metas = _metadata_records(rd, found.meta, prev_end)
            if metas or (evs and len(evs[0].off) and evs[0].off[0] < prev_end):
                evs, ends = _drop_inside(evs, ends, metas, prev_end)
            prev_end = _tile(rd, sc, evs, ends, metas, prev_end, store)
            rd.src.release(min(prev_end, hi) - KEEP_MAPPED)
            if bar is not None:
                bar.update(hi - lo)
            if batch_bytes is not None and hi - batch_lo >= batch_bytes:
                yield _batch(rd, store)
                batch_lo = hi
    finally:
        results.close()  # stops the workers
    if bar is not None:
        bar.update(n - body_lo - bar.n)
        bar.close()
    _tail(rd, prev_end)
    yield _batch(rd, store)


def _batch(rd: Reader, store: Store) -> Events:
    """The records taken since the last batch, in file order (the fast records are stored in
    file order; the tolerant parser's come after them), and an empty store and slow list."""
    fast_end = int(store.cols["off"][store.count - 1]) if store.count else -1
    if rd.slow:
        store.add(Events.from_rows(rd.slow))
    events = store.events()
    slow = np.array([row[0] for row in rd.slow], dtype=np.int64)
    rd.slow = []
    store.clear()
    if len(slow) and (slow[0] < fast_end or (np.diff(slow) < 0).any()):
        events = events.take(np.argsort(events.off, kind="stable"))
    return events


def _chunk_results(sc: Words, bounds: list[tuple[int, int]]) -> Iterator[Found]:
    """:func:`find_records` of each chunk, in order, computed ahead by worker threads."""
    workers = min(scan_workers(), len(bounds))
    if workers <= 1:
        for lo, hi in bounds:
            yield find_records(sc, lo, hi)
        return
    pool = ThreadPoolExecutor(workers)
    try:
        pending: deque[Any] = deque()
        for i in range(len(bounds)):
            while len(pending) < 2 * workers and i + len(pending) < len(bounds):
                lo, hi = bounds[i + len(pending)]
                pending.append(pool.submit(find_records, sc, lo, hi))
            yield pending.popleft().result()
    finally:
        pool.shutdown(cancel_futures=True)


def scan_workers() -> int:
    """``THREADS``, or 1 while other processes keep every core busy (a 1-minute load average
    of at least the number of cores): a worker that waits for a core only adds switching. On
    the 2-core VM at load 3, the 210 MB benchmark file took 0.52-0.67 s with two workers and
    0.45-0.50 s with one; with both cores free, two take ~0.3 s."""
    try:
        busy = os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        busy = False
    return 1 if busy else THREADS


def _metadata_records(rd: Reader, candidates: np.ndarray, prev_end: int) -> list[tuple]:
    """The ``M`` records among ``candidates``: (start, end, content)."""
    metas: list[tuple] = []
    for start in candidates[candidates >= prev_end].tolist():
        if metas and start < metas[-1][1]:
            continue
        found = rd.meta_extent(start)
        if found:
            metas.append((start, found[0], found[1]))
    return metas


def _drop_inside(
    evs: list[Events], ends: list[np.ndarray], metas: list, prev_end: int
) -> tuple[list[Events], list[np.ndarray]]:
    """Drop event candidates inside a metadata record (a tensor name may hold '{"ph": "') or
    inside the previous chunk's last record."""
    mo = np.array([m[0] for m in metas], dtype=np.int64)
    me = np.array([m[1] for m in metas], dtype=np.int64)
    out_e, out_end = [], []
    for e, end in zip(evs, ends, strict=True):
        keep = e.off >= prev_end
        if len(mo):
            j = np.searchsorted(mo, e.off, side="right") - 1
            keep &= ~((j >= 0) & (e.off < me[np.maximum(j, 0)]))
        if keep.all():
            out_e.append(e)
            out_end.append(end)
        else:
            idx = np.flatnonzero(keep)
            out_e.append(e.take(idx))
            out_end.append(end[idx])
    return out_e, out_end


def _tile(
    rd: Reader,
    sc: Words,
    evs: list[Events],
    ev_ends: list[np.ndarray],
    metas: list,
    prev_end: int,
    store: Store,
) -> int:
    """Order a chunk's records, drop overlapping ones, and read the gaps that are not plain
    separators with the tolerant parser. Returns the end of the last record taken."""
    m_off = np.array([m[0] for m in metas], dtype=np.int64)
    m_end = np.array([m[1] for m in metas], dtype=np.int64)
    off = np.concatenate([e.off for e in evs] + [m_off])
    ends = np.concatenate(ev_ends + [m_end])
    if metas:
        order = np.argsort(off, kind="stable")
        off, ends = off[order], ends[order]
    else:  # fast records come in offset order
        order = np.arange(len(off))
    while len(off) > 1:  # a record that runs into the next one is not what it seems
        bad = np.flatnonzero(ends[:-1] > off[1:])
        if not len(bad):
            break
        keep = np.ones(len(off), dtype=bool)
        keep[bad] = False
        off, ends, order = off[keep], ends[keep], order[keep]
    if not len(off):
        return prev_end
    nfast = sum(len(e.off) for e in evs)
    is_fast = order < nfast
    taken = order[is_fast]
    if len(taken) == nfast:
        for e in evs:
            store.add(e)
    else:
        store.add(concat(evs).take(np.sort(taken)))
    for i in order[~is_fast].tolist():
        rd.take_meta(metas[i - nfast][2])
    rd.records += int(is_fast.sum())
    _read_gaps(rd, sc, np.concatenate([[prev_end], ends[:-1]]), off)
    rd.last_is_meta = bool(order[-1] >= nfast)  # gaps lie before the chunk's last record
    return int(ends[-1])


def _read_gaps(rd: Reader, sc: Words, lo: np.ndarray, hi: np.ndarray) -> None:
    """Read the gaps ``[lo, hi)`` between records that hold more than a separator."""
    length = hi - lo
    c0, c1 = sc.bytes[lo], sc.bytes[np.minimum(lo + 1, sc.n - 1)]
    separator = (
        (length == 0)
        | ((length == 1) & (c0 == ord(",")))
        | ((length == 2) & (c0 == ord(",")) & (c1 == ord("\n")))
    )
    for i in np.flatnonzero(~separator).tolist():
        a, b = int(lo[i]), int(hi[i])
        gap = bytes(rd.buf[a:b])
        if gap.strip(b" \t\r\n") == b"" or (
            gap.count(b",") == 1 and gap.replace(b",", b"").strip() == b""
        ):
            continue
        rd.parse_region(a, b, tail=False)


def _tail(rd: Reader, lo: int) -> None:
    """What follows the last fast record: ']' (closed array), ',' (an open array: Horovod
    <= 0.20.0), more records in another layout, or a cut last record."""
    n = rd.n
    s = bytes(rd.buf[lo:n]).strip()
    if s not in (b"", b","):
        rd.parse_region(lo, n, tail=True)
    if rd.closing is not None or rd.truncated_at is not None or not rd.records:
        return
    last = bytes(rd.buf[max(lo, n - TAIL_BYTES) : n])
    if rd.last_is_meta:
        # Horovod writes a tensor's 'M' records right before its first event: never last
        rd.truncated_at = n
    elif last.rstrip().endswith(b"}"):
        rd.truncated_at = n  # Horovod writes '}]' or '},' after a record: cut in between
    elif last.rstrip().endswith(b","):
        # Horovod <= 0.20.0 ends every record in '},' + newline and never closes the array;
        # later versions join event records with '},{' and close the array after each one, so
        # an open array from them is a cut file
        window = max(0, n - NEWER_LAYOUT_WINDOW)
        if not last.endswith(b"\n") or rd.buf.find(b"},{", window, n) >= 0:
            rd.truncated_at = n
