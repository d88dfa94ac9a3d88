"""Where the time goes (negotiation against processing), who is late, which library did the
reduction, which tensors were fused into one buffer.

The meaning of the records (Horovod 0.28.1) and of *tensor time*: see
:mod:`workshop.analysis.timeline`.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from workshop.frames import require_columns, takes_run
from workshop.readers.timeline import DTYPE_BYTES
from workshop.readers.timeline.libraries import library_of

__all__ = [
    "SHAPE_NUMBERS",
    "SPAN_COLUMNS",
    "TICK_COLUMNS",
    "backend",
    "breakdown",
    "detect_backend",
    "fusion_groups",
    "lateness_matrix",
    "negotiation_share",
    "negotiation_waits",
    "stragglers",
]


SPAN_COLUMNS = ("tensor", "op", "kind", "name", "start_us", "end_us", "dur_us", "seq")
TICK_COLUMNS = ("tensor", "pid", "negotiation", "rank", "ts_us", "lateness_us")


def from_timeline(frame: str) -> dict[str, str]:
    """The arguments of :func:`workshop.frames.require_columns` for a Timeline's ``frame``
    (``spans``, ``ticks``, ``cycles``...): the message names it and where it comes from."""
    return {"frame": frame, "hint": f"pass Timeline.{frame} from workshop.readers.read_timeline"}


# ---------------------------------------------------------------------------------------------
# Where the time goes


@takes_run
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
    require_columns(spans, SPAN_COLUMNS, "workshop.analysis.timeline", **from_timeline("spans"))
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


@takes_run
def negotiation_share(spans: pd.DataFrame) -> pd.DataFrame:
    """How much of the collective time is negotiation, per op and overall.

    Args:
        spans: ``Timeline.spans``.

    Returns:
        One row per op plus ``all``: ``op``, ``negotiations``, ``negotiate_us``, ``ops``,
        ``processing_us`` (op spans, activities included), ``negotiation_share``
        (negotiate / (negotiate + processing)), ``mean_negotiate_us``, ``mean_processing_us``.
    """
    require_columns(spans, SPAN_COLUMNS, "workshop.analysis.timeline", **from_timeline("spans"))
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


@takes_run
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
    require_columns(ticks, TICK_COLUMNS, "workshop.analysis.timeline", **from_timeline("ticks"))
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


@takes_run
def lateness_matrix(ticks: pd.DataFrame, agg: str = "mean") -> pd.DataFrame:
    """Rank x tensor lateness (for a heatmap).

    Args:
        ticks: ``Timeline.ticks``.
        agg: how to combine a tensor's negotiations: ``mean``, ``median`` or ``max``.

    Returns:
        index ``rank``, one column per tensor (in order of first appearance): lateness in
        microseconds behind the first rank to be ready.
    """
    require_columns(ticks, TICK_COLUMNS, "workshop.analysis.timeline", **from_timeline("ticks"))
    if agg not in ("mean", "median", "max"):
        raise ValueError(f"agg must be mean, median or max, not {agg!r}")
    if ticks.empty:
        return pd.DataFrame(index=pd.Index([], name="rank"))
    order = list(dict.fromkeys(ticks["tensor"].astype(str)))
    m = ticks.assign(tensor=ticks["tensor"].astype(str)).pivot_table(
        index="rank", columns="tensor", values="lateness_us", aggfunc=agg
    )
    return m.reindex(columns=order)


@takes_run
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
    require_columns(spans, SPAN_COLUMNS, "workshop.analysis.timeline", **from_timeline("spans"))
    require_columns(ticks, TICK_COLUMNS, "workshop.analysis.timeline", **from_timeline("ticks"))
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


@takes_run
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
    require_columns(spans, SPAN_COLUMNS, "workshop.analysis.timeline", **from_timeline("spans"))
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


@takes_run
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


@takes_run
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
    require_columns(
        spans,
        SPAN_COLUMNS + ("dtype", "shape"),
        "workshop.analysis.timeline",
        **from_timeline("spans"),
    )
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
