"""Each evidence number of ``workshop diagnose``, measured on one run: from the ranks' step
times (compute, waiting, taking the batch), from the timeline (readiness ticks, responses,
cycles, negotiations), from run.json (the learning rate, threads per core). Each returns NaN
where its input is missing, never a guess; :mod:`workshop.analysis.diagnose` says which
problem each number gives away.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from workshop.frames import require_columns, takes_run
from workshop.rules import STEP_FILE_REQUIRED, scaled_lr

if TYPE_CHECKING:
    from workshop.readers.timeline import Timeline

__all__ = [
    "SKIP_STEPS",
    "STEP_COLUMNS",
    "comm_share",
    "compute_by_rank",
    "compute_ratio",
    "core_sharing",
    "cpu_wait_by_rank",
    "cpu_wait_gap",
    "other_work_explains",
    "cycle_interval_ms",
    "data_share",
    "late_cycles",
    "lr_ratio",
    "negotiate_share",
    "responses_per_step",
    "tick_lateness",
]

#: Steps left out at the start of a run: the first step sets up Horovod (fusion buffer, the
#: first negotiations) and the broadcasts.
SKIP_STEPS = 1
#: The step columns every measure reads (``cpu_wait_s``, recorded since 2026-11-27, only
#: :func:`cpu_wait_gap` reads: :data:`workshop.rules.STEP_FILE_COLUMNS`).
STEP_COLUMNS = ("rank", *STEP_FILE_REQUIRED)
_STEPS = {"frame": "steps", "hint": "pass workshop.readers.read_step_times(run_dir)"}


# ---------------------------------------------------------------------------------------------
# Per-rank step times


def _top_against_others(table: pd.DataFrame, column: str) -> tuple[float, float, int | None]:
    """The largest ``column`` of a per-rank table, the median of the other ranks', and the
    rank it belongs to (the first of equals); ``(nan, nan, None)`` for fewer than 2 ranks."""
    if len(table) < 2:
        return math.nan, math.nan, None
    table = table.sort_values(column, ascending=False, kind="stable")
    top = table.iloc[0]
    return float(top[column]), float(table[column].iloc[1:].median()), int(top["rank"])


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
    two sets of fresh runs; data/benchmarks/straggler-signal/. With one busy process, a 1.2-1.9x
    straggler, it overlaps healthy runs, margin 0.93: :func:`cpu_wait_gap` separates those;
    data/benchmarks/straggler-cpu-wait/.) The others' value is the median of their lower
    quartiles.

    >>> steps = pd.DataFrame({"rank": [0] * 4 + [1] * 4, "step": [1, 2, 3, 4] * 2,
    ...     "data_s": 0.0, "compute_s": [0.010, 0.011, 0.012, 0.030,   # one slow step
    ...                                  0.021, 0.022, 0.023, 0.024], "wait_s": 0.0,
    ...     "step_s": 0.03})
    >>> compute_ratio(steps)   # lower quartiles: rank 1 21.75 ms, rank 0 10.75 ms
    (2.023256, 1)
    """
    top, others, rank = _top_against_others(compute_by_rank(steps, skip_steps), "compute_p25_ms")
    if rank is None or others <= 0:
        return math.nan, None
    return round(top / others, 6), rank


@takes_run
def cpu_wait_by_rank(steps: pd.DataFrame, skip_steps: int = SKIP_STEPS) -> pd.DataFrame:
    """Each rank's share of its compute spent waiting for a CPU: its training thread's
    run-queue wait while it computed (``cpu_wait_s``) over its compute (``compute_s``), summed
    over the steps after ``skip_steps``.

    Returns:
        One row per rank with a recorded wait: ``rank``, ``cpu_wait_share``; empty for steps
        without ``cpu_wait_s`` (recorded before 2026-11-27, or a system that does not tell).
    """
    require_columns(steps, STEP_COLUMNS, "workshop.analysis.diagnose", **_STEPS)
    if "cpu_wait_s" not in steps:
        return pd.DataFrame(columns=["rank", "cpu_wait_share"])
    kept = steps[(steps["step"] >= skip_steps) & steps["cpu_wait_s"].notna()]
    g = kept.groupby("rank")
    work = g["compute_s"].sum()
    share = (g["cpu_wait_s"].sum() / work.where(work > 0)).rename("cpu_wait_share")
    return share.dropna().reset_index()


@takes_run
def cpu_wait_gap(steps: pd.DataFrame, skip_steps: int = SKIP_STEPS) -> tuple[float, int | None]:
    """The straggler's cause in a number: how much more of its compute the most-waiting rank
    spent waiting for a CPU than the other ranks (its :func:`cpu_wait_by_rank` share minus the
    median of the others'), and that rank; ``(nan, None)`` for fewer than 2 ranks with a
    recorded wait.

    Why it separates where the compute ratio does not: a rank that shares its core with other
    work is ready to run but waits (Linux's run queue) for a share of every step that grows
    with the slowdown (slowed 1.5x: a third of its compute), while a rank that waits for the
    others is blocked in an allreduce, not ready, and adds nothing; and load that every rank
    meets alike (a busy room) raises every rank's share, not the gap. It is evidence only where
    other work ran enough to account for it (:func:`other_work_explains`): with nothing else on
    the machine, ranks the scheduler moves about wait for each other's threads, one more than
    the other by chance.

    >>> steps = pd.DataFrame({"rank": [0, 0, 1, 1], "step": [1, 2, 1, 2], "data_s": 0.0,
    ...     "compute_s": [0.010, 0.010, 0.015, 0.015], "wait_s": 0.0, "step_s": 0.02,
    ...     "cpu_wait_s": [0.0005, 0.0005, 0.005, 0.005]})
    >>> cpu_wait_gap(steps)    # rank 1 waited a third of its compute, rank 0 a twentieth
    (0.283333, 1)
    """
    top, others, rank = _top_against_others(cpu_wait_by_rank(steps, skip_steps), "cpu_wait_share")
    if rank is None:
        return math.nan, None
    return round(top - others, 6), rank


def other_work_explains(record: dict, steps: pd.DataFrame, skip_steps: int = SKIP_STEPS) -> bool:
    """Whether other work ran enough to account for the :func:`cpu_wait_gap`: while a rank
    waits for a CPU, the CPU runs something else, so the wait other work causes is at most the
    CPU time other work took. The most-waiting rank's extra wait (the gap times its compute,
    over the steps after ``skip_steps``) must not exceed what other work took meanwhile
    (run.json's ``other_work_cores``, written by ``workshop run`` since 2026-11-27, times that
    rank's training time). False without ``other_work_cores``.

    The near miss it rejects: ranks the scheduler moves about on a machine where nothing else
    runs wait for each other's threads, one more than the other by chance (gaps 0.11-0.24 of
    their compute on data/benchmarks/straggler-cpu-wait's quiet unpinned runs, where other
    work took 0.01-0.04 cores: a tenth of the wait at most).
    """
    cores = record.get("other_work_cores")
    gap, rank = cpu_wait_gap(steps, skip_steps)
    if cores is None or rank is None:
        return False
    mine = steps[(steps["rank"] == rank) & (steps["step"] >= skip_steps)]
    extra_wait_s = gap * float(mine["compute_s"].sum())
    return cores * float(mine["step_s"].sum()) >= extra_wait_s


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
