"""Results of the real-process demos (:mod:`workshop.launch.parallelism`): stage utilisation,
step times, runs compared.

The model and its conventions: see :mod:`workshop.analysis.parallelism`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workshop.frames import require_columns

__all__ = ["EVENT_COLUMNS", "compare_runs", "max_param_diff", "stage_utilisation", "step_times"]


# --------------------------------------------------------------------------------------------
# Results of the real-process demos (workshop.launch.parallelism)

EVENT_COLUMNS = ["rank", "step", "microbatch", "phase", "category", "start_s", "dur_s"]


def _window(events: pd.DataFrame, warmup_steps: int, where: str) -> pd.DataFrame:
    require_columns(events, EVENT_COLUMNS, where)
    steady = events[events["step"] >= warmup_steps]
    if steady.empty:
        raise ValueError(f"{where}: no events after the {warmup_steps} warm-up step(s)")
    return steady


def stage_utilisation(events: pd.DataFrame, *, warmup_steps: int = 1) -> pd.DataFrame:
    """Busy vs waiting time of every process, in the steady state after the warm-up.

    The window is common to all ranks: from the moment the last rank finished its warm-up
    steps to the last event on any rank; events are clipped to it. So a rank that waits for
    a slower neighbour, or finishes early while the pipeline drains, is idle for that time.

    Args:
        events: the ``events`` of a demo result (columns :data:`EVENT_COLUMNS`; ``category``
            is ``compute`` or ``communication``).
        warmup_steps: first steps left out (connection setup, first-call allocations).

    Returns:
        DataFrame per ``rank``: ``wall_s`` (window), ``compute_s`` (forward, backward,
        optimizer), ``communication_s`` (posting or blocked in send / recv / allreduce),
        ``other_s`` (the rest: Python, scheduling), ``busy_fraction`` and ``idle_fraction``
        (1 - compute_s / wall_s).
    """
    _window(events, warmup_steps, "stage_utilisation")  # checks columns and steady steps
    ends = events["start_s"] + events["dur_s"]
    warm = events["step"] < warmup_steps
    t0 = ends[warm].groupby(events["rank"][warm]).max().max() if warm.any() else None
    t0 = events["start_s"].min() if t0 is None else t0
    t1 = ends.max()
    clipped = events.assign(
        dur_s=(np.minimum(ends, t1) - np.maximum(events["start_s"], t0)).clip(lower=0)
    )
    by = clipped.pivot_table(index="rank", columns="category", values="dur_s", aggfunc="sum")
    by = by.reindex(columns=["compute", "communication"], fill_value=0.0).fillna(0.0)
    out = pd.DataFrame({"rank": by.index})
    out["wall_s"] = t1 - t0
    out["compute_s"] = by["compute"].to_numpy()
    out["communication_s"] = by["communication"].to_numpy()
    out["other_s"] = out["wall_s"] - out["compute_s"] - out["communication_s"]
    out["busy_fraction"] = out["compute_s"] / out["wall_s"]
    out["idle_fraction"] = 1 - out["busy_fraction"]
    return out


def step_times(events: pd.DataFrame, *, warmup_steps: int = 1) -> pd.DataFrame:
    """Time of every training step after the warm-up.

    In a pipeline consecutive steps overlap, so these spans add up to more than the run.

    Returns:
        DataFrame per ``step``: ``step_s`` (first start to last end over all ranks),
        ``compute_s`` and ``communication_s`` (per rank, averaged over ranks).
    """
    ev = _window(events, warmup_steps, "step_times")
    ends = ev["start_s"] + ev["dur_s"]
    span = ends.groupby(ev["step"]).max() - ev.groupby("step")["start_s"].min()
    ranks = ev.groupby("step")["rank"].nunique()
    cat = ev.pivot_table(index="step", columns="category", values="dur_s", aggfunc="sum")
    out = pd.DataFrame({"step": span.index, "step_s": span.to_numpy()})
    for c in ("compute", "communication"):
        total = cat[c] if c in cat else pd.Series(0.0, index=cat.index)
        out[f"{c}_s"] = (total.fillna(0) / ranks).to_numpy()
    return out


def compare_runs(runs: dict[str, pd.DataFrame], *, warmup_steps: int = 1) -> pd.DataFrame:
    """Steady-state time per step of several demo runs side by side.

    Uses the window of :func:`stage_utilisation` (after every rank's warm-up), divided by the
    steps after the warm-up: in a pipeline consecutive steps overlap, so this is the time
    between step completions, not the span of one step.

    Args:
        runs: label -> events; the first one is the baseline (e.g. the single process).

    Returns:
        DataFrame per ``run``: ``processes``, ``step_s``, ``compute_s``, ``communication_s``
        and ``other_s`` (per step, averaged over ranks; they add up to ``step_s``),
        ``speedup`` (baseline step_s / step_s).
    """
    if not runs:
        raise ValueError("compare_runs: no runs given")
    rows = []
    for label, events in runs.items():
        util = stage_utilisation(events, warmup_steps=warmup_steps)
        steps = events.loc[events["step"] >= warmup_steps, "step"].nunique()
        rows.append(
            {
                "run": label,
                "processes": len(util),
                "step_s": util["wall_s"].iloc[0] / steps,
                "compute_s": util["compute_s"].mean() / steps,
                "communication_s": util["communication_s"].mean() / steps,
                "other_s": util["other_s"].mean() / steps,
            }
        )
    out = pd.DataFrame(rows)
    out["speedup"] = out["step_s"].iloc[0] / out["step_s"]
    return out


def max_param_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """Largest absolute difference between two sets of parameters with the same names.

    Raises:
        ValueError: naming the parameters present in only one set, or of different shapes.
    """
    only = sorted(set(a) ^ set(b))
    if only:
        raise ValueError(f"max_param_diff: parameters in only one set: {only}")
    worst = 0.0
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        if x.shape != y.shape:
            raise ValueError(f"max_param_diff: {name!r} has shapes {x.shape} and {y.shape}")
        worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y))) if x.size else 0.0)
    return worst
