"""The evidence numbers a learner reads beside the diagnosis (lesson 09's menu): the problem
each points to (:data:`MEASURES`) and every number of one run (:func:`evidence`). They judge
nothing: the diagnosis costs each problem (:mod:`.costs`) and decides (:mod:`.verdict`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

from workshop.analysis.diagnose.measures import (
    comm_share,
    compute_ratio,
    cpu_wait_gap,
    cycle_interval_ms,
    data_share,
    late_cycles,
    lr_ratio,
    negotiate_share,
    other_work_explains,
    responses_per_step,
)

if TYPE_CHECKING:
    from workshop.readers.timeline import Timeline

__all__ = [
    "MEASURES",
    "Measure",
    "evidence",
]


@dataclass(frozen=True)
class Measure:
    """One evidence number.

    Attributes:
        problem: the problem id it points to (:data:`.verdict.PROBLEMS`).
        what: what is measured, with its unit.
    """

    problem: str
    what: str


#: The evidence numbers, by name. ``late_cycles`` is supporting evidence only (never a finding
#: by itself): on the straggler benchmark's runs with the response cache off it does not
#: separate stragglers (0.33-0.58 cycles) from healthy runs (0.00-2.90; most near 0, one
#: unpinned run later than every straggler), since other work on any core moves any rank's
#: ticks; the compute ratio does (``workshop.lessons.l09_diagnose.capstone.tick_lateness``).
MEASURES: dict[str, Measure] = {
    "compute_ratio": Measure(
        "straggler", "compute per step, slowest rank / the other ranks (lower quartiles)"
    ),
    "cpu_wait_gap": Measure(
        "straggler",
        "share of its own work the most-waiting rank waited for a CPU, beyond the other ranks' "
        "(run-queue wait: other work on its core)",
    ),
    "late_cycles": Measure(
        "straggler",
        "background cycles the latest rank is behind the first one ready, mean over the "
        "gradients' negotiations (same-cycle ticks count 0)",
    ),
    "lr_ratio": Measure("lr_not_scaled", "learning rate used / the linear rule's"),
    "responses_per_step": Measure("fusion_off", "gradient allreduce responses per training step"),
    "cycle_interval_ms": Measure(
        "long_cycle_time", "median time between background cycle starts, ms"
    ),
    # how long a negotiation lasts is mostly how far apart the ranks hand a gradient over,
    # cache or not, and that grows with the step: a share of the step carries over to other
    # batch sizes; only far beyond the healthy runs' is the cache's coordination the likely cause
    "negotiate_share": Measure(
        "cache_off",
        "median negotiation of a gradient / median training step",
    ),
    "comm_share": Measure(
        "small_batch",
        "share of a step the least-waiting rank waits for the allreduces (median)",
    ),
    "data_share": Measure(
        "input_pipeline",
        "share of a step spent taking the batch (median, slowest rank)",
    ),
}


# ---------------------------------------------------------------------------------------------
# All of them


def evidence(
    record: dict,
    metrics: pd.DataFrame,
    steps: pd.DataFrame,
    tl: Timeline | None,
) -> pd.DataFrame:
    """Every evidence number of :data:`MEASURES` on one run.

    Args:
        record: run.json as a dict (``read_run``).
        metrics: ``read_metrics``.
        steps: ``read_step_times`` (may be empty).
        tl: the run's timeline, or None.

    Returns:
        One row per measure, in :data:`MEASURES` order: ``measure``, ``problem``, ``value``
        (NaN where the run lacks the input), ``rank`` (the straggler's, else NaN).
    """
    rows: dict[str, tuple[float, Any]] = {name: (math.nan, None) for name in MEASURES}
    if len(steps):
        rows["compute_ratio"] = compute_ratio(steps)
        if other_work_explains(record, steps):
            rows["cpu_wait_gap"] = cpu_wait_gap(steps)
        rows["comm_share"] = (comm_share(steps), None)
        rows["data_share"] = (data_share(steps), None)
    rows["lr_ratio"] = (lr_ratio(record, metrics), None)
    if tl is not None and not tl.spans.empty:
        cycle_ms = (record.get("config") or {}).get("cycle_time_ms") or 1.0
        rows["late_cycles"] = late_cycles(tl, cycle_us=1000.0 * cycle_ms)
        rows["responses_per_step"] = (responses_per_step(tl), None)
        rows["cycle_interval_ms"] = (cycle_interval_ms(tl), None)
        rows["negotiate_share"] = (negotiate_share(tl), None)
    return pd.DataFrame(
        [
            {"measure": name, "problem": MEASURES[name].problem, "value": v, "rank": r}
            for name, (v, r) in rows.items()
        ]
    ).astype({"value": float, "rank": float})
