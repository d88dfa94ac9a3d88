"""DDP steps read from torch.profiler traces (:mod:`workshop.readers.torch_trace`): where a
step goes on each rank (compute against communication), how much of the communication hides
under the backward pass, the buckets per step, and which rank the others wait for. Pure: traces
in, DataFrames and numbers out (the sentences are :mod:`workshop.findings.torch_trace`'s).

Times are microseconds; an interval is ``(start_us, end_us)``. Each rank is timed on its own
trace's clock: comparing ranks uses only durations measured within one trace, never one
trace's timestamps against another's (traces from several hosts have unsynchronised clocks).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import pandas as pd

from workshop.readers.torch_trace import TorchTrace

Interval = tuple[float, float]

BREAKDOWN_COLUMNS = [
    "rank",
    "step",
    "step_us",
    "compute_us",
    "idle_us",
    "backward_us",
    "comm_us",
    "comm_busy_us",
    "overlap_us",
    "exposed_comm_us",
    "after_backward_us",
    "buckets",
    "bucket_bytes",
]


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of ``intervals`` as sorted, disjoint intervals (empty ones dropped).

    >>> merge([(0, 10), (5, 15), (20, 25), (3, 3)])
    [(0, 15), (20, 25)]
    """
    out: list[Interval] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def covered_us(intervals: Iterable[Interval]) -> float:
    """Length of the union of ``intervals`` (time covered at least once).

    >>> covered_us([(0, 10), (5, 15), (20, 25)])
    20
    """
    return sum(b - a for a, b in merge(intervals))


def intersect_us(first: Iterable[Interval], second: Iterable[Interval]) -> float:
    """Length of the time covered by both unions.

    >>> intersect_us([(0, 10), (20, 30)], [(5, 25)])
    10.0
    """
    xs, ys = merge(first), merge(second)
    total, i, j = 0.0, 0, 0
    while i < len(xs) and j < len(ys):
        lo, hi = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        total += max(0.0, hi - lo)
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return total


def _traces(traces: TorchTrace | Sequence[TorchTrace]) -> list[TorchTrace]:
    if isinstance(traces, TorchTrace):
        return [traces]
    traces = list(traces)
    if not traces or not all(isinstance(t, TorchTrace) for t in traces):
        raise TypeError("expected a TorchTrace or a list of them (read_torch_traces)")
    return traces


def _rank(trace: TorchTrace, index: int) -> int:
    return index if trace.rank is None else trace.rank


def step_breakdown(traces: TorchTrace | Sequence[TorchTrace]) -> pd.DataFrame:
    """One row per rank and profiled step: where the step's time went.

    The training thread is the thread of the ``ProfilerStep#N`` events; the collectives' work
    runs elsewhere (Gloo's worker threads, the GPU), beside it.

    Returns:
        A DataFrame with ``rank``; ``step`` (the N of ``ProfilerStep#N``); ``step_us`` (the
        step's span); ``compute_us`` (time the training thread spent inside recorded ops,
        Python frames not counted, minus the time inside the ``c10d::*`` calls that hand
        buckets to the process group);
        ``idle_us`` (``step_us`` minus the time inside any recorded op on that thread: Python
        between ops, and DDP waiting for the last bucket after the backward pass);
        ``backward_us`` (first to last autograd event of the step); ``comm_us`` (the sum of
        the durations of the collectives' work events that start in the step); ``comm_busy_us``
        (the time at least one of them runs: less than ``comm_us`` when buckets are reduced
        at once, e.g. on Gloo's two worker threads); ``overlap_us`` (the part of
        ``comm_busy_us`` inside the backward span: communication hidden behind computing
        gradients); ``exposed_comm_us`` (``comm_busy_us - overlap_us``); ``after_backward_us``
        (the end of the step's last allreduce minus the end of the backward pass: how long the
        rank waits for the buckets after its own gradients are done; <NA> without either);
        ``buckets`` (allreduce work events in the step: one per gradient bucket);
        ``bucket_bytes`` (their bytes; <NA> when the trace has no shapes).
    """
    rows = []
    for index, trace in enumerate(_traces(traces)):
        backward = trace.backward.set_index("step")
        for step in trace.steps.itertuples(index=False):
            op_spans, call_spans = _thread_spans(trace, step)
            busy = covered_us(op_spans)
            work = trace.comms[
                (trace.comms["step"] == step.step) & (trace.comms["kind"] == "work")
            ]
            work_spans = _spans(work)
            reduces = work[work["collective"] == "all_reduce"]
            bw = None  # the backward span, when the step has one
            if step.step in backward.index:
                bw = (backward.at[step.step, "start_us"], backward.at[step.step, "end_us"])
            overlap = intersect_us(work_spans, [bw]) if bw else 0.0
            after = reduces["end_us"].max() - bw[1] if bw and not reduces.empty else pd.NA
            nbytes = reduces["bytes"]
            rows.append(
                {
                    "rank": _rank(trace, index),
                    "step": int(step.step),
                    "step_us": step.dur_us,
                    "compute_us": busy - intersect_us(op_spans, call_spans),
                    "idle_us": step.dur_us - busy,
                    "backward_us": bw[1] - bw[0] if bw else 0.0,
                    "comm_us": float(work["dur_us"].sum()),
                    "comm_busy_us": covered_us(work_spans),
                    "overlap_us": overlap,
                    "exposed_comm_us": covered_us(work_spans) - overlap,
                    "after_backward_us": after,
                    "buckets": len(reduces),
                    "bucket_bytes": pd.NA if nbytes.isna().any() else int(nbytes.sum()),
                }
            )
    df = pd.DataFrame(rows, columns=BREAKDOWN_COLUMNS)
    return df.astype({"after_backward_us": "Float64", "bucket_bytes": "Int64"})


def _spans(df: pd.DataFrame) -> list[Interval]:
    return list(zip(df["start_us"], df["end_us"], strict=True))


def _thread_spans(trace: TorchTrace, step: tuple) -> tuple[list[Interval], list[Interval]]:
    """The step's ops on its training thread, and among them the calls that hand a
    collective over (``c10d::*``, ``record_param_comms``), clipped to the step's span.
    Python frames (``with_stack=True``'s ``python_function`` events) are not ops: a frame
    such as ``loss.backward()`` spans its waits too."""
    ops = trace.ops[
        (trace.ops["step"] == step.step)
        & (trace.ops["thread"] == step.thread)
        & (trace.ops["category"] != "python_function")
    ]
    calls = ops["name"].str.startswith("c10d::") | (ops["name"] == "record_param_comms")
    window = (step.start_us, step.end_us)
    return _clip(_spans(ops), window), _clip(_spans(ops[calls]), window)


def _clip(intervals: Iterable[Interval], window: Interval) -> list[Interval]:
    lo, hi = window
    return [(max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo)]


def waited_for(breakdown: pd.DataFrame) -> pd.DataFrame:
    """Per step seen on every rank: the rank the others wait for.

    A step's last allreduce ends at the same moment on every rank (give or take one message:
    no rank finishes it before every rank has sent its part), so it serves as the common
    clock: the rank whose backward pass ends last is the one with the smallest
    ``after_backward_us``, and each other rank waits the difference. No trace's timestamps
    are compared with another's.

    Args:
        breakdown: :func:`step_breakdown` of two or more ranks.

    Returns:
        A DataFrame with ``step``; ``last_rank`` (the rank whose backward pass ends last);
        ``lag_us`` (the median over the other ranks of their ``after_backward_us`` minus
        ``last_rank``'s: how long the others wait for it); ``ranks`` (ranks with the step).
        Empty with fewer than two ranks.
    """
    columns = ["step", "last_rank", "lag_us", "ranks"]
    rows = []
    known = breakdown.dropna(subset=["after_backward_us"])
    ranks = breakdown["rank"].nunique()
    for step, group in known.groupby("step"):
        if ranks < 2 or len(group) < ranks:
            continue
        ordered = group.sort_values(["after_backward_us", "rank"])
        last = ordered.iloc[0]
        others = ordered["after_backward_us"].iloc[1:].astype(float)
        lag = float(others.median() - float(last["after_backward_us"]))
        rows.append((int(step), int(last["rank"]), lag, len(group)))
    return pd.DataFrame(rows, columns=columns)


def slowest_rank(waits: pd.DataFrame) -> dict | None:
    """The rank last in most steps of :func:`waited_for` (ties: the lower rank), with
    ``steps_last`` (in how many), ``steps`` (of how many), ``by_chance`` (how many steps each
    rank would be last in if none were slower: ``steps / ranks``, to read ``steps_last``
    against) and ``median_lag_us`` (median of its ``lag_us`` over the steps it was last);
    None without steps."""
    if waits.empty:
        return None
    counts = waits["last_rank"].value_counts()
    rank = int(min(counts[counts == counts.max()].index))
    mine = waits[waits["last_rank"] == rank]
    return {
        "rank": rank,
        "steps_last": len(mine),
        "steps": len(waits),
        "by_chance": len(waits) / int(waits["ranks"].max()),
        "median_lag_us": float(mine["lag_us"].median()),
    }


def trace_summary(traces: TorchTrace | Sequence[TorchTrace]) -> dict:
    """The numbers ``workshop trace summary`` prints: ``ranks``, ``backend``, ``world_size``,
    ``files``, ``steps`` (profiled step numbers), ``per_rank`` (per rank: ``steps``, the
    medians over its steps of :func:`step_breakdown`'s columns as ``median_<column>`` (None
    where no step has the value), ``buckets_per_step`` (the distinct counts),
    ``bytes_per_step`` and ``overlap_fraction``: ``overlap_us / comm_busy_us`` over all its
    steps), and ``waited_for`` (:func:`slowest_rank`, None with one rank)."""
    traces = _traces(traces)
    table = step_breakdown(traces)
    per_rank = {}
    for rank, group in table.groupby("rank"):
        medians = {c: float(group[c].astype(float).median()) for c in BREAKDOWN_COLUMNS[2:11]}
        busy = float(group["comm_busy_us"].sum())
        nbytes = group["bucket_bytes"]
        per_rank[int(rank)] = {
            "steps": len(group),
            **{f"median_{c}": None if math.isnan(v) else round(v, 1) for c, v in medians.items()},
            "buckets_per_step": sorted({int(b) for b in group["buckets"]}),
            "bytes_per_step": None if nbytes.isna().any() else int(nbytes.median()),
            "overlap_fraction": (
                round(float(group["overlap_us"].sum()) / busy, 3) if busy else None
            ),
        }
    return {
        "ranks": [int(r) for r in sorted(table["rank"].unique())],
        "backend": traces[0].backend,
        "world_size": traces[0].world_size,
        "files": [str(t.path) for t in traces],
        "steps": sorted({int(s) for s in table["step"]}),
        "per_rank": per_rank,
        "waited_for": slowest_rank(waited_for(table)),
    }


def _subtract(xs: list[Interval], cuts: list[Interval]) -> list[Interval]:
    """The parts of the disjoint sorted ``xs`` outside the disjoint sorted ``cuts``.

    >>> _subtract([(0, 10), (20, 30)], [(2, 4), (8, 22)])
    [(0, 2), (4, 8), (22, 30)]
    """
    out = []
    for a, b in xs:
        for c, d in cuts:
            if d <= a or c >= b:
                continue
            if c > a:
                out.append((a, c))
            a = max(a, d)
        if a < b:
            out.append((a, b))
    return out


def trace_lanes(traces: TorchTrace | Sequence[TorchTrace]) -> pd.DataFrame:
    """The intervals a lane plot draws: one row per interval, ``rank``, ``lane``
    (``compute``: the training thread inside an op, outside the ``c10d::*`` calls;
    ``backward``: a step's backward span; ``communication``: a collective's work;
    ``step``: a ``ProfilerStep#N`` span),
    ``start_ms`` and ``end_ms`` from the rank's first profiled step, ``step``."""
    rows = []
    for index, trace in enumerate(_traces(traces)):
        rank, origin = _rank(trace, index), float(trace.steps["start_us"].min())
        for step in trace.steps.itertuples(index=False):
            op_spans, call_spans = _thread_spans(trace, step)
            for a, b in _subtract(merge(op_spans), merge(call_spans)):
                rows.append((rank, "compute", (a - origin) / 1e3, (b - origin) / 1e3, step.step))
        for step in trace.steps.itertuples(index=False):
            rows.append(
                (rank, "step", (step.start_us - origin) / 1e3, (step.end_us - origin) / 1e3,
                 step.step)
            )  # fmt: skip
        for bw in trace.backward.itertuples(index=False):
            rows.append(
                (rank, "backward", (bw.start_us - origin) / 1e3, (bw.end_us - origin) / 1e3,
                 bw.step)
            )  # fmt: skip
        work = trace.comms[(trace.comms["kind"] == "work") & trace.comms["step"].notna()]
        for w in work.itertuples(index=False):
            rows.append(
                (rank, "communication", (w.start_us - origin) / 1e3, (w.end_us - origin) / 1e3,
                 w.step)
            )  # fmt: skip
    return pd.DataFrame(rows, columns=["rank", "lane", "start_ms", "end_ms", "step"])
