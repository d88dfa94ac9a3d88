"""Event columns -> the columns of the spans, ticks and cycles, with numpy alone.

:mod:`.frames` wraps them in the DataFrames of a :class:`~.model.Timeline`; :mod:`.summary`
counts them without building any DataFrame (``workshop timeline summary`` never loads pandas).
Both go through :func:`tables`, so the two agree on every span, tick, cycle and warning.

Everything is vectorised: spans pair ``B`` and ``E`` records per pid with stack semantics
through cumulative sums over a stable sort by pid, not a Python loop over records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from workshop.readers.timeline.events import Events
from workshop.readers.timeline.records import Reader

NEGOTIATE = "NEGOTIATE_"  # prefix of negotiation span names: NEGOTIATE_ALLREDUCE ...
CYCLE_START = "CYCLE_START"  # the instant HOROVOD_TIMELINE_MARK_CYCLES=1 adds
MAX_RANK_DIGITS = 9  # a tick's name is the rank number
SMALL_KEY = 65536  # sort keys below this sort as uint16 (a radix sort)
KIND_NEGOTIATE, KIND_OP, KIND_ACTIVITY = 0, 1, 2  # the codes of ``Timeline.spans["kind"]``
# the warnings after the pairing, each after its count
ORPHANS = (
    "'E' records close nothing (the timeline started while tensors were in flight, e.g. "
    "hvd.start_timeline): dropped"
)
UNCLOSED = (
    "spans have no 'E' (the timeline stopped while tensors were in flight): they run to the "
    "last timestamp, closed=False"
)
BACKWARDS = (
    "spans end before they begin (a damaged timestamp): their end is set to their start, "
    "closed=False"
)


@dataclass
class Spans:
    """One entry per span, in (pid, file) order of the ``B`` (:func:`file_order` puts them in
    file order). Names are vocabulary codes (-1: none)."""

    b_ev: np.ndarray  # event index of the B
    e_ev: np.ndarray  # event index of the E (-1: unclosed)
    pid: np.ndarray
    depth: np.ndarray
    name: np.ndarray  # int64 code of the B's name
    op: np.ndarray  # int64 code of the op's name: the span's own at depth 0, else its op's
    start: np.ndarray
    end: np.ndarray
    closed: np.ndarray
    kind: np.ndarray  # KIND_NEGOTIATE / KIND_OP / KIND_ACTIVITY


@dataclass
class Tables:
    """What :func:`tables` finds: the metadata (warnings included), the vocabulary as an
    object array (code -1 reads ""), the spans, and the event indices of the ticks (file order,
    with their ranks) and of the cycle marks (time order)."""

    metadata: dict[str, Any]
    vocab: np.ndarray
    spans: Spans
    ticks: np.ndarray
    tick_ranks: np.ndarray
    cycles: np.ndarray
    last_ts: int


def tables(rd: Reader, ev: Events) -> Tables:
    """The spans, ticks and cycles of the events read, and the metadata with every warning
    (added to ``rd.warnings``; the caller emits them)."""
    vocab = np.array(rd.vocab.strings + [""], dtype=object)  # code -1 reads ""
    md = _metadata(rd, ev)
    if rd.truncated_at is not None:
        rd.warn(cut_warning(rd.truncated_at, len(ev.ts)))
    last_ts = md["last_ts_us"] or 0
    ev.off = np.zeros(0, np.int64)  # not needed any more
    spans, n_orphan = span_columns(ev, vocab, last_ts)
    n_unclosed = int((~spans.closed).sum())
    # an 'E' stamped before its 'B' (a damaged or hand-edited timestamp): no duration to trust
    backwards = spans.closed & (spans.end < spans.start)
    n_backwards = int(backwards.sum())
    if n_backwards:
        spans.end = np.where(backwards, spans.start, spans.end)
        spans.closed = spans.closed & ~backwards
    ticks, ranks = tick_events(ev, vocab)
    cycles = cycle_events(ev, vocab)
    md["orphan_ends"] = n_orphan
    md["unclosed"] = n_unclosed
    md["backwards"] = n_backwards
    for count, what in ((n_orphan, ORPHANS), (n_unclosed, UNCLOSED), (n_backwards, BACKWARDS)):
        if count:
            rd.warn(f"{count} {what}")
    md["warnings"] = list(rd.warnings)
    return Tables(md, vocab, spans, ticks, ranks, cycles, last_ts)


def cut_warning(at: int, events: int) -> str:
    """The warning for data cut at byte ``at`` after ``events`` events."""
    return (
        f"data cut at byte {at} (partial last record, a killed or running job): kept the "
        f"{events} events before it (and the metadata records)"
    )


def _metadata(rd: Reader, ev: Events) -> dict[str, Any]:
    return {
        "path": rd.source,
        "bytes": rd.n,
        "events": rd.records,
        "form": rd.form,
        "closed_array": rd.closing is not None,
        "truncated": rd.truncated_at is not None,
        "truncated_at": rd.truncated_at,
        "skipped": list(rd.skipped),
        "ignored_events": rd.ignored,
        "start_time_since_epoch_us": rd.start_epoch_us,
        "first_ts_us": int(ev.ts.min()) if len(ev.ts) else None,
        "last_ts_us": int(ev.ts.max()) if len(ev.ts) else None,
    }


def negotiation_names(vocab: np.ndarray) -> np.ndarray:
    """True for the codes of ``NEGOTIATE_*`` names."""
    return np.array([s.startswith(NEGOTIATE) for s in vocab], dtype=bool)


def span_columns(ev: Events, vocab: np.ndarray, last_ts: int) -> tuple[Spans, int]:
    """The spans (see :class:`Spans`), and the number of orphan ``E`` records."""
    b_ev, e_ev, spid, sdepth, n_orphan = pair_begins_and_ends(ev.ph, ev.pid)
    closed = e_ev >= 0
    sname = ev.name[b_ev].astype(np.int64)
    start = ev.ts[b_ev]
    end = np.where(closed, ev.ts[np.maximum(e_ev, 0)], last_ts)
    if not closed.all():
        end = np.maximum(end, start)
    is_neg = negotiation_names(vocab)[sname] & (sdepth == 0)
    top = (sdepth == 0) & ~is_neg
    parent = _ffill_in_runs(sname, top, _run_starts(spid))  # activity -> its op's name
    kind = np.where(sdepth > 0, KIND_ACTIVITY, np.where(is_neg, KIND_NEGOTIATE, KIND_OP))
    spans = Spans(
        b_ev=b_ev,
        e_ev=e_ev,
        pid=spid,
        depth=sdepth,
        name=sname,
        op=np.where(sdepth == 0, sname, parent),
        start=start,
        end=end,
        closed=closed,
        kind=kind,
    )
    return spans, n_orphan


def file_order(spans: Spans, n_events: int) -> np.ndarray:
    """The order that puts ``spans`` in file order of their ``B``: a scatter over the event
    indices instead of a sort."""
    slot = np.full(n_events, -1, dtype=np.int64)
    slot[spans.b_ev] = np.arange(len(spans.b_ev))
    return slot[slot >= 0]


def rank_numbers(vocab: np.ndarray) -> np.ndarray:
    """The rank number a tick's name stands for, per code (-1: not a rank number)."""
    return np.array(
        [
            int(s) if s.isascii() and s.isdigit() and len(s) <= MAX_RANK_DIGITS else -1
            for s in vocab
        ],
        dtype=np.int64,
    )


def tick_events(ev: Events, vocab: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank readiness ticks: the event indices of the ``X`` records of a pid whose name is a
    rank number (file order), and those ranks."""
    x = np.flatnonzero(ev.ph == ord("X"))
    rank = rank_numbers(vocab)[ev.name[x]]
    keep = (rank >= 0) & (ev.pid[x] >= 0)
    return x[keep], rank[keep]


def cycle_events(ev: Events, vocab: np.ndarray) -> np.ndarray:
    """Event indices of the ``CYCLE_START`` marks, in time order (file order among equals)."""
    is_cycle = np.array([s == CYCLE_START for s in vocab], dtype=bool)
    sel = np.flatnonzero(ev.ph == ord("i"))
    sel = sel[is_cycle[ev.name[sel]]]
    start = ev.ts[sel]
    if len(start) > 1 and (start[1:] < start[:-1]).any():
        sel = sel[np.argsort(start, kind="stable")]
    return sel


def _run_starts(key: np.ndarray) -> np.ndarray:
    """True at the first element of each run of equal values."""
    first = np.ones(len(key), dtype=bool)
    if len(key) > 1:
        first[1:] = key[1:] != key[:-1]
    return first


def _by_pid(pid: np.ndarray) -> np.ndarray:
    """Stable order by pid."""
    return _stable_order(_dense_rank(pid) if len(pid) and pid.max() >= SMALL_KEY else pid)


def _stable_order(key: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative integer keys (a radix sort when they fit 16 bits)."""
    if len(key) and key.min() >= 0 and key.max() < SMALL_KEY:
        return np.argsort(key.astype(np.uint16), kind="stable")
    return np.argsort(key, kind="stable")


def _dense_rank(values: np.ndarray) -> np.ndarray:
    """0, 1, 2 ... in the order of the distinct values (keeps sort keys small)."""
    if not len(values) or (values.min() >= 0 and values.max() < SMALL_KEY):
        return values
    return np.unique(values, return_inverse=True)[1].reshape(-1)


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct non-negative integers of ``values``, ascending (one counting pass when
    they are small, else a sort)."""
    if len(values) and values.max() < SMALL_KEY:
        return np.flatnonzero(np.bincount(values, minlength=0))
    return np.unique(values)


def _ffill_in_runs(values: np.ndarray, has: np.ndarray, run_first: np.ndarray) -> np.ndarray:
    """Forward-fill ``values`` where ``has`` within runs; -1 before the first value of a run."""
    carrier = np.where(has, values, -1)
    idx = np.where(has | run_first, np.arange(len(values)), 0)
    return carrier[np.maximum.accumulate(idx)] if len(idx) else carrier


def pair_begins_and_ends(
    ph: np.ndarray, pids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Pair ``B`` and ``E`` records per pid with stack semantics, vectorised.

    Args:
        ph, pids: the phase letter and pid of each event, in file order.

    Returns:
        For each ``B``, in (pid, file) order: its event index, the event index of the ``E``
        that closes it (-1: none), its pid and depth; and the number of orphan ``E`` records
        (closing nothing, dropped).
    """
    be = np.flatnonzero(((ph == ord("B")) | (ph == ord("E"))) & (pids >= 0))
    order = be[_by_pid(pids[be])]  # event indices by pid, then file order
    del be
    pid = pids[order]
    is_b = ph[order] == ord("B")
    depth, orphan = _stack_depths(pid, is_b)
    n_orphan = int(orphan.sum())
    if n_orphan:
        keep = ~orphan
        order, pid, is_b, depth = order[keep], pid[keep], is_b[keep], depth[keep]
    partner = _closing_partners(pid, is_b, depth)
    bi = np.flatnonzero(is_b)  # B's in (pid, file) order
    ei = partner[bi]
    del partner
    e_ev = np.where(ei >= 0, order[np.maximum(ei, 0)], -1)
    return order[bi], e_ev, pid[bi], depth[bi], n_orphan


def _stack_depths(pid: np.ndarray, is_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth of each ``B`` (or of the ``B`` an ``E`` closes) in per-pid runs of records in file
    order, and which ``E`` records are orphans."""
    first = _run_starts(pid)
    grp = np.cumsum(first, dtype=np.int64) - 1
    delta = np.where(is_b, 1, -1).astype(np.int64)
    level = np.cumsum(delta)
    level -= (level - delta)[first][grp]  # stack level after each event, within its pid
    del delta
    # the running minimum per pid (offset so earlier pids never win) finds orphan E's:
    # an E that takes the level to a new low below 0 closes nothing
    big = np.int64(len(level) + 2)
    floor = np.minimum(np.minimum.accumulate(level - grp * big) + grp * big, 0)
    del grp
    prev_floor = np.empty_like(floor)
    prev_floor[1:] = floor[:-1]
    prev_floor[first] = 0
    orphan = ~is_b & (level < prev_floor)
    del prev_floor
    depth = level - floor - is_b
    return depth, orphan


def _closing_partners(pid: np.ndarray, is_b: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """For each ``B``, the position of the ``E`` that closes it (-1: none): within one (pid,
    depth), B's and E's alternate in file order, so neighbours pair."""
    dmax = int(depth.max(initial=0)) + 1
    key = _dense_rank(pid).astype(np.int64) * dmax + depth
    pord = _stable_order(key)
    kb = is_b[pord]
    closes = np.zeros(len(pord), dtype=bool)
    if len(pord) > 1:
        ks = key[pord]
        closes[:-1] = ~kb[1:] & (ks[1:] == ks[:-1])
        del ks
    del key
    bpos = np.flatnonzero(kb & closes)
    partner = np.full(len(pid), -1, dtype=np.int64)
    partner[pord[bpos]] = pord[bpos + 1]
    return partner
