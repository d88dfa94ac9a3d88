"""Analyses of Horovod timelines: DataFrames from
:func:`workshop.readers.timeline.read_timeline` in, DataFrames out.

**Tensor time.** Totals are microseconds of *tensor time*: the durations of the spans of every
tensor, summed over tensors. Horovod handles many tensors at once (8 gradients negotiated in the
same cycle are 8 spans of the same wall-clock interval), so a total can exceed the wall-clock
span of the timeline or the step time. Shares of tensor time are the honest comparison
("negotiation is 80 % of the collective tensor time"), not "80 % of the run".

What the records mean in Horovod 0.28.1 (``horovod/common/controller.cc``, ``response_cache.cc``,
``operations.cc``), which the analyses rely on:

* The background thread runs one *cycle* every ``HOROVOD_CYCLE_TIME`` (1 ms by default,
  operations.cc:527, slept at operations.cc:753-761). A tensor the framework hands over waits for
  the next cycle.
* A tensor's ``NEGOTIATE_<OP>`` span starts in the first cycle in which some rank had it ready
  and ends in the cycle in which every rank had (controller.cc:1115-1138 on a response-cache
  miss; controller.cc:858-869 with response_cache.cc:480-499 on a hit). Its length is therefore
  waiting for the last rank, in whole cycles; it is not time spent computing anything.
* Readiness ticks (one per rank) are written only on the uncached path
  (``IncrementTensorCount``, controller.cc:1129), i.e. when the response cache misses: the first
  time each tensor is seen (start-up) or with ``HOROVOD_CACHE_CAPACITY=0``. A cache hit writes
  the negotiation ``B``/``E`` pair without ticks.

The questions answered (seeds 000 and 002): how long negotiation takes compared with the
reduction itself, which rank is late and how much of negotiation is waiting for it, which
library did the reduction (NCCL, MPI, Gloo, CCL), which tensors were fused into one buffer and
how big it was, how the first steps differ from the steady state, when each gradient's
allreduce ran relative to the backward pass, and what changed between two runs.
"""

from workshop.analysis.timeline.overlap import (
    OVERLAP_COLUMNS,
    allreduce_overlap,
    compare_overlap,
    gradient_tensors,
    overlap_by_step,
)
from workshop.analysis.timeline.spans import (
    SHAPE_NUMBERS,
    SPAN_COLUMNS,
    TICK_COLUMNS,
    backend,
    breakdown,
    detect_backend,
    fusion_groups,
    lateness_matrix,
    negotiation_share,
    negotiation_waits,
    stragglers,
)
from workshop.analysis.timeline.steps import (
    ONE_TIME_ACTIVITIES,
    early_vs_steady,
    evolution,
    one_time_activities,
    step_starts,
)
from workshop.analysis.timeline.summary import (
    compare_timelines,
    timeline_summary,
)

__all__ = [
    "ONE_TIME_ACTIVITIES",
    "OVERLAP_COLUMNS",
    "SHAPE_NUMBERS",
    "SPAN_COLUMNS",
    "TICK_COLUMNS",
    "allreduce_overlap",
    "backend",
    "breakdown",
    "compare_overlap",
    "compare_timelines",
    "detect_backend",
    "early_vs_steady",
    "evolution",
    "fusion_groups",
    "gradient_tensors",
    "lateness_matrix",
    "negotiation_share",
    "negotiation_waits",
    "one_time_activities",
    "overlap_by_step",
    "step_starts",
    "stragglers",
    "timeline_summary",
]
