"""Horovod against PyTorch DDP: the benchmark's result (recorded, or measured live) as a table.

What lesson 02 teaches with them: see :mod:`workshop.lessons`.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from workshop.lessons.l02_first_program.scripts import LaunchError, _environment

__all__ = ["BENCHMARK", "benchmark", "benchmark_table"]


BENCHMARK = ("benchmarks", "horovod-vs-ddp", "result.json")


def benchmark(live: bool, repeats: int = 5) -> dict:
    """The Horovod-vs-DDP benchmark (``benchmarks/horovod_vs_ddp.py``): run for real when
    ``live`` (about 2 minutes for 5 repeats), else its recorded ``result.json``."""
    import json
    import tempfile

    from workshop.paths import REPO_DIR, data_path

    if not live:
        found = json.loads(data_path(*BENCHMARK).read_text())
        print(
            f"replaying the benchmark recorded {found['started_at']} "
            f"({found['settings']['repeats']} repeats, {found['host']['cores']} cores)"
        )
        return found
    script = REPO_DIR / "benchmarks" / "horovod_vs_ddp.py"
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [sys.executable, str(script), "--repeats", str(repeats), "--out", out],
            env=_environment(),
            capture_output=True,
            text=True,
            check=False,
        )
        print(done.stdout)
        if done.returncode:
            raise LaunchError(f"{script} exited with {done.returncode}:\n{done.stderr[-3000:]}")
        return json.loads((Path(out) / "result.json").read_text())


def benchmark_table(result: dict) -> pd.DataFrame:
    """Min / median / max samples/s and median wall time of each side of a benchmark result.

    Returns:
        DataFrame indexed by ``horovod`` / ``ddp``: ``min_samples_per_s``,
        ``median_samples_per_s``, ``max_samples_per_s``, ``median_wall_s``, ``repeats``.
    """
    rows = {}
    for kind in ("horovod", "ddp"):
        speed, wall = result["samples_per_s"][kind], result["wall_s"][kind]
        rows[kind] = {
            "min_samples_per_s": speed["min"],
            "median_samples_per_s": speed["median"],
            "max_samples_per_s": speed["max"],
            "median_wall_s": wall["median"],
            "repeats": len(speed["values"]),
        }
    return pd.DataFrame.from_dict(rows, orient="index").round(1)
