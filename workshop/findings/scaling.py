"""Scaling findings in words (``workshop scaling report``, lesson 07): sentences with their
numbers, built from the tables of :mod:`workshop.analysis.scaling`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workshop.analysis.scaling import METRICS, amdahl_fit, linear_fit

__all__ = ["plateau_findings", "scaling_findings"]


def plateau_findings(plateau: dict) -> list[str]:
    """Say what the batch-size series shows: a plateau, or none in range.

    Args:
        plateau: from :func:`workshop.analysis.scaling.batch_size_plateau`.

    Returns:
        Lines of text, one finding each (here one sentence).

    >>> from workshop.analysis.scaling import batch_size_plateau
    >>> table = pd.DataFrame({"batch_size": [16, 32, 64], "steady_epoch_time_s": [4, 2, 1]})
    >>> plateau_findings(batch_size_plateau(table))
    ['Time per epoch is still falling at the largest batch measured (64: 1.000 s, 4.00x faster \
than batch 16): no plateau within batch 16-64.']
    """
    p = plateau
    table = p["table"].set_index("batch_size")
    end = p.get("plateau_end_batch_size", p["largest_batch_size"])
    larger = table[table.index > end]
    rises = (
        f" Beyond it the time rises again: batch {larger.index[0]} takes "
        f"{larger.time_s.iloc[0] / p['min_time_s']:.2f}x the fastest."
        if len(larger)
        else ""
    )
    if p["levels_off"]:
        return [
            f"Epoch time levels off from batch {p['plateau_batch_size']} (within "
            f"{100 * p['tolerance']:.0f}% of the fastest, {p['min_time_s']:.3f} s, up to batch "
            f"{end}): {p['speedup_at_plateau']:.2f}x faster than batch "
            f"{p['smallest_batch_size']}.{rises}"
        ]
    if len(larger):
        return [
            f"Epoch time is lowest at batch {p['plateau_batch_size']} "
            f"({p['plateau_time_s']:.3f} s, {p['speedup_at_plateau']:.2f}x faster than batch "
            f"{p['smallest_batch_size']}), with no larger batch within "
            f"{100 * p['tolerance']:.0f}% of the fastest: no plateau measured.{rises}"
        ]
    return [
        f"Time per epoch is still falling at the largest batch measured "
        f"({p['largest_batch_size']}: {p['min_time_s']:.3f} s, {p['speedup_at_plateau']:.2f}x "
        f"faster than batch {p['smallest_batch_size']}): no plateau within batch "
        f"{p['smallest_batch_size']}-{p['largest_batch_size']}."
    ]


def scaling_findings(
    table: pd.DataFrame,
    overhead: pd.DataFrame | None = None,
    *,
    wall_label: str = "total wall time (init included)",
) -> list[str]:
    """State the scaling findings as sentences with numbers.

    Args:
        table: from :func:`workshop.analysis.scaling.speedup_table`.
        overhead: from :func:`workshop.analysis.scaling.first_epoch_overhead` (optional).
        wall_label: what the ``wall`` metric measured (per-epoch logs have no init time).

    Returns:
        Lines of text, one finding each.
    """
    lines: list[str] = []
    top = table.iloc[-1]
    n = int(top["np"])
    names = {
        "wall": wall_label,
        "train": "training time (init excluded)",
        "throughput": "steady-state throughput",
    }
    measured = [m for m in METRICS if np.isfinite(top[f"speedup_{m}"])]
    for m in measured:
        lines.append(
            f"At {n} workers, speedup by {names[m]}: {top[f'speedup_{m}']:.2f}x "
            f"(efficiency {100 * top[f'efficiency_{m}']:.0f}%)."
        )
    if len(measured) >= 2:
        lo = min(measured, key=lambda m: top[f"speedup_{m}"])
        hi = max(measured, key=lambda m: top[f"speedup_{m}"])
        lines.append(
            f"The metrics disagree by {top[f'speedup_{hi}'] / top[f'speedup_{lo}']:.1f}x at "
            f"{n} workers: {names[hi]} leaves out costs that {names[lo]} pays "
            "(initialisation, the first epoch, evaluation)."
        )
    if "time_wall_s" in table and "time_train_s" in table and np.isfinite(top["time_wall_s"]):
        rest = top["time_wall_s"] - top["time_train_s"]
        if np.isfinite(rest) and top["time_wall_s"] > 0:
            lines.append(
                f"At {n} workers {100 * rest / top['time_wall_s']:.0f}% of the wall time "
                f"({rest:.1f} s) is spent outside the training loop."
            )
    if overhead is not None and len(overhead):
        worst = overhead.loc[overhead["overhead_share"].idxmax()]
        lines.append(
            f"The first epoch costs {worst['first_epoch_s']:.2f} s at np={int(worst['np'])} "
            f"vs {worst['steady_epoch_s']:.2f} s per later epoch: "
            f"{worst['first_epoch_overhead_s']:.2f} s of one-off overhead, "
            f"{100 * worst['overhead_share']:.0f}% of that run's training time."
        )
    multi = table[table["np"] > table["np"].min()]
    if len(multi) >= 1 and measured:
        m = "throughput" if "throughput" in measured else measured[0]
        fit = amdahl_fit(table["np"], table[f"speedup_{m}"])
        basis = (
            f"{fit['points']} worker counts"
            if fit["points"] > 1
            else "one worker count, so exactly determined (Karp-Flatt)"
        )
        lines.append(
            f"Amdahl fit on {names[m]}: serial fraction {fit['serial_fraction']:.3f} "
            f"(speedup limit {fit['max_speedup']:.1f}x; from {basis})."
        )
        if table["np"].nunique() >= 3:
            lin = linear_fit(table["np"], table[f"speedup_{m}"])
            lines.append(
                f"Linear fit on {names[m]}: {lin['slope']:.2f} speedup per added worker "
                "(1.00 is ideal)."
            )
    return lines
