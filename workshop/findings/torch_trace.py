"""A DDP run's torch.profiler traces in words (``workshop trace report``), from
:func:`workshop.analysis.torch_trace.trace_summary`: where a step goes on each rank, how much
of the communication hides under the backward pass, and which rank the others wait for.
What the events mean in torch 2.14 is in :mod:`workshop.readers.torch_trace`'s docstring."""

from __future__ import annotations

from workshop.units import format_bytes

__all__ = ["torch_trace_findings"]


def _ms(us: float | None) -> str:
    return "?" if us is None else f"{us / 1e3:.1f} ms"


def _last(numbers: dict) -> str:
    after = numbers["median_after_backward_us"]
    if after is None:
        return "no allreduce to end after the backward pass"
    if abs(after) < 50:  # under 0.05 ms: "0.0 ms after" would read as a measured wait
        return "the last ends as the backward pass ends"
    return f"the last ends {_ms(after)} after the backward pass"


def torch_trace_findings(summary: dict) -> list[str]:
    """The summary in sentences, one finding a line (indented lines detail the one above).

    Args:
        summary: :func:`workshop.analysis.torch_trace.trace_summary` of one trace per rank.
    """
    steps = summary["steps"]
    ranks = summary["ranks"]
    world = summary["world_size"]
    lines = [
        f"{len(ranks)} trace(s), rank(s) {', '.join(map(str, ranks))}"
        + (f" of {world}" if world else "")
        + f", backend {summary['backend'] or 'none'}; profiled steps {steps[0]} to {steps[-1]} "
        f"({len(steps)} step{'' if len(steps) == 1 else 's'})."
    ]
    if world and len(ranks) < world:
        lines.append(
            f"Only {len(ranks)} of the {world} ranks' traces were given: which rank the others "
            "wait for needs them all."
        )
    for rank, r in summary["per_rank"].items():
        buckets = "/".join(map(str, r["buckets_per_step"]))
        size = format_bytes(r["bytes_per_step"]) if r["bytes_per_step"] is not None else (
            "unknown bytes (record with record_shapes=True)")  # fmt: skip
        lines.append(
            f"Rank {rank}: a step takes {_ms(r['median_step_us'])} (median of {r['steps']}): "
            f"{_ms(r['median_compute_us'])} in ops on the training thread, "
            f"{_ms(r['median_idle_us'])} outside any recorded op (Python between ops, data "
            "loading, DDP waiting for the last bucket); the backward pass spans "
            f"{_ms(r['median_backward_us'])}."
        )
        share = r["overlap_fraction"]
        hidden = "no communication" if share is None else f"{share:.0%} of it during backward"
        lines.append(
            f"  communication: {buckets} bucket allreduce(s) per step, {size}; "
            f"{_ms(r['median_comm_busy_us'])} with at least one running "
            f"({_ms(r['median_comm_us'])} summed over buckets), {hidden}; {_last(r)}."
        )
    who = summary["waited_for"]
    if who is not None:
        lines.append(
            f"The others wait for rank {who['rank']}: its backward pass ends last in "
            f"{who['steps_last']} of {who['steps']} steps (by chance alone, with no rank "
            f"slower, each would be last in {who['by_chance']:g}), by "
            f"{_ms(who['median_lag_us'])} (median; measured against the end of each step's "
            "last allreduce, which every rank reaches together, so the ranks' clocks need not "
            "agree)."
        )
    return lines
