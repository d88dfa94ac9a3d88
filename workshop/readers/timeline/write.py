"""Writing a repaired timeline: every span closed, orphans left out, optionally a time window."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from workshop.readers.timeline.model import Timeline

if TYPE_CHECKING:  # annotations only: importing the package does not load pandas
    import pandas as pd

NO_LIMIT = 2**62  # beyond any timestamp the reader accepts
# Records sort by (group, order). Spans clipped at the window start open first, outer ones
# first; everything else keeps its file order; spans clipped at the window end, or never
# closed, close last, inner ones first (so every E closes the innermost open B).
CLIPPED_AT_START, FILE_ORDER, CLOSED_AT_END = 0, 1, 2

Record = tuple[int, int, str]


def write_timeline(
    timeline: Timeline,
    path: str | os.PathLike[str],
    *,
    start_us: int | None = None,
    end_us: int | None = None,
) -> dict[str, int]:
    """Write a valid, closed timeline JSON that chrome://tracing and Perfetto load.

    The layout is Horovod's own (one record per line, names JSON-escaped), so the result also
    reads back with :func:`read_timeline` at full speed. Every span gets a ``B`` and an ``E``:
    unclosed spans are closed at their ``end_us`` and orphan ``E`` records are left out; spans
    that cross the window's edges are clipped to it.

    Args:
        timeline: what :func:`read_timeline` returned.
        path: the output file; it must not exist (nothing is overwritten).
        start_us, end_us: keep only this window (timeline microseconds, inclusive).

    Returns:
        Counts written: ``events``, ``spans``, ``ticks``, ``cycles``, ``tensors``.

    Raises:
        FileExistsError: ``path`` exists.
        ValueError: an empty window (``end_us`` < ``start_us``).
    """
    out = Path(path)
    if out.exists():
        raise FileExistsError(f"{out} exists: choose a new output file (nothing is overwritten)")
    lo = -NO_LIMIT if start_us is None else int(start_us)
    hi = NO_LIMIT if end_us is None else int(end_us)
    if hi < lo:
        raise ValueError(f"empty window: end_us {end_us} < start_us {start_us}")
    sp = timeline.spans
    sp = sp[(sp["end_us"] >= lo) & (sp["start_us"] <= hi)]
    tk = timeline.ticks
    tk = tk[(tk["ts_us"] >= lo) & (tk["ts_us"] <= hi)]
    cy = timeline.cycles
    cy = cy[(cy["start_us"] >= lo) & (cy["start_us"] <= hi)]
    records = _span_records(sp, lo, hi) + _tick_records(tk) + _cycle_records(cy)
    records.sort(key=lambda r: (r[0], r[1]))
    used = set(sp["pid"].tolist()) | set(tk["pid"].tolist())
    tensors = timeline.tensors[timeline.tensors["pid"].isin(used)]
    meta = _metadata_records(tensors, timeline.metadata.get("start_time_since_epoch_us"))
    _write_new(out, meta + [r[2] for r in records])
    return {
        "events": len(meta) + len(records),
        "spans": len(sp),
        "ticks": len(tk),
        "cycles": len(cy),
        "tensors": len(tensors),
    }


def _span_records(sp: pd.DataFrame, lo: int, hi: int) -> list[Record]:
    """A ``B`` and an ``E`` record per span, clipped to ``[lo, hi]``."""
    records: list[Record] = []
    seq = sp["seq"].to_numpy()
    e_seq = sp["end_seq"].to_numpy()
    start = sp["start_us"].to_numpy()
    end = sp["end_us"].to_numpy()
    names = sp["name"].astype(object).to_numpy()
    dtypes = sp["dtype"].astype(object).to_numpy()
    shapes = sp["shape"].astype(object).to_numpy()
    for i, p in enumerate(sp["pid"].tolist()):
        b_ts, e_ts = max(int(start[i]), lo), min(int(end[i]), hi)
        b_group = CLIPPED_AT_START if start[i] < lo else FILE_ORDER
        b_key = (b_group, int(seq[i]))
        in_file = e_seq[i] >= 0 and end[i] <= hi
        e_key = (FILE_ORDER, int(e_seq[i])) if in_file else (CLOSED_AT_END, -int(seq[i]))
        name = json.dumps(str(names[i]) if isinstance(names[i], str) else "")
        records.append((*b_key, begin_record(name, b_ts, p)))
        args = ""
        if isinstance(dtypes[i], str):
            shape = str(shapes[i]) if isinstance(shapes[i], str) else ""
            args = end_args(json.dumps(dtypes[i]), json.dumps(shape))
        records.append((*e_key, end_record(e_ts, p, args)))
    return records


def _tick_records(tk: pd.DataFrame) -> list[Record]:
    return [
        (FILE_ORDER, int(s), tick_record(int(rank), int(ts), int(p)))
        for ts, s, p, rank in zip(tk["ts_us"], tk["seq"], tk["pid"], tk["rank"], strict=True)
    ]


def _cycle_records(cy: pd.DataFrame) -> list[Record]:
    return [
        (FILE_ORDER, int(s), cycle_record(int(ts)))
        for ts, s in zip(cy["start_us"], cy["seq"], strict=True)
    ]


def _metadata_records(tensors: pd.DataFrame, epoch_us: int | None) -> list[str]:
    """The ``M`` records: pid 0's start time, then each tensor's name and sort index."""
    meta = [] if epoch_us is None else epoch_records(int(epoch_us))
    for p, name, idx in zip(tensors["pid"], tensors["tensor"], tensors["sort_index"], strict=True):
        meta += tensor_records(int(p), str(name), int(idx))
    return meta


# Horovod's layout of each record (horovod/common/timeline.cc), names JSON-escaped; the
# streaming slice (:mod:`.slicing`) writes the same.


def begin_record(name_json: str, ts: int, pid: int) -> str:
    return f'{{"ph": "B", "name": {name_json}, "ts": {ts}, "pid": {pid}}}'


def end_args(dtype_json: str, shape_json: str) -> str:
    """The ``args`` of an op's closing ``E``, to pass to :func:`end_record`."""
    return f', "args": {{"dtype": {dtype_json}, "shape": {shape_json}}}'


def end_record(ts: int, pid: int, args: str = "") -> str:
    return f'{{"ph": "E", "ts": {ts}, "pid": {pid}{args}}}'


def tick_record(rank: int, ts: int, pid: int) -> str:
    return f'{{"ph": "X", "name": "{rank}", "ts": {ts}, "pid": {pid}, "dur": 0}}'


def cycle_record(ts: int) -> str:
    return f'{{"ph": "i", "name": "CYCLE_START", "ts": {ts}, "s": "g"}}'


def epoch_records(epoch_us: int) -> list[str]:
    """pid 0's two ``M`` records: the start time since the epoch, and its sort index."""
    return [
        '{"name": "process_name", "ph": "M", "pid": 0, '
        f'"args": {{"start_time_since_epoch_in_micros": {epoch_us}}}}}',
        '{"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}',
    ]


def tensor_records(pid: int, name: str, sort_index: int) -> list[str]:
    """A tensor's two ``M`` records: its name, and its sort index."""
    return [
        f'{{"name": "process_name", "ph": "M", "pid": {pid}, '
        f'"args": {{"name": {json.dumps(name)}}}}}',
        f'{{"name": "process_sort_index", "ph": "M", "pid": {pid}, '
        f'"args": {{"sort_index": {sort_index}}}}}',
    ]


def _write_new(out: Path, records: list[str]) -> None:
    """Write the array to a partial file, then rename it into place."""
    tmp = out.with_name(out.name + ".partial")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("[\n")
        fh.write(",\n".join(records))
        fh.write("\n]\n")
    os.replace(tmp, out)
