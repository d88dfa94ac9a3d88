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

if TYPE_CHECKING:
    from workshop.readers.timeline import Timeline

__all__ = ["compare_timelines", "timeline_summary"]


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
