"""The numbers of a Horovod timeline (``workshop timeline summary``), counted with numpy.

:func:`count_summary` is the one implementation: it counts :class:`SummaryColumns`, which
:func:`summarize_file` takes straight from the event columns of a file (the spans, ticks and
cycles of the same :func:`.columns.tables` as a :class:`~.model.Timeline`'s, without building
any DataFrame: neither pandas nor the analysis package is imported, which is most of the
command's start-up time; ``data/benchmarks/timeline-reader/``), and
:func:`workshop.analysis.timeline.timeline_summary` from a Timeline's DataFrames.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from workshop.readers.timeline.columns import (
    KIND_ACTIVITY,
    KIND_NEGOTIATE,
    KIND_OP,
    NEGOTIATE,
    distinct,
    tables,
)
from workshop.readers.timeline.libraries import library_of
from workshop.readers.timeline.model import TimelineWarning
from workshop.readers.timeline.read import scan_events, timeline_path
from workshop.readers.timeline.source import open_file


@dataclass
class SummaryColumns:
    """What the summary counts, as numpy columns: one entry per span in ``kind`` to ``seq``.

    Attributes:
        kind: the span's kind code (``columns.KIND_NEGOTIATE`` / ``KIND_OP`` /
            ``KIND_ACTIVITY``).
        op, op_names: the op of the span (ALLREDUCE ...), as a code into ``op_names`` (-1:
            none; equal strings under two codes count as one).
        name, names: the span's own name, as a code into ``names`` (-1: none).
        dur_us: the span's duration.
        seq: event index of the span's ``B`` (ties go in order of first occurrence).
        pids: the pid of every span and of every readiness tick.
        tensor_names: the tensor name of a pid (``pid N`` when it has none).
        tick_ranks: the rank of every readiness tick.
        cycles: ``CYCLE_START`` marks.
        metadata: the Timeline's metadata (``first_ts_us``, ``last_ts_us``, ``truncated``,
            ``events``, ``unclosed``, ``orphan_ends``, ``skipped``, ``warnings``).
    """

    kind: np.ndarray
    op: np.ndarray
    op_names: list[str]
    name: np.ndarray
    names: list[str]
    dur_us: np.ndarray
    seq: np.ndarray
    pids: np.ndarray
    tensor_names: dict[int, str]
    tick_ranks: np.ndarray
    cycles: int
    metadata: dict[str, Any]


def summarize_file(path: str | os.PathLike[str], *, progress: bool = False) -> dict[str, Any]:
    """The key numbers of a Horovod timeline file.

    Args:
        path: as for :func:`~.read.read_timeline`.
        progress: show a progress bar.

    Returns:
        :func:`count_summary`'s dict, the same as
        :func:`workshop.analysis.timeline.timeline_summary` of the file's Timeline. Warnings are
        raised as by :func:`~.read.read_timeline`.

    Raises:
        FileNotFoundError, TimelineFormatError: as :func:`~.read.read_timeline`.
    """
    p = timeline_path(path)
    src, problems, cut_at = open_file(p)
    try:  # the event columns may view the open file: count before closing it
        rd, ev = scan_events(src, str(p), problems, cut_at, progress)
        t = tables(rd, ev)
        strings = t.vocab.tolist()[:-1]  # by code
        summary = count_summary(
            SummaryColumns(
                kind=t.spans.kind,
                op=t.spans.op,
                op_names=[s.removeprefix(NEGOTIATE) for s in strings],
                name=t.spans.name,
                names=strings,
                dur_us=t.spans.end - t.spans.start,
                seq=t.spans.b_ev,
                pids=np.concatenate([t.spans.pid, ev.pid[t.ticks]]),
                tensor_names=rd.tensor_names,
                tick_ranks=t.tick_ranks,
                cycles=len(t.cycles),
                metadata=t.metadata,
            )
        )
    finally:
        src.close()
    for msg in rd.warnings:
        warnings.warn(msg, TimelineWarning, stacklevel=2)
    return summary


def count_summary(c: SummaryColumns) -> dict[str, Any]:
    """The numbers of ``workshop timeline summary --json``, counted from ``c``.

    Returns:
        ``tensors`` (distinct tensor names, count), ``tensor_names``, ``ranks`` (distinct
        ranks seen in ticks, count), ``rank_ids``, ``ops`` (processing ops by op name, most
        frequent first), ``activities_us`` (total by activity name, largest first),
        ``negotiation_us`` (total by ``NEGOTIATE_`` name), ``negotiation_share`` (negotiation
        over negotiation + processing time of the ops with a name; None without any),
        ``backend``, ``span_us``, ``truncated``, ``events``, ``cycles``, ``unclosed``,
        ``orphan_ends``, ``skipped_bytes``, ``warnings``.
    """
    md, dur = c.metadata, c.dur_us
    pids = distinct(c.pids.astype(np.int64)).tolist()
    used = sorted({c.tensor_names.get(p, f"pid {p}") for p in pids})
    ranks = distinct(c.tick_ranks).tolist()
    is_op = (c.kind == KIND_OP) & (c.op >= 0)
    op_ids, op_names = _ids(c.op, c.op_names)
    ops = _by_count(op_ids[is_op], c.seq[is_op], op_names)
    neg_us = _sum_by(c.kind == KIND_NEGOTIATE, c.op, dur)
    pro_us = _sum_by(is_op, c.op, dur)
    total = neg_us + pro_us
    first = md["first_ts_us"]
    return {
        "tensors": len(used),
        "tensor_names": used,
        "ranks": len(ranks),
        "rank_ids": ranks,
        "ops": ops,
        "activities_us": _totals(c.kind == KIND_ACTIVITY, c.name, c.names, dur),
        "negotiation_us": _totals(c.kind == KIND_NEGOTIATE, c.name, c.names, dur),
        "negotiation_share": float(np.float64(neg_us) / np.float64(total)) if total > 0 else None,
        "backend": _backend(c.kind, op_ids, op_names, c.name, c.names, c.seq, ops),
        "span_us": 0 if first is None else int(md["last_ts_us"] - first),
        "truncated": bool(md["truncated"]),
        "events": int(md["events"]),
        "cycles": c.cycles,
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
    """The library of the ALLREDUCE op, else of the most frequent op (the last in order of first
    occurrence among equals), as :func:`workshop.analysis.timeline.backend` says."""
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
