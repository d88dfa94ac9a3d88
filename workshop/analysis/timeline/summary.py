"""One timeline's numbers in a dict, and two or more timelines compared.

The meaning of the records (Horovod 0.28.1) and of *tensor time*: see
:mod:`workshop.analysis.timeline`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workshop.analysis.timeline.spans import backend, fusion_groups, negotiation_share, stragglers
from workshop.analysis.timeline.steps import step_starts
from workshop.frames import takes_run
from workshop.readers.timeline.summary import SummaryColumns, count_summary

if TYPE_CHECKING:
    from workshop.readers.timeline import Timeline

__all__ = ["compare_timelines", "timeline_summary"]


# ---------------------------------------------------------------------------------------------
# Summaries and comparisons


@takes_run
def timeline_summary(tl: Timeline) -> dict[str, Any]:
    """The numbers of ``workshop timeline summary --json``.

    Counted by :func:`workshop.readers.timeline.summary.count_summary` from the Timeline's
    columns: the one implementation, which the command runs straight on the file's columns.

    Args:
        tl: a Timeline.

    Returns:
        ``tensors`` (distinct tensor names, count), ``tensor_names``, ``ranks`` (distinct ranks
        seen in ticks, count), ``rank_ids``, ``ops`` (processing ops by op name),
        ``activities_us`` (total by activity name), ``negotiation_us`` (total by
        ``NEGOTIATE_`` name), ``negotiation_share``, ``backend``, ``span_us``, ``truncated``,
        ``events``, ``cycles``, ``unclosed``, ``orphan_ends``, ``skipped_bytes``, ``warnings``.
    """
    sp, ticks, tensors = tl.spans, tl.ticks, tl.tensors
    op, name = sp["op"].cat, sp["name"].cat
    return count_summary(
        SummaryColumns(
            kind=sp["kind"].cat.codes.to_numpy(np.int64),  # the codes of columns.KIND_*
            op=op.codes.to_numpy(np.int64),
            op_names=[str(c) for c in op.categories],
            name=name.codes.to_numpy(np.int64),
            names=[str(c) for c in name.categories],
            dur_us=sp["dur_us"].to_numpy(np.int64),
            seq=sp["seq"].to_numpy(np.int64),
            pids=np.concatenate([sp["pid"].to_numpy(np.int64), ticks["pid"].to_numpy(np.int64)]),
            tensor_names=dict(
                zip(tensors["pid"].tolist(), tensors["tensor"].astype(str).tolist(), strict=True)
            ),
            tick_ranks=ticks["rank"].to_numpy(np.int64),
            cycles=len(tl.cycles),
            metadata=tl.metadata,
        )
    )


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
