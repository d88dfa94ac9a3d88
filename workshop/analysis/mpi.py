"""What an MPI profile (:class:`workshop.readers.mpitrace.MpiProfile`) says about a Horovod run.

* :func:`comm_fraction`: the share of each rank's run time spent inside MPI calls, summed over
  all threads. In a Horovod run most of these calls come from Horovod's background thread,
  which negotiates every cycle (and, with MPI tensor operations, reduces the gradients) while
  the training thread computes, from ``hvd.init()`` to shutdown, start-up included; a blocking
  call that waits for another rank counts in full. So "75 % inside MPI" is not "75 % of the
  training time lost": :func:`comm_vs_training` puts the MPI time against the run's training
  time.
* :func:`dominant_routine` and :func:`routine_table`: where that time goes.
* :func:`negotiation_signature`: Horovod's controller agrees, every cycle, on which tensors all
  ranks have ready with one tiny ``MPI_Allreduce`` (``MPI_BAND``) of a bit vector: 3 status
  bits and one bit per cached tensor, in 64-bit words, so 8 bytes for up to 61 tensors, twice
  that while a timeline is recorded (Horovod 0.28.1 ``response_cache.cc:381-428``,
  ``mpi/mpi_controller.cc:115-118``); gradients, when they go through MPI, are the large
  ones. Many small allreduces and few large ones is the signature of the MPI controller; no
  large ones means the gradients go another way (NCCL on GPUs, Gloo).
* :func:`load_imbalance`: the spread of communication time over the ranks. The rank with the
  *least* time in MPI waited least: in a Horovod run, the one whose background thread reached
  the collective calls last (often the slowest or busiest rank); the others wait for it inside
  MPI.
* :func:`message_size_bins`: the message-size distribution on power-of-two bins.
* two runs side by side, and a folder of jobs: :mod:`workshop.analysis.mpi_compare`.
* :func:`profile_summary`: the numbers of ``workshop mpi summary`` (its words:
  :func:`workshop.findings.mpi.mpi_findings`).

All functions are pure: DataFrames and dicts in, DataFrames, dicts and strings out.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from workshop.frames import require_columns, takes_run
from workshop.readers.mpitrace import MpiProfile
from workshop.units import format_bytes, json_safe

#: Allreduces of at most this many bytes count as negotiation (Horovod's bit vectors).
SMALL_BYTES = 16
#: One 64-bit word: Horovod's negotiation bit vector for up to 61 tensors (without a timeline).
NEGOTIATION_WORD_BYTES = 8
ALLREDUCE = "MPI_Allreduce"


def _default_rank(profile: MpiProfile, rank: int | None) -> int:
    ranks = profile.ranks
    if rank is None:
        return 0 if 0 in ranks else ranks[0]
    if rank not in ranks:
        raise ValueError(
            f"job {profile.jobid}: no profile file for rank {rank} (ranks with a file: "
            f"{', '.join(map(str, ranks))})"
        )
    return rank


@takes_run
def routine_table(profile: MpiProfile, rank: int | None = None) -> pd.DataFrame:
    """The routine table of one rank, with shares.

    Args:
        profile: the job's profile.
        rank: the rank (default: 0, or the lowest rank with a file).

    Returns:
        DataFrame sorted by time, largest first: ``routine``, ``calls``, ``avg_bytes``,
        ``time_s``, ``bytes`` (calls x average bytes), ``time_share`` (of the rank's summed
        routine time, 0..1), ``call_share`` (of its calls, 0..1).
    """
    rank = _default_rank(profile, rank)
    table = profile.routines[profile.routines["rank"] == rank]
    table = table[["routine", "calls", "avg_bytes", "time_s"]].copy()
    table["bytes"] = table["calls"] * table["avg_bytes"]
    total_time = table["time_s"].sum()
    total_calls = table["calls"].sum()
    table["time_share"] = table["time_s"] / total_time if total_time > 0 else 0.0
    table["call_share"] = table["calls"] / total_calls if total_calls > 0 else 0.0
    return table.sort_values(["time_s", "calls"], ascending=False).reset_index(drop=True)


@takes_run
def comm_fraction(profile: MpiProfile) -> pd.DataFrame:
    """Time in MPI against run time, per rank.

    Every rank of the all-task table of rank 0's file (when there is one), with the totals of
    each rank's own file where it has one (they have more digits).

    Args:
        profile: the job's profile.

    Returns:
        DataFrame by rank: ``rank``, ``comm_s``, ``elapsed_s`` (MPI_Init to MPI_Finalize,
        seconds), ``comm_fraction`` (0..1), ``has_file`` (bool), ``source`` (``file`` or
        ``tasks``: where the numbers come from).
    """
    files = profile.files.set_index("rank")[["comm_s", "elapsed_s"]].astype("float64")
    if len(profile.tasks):
        frame = profile.tasks[["taskid", "comm_s", "elapsed_s"]].rename(columns={"taskid": "rank"})
        frame = frame.astype({"comm_s": "float64", "elapsed_s": "float64"}).set_index("rank")
        frame["source"] = "tasks"
        # a file's own totals have more digits than the all-task table
        usable = files.dropna().index
        frame.loc[frame.index.intersection(usable), ["comm_s", "elapsed_s"]] = files
        frame.loc[frame.index.intersection(usable), "source"] = "file"
    else:
        frame = files.copy()
        frame["source"] = "file"
    frame = frame.reset_index()
    elapsed = frame["elapsed_s"].where(frame["elapsed_s"] > 0)
    frame["comm_fraction"] = frame["comm_s"] / elapsed
    frame["has_file"] = frame["rank"].isin(set(profile.ranks))
    frame = frame[["rank", "comm_s", "elapsed_s", "comm_fraction", "has_file", "source"]]
    return frame.sort_values("rank").reset_index(drop=True)


@takes_run
def dominant_routine(profile: MpiProfile, rank: int | None = None) -> dict[str, object]:
    """The routine with the most time on one rank.

    Args:
        profile: the job's profile.
        rank: the rank (default: 0, or the lowest rank with a file).

    Returns:
        ``{"rank", "routine", "calls", "avg_bytes", "time_s", "time_share"}``; ``routine`` is
        None when the rank's routine table is empty.
    """
    rank = _default_rank(profile, rank)
    table = routine_table(profile, rank)
    if table.empty:
        return {
            "rank": rank,
            "routine": None,
            "calls": 0,
            "avg_bytes": math.nan,
            "time_s": 0.0,
            "time_share": math.nan,
        }
    top = table.iloc[0]
    return {
        "rank": rank,
        "routine": str(top["routine"]),
        "calls": int(top["calls"]),
        "avg_bytes": float(top["avg_bytes"]),
        "time_s": float(top["time_s"]),
        "time_share": float(top["time_share"]),
    }


@takes_run
def negotiation_signature(
    profile: MpiProfile, rank: int | None = None, small_bytes: float = SMALL_BYTES
) -> dict[str, object]:
    """Small (negotiation) against large (gradient) ``MPI_Allreduce`` calls on one rank.

    Reads the rank's message-size distribution of MPI_Allreduce: bins whose average is at most
    ``small_bytes`` are small. Without a distribution (a file cut short), the routine table
    decides: all calls small if their average is at most ``small_bytes``, else unknown (NaN).

    Args:
        profile: the job's profile.
        rank: the rank (default: 0, or the lowest rank with a file).
        small_bytes: the bound for small calls, bytes.

    Returns:
        ``rank``, ``source`` (``message sizes``, ``routine table`` or ``none``),
        ``allreduce_calls``, ``allreduce_time_s``, ``small_calls``, ``small_time_s``,
        ``small_bytes`` (bytes moved by small calls), ``large_calls``, ``large_time_s``,
        ``large_bytes``, ``allreduce_avg_bytes``, ``small_call_share`` and
        ``small_time_share`` (0..1, NaN without allreduces), ``threshold_bytes``.
    """
    rank = _default_rank(profile, rank)
    sizes = profile.message_sizes
    sizes = sizes[(sizes["rank"] == rank) & (sizes["routine"] == ALLREDUCE)]
    routines = profile.routines
    row = routines[(routines["rank"] == rank) & (routines["routine"] == ALLREDUCE)]
    out: dict[str, object] = {"rank": rank, "threshold_bytes": small_bytes}
    out.update(_small_and_large(sizes, row, small_bytes))
    out.update(_allreduce_totals(sizes, row))
    calls, time_s = out["allreduce_calls"], out["allreduce_time_s"]
    out["small_call_share"] = (
        out["small_calls"] / calls if calls else math.nan  # type: ignore[operator]
    )
    out["small_time_share"] = (
        out["small_time_s"] / time_s if time_s else math.nan  # type: ignore[operator]
    )
    return out


_NO_CALLS = (0, 0.0, 0.0)
_UNKNOWN = (math.nan, math.nan, math.nan)


def _calls_time_bytes(sizes: pd.DataFrame) -> tuple[int, float, float]:
    """Calls, time (s) and bytes moved of message-size bins."""
    return (
        int(sizes["calls"].sum()),
        float(sizes["time_s"].sum()),
        float((sizes["calls"] * sizes["avg_bytes"]).sum()),
    )


def _small_and_large(
    sizes: pd.DataFrame, row: pd.DataFrame, small_bytes: float
) -> dict[str, object]:
    """``source`` and the calls, time and bytes of small and of large allreduces (see
    :func:`negotiation_signature`): from the size bins ``sizes``, else from the routine-table
    ``row`` (all small, or unknown), else none."""
    if len(sizes):
        source = "message sizes"
        small = _calls_time_bytes(sizes[sizes["avg_bytes"] <= small_bytes])
        large = _calls_time_bytes(sizes[sizes["avg_bytes"] > small_bytes])
    elif len(row) and float(row["avg_bytes"].iloc[0]) <= small_bytes:
        r = row.iloc[0]
        source = "routine table"
        small = (int(r["calls"]), float(r["time_s"]), float(r["calls"] * r["avg_bytes"]))
        large = _NO_CALLS
    elif len(row):
        source, small, large = "routine table", _UNKNOWN, _UNKNOWN
    else:
        source, small, large = "none", _NO_CALLS, _NO_CALLS
    return {
        "source": source,
        "small_calls": small[0],
        "small_time_s": small[1],
        "small_bytes": small[2],
        "large_calls": large[0],
        "large_time_s": large[1],
        "large_bytes": large[2],
    }


def _allreduce_totals(sizes: pd.DataFrame, row: pd.DataFrame) -> dict[str, object]:
    """All allreduce calls, their time (s) and average bytes: from the routine-table ``row``,
    else summed over the size bins ``sizes`` (average NaN without any)."""
    if len(row):
        return {
            "allreduce_calls": int(row["calls"].iloc[0]),
            "allreduce_time_s": float(row["time_s"].iloc[0]),
            "allreduce_avg_bytes": float(row["avg_bytes"].iloc[0]),
        }
    calls, time_s, moved = _calls_time_bytes(sizes)
    return {
        "allreduce_calls": calls,
        "allreduce_time_s": time_s,
        "allreduce_avg_bytes": moved / calls if len(sizes) else math.nan,
    }


@takes_run
def load_imbalance(profile: MpiProfile) -> dict[str, object]:
    """Spread of communication time over the ranks.

    Args:
        profile: the job's profile.

    Returns:
        ``min_comm_s``, ``min_task``, ``median_comm_s``, ``median_task``, ``max_comm_s``,
        ``max_task`` (from the all-task summary, else the ``had the ... time`` lines; NaN / None
        when missing), ``max_over_min`` (ratio), ``spread_over_median`` ((max - min) / median),
        and from the all-task table when present: ``mean_comm_s``, ``max_elapsed_s``,
        ``min_elapsed_s``, ``ntasks_in_table``.
    """
    out: dict[str, object] = {}
    ext = profile.extremes.set_index("role") if len(profile.extremes) else None
    for role, key in (("minimum", "min"), ("median", "median"), ("maximum", "max")):
        if ext is not None and role in ext.index:
            out[f"{key}_comm_s"] = float(ext.loc[role, "comm_s"])
            out[f"{key}_task"] = int(ext.loc[role, "taskid"])
        else:
            out[f"{key}_comm_s"] = math.nan
            out[f"{key}_task"] = None
    lo, mid, hi = out["min_comm_s"], out["median_comm_s"], out["max_comm_s"]
    out["max_over_min"] = hi / lo if lo and lo > 0 else math.nan
    out["spread_over_median"] = (hi - lo) / mid if mid and mid > 0 else math.nan
    tasks = profile.tasks
    if len(tasks):
        out["mean_comm_s"] = float(tasks["comm_s"].astype(float).mean())
        out["max_elapsed_s"] = float(tasks["elapsed_s"].astype(float).max())
        out["min_elapsed_s"] = float(tasks["elapsed_s"].astype(float).min())
        out["ntasks_in_table"] = len(tasks)
    else:
        out.update(
            mean_comm_s=math.nan, max_elapsed_s=math.nan, min_elapsed_s=math.nan, ntasks_in_table=0
        )
    return out


def _bin_label(log2_bin: int) -> str:
    if log2_bin <= 2:
        return "<=4 B"
    return f"<={format_bytes(1 << log2_bin)}"


@takes_run
def message_size_bins(
    profile: MpiProfile, rank: int | None = None, routine: str | None = None
) -> pd.DataFrame:
    """The message-size distribution on power-of-two bins.

    mpitrace's bins are 0-4 bytes, then (2^(k-1), 2^k]; each row of the file is one non-empty
    bin, identified here by ``log2_bin`` = ceil(log2(avg_bytes)) (2 for 0-4 bytes).

    Args:
        profile: the job's profile.
        rank: the rank (default: 0, or the lowest rank with a file).
        routine: one routine only (e.g. ``MPI_Allreduce``); default all.

    Returns:
        DataFrame: ``routine``, ``log2_bin``, ``bin_label`` (upper bound, e.g. ``<=8 B``),
        ``calls``, ``avg_bytes``, ``bytes`` (calls x average), ``time_s``; sorted by routine
        and bin.
    """
    rank = _default_rank(profile, rank)
    sizes = profile.message_sizes
    sizes = sizes[sizes["rank"] == rank]
    if routine is not None:
        sizes = sizes[sizes["routine"] == routine]
    out = sizes[["routine", "calls", "avg_bytes", "time_s"]].copy()
    avg = out["avg_bytes"].clip(lower=1.0).to_numpy(dtype=float)
    bins = np.maximum(np.ceil(np.log2(avg) - 1e-9), 2).astype(int) if len(out) else []
    out.insert(1, "log2_bin", bins)
    out.insert(2, "bin_label", [_bin_label(int(b)) for b in out["log2_bin"]])
    out["bytes"] = out["calls"] * out["avg_bytes"]
    out = out[["routine", "log2_bin", "bin_label", "calls", "avg_bytes", "bytes", "time_s"]]
    return out.sort_values(["routine", "log2_bin"]).reset_index(drop=True)


@takes_run
def profile_summary(profile: MpiProfile, small_bytes: float = SMALL_BYTES) -> dict[str, object]:
    """The numbers ``workshop mpi summary --json`` prints (JSON-ready: str keys, no NaN).

    Args:
        profile: the job's profile.
        small_bytes: bound for negotiation-size allreduces, bytes.

    Returns:
        ``job``, ``ntasks``, ``ranks`` (with a file), ``layout``, ``routines``
        (``{rank: {routine: {calls, avg_bytes, time_s}}}``), ``comm_s`` and ``elapsed_s``
        (``{rank: seconds}`` from each file's totals), ``comm_fraction`` (``{rank: 0..1}``),
        ``dominant_routine`` (rank 0 or lowest rank), ``small_allreduce_calls``,
        ``small_allreduce_time_s``, ``large_allreduce_calls``, ``large_allreduce_time_s``,
        ``small_allreduce_bytes_max``, ``load_imbalance`` (see :func:`load_imbalance`),
        ``complete`` (all files complete), ``warnings``. Missing numbers are None.
    """

    routines: dict[str, dict[str, dict[str, object]]] = {}
    for rank, group in profile.routines.groupby("rank", sort=True):
        routines[str(rank)] = {
            str(r.routine): {
                "calls": int(r.calls),
                "avg_bytes": float(r.avg_bytes),
                "time_s": float(r.time_s),
            }
            for r in group.itertuples()
        }
    files = profile.files.set_index("rank")
    sig = negotiation_signature(profile, small_bytes=small_bytes)
    dom = dominant_routine(profile)
    return {
        "job": profile.jobid,
        "ntasks": profile.ntasks,
        "ranks": profile.ranks,
        "layout": profile.layout,
        "routines": routines,
        "comm_s": {str(r): json_safe(float(v)) for r, v in files["comm_s"].items()},
        "elapsed_s": {str(r): json_safe(float(v)) for r, v in files["elapsed_s"].items()},
        "comm_fraction": {
            str(r): json_safe(float(files.loc[r, "comm_s"]) / float(files.loc[r, "elapsed_s"]))
            if float(files.loc[r, "elapsed_s"]) > 0
            else None
            for r in files.index
        },
        "dominant_routine": {k: json_safe(v) for k, v in dom.items()},
        "signature_rank": sig["rank"],
        "small_allreduce_calls": json_safe(sig["small_calls"]),
        "small_allreduce_time_s": json_safe(sig["small_time_s"]),
        "large_allreduce_calls": json_safe(sig["large_calls"]),
        "large_allreduce_time_s": json_safe(sig["large_time_s"]),
        "small_allreduce_bytes_max": small_bytes,
        "signature_source": sig["source"],
        "load_imbalance": {k: json_safe(v) for k, v in load_imbalance(profile).items()},
        "complete": bool(profile.files["complete"].all()),
        "warnings": list(profile.warnings),
    }


@takes_run
def comm_vs_training(
    profile: MpiProfile, metrics: pd.DataFrame, rank: int | None = None
) -> dict[str, object]:
    """Time inside MPI against the training time of the same run.

    The profile counts every MPI call of every thread from ``MPI_Init`` to ``MPI_Finalize``;
    the run's metrics say how long the training loop itself took. Read together they show
    what the "share of time in MPI" cannot mean: when the MPI time exceeds the whole training
    time, it cannot all have been lost by training.

    Args:
        profile: the job's profile.
        metrics: the run's per-epoch metrics (:func:`workshop.readers.runs.read_metrics`), with
            ``train_time_s`` and ``steps``.
        rank: the rank (default: 0, or the lowest rank with a file).

    Returns:
        ``rank``, ``comm_s`` and ``elapsed_s`` (from its file), ``comm_fraction`` (of elapsed),
        ``train_s`` (the epochs' training time, summed), ``steps``, ``step_ms`` (training time
        per step), ``comm_per_step_ms`` (MPI time / steps: what each step would have lost if
        all MPI time were lost by training), ``comm_over_train`` (MPI time / training time).

    Raises:
        ValueError: ``metrics`` lacks ``train_time_s`` or ``steps``, or has no steps.
    """
    require_columns(
        metrics,
        ("train_time_s", "steps"),
        "comm_vs_training",
        frame="metrics",
        hint="pass workshop.readers.read_metrics(run_dir)",
    )
    steps = int(metrics["steps"].sum())
    if steps <= 0:
        raise ValueError("the metrics hold no training steps")
    rank = _default_rank(profile, rank)
    fr = comm_fraction(profile).set_index("rank")
    comm_s, elapsed_s = float(fr.loc[rank, "comm_s"]), float(fr.loc[rank, "elapsed_s"])
    train_s = float(metrics["train_time_s"].sum())
    return {
        "rank": rank,
        "comm_s": comm_s,
        "elapsed_s": elapsed_s,
        "comm_fraction": comm_s / elapsed_s if elapsed_s > 0 else math.nan,
        "train_s": train_s,
        "steps": steps,
        "step_ms": 1e3 * train_s / steps,
        "comm_per_step_ms": 1e3 * comm_s / steps,
        "comm_over_train": comm_s / train_s if train_s > 0 else math.nan,
    }
