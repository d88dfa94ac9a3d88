"""The evidence numbers of ``workshop diagnose``: one number per known problem, measured on one
run, and how far each lies outside the range of healthy runs.

Inputs are what :func:`workshop.readers.runs.read_run_files` reads from a run directory:
run.json (a dict), ``metrics.jsonl`` and the ranks' ``logs/rank.N.steps.csv`` (DataFrames), and
the timeline when there is one. Each measure returns NaN where its input is missing (no
timeline, no cycle marks, a run recorded before the step files existed), never a guess.

The problems, with the number that gives each away (ids as in ``workshop diagnose --json``):

========================  ===================================================================
``straggler``             ``compute_ratio``: the compute per step (forward, backward, update,
                          without waiting in Horovod; lower quartile over the steps) of the
                          slowest rank divided by the other ranks'; ``cpu_wait_gap``: the
                          share of its own work the most-waiting rank waited for a CPU
                          beyond the others' (other work on its core: the cause). Beside
                          them, never a finding by itself: ``late_cycles``, from the
                          timeline's readiness ticks with the coordinator's bias taken out
                          (:func:`tick_lateness`).
``lr_not_scaled``         ``lr_ratio``: the LR used / the one the linear rule gives.
``fusion_off``            ``responses_per_step``: gradient allreduce responses per step.
``long_cycle_time``       ``cycle_interval_ms``: median time between background cycle starts.
``cache_off``             ``negotiate_share``: median negotiation of a gradient / median step.
``small_batch``           ``comm_share``: the share of a step the least-waiting rank spends
                          waiting for the allreduces (communication-bound steps).
``input_pipeline``        ``data_share``: the share of a step spent taking the batch.
``oversubscribed``        ``core_sharing``: threads the ranks run per core of a host (ranks x
                          threads per rank / cores, from run.json): above 1 the ranks wait for
                          a core, and every timing above is measured on shared cores.
========================  ===================================================================

A number is called a *finding* when it lies beyond the healthy range by more than its
tolerance (:data:`MEASURES`); a run option that sets up a problem (``--cache-capacity 0``,
``--fusion-threshold-mb 0``, a long ``--cycle-time-ms``, ``--lr-scaling none``) without its
number showing is only a *note*.
"""

from workshop.analysis.diagnose.judge import (
    MEASURES,
    PROBLEM_IDS,
    Measure,
    evidence,
    finding_threshold,
    reference_from_evidence,
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
    "PROBLEM_IDS",
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
    "finding_threshold",
    "late_cycles",
    "lr_ratio",
    "negotiate_share",
    "other_work_explains",
    "reference_from_evidence",
    "responses_per_step",
    "tick_lateness",
]
