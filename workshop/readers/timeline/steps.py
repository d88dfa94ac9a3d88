"""The time window of some training steps of a timeline file, found in one streaming pass
(``workshop timeline slice --steps A:B``).

The steps are those of :func:`workshop.analysis.timeline.step_starts` (a test holds the two to
the same numbers on every recording): the marker is the tensor with the most
``NEGOTIATE_ALLREDUCE`` spans (ties: the one negotiated first), and step k starts at the k-th
earliest start of its negotiations. The pass keeps, per pid, only the ``B + 1`` earliest
starts it has seen, so memory grows with the steps asked for, not with the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from workshop.readers.timeline.read import event_batches, timeline_path
from workshop.readers.timeline.source import open_file
from workshop.readers.timeline.stitch import BATCH_BYTES
from workshop.readers.timeline.stream import Codes, Pairing, Spans

MARKER_SPAN = "NEGOTIATE_ALLREDUCE"


@dataclass
class StepWindow:
    """Steps ``first`` to ``stop - 1`` of a file (0-based, as ``step_starts``' ``step``).

    Attributes:
        start_us: when step ``first`` starts.
        end_us: the last microsecond before step ``stop`` starts (the end of the last step
            when ``stop`` is the number of steps), so the window holds no part of step ``stop``.
        steps: how many steps the file holds.
        tensor: the marker tensor.
    """

    start_us: int
    end_us: int
    steps: int
    tensor: str


@dataclass
class _Negotiations:
    """Per pid: how many marker spans, the first one's event index, the earliest starts."""

    keep: int
    count: dict[int, int] = field(default_factory=dict)
    first: dict[int, int] = field(default_factory=dict)
    earliest: dict[int, np.ndarray] = field(default_factory=dict)

    def add(self, spans: Spans, code: int) -> None:
        sel = np.flatnonzero(spans.name == code)
        if not len(sel):
            return
        pid, seq, start = spans.pid[sel], spans.seq[sel], spans.start[sel]
        order = np.argsort(pid, kind="stable")
        pid, seq, start = pid[order], seq[order], start[order]
        cuts = np.flatnonzero(np.diff(pid)) + 1
        for p, s, t in zip(
            pid[np.r_[0, cuts]].tolist(), np.split(seq, cuts), np.split(start, cuts), strict=True
        ):
            self.count[p] = self.count.get(p, 0) + len(s)
            self.first[p] = min(self.first.get(p, int(s.min())), int(s.min()))
            kept = np.concatenate([self.earliest.get(p, np.zeros(0, np.int64)), t])
            if len(kept) > self.keep:
                kept = np.partition(kept, self.keep - 1)[: self.keep]
            self.earliest[p] = kept


def step_window(
    path: str | os.PathLike[str], first: int, stop: int, *, batch_bytes: int = BATCH_BYTES
) -> StepWindow:
    """The window of steps ``first`` to ``stop - 1`` of a timeline file.

    Args:
        path: as for :func:`~.read.read_timeline`.
        first, stop: the steps, as a Python slice ``first:stop`` (0-based).
        batch_bytes: data read per batch.

    Raises:
        ValueError: ``first:stop`` is empty or outside the file's steps, or the file has no
            ``NEGOTIATE_ALLREDUCE`` span (the message names the file and its steps).
        FileNotFoundError, TimelineFormatError: as :func:`~.read.read_timeline`.
    """
    p = timeline_path(path)
    if not 0 <= first < stop:
        raise ValueError(f"{p}: steps {first}:{stop}: need 0 <= A < B (steps A to B-1)")
    src, problems, cut_at = open_file(p)
    try:
        rd, batches = event_batches(src, str(p), problems, cut_at, False, batch_bytes=batch_bytes)
        found, pairing, codes = _Negotiations(keep=stop + 1), Pairing(), Codes(rd.vocab)
        last_ts, span_end = None, None
        for ev in batches:
            codes.update()
            code = rd.vocab.by_string.get(MARKER_SPAN, -2)
            spans = pairing.feed(ev, codes)
            found.add(spans, code)
            if len(ev.ts):
                top = int(ev.ts.max())
                last_ts = top if last_ts is None else max(last_ts, top)
            if len(spans):
                end = int(np.maximum(spans.end, spans.start).max())
                span_end = end if span_end is None else max(span_end, end)
        rest = pairing.rest(last_ts or 0)
        found.add(rest, rd.vocab.by_string.get(MARKER_SPAN, -2))
        if len(rest):
            end = int(rest.end.max())
            span_end = end if span_end is None else max(span_end, end)
    finally:
        src.close()
    return _window(str(p), found, rd.tensor_names, first, stop, span_end)


def _window(
    source: str,
    found: _Negotiations,
    names: dict[int, str],
    first: int,
    stop: int,
    span_end: int | None,
) -> StepWindow:
    if not found.count:
        raise ValueError(f"{source}: no {MARKER_SPAN} span, so no training steps to slice")
    count: dict[str, int] = {}
    negotiated: dict[str, int] = {}
    for pid, n in found.count.items():
        tensor = names.get(pid, f"pid {pid}")
        count[tensor] = count.get(tensor, 0) + n
        negotiated[tensor] = min(negotiated.get(tensor, found.first[pid]), found.first[pid])
    most = max(count.values())
    tensor = min((t for t in count if count[t] == most), key=negotiated.__getitem__)
    pids = [p for p in found.count if names.get(p, f"pid {p}") == tensor]
    starts = np.sort(np.concatenate([found.earliest[p] for p in pids]))[: stop + 1]
    steps = count[tensor]
    if stop > steps:
        raise ValueError(
            f"{source}: {steps} training steps (0 to {steps - 1}, by tensor {tensor!r}); "
            f"steps {first}:{stop} ask for more"
        )
    if stop < steps:
        end = int(starts[stop]) - 1
    else:
        end = max(int(span_end) if span_end is not None else 0, int(starts[-1]))
    return StepWindow(int(starts[first]), max(end, int(starts[first])), steps, tensor)
