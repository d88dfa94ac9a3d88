"""Speedup and efficiency, three ways, and why they disagree.

Speedup S(N) = T(1) / T(N) for times, or X(N) / X(1) for throughputs; efficiency E(N) = S(N)/N.
The workshop measures it three ways:

* ``wall``: the whole run, initialisation included (process start to end). Start-up
  (imports, ``hvd.init()``, data loading, the initial broadcast, the first-epoch negotiation of
  every tensor) does not shrink with N and dominates short runs (seed 004: 11.64x on training
  time is only 1.85x on total time at 32 GPUs).
* ``train``: the training loop only, init excluded, all epochs (first one included).
* ``throughput``: steady-state samples per second (the first epoch left out), what
  TensorFlow's ``average_examples_per_sec`` hook reports (seed 004: 30.09x at 32 GPUs).

Inputs are "runs" DataFrames, one row per run, with an ``np`` column and any of
``total_time_s``, ``init_time_s``, ``train_time_s``, ``samples_per_s`` (all workers),
``examples_per_s`` (per worker), ``steady_epoch_time_s``; and "epochs" DataFrames, one row per
epoch, with ``np``, ``epoch`` and ``train_time_s`` (and ``run`` when several runs share an np).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from workshop.frames import require_columns
from workshop.runspec import GROUP_KEYS

METRICS = ("wall", "train", "throughput")


def first_epoch_overhead(epochs: pd.DataFrame) -> pd.DataFrame:
    """Cost of the first epoch compared with the steady state, per worker count.

    The first epoch carries one-off costs: Horovod negotiates every tensor for the first time,
    caches are cold, lazy initialisation happens (seed 000: 23 s instead of 0.9 s at 2 GPUs).

    Args:
        epochs: one row per epoch with ``np``, ``epoch``, ``train_time_s`` (optionally ``run``;
            several runs with the same np are pooled by taking the median per epoch).

    Returns:
        One row per np, sorted: ``np``, ``epochs``, ``first_epoch_s``, ``steady_epoch_s``
        (median training time of epochs >= 2; the first epoch's time if there is only one),
        ``first_epoch_overhead_s`` (first - steady), ``train_time_s`` (sum over epochs),
        ``overhead_share`` (overhead / train_time_s).

    Raises:
        ValueError: if a column is missing.
    """
    require_columns(epochs, ["np", "epoch", "train_time_s"], "first_epoch_overhead")
    per_epoch = epochs.groupby(["np", "epoch"], as_index=False)["train_time_s"].median()
    rows = []
    for n, group in per_epoch.groupby("np"):
        group = group.sort_values("epoch")
        first = float(group["train_time_s"].iloc[0])
        rest = group["train_time_s"].iloc[1:]
        steady = float(rest.median()) if len(rest) else first
        total = float(group["train_time_s"].sum())
        rows.append(
            {
                "np": int(n),
                "epochs": len(group),
                "first_epoch_s": first,
                "steady_epoch_s": steady,
                "first_epoch_overhead_s": first - steady,
                "train_time_s": total,
                "overhead_share": (first - steady) / total if total > 0 else math.nan,
            }
        )
    return pd.DataFrame(rows)


def runs_from_epochs(epochs: pd.DataFrame) -> pd.DataFrame:
    """Summarise per-epoch logs (e.g. seed 000) into one row per worker count.

    Args:
        epochs: one row per epoch: ``np``, ``epoch``, ``train_time_s``, optional
            ``test_time_s`` and ``samples_per_s``.

    Returns:
        One row per np: ``np``, ``train_time_s`` (sum), ``total_time_s`` (sum of train + test;
        no init time is known from such logs), ``steady_epoch_time_s``,
        ``first_epoch_overhead_s`` and, when the epochs have it, ``samples_per_s`` (median over
        epochs >= 2).
    """
    overhead = first_epoch_overhead(epochs)
    out = overhead[["np", "train_time_s", "first_epoch_overhead_s"]].copy()
    out["steady_epoch_time_s"] = overhead["steady_epoch_s"]
    if "test_time_s" in epochs:
        tests = epochs.groupby(["np", "epoch"])["test_time_s"].median().groupby("np").sum()
        out["total_time_s"] = out["train_time_s"] + out["np"].map(tests).fillna(0.0).to_numpy()
    else:
        out["total_time_s"] = out["train_time_s"]
    if "samples_per_s" in epochs:
        steady = epochs[epochs["epoch"] >= 2]
        if steady.empty:
            steady = epochs
        out["samples_per_s"] = out["np"].map(steady.groupby("np")["samples_per_s"].median())
    return out


def infer_throughput_per_worker(table: pd.DataFrame) -> bool | None:
    """Tell whether an ``examples_per_s`` column is per worker, using a reported speedup.

    Seed 004's table lists 202, 191, 193 ... examples/s for 1, 2, 4 ... GPUs with speedups
    1.00, 1.89, 3.82: the numbers are per GPU, total throughput is N times larger.

    Args:
        table: with ``np``, ``examples_per_s`` and ``speedup_reported_throughput`` (or
            ``speedup_reported``).

    Returns:
        True if N * x(N) / x(1) reproduces the reported speedup better than x(N) / x(1), False
        if the opposite, None if the table has no reported speedup.
    """
    col = next(
        (c for c in ("speedup_reported_throughput", "speedup_reported") if c in table), None
    )
    if col is None or "examples_per_s" not in table:
        return None
    t = table.sort_values("np")
    n0, x0 = float(t["np"].iloc[0]), float(t["examples_per_s"].iloc[0])
    per_worker = t["np"] * t["examples_per_s"] / x0
    total = n0 * t["examples_per_s"] / x0
    err_pw = float(np.abs(per_worker - t[col]).sum())
    err_total = float(np.abs(total - t[col]).sum())
    return err_pw < err_total


def speedup_table(
    runs: pd.DataFrame,
    *,
    baseline_np: int | None = None,
    throughput_per_worker: bool | None = None,
) -> pd.DataFrame:
    """Speedup and efficiency per worker count, three ways (see the module docstring).

    Args:
        runs: one row per run with ``np`` and any of ``total_time_s``, ``init_time_s``,
            ``train_time_s``, ``samples_per_s``, ``examples_per_s``, ``steady_epoch_time_s``.
            Several runs with one np are combined by their median. A ``total_time_s`` missing
            but ``init_time_s`` + ``train_time_s`` present is filled with their sum.
        baseline_np: the reference worker count (default: the smallest np present).
            S(N) = baseline_np * T(baseline) / T(N): relative to one worker, assuming the
            baseline itself scaled perfectly (the usual convention when no 1-worker run
            exists).
        throughput_per_worker: whether ``examples_per_s`` is per worker (seed 004). None = ask
            :func:`infer_throughput_per_worker`, falling back to False.

    Returns:
        One row per np: ``np``, and for each metric m in ``wall``, ``train``, ``throughput``:
        ``time_<m>_s`` or ``rate_throughput_per_s`` (the measured value used), ``speedup_<m>``
        and ``efficiency_<m>`` (NaN when the runs lack that measurement). The throughput rate is
        the total over all workers in samples/s (or epochs/s when only steady epoch times are
        known). Columns ``speedup_reported*`` of the input (speedups printed in a published
        table) are passed through for comparison.

    Raises:
        ValueError: if ``np`` is missing or the baseline np has no row.
    """
    require_columns(runs, ["np"], "speedup_table")
    df = runs.copy()
    if "total_time_s" not in df and {"init_time_s", "train_time_s"} <= set(df):
        df["total_time_s"] = df["init_time_s"] + df["train_time_s"]
    if throughput_per_worker is None:
        throughput_per_worker = bool(infer_throughput_per_worker(df))
    numeric = [c for c in df.columns if c != "np" and pd.api.types.is_numeric_dtype(df[c])]
    grouped = df.groupby("np")[numeric].median().reset_index().sort_values("np")
    base_np = int(grouped["np"].iloc[0]) if baseline_np is None else baseline_np
    if base_np not in set(grouped["np"]):
        raise ValueError(f"speedup_table: no run with baseline np={base_np}")
    base = grouped.set_index("np").loc[base_np]
    out = pd.DataFrame({"np": grouped["np"].astype(int).to_numpy()})
    nps = out["np"].to_numpy(dtype=float)

    def time_metric(name: str, column: str) -> None:
        if column in grouped:
            values = grouped[column].to_numpy(dtype=float)
            out[f"time_{name}_s"] = values
            out[f"speedup_{name}"] = base[column] / values
        else:
            out[f"time_{name}_s"] = math.nan
            out[f"speedup_{name}"] = math.nan

    time_metric("wall", "total_time_s")
    time_metric("train", "train_time_s")
    if "samples_per_s" in grouped:
        rate = grouped["samples_per_s"].to_numpy(dtype=float)
    elif "examples_per_s" in grouped:
        rate = grouped["examples_per_s"].to_numpy(dtype=float)
        if throughput_per_worker:
            rate = rate * nps
    elif "steady_epoch_time_s" in grouped:
        rate = 1.0 / grouped["steady_epoch_time_s"].to_numpy(dtype=float)
    else:
        rate = np.full(len(out), math.nan)
    out["rate_throughput_per_s"] = rate
    base_rate = rate[list(out["np"]).index(base_np)]
    out["speedup_throughput"] = rate / base_rate
    scale = float(base_np)
    for metric in METRICS:
        out[f"speedup_{metric}"] = out[f"speedup_{metric}"] * scale
        out[f"efficiency_{metric}"] = out[f"speedup_{metric}"] / nps
    for column in grouped.columns:
        if column.startswith("speedup_reported"):
            out[column] = grouped[column].to_numpy()
    return out


def amdahl_speedup(n: np.ndarray | float, serial_fraction: float) -> np.ndarray | float:
    """Amdahl's law: S(N) = 1 / (f + (1 - f) / N) for a serial fraction f."""
    return 1.0 / (serial_fraction + (1.0 - serial_fraction) / np.asarray(n, dtype=float))


def karp_flatt(nps: np.ndarray, speedups: np.ndarray) -> np.ndarray:
    """Experimentally determined serial fraction per point: e = (1/S - 1/N) / (1 - 1/N).

    NaN at N = 1. A constant e means Amdahl's law explains the losses; a growing e points to
    overhead that grows with N (communication).
    """
    n = np.asarray(nps, dtype=float)
    s = np.asarray(speedups, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 1, (1.0 / s - 1.0 / n) / (1.0 - 1.0 / n), np.nan)


def amdahl_fit(nps: np.ndarray, speedups: np.ndarray) -> dict:
    """Fit Amdahl's serial fraction f to measured speedups.

    Amdahl's law is linear in f when written as 1/S = 1/N + f (1 - 1/N); f is the least-squares
    solution of that line (points with N = 1 carry no information and drop out), clipped to
    [0, 1].

    Args:
        nps: worker counts.
        speedups: measured speedups, S(1) = 1.

    Returns:
        ``serial_fraction`` (f), ``max_speedup`` (1/f, inf for f = 0), ``rmse`` (of the
        predicted vs measured speedup), ``points`` (number of N > 1 points used).

    Raises:
        ValueError: if no point has N > 1 or a speedup is not positive.
    """
    n = np.asarray(nps, dtype=float)
    s = np.asarray(speedups, dtype=float)
    keep = (n > 1) & np.isfinite(s)
    if not keep.any():
        raise ValueError("amdahl_fit: need at least one speedup measured at N > 1")
    if (s[keep] <= 0).any():
        raise ValueError("amdahl_fit: speedups must be positive")
    x = 1.0 - 1.0 / n[keep]
    y = 1.0 / s[keep] - 1.0 / n[keep]
    f = float(np.clip((x @ y) / (x @ x), 0.0, 1.0))
    predicted = amdahl_speedup(n[keep], f)
    return {
        "serial_fraction": f,
        "max_speedup": math.inf if f == 0 else 1.0 / f,
        "rmse": float(np.sqrt(np.mean((predicted - s[keep]) ** 2))),
        "points": int(keep.sum()),
    }


def linear_fit(nps: np.ndarray, speedups: np.ndarray) -> dict:
    """Least-squares line S = slope * N + intercept (seed 003's dotted regression lines).

    The slope is the speedup gained per added worker (1 for ideal scaling): seed 003 reads
    0.45 on one cluster.

    Returns:
        ``slope``, ``intercept``, ``r2`` (NaN with fewer than 3 points or no spread).

    Raises:
        ValueError: with fewer than 2 distinct worker counts.
    """
    n = np.asarray(nps, dtype=float)
    s = np.asarray(speedups, dtype=float)
    keep = np.isfinite(s)
    n, s = n[keep], s[keep]
    if len(np.unique(n)) < 2:
        raise ValueError("linear_fit: need speedups at two or more worker counts")
    slope, intercept = np.polyfit(n, s, 1)
    residual = s - (slope * n + intercept)
    ss_tot = float(((s - s.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / ss_tot if len(n) > 2 and ss_tot > 0 else math.nan
    return {"slope": float(slope), "intercept": float(intercept), "r2": r2}


def syncs_per_epoch(samples: int, batch_size: int, nps: list[int] | np.ndarray) -> pd.DataFrame:
    """Synchronisations (allreduce rounds) per epoch: one per optimizer step, per worker.

    With the dataset split over N workers each doing ``batch_size`` samples per step, an epoch
    has ceil(samples / (batch_size * N)) steps. Seed 003: the number of syncs falls faster than
    the cost of one sync grows.

    Args:
        samples: training samples per epoch.
        batch_size: per-worker batch size.
        nps: worker counts.

    Returns:
        ``np``, ``global_batch_size``, ``syncs_per_epoch``.
    """
    n = np.asarray(nps, dtype=int)
    return pd.DataFrame(
        {
            "np": n,
            "global_batch_size": batch_size * n,
            "syncs_per_epoch": np.ceil(samples / (batch_size * n)).astype(int),
        }
    )


def sync_overhead(runs: pd.DataFrame) -> pd.DataFrame:
    """Synchronisation cost per step and per epoch, estimated from step times.

    At a fixed per-worker batch, a step at N workers does the same compute as at one worker plus
    the gradient synchronisation, so t_sync(N) ~ t_step(N) - t_step(1).

    Args:
        runs: one row per run with ``np``, ``steps`` (optimizer steps per epoch per worker) and
            ``steady_epoch_time_s`` (training time of a steady-state epoch). Runs should share
            the per-worker batch size.

    Returns:
        One row per np: ``np``, ``steps``, ``step_time_ms``, ``sync_time_per_step_ms``
        (difference to the smallest np's step time), ``sync_time_per_epoch_s`` (steps x that),
        ``sync_share`` (of the epoch time).

    Raises:
        ValueError: if a column is missing.
    """
    require_columns(runs, ["np", "steps", "steady_epoch_time_s"], "sync_overhead")
    g = runs.groupby("np")[["steps", "steady_epoch_time_s"]].median().reset_index()
    g = g.sort_values("np").reset_index(drop=True)
    step_ms = 1e3 * g["steady_epoch_time_s"] / g["steps"]
    sync_ms = step_ms - step_ms.iloc[0]
    return pd.DataFrame(
        {
            "np": g["np"].astype(int),
            "steps": g["steps"].astype(int),
            "step_time_ms": step_ms,
            "sync_time_per_step_ms": sync_ms,
            "sync_time_per_epoch_s": sync_ms * g["steps"] / 1e3,
            "sync_share": sync_ms * g["steps"] / 1e3 / g["steady_epoch_time_s"],
        }
    )


def batch_size_plateau(
    df: pd.DataFrame, *, time_column: str = "steady_epoch_time_s", tolerance: float = 0.10
) -> dict:
    """Find where time per epoch stops falling as the batch size grows (one worker).

    Seed 003: time per epoch falls sharply up to batch 700, then levels off. The plateau point
    is the smallest batch size whose epoch time is within ``tolerance`` of the fastest one. The
    data shows a plateau only when a larger batch size was measured too and stayed within
    ``tolerance`` of the fastest (``levels_off``); when the plateau point is the largest batch
    measured, the time was still falling there and the plateau, if any, lies beyond the range.

    Args:
        df: one row per run with ``batch_size`` and ``time_column`` (several runs per batch
            size are combined by their median).
        time_column: the epoch-time column.
        tolerance: relative distance to the minimum that counts as "levelled off".

    Returns:
        ``plateau_batch_size``, ``plateau_time_s``, ``min_time_s``, ``smallest_batch_size``,
        ``largest_batch_size``, ``plateau_end_batch_size`` (the largest batch of the run of
        batch sizes from the plateau point on that all stay within ``tolerance``),
        ``levels_off`` (True when that run holds a batch size larger than the plateau point:
        the data shows the time levelling off), ``speedup_at_plateau``
        (time at the smallest batch / plateau time), ``tolerance``, ``table`` (DataFrame
        ``batch_size``, ``time_s``, ``speedup`` vs the smallest batch).

    Raises:
        ValueError: if a column is missing or fewer than two batch sizes are present.
    """
    require_columns(df, ["batch_size", time_column], "batch_size_plateau")
    t = df.groupby("batch_size")[time_column].median().reset_index().sort_values("batch_size")
    if len(t) < 2:
        raise ValueError(
            f"batch_size_plateau: need runs at two or more batch sizes, got "
            f"{t['batch_size'].tolist()} (e.g. `workshop sweep --np 1 --batch-size 32 256 "
            "--lr-scaling none`)"
        )
    t = t.rename(columns={time_column: "time_s"}).reset_index(drop=True)
    t["speedup"] = t["time_s"].iloc[0] / t["time_s"]
    best = float(t["time_s"].min())
    within = (t["time_s"] <= best * (1.0 + tolerance)).tolist()
    start = within.index(True)
    end = start  # the plateau runs on while the next larger batch stays within tolerance
    while end + 1 < len(t) and within[end + 1]:
        end += 1
    plateau = t.iloc[start]
    return {
        "plateau_batch_size": int(plateau["batch_size"]),
        "plateau_end_batch_size": int(t["batch_size"].iloc[end]),
        "plateau_time_s": float(plateau["time_s"]),
        "min_time_s": best,
        "smallest_batch_size": int(t["batch_size"].iloc[0]),
        "largest_batch_size": int(t["batch_size"].iloc[-1]),
        "levels_off": end > start,
        "speedup_at_plateau": float(plateau["speedup"]),
        "tolerance": tolerance,
        "table": t,
    }


def scaling_groups(runs: pd.DataFrame) -> list[tuple[dict, pd.DataFrame]]:
    """Split runs into like-for-like groups that differ only in the worker count.

    A speedup only means something between runs that do the same work per worker: same
    framework, dataset, per-worker batch, LR rule, step cap, Horovod knobs.

    Args:
        runs: from :func:`workshop.readers.sweep.read_sweep` (any of :data:`GROUP_KEYS` present are
            used; missing ones are ignored).

    Returns:
        ``[(key, group), ...]`` for groups with two or more distinct ``np`` values, the group
        with the most worker counts (then the most runs) first; ``key`` maps each grouping
        column to its value.
    """
    require_columns(runs, ["np"], "scaling_groups")
    keys = [k for k in GROUP_KEYS if k in runs.columns]
    frame = runs.copy()
    # NaN/None never equal each other in groupby; use a printable stand-in for grouping.
    labels = frame[keys].astype(object).where(frame[keys].notna(), "-").astype(str)
    groups = []
    for _, index in labels.groupby(keys, sort=False).groups.items():
        group = frame.loc[index]
        if group["np"].nunique() >= 2:
            first = group.iloc[0]
            key = {k: (None if pd.isna(first[k]) else first[k]) for k in keys}
            groups.append((key, group))
    groups.sort(key=lambda item: (-item[1]["np"].nunique(), -len(item[1])))
    return groups
