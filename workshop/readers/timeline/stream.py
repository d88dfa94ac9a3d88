"""The streaming pass: a file's events batch by batch (:func:`.read.event_batches`), paired
into spans with only the spans still open carried from one batch to the next.

Memory holds one batch (about ``stitch.BATCH_BYTES`` of data as columns) and the open spans,
whatever the size of the file: a Horovod timeline has a few open spans per tensor at any time
(a negotiation or an op, and one activity inside it), so the carry stays small.

Each batch is paired by :func:`.columns.pair_begins_and_ends` with the open ``B`` records put
before it, in file order: a stack per pid, so every span, depth and orphan ``E`` is the one the
whole file's pairing finds (:func:`.columns.span_columns`). A span's op (for an activity, the
name of the op it lies in) is fixed in the batch of its ``B`` and carried with it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from workshop.readers.timeline.columns import (
    CYCLE_START,
    KIND_ACTIVITY,
    KIND_NEGOTIATE,
    KIND_OP,
    _ffill_in_runs,
    _run_starts,
    negotiation_names,
    pair_begins_and_ends,
    rank_numbers,
)
from workshop.readers.timeline.events import Events
from workshop.readers.timeline.vocab import Vocab


@dataclass
class Spans:
    """Spans as columns, one entry per span. Names are vocabulary codes (-1: none).

    Attributes:
        seq: event index (in the whole file) of the ``B``.
        e_seq: event index of the ``E`` (-1: no ``E`` read).
        e_at: index of the ``E`` in its batch (-1: none), for its ``dtype`` and ``shape``.
        pid, name, op, kind: as :class:`.columns.Spans` (``op``: the span's own name at depth
            0, else the name of the op it lies in).
        start, end: timestamps of the ``B`` and of the ``E`` (for an open span: of its ``B``).
    """

    seq: np.ndarray
    e_seq: np.ndarray
    e_at: np.ndarray
    pid: np.ndarray
    name: np.ndarray
    op: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray

    @staticmethod
    def empty() -> Spans:
        return Spans(*(np.zeros(0, dtype=np.int64) for _ in fields(Spans)))

    def take(self, idx: np.ndarray) -> Spans:
        return Spans(*(getattr(self, f.name)[idx] for f in fields(Spans)))

    def __len__(self) -> int:
        return len(self.seq)


class Codes:
    """What the vocabulary's codes stand for (negotiation names, rank numbers, the cycle
    mark), rebuilt only when the vocabulary has grown. Each array has one more entry than the
    vocabulary, for code -1 (no name)."""

    def __init__(self, vocab: Vocab) -> None:
        self.vocab = vocab
        self.size = -1
        self.update()

    def update(self) -> None:
        if len(self.vocab.strings) == self.size:
            return
        self.size = len(self.vocab.strings)
        strings = np.array(self.vocab.strings + [""], dtype=object)
        self.negotiation = negotiation_names(strings)
        self.rank = rank_numbers(strings)
        self.cycle = np.array([s == CYCLE_START for s in strings], dtype=bool)


class Pairing:
    """Spans from batches of events, in file order; the open ones carried between batches."""

    def __init__(self) -> None:
        self.open = Spans.empty()  # in file order of their B
        self.events = 0  # events fed so far
        self.last_op: dict[int, int] = {}  # per pid, the name of its last op span so far
        self.orphans = 0

    def feed(self, ev: Events, codes: Codes) -> Spans:
        """The spans that ``ev`` (the next batch) closes, in (pid, file) order of their ``B``;
        the spans it leaves open are kept for the next batch (:attr:`open`)."""
        held = self.open
        k = len(held)
        ph = np.concatenate([np.full(k, ord("B"), dtype=np.uint8), ev.ph])
        pid = np.concatenate([held.pid.astype(np.int32), ev.pid])
        b, e, spid, depth, n_orphan = pair_begins_and_ends(ph, pid)
        del ph, pid
        self.orphans += n_orphan
        name = np.concatenate([held.name, ev.name])[b].astype(np.int64)
        ts = np.concatenate([held.start, ev.ts])
        is_neg = codes.negotiation[name] & (depth == 0)
        top = (depth == 0) & ~is_neg
        op = np.where(depth == 0, name, _ffill_in_runs(name, top, _run_starts(spid)))
        carried = b < k
        if k:
            op[carried] = held.op[b[carried]]
        self._fill_ops(op, depth, carried, spid)
        self._remember_ops(top, spid, name)
        closed = e >= 0
        seq = b - k + self.events
        if k:
            seq[carried] = held.seq[b[carried]]
        spans = Spans(
            seq=seq,
            e_seq=np.where(closed, e - k + self.events, -1),
            e_at=np.where(closed, e - k, -1),  # an E is never carried
            pid=spid.astype(np.int64),
            name=name,
            op=op.astype(np.int64),
            kind=np.where(depth > 0, KIND_ACTIVITY, np.where(is_neg, KIND_NEGOTIATE, KIND_OP)),
            start=ts[b],
            end=ts[np.where(closed, e, b)],
        )
        self.events += len(ev.ph)
        still = np.flatnonzero(~closed)
        self.open = spans.take(still[np.argsort(spans.seq[still], kind="stable")])
        return spans.take(np.flatnonzero(closed))

    def _fill_ops(
        self, op: np.ndarray, depth: np.ndarray, carried: np.ndarray, spid: np.ndarray
    ) -> None:
        """An activity with no op before it in this batch lies in the last op of its pid in an
        earlier batch (never seen in Horovod's files: an activity's op is open, so carried)."""
        for i in np.flatnonzero((op < 0) & (depth > 0) & ~carried).tolist():
            op[i] = self.last_op.get(int(spid[i]), -1)

    def _remember_ops(self, top: np.ndarray, spid: np.ndarray, name: np.ndarray) -> None:
        idx = np.flatnonzero(top)
        if not len(idx):
            return
        p = spid[idx]
        last = idx[np.append(p[1:] != p[:-1], True)]
        self.last_op.update(zip(spid[last].tolist(), name[last].tolist(), strict=True))

    def rest(self, last_ts: int) -> Spans:
        """The spans never closed (at the end of the data): they run to ``last_ts`` (or stay
        empty when they begin after it), as in :func:`.columns.span_columns`."""
        spans, self.open = self.open, Spans.empty()
        spans.end = np.maximum(spans.start, last_ts)
        return spans


def ticks_of(ev: Events, codes: Codes) -> tuple[np.ndarray, np.ndarray]:
    """Rank readiness ticks of a batch: their indices and ranks (:func:`.columns.tick_events`)."""
    x = np.flatnonzero(ev.ph == ord("X"))
    rank = codes.rank[ev.name[x]]
    keep = (rank >= 0) & (ev.pid[x] >= 0)
    return x[keep], rank[keep]


def cycles_of(ev: Events, codes: Codes) -> np.ndarray:
    """Indices of a batch's ``CYCLE_START`` marks, in file order."""
    sel = np.flatnonzero(ev.ph == ord("i"))
    return sel[codes.cycle[ev.name[sel]]]
