"""The numbers of ``workshop timeline summary``, read straight from the event columns.

:func:`summarize_file` returns what ``timeline_summary(read_timeline(path))``
(:func:`workshop.analysis.timeline.timeline_summary`) returns, value for value and key for
key, without building the DataFrames: the spans, ticks and cycles come from the same
:func:`.columns.tables` as a :class:`~.model.Timeline`'s, and are counted with numpy. Neither
pandas nor the analysis package is imported, which is most of the command's start-up time.
``tests/test_timeline_cli.py`` compares the two on every recording in ``data/timelines``.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from workshop.readers.timeline.columns import (
    KIND_ACTIVITY,
    KIND_NEGOTIATE,
    KIND_OP,
    NEGOTIATE,
    Tables,
    distinct,
    tables,
)
from workshop.readers.timeline.libraries import library_of
from workshop.readers.timeline.model import TimelineWarning
from workshop.readers.timeline.read import scan_events, timeline_path
from workshop.readers.timeline.records import Reader
from workshop.readers.timeline.source import open_file


def summarize_file(path: str | os.PathLike[str], *, progress: bool = False) -> dict[str, Any]:
    """The key numbers of a Horovod timeline file.

    Args:
        path: as for :func:`~.read.read_timeline`.
        progress: show a progress bar.

    Returns:
        The dict of :func:`workshop.analysis.timeline.timeline_summary` (same keys, order and
        values). Warnings are raised as by :func:`~.read.read_timeline`.

    Raises:
        FileNotFoundError, TimelineFormatError: as :func:`~.read.read_timeline`.
    """
    p = timeline_path(path)
    src, problems, cut_at = open_file(p)
    try:
        rd, ev = scan_events(src, str(p), problems, cut_at, progress)
        t = tables(rd, ev)
        summary = _summary(rd, t, ev.pid)
    finally:
        src.close()
    for msg in rd.warnings:
        warnings.warn(msg, TimelineWarning, stacklevel=2)
    return summary


def _summary(rd: Reader, t: Tables, event_pid: np.ndarray) -> dict[str, Any]:
    sp, md = t.spans, t.metadata
    strings = t.vocab.tolist()[:-1]  # by code
    op_strings = [s.removeprefix(NEGOTIATE) for s in strings]
    dur = sp.end - sp.start
    pids = distinct(np.concatenate([sp.pid, event_pid[t.ticks]]).astype(np.int64)).tolist()
    used = sorted({rd.tensor_names.get(p, f"pid {p}") for p in pids})
    ranks = distinct(t.tick_ranks).tolist()
    is_op = (sp.kind == KIND_OP) & (sp.op >= 0)
    op_ids, op_names = _ids(sp.op, op_strings)
    ops = _by_count(op_ids[is_op], sp.b_ev[is_op], op_names)
    neg_us = _sum_by(sp.kind == KIND_NEGOTIATE, sp.op, dur)
    pro_us = _sum_by(is_op, sp.op, dur)
    total = neg_us + pro_us  # of the ops with a name, like analysis.negotiation_share
    first = md["first_ts_us"]
    return {
        "tensors": len(used),
        "tensor_names": used,
        "ranks": len(ranks),
        "rank_ids": ranks,
        "ops": ops,
        "activities_us": _totals(sp.kind == KIND_ACTIVITY, sp.name, strings, dur),
        "negotiation_us": _totals(sp.kind == KIND_NEGOTIATE, sp.name, strings, dur),
        "negotiation_share": float(np.float64(neg_us) / np.float64(total)) if total > 0 else None,
        "backend": _backend(sp.kind, op_ids, op_names, sp.name, strings, sp.b_ev, ops),
        "span_us": 0 if first is None else int(md["last_ts_us"] - first),
        "truncated": bool(md["truncated"]),
        "events": int(md["events"]),
        "cycles": len(t.cycles),
        "unclosed": int(md["unclosed"]),
        "orphan_ends": int(md["orphan_ends"]),
        "skipped_bytes": int(sum(n for _, n in md["skipped"])),
        "warnings": list(md["warnings"]),
    }


def _ids(codes: np.ndarray, strings: list[str]) -> tuple[np.ndarray, list[str]]:
    """Dense ids of ``strings[codes]`` (equal strings, equal ids; code -1 -> -1), and the string
    of each id."""
    names = list(dict.fromkeys(strings))
    index = {s: i for i, s in enumerate(names)}
    of_code = np.array([index[s] for s in strings] + [-1], dtype=np.int64)  # [-1] -> -1
    return of_code[codes], names


def _by_count(ids: np.ndarray, seq: np.ndarray, names: list[str]) -> dict[str, int]:
    """How often each id occurs: most frequent first, ties in order of first occurrence
    (``seq``), as pandas' ``value_counts``."""
    counts = np.bincount(ids, minlength=len(names))
    first = np.full(len(names), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, ids, seq)
    present = np.flatnonzero(counts).tolist()
    present.sort(key=lambda i: (-counts[i], first[i]))
    return {names[i]: int(counts[i]) for i in present}


def _sum_by(rows: np.ndarray, codes: np.ndarray, dur: np.ndarray) -> int:
    """Exact int64 total of ``dur`` over ``rows`` whose code names something."""
    return int(dur[rows & (codes >= 0)].sum())


def _totals(
    rows: np.ndarray, codes: np.ndarray, strings: list[str], dur: np.ndarray
) -> dict[str, int]:
    """Total ``dur`` of ``rows`` by the string of their code (none: left out): largest first,
    ties in string order (a groupby, then a stable sort by total)."""
    rows = rows & (codes >= 0)
    ids, names = _ids(codes[rows], strings)
    sums = np.zeros(len(names), dtype=np.int64)
    np.add.at(sums, ids, dur[rows])
    present = np.flatnonzero(np.bincount(ids, minlength=len(names))).tolist()
    present.sort(key=lambda i: (-sums[i], names[i]))
    return {names[i]: int(sums[i]) for i in present}


def _backend(
    kind: np.ndarray,
    op_ids: np.ndarray,
    op_names: list[str],
    name: np.ndarray,
    strings: list[str],
    seq: np.ndarray,
    ops: dict[str, int],
) -> str:
    """:func:`workshop.analysis.timeline.backend`: the library of the ALLREDUCE op, else of the
    most frequent op (the last in order of first occurrence among equals)."""
    act = (kind == KIND_ACTIVITY) & (name >= 0)
    seen_gloo = any(strings[c].startswith("GLOO_") for c in distinct(name[act]).tolist())
    act &= op_ids >= 0
    pairs = distinct(op_ids[act] * len(strings) + name[act]).tolist()
    evidence: dict[str, set[str]] = {}
    for pair in pairs:
        op, activity = divmod(pair, len(strings))
        evidence.setdefault(op_names[op], set()).add(strings[activity])
    is_op = (kind == KIND_OP) & (op_ids >= 0)
    first = np.full(len(op_names), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, op_ids[is_op], seq[is_op])
    found = []  # (op, library, count) in order of first occurrence
    for i in np.argsort(first, kind="stable").tolist():
        if first[i] == np.iinfo(np.int64).max:
            break
        library, _ = library_of(sorted(evidence.get(op_names[i], ())), seen_gloo)
        if library != "unknown":
            found.append((op_names[i], library, ops[op_names[i]]))
    if not found:
        return "unknown"
    for op, library, _ in found:
        if op == "ALLREDUCE":
            return library
    most = max(count for _, _, count in found)
    return [library for _, library, count in found if count == most][-1]
