"""Read a sweep (a folder of run directories, as ``workshop sweep`` writes) into DataFrames.

A sweep directory holds one run directory per grid point plus ``sweep.json`` (the manifest:
grid, base configuration, points and their run directories). Any folder of run directories
works too (no manifest needed), and so does a single run directory.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from workshop.readers.runs import read_metrics, read_run, read_summary
from workshop.runspec import TABLE_COLUMNS, TABLE_DEFAULTS


def run_dirs(path: str | Path) -> list[Path]:
    """Run directories at ``path``: itself if it holds run.json, else its sub-folders that do.

    Raises:
        FileNotFoundError: if ``path`` does not exist or holds no run directory.
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such directory")
    if (path / "run.json").exists():
        return [path]
    found = sorted(p.parent for p in path.glob("*/run.json"))
    if not found:
        raise FileNotFoundError(f"{path}: no run directories (sub-folders with run.json) inside")
    return found


def read_manifest(path: str | Path) -> dict | None:
    """``sweep.json`` of a sweep directory, or None if there is none.

    Raises:
        ValueError: naming the file, line and column if it is not valid JSON.
    """
    manifest = Path(path) / "sweep.json"
    if not manifest.exists():
        return None
    try:
        return json.loads(manifest.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{manifest}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc


def _run_row(run_dir: Path, record: dict, metrics: pd.DataFrame) -> dict:
    config = record.get("config", {})
    summary = read_summary(run_dir) or record.get("result") or {}
    row: dict = {"run": run_dir.name, "path": str(run_dir), "status": record.get("status")}
    row |= {key: config.get(key, TABLE_DEFAULTS.get(key)) for key in TABLE_COLUMNS}
    workers_batch = (config.get("batch_size") or 0) * (config.get("np") or 0)
    row["global_batch_size"] = workers_batch * row["backward_passes_per_step"] or None
    data = record.get("data") or {}
    row["synthetic_data"] = data.get("synthetic")
    row["cores"] = (record.get("host") or {}).get("cores")
    recording = record.get("recording") or {}
    row["round"] = recording.get("round")
    row["setting"] = recording.get("setting")
    row["foreign_cores"] = recording.get("foreign_cores")
    row["duration_s"] = record.get("duration_s")
    row["init_time_s"] = summary.get("init_time_s")
    row["train_time_s"] = summary.get("train_time_s")
    row["total_time_s"] = summary.get("total_time_s")
    row["lr_effective"] = summary.get("lr_effective")
    row["epochs_done"] = len(metrics)
    nan = math.nan
    if len(metrics):
        m = metrics.sort_values("epoch")
        steady = m.iloc[1:] if len(m) > 1 else m
        row["first_epoch_s"] = float(m["train_time_s"].iloc[0])
        row["steady_epoch_time_s"] = float(steady["train_time_s"].median())
        row["samples_per_s"] = float(pd.to_numeric(steady["samples_per_s"]).median())
        row["steps"] = float(pd.to_numeric(m["steps"]).median())
        last = m.iloc[-1]
        for column in ("train_accuracy", "test_accuracy", "train_loss", "test_loss"):
            row[f"final_{column}"] = last[column]
        row["best_test_accuracy"] = float(pd.to_numeric(m["test_accuracy"]).max())
        if row["train_time_s"] is None:
            row["train_time_s"] = float(m["train_time_s"].sum())
    else:
        for column in ("first_epoch_s", "steady_epoch_time_s", "samples_per_s", "steps"):
            row[column] = nan
        for column in ("train_accuracy", "test_accuracy", "train_loss", "test_loss"):
            row[f"final_{column}"] = summary.get(f"final_{column}", nan)
        row["best_test_accuracy"] = nan
    return row


def read_sweep(path: str | Path, *, only_ok: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read every run of a sweep (or folder of runs, or one run) into runs and epochs tables.

    Args:
        path: sweep directory, folder of run directories, or one run directory.
        only_ok: keep only runs whose run.json says ``status: ok`` (failed and interrupted
            runs are left out of the analysis; their folders stay on disk).

    Returns:
        ``(runs, epochs)``.

        ``runs``: one row per run: ``run`` (folder name), ``path``, ``status``, the config
        (``framework``, ``dataset``, ``np``, ``controller``, ``epochs``, ``batch_size`` per
        worker, ``base_batch_size``, ``lr``, ``lr_scaling``, ``warmup_epochs``,
        ``steps_per_epoch``, ``fusion_threshold_mb``, ``cycle_time_ms``, ``cache_capacity``
        (None: Horovod's default), ``compression``, ``backward_passes_per_step``, ``autotune``,
        ``timeline``, ``mpi_profile``, ``seed``, ``data``, ``oversubscribe``; runs recorded
        before an option existed get its default), ``global_batch_size`` (batch x np x
        backward passes per step),
        ``synthetic_data``, ``cores`` (of the machine), ``round`` (a sweep's round, None
        outside rounds), ``setting`` (a recorded sweep point's name without round and
        index: ``baseline``, ``fp16``, ``np2``; None when not recorded), ``foreign_cores``
        (other work during a recorded run, None when the run was not recorded through
        :mod:`workshop.launch.quiet`), ``duration_s`` (launch wall time),
        ``init_time_s``, ``train_time_s``, ``total_time_s`` (summary.json), ``lr_effective``,
        ``epochs_done``, ``first_epoch_s``, ``steady_epoch_time_s``
        (median training time of epochs >= 2), ``samples_per_s`` (median of epochs >= 2, all
        workers), ``steps`` (optimizer steps per epoch per worker), ``final_train_accuracy``,
        ``final_test_accuracy``, ``final_train_loss``, ``final_test_loss`` (last epoch),
        ``best_test_accuracy`` (over epochs). For the materials workload the accuracies are its
        R^2 score and ``train_accuracy`` is empty.

        ``epochs``: one row per epoch of every run: the metrics.jsonl columns (``epoch``,
        ``train_time_s``, ``test_time_s``, ``epoch_time_s``, ``samples_per_s``, ``steps``,
        ``samples``, ``train_loss``, ``train_accuracy``, ``test_loss``, ``test_accuracy``,
        ``lr``, ``elapsed_s``) plus ``run``, ``np``, ``batch_size``, ``global_batch_size``,
        ``lr_scaling``, ``warmup_epochs``, ``dataset``, ``framework``.

    Raises:
        FileNotFoundError: if there is no run directory at ``path``.
        ValueError: if a run's files are malformed (the message names the file), or no run
            is left after filtering.
    """
    rows, epoch_frames = [], []
    for run_dir in run_dirs(path):
        record = read_run(run_dir)
        if only_ok and record.get("status") != "ok":
            continue
        metrics = read_metrics(run_dir)
        row = _run_row(run_dir, record, metrics)
        rows.append(row)
        if len(metrics):
            frame = metrics.copy()
            for key in ("run", "np", "batch_size", "global_batch_size", "lr_scaling"):
                frame[key] = row[key]
            frame["warmup_epochs"] = row["warmup_epochs"] or 0.0
            frame["dataset"] = row["dataset"]
            frame["framework"] = row["framework"]
            epoch_frames.append(frame)
    if not rows:
        raise ValueError(f"{path}: no finished run (status ok) to read")
    runs = pd.DataFrame(rows)
    runs["warmup_epochs"] = runs["warmup_epochs"].fillna(0.0).astype(float)
    epochs = pd.concat(epoch_frames, ignore_index=True) if epoch_frames else pd.DataFrame()
    for column in ("epoch", "train_time_s", "test_time_s", "samples_per_s", "test_accuracy"):
        if column in epochs:
            epochs[column] = pd.to_numeric(epochs[column])
    return runs, epochs


def read_compute_baseline(path: str | Path) -> pd.DataFrame:
    """The raw compute measured beside a sweep (``compute-baseline.jsonl``, written by
    ``workshop sweep --compute-baseline``): one row per round and process count.

    Returns:
        Columns ``round``, ``procs``, ``dataset``, ``batch_size``, ``window_s``,
        ``total_samples_per_s`` (all processes together), ``per_process_samples_per_s`` (a
        list), ``gradient_bytes`` (float32 gradients of the network: what a step
        allreduces), ``foreign_cores`` (other work meanwhile; None if not recorded). Empty (with
        these columns) when the sweep has no such file.

    Raises:
        ValueError: naming the file and line of a malformed entry.
    """
    columns = ["round", "procs", "dataset", "batch_size", "window_s", "total_samples_per_s",
               "per_process_samples_per_s", "gradient_bytes", "foreign_cores"]  # fmt: skip
    file = Path(path) / "compute-baseline.jsonl"
    if not file.exists():
        return pd.DataFrame(columns=columns)
    rows = []
    for number, line in enumerate(file.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            rows.append({
                "round": int(entry["round"]), "procs": int(entry["procs"]),
                "dataset": entry["dataset"], "batch_size": int(entry["batch_size"]),
                "window_s": float(entry["window_s"]),
                "total_samples_per_s": float(entry["total_samples_per_s"]),
                "per_process_samples_per_s": list(entry["samples_per_s"]),
                "gradient_bytes": entry.get("gradient_bytes"),
                "foreign_cores": (entry.get("recording") or {}).get("foreign_cores"),
            })  # fmt: skip
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            message = f"{file}, line {number}: not a compute-baseline entry ({exc})"
            raise ValueError(message) from exc
    return pd.DataFrame(rows, columns=columns)
