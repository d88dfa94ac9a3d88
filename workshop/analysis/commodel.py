"""A communication model that predicts scaling: ring allreduce with latency alpha and
bandwidth B (the "alpha-beta" model).

Ring allreduce of ``m`` bytes over N workers is a reduce-scatter plus an allgather: 2(N-1)
steps, each sending one message of m/N bytes, so::

    t(N, m) = 2 (N - 1) alpha + 2 (N - 1) / N * m / B

alpha is the per-message latency (s), B the link bandwidth (bytes/s); beta = 1/B is the time
per byte. The first term grows with N (latency-bound: many small tensors, seed 001's 8-byte
negotiation allreduces), the second tends to 2 m / B (bandwidth-optimal, but not
latency-optimal: seed 003).

It is a model of one algorithm. Horovod hands each fused buffer to its collective library,
which picks the algorithm that runs (Horovod 0.28.1: Gloo's ``gloo::allreduce`` defaults to a
ring; ``MPI_Allreduce`` is the MPI library's choice by message size and process count, e.g.
recursive doubling or Rabenseifner in Open MPI; NCCL chooses a ring or a tree); a tree or
recursive doubling has a latency term growing like log2(N) instead.

Fitting: every allreduce measured in a Horovod timeline gives one (N, m, t) point; t is linear
in (alpha, beta) with regressors 2(N-1) and 2(N-1)/N * m, so a least-squares fit gives both.
With one N only (this 2-core machine: N = 2) the fit still separates alpha from beta through
the spread of message sizes. The prediction for larger N then assumes the same links, which is
optimistic where N crosses a node boundary (seed 003's "bump at 9 GPUs").
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from workshop.analysis.scaling import scaling_groups, speedup_table
from workshop.frames import require_columns, takes_run
from workshop.readers.timeline.model import DTYPE_BYTES
from workshop.rules import ring_allreduce_time_s
from workshop.runspec import OPTIONS, WORK_KEYS

COLLECTIVES = ("GLOO_ALLREDUCE", "MPI_ALLREDUCE", "NCCL_ALLREDUCE", "CCL_ALLREDUCE")


def _shape_elements(shape: str) -> int:
    dims = [int(d) for d in re.findall(r"\d+", str(shape))]
    return int(np.prod(dims)) if dims else 1


@takes_run
def allreduce_ops(spans: pd.DataFrame, np_workers: int) -> pd.DataFrame:
    """One row per allreduce the collective library executed, from a timeline's spans.

    Horovod fuses several tensors into one collective; in the timeline each fused tensor gets
    its own activity span (``GLOO_ALLREDUCE``, ``MPI_ALLREDUCE``, ``NCCL_ALLREDUCE``) and these
    overlap. Overlapping activity spans of one name are merged into one operation whose size is
    the sum of the tensors' sizes (from the ``dtype``/``shape`` of each tensor's ``ALLREDUCE``
    op span) and whose duration runs from the first start to the last end.

    Args:
        spans: ``Timeline.spans`` from :func:`workshop.readers.timeline.read_timeline` (columns
            ``tensor``, ``kind``, ``name``, ``start_us``, ``end_us``, ``dtype``, ``shape``).
        np_workers: the run's worker count (the timeline does not record it).

    Returns:
        ``np``, ``collective`` (activity name), ``start_us``, ``dur_us``, ``tensors`` (fused
        count), ``bytes``. Tensors whose size is unknown count as 0 bytes; operations of
        unknown size are dropped.

    Raises:
        ValueError: if a column is missing.
    """
    needed = ["tensor", "kind", "name", "start_us", "end_us", "dtype", "shape"]
    require_columns(spans, needed, "allreduce_ops", frame="spans")
    ops = spans[(spans["kind"] == "op") & (spans["name"] == "ALLREDUCE")].dropna(
        subset=["dtype", "shape"]
    )
    size = {
        str(t): DTYPE_BYTES.get(str(d), 4) * _shape_elements(sh)
        for t, d, sh in zip(ops["tensor"], ops["dtype"], ops["shape"], strict=True)
    }
    acts = spans[(spans["kind"] == "activity") & spans["name"].isin(COLLECTIVES)]
    rows = []
    for name, group in acts.sort_values("start_us").groupby("name", observed=True):
        start = group["start_us"].to_numpy()
        end = group["end_us"].to_numpy()
        tensors = group["tensor"].astype(str).to_numpy()
        # a new operation starts where a span begins after every earlier one has ended
        new_op = np.ones(len(start), dtype=bool)
        new_op[1:] = start[1:] >= np.maximum.accumulate(end)[:-1]
        op_id = np.cumsum(new_op)
        for i in np.unique(op_id):
            sel = op_id == i
            nbytes = sum(size.get(t, 0) for t in tensors[sel])
            rows.append(
                {
                    "np": np_workers,
                    "collective": name,
                    "start_us": int(start[sel].min()),
                    "dur_us": int(end[sel].max() - start[sel].min()),
                    "tensors": int(sel.sum()),
                    "bytes": int(nbytes),
                }
            )
    columns = ["np", "collective", "start_us", "dur_us", "tensors", "bytes"]
    out = pd.DataFrame(rows, columns=columns)
    return out[out["bytes"] > 0].sort_values("start_us").reset_index(drop=True)


def fit_alpha_beta(ops: pd.DataFrame, *, quantile: float | None = None) -> dict:
    """Fit alpha (latency) and B (bandwidth) of the ring model to measured allreduces.

    A timeline's collective span on rank 0 also contains the time rank 0 waits for slower
    ranks to join (on a shared CPU machine that wait dominates and varies a lot). With
    ``quantile`` (e.g. 0.1) the durations are first reduced to that quantile per (np, message
    size), keeping the fastest executions, which are closest to the pure transfer cost.

    Args:
        ops: one row per allreduce operation (a fused batch counts once) with ``np`` (workers),
            ``bytes`` (message size: the summed size of the fused tensors) and ``dur_us``
            (duration of the collective itself, e.g. the timeline's ``MPI_ALLREDUCE`` /
            ``GLOO_ALLREDUCE`` activity). Rows with np < 2 are ignored.
        quantile: reduce durations to this quantile per (np, bytes) before fitting (None: fit
            every operation).

    Returns:
        ``alpha_us``, ``bandwidth_bytes_per_s`` (inf if no size dependence is measurable),
        ``beta_ns_per_byte``, ``r2`` (of the fitted durations), ``ops`` (points used),
        ``nps`` (sorted worker counts seen), ``bytes_min``, ``bytes_max``, ``quantile``. Both
        coefficients
        are constrained to be >= 0 (the other one is refitted alone when one would go negative).

    Raises:
        ValueError: if a column is missing, fewer than 3 usable points remain, or all messages
            have the same size and only one N was measured (alpha and B cannot be separated).
    """
    require_columns(ops, ("np", "bytes", "dur_us"), "fit_alpha_beta")
    d = ops[(ops["np"] >= 2) & np.isfinite(ops["dur_us"]) & (ops["bytes"] > 0)]
    if quantile is not None:
        d = d.groupby(["np", "bytes"], as_index=False)["dur_us"].quantile(quantile)
    if len(d) < 3:
        raise ValueError(f"fit_alpha_beta: need >= 3 allreduces with np >= 2, got {len(d)}")
    n = d["np"].to_numpy(dtype=float)
    m = d["bytes"].to_numpy(dtype=float)
    t = d["dur_us"].to_numpy(dtype=float) * 1e-6
    x_alpha = 2 * (n - 1)
    x_beta = 2 * (n - 1) / n * m
    if np.unique(n).size == 1 and np.unique(m).size == 1:
        raise ValueError(
            "fit_alpha_beta: one message size at one N: alpha and B are not separable"
        )
    design = np.column_stack([x_alpha, x_beta])
    (alpha, beta), *_ = np.linalg.lstsq(design, t, rcond=None)
    if beta < 0:
        beta = 0.0
        alpha = float(x_alpha @ t / (x_alpha @ x_alpha))
    if alpha < 0:
        alpha = 0.0
        beta = float(x_beta @ t / (x_beta @ x_beta))
    fitted = alpha * x_alpha + beta * x_beta
    ss_tot = float(((t - t.mean()) ** 2).sum())
    r2 = 1.0 - float(((t - fitted) ** 2).sum()) / ss_tot if ss_tot > 0 else math.nan
    return {
        "alpha_us": float(alpha) * 1e6,
        "bandwidth_bytes_per_s": math.inf if beta == 0 else 1.0 / float(beta),
        "beta_ns_per_byte": float(beta) * 1e9,
        "r2": r2,
        "ops": int(len(d)),
        "nps": sorted(int(v) for v in np.unique(n)),
        "bytes_min": float(m.min()),
        "bytes_max": float(m.max()),
        "quantile": quantile,
    }


def predict_scaling(
    fit: dict,
    *,
    compute_time_s: float,
    bytes_per_step: float,
    allreduces_per_step: float,
    batch_size: int,
    nps: list[int] | np.ndarray = (1, 2, 4, 8, 16, 32),
    overlap: float = 0.0,
) -> pd.DataFrame:
    """Predict step time, throughput and speedup for more workers (per-worker batch fixed).

    A step is the one-worker compute time plus the gradient allreduces, of which a fraction
    ``overlap`` hides behind the backward pass (0 = none, Horovod on CPU overlaps little)::

        step(N) = compute + (1 - overlap) * k * t(N, bytes_per_step / k)

    with k allreduces per step (after tensor fusion) sharing the gradient bytes equally.

    Args:
        fit: from :func:`fit_alpha_beta` (``alpha_us``, ``bandwidth_bytes_per_s``).
        compute_time_s: step time of one worker (no communication), s.
        bytes_per_step: gradient bytes allreduced per step (4 x parameters for float32).
        allreduces_per_step: allreduce operations per step after fusion (>= 1).
        batch_size: per-worker batch size.
        nps: worker counts to predict.
        overlap: fraction of communication hidden behind compute, in [0, 1].

    Returns:
        One row per N: ``np``, ``comm_time_s``, ``step_time_s``, ``samples_per_s``,
        ``speedup``, ``efficiency``, ``comm_share`` (of the step).

    Raises:
        ValueError: for a non-positive compute time or allreduce count, or overlap outside
            [0, 1].
    """
    if compute_time_s <= 0 or allreduces_per_step < 1 or not 0 <= overlap <= 1:
        raise ValueError(
            "predict_scaling: need compute_time_s > 0, allreduces_per_step >= 1, 0 <= overlap <= 1"
        )
    n = np.asarray(nps, dtype=float)
    per_op = ring_allreduce_time_s(
        n,
        bytes_per_step / allreduces_per_step,
        fit["alpha_us"] * 1e-6,
        fit["bandwidth_bytes_per_s"],
    )
    comm = (1.0 - overlap) * allreduces_per_step * per_op
    step = compute_time_s + comm
    rate = n * batch_size / step
    base = batch_size / compute_time_s
    return pd.DataFrame(
        {
            "np": n.astype(int),
            "comm_time_s": comm,
            "step_time_s": step,
            "samples_per_s": rate,
            "speedup": rate / base,
            "efficiency": rate / base / n,
            "comm_share": comm / step,
        }
    )


def compare_prediction(predicted: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Put predicted and measured throughput speedups side by side.

    Args:
        predicted: from :func:`predict_scaling`.
        measured: with ``np`` and ``speedup_throughput`` (e.g. from
            :func:`workshop.analysis.scaling.speedup_table`).

    Returns:
        ``np``, ``speedup_predicted``, ``speedup_measured`` (NaN where not measured),
        ``error`` (predicted / measured - 1).
    """
    out = predicted[["np", "speedup"]].rename(columns={"speedup": "speedup_predicted"})
    meas = measured[["np", "speedup_throughput"]].rename(
        columns={"speedup_throughput": "speedup_measured"}
    )
    out = out.merge(meas, on="np", how="outer").sort_values("np").reset_index(drop=True)
    out["error"] = out["speedup_predicted"] / out["speedup_measured"] - 1.0
    return out


def predict_from_run(
    fit: dict,
    ops: pd.DataFrame,
    *,
    steps: int,
    step_time_s: float,
    batch_size: int,
    nps: list[int] | np.ndarray = (1, 2, 4, 8, 16, 32),
) -> tuple[pd.DataFrame, dict]:
    """Predict scaling from one measured multi-worker run and its timeline's allreduces.

    The run gives the traffic per step (bytes and operations, from ``ops``) and the measured
    step time; the model's communication time at the run's N is subtracted from the step time
    to estimate the compute time, then :func:`predict_scaling` extrapolates (no overlap).

    Args:
        fit: from :func:`fit_alpha_beta`.
        ops: the run's allreduce operations (:func:`allreduce_ops`), one np value.
        steps: optimizer steps the timeline covers (all epochs).
        step_time_s: measured steady-state step time of the run.
        batch_size: per-worker batch size.
        nps: worker counts to predict.

    Returns:
        ``(prediction, inputs)``: the :func:`predict_scaling` table, and the derived inputs
        ``np_run``, ``bytes_per_step``, ``allreduces_per_step``, ``comm_time_s`` (model, at the
        run's N), ``compute_time_s``.

    Raises:
        ValueError: if ``ops`` is empty, mixes worker counts, or the model's communication
            time exceeds the measured step time.
    """
    if ops.empty or ops["np"].nunique() != 1 or steps < 1:
        raise ValueError("predict_from_run: need allreduces of one run (one np) and steps >= 1")
    n_run = int(ops["np"].iloc[0])
    per_step = max(len(ops) / steps, 1.0)
    nbytes = float(ops["bytes"].sum()) / steps
    comm = per_step * float(
        ring_allreduce_time_s(
            n_run, nbytes / per_step, fit["alpha_us"] * 1e-6, fit["bandwidth_bytes_per_s"]
        )
    )
    compute = step_time_s - comm
    if compute <= 0:
        raise ValueError(
            f"predict_from_run: modelled communication ({comm * 1e3:.2f} ms/step) exceeds the "
            f"measured step time ({step_time_s * 1e3:.2f} ms)"
        )
    inputs = {
        "np_run": n_run,
        "bytes_per_step": nbytes,
        "allreduces_per_step": per_step,
        "comm_time_s": comm,
        "compute_time_s": compute,
    }
    prediction = predict_scaling(
        fit,
        compute_time_s=compute,
        bytes_per_step=nbytes,
        allreduces_per_step=per_step,
        batch_size=batch_size,
        nps=nps,
    )
    return prediction, inputs


# The runs-table columns comm_model_vs_measurement reads: the measurements, and the options
# that fix a step's work (workshop.runspec.WORK_KEYS), which must match between the run the
# model starts from and the runs whose measured speedup it is compared with.
_PIPELINE_COLUMNS = ("run", "np", "steps", "epochs_done", "steady_epoch_time_s", *WORK_KEYS)
# The work keys a one-worker run shares with the reference (Horovod's settings are at their
# defaults there).
_COMPUTE_KEYS = tuple(key for key in WORK_KEYS if not OPTIONS[key].horovod)


def _default_knobs(runs: pd.DataFrame) -> pd.Series:
    """True for runs with Horovod's default fusion threshold and cycle time."""
    return runs["fusion_threshold_mb"].isna() & runs["cycle_time_ms"].isna()


def comm_model_vs_measurement(
    runs: pd.DataFrame,
    spans_by_run: dict[str, pd.DataFrame],
    *,
    quantile: float = 0.1,
    nps: list[int] | np.ndarray = (1, 2, 4, 8, 16, 32),
    strict: bool = False,
) -> dict | None:
    """The whole ring-allreduce model pipeline: allreduces -> fit -> prediction -> comparison.

    1. :func:`allreduce_ops` turns the timeline of every run with np >= 2 into allreduce
       operations (message size, duration);
    2. :func:`fit_alpha_beta` fits alpha and B to all of them (``quantile`` per size);
    3. :func:`predict_from_run` predicts scaling from one reference run: the first run with a
       timeline and Horovod's default fusion threshold and cycle time (else the first run with
       a timeline);
    4. :func:`compare_prediction` sets the prediction beside the measured throughput speedups
       of the runs that do the same work per worker as the reference (its group in
       :func:`workshop.analysis.scaling.scaling_groups`, matched on the options that fix a
       step's work, :data:`workshop.runspec.WORK_KEYS`: framework, dataset, batch size,
       fusion threshold, cycle time...), and a one-worker run of that work says how much of
       the reference's step time the model does not explain.

    ``workshop scaling report`` and notebook 06 both call this function.

    Args:
        runs: the runs table of :func:`workshop.readers.sweep.read_sweep` (``run``, ``np``,
            ``steps``, ``epochs_done``, ``steady_epoch_time_s``, ``batch_size``, ``dataset``,
            ``fusion_threshold_mb``, ``cycle_time_ms`` and the other configuration columns).
        spans_by_run: run name -> ``Timeline.spans`` of that run's ``timeline.json`` (read
            with :func:`workshop.readers.timeline.read_timeline`); runs with np < 2 are ignored.
        quantile: passed to :func:`fit_alpha_beta`.
        nps: worker counts to predict.
        strict: raise ``ValueError`` when there is nothing to fit or the fit or the
            prediction fails, instead of returning None or reporting the failure under
            ``error`` / ``prediction_error``.

    Returns:
        None when no timeline holds an allreduce of a run with np >= 2 (without ``strict``).
        Otherwise a dict:

        - ``ops``: DataFrame, every allreduce operation (:func:`allreduce_ops` columns plus
          ``run``), the points of the fit;
        - ``timelines``: number of timelines that contributed operations;
        - ``fit``: the :func:`fit_alpha_beta` result (``alpha_us``,
          ``bandwidth_bytes_per_s``, ``r2``, ...), or ``error`` (str) when it failed;
        - ``run``: the reference run's name;
        - ``inputs``: what :func:`predict_from_run` derived from the reference run
          (``np_run``, ``bytes_per_step``, ``allreduces_per_step``, ``comm_time_s``,
          ``compute_time_s``), plus ``np1_step_time_s`` (median steady step time of the
          matching one-worker runs) and ``unexplained_s`` (``compute_time_s`` minus it: time
          per step that is neither compute nor modelled transfer) when such runs exist;
        - ``prediction``: DataFrame from :func:`predict_scaling` (``np``, ``comm_time_s``,
          ``step_time_s``, ``samples_per_s``, ``speedup``, ``efficiency``, ``comm_share``);
        - ``measured``: the reference group's :func:`~workshop.analysis.scaling.speedup_table`,
          or None when no run group matches;
        - ``comparison``: DataFrame from :func:`compare_prediction` (``np``,
          ``speedup_predicted``, ``speedup_measured``, ``error``), or None without
          ``measured``;
        - ``prediction_error`` (str) instead of ``run`` ... ``comparison`` when the
          prediction failed.

    Raises:
        ValueError: with ``strict``, when no timeline holds an allreduce of a run with
            np >= 2, or the fit or the prediction fails (the message says why); always, when
            ``runs`` lacks a column this pipeline reads.
    """
    require_columns(runs, _PIPELINE_COLUMNS, "comm_model_vs_measurement", frame="runs")
    ops_by_run = _ops_by_run(runs, spans_by_run)
    if not ops_by_run:
        if strict:
            raise ValueError(
                "comm_model_vs_measurement: no allreduce in a timeline of a run with np >= 2 "
                f"(timelines given for {sorted(spans_by_run) or 'no run'}); record runs with "
                "np >= 2 and --timeline"
            )
        return None
    ops = pd.concat([o.assign(run=name) for name, o in ops_by_run.items()], ignore_index=True)
    try:
        fit = fit_alpha_beta(ops, quantile=quantile)
    except ValueError as exc:
        if strict:
            raise
        return {"ops": ops, "error": str(exc)}
    out: dict = {"ops": ops, "fit": fit, "timelines": len(ops_by_run)}
    ref = _reference_run(runs[runs["run"].isin(ops_by_run)])
    try:
        prediction, inputs = predict_from_run(
            fit,
            ops_by_run[ref["run"]],
            steps=int(ref["steps"] * ref["epochs_done"]),
            step_time_s=ref["steady_epoch_time_s"] / ref["steps"],
            batch_size=int(ref["batch_size"]),
            nps=nps,
        )
    except ValueError as exc:
        if strict:
            raise
        return out | {"prediction_error": str(exc)}
    measured = _measured_speedups(runs, ref)
    out |= {
        "run": ref["run"],
        "inputs": inputs,
        "prediction": prediction,
        "measured": measured,
        "comparison": None,
    }
    if measured is None:
        return out
    out["comparison"] = compare_prediction(prediction, measured)
    step_1 = _one_worker_step_s(runs, ref)
    if step_1 is not None:
        inputs["np1_step_time_s"] = step_1
        inputs["unexplained_s"] = inputs["compute_time_s"] - step_1
    return out


def _ops_by_run(
    runs: pd.DataFrame, spans_by_run: dict[str, pd.DataFrame]
) -> dict[str, pd.DataFrame]:
    """Run name -> :func:`allreduce_ops` of its timeline, for the runs with np >= 2 and at
    least one allreduce."""
    ops_by_run = {}
    for row in runs.itertuples():
        if row.np >= 2 and row.run in spans_by_run:
            ops = allreduce_ops(spans_by_run[row.run], int(row.np))
            if len(ops):
                ops_by_run[row.run] = ops
    return ops_by_run


def _reference_run(candidates: pd.DataFrame) -> pd.Series:
    """The run the prediction starts from: the first with Horovod's default fusion threshold
    and cycle time, else the first."""
    default = candidates[_default_knobs(candidates)]
    return (default if len(default) else candidates).iloc[0]


def _measured_speedups(runs: pd.DataFrame, ref: pd.Series) -> pd.DataFrame | None:
    """The speedup table of the scaling group doing the same work as ``ref``, or None."""
    for key, group in scaling_groups(runs):
        if all(key[k] == (None if pd.isna(ref[k]) else ref[k]) for k in WORK_KEYS if k in key):
            return speedup_table(group)
    return None


def _one_worker_step_s(runs: pd.DataFrame, ref: pd.Series) -> float | None:
    """Median steady step time (s) of the one-worker runs with default knobs doing the work of
    ``ref`` (equal in the work keys that are no Horovod setting: framework, dataset, batch
    size...), or None without such runs."""
    alone = (runs["np"] == 1) & _default_knobs(runs)
    for key in _COMPUTE_KEYS:
        alone &= runs[key] == ref[key]
    alone = runs[alone]
    if not len(alone):
        return None
    return float((alone["steady_epoch_time_s"] / alone["steps"]).median())
