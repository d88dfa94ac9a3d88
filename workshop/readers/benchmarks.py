"""Read the recorded results of the benchmarks in ``benchmarks/`` (``result.json`` files)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

RESULT_FILE = "result.json"


def _result_path(path: Path | str) -> Path:
    path = Path(path)
    return path / RESULT_FILE if path.is_dir() else path


def read_benchmark(path: Path | str) -> dict:
    """A benchmark's ``result.json`` (a folder holding one, or the file) as a dict.

    Raises:
        FileNotFoundError: naming the path, if there is no such file.
        ValueError: naming the file, if it is not a JSON object.
    """
    file = _result_path(path)
    if not file.is_file():
        raise FileNotFoundError(f"{file}: no benchmark result (run the benchmark with --out)")
    try:
        result = json.loads(file.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{file}: not valid JSON ({error})") from None
    if not isinstance(result, dict):
        raise ValueError(f"{file}: a benchmark result is a JSON object, found {type(result)}")
    return result


def read_benchmark_runs(path: Path | str, columns: tuple[str, ...] = ("round",)) -> pd.DataFrame:
    """The runs a benchmark recorded, one row each (its ``runs`` list).

    Args:
        path: the benchmark's folder or its ``result.json``, e.g.
            ``data/benchmarks/cycle-time`` (``benchmarks/cycle_time.py``: ``round``,
            ``position``, ``cycle_time_ms``, ``run``, ``step_time_ms``, ``samples_per_s``,
            ``wall_s``, ``loadavg_1min``, ...) or ``data/benchmarks/horovod-overhead``
            (``benchmarks/horovod_overhead.py``: ``round``, ``kind``, ``samples_per_s``).
        columns: columns every run must have.

    Returns:
        One row per run, in the order they ran.

    Raises:
        FileNotFoundError, ValueError: naming the file, when it is missing, has no ``runs``
            list, or a run lacks one of ``columns``.
    """
    file = _result_path(path)
    runs = read_benchmark(file).get("runs")
    if not isinstance(runs, list) or not runs:
        raise ValueError(f"{file}: no 'runs' list (recorded by an older version of the script?)")
    for index, run in enumerate(runs):
        missing = [c for c in columns if not isinstance(run, dict) or c not in run]
        if missing:
            raise ValueError(f"{file}: runs[{index}] has no {missing}")
    return pd.DataFrame(runs)
