"""Horovod's tuning knobs, measured (lesson 08): what the timeline and the MPI profile of each
run say about its communication, the throughput of each (fusion threshold, cycle time) tried,
a knob's effect against the spread of repeated runs, and what autotune tried and chose.

Inputs come from the readers: runs tables from :func:`workshop.readers.sweep.read_sweep`,
:class:`~workshop.readers.timeline.Timeline` objects,
:class:`~workshop.readers.mpitrace.MpiProfile` objects and autotune logs from
:func:`workshop.readers.logs.read_autotune_log`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from workshop.analysis.benchmarks import ranges_overlap
from workshop.analysis.commodel import allreduce_ops
from workshop.analysis.mpi import negotiation_signature, routine_table
from workshop.analysis.timeline import gradient_tensors, step_starts
from workshop.frames import require_columns, takes_run


@takes_run
def gradient_spans(spans: pd.DataFrame) -> pd.DataFrame:
    """The spans of the gradients' allreduces (negotiation, op, activities), metrics left out.

    Args:
        spans: ``Timeline.spans``.

    Returns:
        The rows of ``spans`` whose tensor is a gradient, as
        :func:`~workshop.analysis.timeline.gradient_tensors` finds them (allreduced once per
        training step).
    """
    gradients = set(gradient_tensors(spans))
    return spans[spans["tensor"].astype(str).isin(gradients)]


def comm_table(
    timelines: Mapping[str, object], np_workers: int | Mapping[str, int]
) -> pd.DataFrame:
    """How each run's gradients were communicated, from its Horovod timeline.

    Args:
        timelines: run name -> :class:`~workshop.readers.timeline.Timeline`.
        np_workers: the runs' worker count, one for all or per run name.

    Returns:
        One row per run: ``run``; ``steps`` (optimizer steps found in the timeline, see
        :func:`~workshop.analysis.timeline.step_starts`); ``gradient_tensors`` (gradient
        allreduces requested: one per gradient tensor and step); ``allreduce_ops`` (collective
        operations that carried them: tensors fused into one buffer travel in one operation,
        see :func:`~workshop.analysis.commodel.allreduce_ops`); ``bytes`` (gradient bytes
        reduced by this rank, from each tensor's dtype and shape as Horovod recorded them);
        ``gradient_dtypes`` (the gradients' dtypes in the allreduce, ``;``-separated); ``ticks``
        (rank-readiness ticks of gradients: recorded only when a tensor is negotiated in full,
        not answered from the response cache); per step: ``tensors_per_step``,
        ``ops_per_step``, ``bytes_per_step``, ``ticks_per_step``; ``tensors_per_op``;
        ``step_time_ms`` (median time between step starts).
    """
    rows = []
    for run, timeline in timelines.items():
        spans = gradient_spans(timeline.spans)
        n = np_workers if isinstance(np_workers, int) else int(np_workers[run])
        ops = allreduce_ops(spans, n)
        op_spans = spans[spans["kind"].astype(str) == "op"]
        steps = step_starts(spans)
        ticks = timeline.ticks
        ticks = ticks[ticks["tensor"].astype(str).isin(set(spans["tensor"].astype(str)))]
        count = max(len(steps), 1)
        rows.append(
            {
                "run": run,
                "steps": len(steps),
                "gradient_tensors": len(op_spans),
                "allreduce_ops": len(ops),
                "bytes": float(ops["bytes"].sum()),
                "gradient_dtypes": ";".join(sorted(set(op_spans["dtype"].dropna().astype(str)))),
                "ticks": len(ticks),
                "tensors_per_step": len(op_spans) / count,
                "ops_per_step": len(ops) / count,
                "bytes_per_step": float(ops["bytes"].sum()) / count,
                "ticks_per_step": len(ticks) / count,
                "tensors_per_op": len(op_spans) / len(ops) if len(ops) else math.nan,
                "step_time_ms": float(steps["dur_us"].median()) / 1e3 if len(steps) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def negotiation_table(profiles: Mapping[str, object], rank: int = 0) -> pd.DataFrame:
    """Horovod's negotiation and gradient traffic in each run's MPI profile (MPI controller).

    Horovod 0.28.1's MPI controller negotiates once per cycle. With the response cache on,
    every cycle starts with a bitwise ``MPI_Allreduce`` of the cache's bit vector (64-bit words:
    8 bytes for fewer than 61 cached tensors, twice that with a timeline); when every ready
    tensor is cached that is all. Otherwise, and every cycle with the cache off, rank 0 gathers
    the ready-tensor requests (``MPI_Gather`` of their sizes, ``MPI_Gatherv`` of the lists) and
    broadcasts the responses (two ``MPI_Bcast``) (``horovod/common/controller.cc``,
    ``response_cache.cc``, ``mpi/mpi_controller.cc``).

    Args:
        profiles: run name -> :class:`~workshop.readers.mpitrace.MpiProfile`.
        rank: the rank whose file is read.

    Returns:
        One row per run: ``run``, ``bitvector_allreduces`` (MPI_Allreduce calls of 8 to 16
        bytes; the training programs' 4-byte metric allreduces are left out; TensorFlow's
        8-byte float64 metric would count), ``gathers`` (MPI_Gather calls: full
        negotiation rounds), ``gathervs``, ``bcasts`` (MPI_Bcast calls, the initial parameter
        broadcast included), ``negotiation_time_s`` (time in the bit-vector allreduces,
        gathers and gathervs; a rank also waits there for the others), ``gradient_allreduces``
        and ``gradient_bytes`` (MPI_Allreduce calls of more than
        :data:`~workshop.analysis.mpi.SMALL_BYTES` bytes and the bytes they moved),
        ``comm_time_s`` (all MPI routines),
        ``elapsed_s`` (the rank's time from MPI_Init, i.e. ``hvd.init()``, to MPI_Finalize),
        ``negotiation_rounds`` (cycles: the larger of ``bitvector_allreduces`` and
        ``gathers``, since every cycle makes one or the other) and ``rounds_per_s``.
    """
    rows = []
    for run, profile in profiles.items():
        table = routine_table(profile, rank).set_index("routine")
        signature = negotiation_signature(profile, rank)
        calls = table["calls"].to_dict()
        seconds = table["time_s"].to_dict()
        sizes = profile.message_sizes
        sizes = sizes[(sizes["rank"] == rank) & (sizes["routine"] == "MPI_Allreduce")]
        words = sizes[(sizes["avg_bytes"] >= 8) & (sizes["avg_bytes"] <= 16)]
        bitvector = int(words["calls"].sum())
        # every cycle makes one bit-vector allreduce (cache on) or one gather (cache off)
        rounds = max(bitvector, int(calls.get("MPI_Gather", 0)))
        tasks = profile.tasks[profile.tasks["taskid"] == rank]
        elapsed = float(tasks["elapsed_s"].iloc[0]) if len(tasks) else math.nan
        rows.append(
            {
                "run": run,
                "bitvector_allreduces": bitvector,
                "gathers": int(calls.get("MPI_Gather", 0)),
                "gathervs": int(calls.get("MPI_Gatherv", 0)),
                "bcasts": int(calls.get("MPI_Bcast", 0)),
                "negotiation_time_s": float(words["time_s"].sum())
                + float(seconds.get("MPI_Gather", 0.0))
                + float(seconds.get("MPI_Gatherv", 0.0)),
                "gradient_allreduces": int(signature.get("large_calls", 0)),
                "gradient_bytes": float(signature.get("large_bytes", 0.0)),
                "comm_time_s": float(table["time_s"].sum()),
                "elapsed_s": elapsed,
                "negotiation_rounds": rounds,
                "rounds_per_s": rounds / elapsed if elapsed > 0 else math.nan,
            }
        )
    return pd.DataFrame(rows)


def tuning_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Compare Horovod tuning knobs (fusion threshold, cycle time) across runs.

    Args:
        runs: one row per run with ``fusion_threshold_mb``, ``cycle_time_ms`` and
            ``samples_per_s`` (steady state); optional ``steady_epoch_time_s``.

    Returns:
        One row per (fusion_threshold_mb, cycle_time_ms), fastest first: the two knobs,
        ``samples_per_s`` (median), ``runs``, ``relative`` (throughput / the best one).

    Raises:
        ValueError: if a column is missing.
    """
    require_columns(
        runs, ["fusion_threshold_mb", "cycle_time_ms", "samples_per_s"], "tuning_table"
    )
    keys = ["fusion_threshold_mb", "cycle_time_ms"]
    g = (
        runs.groupby(keys, dropna=False)["samples_per_s"]
        .agg(samples_per_s="median", runs="size")
        .reset_index()
        .sort_values("samples_per_s", ascending=False)
        .reset_index(drop=True)
    )
    g["relative"] = g["samples_per_s"] / g["samples_per_s"].iloc[0]
    return g


def knob_effect(runs: pd.DataFrame, knob: str, metric: str, baseline) -> pd.DataFrame:
    """Each setting of one knob against a baseline setting, with the spread of repeated runs.

    On a shared machine one run per setting can mislead: the same setting run twice can differ
    by tens of percent. A setting whose range of repeats overlaps the baseline's range has not
    been shown to differ from it.

    Args:
        runs: one row per run, with ``knob`` and ``metric`` columns (e.g. from
            :func:`workshop.readers.sweep.read_sweep`); repeats share the knob value.
        knob: the column that varies, e.g. ``"cache_capacity"``.
        metric: the measured column, e.g. ``"samples_per_s"``.
        baseline: the knob value the others are compared with (e.g. Horovod's default).

    Returns:
        One row per knob value, the baseline first: ``<knob>``, ``runs``, ``median``,
        ``low``, ``high`` (min and max over the repeats), ``spread`` ((high - low) / median),
        ``ratio`` (median / the baseline's median), ``overlaps`` (True when [low, high]
        overlaps the baseline's range: the difference is within the spread of repeats).

    Raises:
        ValueError: if a column is missing or no run has the baseline value.
    """
    require_columns(runs, [knob, metric], "knob_effect")
    values = pd.to_numeric(runs[metric], errors="coerce")
    frame = pd.DataFrame({knob: runs[knob], metric: values}).dropna(subset=[metric])
    table = (
        frame.groupby(knob, dropna=False)[metric]
        .agg(runs="size", median="median", low="min", high="max")
        .reset_index()
    )
    is_base = table[knob] == baseline
    if not is_base.any():
        raise ValueError(
            f"knob_effect: no run with {knob}={baseline!r} (have "
            f"{sorted(table[knob].tolist(), key=str)})"
        )
    base = table[is_base].iloc[0]
    table["spread"] = (table["high"] - table["low"]) / table["median"]
    table["ratio"] = table["median"] / base["median"]
    table["overlaps"] = ranges_overlap(table["low"], table["high"], base["low"], base["high"])
    order = np.argsort(~is_base.to_numpy(), kind="stable")
    return table.iloc[order].reset_index(drop=True)


def autotune_summary(autotune: pd.DataFrame) -> dict:
    """What Horovod's autotuner tried, what it chose and what it gained, by its own score.

    Args:
        autotune: from :func:`workshop.readers.logs.read_autotune_log`.

    Returns:
        ``samples`` (settings scored; Horovod's final "best" line not counted), ``settings``
        (distinct (cycle time, fusion threshold) pairs), ``finished`` (the log ends with the
        best setting repeated, i.e. tuning finished), ``best_cycle_time_ms``,
        ``best_fusion_threshold_mb``, ``best_score`` (bytes allreduced per microsecond),
        ``first_score``, ``median_score``, ``worst_score``, ``gain_vs_first`` and
        ``gain_vs_median`` (best / first, best / median), ``best_sample`` (0-based).

    Raises:
        ValueError: if the log has no scored sample.
    """
    require_columns(
        autotune,
        ["score_bytes_per_us", "cycle_time_ms", "fusion_threshold_mb", "final_best"],
        "autotune_summary",
    )
    samples = autotune[~autotune["final_best"]]
    if samples.empty:
        raise ValueError("autotune_summary: the autotune log has no scored sample")
    score = samples["score_bytes_per_us"]
    best = samples.loc[score.idxmax()]
    return {
        "samples": len(samples),
        "settings": int(
            samples[["cycle_time_ms", "fusion_threshold_mb"]].drop_duplicates().shape[0]
        ),
        "finished": bool(autotune["final_best"].any()),
        "best_cycle_time_ms": float(best["cycle_time_ms"]),
        "best_fusion_threshold_mb": float(best["fusion_threshold_mb"]),
        "best_score": float(best["score_bytes_per_us"]),
        "first_score": float(score.iloc[0]),
        "median_score": float(score.median()),
        "worst_score": float(score.min()),
        "gain_vs_first": float(best["score_bytes_per_us"] / score.iloc[0]),
        "gain_vs_median": float(best["score_bytes_per_us"] / score.median()),
        "best_sample": int(best["sample"]) if "sample" in samples else int(score.idxmax()),
    }
