"""Read run directories written by ``workshop run`` (layout: docs/run-directory.md)."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

METRIC_COLUMNS = [
    "epoch",
    "train_time_s",
    "test_time_s",
    "epoch_time_s",
    "samples_per_s",
    "steps",
    "samples",
    "train_loss",
    "train_accuracy",
    "test_loss",
    "test_accuracy",
    "lr",
    "elapsed_s",
]


def _run_file(run_dir: Path | str, name: str) -> Path:
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir}: not a run directory (no such folder)")
    return run_dir / name


def read_run(run_dir: Path | str) -> dict:
    """run.json of a run directory as a dict (keys: docs/run-directory.md).

    A run whose file says ``running`` but whose launcher is gone (killed, power cut) reads as
    ``status: stale``, with ``stale_reason`` saying why (see :func:`stale_reason`).

    Raises:
        FileNotFoundError: no run.json in the folder.
        ValueError: run.json is not valid JSON (names the file, line and column).
    """
    path = _run_file(run_dir, "run.json")
    if not path.exists():
        raise FileNotFoundError(f"{path}: missing; is {path.parent} a workshop run directory?")
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from exc
    reason = stale_reason(record)
    if reason:
        record |= {"status": "stale", "stale_reason": reason}
    return record


def launcher_identity() -> dict:
    """Who is running a run, recorded in run.json's ``launcher`` when it starts, so that a
    reader can tell a live run from one whose launcher died (see :func:`stale_reason`).

    Returns:
        ``pid``, ``host`` (hostname), ``boot_id`` (Linux's, None elsewhere) and
        ``process_started_s`` (the process's start, seconds since the epoch, which tells a
        reused pid from the original).
    """
    import psutil

    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "boot_id": _boot_id(),
        "process_started_s": round(psutil.Process().create_time(), 3),
    }


def _boot_id() -> str | None:
    path = Path("/proc/sys/kernel/random/boot_id")
    return path.read_text().strip() if path.exists() else None


def stale_reason(record: dict) -> str | None:
    """Why a run that says ``running`` cannot be running any more, or None.

    A run is stale when run.json says ``running`` but its launcher, recorded in
    ``launcher``, is gone: this host rebooted since, or no process with that pid and start time
    exists. A run launched on another host, or recorded before ``launcher`` existed, cannot be
    checked from here and is not called stale.

    Args:
        record: run.json as a dict.

    Returns:
        A sentence naming the launcher's pid and host, or None.
    """
    import psutil

    launcher = record.get("launcher")
    if record.get("status") != "running" or not isinstance(launcher, dict):
        return None
    pid, host = launcher.get("pid"), launcher.get("host")
    if host != socket.gethostname() or not isinstance(pid, int):
        return None
    who = f"its launcher (pid {pid} on {host})"
    boot_id = _boot_id()
    if launcher.get("boot_id") and boot_id and launcher["boot_id"] != boot_id:
        return f"{who} ran before this host last booted; the run never recorded its end"
    try:
        process = psutil.Process(pid)
        started = process.create_time()
        if process.status() == psutil.STATUS_ZOMBIE:
            raise psutil.NoSuchProcess(pid)
    except psutil.NoSuchProcess:
        return f"{who} is no longer running; the run never recorded its end (killed?)"
    recorded = launcher.get("process_started_s")
    if recorded is not None and abs(started - recorded) > 1.0:
        return (
            f"{who} is no longer running (pid {pid} is now another process); the run "
            "never recorded its end (killed?)"
        )
    return None


RUN_LIST_COLUMNS = [
    "run",
    "status",
    "started_at",
    "framework",
    "dataset",
    "controller",
    "np",
    "path",
    "stale_reason",
]


def list_runs(root: Path | str | None = None) -> pd.DataFrame:
    """The run directories under ``root`` (default: where ``workshop run`` writes), newest first.

    Run directories directly inside ``root`` and one level further down (a sweep's runs) are
    listed; a run whose launcher died without recording its end shows ``stale``.

    Args:
        root: folder to search (default :func:`workshop.paths.runs_dir`).

    Returns:
        One row per run: ``run`` (folder, relative to ``root``), ``status`` (running, ok,
        failed, interrupted or stale), ``started_at`` (ISO-8601 UTC), ``framework``,
        ``dataset``, ``controller``, ``np``, ``path``, ``stale_reason`` (None unless stale).
        A folder whose run.json cannot be read is listed with status ``unreadable: <why>``.
    """
    from workshop.paths import runs_dir

    root = Path(root) if root else runs_dir()
    rows = []
    found = sorted({*root.glob("*/run.json"), *root.glob("*/*/run.json")}) if root.is_dir() else []
    for path in found:
        run_dir = path.parent
        try:
            record = read_run(run_dir)
        except ValueError as exc:
            record = {"status": f"unreadable: {exc}"}
        config = record.get("config") or {}
        rows.append(
            {
                "run": str(run_dir.relative_to(root)),
                "status": record.get("status"),
                "started_at": record.get("started_at"),
                **{key: config.get(key) for key in ("framework", "dataset", "controller", "np")},
                "path": str(run_dir),
                "stale_reason": record.get("stale_reason"),
            }
        )
    runs = pd.DataFrame(rows, columns=RUN_LIST_COLUMNS)
    return runs.sort_values("started_at", ascending=False, na_position="last").reset_index(
        drop=True
    )


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
    return (
        pd.DataFrame(rows, columns=METRIC_COLUMNS)
        if rows
        else pd.DataFrame(columns=METRIC_COLUMNS)
    )


STEP_TIME_COLUMNS = ["rank", "step", "data_s", "compute_s", "wait_s", "step_s"]


def read_step_times(run_dir: Path | str) -> pd.DataFrame:
    """Every rank's own time per training step (``logs/rank.N.steps.csv``, written by the
    training programs since issue 31; see ``workshop.train.common.StepTimes``).

    Columns: ``rank``, ``step`` (0-based over the run), ``data_s`` (taking the batch),
    ``compute_s`` (forward, backward and update, without waiting for Horovod), ``wait_s``
    (waiting for the gradients' allreduces), ``step_s`` (the whole step), all in seconds. A
    run recorded before these files existed gives an empty frame.

    Raises:
        ValueError: a file lacks a column or holds a value that is not a number (names the
            file and the line).
    """
    logs = _run_file(run_dir, "logs")
    frames = []
    for path in sorted(logs.glob("rank.*.steps.csv")):
        rank = path.name.split(".")[1]
        if not rank.isdigit():
            continue
        lines = path.read_text().splitlines()
        header = lines[0].split(",") if lines else []
        missing = [c for c in STEP_TIME_COLUMNS[1:] if c not in header]
        if missing:
            raise ValueError(f"{path}:1: missing column(s) {', '.join(missing)}")
        rows = []
        for number, line in enumerate(lines[1:], start=2):
            fields = line.split(",")
            if len(fields) != len(header):  # a rank killed mid-write leaves a cut last line
                if number == len(lines):
                    break
                raise ValueError(f"{path}:{number}: {len(fields)} fields, not {len(header)}")
            try:
                rows.append([float(x) for x in fields])
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a number ({exc})") from exc
        frame = pd.DataFrame(rows, columns=header)[STEP_TIME_COLUMNS[1:]]
        frame.insert(0, "rank", int(rank))
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=STEP_TIME_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    out[["rank", "step"]] = out[["rank", "step"]].astype(int)
    return out


@dataclass(frozen=True)
class RunFiles:
    """What ``workshop diagnose`` reads from one run directory.

    Attributes:
        path: the run directory.
        record: run.json (:func:`read_run`).
        metrics: :func:`read_metrics`.
        steps: :func:`read_step_times` (empty for runs recorded before the step files).
        timeline: the run's ``timeline.json`` read, or None when the run has none.
    """

    path: Path
    record: dict
    metrics: pd.DataFrame
    steps: pd.DataFrame
    timeline: Any


def read_run_files(run_dir: Path | str) -> RunFiles:
    """run.json, metrics, step times and the timeline (when there is one) of a run directory.

    Raises:
        FileNotFoundError, ValueError: as :func:`read_run`, :func:`read_metrics`,
            :func:`read_step_times` and :func:`workshop.readers.timeline.read_timeline`.
    """
    from workshop.readers.timeline import read_timeline

    run_dir = Path(run_dir)
    record = read_run(run_dir)
    timeline = None
    if (run_dir / "timeline.json").is_file():
        timeline = read_timeline(run_dir / "timeline.json")
    return RunFiles(run_dir, record, read_metrics(run_dir), read_step_times(run_dir), timeline)


#: The healthy reference that ``workshop diagnose`` compares a run with, under ``data/``.
HEALTHY_REFERENCE = ("diagnose", "healthy-reference.json")


def read_healthy_reference(path: Path | str | None = None) -> tuple[pd.DataFrame, dict]:
    """The healthy reference of ``workshop diagnose``: each evidence number's spread over
    recorded healthy runs of this workshop's machine (``data/diagnose/healthy-reference.json``,
    written by ``benchmarks/straggler_signal.py`` from its healthy runs).

    Returns:
        ``(table, record)``: one row per measure (``measure``, ``min``, ``median``, ``max``,
        ``runs``), and the whole file (provenance, the runs and their numbers).

    Raises:
        FileNotFoundError: the file is missing (names it).
        ValueError: not JSON, or without its ``measures`` table.
    """
    from workshop.paths import data_path

    path = Path(path) if path else data_path(*HEALTHY_REFERENCE)
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    rows = record.get("measures")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path}: no 'measures' list")
    table = pd.DataFrame(rows)
    missing = [c for c in ("measure", "min", "median", "max", "runs") if c not in table]
    if missing:
        raise ValueError(f"{path}: 'measures' lacks {', '.join(missing)}")
    return table.astype({"min": float, "median": float, "max": float}), record


def read_summary(run_dir: Path | str) -> dict | None:
    """summary.json (rank 0's end-of-run numbers), or None if the run did not finish."""
    path = _run_file(run_dir, "summary.json")
    return json.loads(path.read_text()) if path.exists() else None
