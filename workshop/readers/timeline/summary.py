"""The numbers of a Horovod timeline (``workshop timeline summary``), counted with numpy.

One implementation, in two steps: a :class:`Tally` adds up spans, ticks and pids (counts,
totals and first occurrences per string code, so tallies of consecutive batches add up to the
tally of the whole), and :func:`finish` turns it into the summary's dict.

* :func:`summarize_file` tallies a file batch by batch in one streaming pass (:mod:`.stream`):
  its memory holds one batch and the spans still open, not the file, and it builds no
  DataFrame (neither pandas nor the analysis package is imported, which is most of the
  command's start-up time; ``data/benchmarks/timeline-reader/``);
* :func:`count_summary` tallies the :class:`SummaryColumns` of a whole Timeline at once
  (:func:`workshop.analysis.timeline.timeline_summary`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from workshop.readers.timeline.columns import (
    BACKWARDS,
    KIND_ACTIVITY,
    KIND_NEGOTIATE,
    KIND_OP,
    NEGOTIATE,
    ORPHANS,
    UNCLOSED,
    cut_warning,
    distinct,
)
from workshop.readers.timeline.events import Events
from workshop.readers.timeline.libraries import library_of
from workshop.readers.timeline.model import TimelineWarning
from workshop.readers.timeline.read import event_batches, timeline_path
from workshop.readers.timeline.records import Reader
from workshop.readers.timeline.source import open_file
from workshop.readers.timeline.stitch import BATCH_BYTES
from workshop.readers.timeline.stream import Codes, Pairing, Spans, cycles_of, ticks_of

NEVER = np.iinfo(np.int64).max  # the first occurrence of what has not occurred


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


def summarize_file(
    path: str | os.PathLike[str], *, progress: bool = False, batch_bytes: int = BATCH_BYTES
) -> dict[str, Any]:
    """The key numbers of a Horovod timeline file, in one streaming pass.

    Args:
        path: as for :func:`~.read.read_timeline`.
        progress: show a progress bar.
        batch_bytes: data read per batch (memory holds the columns of one batch).

    Returns:
        :func:`finish`'s dict, the same as
        :func:`workshop.analysis.timeline.timeline_summary` of the file's Timeline. Warnings are
        raised as by :func:`~.read.read_timeline`. Peak memory does not grow with the
        file's size (a gzip file is decompressed into a temporary file on disk first).

    Raises:
        FileNotFoundError, TimelineFormatError: as :func:`~.read.read_timeline`.
    """
    p = timeline_path(path)
    src, problems, cut_at = open_file(p)
    try:  # the batches view the open file: count before closing it
        rd, batches = event_batches(
            src, str(p), problems, cut_at, progress, batch_bytes=batch_bytes
        )
        summary = _summarize(rd, batches)
    finally:
        src.close()
    for msg in rd.warnings:
        warnings.warn(msg, TimelineWarning, stacklevel=2)
    return summary


def _summarize(rd: Reader, batches: Iterator[Events]) -> dict[str, Any]:
    """Tally every batch; then the spans left open, and the metadata and warnings of
    :func:`.columns.tables`."""
    tally, pairing, codes = Tally(), Pairing(), Codes(rd.vocab)
    first_ts = last_ts = None
    cycles = backwards = 0
    for ev in batches:
        codes.update()
        if len(ev.ts):
            lo, hi = int(ev.ts.min()), int(ev.ts.max())
            first_ts = lo if first_ts is None else min(first_ts, lo)
            last_ts = hi if last_ts is None else max(last_ts, hi)
        backwards += tally.add_spans(pairing.feed(ev, codes))
        x, ranks = ticks_of(ev, codes)
        tally.add_ticks(ev.pid[x], ranks)
        cycles += len(cycles_of(ev, codes))
    if rd.truncated_at is not None:
        rd.warn(cut_warning(rd.truncated_at, pairing.events))
    rest = pairing.rest(last_ts or 0)
    tally.add_spans(rest)
    if len(rest):  # span_columns then ends every span no earlier than it starts, silently
        backwards = 0
    for count, msg in (
        (pairing.orphans, ORPHANS),
        (len(rest), UNCLOSED),
        (backwards, BACKWARDS),
    ):
        if count:
            rd.warn(f"{count} {msg}")
    metadata = {
        "first_ts_us": first_ts,
        "last_ts_us": last_ts,
        "truncated": rd.truncated_at is not None,
        "events": rd.records,
        "unclosed": len(rest),
        "orphan_ends": pairing.orphans,
        "skipped": list(rd.skipped),
        "warnings": list(rd.warnings),
    }
    strings = list(rd.vocab.strings)
    op_names = [s.removeprefix(NEGOTIATE) for s in strings]
    return finish(tally, strings, op_names, rd.tensor_names, cycles, metadata)


def count_summary(c: SummaryColumns) -> dict[str, Any]:
    """The numbers of ``workshop timeline summary --json``, counted from ``c`` (see
    :func:`finish`)."""
    tally = Tally()
    tally.add(c.kind, c.op, c.name, c.dur_us, c.seq)
    tally.pids.update(distinct(c.pids.astype(np.int64)).tolist())
    tally.ranks.update(distinct(c.tick_ranks).tolist())
    return finish(tally, c.names, c.op_names, c.tensor_names, c.cycles, c.metadata)


class Tally:
    """Counts per string code that add up batch by batch: processing ops (count, first
    ``seq``), activity and negotiation totals, negotiation and processing time, which
    activities each op holds, and the pids and ranks seen."""

    def __init__(self) -> None:
        self.op_n = np.zeros(0, dtype=np.int64)
        self.op_first = np.zeros(0, dtype=np.int64)
        self.act_us = np.zeros(0, dtype=np.int64)
        self.act_n = np.zeros(0, dtype=np.int64)
        self.neg_us = np.zeros(0, dtype=np.int64)
        self.neg_n = np.zeros(0, dtype=np.int64)
        self.negotiate_total = 0
        self.processing_total = 0
        self.pairs: set[tuple[int, int]] = set()  # (op code, activity name code)
        self.pids: set[int] = set()
        self.ranks: set[int] = set()

    def add_spans(self, spans: Spans) -> int:
        """Add spans of :mod:`.stream`; returns how many end before they begin (their
        duration counts as 0, as in :func:`.columns.tables`)."""
        dur = spans.end - spans.start
        backwards = dur < 0
        self.add(spans.kind, spans.op, spans.name, np.maximum(dur, 0), spans.seq)
        self.pids.update(distinct(spans.pid).tolist())
        return int(backwards.sum())

    def add_ticks(self, pids: np.ndarray, ranks: np.ndarray) -> None:
        self.pids.update(distinct(pids.astype(np.int64)).tolist())
        self.ranks.update(distinct(ranks).tolist())

    def add(
        self, kind: np.ndarray, op: np.ndarray, name: np.ndarray, dur: np.ndarray, seq: np.ndarray
    ) -> None:
        """Add spans given as columns (see :class:`SummaryColumns`)."""
        is_op = (kind == KIND_OP) & (op >= 0)
        ops, first = op[is_op], seq[is_op]
        self.op_n = _added(self.op_n, ops, np.ones(len(ops), dtype=np.int64))
        self.op_first = _lowest(self.op_first, ops, first)
        act = (kind == KIND_ACTIVITY) & (name >= 0)
        self.act_us = _added(self.act_us, name[act], dur[act])
        self.act_n = _added(self.act_n, name[act], np.ones(int(act.sum()), dtype=np.int64))
        neg = (kind == KIND_NEGOTIATE) & (name >= 0)
        self.neg_us = _added(self.neg_us, name[neg], dur[neg])
        self.neg_n = _added(self.neg_n, name[neg], np.ones(int(neg.sum()), dtype=np.int64))
        self.negotiate_total += int(dur[(kind == KIND_NEGOTIATE) & (op >= 0)].sum())
        self.processing_total += int(dur[is_op].sum())
        inside = act & (op >= 0)
        if inside.any():
            width = int(name[inside].max()) + 1
            for pair in distinct(op[inside] * width + name[inside]).tolist():
                self.pairs.add(divmod(pair, width))


def _added(total: np.ndarray, codes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``total`` (grown to cover ``codes``) plus ``values`` summed by code."""
    size = max(len(total), int(codes.max()) + 1 if len(codes) else 0)
    out = np.zeros(size, dtype=np.int64)
    out[: len(total)] = total
    np.add.at(out, codes, values)
    return out


def _lowest(least: np.ndarray, codes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``least`` (grown to cover ``codes``) lowered to the smallest of ``values`` by code."""
    size = max(len(least), int(codes.max()) + 1 if len(codes) else 0)
    out = np.full(size, NEVER, dtype=np.int64)
    out[: len(least)] = least
    np.minimum.at(out, codes, values)
    return out


def finish(
    t: Tally,
    names: list[str],
    op_names: list[str],
    tensor_names: dict[int, str],
    cycles: int,
    md: dict[str, Any],
) -> dict[str, Any]:
    """The numbers of ``workshop timeline summary --json`` from a tally.

    Args:
        t: the tally.
        names, op_names: the string of each name code and of each op code (equal strings
            under two codes count as one).
        tensor_names: the tensor name of a pid (``pid N`` when it has none).
        cycles: ``CYCLE_START`` marks.
        md: ``first_ts_us``, ``last_ts_us``, ``truncated``, ``events``, ``unclosed``,
            ``orphan_ends``, ``skipped``, ``warnings``.

    Returns:
        ``tensors`` (distinct tensor names, count), ``tensor_names``, ``ranks`` (distinct
        ranks seen in ticks, count), ``rank_ids``, ``ops`` (processing ops by op name, most
        frequent first, ties in order of first occurrence as pandas' ``value_counts``),
        ``activities_us`` (total by activity name, largest first, ties by name),
        ``negotiation_us`` (total by ``NEGOTIATE_`` name), ``negotiation_share`` (negotiation
        over negotiation + processing time of the ops with a name; None without any),
        ``backend``, ``span_us``, ``truncated``, ``events``, ``cycles``, ``unclosed``,
        ``orphan_ends``, ``skipped_bytes``, ``warnings``.
    """
    used = sorted({tensor_names.get(p, f"pid {p}") for p in t.pids})
    ranks = sorted(t.ranks)
    count: dict[str, int] = {}
    first: dict[str, int] = {}
    for code in np.flatnonzero(t.op_n).tolist():
        op = op_names[code]
        count[op] = count.get(op, 0) + int(t.op_n[code])
        first[op] = min(first.get(op, NEVER), int(t.op_first[code]))
    ops = {op: count[op] for op in sorted(count, key=lambda op: (-count[op], first[op]))}
    total = t.negotiate_total + t.processing_total
    start = md["first_ts_us"]
    return {
        "tensors": len(used),
        "tensor_names": used,
        "ranks": len(ranks),
        "rank_ids": ranks,
        "ops": ops,
        "activities_us": _totals(t.act_us, t.act_n, names),
        "negotiation_us": _totals(t.neg_us, t.neg_n, names),
        "negotiation_share": float(np.float64(t.negotiate_total) / np.float64(total))
        if total > 0
        else None,
        "backend": _backend(t, names, op_names, ops, first),
        "span_us": 0 if start is None else int(md["last_ts_us"] - start),
        "truncated": bool(md["truncated"]),
        "events": int(md["events"]),
        "cycles": cycles,
        "unclosed": int(md["unclosed"]),
        "orphan_ends": int(md["orphan_ends"]),
        "skipped_bytes": int(sum(n for _, n in md["skipped"])),
        "warnings": list(md["warnings"]),
    }


def _totals(sums: np.ndarray, counts: np.ndarray, strings: list[str]) -> dict[str, int]:
    """Total by the string of each code seen: largest first, ties in string order (a groupby,
    then a stable sort by total)."""
    out: dict[str, int] = {}
    for code in np.flatnonzero(counts).tolist():
        out[strings[code]] = out.get(strings[code], 0) + int(sums[code])
    return {s: out[s] for s in sorted(out, key=lambda s: (-out[s], s))}


def _backend(
    t: Tally, names: list[str], op_names: list[str], ops: dict[str, int], first: dict[str, int]
) -> str:
    """The library of the ALLREDUCE op, else of the most frequent op (the last in order of first
    occurrence among equals), as :func:`workshop.analysis.timeline.backend` says."""
    seen_gloo = any(names[c].startswith("GLOO_") for c in np.flatnonzero(t.act_n).tolist())
    evidence: dict[str, set[str]] = {}
    for op, activity in t.pairs:
        evidence.setdefault(op_names[op], set()).add(names[activity])
    found = []  # (op, library, count) in order of first occurrence
    for op in sorted(first, key=first.__getitem__):
        library, _ = library_of(sorted(evidence.get(op, ())), seen_gloo)
        if library != "unknown":
            found.append((op, library, ops[op]))
    if not found:
        return "unknown"
    for op, library, _ in found:
        if op == "ALLREDUCE":
            return library
    most = max(count for _, _, count in found)
    return [library for _, library, count in found if count == most][-1]
