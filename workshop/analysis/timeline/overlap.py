"""When each gradient's allreduce ran relative to the backward pass (overlap), per step and
compared between runs.

The meaning of the records (Horovod 0.28.1) and of *tensor time*: see
:mod:`workshop.analysis.timeline`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from workshop.analysis.timeline.spans import SPAN_COLUMNS, _grouped_ops, from_timeline
from workshop.analysis.timeline.steps import step_starts
from workshop.frames import require_columns, takes_run

if TYPE_CHECKING:
    from workshop.readers.timeline import Timeline

__all__ = [
    "OVERLAP_COLUMNS",
    "allreduce_overlap",
    "compare_overlap",
    "gradient_tensors",
    "overlap_by_step",
]


# ---------------------------------------------------------------------------------------------
# Overlap of the allreduces with the backward pass


@takes_run
def gradient_tensors(spans: pd.DataFrame) -> list[str]:
    """The tensors allreduced once per training step (the gradients), in order of first
    negotiation: those with as many ``NEGOTIATE_ALLREDUCE`` spans as the most negotiated one.
    Metrics averaged once per epoch are left out.

    Args:
        spans: ``Timeline.spans``.

    Returns:
        Tensor names (empty when there is no allreduce).
    """
    require_columns(spans, SPAN_COLUMNS, "workshop.analysis.timeline", **from_timeline("spans"))
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


@takes_run
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
    require_columns(spans, SPAN_COLUMNS, "workshop.analysis.timeline", **from_timeline("spans"))
    grads = list(tensors) if tensors is not None else gradient_tensors(spans)
    extra = ["op_cycle", "in_backward_all", "in_backward_some"] if cycles is not None else []
    if cycles is not None:
        require_columns(
            cycles, ("start_us",), "workshop.analysis.timeline", **from_timeline("cycles")
        )
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
    require_columns(
        overlap, OVERLAP_COLUMNS, "workshop.analysis.timeline", **from_timeline("overlap")
    )
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
