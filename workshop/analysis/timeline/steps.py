"""The timeline over time: where steps start, how each step's time splits, the one-time
activities, the first steps against the steady state.

The meaning of the records (Horovod 0.28.1) and of *tensor time*: see
:mod:`workshop.analysis.timeline`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from workshop.analysis.timeline.spans import SPAN_COLUMNS, from_timeline
from workshop.frames import require_columns, takes_run

__all__ = [
    "ONE_TIME_ACTIVITIES",
    "early_vs_steady",
    "evolution",
    "one_time_activities",
    "step_starts",
]


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


@takes_run
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
    require_columns(spans, SPAN_COLUMNS, "workshop.analysis.timeline", **from_timeline("spans"))
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


@takes_run
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
    require_columns(spans, SPAN_COLUMNS, "workshop.analysis.timeline", **from_timeline("spans"))
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


@takes_run
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
    require_columns(spans, SPAN_COLUMNS, "workshop.analysis.timeline", **from_timeline("spans"))
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


@takes_run
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
