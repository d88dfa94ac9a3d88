"""Readers for the emulated-cluster recordings (data/cluster/, made by
``benchmarks/cluster_allreduce.py`` and ``workshop cluster run -- workshop run``)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pandas as pd

from workshop.readers.runs import read_metrics, read_run

ALLREDUCE_COLUMNS = [
    "config", "controller", "np", "hosts", "nodes", "link", "link_bits_per_s", "hierarchical",
    "repeat", "size_mib", "bytes", "time_s", "calls",
]  # fmt: skip
RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def _bits_per_s(link: str | None) -> float:
    if not link:
        return float("nan")
    for unit, factor in RATE_UNITS.items():
        if link.endswith(unit):
            return float(link[: -len(unit)]) * factor
    raise ValueError(f"link rate {link!r}: expected e.g. 1gbit")


def read_allreduce_sweep(path: str | Path) -> pd.DataFrame:
    """result.json of ``benchmarks/cluster_allreduce.py``: one row per job and message size.

    Args:
        path: the result.json, or the folder holding it.

    Returns:
        Columns ``config`` (e.g. ``intra``, ``cross-1gbit``), ``controller``, ``np``,
        ``hosts`` (horovodrun's ``-H``), ``nodes`` (how many hosts), ``link`` (tc rate, None
        inside one node), ``link_bits_per_s``, ``hierarchical`` (HOROVOD_HIERARCHICAL_ALLREDUCE
        set to 1), ``repeat`` (0-based; the configurations ran interleaved in every repeat),
        ``size_mib``, ``bytes``, ``time_s`` (median of the job's timed calls of that size, on
        rank 0), ``calls`` (timed calls).

    Raises:
        FileNotFoundError: no result.json there.
        ValueError: the file is not such a result (names the file and what is missing).
    """
    path = Path(path)
    if path.is_dir():
        path = path / "result.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no allreduce result (benchmarks/cluster_allreduce.py)")
    try:
        result = json.loads(path.read_text())
        configs = result["settings"]["configs"]
        jobs = result["jobs"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a cluster_allreduce result.json ({exc!r})") from exc
    rows = []
    for job in jobs:
        config = configs[job["config"]]
        link = config["link"] if "," in config["hosts"] else None
        for size, calls in job["times_s"].items():
            rows.append(
                {
                    "config": job["config"],
                    "controller": config["controller"],
                    "np": config["np"],
                    "hosts": config["hosts"],
                    "nodes": config["hosts"].count(",") + 1,
                    "link": link,
                    "link_bits_per_s": _bits_per_s(link),
                    "hierarchical": config["env"].get("HOROVOD_HIERARCHICAL_ALLREDUCE") == "1",
                    "repeat": job["repeat"],
                    "size_mib": int(size),
                    "bytes": int(size) * 2**20,
                    "time_s": statistics.median(calls),
                    "calls": len(calls),
                }
            )
    return pd.DataFrame(rows, columns=ALLREDUCE_COLUMNS)


PLACEMENT_COLUMNS = [
    "run", "np", "nodes", "placement", "link", "repeat", "samples_per_s", "status", "path",
]  # fmt: skip


def read_placement_runs(folder: str | Path, *, from_epoch: int = 2) -> pd.DataFrame:
    """The training runs of a placement comparison (``data/cluster/mnist-placement``): one
    row per run directory in ``folder``.

    Args:
        folder: a folder of run directories, each with run.json and metrics.jsonl.
        from_epoch: samples/s is the mean over epochs >= this one (epoch 1 pays start-up).

    Returns:
        Columns ``run`` (folder name), ``np``, ``nodes`` (hosts used), ``placement`` (ranks
        per node, e.g. ``1+1``; ``2+0`` for 2 ranks on one node of a 2-node cluster),
        ``link`` (tc rate), ``repeat`` (run.json's ``env`` WORKSHOP_REPEAT, else -1),
        ``samples_per_s``, ``status``, ``path``.

    Raises:
        FileNotFoundError: no run directories in ``folder``.
    """
    rows = []
    for run_dir in sorted(p for p in Path(folder).iterdir() if (p / "run.json").is_file()):
        run = read_run(run_dir)
        cluster = run.get("cluster") or {}
        per_node = list((cluster.get("ranks_per_node") or {}).values())
        nodes = cluster.get("nodes") or []
        counts = per_node + [0] * (len(nodes) - len(per_node))
        metrics = read_metrics(run_dir)
        steady = metrics[metrics["epoch"] >= from_epoch] if len(metrics) else metrics
        rows.append(
            {
                "run": run_dir.name,
                "np": run["config"]["np"],
                "nodes": len(per_node),
                "placement": "+".join(map(str, counts)) if counts else str(run["config"]["np"]),
                "link": cluster.get("link"),
                "repeat": int(run.get("env", {}).get("WORKSHOP_REPEAT", -1)),
                "samples_per_s": float(steady["samples_per_s"].mean()) if len(steady) else None,
                "status": run["status"],
                "path": str(run_dir),
            }
        )
    if not rows:
        raise FileNotFoundError(f"{folder}: no run directories (folders with run.json)")
    return pd.DataFrame(rows, columns=PLACEMENT_COLUMNS)
