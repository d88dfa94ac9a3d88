"""Analyses of Horovod timelines: DataFrames from :func:`workshop.io.timeline.read_timeline` in,
DataFrames out.

**Tensor time.** Totals are microseconds of *tensor time*: the durations of the spans of every
tensor, summed over tensors. Horovod handles many tensors at once (8 gradients negotiated in the
same cycle are 8 spans of the same wall-clock interval), so a total can exceed the wall-clock
span of the timeline or the step time. Shares of tensor time are the honest comparison
("negotiation is 80 % of the collective tensor time"), not "80 % of the run".

What the records mean in Horovod 0.28.1 (``horovod/common/controller.cc``, ``response_cache.cc``,
``operations.cc``), which the analyses rely on:

* The background thread runs one *cycle* every ``HOROVOD_CYCLE_TIME`` (1 ms by default,
  operations.cc:527, slept at operations.cc:753-761). A tensor the framework hands over waits for
  the next cycle.
* A tensor's ``NEGOTIATE_<OP>`` span starts in the first cycle in which some rank had it ready
  and ends in the cycle in which every rank had (controller.cc:1115-1138 on a response-cache
  miss; controller.cc:858-869 with response_cache.cc:480-499 on a hit). Its length is therefore
  waiting for the last rank, in whole cycles; it is not time spent computing anything.
* Readiness ticks (one per rank) are written only on the uncached path
  (``IncrementTensorCount``, controller.cc:1129), i.e. when the response cache misses: the first
  time each tensor is seen (start-up) or with ``HOROVOD_CACHE_CAPACITY=0``. A cache hit writes
  the negotiation ``B``/``E`` pair without ticks.

The questions answered (seeds 000 and 002): how long negotiation takes compared with the
reduction itself, which rank is late and how much of negotiation is waiting for it, which
library did the reduction (NCCL, MPI, Gloo, CCL), which tensors were fused into one buffer and
how big it was, how the first steps differ from the steady state, when each gradient's
allreduce ran relative to the backward pass, and what changed between two runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workshop.frames import require_columns
from workshop.io.timeline import DTYPE_BYTES
from workshop.io.timeline.libraries import library_of
from workshop.units import format_bytes

if TYPE_CHECKING:
    from workshop.io.timeline import Timeline

__all__ = [
    "allreduce_overlap",
    "backend",
    "breakdown",
    "compare_overlap",
    "compare_timelines",
    "detect_backend",
    "early_vs_steady",
    "evolution",
    "fusion_groups",
    "gradient_tensors",
    "lateness_matrix",
    "negotiation_share",
    "negotiation_waits",
    "one_time_activities",
    "overlap_by_step",
    "step_starts",
    "stragglers",
    "timeline_findings",
    "timeline_summary",
]

SPAN_COLUMNS = ("tensor", "op", "kind", "name", "start_us", "end_us", "dur_us", "seq")
TICK_COLUMNS = ("tensor", "pid", "negotiation", "rank", "ts_us", "lateness_us")


def _need(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} must be a DataFrame (Timeline.{what}), got {type(df).__name__}")
    require_columns(
        df,
        columns,
        "workshop.analysis.timeline",
        frame=what,
        hint=f"pass Timeline.{what} from workshop.io.read_timeline",
    )


# ---------------------------------------------------------------------------------------------
# Where the time goes


def breakdown(spans: pd.DataFrame, by: str = "op") -> pd.DataFrame:
    """Negotiation versus each processing activity, per op, per tensor or overall.

    Args:
        spans: ``Timeline.spans``.
        by: ``"op"`` (ALLREDUCE, BROADCAST ...), ``"tensor"``, or ``"all"``.

    Returns:
        One row per (group, phase), largest first within a group: ``<by>`` (the group),
        ``phase`` (``NEGOTIATE_<OP>``, an activity name, or ``OTHER_PROCESSING`` for op time
        outside any activity), ``kind`` (negotiate / activity / other), ``count``,
        ``total_us``, ``mean_us``, ``share`` (of the group's negotiation + op time).
    """
    _need(spans, SPAN_COLUMNS, "spans")
    if by not in ("op", "tensor", "all"):
        raise ValueError(f"by must be 'op', 'tensor' or 'all', not {by!r}")
    sp = spans[["tensor", "op", "kind", "name", "dur_us"]].copy()
    sp["group"] = "all" if by == "all" else sp[by].astype(str)
    sp["name"] = sp["name"].astype(str)
    kind = sp["kind"].astype(str)
    parts = []
    neg = sp[kind == "negotiate"]
    act = sp[kind == "activity"]
    ops = sp[kind == "op"]
    for frame, k in ((neg, "negotiate"), (act, "activity")):
        g = frame.groupby(["group", "name"], observed=True)["dur_us"].agg(["count", "sum"])
        g = g.reset_index().rename(columns={"name": "phase", "sum": "total_us"})
        g["kind"] = k
        parts.append(g)
    op_total = ops.groupby("group", observed=True)["dur_us"].agg(["count", "sum"])
    act_total = act.groupby("group", observed=True)["dur_us"].sum()
    other = pd.DataFrame(
        {
            "group": op_total.index,
            "phase": "OTHER_PROCESSING",
            "count": op_total["count"].to_numpy(),
            "total_us": (op_total["sum"] - act_total.reindex(op_total.index, fill_value=0))
            .clip(lower=0)
            .to_numpy(),
            "kind": "other",
        }
    )
    parts.append(other)
    out = (
        pd.concat([p for p in parts if len(p)], ignore_index=True)
        if any(len(p) for p in parts)
        else pd.DataFrame(columns=["group", "phase", "count", "total_us", "kind"])
    )
    denom = neg.groupby("group", observed=True)["dur_us"].sum().add(op_total["sum"], fill_value=0)
    out["total_us"] = out["total_us"].astype(np.int64)
    out["count"] = out["count"].astype(np.int64)
    out["mean_us"] = out["total_us"] / out["count"].where(out["count"] > 0)
    out["share"] = out["total_us"] / out["group"].map(denom).where(lambda d: d > 0)
    out = out.sort_values(["group", "total_us"], ascending=[True, False], kind="stable")
    out = out.rename(columns={"group": by})
    return out[[by, "phase", "kind", "count", "total_us", "mean_us", "share"]].reset_index(
        drop=True
    )


def negotiation_share(spans: pd.DataFrame) -> pd.DataFrame:
    """How much of the collective time is negotiation, per op and overall.

    Args:
        spans: ``Timeline.spans``.

    Returns:
        One row per op plus ``all``: ``op``, ``negotiations``, ``negotiate_us``, ``ops``,
        ``processing_us`` (op spans, activities included), ``negotiation_share``
        (negotiate / (negotiate + processing)), ``mean_negotiate_us``, ``mean_processing_us``.
    """
    _need(spans, SPAN_COLUMNS, "spans")
    kind = spans["kind"]  # compared as categorical codes: no string per row
    is_neg, is_op = kind == "negotiate", kind == "op"
    neg = (
        spans[is_neg].groupby(spans.loc[is_neg, "op"].astype(str))["dur_us"].agg(["count", "sum"])
    )
    pro = spans[is_op].groupby(spans.loc[is_op, "op"].astype(str))["dur_us"].agg(["count", "sum"])
    out = pd.DataFrame(
        {
            "negotiations": neg["count"],
            "negotiate_us": neg["sum"],
            "ops": pro["count"],
            "processing_us": pro["sum"],
        }
    ).fillna(0)
    out.loc["all"] = out.sum()
    out = out.astype(np.int64)
    total = out["negotiate_us"] + out["processing_us"]
    out["negotiation_share"] = out["negotiate_us"] / total.where(total > 0)
    out["mean_negotiate_us"] = out["negotiate_us"] / out["negotiations"].where(
        out["negotiations"] > 0
    )
    out["mean_processing_us"] = out["processing_us"] / out["ops"].where(out["ops"] > 0)
    out.index.name = "op"
    return out.reset_index()


# ---------------------------------------------------------------------------------------------
# Who is late


def stragglers(ticks: pd.DataFrame) -> pd.DataFrame:
    """Per rank: how often it was the last to be ready, and by how much it was late.

    Only negotiations with ticks from at least two ranks count. Horovod writes ticks only when
    its response cache misses (controller.cc:1129): with the cache on (the default) that is the
    first negotiation of each tensor, i.e. start-up and the first step, so the table says who
    was late *at start-up*. Record with ``HOROVOD_CACHE_CAPACITY=0`` to see every step, or
    filter ``ticks`` by ``ts_us`` to one phase. A tick is stamped when rank 0's background
    thread processed that rank's request, so lateness comes in steps of a cycle.

    Args:
        ticks: ``Timeline.ticks``.

    Returns:
        One row per rank, the latest on average first: ``rank``, ``ticks``, ``times_last``,
        ``share_last`` (of the negotiations it took part in), ``mean_lateness_us``,
        ``p95_lateness_us``, ``max_lateness_us``.
    """
    _need(ticks, TICK_COLUMNS, "ticks")
    cols = ["rank", "ticks", "times_last", "share_last", "mean_lateness_us"]
    cols += ["p95_lateness_us", "max_lateness_us"]
    if ticks.empty:
        return pd.DataFrame(columns=cols)
    tk = ticks[["pid", "negotiation", "rank", "ts_us", "lateness_us"]]
    key = ["pid", "negotiation"]
    size = tk.groupby(key)["rank"].transform("nunique")
    tk = tk[size >= 2]
    if tk.empty:
        return pd.DataFrame(columns=cols)
    last = tk["ts_us"] == tk.groupby(key)["ts_us"].transform("max")
    g = tk.groupby("rank")
    out = pd.DataFrame(
        {
            "ticks": g.size(),
            "times_last": last.groupby(tk["rank"]).sum(),
            "mean_lateness_us": g["lateness_us"].mean(),
            "p95_lateness_us": g["lateness_us"].quantile(0.95),
            "max_lateness_us": g["lateness_us"].max(),
        }
    )
    negotiations = tk.drop_duplicates(key + ["rank"]).groupby("rank").size()
    out["share_last"] = out["times_last"] / negotiations
    out = out.reset_index().sort_values(
        ["mean_lateness_us", "times_last"], ascending=False, kind="stable"
    )
    return out[cols].reset_index(drop=True)


def lateness_matrix(ticks: pd.DataFrame, agg: str = "mean") -> pd.DataFrame:
    """Rank x tensor lateness (for a heatmap).

    Args:
        ticks: ``Timeline.ticks``.
        agg: how to combine a tensor's negotiations: ``mean``, ``median`` or ``max``.

    Returns:
        index ``rank``, one column per tensor (in order of first appearance): lateness in
        microseconds behind the first rank to be ready.
    """
    _need(ticks, TICK_COLUMNS, "ticks")
    if agg not in ("mean", "median", "max"):
        raise ValueError(f"agg must be mean, median or max, not {agg!r}")
    if ticks.empty:
        return pd.DataFrame(index=pd.Index([], name="rank"))
    order = list(dict.fromkeys(ticks["tensor"].astype(str)))
    m = ticks.assign(tensor=ticks["tensor"].astype(str)).pivot_table(
        index="rank", columns="tensor", values="lateness_us", aggfunc=agg
    )
    return m.reindex(columns=order)


def negotiation_waits(spans: pd.DataFrame, ticks: pd.DataFrame) -> pd.DataFrame:
    """How much of each ticked negotiation was waiting for the last rank.

    On the uncached path Horovod opens a negotiation with the first rank's tick and closes it
    with the last rank's (controller.cc:1115-1138), so the span is the wait for the last rank
    to hand the tensor over, seen at cycle granularity. Only negotiations with ticks (cache
    misses) can be explained this way.

    Args:
        spans: ``Timeline.spans``.
        ticks: ``Timeline.ticks``.

    Returns:
        One row per negotiation with ticks from at least two ranks, in time order: ``tensor``,
        ``op``, ``negotiation`` (index of the tensor's negotiation), ``start_us``, ``dur_us``
        (the ``NEGOTIATE_`` span), ``first_rank``, ``last_rank``, ``wait_us`` (last tick -
        first tick: waiting for the last rank), ``wait_share`` (wait / duration).
    """
    _need(spans, SPAN_COLUMNS, "spans")
    _need(ticks, TICK_COLUMNS, "ticks")
    cols = ["tensor", "op", "negotiation", "start_us", "dur_us", "first_rank", "last_rank"]
    cols += ["wait_us", "wait_share"]
    key = ["pid", "negotiation"]
    tk = ticks[ticks.groupby(key)["rank"].transform("nunique") >= 2]
    if tk.empty:
        return pd.DataFrame(columns=cols)
    tk = tk.sort_values(key + ["ts_us", "seq"], kind="stable")
    g = tk.groupby(key, sort=False)
    waits = pd.DataFrame(
        {
            "tensor": g["tensor"].first().astype(str),
            "op": g["op"].first().astype(str),
            "first_rank": g["rank"].first(),
            "last_rank": g["rank"].last(),
            "wait_us": g["ts_us"].max() - g["ts_us"].min(),
        }
    )
    neg = spans[spans["kind"].astype(str) == "negotiate"].sort_values("seq", kind="stable")
    neg = neg.assign(negotiation=neg.groupby("pid", observed=True).cumcount())
    neg = neg.set_index(["pid", "negotiation"])[["start_us", "dur_us"]]
    out = waits.join(neg, how="inner").reset_index()
    out["wait_share"] = out["wait_us"] / out["dur_us"].where(out["dur_us"] > 0)
    return out.sort_values("start_us", kind="stable")[cols].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# Which library did the work


def detect_backend(spans: pd.DataFrame) -> pd.DataFrame:
    """Which library performed each op, from the activity names inside it.

    ``NCCL_*`` means NCCL, ``GLOO_*`` Gloo, ``CCL_*`` oneCCL, ``MPI_*`` MPI, with two
    exceptions: Gloo's alltoall also writes ``MPI_ALLTOALL`` (so it only proves MPI when no
    Gloo activity is seen anywhere), and ``HOROVOD_HIERARCHICAL_ALLREDUCE`` turns
    ``NCCL_ALLREDUCE`` into NCCL_REDUCE(SCATTER), MEMCPY_IN_HOST_BUFFER, MPI_ALLREDUCE,
    MEMCPY_OUT_HOST_BUFFER, NCCL_BCAST/ALLGATHER (NCCL inside a node, MPI across nodes).

    Args:
        spans: ``Timeline.spans``.

    Returns:
        One row per op (in the order the ops first appear): ``op``, ``library`` (e.g.
        ``Gloo``, ``MPI``, ``NCCL``, ``NCCL+MPI (hierarchical)``, ``unknown``), ``evidence``
        (the activity names seen), ``ops`` (count), ``note``.
    """
    _need(spans, SPAN_COLUMNS, "spans")
    # Vectorised over integer codes (a Timeline's columns are categorical): millions of spans,
    # but only a handful of distinct (op, activity name) pairs.
    is_op = (spans["kind"] == "op").to_numpy(dtype=bool, na_value=False)
    is_act = (spans["kind"] == "activity").to_numpy(dtype=bool, na_value=False)
    op_code, op_values = pd.factorize(spans["op"])
    name_code, name_values = pd.factorize(spans["name"])
    op_names = [str(v) for v in op_values]
    names = [str(v) for v in name_values]
    op_rows = op_code[is_op & (op_code >= 0)]
    counts = np.bincount(op_rows, minlength=len(op_names))
    present, first = np.unique(op_rows, return_index=True)
    act = is_act & (name_code >= 0)
    seen_gloo = any(names[c].startswith("GLOO_") for c in _distinct(name_code[act], len(names)))
    act &= op_code >= 0
    pairs = op_code[act].astype(np.int64) * len(names) + name_code[act]
    evidence: dict[int, set[str]] = {}
    for pair in _distinct(pairs, len(op_names) * len(names)):
        evidence.setdefault(pair // len(names), set()).add(names[pair % len(names)])
    rows = []
    for op in present[np.argsort(first)].tolist():
        op_evidence = sorted(evidence.get(op, ()))
        library, note = library_of(op_evidence, seen_gloo)
        rows.append(
            {
                "op": op_names[op],
                "library": library,
                "evidence": ", ".join(op_evidence),
                "ops": int(counts[op]),
                "note": note,
            }
        )
    return pd.DataFrame(rows, columns=["op", "library", "evidence", "ops", "note"])


def _distinct(codes: np.ndarray, size: int) -> list[int]:
    """The distinct values of non-negative integer ``codes`` below ``size``, ascending."""
    if size <= 1 << 20:  # a count per value: one pass, no sort
        return np.flatnonzero(np.bincount(codes, minlength=size)).tolist()
    return np.unique(codes).tolist()


def backend(spans: pd.DataFrame) -> str:
    """One word for the library that moved the gradients (the allreduce's, else the most
    frequent op's), e.g. ``"Gloo"``; ``"unknown"`` if nothing was recorded.

    Args:
        spans: ``Timeline.spans``.

    Returns:
        The library name.
    """
    det = detect_backend(spans)
    det = det[det["library"] != "unknown"]
    if det.empty:
        return "unknown"
    allreduce = det[det["op"] == "ALLREDUCE"]
    row = allreduce.iloc[0] if len(allreduce) else det.sort_values("ops").iloc[-1]
    return str(row["library"])


# ---------------------------------------------------------------------------------------------
# Fusion


SHAPE_NUMBERS = re.compile(r"-?\d+")


def _elements(shape: str) -> float:
    """Number of elements of a Horovod shape string like ``[32, 1, 3, 3]`` (NaN if unknown)."""
    if not isinstance(shape, str) or not shape.startswith("["):
        return np.nan
    dims = [int(x) for x in SHAPE_NUMBERS.findall(shape)]
    return float(np.prod(dims)) if dims else 1.0


def _grouped_ops(spans: pd.DataFrame) -> pd.DataFrame:
    """The op spans in file order with a ``group`` column: a run of consecutive op ``B``
    records is one response (one fusion buffer)."""
    sp = spans.sort_values("seq", kind="stable")
    is_op = (sp["kind"].astype(str) == "op").to_numpy()
    starts = is_op & ~np.concatenate([[False], is_op[:-1]])
    ops = sp[is_op].copy()
    ops["group"] = (np.cumsum(starts) - 1)[is_op]
    return ops


def fusion_groups(spans: pd.DataFrame) -> pd.DataFrame:
    """Tensors processed together (one response, one fusion buffer) and their size.

    Horovod writes the op ``B`` records of all tensors of one response back to back before
    any activity: a run of consecutive op ``B`` records in the file is one group.

    Args:
        spans: ``Timeline.spans``.

    Returns:
        One row per group: ``group``, ``op``, ``tensors`` (count), ``bytes`` (sum of
        dtype size x elements; NaN if a member has no dtype/shape), ``start_us``, ``end_us``,
        ``dur_us``, ``names`` (the tensor names, ``;``-separated).
    """
    _need(spans, SPAN_COLUMNS + ("dtype", "shape"), "spans")
    cols = ["group", "op", "tensors", "bytes", "start_us", "end_us", "dur_us", "names"]
    ops = _grouped_ops(spans)
    if ops.empty:
        return pd.DataFrame(columns=cols)
    elements = ops["shape"].astype(object).map(_elements).astype(float)
    size = ops["dtype"].astype(object).map(DTYPE_BYTES).astype(float)
    ops["bytes"] = elements * size
    g = ops.groupby("group", sort=True)
    out = pd.DataFrame(
        {
            "op": g["op"].first().astype(str),
            "tensors": g.size(),
            "bytes": g["bytes"].sum(min_count=1).where(g["bytes"].count() == g.size()),
            "start_us": g["start_us"].min(),
            "end_us": g["end_us"].max(),
            "names": g["tensor"].agg(lambda s: ";".join(map(str, s))),
        }
    )
    out["dur_us"] = out["end_us"] - out["start_us"]
    return out.reset_index()[cols]


# ---------------------------------------------------------------------------------------------
# Over time


def _coverage(start: np.ndarray, end: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Microseconds of the intervals [start, end) that fall in each [edges[i], edges[i+1])."""
    s = np.sort(start.astype(np.float64))
    e = np.sort(end.astype(np.float64))
    cs = np.concatenate([[0.0], np.cumsum(s)])
    ce = np.concatenate([[0.0], np.cumsum(e)])
    x = edges.astype(np.float64)
    ns = np.searchsorted(s, x, side="left")
    ne = np.searchsorted(e, x, side="left")
    covered = (ns * x - cs[ns]) - (ne * x - ce[ne])  # sum over spans of clip(x - start, 0, dur)
    return np.diff(covered)


def step_starts(spans: pd.DataFrame, tensor: str | None = None) -> pd.DataFrame:
    """Training steps, found from the gradient allreduces.

    Every step allreduces every gradient once. The step marker is the tensor with the most
    ``NEGOTIATE_ALLREDUCE`` spans (ties: the one negotiated first); a step starts at the start
    of each of its negotiations.

    Args:
        spans: ``Timeline.spans``.
        tensor: use this tensor as the marker instead.

    Returns:
        ``step`` (0-based), ``start_us``, ``end_us`` (next step's start, or the last
        timestamp), ``dur_us``.
    """
    _need(spans, SPAN_COLUMNS, "spans")
    neg = spans[spans["name"].astype(str) == "NEGOTIATE_ALLREDUCE"]
    if neg.empty:
        return pd.DataFrame(columns=["step", "start_us", "end_us", "dur_us"])
    if tensor is None:
        counts = neg["tensor"].astype(str).value_counts(sort=False)
        best = counts[counts == counts.max()].index
        tensor = neg[neg["tensor"].astype(str).isin(best)]["tensor"].astype(str).iloc[0]
    starts = np.sort(neg.loc[neg["tensor"].astype(str) == tensor, "start_us"].to_numpy())
    if not len(starts):
        raise ValueError(f"tensor {tensor!r} has no NEGOTIATE_ALLREDUCE span")
    end = np.append(starts[1:], max(int(spans["end_us"].max()), int(starts[-1])))
    return pd.DataFrame(
        {"step": np.arange(len(starts)), "start_us": starts, "end_us": end, "dur_us": end - starts}
    )


def evolution(
    spans: pd.DataFrame,
    *,
    edges: Sequence[float] | np.ndarray | None = None,
    bins: int = 20,
    bin_us: float | None = None,
) -> pd.DataFrame:
    """Negotiation and processing over time: first steps versus steady state.

    Each span is split exactly over the intervals it overlaps.

    Args:
        spans: ``Timeline.spans``.
        edges: interval boundaries in microseconds, e.g. ``step_starts(spans)["start_us"]``
            or ``Timeline.cycles["start_us"]``; the last interval ends at the last timestamp.
        bins: number of equal intervals when neither ``edges`` nor ``bin_us`` is given.
        bin_us: width of equal intervals.

    Returns:
        One row per interval: ``interval``, ``start_us``, ``end_us``, ``negotiate_us``,
        ``processing_us`` (op spans), ``activity_us``, ``negotiation_share``,
        ``ops_started``.
    """
    _need(spans, SPAN_COLUMNS, "spans")
    cols = ["interval", "start_us", "end_us", "negotiate_us", "processing_us", "activity_us"]
    cols += ["negotiation_share", "ops_started"]
    if spans.empty:
        return pd.DataFrame(columns=cols)
    first = int(spans["start_us"].min())
    last = int(spans["end_us"].max())
    if edges is not None:
        e = np.unique(np.asarray(edges, dtype=np.float64))
        if not len(e):
            raise ValueError("edges is empty")
        e = np.append(e, max(float(last), e[-1] + 1))
    elif bin_us is not None:
        if bin_us <= 0:
            raise ValueError(f"bin_us must be positive, not {bin_us}")
        e = np.arange(first, last + bin_us, bin_us, dtype=np.float64)
        e = e if len(e) > 1 else np.array([first, first + bin_us], dtype=np.float64)
    else:
        if bins < 1:
            raise ValueError(f"bins must be >= 1, not {bins}")
        e = np.linspace(first, max(last, first + 1), bins + 1)
    kind = spans["kind"].astype(str).to_numpy()
    start = spans["start_us"].to_numpy()
    end = spans["end_us"].to_numpy()
    out = pd.DataFrame({"interval": np.arange(len(e) - 1), "start_us": e[:-1], "end_us": e[1:]})
    for k, col in (("negotiate", "negotiate_us"), ("op", "processing_us")):
        m = kind == k
        out[col] = _coverage(start[m], end[m], e)
    m = kind == "activity"
    out["activity_us"] = _coverage(start[m], end[m], e)
    total = out["negotiate_us"] + out["processing_us"]
    out["negotiation_share"] = out["negotiate_us"] / total.where(total > 0)
    op_starts = np.sort(start[kind == "op"])
    out["ops_started"] = np.diff(np.searchsorted(op_starts, e, side="left"))
    return out[cols]


#: Activities Horovod 0.28.1 records once (or again only when what they set up changes):
#: name -> what it does, with where the source writes it (horovod/common/).
ONE_TIME_ACTIVITIES = {
    "INIT_NCCL": "creating the NCCL communicator at the first NCCL collective "
    "(ops/nccl_operations.cc:102)",
    "INIT_FUSION_BUFFER": "allocating the fusion buffer at the first fused response, again "
    "only when the fusion threshold changes (operations.cc:302, fusion_buffer_manager.cc:28-40)",
    "ALLOCATE_SHARED_BUFFER": "allocating MPI shared memory for the hierarchical allgather, "
    "again only when a larger one is needed (ops/mpi_operations.cc:288)",
}


def one_time_activities(spans: pd.DataFrame) -> pd.DataFrame:
    """Start-up costs inside the first steps: the activities of :data:`ONE_TIME_ACTIVITIES`,
    one row per time Horovod performed one, tied to the training step it fell in.

    Horovod writes such an activity for every tensor of the response that triggered it
    (``ActivityStartAll``): overlapping spans of the same name are one occurrence, timed on
    the wall clock (first start to last end), not in tensor time.

    Args:
        spans: ``Timeline.spans``.

    Returns:
        ``activity``, ``start_us``, ``dur_us`` (wall clock), ``tensors`` (spans written),
        ``step`` (0-based index of :func:`step_starts`' step that holds the start; -1 before
        the first step, i.e. start-up), ``step_dur_us`` (that step's duration; NaN in
        start-up), ``median_step_us`` (of all steps), ``share_of_step`` (``dur_us`` /
        ``step_dur_us``).
    """
    _need(spans, SPAN_COLUMNS, "spans")
    cols = ["activity", "start_us", "dur_us", "tensors", "step", "step_dur_us"]
    cols += ["median_step_us", "share_of_step"]
    names = spans["name"].astype(str)
    act = spans[(spans["kind"].astype(str) == "activity") & names.isin(ONE_TIME_ACTIVITIES)]
    if act.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for name, group in act.groupby(act["name"].astype(str), sort=False):
        group = group.sort_values("start_us")
        # a span that starts after every earlier one ended opens a new occurrence
        ended = group["end_us"].astype("float64").cummax().shift(fill_value=-np.inf)
        occurrence = (group["start_us"] > ended).cumsum()
        for _, one in group.groupby(occurrence.to_numpy()):
            start, stop = int(one["start_us"].min()), int(one["end_us"].max())
            rows.append(
                {"activity": name, "start_us": start, "dur_us": stop - start, "tensors": len(one)}
            )
    out = pd.DataFrame(rows).sort_values("start_us", kind="stable").reset_index(drop=True)
    steps = step_starts(spans)
    if steps.empty:
        out["step"], out["step_dur_us"], out["median_step_us"] = -1, np.nan, np.nan
    else:
        index = np.searchsorted(steps["start_us"].to_numpy(), out["start_us"], side="right") - 1
        out["step"] = index
        durations = steps["dur_us"].to_numpy(dtype=float)
        out["step_dur_us"] = np.where(index >= 0, durations[np.maximum(index, 0)], np.nan)
        out["median_step_us"] = float(np.median(durations))
    out["share_of_step"] = out["dur_us"] / out["step_dur_us"]
    return out[cols]


def early_vs_steady(spans: pd.DataFrame, first_steps: int = 5) -> pd.DataFrame:
    """Start-up and first training steps against the steady state (seed 000's "large portion
    of negotiation in the beginning").

    Args:
        spans: ``Timeline.spans``.
        first_steps: how many steps count as "first".

    Returns:
        Up to three rows, ``phase`` ``startup`` (before the first step: the initial
        broadcasts), ``first`` and ``steady``: ``steps``, ``start_us``, ``time_us``,
        ``step_us`` (median step time), ``negotiate_us``, ``processing_us``,
        ``negotiation_share``, ``negotiate_per_step_us``.
    """
    cols = ["phase", "steps", "start_us", "time_us", "step_us", "negotiate_us"]
    cols += ["processing_us", "negotiation_share", "negotiate_per_step_us"]
    steps = step_starts(spans)
    if len(steps) < 2:
        return pd.DataFrame(columns=cols)
    if first_steps < 1:
        raise ValueError(f"first_steps must be >= 1, not {first_steps}")
    k = min(first_steps, len(steps) - 1)
    first = float(spans["start_us"].min())
    s0 = float(steps["start_us"].iloc[0])
    edges = [s0, float(steps["start_us"].iloc[k])]
    phases = ["first", "steady"]
    counts = [k, len(steps) - k]
    medians = [steps["dur_us"].iloc[:k].median(), steps["dur_us"].iloc[k:].median()]
    if first < s0:
        edges.insert(0, first)
        phases.insert(0, "startup")
        counts.insert(0, 0)
        medians.insert(0, np.nan)
    ev = evolution(spans, edges=edges)
    out = pd.DataFrame(
        {
            "phase": phases,
            "steps": counts,
            "start_us": ev["start_us"].to_numpy(),
            "time_us": (ev["end_us"] - ev["start_us"]).to_numpy(),
            "step_us": medians,
            "negotiate_us": ev["negotiate_us"].to_numpy(),
            "processing_us": ev["processing_us"].to_numpy(),
            "negotiation_share": ev["negotiation_share"].to_numpy(),
        }
    )
    out["negotiate_per_step_us"] = out["negotiate_us"] / out["steps"].where(out["steps"] > 0)
    return out[cols]


# ---------------------------------------------------------------------------------------------
# Overlap of the allreduces with the backward pass


def gradient_tensors(spans: pd.DataFrame) -> list[str]:
    """The tensors allreduced once per training step (the gradients), in order of first
    negotiation: those with as many ``NEGOTIATE_ALLREDUCE`` spans as the most negotiated one.
    Metrics averaged once per epoch are left out.

    Args:
        spans: ``Timeline.spans``.

    Returns:
        Tensor names (empty when there is no allreduce).
    """
    _need(spans, SPAN_COLUMNS, "spans")
    neg = spans[spans["name"].astype(str) == "NEGOTIATE_ALLREDUCE"].sort_values("seq")
    if neg.empty:
        return []
    names = neg["tensor"].astype(str)
    counts = names.value_counts()
    return [t for t in dict.fromkeys(names) if counts[t] == counts.max()]


OVERLAP_COLUMNS = [
    "step",
    "tensor",
    "group",
    "step_start_us",
    "ready_us",
    "all_ready_us",
    "op_start_us",
    "op_end_us",
    "backward_end_us",
    "all_backward_end_us",
    "overlap_us",
]


def allreduce_overlap(
    spans: pd.DataFrame,
    *,
    cycles: pd.DataFrame | None = None,
    tensors: Sequence[str] | None = None,
) -> pd.DataFrame:
    """When each gradient's allreduce ran, relative to the backward pass that produced it.

    A Horovod timeline has no backward-pass events. What it has, per gradient and step: its
    ``NEGOTIATE_ALLREDUCE`` span starts in the first background cycle in which some rank had
    handed the gradient to Horovod (the framework does so as soon as backward has produced it,
    e.g. from torch's gradient hook) and ends in the cycle in which every rank had. So within a
    step the *last* gradient's negotiation start is an upper bound for when the first rank
    finished its backward pass, and the last negotiation end one for when the last rank did.
    An allreduce that starts before those marks ran while backward was (probably) still going:
    Horovod reduces the gradients of the last layers while the first layers' are computed.

    The marks are at cycle granularity: a gradient waits up to one cycle before Horovod sees it.
    With cycle marks (``HOROVOD_TIMELINE_MARK_CYCLES=1``) a stronger, exact statement is
    possible: a step's last gradient, first seen in cycle ``c``, was handed over on every rank
    after that rank began cycle ``c - 1``; an op run in cycle ``c - 2`` or earlier therefore
    ended before any rank had finished backward (``in_backward_all``). The same with the
    negotiation end gives ``in_backward_some`` (some rank was still in backward). Without cycle
    marks these columns are absent.

    The k-th negotiation of every gradient belongs to step k (every gradient is allreduced once
    per step); steps missing a gradient's negotiation or op (a cut file) are dropped.

    Args:
        spans: ``Timeline.spans``.
        cycles: ``Timeline.cycles``, for the exact in-backward columns.
        tensors: the gradient tensors (default: :func:`gradient_tensors`).

    Returns:
        One row per step and gradient, in order of readiness within the step. Times in
        microseconds since ``step_start_us``: ``step``, ``tensor``, ``group`` (the fused
        response that reduced it; tensors of one group share the op), ``step_start_us`` (the
        step's first negotiation start, on the timeline's clock), ``ready_us`` (negotiation
        start: some rank had it), ``all_ready_us`` (negotiation end: every rank had it),
        ``op_start_us``, ``op_end_us`` (its ``ALLREDUCE`` op), ``backward_end_us`` (the step's
        last ``ready_us``), ``all_backward_end_us`` (the step's last ``all_ready_us``),
        ``overlap_us`` (op time before ``backward_end_us``); with ``cycles`` also ``op_cycle``,
        ``in_backward_all`` and ``in_backward_some`` (bool).
    """
    _need(spans, SPAN_COLUMNS, "spans")
    grads = list(tensors) if tensors is not None else gradient_tensors(spans)
    extra = ["op_cycle", "in_backward_all", "in_backward_some"] if cycles is not None else []
    if cycles is not None:
        _need(cycles, ("start_us",), "cycles")
        if cycles.empty:
            raise ValueError(
                "cycles is empty: record with --mark-cycles "
                "(HOROVOD_TIMELINE_MARK_CYCLES=1) or pass cycles=None"
            )
    if not grads:
        return pd.DataFrame(columns=OVERLAP_COLUMNS + extra)
    df = _complete_steps(spans, grads)
    if df.empty:
        return pd.DataFrame(columns=OVERLAP_COLUMNS + extra)
    out = _step_relative_times(df)
    if cycles is not None:
        _add_cycle_columns(out, cycles)
    out = out.sort_values(["step", "ready_us", "op_start_us"], kind="stable")
    return out[OVERLAP_COLUMNS + extra].reset_index(drop=True)


def _numbered_by_tensor(rows: pd.DataFrame) -> pd.DataFrame:
    """The closed rows, ``tensor`` as str, and ``step``: the row's index among its tensor's."""
    rows = rows[rows["closed"].astype(bool)] if "closed" in rows else rows
    rows = rows.assign(tensor=rows["tensor"].astype(str))
    rows["step"] = rows.groupby("tensor").cumcount()
    return rows


def _complete_steps(spans: pd.DataFrame, grads: list[str]) -> pd.DataFrame:
    """Each gradient's k-th negotiation beside its k-th allreduce op, for the steps that have
    all gradients: ``tensor``, ``step``, ``group``, ``start_us_neg``, ``end_us_neg``,
    ``start_us_op``, ``end_us_op``."""
    names = spans["tensor"].astype(str)
    neg = spans[(spans["name"].astype(str) == "NEGOTIATE_ALLREDUCE") & names.isin(grads)]
    neg = _numbered_by_tensor(neg.sort_values("seq", kind="stable"))
    ops = _grouped_ops(spans)
    ops = ops[(ops["op"].astype(str) == "ALLREDUCE") & ops["tensor"].astype(str).isin(grads)]
    ops = _numbered_by_tensor(ops)
    df = neg[["tensor", "step", "start_us", "end_us"]].merge(
        ops[["tensor", "step", "group", "start_us", "end_us"]],
        on=["tensor", "step"],
        suffixes=("_neg", "_op"),
    )
    complete = df.groupby("step")["tensor"].transform("nunique") == len(grads)
    return df[complete]


def _step_relative_times(df: pd.DataFrame) -> pd.DataFrame:
    """The columns of :func:`allreduce_overlap` up to ``overlap_us``, from
    :func:`_complete_steps`, times since the step's first negotiation start."""
    start = df.groupby("step")["start_us_neg"].transform("min")
    out = pd.DataFrame(
        {
            "step": df["step"].to_numpy(),
            "tensor": df["tensor"].to_numpy(),
            "group": df["group"].to_numpy(),
            "step_start_us": start.to_numpy(),
            "ready_us": (df["start_us_neg"] - start).to_numpy(),
            "all_ready_us": (df["end_us_neg"] - start).to_numpy(),
            "op_start_us": (df["start_us_op"] - start).to_numpy(),
            "op_end_us": (df["end_us_op"] - start).to_numpy(),
        }
    )
    by_step = out.groupby("step")
    out["backward_end_us"] = by_step["ready_us"].transform("max")
    out["all_backward_end_us"] = by_step["all_ready_us"].transform("max")
    before = np.minimum(out["op_end_us"], out["backward_end_us"]) - out["op_start_us"]
    out["overlap_us"] = before.clip(lower=0)
    return out


def _add_cycle_columns(out: pd.DataFrame, cycles: pd.DataFrame) -> None:
    """Add ``op_cycle``, ``in_backward_all`` and ``in_backward_some`` to ``out`` (see
    :func:`allreduce_overlap`): an op two cycles before a mark ended before that mark."""
    marks = np.sort(cycles["start_us"].to_numpy())

    def cycle_of(t: pd.Series) -> np.ndarray:
        return np.searchsorted(marks, (t + out["step_start_us"]).to_numpy(), "right") - 1

    out["op_cycle"] = cycle_of(out["op_start_us"])
    out["in_backward_all"] = out["op_cycle"] <= cycle_of(out["backward_end_us"]) - 2
    out["in_backward_some"] = out["op_cycle"] <= cycle_of(out["all_backward_end_us"]) - 2


def overlap_by_step(overlap: pd.DataFrame) -> pd.DataFrame:
    """One row per step of :func:`allreduce_overlap`, counting each fused op once.

    Args:
        overlap: :func:`allreduce_overlap` output.

    Returns:
        ``step``, ``gradients``, ``ops`` (fused responses), ``backward_end_us``,
        ``all_backward_end_us``, ``first_op_start_us``, ``last_op_end_us``, ``op_us`` (summed
        op time), ``overlap_us`` (op time before ``backward_end_us``), ``overlap_share``; with
        cycle columns also ``ops_in_backward_all`` and ``ops_in_backward_some`` (counts).
    """
    _need(overlap, OVERLAP_COLUMNS, "overlap")
    cycles = "in_backward_all" in overlap.columns
    ops = overlap.groupby(["step", "group"], sort=True).agg(
        op_start_us=("op_start_us", "min"),
        op_end_us=("op_end_us", "max"),
        overlap_us=("overlap_us", "max"),
        backward_end_us=("backward_end_us", "first"),
        all_backward_end_us=("all_backward_end_us", "first"),
        **(
            {"in_all": ("in_backward_all", "all"), "in_some": ("in_backward_some", "all")}
            if cycles
            else {}
        ),
    )
    ops["op_us"] = ops["op_end_us"] - ops["op_start_us"]
    g = ops.groupby(level="step")
    out = pd.DataFrame(
        {
            "gradients": overlap.groupby("step").size(),
            "ops": g.size(),
            "backward_end_us": g["backward_end_us"].first(),
            "all_backward_end_us": g["all_backward_end_us"].first(),
            "first_op_start_us": g["op_start_us"].min(),
            "last_op_end_us": g["op_end_us"].max(),
            "op_us": g["op_us"].sum(),
            "overlap_us": g["overlap_us"].sum(),
        }
    )
    out["overlap_share"] = out["overlap_us"] / out["op_us"].where(out["op_us"] > 0)
    if cycles:
        out["ops_in_backward_all"] = g["in_all"].sum().astype(np.int64)
        out["ops_in_backward_some"] = g["in_some"].sum().astype(np.int64)
    out.index.name = "step"
    return out.reset_index()


def compare_overlap(timelines: dict[str, Timeline], *, skip_steps: int = 1) -> pd.DataFrame:
    """Overlap of allreduces with backward, one row per timeline (medians over steps).

    Args:
        timelines: label -> Timeline; cycle marks are used where a timeline has them.
        skip_steps: leading steps left out (step 0 negotiates on cache misses, start-up).

    Returns:
        index ``label``: ``steps``, ``step_us`` (median step time, :func:`step_starts`),
        ``ops_per_step``, ``backward_end_us``,
        ``all_backward_end_us``, ``first_op_start_us``, ``op_us`` (medians over steps),
        ``overlap_share`` (all steps' op time before backward end / their op time),
        ``in_backward_all_share`` and ``in_backward_some_share`` (share of ops, cycle-exact;
        NaN without cycle marks).
    """
    rows = {}
    for label, tl in timelines.items():
        cycles = tl.cycles if len(tl.cycles) else None
        steps = overlap_by_step(allreduce_overlap(tl.spans, cycles=cycles))
        steps = steps[steps["step"] >= skip_steps]
        row = {"steps": len(steps), "step_us": float(step_starts(tl.spans)["dur_us"].median())}
        for col in ("ops", "backward_end_us", "all_backward_end_us", "first_op_start_us", "op_us"):
            row["ops_per_step" if col == "ops" else col] = float(steps[col].median())
        row["overlap_share"] = float(steps["overlap_us"].sum() / steps["op_us"].sum())
        for col in ("in_backward_all", "in_backward_some"):
            n = f"ops_{col}"
            share = steps[n].sum() / steps["ops"].sum() if n in steps else np.nan
            row[f"{col}_share"] = float(share)
        rows[label] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = "label"
    return out


# ---------------------------------------------------------------------------------------------
# Summaries and comparisons


def timeline_summary(tl: Timeline) -> dict[str, Any]:
    """The numbers of ``workshop timeline summary --json``.

    Args:
        tl: a Timeline.

    Returns:
        ``tensors`` (distinct tensor names, count), ``tensor_names``, ``ranks`` (distinct ranks
        seen in ticks, count), ``rank_ids``, ``ops`` (processing ops by op name),
        ``activities_us`` (total by activity name), ``negotiation_us`` (total by
        ``NEGOTIATE_`` name), ``negotiation_share``, ``backend``, ``span_us``, ``truncated``,
        ``events``, ``cycles``, ``unclosed``, ``orphan_ends``, ``skipped_bytes``, ``warnings``.
    """
    sp = tl.spans
    kind = sp["kind"]  # compared as categorical codes: no string per row
    is_act, is_neg = kind == "activity", kind == "negotiate"
    used = sorted(
        set(sp["tensor"].dropna().unique().astype(str))
        | set(tl.ticks["tensor"].dropna().unique().astype(str))
    )
    share = negotiation_share(sp)
    overall = share.loc[share["op"] == "all", "negotiation_share"]
    return {
        "tensors": len(used),
        "tensor_names": used,
        "ranks": int(tl.ticks["rank"].nunique()),
        "rank_ids": sorted(int(r) for r in tl.ticks["rank"].unique()),
        "ops": {
            k: int(v) for k, v in sp.loc[kind == "op", "op"].astype(str).value_counts().items()
        },
        "activities_us": _totals(sp.loc[is_act], sp.loc[is_act, "name"].astype(str)),
        "negotiation_us": _totals(sp.loc[is_neg], sp.loc[is_neg, "name"].astype(str)),
        "negotiation_share": None
        if overall.empty or pd.isna(overall.iloc[0])
        else float(overall.iloc[0]),
        "backend": backend(sp),
        "span_us": tl.span_us,
        "truncated": tl.truncated,
        "events": int(tl.metadata.get("events", 0)),
        "cycles": len(tl.cycles),
        "unclosed": int(tl.metadata.get("unclosed", 0)),
        "orphan_ends": int(tl.metadata.get("orphan_ends", 0)),
        "skipped_bytes": int(sum(n for _, n in tl.metadata.get("skipped", []))),
        "warnings": tl.warnings,
    }


def _totals(frame: pd.DataFrame, names: pd.Series) -> dict[str, int]:
    totals = frame["dur_us"].groupby(names).sum().sort_values(ascending=False)
    return {str(k): int(v) for k, v in totals.items()}


def compare_timelines(
    a: Timeline, b: Timeline, labels: tuple[str, str] = ("a", "b")
) -> pd.DataFrame:
    """What changed between two timelines (fusion threshold, controller, cycle time ...).

    Args:
        a, b: the two Timelines.
        labels: column names for them.

    Returns:
        index ``metric``; columns ``<label a>``, ``<label b>``, ``change`` (b - a),
        ``ratio`` (b / a). Metrics: span, steps and median step time, ops, fusion groups and
        tensors per group, bytes per group, negotiation and processing totals and share,
        ticks and the worst rank's mean lateness, the library, and the total of each activity.
    """
    la, lb = labels
    ma, mb = _metrics(a), _metrics(b)
    keys = list(dict.fromkeys(list(ma) + list(mb)))
    out = pd.DataFrame(
        {la: [ma.get(k, 0) for k in keys], lb: [mb.get(k, 0) for k in keys]},
        index=pd.Index(keys, name="metric"),
    )
    num = out.map(lambda v: isinstance(v, (int, float, np.integer, np.floating)))
    both = num[la] & num[lb]
    va = pd.to_numeric(out[la].where(both), errors="coerce")
    vb = pd.to_numeric(out[lb].where(both), errors="coerce")
    out["change"] = vb - va
    out["ratio"] = vb / va.where(va != 0)
    return out


def _metrics(tl: Timeline) -> dict[str, Any]:
    sp = tl.spans
    share = negotiation_share(sp).set_index("op")
    groups = fusion_groups(sp)
    steps = step_starts(sp)
    strag = stragglers(tl.ticks)
    m: dict[str, Any] = {
        "span_s": tl.span_us / 1e6,
        "steps": len(steps),
        "median_step_ms": float(steps["dur_us"].median() / 1e3) if len(steps) else np.nan,
        "ops": int(share.loc["all", "ops"]) if "all" in share.index else 0,
        "fusion_groups": len(groups),
        "tensors_per_group": float(groups["tensors"].mean()) if len(groups) else np.nan,
        "bytes_per_group": float(groups["bytes"].mean()) if len(groups) else np.nan,
        "negotiate_ms": float(share.loc["all", "negotiate_us"] / 1e3) if len(share) else 0.0,
        "processing_ms": float(share.loc["all", "processing_us"] / 1e3) if len(share) else 0.0,
        "negotiation_share": float(share.loc["all", "negotiation_share"])
        if len(share)
        else np.nan,
        "ticks": len(tl.ticks),
        "worst_rank_mean_lateness_ms": float(strag["mean_lateness_us"].max() / 1e3)
        if len(strag)
        else np.nan,
        "backend": backend(sp),
    }
    act = sp[sp["kind"].astype(str) == "activity"]
    for name, total in act.groupby(act["name"].astype(str))["dur_us"].sum().items():
        m[f"{name}_ms"] = float(total / 1e3)
    return m


def timeline_findings(tl: Timeline) -> list[str]:
    """A diagnosis in words, with the numbers behind it (``workshop timeline report``).

    Each paragraph comes from one rule of :data:`_SPAN_RULES`, in that order, after the
    file's own notes (:func:`_file_lines`).

    Args:
        tl: a Timeline.

    Returns:
        Lines of text (no trailing newlines), one finding each; indented lines detail the
        finding above them.
    """
    lines = _file_lines(tl)
    if tl.spans.empty:
        lines.append("No negotiation or processing spans: nothing to diagnose.")
        return lines
    for rule in _SPAN_RULES:
        lines.extend(rule(tl))
    return lines


def _file_lines(tl: Timeline) -> list[str]:
    """What was read: records, tensors, activity, cycle marks; a cut, unclosed or skipped data."""
    md = tl.metadata
    lines = [
        f"Timeline {md.get('path')}: {md.get('events', 0)} records, {len(tl.tensors)} tensors, "
        f"{tl.span_us / 1e6:.2f} s of activity, {len(tl.cycles)} cycle marks."
    ]
    if tl.truncated:
        lines.append(
            f"The file is cut inside a record at byte {md.get('truncated_at')}; everything "
            "before the cut was read. (Horovod >= 0.20.1 re-closes the array after every "
            "record, so even a killed job leaves valid JSON; cut files come from older Horovod "
            "killed mid-write, or from a copy taken while the file was written.)"
        )
    if md.get("unclosed") or md.get("orphan_ends"):
        lines.append(
            f"{md.get('unclosed', 0)} spans never closed and {md.get('orphan_ends', 0)} end "
            "records closed nothing (the timeline started or stopped while tensors were in "
            "flight)."
        )
    if md.get("skipped"):
        n = sum(x for _, x in md["skipped"])
        lines.append(f"{n} unreadable bytes were skipped in {len(md['skipped'])} ranges.")
    return lines


def _negotiation_lines(tl: Timeline) -> list[str]:
    """The negotiation share of the tensor time, the waiting inside it, and per op."""
    share = negotiation_share(tl.spans).set_index("op")
    allrow = share.loc["all"]
    lines = [
        "",
        f"Negotiation takes {_pct(allrow['negotiation_share'])} of the collective tensor time "
        f"({allrow['negotiate_us'] / 1e6:.2f} s in {int(allrow['negotiations'])} negotiations, "
        f"against {allrow['processing_us'] / 1e6:.2f} s processing {int(allrow['ops'])} ops; "
        "tensor time sums the spans of all tensors: N tensors negotiated together count N "
        "times, so totals can exceed the run's wall-clock time).",
        "  A negotiation lasts from the cycle in which the first rank had the tensor ready to "
        "the cycle in which the last rank had: it is waiting for the last rank, in whole "
        "background cycles, not work.",
    ]
    waits = negotiation_waits(tl.spans, tl.ticks)
    if len(waits):
        lines.append(
            f"  In the {len(waits)} negotiations with readiness ticks, waiting from the first "
            f"to the last rank's tick is {_pct(waits['wait_us'].sum() / waits['dur_us'].sum())} "
            "of their time."
        )
    for op, row in share.drop(index="all").iterrows():
        lines.append(
            f"  {op}: {int(row['negotiations'])} negotiations, mean "
            f"{row['mean_negotiate_us'] / 1e3:.2f} ms; {int(row['ops'])} ops, mean "
            f"{row['mean_processing_us'] / 1e3:.2f} ms; negotiation share "
            f"{_pct(row['negotiation_share'])}."
        )
    return lines


def _library_lines(tl: Timeline) -> list[str]:
    """The communication library per op, with its evidence, and where processing time goes."""
    sp = tl.spans
    lines = ["", f"Library: {backend(sp)}."]
    for _, row in detect_backend(sp).iterrows():
        note = f" ({row['note']})" if row["note"] else ""
        lines.append(f"  {row['op']}: {row['library']} [{row['evidence']}]{note}")
    bd = breakdown(sp, by="all")
    proc = bd[bd["kind"] != "negotiate"]
    total = proc["total_us"].sum()
    if total > 0:
        parts = [f"{r.phase} {_pct(r.total_us / total)}" for r in proc.head(4).itertuples()]
        lines.append("  Processing time goes to: " + ", ".join(parts) + ".")
    return lines


def _fusion_lines(tl: Timeline) -> list[str]:
    """How many tensors and bytes each response fused."""
    groups = fusion_groups(tl.spans)
    if not len(groups):
        return []
    multi = groups[groups["tensors"] > 1]
    return [
        "",
        f"Fusion: {len(groups)} responses, {len(multi)} of them fused several tensors; "
        f"mean {groups['tensors'].mean():.1f} tensors and "
        f"{format_bytes(groups['bytes'].mean())} per response, largest "
        f"{format_bytes(groups['bytes'].max())}.",
    ]


def _straggler_lines(tl: Timeline) -> list[str]:
    """Which rank was last ready, how often and how late; or why the ticks are missing."""
    strag = stragglers(tl.ticks)
    if not len(strag):
        return [
            "",
            "No readiness ticks from two ranks: Horovod writes ticks only when its response "
            "cache misses (set HOROVOD_CACHE_CAPACITY=0 to see them every step).",
        ]
    negotiations = int((tl.spans["kind"].astype(str) == "negotiate").sum())
    ticked = int(tl.ticks.groupby(["pid", "negotiation"]).ngroups)
    if ticked < negotiations:
        scope = (
            f"only {ticked} of {negotiations} negotiations have ticks: Horovod writes them "
            "on response-cache misses, the first negotiation of each tensor, so this says "
            "who was late at start-up, not during training (HOROVOD_CACHE_CAPACITY=0 "
            "records every step)"
        )
    else:
        scope = "every negotiation has ticks (response cache off): this covers training"
    lines = [
        "",
        f"Stragglers ({len(tl.ticks)} readiness ticks from {tl.ticks['rank'].nunique()} "
        f"ranks; lateness is behind the first rank ready for the same tensor; {scope}):",
    ]
    for r in strag.itertuples():
        lines.append(
            f"  rank {int(r.rank)}: last in {int(r.times_last)} negotiations "
            f"({_pct(r.share_last)}), mean {r.mean_lateness_us / 1e3:.2f} ms, p95 "
            f"{r.p95_lateness_us / 1e3:.2f} ms, max {r.max_lateness_us / 1e3:.2f} ms late."
        )
    return lines


def _overlap_lines(tl: Timeline) -> list[str]:
    """The report's paragraph on allreduces against the backward pass (steps after the first)."""
    cycles = tl.cycles if len(tl.cycles) else None
    steps = overlap_by_step(allreduce_overlap(tl.spans, cycles=cycles))
    steps = steps[steps["step"] >= 1]
    if steps.empty:
        return []
    med = steps.median()
    lines = [
        "",
        f"Allreduces against the backward pass ({len(steps)} steps after the first, medians; "
        "the timeline has no backward events, a gradient counts as produced when Horovod "
        "first sees it):",
        f"  the last gradient is seen {med['backward_end_us'] / 1e3:.1f} ms after the first "
        f"(on every rank after {med['all_backward_end_us'] / 1e3:.1f} ms); the first "
        f"allreduce starts at {med['first_op_start_us'] / 1e3:.1f} ms; "
        f"{_pct(steps['overlap_us'].sum() / steps['op_us'].sum())} of the allreduce time "
        "runs before the last gradient is seen.",
    ]
    if cycles is not None:
        lines.append(
            f"  cycle-exact: {int(steps['ops_in_backward_all'].sum())} of "
            f"{int(steps['ops'].sum())} allreduces ran entirely inside every rank's backward "
            f"pass, {int(steps['ops_in_backward_some'].sum())} inside some rank's."
        )
    return lines


def _over_time_lines(tl: Timeline) -> list[str]:
    """Start-up, the first steps and the steady state: step time and negotiation per step."""
    ev = early_vs_steady(tl.spans).set_index("phase")
    if not len(ev):
        return []
    lines = ["", f"Over time ({int(ev['steps'].sum())} training steps found):"]
    if "startup" in ev.index:
        r = ev.loc["startup"]
        lines.append(
            f"  start-up before the first step: {r['time_us'] / 1e6:.2f} s, negotiation "
            f"{r['negotiate_us'] / 1e6:.2f} s of tensor time (share "
            f"{_pct(r['negotiation_share'])})."
        )
    for phase in ("first", "steady"):
        r = ev.loc[phase]
        lines.append(
            f"  {phase} {int(r['steps'])} steps: median step {r['step_us'] / 1e3:.1f} ms, "
            f"negotiation {r['negotiate_per_step_us'] / 1e3:.1f} ms per step (share "
            f"{_pct(r['negotiation_share'])})."
        )
    return lines


def _one_time_lines(tl: Timeline) -> list[str]:
    """One-time activities (INIT_NCCL, INIT_FUSION_BUFFER, ...) in seconds, tied to the step
    they fell in (seed 000's slow first epoch: NCCL set-up, not the ranks' start-up skew)."""
    found = one_time_activities(tl.spans)
    if found.empty:
        return []
    lines = [
        "",
        "One-time activities (Horovod sets these up at the first collective that needs them, "
        "so each adds its time to one of the first steps, and to the first epoch):",
    ]
    for r in found.itertuples():
        if r.step < 0:
            where = "in start-up, before the first step"
        else:
            where = (
                f"in step {r.step}, which took {r.step_dur_us / 1e6:.4f} s "
                f"({_pct(r.share_of_step)} of it; median step {r.median_step_us / 1e6:.4f} s)"
            )
        lines.append(
            f"  {r.activity}: {r.dur_us / 1e6:.4f} s, {r.start_us / 1e6:.3f} s into the timeline, "
            f"{where}: "
            f"{ONE_TIME_ACTIVITIES[r.activity]}."
        )
    if "INIT_NCCL" not in set(found["activity"]):
        lines.append("  No INIT_NCCL: this run made no NCCL collective (no GPU reduction).")
    return lines


_SPAN_RULES: tuple[Callable[[Timeline], list[str]], ...] = (
    _negotiation_lines,
    _library_lines,
    _fusion_lines,
    _straggler_lines,
    _overlap_lines,
    _over_time_lines,
    _one_time_lines,
)
"""The paragraphs of :func:`timeline_findings` for a timeline with spans, in report order."""


def _pct(x: float) -> str:
    return "n/a" if x is None or pd.isna(x) else f"{100 * x:.1f} %"
