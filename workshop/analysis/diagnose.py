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
                          slowest rank divided by the other ranks'. Beside it, never a finding
                          by itself: ``late_cycles``, from the timeline's readiness ticks with
                          the coordinator's bias taken out (:func:`tick_lateness`).
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

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from workshop.frames import require_columns, takes_run
from workshop.rules import scaled_lr

if TYPE_CHECKING:
    from workshop.readers.timeline import Timeline

__all__ = [
    "MEASURES",
    "PROBLEM_IDS",
    "SETTINGS",
    "SETTING_PROBLEMS",
    "Measure",
    "compare_with_reference",
    "comm_share",
    "compute_by_rank",
    "compute_ratio",
    "core_sharing",
    "cycle_interval_ms",
    "data_share",
    "evidence",
    "lr_ratio",
    "negotiate_share",
    "reference_from_evidence",
    "responses_per_step",
    "setting_notes",
    "tick_lateness",
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
#: Steps left out at the start of a run: the first step sets up Horovod (fusion buffer, the
#: first negotiations) and the broadcasts.
SKIP_STEPS = 1
STEP_COLUMNS = ("rank", "step", "data_s", "compute_s", "wait_s", "step_s")
_STEPS = {"frame": "steps", "hint": "pass workshop.readers.read_step_times(run_dir)"}


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
# Per-rank step times


@takes_run
def compute_by_rank(steps: pd.DataFrame, skip_steps: int = SKIP_STEPS) -> pd.DataFrame:
    """Each rank's typical step, from :func:`workshop.readers.runs.read_step_times`.

    Args:
        steps: one row per rank and step (``rank``, ``step``, ``data_s``, ``compute_s``,
            ``wait_s``, ``step_s``).
        skip_steps: steps left out at the start (start-up).

    Returns:
        One row per rank: ``rank``, ``steps`` (counted), ``compute_ms``, ``wait_ms``,
        ``data_ms``, ``step_ms`` (medians over the steps), ``compute_p25_ms`` (the lower
        quartile of the compute per step: what the rank takes at least in three steps of
        four), ``slowest_share`` (the share of steps in which this rank's compute was the
        longest of all ranks).
    """
    require_columns(steps, STEP_COLUMNS, "workshop.analysis.diagnose", **_STEPS)
    cols = ["rank", "steps", "compute_ms", "wait_ms", "data_ms", "step_ms", "compute_p25_ms"]
    cols.append("slowest_share")
    kept = steps[steps["step"] >= skip_steps]
    if kept.empty:
        return pd.DataFrame(columns=cols)
    g = kept.groupby("rank")
    out = pd.DataFrame({"steps": g.size()})
    for name in ("compute", "wait", "data", "step"):
        out[f"{name}_ms"] = g[f"{name}_s"].median() * 1e3
    out["compute_p25_ms"] = g["compute_s"].quantile(0.25) * 1e3
    wide = kept.pivot_table(index="step", columns="rank", values="compute_s")
    wide = wide.dropna()
    slowest = wide.idxmax(axis=1).value_counts() / max(len(wide), 1)
    out["slowest_share"] = slowest.reindex(out.index).fillna(0.0)
    return out.reset_index()[cols]


@takes_run
def compute_ratio(steps: pd.DataFrame, skip_steps: int = SKIP_STEPS) -> tuple[float, int | None]:
    """The straggler's evidence: the slowest rank's compute per step divided by the other
    ranks', and that rank; ``(nan, None)`` for fewer than 2 ranks.

    A rank's compute is its lower quartile over the steps (``compute_p25_ms``): a straggler is
    slower *consistently*, in every step, while other work that comes and goes on a shared
    machine lengthens some steps of any rank. (Chosen on ``benchmarks/straggler_signal.py``'s
    20 runs on a busy machine: the ratio of medians left a margin of 1.02 between the smallest
    straggler and the largest healthy run, the ratio of lower quartiles 1.32. Recorded again on
    a quiet machine with three busy processes beside a rank: margin 1.70, and 2.08 and 1.67 on
    two sets of fresh runs; data/benchmarks/straggler-signal/.) The others' value is the
    median of their lower quartiles.

    >>> steps = pd.DataFrame({"rank": [0] * 4 + [1] * 4, "step": [1, 2, 3, 4] * 2,
    ...     "data_s": 0.0, "compute_s": [0.010, 0.011, 0.012, 0.030,   # one slow step
    ...                                  0.021, 0.022, 0.023, 0.024], "wait_s": 0.0,
    ...     "step_s": 0.03})
    >>> compute_ratio(steps)   # lower quartiles: rank 1 21.75 ms, rank 0 10.75 ms
    (2.023256, 1)
    """
    table = compute_by_rank(steps, skip_steps)
    if len(table) < 2:
        return math.nan, None
    table = table.sort_values("compute_p25_ms", ascending=False, kind="stable")
    slowest = table.iloc[0]
    others = float(table["compute_p25_ms"].iloc[1:].median())
    if others <= 0:
        return math.nan, None
    return round(float(slowest["compute_p25_ms"]) / others, 6), int(slowest["rank"])


@takes_run
def comm_share(steps: pd.DataFrame, skip_steps: int = SKIP_STEPS) -> float:
    """The share of a step spent waiting for the allreduces, on the rank that waits least
    (median over its steps). A rank waits for the slower ranks and for the communication; the
    rank that waits least waits almost only for the communication, so a high share there means
    the steps are communication-bound (too little compute per allreduce: a small batch)."""
    require_columns(steps, STEP_COLUMNS, "workshop.analysis.diagnose", **_STEPS)
    kept = steps[(steps["step"] >= skip_steps) & (steps["step_s"] > 0)]
    if kept.empty:
        return math.nan
    share = (kept["wait_s"] / kept["step_s"]).groupby(kept["rank"]).median()
    return float(share.min())


@takes_run
def data_share(steps: pd.DataFrame, skip_steps: int = SKIP_STEPS) -> float:
    """The share of a step spent taking the batch, on the rank where it is largest (median
    over its steps): the steps wait for the input pipeline."""
    require_columns(steps, STEP_COLUMNS, "workshop.analysis.diagnose", **_STEPS)
    kept = steps[(steps["step"] >= skip_steps) & (steps["step_s"] > 0)]
    if kept.empty:
        return math.nan
    return float((kept["data_s"] / kept["step_s"]).groupby(kept["rank"]).median().max())


# ---------------------------------------------------------------------------------------------
# From the timeline


def _gradient_ticks(tl: Timeline) -> pd.DataFrame:
    from workshop.analysis.timeline import gradient_tensors

    grads = gradient_tensors(tl.spans)
    return tl.ticks[tl.ticks["tensor"].astype(str).isin(grads)]


@takes_run
def tick_lateness(ticks: pd.DataFrame, cycles: pd.DataFrame | None, cycle_us: float = 1000.0):
    """Lateness at readiness ticks with the coordinator's bias taken out.

    In every cycle the coordinator (rank 0) records its own requests first and only then
    gathers the other ranks' lists and records theirs (controller.cc:262-301 at Horovod
    0.28.1): when every rank is ready in the same cycle, rank 0's tick comes first and another
    rank's tick is "late" by the gather, not by being slower. So lateness is counted in whole
    cycles: a tick in the same cycle as the first rank's counts 0. With cycle marks
    (``--mark-cycles``) the cycle of each tick is exact; without, a tick less than ``cycle_us``
    after the first counts 0 and a later one counts its lateness in cycles, rounded down.

    Args:
        ticks: ``Timeline.ticks`` (e.g. of the gradients only).
        cycles: ``Timeline.cycles`` or None.
        cycle_us: the cycle time when there are no marks (Horovod's default: 1 ms).

    Returns:
        One row per rank, the latest first: ``rank``, ``negotiations`` (with ticks from >= 2
        ranks), ``late_share`` (share of them in which this rank was in a later cycle than the
        first rank ready), ``late_cycles`` (mean cycles behind).
    """
    cols = ["rank", "negotiations", "late_share", "late_cycles"]
    key = ["pid", "negotiation"]
    tk = ticks[ticks.groupby(key)["rank"].transform("nunique") >= 2] if len(ticks) else ticks
    if tk.empty:
        return pd.DataFrame(columns=cols)
    if cycles is not None and len(cycles) >= 2:
        starts = np.sort(cycles["start_us"].to_numpy())
        cycle = np.searchsorted(starts, tk["ts_us"].to_numpy(), side="right")
        behind = cycle - tk.assign(c=cycle).groupby(key)["c"].transform("min").to_numpy()
    else:
        behind = np.floor(tk["lateness_us"].to_numpy() / cycle_us)
    tk = tk.assign(behind=behind)
    g = tk.groupby("rank")
    out = pd.DataFrame(
        {
            "negotiations": g.size(),
            "late_share": g["behind"].apply(lambda b: float((b > 0).mean())),
            "late_cycles": g["behind"].mean(),
        }
    ).reset_index()
    return out.sort_values("late_cycles", ascending=False, kind="stable")[cols].reset_index(
        drop=True
    )


@takes_run
def late_cycles(tl: Timeline, cycle_us: float = 1000.0) -> tuple[float, int | None]:
    """The latest rank's mean cycles behind over the gradients' negotiations (minus the other
    ranks' mean, so that ranks that take turns give about 0), and that rank; ``(nan, None)``
    without ticks from two ranks (the response cache on records ticks at start-up only)."""
    table = tick_lateness(_gradient_ticks(tl), tl.cycles, cycle_us)
    if len(table) < 2 or table["negotiations"].min() < 10:
        return math.nan, None
    top = table.iloc[0]
    rest = float(table["late_cycles"].iloc[1:].mean())
    return round(float(top["late_cycles"]) - rest, 6), int(top["rank"])


@takes_run
def responses_per_step(tl: Timeline) -> float:
    """Gradient allreduce responses per training step: responses (fusion groups) that carry a
    gradient, divided by the training steps (``analysis.step_starts``)."""
    from workshop.analysis.timeline import fusion_groups, gradient_tensors, step_starts

    grads = set(gradient_tensors(tl.spans))
    steps = len(step_starts(tl.spans))
    if not grads or not steps:
        return math.nan
    groups = fusion_groups(tl.spans)
    carries = groups["names"].map(lambda names: bool(grads & set(names.split(";"))))
    return float(carries.sum() / steps)


@takes_run
def cycle_interval_ms(tl: Timeline) -> float:
    """The median time between the starts of consecutive background cycles, in ms (the
    timeline's ``CYCLE_START`` marks, ``--mark-cycles``); NaN without marks."""
    if len(tl.cycles) < 2:
        return math.nan
    return float(np.median(np.diff(np.sort(tl.cycles["start_us"].to_numpy()))) / 1e3)


@takes_run
def negotiate_share(tl: Timeline) -> float:
    """The median ``NEGOTIATE_ALLREDUCE`` span of the gradients after the first step, divided
    by the median training step (``analysis.step_starts``). With the response cache on, a
    repeated tensor is agreed on in one bit-vector allreduce; with it off, every request goes
    to the coordinator and the answer comes back (controller.cc); either way a negotiation
    lasts until the last rank hands the gradient over, so it is measured against the step."""
    from workshop.analysis.timeline import gradient_tensors, step_starts

    spans = tl.spans
    grads = gradient_tensors(spans)
    starts = step_starts(spans)
    if not grads or len(starts) < 3:
        return math.nan
    neg = spans[
        (spans["name"].astype(str) == "NEGOTIATE_ALLREDUCE")
        & spans["tensor"].astype(str).isin(grads)
        & (spans["start_us"] >= starts["start_us"].iloc[1])
    ]
    step_us = float(starts["dur_us"].iloc[1:-1].median())
    if not len(neg) or step_us <= 0:
        return math.nan
    return float(neg["dur_us"].median() / step_us)


def lr_ratio(record: dict, metrics: pd.DataFrame) -> float:
    """The learning rate the run used (its last epoch, metrics.jsonl) divided by the one the
    linear scaling rule gives for its global batch (run.json's configuration)."""
    config = record.get("config") or {}
    if metrics.empty or not config.get("lr") or not config.get("batch_size"):
        return math.nan
    passes = config.get("backward_passes_per_step") or 1
    base = config.get("base_batch_size") or config["batch_size"] * passes
    global_batch = config["batch_size"] * passes * config["np"]
    linear = scaled_lr(config["lr"], global_batch, base, "linear")
    return float(metrics["lr"].iloc[-1] / linear)


# ---------------------------------------------------------------------------------------------
# Ranks and cores

SHARING_COLUMNS = ("host", "ranks", "threads_per_rank", "cores", "threads_per_core")


def _threads_per_rank(record: dict) -> int:
    """The compute threads each rank ran: what the ranks reported (summary.json), else the
    option, else OMP_NUM_THREADS, else 1."""
    config, env = record.get("config") or {}, record.get("env") or {}
    for value in (
        (record.get("result") or {}).get("threads_per_rank"),
        config.get("threads_per_rank"),
        env.get("OMP_NUM_THREADS"),
    ):
        try:
            if value and int(value) > 0:
                return int(value)
        except (TypeError, ValueError):
            continue
    return 1


def core_sharing(record: dict) -> pd.DataFrame:
    """How many threads the ranks ran per core of each host, from run.json.

    The ranks of a run without a cluster all run on the launching host (``host.cores``). The
    nodes of an emulated cluster (``cluster.emulated``) are namespaces of one machine: all
    ranks share its cores. On a real cluster each node's ranks are counted from
    ``cluster.rank_hosts``, against the launching host's cores (nodes alike).

    Returns:
        One row per host that ran ranks: ``host``, ``ranks``, ``threads_per_rank``, ``cores``,
        ``threads_per_core`` (ranks x threads per rank / cores: above 1, more threads than
        cores). Empty when run.json lacks np or the cores.
    """
    config, host = record.get("config") or {}, record.get("host") or {}
    np_, cores = config.get("np"), host.get("cores")
    if not np_ or not cores:
        return pd.DataFrame(columns=list(SHARING_COLUMNS))
    threads = _threads_per_rank(record)
    cluster = record.get("cluster") or {}
    if cluster.get("rank_hosts") and not cluster.get("emulated"):
        per_host: dict[str, int] = {}
        for name in cluster["rank_hosts"].values():
            per_host[name] = per_host.get(name, 0) + 1
    elif cluster.get("emulated"):
        nodes = ", ".join(cluster.get("nodes") or [])
        per_host = {f"this machine (emulated nodes {nodes} share its cores)": int(np_)}
    else:
        per_host = {host.get("hostname") or "this host": int(np_)}
    rows = [
        {
            "host": name,
            "ranks": ranks,
            "threads_per_rank": threads,
            "cores": int(cores),
            "threads_per_core": ranks * threads / cores,
        }
        for name, ranks in per_host.items()
    ]
    return pd.DataFrame(rows, columns=list(SHARING_COLUMNS))


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


#: The run options that set a problem up: problem -> (run.json config key, the Horovod
#: variable that does the same, whether a value sets it up, the option in words). The
#: variable (bytes for the fusion threshold) counts where run.json's ``env`` has it.
SETTINGS = {
    "lr_not_scaled": ("lr_scaling", None, lambda v: v == "none", "--lr-scaling none"),
    "fusion_off": (
        "fusion_threshold_mb",
        "HOROVOD_FUSION_THRESHOLD",
        lambda v: v is not None and float(v) == 0,
        "a fusion threshold of 0",
    ),
    "long_cycle_time": (
        "cycle_time_ms",
        "HOROVOD_CYCLE_TIME",
        lambda v: v is not None and float(v) > 1,
        "a cycle time above Horovod's default 1 ms",
    ),
    "cache_off": (
        "cache_capacity",
        "HOROVOD_CACHE_CAPACITY",
        lambda v: v is not None and int(v) == 0,
        "the response cache off",
    ),
}
#: The problems that are a Horovod setting: their number is called a finding only when the
#: run's options set them up (or are unknown: a timeline alone). The same number without the
#: setting points elsewhere (cycles far apart on busy cores, gradients ready in different
#: cycles, negotiations that wait for a slow rank): a note.
SETTING_PROBLEMS = ("fusion_off", "long_cycle_time", "cache_off")


def setting_notes(record: dict) -> dict[str, str]:
    """problem id -> the run option that sets it up, for the options this run used (run.json's
    ``config``, or a Horovod variable in its ``env``)."""
    config, env = record.get("config") or {}, record.get("env") or {}
    out = {}
    for problem, (key, variable, present, text) in SETTINGS.items():
        if present(config.get(key)):
            out[problem] = f"{text} ({key} = {config[key]})"
        elif variable and variable in env:
            try:
                if present(env[variable]):
                    out[problem] = f"{text} ({variable}={env[variable]})"
            except ValueError:  # not a number: Horovod would not read it either
                continue
    return out


def compare_with_reference(found: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """Each evidence number beside the healthy reference, the findings first.

    Args:
        found: :func:`evidence` of the run.
        reference: :func:`reference_from_evidence` (or the shipped healthy reference).

    Returns:
        One row per measure the run has a number for: the columns of ``found``, ``min``,
        ``median``, ``max`` (the reference), ``threshold`` (where a finding starts),
        ``severity`` (value / threshold for ``bad == "high"``, threshold / value for
        ``"low"``: >= 1 is a finding, unless the measure is only supporting), ``finding``
        (bool); sorted by severity, largest first.
        Measures without a number, or without a reference, are left out.
    """
    require_columns(
        found, ("measure", "problem", "value", "rank"), "compare_with_reference", frame="evidence"
    )
    require_columns(
        reference, ("measure", "min", "median", "max"), "compare_with_reference", frame="reference"
    )
    table = found.merge(reference, on="measure", how="inner").dropna(subset=["value", "max"])
    rows = []
    for row in table.to_dict("records"):
        spec = MEASURES[row["measure"]]
        if spec.bad == "high":
            threshold = max(row["max"] * spec.factor, row["max"] + spec.floor)
            severity = row["value"] / threshold if threshold > 0 else math.inf
        else:
            threshold = min(row["min"] / spec.factor, row["min"] - spec.floor)
            severity = threshold / row["value"] if row["value"] > 0 else math.inf
        rows.append({**row, "threshold": threshold, "severity": severity})
    cols = [*found.columns, "min", "median", "max", "threshold", "severity", "finding"]
    if not rows:
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame(rows)
    supporting = out["measure"].map(lambda m: MEASURES[m].supporting)
    out["finding"] = (out["severity"] >= 1) & ~supporting
    order = {p: i for i, p in enumerate(PROBLEM_IDS)}
    out["_order"] = out["problem"].map(order)
    out = out.sort_values(["severity", "_order"], ascending=[False, True], kind="stable")
    return out[cols].reset_index(drop=True)
