"""``workshop diagnose``: what each problem of a run costs, and the verdict.

- :mod:`.costs`: each problem's cost, the time per step its fix would save, from the run's own
  evidence by the mechanism that makes it cost (straggler, long cycle time, fusion off, cache
  off, communication the step cannot hide, a slow input pipeline);
- :mod:`.verdict`: which costs are findings (at least :data:`.verdict.MIN_SHARE` of a step,
  beyond the estimator's noise on healthy runs), "healthy" only when everything was measured,
  the Horovod settings a run ran with, and which recorded runs may calibrate the noise;
- :mod:`.measures` and :mod:`.judge`: the evidence numbers a learner reads beside it (lesson
  09's menu: compute ratio, CPU-wait gap, responses per step, cycle interval, LR ratio, ...).

Inputs are what :func:`workshop.readers.runs.read_run_files` reads from a run directory:
run.json (a dict), ``metrics.jsonl`` and the ranks' ``logs/rank.N.steps.csv`` (DataFrames), and
the timeline when there is one. Each measure returns NaN, and each cost ``measured=False``,
where its input is missing (no timeline, no cycle marks, no step files), never a guess.
"""

from workshop.analysis.diagnose.judge import (
    MEASURES,
    Measure,
    evidence,
)
from workshop.analysis.diagnose.measures import (
    SKIP_STEPS,
    STEP_COLUMNS,
    comm_share,
    compute_by_rank,
    compute_ratio,
    core_sharing,
    cpu_wait_by_rank,
    cpu_wait_gap,
    cycle_interval_ms,
    data_share,
    late_cycles,
    lr_ratio,
    negotiate_share,
    other_work_explains,
    responses_per_step,
    tick_lateness,
)

__all__ = [
    "MEASURES",
    "Measure",
    "SKIP_STEPS",
    "STEP_COLUMNS",
    "comm_share",
    "compute_by_rank",
    "compute_ratio",
    "cpu_wait_by_rank",
    "cpu_wait_gap",
    "core_sharing",
    "cycle_interval_ms",
    "data_share",
    "evidence",
    "late_cycles",
    "lr_ratio",
    "negotiate_share",
    "other_work_explains",
    "responses_per_step",
    "tick_lateness",
]
