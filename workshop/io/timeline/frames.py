"""Event columns -> the spans, ticks, cycles and tensors DataFrames of a :class:`Timeline`.

Everything is vectorised: spans pair ``B`` and ``E`` records per pid with stack semantics
through cumulative sums over a stable sort by pid, not a Python loop over records.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from workshop.io.timeline.events import Events
from workshop.io.timeline.model import Timeline, TimelineWarning
from workshop.io.timeline.records import Reader

NEGOTIATE = "NEGOTIATE_"  # prefix of negotiation span names: NEGOTIATE_ALLREDUCE ...
CYCLE_START = "CYCLE_START"  # the instant HOROVOD_TIMELINE_MARK_CYCLES=1 adds
MAX_RANK_DIGITS = 9  # a tick's name is the rank number
SMALL_KEY = 65536  # sort keys below this sort as uint16 (a radix sort)
KINDS = pd.CategoricalDtype(["negotiate", "op", "activity"])

TensorOf = Callable[[np.ndarray], pd.Categorical]


def build_timeline(rd: Reader, ev: Events) -> Timeline:
    """The :class:`Timeline` of the events read, with ``rd``'s metadata and warnings."""
    vocab = np.array(rd.vocab.strings + [""], dtype=object)  # code -1 reads ""
    md = _metadata(rd, ev)
    if rd.truncated_at is not None:
        rd.warn(
            f"data cut at byte {rd.truncated_at} (partial last record, a killed or running "
            f"job): kept the {len(ev.ts)} events before it (and the metadata records)"
        )
    last_ts = md["last_ts_us"] or 0
    ev.off = np.zeros(0, np.int64)  # not needed any more
    tensors, tensor_of = _tensors(rd, ev)
    spans, n_orphan, n_unclosed = _spans(ev, vocab, tensor_of, last_ts)
    ticks = _ticks(ev, vocab, tensor_of)
    cycles = _cycles(ev, vocab, last_ts)
    md["orphan_ends"] = n_orphan
    md["unclosed"] = n_unclosed
    if n_orphan:
        rd.warn(
            f"{n_orphan} 'E' records close nothing (the timeline started while tensors were in "
            "flight, e.g. hvd.start_timeline): dropped"
        )
    if n_unclosed:
        rd.warn(
            f"{n_unclosed} spans have no 'E' (the timeline stopped while tensors were in "
            "flight): they run to the last timestamp, closed=False"
        )
    md["warnings"] = list(rd.warnings)
    for msg in rd.warnings:
        warnings.warn(msg, TimelineWarning, stacklevel=4)  # the caller of read_timeline
    return Timeline(spans=spans, ticks=ticks, cycles=cycles, tensors=tensors, metadata=md)


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


def _tensors(rd: Reader, ev: Events) -> tuple[pd.DataFrame, TensorOf]:
    """The tensors table (named and unnamed pids), and the function that gives the tensor
    column of an array of pids."""
    used = _distinct(ev.pid[ev.pid >= 0]).tolist()
    pids = sorted(set(rd.tensor_names) | set(used))
    names = [rd.tensor_names.get(p, f"pid {p}") for p in pids]
    categories = list(dict.fromkeys(names))
    tensor_dtype = pd.CategoricalDtype(categories)
    cat_index = {s: i for i, s in enumerate(categories)}
    pid_arr = np.array(pids, dtype=np.int64)
    pid_code = np.array([cat_index[s] for s in names], dtype=np.int64)

    def tensor_of(pid: np.ndarray) -> pd.Categorical:
        if not len(pid_arr):
            return pd.Categorical.from_codes(np.full(len(pid), -1), dtype=tensor_dtype)
        j = np.clip(np.searchsorted(pid_arr, pid), 0, len(pid_arr) - 1)
        codes = np.where((pid >= 0) & (pid_arr[j] == pid), pid_code[j], -1)
        return pd.Categorical.from_codes(codes, dtype=tensor_dtype)

    tensors = pd.DataFrame(
        {
            "pid": pid_arr,
            "tensor": pd.Categorical(names, dtype=tensor_dtype),
            "sort_index": np.array([rd.sort_index.get(p, p) for p in pids], dtype=np.int64),
        }
    )
    return tensors, tensor_of


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


def _distinct(values: np.ndarray) -> np.ndarray:
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


def _spans(
    ev: Events, vocab: np.ndarray, tensor_of: TensorOf, last_ts: int
) -> tuple[pd.DataFrame, int, int]:
    """The spans table (see :class:`Timeline`), the number of orphan ``E`` records and the
    number of unclosed spans."""
    b_ev, e_ev, spid, sdepth, n_orphan = _pair_begins_and_ends(ev)
    closed = e_ev >= 0
    n_unclosed = int((~closed).sum())
    sname = ev.name[b_ev].astype(np.int64)
    start = ev.ts[b_ev]
    end = np.where(closed, ev.ts[np.maximum(e_ev, 0)], last_ts)
    if n_unclosed:
        end = np.maximum(end, start)

    name_neg = np.array([s.startswith(NEGOTIATE) for s in vocab], dtype=bool)
    is_neg = name_neg[sname] & (sdepth == 0)
    top = (sdepth == 0) & ~is_neg
    parent = _ffill_in_runs(sname, top, _run_starts(spid))  # activity -> its op's name
    op_name = np.array([s.removeprefix(NEGOTIATE) for s in vocab], dtype=object)
    op_col = _categorical(np.where(sdepth == 0, sname, parent), op_name)
    dtype = np.where(closed & top, ev.dtype[np.maximum(e_ev, 0)], -1)
    shape = np.where(closed & top, ev.shape[np.maximum(e_ev, 0)], -1)
    kind = np.where(sdepth > 0, 2, np.where(is_neg, 0, 1))  # codes of KINDS

    # file order of the B's: a scatter over event indices instead of a sort
    slot = np.full(len(ev.ph), -1, dtype=np.int64)
    slot[b_ev] = np.arange(len(b_ev))
    fo = slot[slot >= 0]
    del slot
    spans = pd.DataFrame(
        {
            "tensor": tensor_of(spid[fo]),
            "pid": spid[fo],
            "op": op_col[fo],
            "kind": pd.Categorical.from_codes(kind[fo], dtype=KINDS),
            "name": _categorical(sname, vocab)[fo],
            "start_us": start[fo],
            "end_us": end[fo],
            "dur_us": (end - start)[fo],
            "depth": sdepth[fo].astype(np.int8),
            "closed": closed[fo],
            "dtype": _categorical(dtype, vocab)[fo],
            "shape": _categorical(shape, vocab)[fo],
            "seq": b_ev[fo],
            "end_seq": e_ev[fo],
        },
        copy=False,
    )
    return spans, n_orphan, n_unclosed


def _pair_begins_and_ends(
    ev: Events,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Pair ``B`` and ``E`` records per pid with stack semantics, vectorised.

    Returns:
        For each ``B``, in (pid, file) order: its event index, the event index of the ``E``
        that closes it (-1: none), its pid and depth; and the number of orphan ``E`` records
        (closing nothing, dropped).
    """
    be = np.flatnonzero(((ev.ph == ord("B")) | (ev.ph == ord("E"))) & (ev.pid >= 0))
    order = be[_by_pid(ev.pid[be])]  # event indices by pid, then file order
    del be
    pid = ev.pid[order]
    is_b = ev.ph[order] == ord("B")
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


def _categorical(codes: np.ndarray, strings: np.ndarray) -> pd.Categorical:
    """Categorical of ``strings[codes]`` (-1 -> missing) holding only the strings used."""
    codes = np.asarray(codes, dtype=np.int64)
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(strings)))
    cats = list(dict.fromkeys(strings[used].tolist()))
    index = {s: i for i, s in enumerate(cats)}
    remap = np.full(len(strings), -1, dtype=np.int64)
    remap[used] = [index[s] for s in strings[used].tolist()]
    return pd.Categorical.from_codes(
        np.where(codes >= 0, remap[codes], -1), dtype=pd.CategoricalDtype(cats)
    )


def _ticks(ev: Events, vocab: np.ndarray, tensor_of: TensorOf) -> pd.DataFrame:
    """Rank readiness ticks: ``X`` records whose name is a rank number."""
    rank_of = np.array(
        [
            int(s) if s.isascii() and s.isdigit() and len(s) <= MAX_RANK_DIGITS else -1
            for s in vocab
        ],
        dtype=np.int64,
    )
    name_neg = np.array([s.startswith(NEGOTIATE) for s in vocab], dtype=bool)
    b = np.flatnonzero(ev.ph == ord("B"))
    b = b[name_neg[ev.name[b]] & (ev.pid[b] >= 0)]  # negotiations begin
    x = np.flatnonzero(ev.ph == ord("X"))
    x = x[(rank_of[ev.name[x]] >= 0) & (ev.pid[x] >= 0)]  # ticks
    sel = np.concatenate([b, x])
    is_neg = np.arange(len(sel)) < len(b)
    order = np.argsort(sel, kind="stable")  # file order, then (stable) by pid
    order = order[_by_pid(ev.pid[sel[order]])]
    sel, neg = sel[order], is_neg[order]
    pid = ev.pid[sel]
    first = _run_starts(pid)
    c = np.cumsum(neg)
    negotiation = c - (c - neg)[first][np.cumsum(first) - 1] - 1
    neg_name = _ffill_in_runs(ev.name[sel].astype(np.int64), neg, first)
    t = np.flatnonzero(~neg)
    sel, pid, negotiation, neg_name = sel[t], pid[t], negotiation[t], neg_name[t]
    ts = ev.ts[sel]
    # lateness after the first tick of the same negotiation: (pid, negotiation) runs are
    # contiguous in this (pid, file) order
    run = _run_starts(pid) | _run_starts(negotiation)
    run_id = np.cumsum(run) - 1
    lateness = ts - np.minimum.reduceat(ts, np.flatnonzero(run))[run_id] if len(ts) else ts
    fo = np.argsort(sel, kind="stable")  # file order
    sel, pid, negotiation, neg_name = sel[fo], pid[fo], negotiation[fo], neg_name[fo]
    ts, lateness = ts[fo], lateness[fo]
    suffix = np.array(
        [s.removeprefix(NEGOTIATE) if s.startswith(NEGOTIATE) else "" for s in vocab],
        dtype=object,
    )
    ticks = pd.DataFrame(
        {
            "tensor": tensor_of(pid),
            "pid": pid,
            "op": _categorical(np.where(neg_name >= 0, neg_name, -1), suffix),
            "negotiation": negotiation.astype(np.int64),
            "rank": rank_of[ev.name[sel]],
            "ts_us": ts,
            "lateness_us": lateness,
            "seq": sel,
        },
        copy=False,
    )
    return ticks


def _cycles(ev: Events, vocab: np.ndarray, last_ts: int) -> pd.DataFrame:
    """``CYCLE_START`` marks (``HOROVOD_TIMELINE_MARK_CYCLES=1``)."""
    is_cycle = np.array([s == CYCLE_START for s in vocab], dtype=bool)
    sel = np.flatnonzero(ev.ph == ord("i"))
    sel = sel[is_cycle[ev.name[sel]]]
    start = ev.ts[sel]
    if len(start) > 1 and (start[1:] < start[:-1]).any():
        order = np.argsort(start, kind="stable")
        sel, start = sel[order], start[order]
    end = np.append(start[1:], max(last_ts, int(start[-1]))) if len(start) else start
    return pd.DataFrame(
        {
            "cycle": np.arange(len(start), dtype=np.int64),
            "start_us": start,
            "end_us": end,
            "dur_us": end - start,
            "seq": sel,
        },
        copy=False,
    )
