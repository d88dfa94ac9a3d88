"""Several MPI profiles side by side (``workshop mpi summary DIR``, ``workshop mpi compare``):
each profile's numbers from the one-profile analyses of :mod:`workshop.analysis.mpi`, put in
one table.

* :func:`compare_profiles`: two runs' routine tables side by side.
* :func:`compare_summary`: two runs' headline numbers side by side.
* :func:`jobs_table`: one row per job, for a folder of jobs.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from workshop.analysis.mpi import (
    NEGOTIATION_WORD_BYTES,
    _default_rank,
    comm_fraction,
    dominant_routine,
    load_imbalance,
    negotiation_signature,
    routine_table,
)
from workshop.readers.mpitrace import MpiProfile

__all__ = ["compare_profiles", "compare_summary", "jobs_table"]


def compare_profiles(
    a: MpiProfile,
    b: MpiProfile,
    labels: tuple[str, str] = ("a", "b"),
    rank: int | None = None,
) -> pd.DataFrame:
    """Routine tables of two runs side by side.

    Args:
        a: first profile.
        b: second profile.
        labels: suffixes for the two runs' columns (e.g. ``("cpu", "gpu")``).
        rank: the rank to compare (default: 0, or each profile's lowest rank with a file).

    Returns:
        DataFrame indexed by ``routine`` (union of both; missing = 0 calls): ``calls_<A>``,
        ``calls_<B>``, ``avg_bytes_<A>``, ``avg_bytes_<B>``, ``time_s_<A>``, ``time_s_<B>``,
        ``time_share_<A>``, ``time_share_<B>``, and ``time_ratio`` (B / A; inf if A is 0,
        NaN if both are). Sorted by the larger time share.
    """
    la, lb = labels
    if la == lb:
        raise ValueError(f"labels must differ, got {labels!r}")
    cols = ["calls", "avg_bytes", "time_s", "time_share"]
    ta = routine_table(a, rank).set_index("routine")[cols].add_suffix(f"_{la}")
    tb = routine_table(b, rank).set_index("routine")[cols].add_suffix(f"_{lb}")
    table = ta.join(tb, how="outer")
    for col in (f"calls_{la}", f"calls_{lb}"):
        table[col] = table[col].fillna(0).astype("int64")
    for col in (f"time_s_{la}", f"time_s_{lb}", f"time_share_{la}", f"time_share_{lb}"):
        table[col] = table[col].fillna(0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        table["time_ratio"] = table[f"time_s_{lb}"] / table[f"time_s_{la}"]
    order = table[[f"time_share_{la}", f"time_share_{lb}"]].max(axis=1)
    table = table.loc[order.sort_values(ascending=False).index]
    table.index.name = "routine"
    return table[
        [
            f"calls_{la}",
            f"calls_{lb}",
            f"avg_bytes_{la}",
            f"avg_bytes_{lb}",
            f"time_s_{la}",
            f"time_s_{lb}",
            f"time_share_{la}",
            f"time_share_{lb}",
            "time_ratio",
        ]
    ]


def jobs_table(
    profiles: dict[str, MpiProfile], small_bytes: float = NEGOTIATION_WORD_BYTES
) -> pd.DataFrame:
    """One row per job, to compare several jobs at a glance (``workshop mpi summary DIR``).

    Args:
        profiles: ``{label: profile}``, e.g. a folder's jobs, labelled ``folder/jobid``.
        small_bytes: allreduces of at most this many bytes count as negotiation (default 8:
            Horovod's bit vector for up to 61 tensors, one 64-bit word).

    Returns:
        Columns ``job`` (the label), ``ntasks``, ``ranks_with_files``, ``mpi_time_share``
        (MPI time over elapsed time, summed over the ranks with a file, 0..1),
        ``rank`` (the rank of the next columns: 0, or the lowest with a file),
        ``allreduce_calls``, ``small_allreduce_share`` (share of those calls of at most
        ``small_bytes``; NaN without allreduces or message sizes), ``top_routine`` and
        ``top_routine_share`` (of that rank's MPI time, 0..1).
    """
    rows = []
    for label, profile in profiles.items():
        files = profile.files
        elapsed = float(files["elapsed_s"].sum())
        sig = negotiation_signature(profile, small_bytes=small_bytes)
        top = dominant_routine(profile)
        rows.append(
            {
                "job": label,
                "ntasks": profile.ntasks,
                "ranks_with_files": len(files),
                "mpi_time_share": float(files["comm_s"].sum()) / elapsed if elapsed else math.nan,
                "rank": sig["rank"],
                "allreduce_calls": sig["allreduce_calls"],
                "small_allreduce_share": sig["small_call_share"],
                "top_routine": top["routine"],
                "top_routine_share": top["time_share"],
            }
        )
    return pd.DataFrame(rows, columns=_JOBS_COLUMNS)


_JOBS_COLUMNS = [
    "job", "ntasks", "ranks_with_files", "mpi_time_share", "rank", "allreduce_calls",
    "small_allreduce_share", "top_routine", "top_routine_share",
]  # fmt: skip


def compare_summary(
    a: MpiProfile, b: MpiProfile, labels: tuple[str, str] = ("a", "b")
) -> pd.DataFrame:
    """Headline numbers of two runs side by side.

    Args:
        a: first profile.
        b: second profile.
        labels: column names for the two runs.

    Returns:
        DataFrame indexed by ``metric`` with one column per label: ``ntasks``, ``elapsed_s``,
        ``comm_s`` and ``comm_fraction`` (rank 0 or lowest rank), ``dominant_routine``,
        ``allreduce_calls``, ``small_allreduce_calls``, ``small_allreduce_call_share``,
        ``small_allreduce_time_share``, ``large_allreduce_calls``, ``large_allreduce_bytes``,
        ``max_over_min_comm``.
    """
    columns = {}
    for label, prof in zip(labels, (a, b), strict=True):
        rank = _default_rank(prof, None)
        fr = comm_fraction(prof).set_index("rank")
        sig = negotiation_signature(prof, rank)
        columns[label] = {
            "ntasks": prof.ntasks,
            "elapsed_s": float(fr.loc[rank, "elapsed_s"]),
            "comm_s": float(fr.loc[rank, "comm_s"]),
            "comm_fraction": float(fr.loc[rank, "comm_fraction"]),
            "dominant_routine": dominant_routine(prof, rank)["routine"],
            "allreduce_calls": sig["allreduce_calls"],
            "small_allreduce_calls": sig["small_calls"],
            "small_allreduce_call_share": sig["small_call_share"],
            "small_allreduce_time_share": sig["small_time_share"],
            "large_allreduce_calls": sig["large_calls"],
            "large_allreduce_bytes": sig["large_bytes"],
            "max_over_min_comm": load_imbalance(prof)["max_over_min"],
        }
    frame = pd.DataFrame(columns)
    frame.index.name = "metric"
    return frame
