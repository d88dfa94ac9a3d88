"""A timeline's diagnosis in words (``workshop timeline report``), from the analyses of
:mod:`workshop.analysis.timeline`: each rule turns one analysis into sentences with the numbers
behind them. What the records mean in Horovod 0.28.1 is in that module's docstring.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pandas as pd

from workshop.analysis.timeline import (
    ONE_TIME_ACTIVITIES,
    allreduce_overlap,
    backend,
    breakdown,
    detect_backend,
    early_vs_steady,
    fusion_groups,
    negotiation_share,
    negotiation_waits,
    one_time_activities,
    overlap_by_step,
    stragglers,
)
from workshop.frames import takes_run
from workshop.units import format_bytes

if TYPE_CHECKING:
    from workshop.readers.timeline import Timeline

__all__ = ["timeline_findings"]


@takes_run
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
    they fell in (seed 000's slow first epoch: NCCL set-up is one candidate; its per-epoch times
    alone cannot split the extra time between causes)."""
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
