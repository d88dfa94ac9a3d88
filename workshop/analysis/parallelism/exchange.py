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


def ring_allreduce_schedule(n_workers: int) -> pd.DataFrame:
    """Who sends which chunk to whom in each step of a ring allreduce of ``n_workers``.

    The buffer is cut into ``n_workers`` chunks. In the reduce-scatter, step s (0-based) has
    worker i send its partial sum of chunk (i - s) mod N to worker i + 1, which adds it to its
    own; after N - 1 steps worker i holds the full sum of chunk (i + 1) mod N. In the allgather
    each worker passes on the finished chunk it received last: in step s, chunk (i + 1 - s) mod N.
    2 (N - 1) steps in all, each moving one chunk (bytes / N) per worker: the ``2 (N-1)/N x
    bytes`` of :func:`exchange_costs`.

    Args:
        n_workers: N >= 2.

    Returns:
        DataFrame, one row per step and worker: ``step`` (0 to 2N - 3), ``phase``
        ("reduce-scatter" or "allgather"), ``worker``, ``chunk`` (the chunk it sends),
        ``to_worker``.

    >>> s = ring_allreduce_schedule(3)
    >>> s[s.step == 0].chunk.tolist(), s[s.step == 2].chunk.tolist(), len(s)
    ([0, 1, 2], [1, 2, 0], 12)
    """
    if n_workers < 2:
        raise ValueError(f"ring_allreduce_schedule: n_workers must be >= 2, got {n_workers}")
    n = n_workers
    rows = []
    for step in range(2 * (n - 1)):
        reduce = step < n - 1
        s = step if reduce else step - (n - 1)
        for worker in range(n):
            chunk = (worker - s) % n if reduce else (worker + 1 - s) % n
            phase = "reduce-scatter" if reduce else "allgather"
            rows.append((step, phase, worker, chunk, (worker + 1) % n))
    return pd.DataFrame(rows, columns=["step", "phase", "worker", "chunk", "to_worker"])
