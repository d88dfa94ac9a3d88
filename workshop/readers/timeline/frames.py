"""Event columns -> the spans, ticks, cycles and tensors DataFrames of a :class:`Timeline`.

The columns themselves come from :mod:`.columns` (numpy); this module names them, turns codes
into categoricals and adds what only the DataFrames carry (dtype and shape, negotiation index
and lateness of ticks).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pandas as pd

from workshop.readers.timeline.columns import (
    KIND_OP,
    NEGOTIATE,
    Spans,
    _by_pid,
    _ffill_in_runs,
    _run_starts,
    distinct,
    file_order,
    negotiation_names,
    tables,
)
from workshop.readers.timeline.events import Events
from workshop.readers.timeline.model import Timeline, TimelineWarning
from workshop.readers.timeline.records import Reader

KINDS = pd.CategoricalDtype(["negotiate", "op", "activity"])  # codes: columns.KIND_*

TensorOf = Callable[[np.ndarray], pd.Categorical]


def build_timeline(rd: Reader, ev: Events) -> Timeline:
    """The :class:`Timeline` of the events read, with ``rd``'s metadata and warnings."""
    t = tables(rd, ev)
    tensors, tensor_of = _tensors(rd, ev)
    spans = _spans(t.spans, ev, t.vocab, tensor_of)
    ticks = _ticks(ev, t.vocab, t.ticks, t.tick_ranks, tensor_of)
    cycles = _cycles(ev, t.cycles, t.last_ts)
    for msg in rd.warnings:
        warnings.warn(msg, TimelineWarning, stacklevel=4)  # the caller of read_timeline
    return Timeline(spans=spans, ticks=ticks, cycles=cycles, tensors=tensors, metadata=t.metadata)


def _tensors(rd: Reader, ev: Events) -> tuple[pd.DataFrame, TensorOf]:
    """The tensors table (named and unnamed pids), and the function that gives the tensor
    column of an array of pids."""
    used = distinct(ev.pid[ev.pid >= 0]).tolist()
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


def _spans(sp: Spans, ev: Events, vocab: np.ndarray, tensor_of: TensorOf) -> pd.DataFrame:
    """The spans table (see :class:`Timeline`)."""
    top = sp.kind == KIND_OP  # op spans carry the dtype and shape of their closing E
    e_at = np.maximum(sp.e_ev, 0)
    dtype = np.where(sp.closed & top, ev.dtype[e_at], -1)
    shape = np.where(sp.closed & top, ev.shape[e_at], -1)
    op_name = np.array([s.removeprefix(NEGOTIATE) for s in vocab], dtype=object)
    fo = file_order(sp, len(ev.ph))
    return pd.DataFrame(
        {
            "tensor": tensor_of(sp.pid[fo]),
            "pid": sp.pid[fo],
            "op": _categorical(sp.op, op_name)[fo],
            "kind": pd.Categorical.from_codes(sp.kind[fo], dtype=KINDS),
            "name": _categorical(sp.name, vocab)[fo],
            "start_us": sp.start[fo],
            "end_us": sp.end[fo],
            "dur_us": (sp.end - sp.start)[fo],
            "depth": sp.depth[fo].astype(np.int8),
            "closed": sp.closed[fo],
            "dtype": _categorical(dtype, vocab)[fo],
            "shape": _categorical(shape, vocab)[fo],
            "seq": sp.b_ev[fo],
            "end_seq": sp.e_ev[fo],
        },
        copy=False,
    )


def _ticks(
    ev: Events, vocab: np.ndarray, x: np.ndarray, rank: np.ndarray, tensor_of: TensorOf
) -> pd.DataFrame:
    """Rank readiness ticks (the ``X`` events ``x``, in file order, of ranks ``rank``), each
    with the negotiation it belongs to: the last ``NEGOTIATE_*`` begin of its pid before it."""
    b = np.flatnonzero(ev.ph == ord("B"))
    b = b[negotiation_names(vocab)[ev.name[b]] & (ev.pid[b] >= 0)]  # negotiations begin
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
    fo = np.argsort(sel, kind="stable")  # file order: ``x`` again
    pid, negotiation, neg_name = pid[fo], negotiation[fo], neg_name[fo]
    ts, lateness = ts[fo], lateness[fo]
    suffix = np.array(
        [s.removeprefix(NEGOTIATE) if s.startswith(NEGOTIATE) else "" for s in vocab],
        dtype=object,
    )
    return pd.DataFrame(
        {
            "tensor": tensor_of(pid),
            "pid": pid,
            "op": _categorical(np.where(neg_name >= 0, neg_name, -1), suffix),
            "negotiation": negotiation.astype(np.int64),
            "rank": rank,
            "ts_us": ts,
            "lateness_us": lateness,
            "seq": x,
        },
        copy=False,
    )


def _cycles(ev: Events, sel: np.ndarray, last_ts: int) -> pd.DataFrame:
    """``CYCLE_START`` marks (``HOROVOD_TIMELINE_MARK_CYCLES=1``), events ``sel`` in time
    order."""
    start = ev.ts[sel]
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
