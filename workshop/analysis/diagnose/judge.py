"""How the evidence numbers are judged: the problem each gives away and its tolerance
(:data:`MEASURES`), every number of one run (:func:`evidence`), the healthy reference
(:func:`reference_from_evidence`), the settings that set a problem up (:func:`setting_notes`)
and how far each number lies beyond the healthy range (:func:`compare_with_reference`).
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
    "PROBLEM_IDS",
    "Measure",
    "evidence",
    "finding_threshold",
    "reference_from_evidence",
]

#: Problem ids, in the order ties are broken (and ``crashed`` for a run that did not end well).
PROBLEM_IDS = (
    "crashed",
    "oversubscribed",
    "straggler",
    "lr_not_scaled",
    "fusion_off",
    "long_cycle_time",
    "cache_off",
    "small_batch",
    "input_pipeline",
)


@dataclass(frozen=True)
class Measure:
    """How one evidence number is judged against the healthy runs.

    Attributes:
        problem: the problem id it gives away.
        what: what is measured, with its unit (the text of ``workshop diagnose``).
        bad: ``"high"`` (larger than healthy is the problem) or ``"low"``.
        factor: a finding lies beyond the healthy extreme times ``factor`` (``"high"``) or
            divided by it (``"low"``): healthy runs vary, and a reference of a few runs does
            not hold their whole spread.
        floor: and at least this far beyond the extreme (for shares near 0).
        supporting: shown beside the finding of its problem, never a finding by itself.
    """

    problem: str
    what: str
    bad: str = "high"
    factor: float = 1.25
    floor: float = 0.0
    supporting: bool = False


#: The evidence numbers, by name. ``late_cycles`` is supporting evidence only (never a finding
#: by itself): on the straggler benchmark's runs with the response cache off it does not
#: separate stragglers (0.33-0.58 cycles) from healthy runs (0.00-2.90; most near 0, one
#: unpinned run later than every straggler), since other work on any core moves any rank's
#: ticks; the compute ratio does (``workshop.lessons.capstone.tick_lateness``).
MEASURES: dict[str, Measure] = {
    "compute_ratio": Measure(
        "straggler", "compute per step, slowest rank / the other ranks (lower quartiles)"
    ),
    "cpu_wait_gap": Measure(
        "straggler",
        "share of its own work the most-waiting rank waited for a CPU, beyond the other ranks' "
        "(run-queue wait: other work on its core)",
        floor=0.1,
    ),
    "late_cycles": Measure(
        "straggler",
        "background cycles the latest rank is behind the first one ready, mean over the "
        "gradients' negotiations (same-cycle ticks count 0)",
        floor=0.5,
        supporting=True,
    ),
    "lr_ratio": Measure("lr_not_scaled", "learning rate used / the linear rule's", bad="low"),
    "responses_per_step": Measure("fusion_off", "gradient allreduce responses per training step"),
    "cycle_interval_ms": Measure(
        "long_cycle_time", "median time between background cycle starts, ms", factor=2.0
    ),
    # how long a negotiation lasts is mostly how far apart the ranks hand a gradient over,
    # cache or not, and that grows with the step: a share of the step carries over to other
    # batch sizes; only far beyond the healthy runs' is the cache's coordination the likely cause
    "negotiate_share": Measure(
        "cache_off",
        "median negotiation of a gradient / median training step",
        factor=3.0,
        floor=0.05,
    ),
    "comm_share": Measure(
        "small_batch",
        "share of a step the least-waiting rank waits for the allreduces (median)",
        factor=1.25,
        floor=0.2,
    ),
    "data_share": Measure(
        "input_pipeline",
        "share of a step spent taking the batch (median, slowest rank)",
        factor=2.0,
        floor=0.05,
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


def reference_from_evidence(runs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """The healthy reference: the spread of each evidence number over healthy runs.

    Args:
        runs: run name -> :func:`evidence` of that run.

    Returns:
        One row per measure: ``measure``, ``min``, ``median``, ``max``, ``runs`` (how many
        runs had the number).
    """
    rows = []
    for name in MEASURES:
        values = pd.Series(
            [float(e.set_index("measure").loc[name, "value"]) for e in runs.values()]
        ).dropna()
        rows.append(
            {
                "measure": name,
                "min": float(values.min()) if len(values) else math.nan,
                "median": float(values.median()) if len(values) else math.nan,
                "max": float(values.max()) if len(values) else math.nan,
                "runs": int(len(values)),
            }
        )
    return pd.DataFrame(rows)


def finding_threshold(measure: str, low: float, high: float) -> float:
    """Where a finding of ``measure`` starts, for healthy runs between ``low`` and ``high``:
    beyond the healthy extreme by its ``factor`` and at least its ``floor``.

    >>> round(finding_threshold("compute_ratio", 1.0, 1.43), 4)    # 1.43 x 1.25
    1.7875
    >>> round(finding_threshold("cpu_wait_gap", 0.0, 0.05), 3)    # 0.05 + the floor 0.1
    0.15
    """
    spec = MEASURES[measure]
    if spec.bad == "high":
        return max(high * spec.factor, high + spec.floor)
    return min(low / spec.factor, low - spec.floor)
