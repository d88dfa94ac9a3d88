"""What the emulated cluster's recordings say: the inter-node jump, the ring alpha-beta model on a
link whose bandwidth is known, hierarchical allreduce, and rank placement.

Input frames come from :mod:`workshop.readers.cluster` (``read_allreduce_sweep``,
``read_placement_runs``). Spreads are over interleaved repeats: every repeat ran each
configuration once, in the same order, so a repeat's configurations saw the same background
load, and ratios are taken within a repeat before their min / median / max.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from workshop.analysis.benchmarks import paired_ratios
from workshop.frames import require_columns
from workshop.rules import ring_allreduce_time_s

#: TCP payload per byte on the wire that tbf meters, for a 1500-byte MTU: 1448 payload bytes
#: (1500 - 20 IP - 32 TCP with timestamps) in a 1514-byte Ethernet frame. A link capped at
#: R bit/s carries at most R / 8 * 1448 / 1514 payload bytes per second.
TCP_PAYLOAD_SHARE = 1448 / 1514
_SWEEP = ("config", "np", "repeat", "size_mib", "bytes", "time_s")


def allreduce_spread(sweep: pd.DataFrame) -> pd.DataFrame:
    """min / median / max allreduce time per configuration and message size.

    Returns:
        Columns ``config``, ``np``, ``size_mib``, ``bytes``, ``repeats``, ``min_s``,
        ``median_s``, ``max_s``, ``spread`` ((max - min) / median).
    """
    require_columns(sweep, _SWEEP, "allreduce_spread")
    grouped = sweep.groupby(["config", "np", "size_mib", "bytes"], sort=False)["time_s"]
    out = grouped.agg(repeats="count", min_s="min", median_s="median", max_s="max")
    out = out.reset_index()
    out["spread"] = (out["max_s"] - out["min_s"]) / out["median_s"]
    return out


def _per_repeat_ratio(sweep: pd.DataFrame, numerator: str, denominator: str) -> pd.DataFrame:
    """Per message size, ``numerator``'s time over ``denominator``'s in the same repeat: the one
    paired-ratio rule (:func:`workshop.analysis.benchmarks.paired_ratios`, a repeat as its
    round), with its verdict."""
    for config in (numerator, denominator):
        if config not in set(sweep["config"]):
            have = ", ".join(dict.fromkeys(sweep["config"]))
            raise ValueError(f"no configuration {config!r} (have: {have})")
    rows = {}
    both = sweep[sweep["config"].isin([numerator, denominator])].rename(
        columns={"repeat": "round"}
    )
    for size, runs in both.groupby("size_mib"):
        row = paired_ratios(runs, "config", "time_s", denominator).set_index("config")
        rows[size] = row.loc[numerator, ["ratio_min", "ratio_median", "ratio_max", "verdict"]]
    return (
        pd.DataFrame(rows)
        .T.rename_axis("size_mib")
        .astype({"ratio_min": float, "ratio_median": float, "ratio_max": float})
    )


def internode_jump(
    sweep: pd.DataFrame, *, intra: str = "intra", cross: str = "cross-1gbit"
) -> pd.DataFrame:
    """How much longer an allreduce takes when its two ranks sit on two nodes.

    Returns:
        One row per message size: ``size_mib``, ``intra_median_s``, ``cross_median_s``, and
        the per-repeat ratio cross / intra as ``ratio_min``, ``ratio_median``, ``ratio_max``.
    """
    require_columns(sweep, _SWEEP, "internode_jump")
    medians = sweep.groupby(["config", "size_mib"])["time_s"].median()
    out = _per_repeat_ratio(sweep, cross, intra).reset_index().drop(columns="verdict")
    out.insert(1, "intra_median_s", out["size_mib"].map(medians[intra]))
    out.insert(2, "cross_median_s", out["size_mib"].map(medians[cross]))
    return out


def fit_link_alpha(sweep: pd.DataFrame, config: str) -> dict:
    """The ring model on one cross-node configuration, with the bandwidth *known*.

    B is the link rate from tbf times :data:`TCP_PAYLOAD_SHARE` (what TCP can carry), so only
    the latency alpha is fitted, for ``t = 2 (N-1) alpha + 2 (N-1)/N m / B``
    (:func:`workshop.rules.ring_allreduce_time_s`), alpha >= 0: least squares of the
    *relative* errors of the median times over the sizes, ``sum(((model - t) / t)^2)``, so a
    1 MiB call counts as much as a 64 MiB one (plain least squares in seconds would fit the
    64 MiB calls and leave the small ones' error to chance). With weights ``w = 1 / t^2``
    that is ``alpha = sum(w (t - m' / B)) / (2 (N-1) sum(w))``, ``m' = 2 (N-1)/N m``.

    Returns:
        ``config``, ``np``, ``link_bits_per_s``, ``bandwidth_bytes_per_s`` (B used),
        ``alpha_s``, ``sizes`` (how many message sizes).

    Raises:
        ValueError: no such configuration, or it has no link rate (one node).
    """
    require_columns(sweep, (*_SWEEP, "link_bits_per_s"), "fit_link_alpha")
    rows = sweep[sweep["config"] == config]
    if rows.empty:
        raise ValueError(
            f"no configuration {config!r} (have: {', '.join(sweep['config'].unique())})"
        )
    bits = float(rows["link_bits_per_s"].iloc[0])
    if not math.isfinite(bits):
        raise ValueError(f"{config!r} ran inside one node: no link rate to model")
    n = int(rows["np"].iloc[0])
    bandwidth = bits / 8 * TCP_PAYLOAD_SHARE
    medians = rows.groupby("bytes")["time_s"].median()
    measured = medians.to_numpy(float)
    transfer = ring_allreduce_time_s(n, medians.index.to_numpy(float), 0.0, bandwidth)
    weights = 1.0 / measured**2
    offset = float(np.sum(weights * (measured - transfer)) / np.sum(weights))
    alpha = max(0.0, offset / (2 * (n - 1)))
    return {
        "config": config,
        "np": n,
        "link_bits_per_s": bits,
        "bandwidth_bytes_per_s": bandwidth,
        "alpha_s": alpha,
        "sizes": len(medians),
    }


def model_vs_measured(sweep: pd.DataFrame, config: str) -> pd.DataFrame:
    """Predicted (ring model, :func:`fit_link_alpha`) against measured time per message size.

    Returns:
        Columns ``size_mib``, ``predicted_s``, ``min_s``, ``median_s``, ``max_s`` (measured over
        the repeats), ``error`` ((predicted - median) / median), ``within_spread`` (the
        prediction lies between min and max).
    """
    fit = fit_link_alpha(sweep, config)
    spread = allreduce_spread(sweep[sweep["config"] == config])
    predicted = ring_allreduce_time_s(
        fit["np"], spread["bytes"].to_numpy(float), fit["alpha_s"], fit["bandwidth_bytes_per_s"]
    )
    out = spread[["size_mib", "min_s", "median_s", "max_s"]].copy()
    out.insert(1, "predicted_s", predicted)
    out["error"] = (out["predicted_s"] - out["median_s"]) / out["median_s"]
    slack = 1e-9 * out["median_s"]  # a prediction equal to min or max is inside
    out["within_spread"] = (out["predicted_s"] >= out["min_s"] - slack) & (
        out["predicted_s"] <= out["max_s"] + slack
    )
    return out.reset_index(drop=True)


def hierarchical_effect(
    sweep: pd.DataFrame, *, flat: str = "mpi-flat", hierarchical: str = "mpi-hier"
) -> pd.DataFrame:
    """HOROVOD_HIERARCHICAL_ALLREDUCE=1 against 0, same ranks and links.

    Returns:
        One row per size: ``size_mib``, ``flat_median_s``, ``hier_median_s``, the per-repeat
        ratio hierarchical / flat (``ratio_min``, ``ratio_median``, ``ratio_max``) and
        ``differs`` (True only when every repeat moved the same way: all ratios > 1 or all
        < 1; with a handful of repeats, anything else is noise).
    """
    require_columns(sweep, _SWEEP, "hierarchical_effect")
    medians = sweep.groupby(["config", "size_mib"])["time_s"].median()
    out = _per_repeat_ratio(sweep, hierarchical, flat).reset_index()
    out.insert(1, "flat_median_s", out["size_mib"].map(medians[flat]))
    out.insert(2, "hier_median_s", out["size_mib"].map(medians[hierarchical]))
    out["differs"] = out.pop("verdict") != "within the noise"
    return out


def placement_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Training throughput by rank placement (e.g. np=2 as 2+0 against 1+1).

    Args:
        runs: :func:`workshop.readers.cluster.read_placement_runs` (runs with status ok only
            count).

    Returns:
        One row per (np, placement): ``np``, ``placement``, ``nodes``, ``runs``, ``min``,
        ``median``, ``max`` (samples/s over the repeats), ``vs_one_node`` (median over the
        median of the same np on one node).
    """
    require_columns(runs, ("np", "placement", "nodes", "samples_per_s", "status"), "placement")
    ok = runs[runs["status"] == "ok"]
    out = (
        ok.groupby(["np", "placement", "nodes"])["samples_per_s"]
        .agg(runs="count", min="min", median="median", max="max")
        .reset_index()
    )
    one_node = out[out["nodes"] == 1].set_index("np")["median"]
    out["vs_one_node"] = out["median"] / out["np"].map(one_node)
    return out.sort_values(["np", "nodes"]).reset_index(drop=True)
