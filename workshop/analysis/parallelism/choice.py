"""Memory and compute per communication: which parallelism fits a model on a GPU, and why.

The model and its conventions: see :mod:`workshop.analysis.parallelism`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from workshop.analysis.parallelism.layers import (
    GPUS,
    MODELS,
    OPTIMIZER_STATES,
    TRAIN_FLOPS_PER_FORWARD,
    VALUE_BYTES,
    layer_table,
)
from workshop.frames import require_columns
from workshop.rules import ring_allreduce_time_s
from workshop.units import format_bytes

__all__ = [
    "choose_parallelism",
    "data_parallel_balance",
    "gpu_memory_bytes",
    "model_estimates",
    "parallelism_table",
    "parameter_server_s",
]


# --------------------------------------------------------------------------------------------
# Memory and compute per communication


def model_estimates(
    tables: dict[str, pd.DataFrame] | None = None,
    *,
    extra: dict[str, pd.DataFrame] | None = None,
    optimizer: str = "adam",
    batch_per_gpu: int | None = None,
) -> pd.DataFrame:
    """Memory and compute of training each model, one row per model.

    Args:
        tables: model name -> layer table (columns as :func:`layer_table`); default: all of
            :data:`MODELS`.
        extra: more models appended to ``tables``, e.g. ``{"demo-mlp": mlp_layer_table(w)}``;
            models not in :data:`MODELS` get ``batch_per_gpu`` = 32 unless it is given.
        optimizer: ``sgd``, ``sgd_momentum`` or ``adam`` (state values per parameter).
        batch_per_gpu: samples per GPU for all models; default: each model's typical batch.

    Returns:
        DataFrame with ``model``, ``sample`` (what one sample is), ``params``,
        ``param_bytes``, ``grad_bytes``, ``optimizer_bytes`` (fp32),
        ``state_bytes`` (their sum), ``activation_bytes_per_sample``, ``batch_per_gpu``,
        ``activation_bytes`` (per GPU batch), ``total_bytes`` (state + activations),
        ``fwd_flops_per_sample`` (2 x MACs), ``train_flops_per_sample`` (3 x forward).
    """
    if optimizer not in OPTIMIZER_STATES:
        raise ValueError(f"model_estimates: optimizer must be one of {list(OPTIMIZER_STATES)}")
    if batch_per_gpu is not None and batch_per_gpu < 1:
        raise ValueError(f"model_estimates: batch_per_gpu must be >= 1, got {batch_per_gpu}")
    tables = tables if tables is not None else {name: layer_table(name) for name in MODELS}
    tables = {**tables, **(extra or {})}
    rows = []
    for name, table in tables.items():
        require_columns(table, ["params", "macs", "activation_bytes"], f"model {name!r}")
        params = int(table["params"].sum())
        info = MODELS.get(name, {})
        batch = batch_per_gpu or info.get("batch_per_gpu", 32)
        act = int(table["activation_bytes"].sum())
        state = params * VALUE_BYTES * (2 + OPTIMIZER_STATES[optimizer])
        fwd = 2.0 * float(table["macs"].sum())
        rows.append(
            {
                "model": name,
                "sample": info.get("sample", "sample"),
                "params": params,
                "param_bytes": params * VALUE_BYTES,
                "grad_bytes": params * VALUE_BYTES,
                "optimizer_bytes": params * VALUE_BYTES * OPTIMIZER_STATES[optimizer],
                "state_bytes": state,
                "activation_bytes_per_sample": act,
                "batch_per_gpu": int(batch),
                "activation_bytes": act * batch,
                "total_bytes": state + act * batch,
                "fwd_flops_per_sample": fwd,
                "train_flops_per_sample": TRAIN_FLOPS_PER_FORWARD * fwd,
            }
        )
    return pd.DataFrame(rows)


def _scalar(x: np.ndarray) -> np.ndarray | float:
    """A 0-d result as a Python float, arrays unchanged."""
    return float(x) if np.ndim(x) == 0 else x


def parameter_server_s(
    n: int | np.ndarray, nbytes: float, alpha_s: float, bandwidth: float, servers: int = 1
):
    """Parameter-server exchange time: workers push gradients, then pull parameters.

    With one server its link carries N x bytes in each direction, so the exchange takes
    ``2 (alpha + N bytes / B)``; sharding the parameters over S servers divides the server-side
    traffic by S, but a worker still sends and receives ``bytes``:
    ``2 (alpha + max(N / S, 1) * bytes / B)``. (TensorFlow's parameter servers, which Horovod
    was written to replace: seed 003.)

    >>> round(parameter_server_s(4, 4e6, 10e-6, 1e9) * 1e3, 3)  # 2 x (10 us + 16 ms)
    32.02
    """
    if servers < 1:
        raise ValueError(f"parameter_server_s: servers must be >= 1, got {servers}")
    n = np.asarray(n, dtype=float)
    return _scalar(2 * (alpha_s + np.maximum(n / servers, 1.0) * np.asarray(nbytes) / bandwidth))


def data_parallel_balance(
    estimates: pd.DataFrame,
    *,
    n_workers: int = 8,
    sustained_flops: float = 10e12,
    bandwidth: float = 12.5e9,
    alpha_s: float = 5e-6,
) -> pd.DataFrame:
    """Compute vs gradient communication of one data-parallel step, per model.

    Args:
        estimates: output of :func:`model_estimates`.
        n_workers: data-parallel workers (GPUs).
        sustained_flops: FLOP/s a GPU really delivers on this training (not the peak).
        bandwidth: link bandwidth, bytes/s (12.5e9 = 100 Gb/s InfiniBand EDR, nominal).
        alpha_s: per-message latency, s.

    Returns:
        ``estimates`` with added columns ``n_workers``, ``train_flops_per_step`` (per worker,
        ``batch_per_gpu`` samples), ``allreduce_bytes_per_worker`` (ring traffic sent by one
        worker: 2 (N-1)/N x grad_bytes), ``flops_per_comm_byte`` (hardware-independent),
        ``compute_s``, ``allreduce_s`` (ring model, one fused allreduce of all gradients),
        ``compute_to_comm`` (compute_s / allreduce_s; < 1 means communication-bound unless
        it is overlapped with the backward pass).
    """
    require_columns(
        estimates, ["train_flops_per_sample", "batch_per_gpu", "grad_bytes"], "balance"
    )
    if n_workers < 2:
        raise ValueError(f"data_parallel_balance: n_workers must be >= 2, got {n_workers}")
    out = estimates.copy()
    out["n_workers"] = n_workers
    out["train_flops_per_step"] = out["train_flops_per_sample"] * out["batch_per_gpu"]
    out["allreduce_bytes_per_worker"] = 2 * (n_workers - 1) / n_workers * out["grad_bytes"]
    out["flops_per_comm_byte"] = out["train_flops_per_step"] / out["allreduce_bytes_per_worker"]
    out["compute_s"] = out["train_flops_per_step"] / sustained_flops
    out["allreduce_s"] = ring_allreduce_time_s(n_workers, out["grad_bytes"], alpha_s, bandwidth)
    out["compute_to_comm"] = out["compute_s"] / out["allreduce_s"]
    return out


def choose_parallelism(
    estimate: pd.Series | dict,
    gpu_memory_bytes: float,
    *,
    batch_per_gpu: int | None = None,
    reserve_fraction: float = 0.1,
) -> dict:
    """Which parallelism fits one model on a GPU of the given memory, and why.

    The rule of seed 003: data parallelism whenever the model fits (easier, and the work per
    synchronisation grows with the batch); model parallelism only when it does not.

    Args:
        estimate: one row of :func:`model_estimates` (needs ``model``, ``state_bytes``,
            ``activation_bytes_per_sample``, ``batch_per_gpu``).
        gpu_memory_bytes: memory of one GPU.
        batch_per_gpu: samples per GPU; default: the row's ``batch_per_gpu``.
        reserve_fraction: share of GPU memory kept for the framework, workspaces and
            fragmentation (not usable for the model).

    Returns:
        dict with ``model``, ``strategy`` (``data parallel``, ``data parallel (smaller
        batch)`` or ``model parallel``), ``reason`` (one sentence with the numbers),
        ``usable_bytes``, ``state_bytes``, ``activation_bytes`` (batch), ``need_bytes``,
        ``max_batch_per_gpu`` (samples that fit next to the model state; 0 if none),
        ``min_gpus_model_parallel`` (GPUs the model must at least be split over, assuming an
        even split of state and activations; 1 if it fits).
    """
    _check_choice_inputs(estimate, gpu_memory_bytes, reserve_fraction)
    batch = int(batch_per_gpu or estimate["batch_per_gpu"])
    usable = gpu_memory_bytes * (1 - reserve_fraction)
    state = float(estimate["state_bytes"])
    per_sample = float(estimate["activation_bytes_per_sample"])
    act = per_sample * batch
    need = state + act
    max_batch = max(0, int((usable - state) // per_sample)) if per_sample > 0 else batch
    if state + per_sample > usable:
        gpus = math.ceil(need / usable)
        strategy = "model parallel"
        reason = _model_parallel_reason(state, per_sample, usable, gpus)
    elif need > usable:
        gpus = 1
        strategy = "data parallel (smaller batch)"
        reason = (
            f"the model state ({format_bytes(state)}) fits, but {batch} samples need "
            f"{format_bytes(act)} of activations; at most {max_batch} per GPU fit in "
            f"{format_bytes(usable)}: data parallel with that batch (more GPUs or gradient "
            f"accumulation keep the global batch)"
        )
    else:
        gpus = 1
        strategy = "data parallel"
        reason = (
            f"state {format_bytes(state)} + activations of {batch} samples {format_bytes(act)} = "
            f"{format_bytes(need)} fit in {format_bytes(usable)} ({need / usable:.0%}): every GPU "
            f"holds the whole model"
        )
    return {
        "model": estimate["model"],
        "strategy": strategy,
        "reason": reason,
        "usable_bytes": usable,
        "state_bytes": state,
        "activation_bytes": act,
        "need_bytes": need,
        "max_batch_per_gpu": max_batch,
        "min_gpus_model_parallel": gpus,
    }


def _check_choice_inputs(
    estimate: pd.Series | dict, gpu_memory_bytes: float, reserve_fraction: float
) -> None:
    """Raise the ``ValueError`` of :func:`choose_parallelism` for a bad argument."""
    for key in ("model", "state_bytes", "activation_bytes_per_sample", "batch_per_gpu"):
        if key not in estimate:
            raise ValueError(f"choose_parallelism: the estimate has no {key!r}")
    if not 0 <= reserve_fraction < 1:
        raise ValueError(
            f"choose_parallelism: reserve_fraction must be in [0, 1), got {reserve_fraction}"
        )
    if gpu_memory_bytes <= 0:
        raise ValueError(
            f"choose_parallelism: gpu_memory_bytes must be > 0, got {gpu_memory_bytes}"
        )


def _model_parallel_reason(state: float, per_sample: float, usable: float, gpus: int) -> str:
    """Why the model must be split: what exceeds the usable memory, and over how many GPUs."""
    what = (
        f"parameters, gradients and optimizer state alone ({format_bytes(state)})"
        if state > usable
        else f"the state ({format_bytes(state)}) plus one sample's activations "
        f"({format_bytes(per_sample)})"
    )
    return (
        f"{what} exceed the usable {format_bytes(usable)} of one GPU: split the layers over "
        f">= {gpus} GPUs (pipeline), or shard the state / recompute activations"
    )


def parallelism_table(
    estimates: pd.DataFrame, gpu_memory_bytes: float, *, reserve_fraction: float = 0.1
) -> pd.DataFrame:
    """:func:`choose_parallelism` for every row of ``estimates`` (columns as its dict)."""
    return pd.DataFrame(
        [
            choose_parallelism(row, gpu_memory_bytes, reserve_fraction=reserve_fraction)
            for _, row in estimates.iterrows()
        ]
    )


def gpu_memory_bytes(name: str) -> float:
    """Memory of a GPU preset of :data:`GPUS`, in bytes."""
    if name not in GPUS:
        raise KeyError(f"gpu_memory_bytes: unknown GPU {name!r}; known: {sorted(GPUS)}")
    return GPUS[name]["memory_gib"] * 2.0**30
