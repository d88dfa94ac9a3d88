"""What each problem of a run costs: the time per training step its fix would save, estimated
from the run's own evidence by the mechanism that makes it cost, with the estimate's
uncertainty. No number here is compared with other runs; :mod:`.verdict` decides.

Each ``*_cost`` function returns a :class:`Cost`. A mechanism that the run's files cannot
measure returns ``Cost(measured=False, missing=...)`` naming the evidence that would measure it,
never a guess. Horovod's mechanisms are those of Horovod 0.28.1:

- the background thread starts a cycle every ``HOROVOD_CYCLE_TIME`` ms and sleeps until then
  (``RunLoopOnce``, horovod/common/operations.cc): a gradient handed over between two cycles
  waits for the next one;
- in a cycle, the tensors every rank has handed over become responses; with fusion on they are
  fused into one response per cycle up to ``HOROVOD_FUSION_THRESHOLD`` bytes
  (``Controller::FuseResponses``, controller.cc), with it at 0 each tensor is a response of its
  own, processed one after the other on the background thread;
- with the response cache off every request goes to the coordinator and the responses come
  back (``Controller::ComputeResponseList``, controller.cc), with it on a repeated tensor is
  agreed on in one bit-vector allreduce (response_cache.cc).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from workshop.analysis.diagnose.measures import SKIP_STEPS, STEP_COLUMNS, lr_ratio
from workshop.frames import require_columns
from workshop.rules import CYCLE_TIME_DEFAULT_MS

if TYPE_CHECKING:
    from workshop.readers.timeline import Timeline

__all__ = [
    "DEFAULT_CYCLE_MS",
    "Cost",
    "cache_cost",
    "comm_cost",
    "cycle_cost",
    "cycle_wait_ms",
    "fusion_cost",
    "input_cost",
    "step_table",
    "straggler_cost",
]

#: Horovod's default cycle time (its one home: :data:`workshop.rules.CYCLE_TIME_DEFAULT_MS`).
DEFAULT_CYCLE_MS = CYCLE_TIME_DEFAULT_MS
#: Uncertainties are this many standard errors of the per-step mean (about 95 %).
Z = 2.0


@dataclass(frozen=True)
class Cost:
    """What one problem costs a run.

    Attributes:
        problem: the problem id (:data:`workshop.analysis.diagnose.verdict.PROBLEMS`).
        measured: whether the run's files measure it.
        saving_ms: the time per step its fix would save (>= 0; NaN when not measured).
        uncertainty_ms: the estimate's own uncertainty (about two standard errors over the
            steps, or the gap between a model and the measured wait), ms per step.
        rank: the rank it concerns (a straggler), else None.
        numbers: the evidence the estimate is built from, by name (what the sentence quotes).
        missing: when not measured, the evidence that would measure it.
        estimator: which estimate was used (a straggler without the ranks' CPU wait is
            estimated without its cause: ``"no_cpu_wait"``), for the calibration.
    """

    problem: str
    measured: bool
    saving_ms: float = math.nan
    uncertainty_ms: float = math.nan
    rank: int | None = None
    numbers: dict = field(default_factory=dict)
    missing: str = ""
    estimator: str = ""


def _center(values: pd.Series | np.ndarray | list) -> tuple[float, float]:
    """The median of per-step values and its standard error, from the interquartile range
    (1.253 x IQR / 1.349 / sqrt(n), the normal case): steps that another process or the
    scheduler stretched now and then move neither, so a cost is what a typical step pays."""
    values = pd.Series(values, dtype=float).dropna()
    if not len(values):
        return math.nan, math.nan
    if len(values) < 3:
        return float(values.median()), math.inf
    iqr = float(values.quantile(0.75) - values.quantile(0.25))
    return float(values.median()), 1.253 * iqr / 1.349 / math.sqrt(len(values))


# ---------------------------------------------------------------------------------------------
# Step times


def step_table(steps: pd.DataFrame, skip_steps: int = SKIP_STEPS) -> dict[str, pd.DataFrame]:
    """The ranks' step files as wide tables (one row per step both ranks made, one column per
    rank): ``compute``, ``wait``, ``data``, ``step`` and, where recorded, ``cpu_wait`` (ms)."""
    require_columns(steps, STEP_COLUMNS, "workshop.analysis.diagnose.costs", frame="steps")
    kept = steps[steps["step"] >= skip_steps]
    out = {}
    for name in ("compute", "wait", "data", "step", "cpu_wait"):
        column = f"{name}_s"
        if column not in kept or kept[column].isna().all():
            continue
        wide = kept.pivot_table(index="step", columns="rank", values=column) * 1e3
        out[name] = wide.dropna()
    return out


def step_ms(steps: pd.DataFrame) -> float:
    """The typical step, ms: the median over ranks of each rank's median step after start-up."""
    wide = step_table(steps).get("step")
    if wide is None or wide.empty:
        return math.nan
    return float(wide.median().median())


def straggler_cost(record: dict, steps: pd.DataFrame) -> Cost:
    """A straggler: one rank computes longer in every step, and the others wait for it at the
    allreduce that follows. Step by step, each rank's compute is compared with the median of the
    other ranks' in the same step; the rank that is longer on average is the straggler, and its
    extra compute is what the others wait. Its cause decides what the fix saves: time it waited
    for a CPU (``cpu_wait_s``) is the fix's saving only where other work ran enough to take that
    CPU (run.json's ``other_work_cores``); otherwise the CPU went to the run's own threads
    (Horovod's background thread, the collective library's), which no fix to one rank removes,
    so that part is left out. The saving is at most the others' measured wait.

    It is the saving's lower end: the straggler arrives last at each allreduce, so its own
    wait is the communication itself (``own_wait_ms``), and a core shared with other work can
    slow its part of that too, which one run cannot separate from the communication's own
    time; the fix saves at most that wait more (``at_most_ms``).

    Without the ranks' CPU wait the cause is not measured: the estimate is the whole extra
    compute (estimator ``"no_cpu_wait"``, whose noise on healthy runs is larger)."""
    wide = step_table(steps)
    compute = wide.get("compute")
    if compute is None or compute.shape[1] < 2 or len(compute) < 3:
        return Cost(
            "straggler",
            False,
            missing="the step times of at least 2 ranks (logs/rank.N.steps.csv)",
        )
    best = None
    for rank in compute.columns:
        extra = compute[rank] - compute.drop(columns=rank).median(axis=1)
        if best is None or extra.median() > best[1].median():
            best = (int(rank), extra)
    rank, extra = best
    numbers = {
        "extra_compute_ms": float(extra.median()),
        "compute_ms": float(compute[rank].median()),
        "others_compute_ms": float(compute.drop(columns=rank).median(axis=1).median()),
        "steps": int(len(extra)),
    }
    cpu_wait = wide.get("cpu_wait")
    estimator = "no_cpu_wait"
    saved = extra
    if cpu_wait is not None and rank in cpu_wait.columns and cpu_wait.shape[1] >= 2:
        own = cpu_wait[rank] - cpu_wait.drop(columns=rank).median(axis=1)
        own = own.reindex(extra.index)
        numbers["extra_cpu_wait_ms"] = float(own.median())
        other_cores = record.get("other_work_cores")
        numbers["other_work_cores"] = other_cores
        step = wide["step"][rank].reindex(extra.index)
        # other work can have taken at most its cores x the rank's step of CPU from it
        explained = other_cores is not None and other_cores * float(step.sum()) >= float(
            own.clip(lower=0).sum()
        )
        numbers["cause"] = "other_work" if explained else "own_threads"
        estimator = "cpu_wait"
        if not explained:
            saved = extra - own.clip(lower=0)
    wait = wide.get("wait")
    mean, se = _center(saved)
    saving = max(mean, 0.0)
    if wait is not None and wait.shape[1] >= 2 and rank in wait.columns:
        others_wait = float(wait.drop(columns=rank).median(axis=1).median())
        numbers["others_wait_ms"] = others_wait
        saving = min(saving, others_wait)
        numbers["own_wait_ms"] = float(wait[rank].median())
        numbers["at_most_ms"] = saving + numbers["own_wait_ms"]
    return Cost("straggler", True, saving, Z * se, rank, numbers, estimator=estimator)


def input_cost(steps: pd.DataFrame) -> Cost:
    """A slow input pipeline: the time a step spends taking its batch. A loader that prepares
    the next batch in the background while the step computes saves all of it (as long as it is
    no slower than the step); the rank that waits longest for its batch sets the others' wait."""
    data = step_table(steps).get("data")
    if data is None or data.empty:
        return Cost("input_pipeline", False, missing="the ranks' step times with data_s")
    worst = data.max(axis=1)
    mean, se = _center(worst)
    rank = int(data.median().idxmax())
    return Cost("input_pipeline", True, max(mean, 0.0), Z * se, rank, {"data_ms": mean})


# ---------------------------------------------------------------------------------------------
# Horovod's background cycle


def cycle_wait_ms(work_ms: np.ndarray | float, cycle_ms: float, processing_ms: float = 0.0):
    """The cycle model: a step's gradients are reduced in the first background cycle that
    starts after they are all handed over, and the next step starts as that cycle's
    processing (``processing_ms``: the negotiation and the allreduces) ends, so cycles and
    steps keep in phase. From one cycle's start, the gradients are ready after
    ``processing + work``; the cycle that takes them starts at the next multiple of the cycle
    time; the wait for the allreduces is that start plus the processing, minus the work.

    >>> float(cycle_wait_ms(4.35, 50.0))      # 4.35 ms of work, 50 ms cycles
    45.65
    >>> float(cycle_wait_ms(4.35, 1.0))       # the default: 0.65 ms
    0.65
    >>> float(cycle_wait_ms(4.5, 5.0, 1.0))   # 5.5 ms from a cycle's start: the second cycle
    6.5
    """
    work = np.asarray(work_ms, dtype=float)
    ready = work + processing_ms
    start = np.ceil(ready / cycle_ms - 1e-9) * cycle_ms
    return np.round(start + processing_ms - work, 9)


def _processing_ms(tl: Timeline | None) -> float:
    """A step's processing on the background thread: its gradient responses' durations added
    up, median over the steps (0 without a timeline: the model's wait is then a lower
    bound)."""
    if tl is None or tl.spans.empty:
        return 0.0
    groups, starts = _gradient_groups(tl)
    if groups.empty or len(starts) < 2:
        return 0.0
    step = np.searchsorted(starts["start_us"].to_numpy(), groups["start_us"].to_numpy()) - 1
    return float(groups.assign(step=step).groupby("step")["dur_us"].sum().median() / 1e3)


def cycle_cost(settings: dict, steps: pd.DataFrame, tl: Timeline | None) -> Cost:
    """A long cycle time: every step waits for the next background cycle after its gradients
    are handed over (:func:`cycle_wait_ms`). The saving of Horovod's default 1 ms cycle is the
    model's wait at this run's cycle time minus its wait at 1 ms, step by step with each step's
    own work (the least-waiting rank's step minus its wait) and the timeline's processing per
    step, and at most that rank's measured wait. The cycle time is the run's setting; without
    one (a timeline alone), the cycle marks' median interval. At the default cycle time the
    saving is 0 by definition."""
    cycle = settings.get("cycle_time_ms")
    source = "setting"
    if cycle is None and tl is not None and len(tl.cycles) >= 2:
        cycle = float(np.median(np.diff(np.sort(tl.cycles["start_us"].to_numpy()))) / 1e3)
        source = "cycle marks"
    if cycle is None:
        return Cost(
            "long_cycle_time",
            False,
            missing="the run's Horovod settings (run.json) or a timeline with cycle marks "
            "(--mark-cycles / HOROVOD_TIMELINE_MARK_CYCLES=1)",
        )
    numbers = {"cycle_ms": float(cycle), "cycle_source": source}
    if float(cycle) <= DEFAULT_CYCLE_MS:
        return Cost("long_cycle_time", True, 0.0, 0.0, None, numbers)
    wide = step_table(steps) if steps is not None and len(steps) else {}
    if "wait" not in wide or "step" not in wide:
        return Cost(
            "long_cycle_time",
            False,
            numbers=numbers,
            missing="the ranks' step times (what each step computes before its hand-over)",
        )
    rank = wide["wait"].median().idxmin()
    work = (wide["step"][rank] - wide["wait"][rank]).to_numpy()
    measured_wait = float(wide["wait"][rank].median())
    processing = _processing_ms(tl)
    at_cycle = cycle_wait_ms(work, float(cycle), processing)
    saved = at_cycle - cycle_wait_ms(work, DEFAULT_CYCLE_MS, processing)
    mean, se = _center(saved)
    numbers |= {
        "predicted_wait_ms": float(np.median(at_cycle)),
        "measured_wait_ms": measured_wait,
        "processing_ms": processing,
    }
    saving = min(max(mean, 0.0), measured_wait)
    estimator = "cycle_marks" if source == "cycle marks" else ""
    return Cost("long_cycle_time", True, saving, Z * se, None, numbers, estimator=estimator)


# ---------------------------------------------------------------------------------------------
# Responses and negotiations (the timeline)


def _gradient_groups(tl: Timeline) -> tuple[pd.DataFrame, pd.DataFrame]:
    from workshop.analysis.timeline import fusion_groups, gradient_tensors, step_starts

    grads = set(gradient_tensors(tl.spans))
    groups = fusion_groups(tl.spans)
    if not grads or groups.empty:
        return groups.iloc[0:0], pd.DataFrame()
    carries = groups["names"].map(lambda names: bool(grads & set(str(names).split(";"))))
    starts = step_starts(tl.spans)
    groups = groups[carries & (groups["op"].astype(str) == "ALLREDUCE")].copy()
    if len(starts) >= 3:  # leave the first step out, as for the step files
        groups = groups[groups["start_us"] >= starts["start_us"].iloc[1]]
        starts = starts.iloc[1:]
    return groups, starts


def _rounds(groups: pd.DataFrame, tl: Timeline, cycle_ms: float) -> np.ndarray:
    """The background cycle of each response: by the cycle marks where there are; else
    responses processed back to back (less than half a cycle apart) share one."""
    if len(tl.cycles) >= 2:
        marks = np.sort(tl.cycles["start_us"].to_numpy())
        return np.searchsorted(marks, groups["start_us"].to_numpy(), side="right")
    ordered = groups.sort_values("start_us")
    gap = ordered["start_us"].to_numpy()[1:] - ordered["end_us"].to_numpy()[:-1]
    new = np.concatenate([[1], (gap > 500.0 * cycle_ms).astype(int)])
    out = pd.Series(np.cumsum(new), index=ordered.index)
    return out.reindex(groups.index).to_numpy()


def _least_wait_ms(steps: pd.DataFrame | None) -> float:
    """The median wait per step of the rank that waits least at the allreduces (NaN without
    step times): what communication costs the step where no compute hides it, the most that a
    fix to Horovod's communication can save."""
    wide = step_table(steps) if steps is not None and len(steps) else {}
    if "wait" not in wide or wide["wait"].empty:
        return math.nan
    return float(wide["wait"].median().min())


def fusion_cost(settings: dict, tl: Timeline | None, steps: pd.DataFrame | None = None) -> Cost:
    """Fusion off: each gradient is a response of its own, and every response pays the fixed
    cost of one collective (its latency) on the background thread, one after the other. Fused,
    the gradients of one cycle are one response: the saving per step is the extra responses
    (responses per step minus the cycles that carry them) times one response's fixed cost, the
    intercept of a straight line through this run's responses' durations against their bytes.
    Responses processed while the backward pass still computes are hidden behind it, so the
    saving is at most the wait the least-waiting rank measured (:func:`_least_wait_ms`). With
    the fusion threshold at its default (or above the largest response's bytes) the saving is
    0."""
    threshold = settings.get("fusion_threshold_bytes")
    if threshold is not None and threshold > 0:
        return Cost("fusion_off", True, 0.0, 0.0, None, {"threshold_bytes": threshold})
    if tl is None or tl.spans.empty:
        return Cost(
            "fusion_off",
            False,
            numbers={"threshold_bytes": threshold},
            missing="a Horovod timeline (--timeline / HOROVOD_TIMELINE)",
        )
    groups, starts = _gradient_groups(tl)
    if len(starts) < 3 or len(groups) < 3:
        return Cost("fusion_off", False, missing="a timeline of at least 3 training steps")
    cycle = settings.get("cycle_time_ms") or DEFAULT_CYCLE_MS
    groups = groups.assign(round=_rounds(groups, tl, cycle))
    counted = len(starts)
    responses = len(groups) / counted
    rounds = groups["round"].nunique() / counted
    numbers = {"responses_per_step": responses, "cycles_per_step": rounds}
    extra = max(responses - rounds, 0.0)
    sized = groups.dropna(subset=["bytes"])
    if extra == 0 or len(sized) < 3 or sized["bytes"].nunique() < 2:
        latency, se = float(groups["dur_us"].min()) / 1e3, 0.0
    else:
        x, y = sized["bytes"].to_numpy(float), sized["dur_us"].to_numpy(float) / 1e3
        (slope, intercept), cov = np.polyfit(x, y, 1, cov=True)
        latency, se = max(float(intercept), 0.0), float(math.sqrt(max(cov[1, 1], 0.0)))
    numbers["response_latency_ms"] = latency
    saving, bound = extra * latency, _least_wait_ms(steps)
    if not math.isnan(bound):
        numbers["least_wait_ms"] = bound
        saving = min(saving, bound)
    # without the setting (a timeline alone) the estimate is the timeline's: its noise is
    # calibrated apart (healthy runs read as if their settings were unknown)
    estimator = "timeline" if threshold is None else ""
    return Cost("fusion_off", True, saving, Z * se * extra, None, numbers, estimator=estimator)


def cache_cost(settings: dict, tl: Timeline | None) -> Cost:
    """The response cache off: in every cycle the coordinator gathers the ranks' requests and
    sends the responses back (with the cache on, a repeated tensor is agreed on in one
    bit-vector allreduce). The timeline shows that coordination where every rank handed the
    tensor over in the same cycle: from the coordinator's own readiness tick (it records its
    own requests first, controller.cc) to the negotiation's end, nobody waits for a rank, only
    for the messages. That, per cycle (the median), times the cycles that negotiate gradients
    per step is the saving (the cache's own allreduce is not subtracted: an upper bound). With
    the cache on the saving is 0."""
    capacity = settings.get("cache_capacity")
    if capacity is not None and capacity > 0:
        return Cost("cache_off", True, 0.0, 0.0, None, {"cache_capacity": capacity})
    missing = "a Horovod timeline whose gradient negotiations have readiness ticks (cache off)"
    if tl is None or tl.spans.empty or tl.ticks.empty:
        return Cost("cache_off", False, numbers={"cache_capacity": capacity}, missing=missing)
    groups, starts = _gradient_groups(tl)
    if len(starts) < 3:
        return Cost("cache_off", False, missing=missing)
    cycle = settings.get("cycle_time_ms") or DEFAULT_CYCLE_MS
    ticks = tl.ticks[tl.ticks["ts_us"] >= starts["start_us"].iloc[0]]
    ticks = ticks[
        ticks["pid"].isin(
            tl.spans.loc[tl.spans["tensor"].isin(groups["names"].str.split(";").explode()), "pid"]
        )
    ]
    per = ticks.groupby(["pid", "negotiation"]).agg(
        first=("ts_us", "min"), last=("ts_us", "max"), ranks=("rank", "nunique")
    )
    together = per[(per["ranks"] >= 2) & (per["last"] - per["first"] < 1000.0 * cycle)]
    neg = tl.spans[tl.spans["name"].astype(str) == "NEGOTIATE_ALLREDUCE"]
    ends = neg.groupby("pid")["end_us"].apply(np.sort)
    coordination = []
    for (pid, _), row in together.iterrows():
        closing = ends.get(pid)
        if closing is None:
            continue
        after = closing[closing >= row["last"]]
        if len(after):
            coordination.append((after[0] - row["first"]) / 1e3)
    if len(coordination) < 3:
        return Cost("cache_off", False, missing=missing)
    rounds = pd.Series(_rounds(groups, tl, cycle)).nunique() / len(starts)
    per_round, se = _center(coordination)
    numbers = {"coordination_ms": per_round, "cycles_per_step": rounds}
    return Cost("cache_off", True, per_round * rounds, Z * se * rounds, None, numbers)


def comm_cost(steps: pd.DataFrame, explained_ms: float) -> Cost:
    """Communication the step cannot hide: the rank that waits least at the allreduces waits
    only for the communication (the others also wait for it). Less the waits other problems
    explain (``explained_ms``: the cycle, fusion and cache savings), that wait is the
    communication no compute hides. Doubling the compute per allreduce (two backward passes
    per step, or a batch twice as large per worker) halves the allreduces per sample: the
    saving is half the unhidden wait per step of work."""
    wide = step_table(steps)
    wait = wide.get("wait")
    if wait is None or wait.empty:
        return Cost(
            "small_batch",
            False,
            missing="the ranks' time waiting for the allreduces (wait_s in the step files)",
        )
    rank = wait.median().idxmin()
    mean, se = _center(wait[rank])
    unhidden = max(mean - explained_ms, 0.0)
    numbers = {"least_wait_ms": mean, "explained_ms": explained_ms, "unhidden_ms": unhidden}
    return Cost("small_batch", True, unhidden / 2, Z * se / 2, int(rank), numbers)


def lr_cost(record: dict, metrics: pd.DataFrame) -> Cost:
    """An unscaled learning rate costs accuracy, not time: measured as the LR used over the
    linear rule's (:func:`workshop.analysis.diagnose.measures.lr_ratio`)."""
    ratio = lr_ratio(record, metrics)
    if math.isnan(ratio):
        return Cost(
            "lr_not_scaled", False, missing="run.json's lr and batch size, and metrics.jsonl"
        )
    return Cost("lr_not_scaled", True, math.nan, math.nan, None, {"lr_ratio": ratio})
