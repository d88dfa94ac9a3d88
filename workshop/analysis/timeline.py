"""Analyses of Horovod timelines: DataFrames from :func:`workshop.io.timeline.read_timeline` in,
DataFrames out.

Times are microseconds of "tensor time": the durations of all tensors are summed, and Horovod
handles many tensors at once, so totals can exceed the wall-clock span of the timeline. Shares
are therefore the honest comparison ("negotiation is 80 % of the collective time").

The questions answered (seed 000 and 002): how long negotiation takes compared with the
reduction itself, which rank is late, which library did the reduction (NCCL, MPI, Gloo, CCL),
which tensors were fused into one buffer and how big it was, how the first steps differ from
the steady state, and what changed between two runs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workshop.io.timeline import DTYPE_BYTES

if TYPE_CHECKING:
    from workshop.io.timeline import Timeline

__all__ = [
    "backend",
    "breakdown",
    "compare_timelines",
    "detect_backend",
    "early_vs_steady",
    "evolution",
    "fusion_groups",
    "lateness_matrix",
    "negotiation_share",
    "step_starts",
    "stragglers",
    "timeline_report",
    "timeline_summary",
]

SPAN_COLUMNS = ("tensor", "op", "kind", "name", "start_us", "end_us", "dur_us", "seq")
TICK_COLUMNS = ("tensor", "pid", "negotiation", "rank", "ts_us", "lateness_us")
LIBRARIES = {"NCCL": "NCCL", "MPI": "MPI", "GLOO": "Gloo", "CCL": "CCL", "DDL": "DDL"}
HIERARCHICAL_MARKS = {"MEMCPY_IN_HOST_BUFFER", "MEMCPY_OUT_HOST_BUFFER"}


def _need(df: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{what} must be a DataFrame (Timeline.{what}), got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(
            f"the {what} DataFrame lacks column(s) {missing}: pass Timeline.{what} "
            "from workshop.io.read_timeline"
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
    out = pd.concat([p for p in parts if len(p)], ignore_index=True) if any(
        len(p) for p in parts
    ) else pd.DataFrame(columns=["group", "phase", "count", "total_us", "kind"])  # fmt: skip
    denom = neg.groupby("group", observed=True)["dur_us"].sum().add(
        op_total["sum"], fill_value=0
    )  # fmt: skip
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
    kind = spans["kind"].astype(str)
    op = spans["op"].astype(str)
    neg = spans[kind == "negotiate"].groupby(op[kind == "negotiate"])["dur_us"].agg(
        ["count", "sum"]
    )  # fmt: skip
    pro = spans[kind == "op"].groupby(op[kind == "op"])["dur_us"].agg(["count", "sum"])
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

    Only negotiations with ticks from at least two ranks count. Ticks exist only when the
    response cache misses (the first steps, or ``HOROVOD_CACHE_CAPACITY=0``).

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
        One row per op: ``op``, ``library`` (e.g. ``Gloo``, ``MPI``, ``NCCL``,
        ``NCCL+MPI (hierarchical)``, ``unknown``), ``evidence`` (the activity names seen),
        ``ops`` (count), ``note``.
    """
    _need(spans, SPAN_COLUMNS, "spans")
    kind = spans["kind"].astype(str)
    act = spans[kind == "activity"]
    ops = spans[kind == "op"]
    seen_gloo = act["name"].astype(str).str.startswith("GLOO_").any()
    rows = []
    for op_name, count in ops["op"].astype(str).value_counts(sort=False).items():
        names = sorted(set(act.loc[act["op"].astype(str) == op_name, "name"].astype(str)))
        libs = {LIBRARIES[n.split("_", 1)[0]] for n in names if n.split("_", 1)[0] in LIBRARIES}
        note = ""
        if "MPI_ALLTOALL" in names and "MPI" in libs:
            others = [n for n in names if n.startswith("MPI_") and n != "MPI_ALLTOALL"]
            if seen_gloo and not others:
                libs.discard("MPI")
                libs.add("Gloo")
                note = "MPI_ALLTOALL is what Gloo's alltoall writes (Gloo ops seen elsewhere)"
            elif not others:
                note = "MPI_ALLTOALL is written by both the MPI and the Gloo alltoall"
                libs.discard("MPI")
                libs.add("MPI or Gloo")
        if libs >= {"NCCL", "MPI"} and (HIERARCHICAL_MARKS & set(names)):
            library = "NCCL+MPI (hierarchical)"
            note = note or "HOROVOD_HIERARCHICAL_ALLREDUCE: NCCL within a node, MPI across"
        elif len(libs) == 1:
            library = libs.pop()
        elif libs:
            library = "+".join(sorted(libs))
        else:
            library = "unknown"
            note = note or "no library activity recorded inside this op"
        rows.append(
            {
                "op": op_name,
                "library": library,
                "evidence": ", ".join(names),
                "ops": int(count),
                "note": note,
            }
        )
    return pd.DataFrame(rows, columns=["op", "library", "evidence", "ops", "note"])


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
    sp = spans.sort_values("seq", kind="stable")
    is_op = (sp["kind"].astype(str) == "op").to_numpy()
    if not is_op.any():
        return pd.DataFrame(columns=cols)
    starts = is_op & ~np.concatenate([[False], is_op[:-1]])
    group = np.cumsum(starts) - 1
    ops = sp[is_op].copy()
    ops["group"] = group[is_op]
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
    kind = sp["kind"].astype(str)
    names = sp["name"].astype(str)
    used = sorted(
        set(sp["tensor"].dropna().astype(str)) | set(tl.ticks["tensor"].dropna().astype(str))
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
        "activities_us": _totals(sp.loc[kind == "activity"], names[kind == "activity"]),
        "negotiation_us": _totals(sp.loc[kind == "negotiate"], names[kind == "negotiate"]),
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


def timeline_report(tl: Timeline) -> str:
    """A diagnosis in words, with the numbers behind it.

    Args:
        tl: a Timeline.

    Returns:
        Several short paragraphs of text.
    """
    lines: list[str] = []
    md = tl.metadata
    sp = tl.spans
    lines.append(
        f"Timeline {md.get('path')}: {md.get('events', 0)} records, {len(tl.tensors)} tensors, "
        f"{tl.span_us / 1e6:.2f} s of activity, {len(tl.cycles)} cycle marks."
    )
    if tl.truncated:
        lines.append(
            f"The file is cut at byte {md.get('truncated_at')} (a killed or still running job); "
            "everything before the cut was read."
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
    if sp.empty:
        lines.append("No negotiation or processing spans: nothing to diagnose.")
        return "\n".join(lines)

    share = negotiation_share(sp).set_index("op")
    allrow = share.loc["all"]
    lines.append("")
    lines.append(
        f"Negotiation takes {_pct(allrow['negotiation_share'])} of the collective time "
        f"({allrow['negotiate_us'] / 1e6:.2f} s of tensor time in "
        f"{int(allrow['negotiations'])} negotiations, against "
        f"{allrow['processing_us'] / 1e6:.2f} s processing {int(allrow['ops'])} ops)."
    )
    for op, row in share.drop(index="all").iterrows():
        lines.append(
            f"  {op}: {int(row['negotiations'])} negotiations, mean "
            f"{row['mean_negotiate_us'] / 1e3:.2f} ms; {int(row['ops'])} ops, mean "
            f"{row['mean_processing_us'] / 1e3:.2f} ms; negotiation share "
            f"{_pct(row['negotiation_share'])}."
        )
    det = detect_backend(sp)
    lines.append("")
    lines.append(f"Library: {backend(sp)}.")
    for _, row in det.iterrows():
        note = f" ({row['note']})" if row["note"] else ""
        lines.append(f"  {row['op']}: {row['library']} [{row['evidence']}]{note}")
    bd = breakdown(sp, by="all")
    proc = bd[bd["kind"] != "negotiate"]
    total = proc["total_us"].sum()
    if total > 0:
        parts = [f"{r.phase} {_pct(r.total_us / total)}" for r in proc.head(4).itertuples()]
        lines.append("  Processing time goes to: " + ", ".join(parts) + ".")

    groups = fusion_groups(sp)
    if len(groups):
        multi = groups[groups["tensors"] > 1]
        lines.append("")
        lines.append(
            f"Fusion: {len(groups)} responses, {len(multi)} of them fused several tensors; "
            f"mean {groups['tensors'].mean():.1f} tensors and "
            f"{_bytes(groups['bytes'].mean())} per response, largest "
            f"{_bytes(groups['bytes'].max())}."
        )
    strag = stragglers(tl.ticks)
    lines.append("")
    if len(strag):
        lines.append(
            f"Stragglers ({len(tl.ticks)} readiness ticks from {tl.ticks['rank'].nunique()} "
            "ranks; lateness is behind the first rank ready for the same tensor):"
        )
        for r in strag.itertuples():
            lines.append(
                f"  rank {int(r.rank)}: last in {int(r.times_last)} negotiations "
                f"({_pct(r.share_last)}), mean {r.mean_lateness_us / 1e3:.2f} ms, p95 "
                f"{r.p95_lateness_us / 1e3:.2f} ms, max {r.max_lateness_us / 1e3:.2f} ms late."
            )
    else:
        lines.append(
            "No readiness ticks from two ranks: Horovod writes ticks only when its response "
            "cache misses (set HOROVOD_CACHE_CAPACITY=0 to see them every step)."
        )
    ev = early_vs_steady(sp).set_index("phase")
    if len(ev):
        lines.append("")
        lines.append(f"Over time ({int(ev['steps'].sum())} training steps found):")
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
    return "\n".join(lines)


def _pct(x: float) -> str:
    return "n/a" if x is None or pd.isna(x) else f"{100 * x:.1f} %"


def _bytes(x: float) -> str:
    if x is None or pd.isna(x):
        return "n/a"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(x) < 1024 or unit == "GiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:.1f} GiB"
