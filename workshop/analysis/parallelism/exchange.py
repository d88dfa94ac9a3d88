"""What one gradient exchange costs: ring allreduce against a parameter server, and the
pipeline bubble of model parallelism.

The model and its conventions: see :mod:`workshop.analysis.parallelism`.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from workshop.analysis.parallelism.choice import parameter_server_s
from workshop.rules import ring_allreduce_time_s

__all__ = ["crossover_bytes", "exchange_costs", "pipeline_bubble_fraction"]


# --------------------------------------------------------------------------------------------
# Ring allreduce vs parameter server


def exchange_costs(
    n_workers: Iterable[int],
    nbytes: float | Iterable[float],
    *,
    alpha_s: float = 5e-6,
    bandwidth: float = 12.5e9,
    servers: int = 1,
) -> pd.DataFrame:
    """Time to exchange ``nbytes`` of gradients per step, ring allreduce vs parameter server.

    Args:
        n_workers: worker counts to evaluate (>= 1).
        nbytes: gradient bytes per worker (e.g. ``grad_bytes`` of :func:`model_estimates`);
            several sizes give one block of rows each.
        alpha_s: per-message latency, s.
        bandwidth: bytes/s of every link (worker and server links alike).
        servers: parameter servers the parameters are sharded over.

    Returns:
        DataFrame with ``n_workers``, ``bytes``, ``ring_s``, ``ps_s``, ``ps_over_ring``
        (NaN at N = 1, where the ring sends nothing), ``ring_bytes_per_worker`` (sent by each
        worker), ``ps_bytes_server_link`` (into, and again out of, the busiest server).
    """
    n = np.asarray(list(n_workers), dtype=int)
    if n.size == 0 or n.min() < 1:
        raise ValueError(f"exchange_costs: worker counts must be >= 1, got {n.tolist()}")
    if np.ndim(nbytes):
        return pd.concat(
            [
                exchange_costs(n, m, alpha_s=alpha_s, bandwidth=bandwidth, servers=servers)
                for m in nbytes
            ],
            ignore_index=True,
        )
    if nbytes <= 0 or bandwidth <= 0 or alpha_s < 0:
        raise ValueError("exchange_costs: need nbytes > 0, bandwidth > 0 and alpha_s >= 0")
    ring = ring_allreduce_time_s(n, nbytes, alpha_s, bandwidth)
    ps = parameter_server_s(n, nbytes, alpha_s, bandwidth, servers)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(n > 1, ps / np.where(ring > 0, ring, np.nan), np.nan)
    return pd.DataFrame(
        {
            "n_workers": n,
            "bytes": float(nbytes),
            "ring_s": ring,
            "ps_s": ps,
            "ps_over_ring": ratio,
            "ring_bytes_per_worker": 2 * (n - 1) / n * nbytes,
            "ps_bytes_server_link": n * nbytes / servers,
        }
    )


def crossover_bytes(n: int, *, alpha_s: float = 5e-6, bandwidth: float = 12.5e9) -> float:
    """Message size below which one parameter server beats the ring (latency wins).

    Solves ``2 (N-1) alpha + 2 (N-1)/N m / B = 2 alpha + 2 N m / B`` for m:
    ``m* = (N - 2) alpha B / (N - (N-1)/N)``. 0 for N <= 2 (the ring is never slower).

    >>> crossover_bytes(2)
    0.0
    """
    if n <= 2:
        return 0.0
    return (n - 2) * alpha_s * bandwidth / (n - (n - 1) / n)


def pipeline_bubble_fraction(stages: int, microbatches: int) -> float:
    """Idle share of each stage in a GPipe pipeline with equal stages: (S-1) / (M+S-1).

    Every stage waits S-1 stage-times while the pipeline fills and drains, and works M of them.

    >>> pipeline_bubble_fraction(2, 1), pipeline_bubble_fraction(2, 4)
    (0.5, 0.2)
    """
    if stages < 1 or microbatches < 1:
        raise ValueError("pipeline_bubble_fraction: stages and microbatches must be >= 1")
    return (stages - 1) / (microbatches + stages - 1)
