"""Read run directories written by ``workshop run`` (layout: docs/run-directory.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

METRIC_COLUMNS = [
    "epoch", "train_time_s", "test_time_s", "epoch_time_s", "samples_per_s", "steps", "samples",
    "train_loss", "train_accuracy", "test_loss", "test_accuracy", "lr", "elapsed_s",
]  # fmt: skip


def _run_file(run_dir: Path | str, name: str) -> Path:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: not a run directory (no such folder)")
    return run_dir / name


def read_run(run_dir: Path | str) -> dict:
    """run.json of a run directory as a dict (keys: docs/run-directory.md).

    Raises:
        FileNotFoundError: no run.json in the folder.
        ValueError: run.json is not valid JSON (names the file, line and column).
    """
    path = _run_file(run_dir, "run.json")
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing; is {path.parent} a workshop run directory?")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: "
                         f"{exc.msg}") from exc


def read_metrics(run_dir: Path | str) -> pd.DataFrame:
    """metrics.jsonl as a DataFrame, one row per epoch.

    Columns: epoch, train_time_s, test_time_s, epoch_time_s, samples_per_s, steps, samples,
    train_loss, train_accuracy, test_loss, test_accuracy, lr, elapsed_s (units in the names;
    accuracies are fractions; for the materials workload ``test_accuracy`` is its score).
    An absent file (a run that ended before its first epoch) gives an empty frame.

    Raises:
        ValueError: a line is not JSON or lacks a column (names file and line).
    """
    path = _run_file(run_dir, "metrics.jsonl")
    rows = []
    if path.exists():
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from exc
            missing = [c for c in ("epoch", "train_time_s", "test_time_s") if c not in row]
            if missing:
                raise ValueError(f"{path}:{number}: missing {', '.join(missing)}")
            rows.append(row)
    return pd.DataFrame(rows, columns=METRIC_COLUMNS) if rows else pd.DataFrame(
        columns=METRIC_COLUMNS)


def read_summary(run_dir: Path | str) -> dict | None:
    """summary.json (rank 0's end-of-run numbers), or None if the run did not finish."""
    path = _run_file(run_dir, "summary.json")
    return json.loads(path.read_text()) if path.exists() else None
