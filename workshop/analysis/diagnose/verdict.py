"""The diagnosis's decision: every problem's cost (:mod:`.costs`), which costs are findings,
and whether the run is healthy. ``workshop diagnose``, ``workshop timeline report`` and the
capstone call :func:`judge`; :mod:`workshop.findings.diagnose` only words its result.

The rule, in one place:

- a **finding** is a problem whose fix would save at least :data:`MIN_SHARE` of a step, and
  whose saving, less its own uncertainty (about two standard errors over the run's steps),
  still lies beyond the estimator's *noise*: the largest saving it shows on the healthy
  calibration runs (:func:`calibrate`), as a share of their step;
- findings are ordered by saving; a crash comes first, then more threads than cores (every
  timing was taken on shared cores), and an unscaled LR (accuracy, not time) last;
- **healthy** only when every problem was measured and none is a finding; otherwise the
  verdict names what could not be measured and what would measure it.

Recorded runs calibrate the noise; they never set where a finding starts. The threshold is
:data:`MIN_SHARE`, stated here.
"""

from __future__ import annotations

import math
import shlex
from typing import TYPE_CHECKING, Any

import pandas as pd

from workshop.analysis.diagnose.costs import (
    DEFAULT_CYCLE_MS,
    Cost,
    cache_cost,
    comm_cost,
    cycle_cost,
    fusion_cost,
    input_cost,
    lr_cost,
    step_ms,
    straggler_cost,
)
from workshop.analysis.diagnose.measures import core_sharing
from workshop.rules import (
    CACHE_CAPACITY_DEFAULT,
    CYCLE_TIME_DEFAULT_MS,
    FUSION_THRESHOLD_DEFAULT_BYTES,
    HOROVOD_ENV_KEY,
    MAX_FOREIGN_CORES,
    first_unprofiled_step,
)

if TYPE_CHECKING:
    from workshop.readers.timeline import Timeline

__all__ = [
    "HOROVOD_DEFAULTS",
    "MIN_SHARE",
    "PROBLEMS",
    "TIMED",
    "QUIET_CORES",
    "SETTINGS",
    "calibrate",
    "calibration_problems",
    "costs",
    "horovod_settings",
    "judge",
    "runs_ddp",
    "unprofiled",
    "timeline_evidence",
    "timeline_step_ms",
]

#: A finding saves at least this share of a step: below a tenth, a fix is not worth a
#: learner's first hour, and a tenth lies above what every estimator shows on the healthy
#: calibration runs of data/diagnose/calibration.json (their largest: its ``noise``).
MIN_SHARE = 0.10

#: The problems, in the order ties are broken. ``TIMED`` are judged by the time their fix
#: saves; ``lr_not_scaled`` and ``oversubscribed`` are a rule broken (accuracy, shared cores).
PROBLEMS = (
    "crashed",
    "straggler",
    "long_cycle_time",
    "fusion_off",
    "cache_off",
    "small_batch",
    "input_pipeline",
    "oversubscribed",
    "lr_not_scaled",
)
TIMED = (
    "straggler",
    "long_cycle_time",
    "fusion_off",
    "cache_off",
    "small_batch",
    "input_pipeline",
)

#: A found problem that distorts another's estimate: a straggler's core is shared with other
#: work (or its cause is unknown), so its own allreduces and Horovod's background thread run
#: slowly too, and the least-waiting rank (the straggler) waits for communication that a
#: core of its own would not make it wait: communication-bound is then no finding of its own.
EXPLAINS = {"straggler": ("small_batch",)}

#: The settings the diagnosis reads: Horovod 0.28.1's default (its one home and source:
#: :mod:`workshop.rules`), the variable in the ranks' environment, horovodrun's flag for it and
#: the flag's unit in the variable's (horovod/runner/common/util/config_parser.py: the flags
#: become these variables; the fusion threshold's flag is in MiB, its variable in bytes).
SETTINGS = {
    "cycle_time_ms": (CYCLE_TIME_DEFAULT_MS, "HOROVOD_CYCLE_TIME", "--cycle-time-ms", 1),
    "fusion_threshold_bytes": (
        FUSION_THRESHOLD_DEFAULT_BYTES,
        "HOROVOD_FUSION_THRESHOLD",
        "--fusion-threshold-mb",
        1024 * 1024,
    ),
    "cache_capacity": (CACHE_CAPACITY_DEFAULT, "HOROVOD_CACHE_CAPACITY", "--cache-capacity", 1),
}
HOROVOD_DEFAULTS = {key: default for key, (default, *_) in SETTINGS.items()}


def horovod_settings(record: dict) -> dict[str, Any]:
    """The Horovod settings a run ran with: run.json's ``horovod_env`` (the ``HOROVOD_*``
    variables rank 0's environment held, :func:`workshop.rules.write_horovod_env`), else what
    its launch command and recorded environment set, over Horovod's defaults. A value is None
    where nothing says (a timeline without its run.json).

    >>> horovod_settings({"launch_command": ["horovodrun", "--cycle-time-ms", "50"],
    ...                   "env": {}})["cycle_time_ms"]
    50.0
    >>> horovod_settings({})["cycle_time_ms"] is None
    True
    """
    if not record:
        return {key: None for key in HOROVOD_DEFAULTS} | {"source": None}
    out: dict[str, Any] = dict(HOROVOD_DEFAULTS)
    source = "Horovod's defaults"
    recorded = record.get(HOROVOD_ENV_KEY) or {}
    env = {**(record.get("env") or {}), **recorded}
    command = record.get("launch_command") or []
    if isinstance(command, str):
        command = shlex.split(command)
    for key, (_, variable, flag, unit) in SETTINGS.items():
        given = [(command[i + 1], unit, "the launch command") for i, word in
                 enumerate(command[:-1]) if word == flag]  # fmt: skip
        if variable in env:
            where = "the ranks' environment" if recorded else "the launcher's environment"
            given.append((env[variable], 1, where))
        for value, scale, where in given:
            try:
                out[key], source = float(value) * scale, where
            except ValueError:  # not a number: Horovod would not read it either
                continue
    return out | {"source": source}


def timeline_step_ms(tl: Timeline | None) -> float:
    """The median step from the timeline's gradient negotiations, ms (NaN without)."""
    if tl is None or tl.spans.empty:
        return math.nan
    from workshop.analysis.timeline import step_starts

    starts = step_starts(tl.spans)
    if len(starts) < 3:
        return math.nan
    return float(starts["dur_us"].iloc[1:-1].median() / 1e3)


def timeline_evidence(tl: Timeline | None, settings: dict) -> dict[str, Any]:
    """What a timeline alone shows (a cluster job's folder has nothing else): the share of a
    step a gradient's negotiation lasts, the rank latest to be ready with the coordinator's
    bias taken out (in whole cycles, :func:`~.measures.tick_lateness`), the library of each
    op, the gradient responses per step and the cycle interval. Empty without a timeline."""
    if tl is None or tl.spans.empty:
        return {}
    from workshop.analysis.diagnose.measures import (
        cycle_interval_ms,
        late_cycles,
        negotiate_share,
        responses_per_step,
    )
    from workshop.analysis.timeline import detect_backend

    cycle = settings.get("cycle_time_ms") or DEFAULT_CYCLE_MS
    late, rank = late_cycles(tl, cycle_us=1000.0 * cycle)
    libraries = detect_backend(tl.spans)
    return {
        "negotiate_share": negotiate_share(tl),
        "late_cycles": late,
        "late_rank": rank,
        "responses_per_step": responses_per_step(tl),
        "cycle_interval_ms": cycle_interval_ms(tl),
        "libraries": dict(
            zip(libraries["op"].astype(str), libraries["library"].astype(str), strict=True)
        ),
        "step_ms": timeline_step_ms(tl),
    }


def runs_ddp(record: dict) -> bool:
    """The run's gradients were allreduced by PyTorch DDP (run.json's ``engine``, written by
    ``workshop run --script`` on a DDP script), not by Horovod: Horovod's cycle, fusion
    buffer and response cache are not its mechanisms (DDP allreduces each bucket as soon as
    its gradients are ready, in a fixed order: no cycle, no negotiation, no cache; its bucket
    size is ``ddp_settings``' ``bucket_cap_mb``). A run recorded without ``engine`` is a
    Horovod run.

    >>> runs_ddp({"engine": "ddp"}), runs_ddp({})
    (True, False)
    """
    return record.get("engine") == "ddp"


def unprofiled(record: dict, steps: pd.DataFrame | None) -> pd.DataFrame | None:
    """The steps the profiler of a ``--profile-steps`` run did not slow (from
    :func:`workshop.rules.first_unprofiled_step` on; every step of a run without it): a
    profiled step records every operator and the step after it writes the trace, which would
    read as compute the fix of a problem could save.

    >>> import pandas as pd
    >>> steps = pd.DataFrame({"step": range(10)})
    >>> len(unprofiled({"config": {"profile_steps": 3}}, steps)), len(unprofiled({}, steps))
    (4, 10)
    """
    first = first_unprofiled_step((record.get("config") or {}).get("profile_steps"))
    if steps is None or not first or not len(steps):
        return steps
    return steps[steps["step"] >= first]


def costs(
    record: dict, metrics: pd.DataFrame, steps: pd.DataFrame, tl: Timeline | None
) -> list[Cost]:
    """Every problem's :class:`~.costs.Cost` on one run, in :data:`PROBLEMS` order (without
    ``crashed``, which is the run's status, and without Horovod's cycle, fusion and cache on
    a DDP run: :func:`runs_ddp`)."""
    settings = horovod_settings(record)
    steps = unprofiled(record, steps)
    has_steps = steps is not None and len(steps) > 0
    empty = pd.DataFrame(columns=["rank", "step", "data_s", "compute_s", "wait_s", "step_s"])
    steps = steps if has_steps else empty
    straggler = straggler_cost(record, steps)
    horovod = []
    if not runs_ddp(record):  # Horovod's own mechanisms: a DDP run has none of them
        horovod = [cycle_cost(settings, steps, tl), fusion_cost(settings, tl, steps)]
        horovod.append(cache_cost(settings, tl))
    explained = sum(c.saving_ms for c in horovod if c.measured and not math.isnan(c.saving_ms))
    out = [straggler, *horovod, comm_cost(steps, explained), input_cost(steps)]
    out.append(_oversubscribed(record, steps))
    out.append(lr_cost(record, metrics))
    return out


def _oversubscribed(record: dict, steps: pd.DataFrame) -> Cost:
    sharing = core_sharing(record)
    if sharing.empty:
        return Cost("oversubscribed", False, missing="run.json's np and the host's cores")
    worst = sharing.sort_values("threads_per_core", ascending=False).iloc[0]
    return Cost(
        "oversubscribed",
        True,
        math.nan,
        math.nan,
        None,
        {k: worst[k] for k in ("host", "ranks", "threads_per_rank", "cores", "threads_per_core")},
    )


def calibrate(runs: dict[str, tuple[float, list[Cost]]]) -> pd.DataFrame:
    """Each estimator's noise: the savings it shows on healthy runs, as a share of their step.

    Args:
        runs: run name -> (its step in ms, its :func:`costs`).

    Returns:
        One row per timed estimator (``problem``, ``estimator``): ``runs``, ``min``,
        ``median``, ``max`` (shares of a step).
    """
    rows = []
    for step, found in runs.values():
        for c in found:
            if c.problem in TIMED and c.measured and step > 0:
                rows.append(
                    {"problem": c.problem, "estimator": c.estimator, "share": c.saving_ms / step}
                )
    if not rows:
        return pd.DataFrame(columns=["problem", "estimator", "runs", "min", "median", "max"])
    table = pd.DataFrame(rows).groupby(["problem", "estimator"])["share"]
    return table.agg(runs="size", min="min", median="median", max="max").reset_index()


def _noise(noise: pd.DataFrame, cost: Cost) -> float:
    if noise is None or noise.empty:
        return 0.0
    hit = noise[(noise["problem"] == cost.problem) & (noise["estimator"] == cost.estimator)]
    return float(hit["max"].iloc[0]) if len(hit) else 0.0


def judge(
    record: dict,
    metrics: pd.DataFrame,
    steps: pd.DataFrame,
    tl: Timeline | None,
    noise: pd.DataFrame,
    found: list[Cost] | None = None,
) -> dict[str, Any]:
    """The diagnosis of one run.

    Args:
        record: run.json as a dict (``{}`` for a timeline without its run directory).
        metrics, steps: ``read_metrics`` and ``read_step_times`` (may be empty).
        tl: the run's timeline, or None.
        noise: :func:`calibrate` of the healthy calibration runs.
        found: the run's :func:`costs`, when already computed (judging one run against
            several calibrations).

    Returns:
        ``step_ms``; ``costs``: one dict per problem (``problem``, ``measured``,
        ``saving_ms``, ``uncertainty_ms`` (the run's own), ``noise_share`` (the estimator's on
        healthy runs), ``share`` (saving / step), ``finding``, ``rank``, ``numbers``,
        ``missing``, ``estimator``); ``findings``: the problems found, in the order above;
        ``not_measured``; ``healthy``; ``settings``.
    """
    found = costs(record, metrics, steps, tl) if found is None else found
    steps = unprofiled(record, steps)
    step = step_ms(steps) if steps is not None and len(steps) else math.nan
    if math.isnan(step):
        step = timeline_step_ms(tl)
    rows = []
    for c in found:
        noise_share = _noise(noise, c) if c.problem in TIMED else 0.0
        share = c.saving_ms / step if step and not math.isnan(step) else math.nan
        finding = False
        if c.measured and c.problem in TIMED and not math.isnan(share):
            # beyond chance even at the low end of its own uncertainty
            low = c.saving_ms - (0.0 if math.isinf(c.uncertainty_ms) else c.uncertainty_ms)
            finding = (
                share >= MIN_SHARE
                and low > noise_share * step
                and not math.isinf(c.uncertainty_ms)
            )
        elif c.measured and c.problem == "lr_not_scaled":
            finding = c.numbers["lr_ratio"] < LR_RULE_RATIO
        elif c.measured and c.problem == "oversubscribed":
            finding = c.numbers["threads_per_core"] > 1
        rows.append(
            {
                "problem": c.problem,
                "measured": c.measured,
                "saving_ms": c.saving_ms,
                "uncertainty_ms": c.uncertainty_ms,
                "noise_share": noise_share,
                "share": share,
                "finding": bool(finding),
                "rank": c.rank,
                "numbers": c.numbers,
                "missing": c.missing,
                "estimator": c.estimator,
            }
        )
    found_problems = {r["problem"] for r in rows if r["finding"]}
    for cause, explained in EXPLAINS.items():
        if cause in found_problems:
            for r in rows:
                if r["problem"] in explained and r["finding"]:
                    r["finding"], r["explained_by"] = False, cause
    crashed = record.get("status") not in (None, "ok")
    timed = sorted(
        (r for r in rows if r["finding"] and r["problem"] in TIMED),
        key=lambda r: (-r["saving_ms"], PROBLEMS.index(r["problem"])),
    )
    rules = [r["problem"] for r in rows if r["finding"] and r["problem"] not in TIMED]
    # more threads than cores comes before the timed problems: every timing was taken on
    # shared cores (a rank that waits for a core computes slower and makes the others wait)
    first = (["crashed"] if crashed else []) + [p for p in rules if p == "oversubscribed"]
    findings = first + [r["problem"] for r in timed] + [p for p in rules if p not in first]
    not_measured = [r["problem"] for r in rows if not r["measured"]]
    ddp = runs_ddp(record)
    return {
        "step_ms": step,
        "timeline": timeline_evidence(tl, settings=horovod_settings(record)),
        "costs": rows,
        "findings": findings,
        "not_measured": not_measured,
        "healthy": not findings and not not_measured,
        "settings": (record.get("ddp_settings") or {}) if ddp else horovod_settings(record),
        "engine": "ddp" if ddp else "horovod",
        "min_share": MIN_SHARE,
    }


#: An LR more than a fifth below the linear rule's (0.8x) is called unscaled: the square-root
#: rule at 2 ranks gives 0.71x, at 4 ranks 0.5x; the linear rule is what the workshop teaches
#: (lesson 07) and what ``workshop run --lr-scaling linear`` (its default) applies.
LR_RULE_RATIO = 0.8


#: Other work beside the ranks (run.json's ``other_work_cores``) above which a run is not a
#: healthy calibration run: twice what the recording path's quiet gate allows
#: (:data:`workshop.rules.MAX_FOREIGN_CORES`, 0.05 cores): still nothing else ran.
QUIET_CORES = 2 * MAX_FOREIGN_CORES


def calibration_problems(record: dict) -> list[str]:
    """Why a recorded run cannot calibrate the noise: each problem the diagnosis names that
    the run's own record shows (a Horovod setting off its default, an unscaled LR, other work
    beside the ranks, or no record of it, a run that did not end well, more threads than
    cores). Empty for a run fit to calibrate.

    >>> calibration_problems({"status": "ok", "other_work_cores": 0.02, "env": {},
    ...     "launch_command": ["horovodrun", "--cache-capacity", "0"], "config": {"np": 2}})
    ['cache_capacity 0 (Horovod default 1024)']
    """
    out = []
    if record.get("status") != "ok":
        out.append(f"status {record.get('status')}")
    settings = horovod_settings(record)
    for key, default in HOROVOD_DEFAULTS.items():
        if settings.get(key) != default:
            out.append(f"{key} {settings.get(key):g} (Horovod default {default:g})")
    cores = record.get("other_work_cores")
    if cores is None:
        out.append("other work beside the ranks not recorded (other_work_cores)")
    elif cores > QUIET_CORES:
        out.append(f"other work beside the ranks: {cores:g} cores (> {QUIET_CORES:g})")
    if (record.get("config") or {}).get("lr_scaling") == "none":
        out.append("lr_scaling none")
    sharing = core_sharing(record)
    if len(sharing) and (sharing["threads_per_core"] > 1).any():
        out.append("more threads than cores")
    return out
