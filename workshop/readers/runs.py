"""Read run directories written by ``workshop run`` (layout: docs/run-directory.md)."""

from __future__ import annotations

import difflib
import json
import math
import os
import socket
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd

from workshop.rules import STEP_FILE_COLUMNS, STEP_FILE_REQUIRED

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


STEP_TIME_COLUMNS = ["rank", *STEP_FILE_COLUMNS]


def read_step_times(run_dir: Path | str) -> pd.DataFrame:
    """Every rank's own time per training step (``logs/rank.N.steps.csv``, written by the
    training programs since issue 31; see ``workshop.train.common.StepTimes``).

    Columns: ``rank``, ``step`` (0-based over the run), ``data_s`` (taking the batch),
    ``compute_s`` (forward, backward and update, without waiting for Horovod), ``wait_s``
    (waiting for the gradients' allreduces), ``step_s`` (the whole step), ``cpu_wait_s`` (the
    training thread waiting for a CPU: NaN in files written before it was recorded, or where
    the system does not tell), all in seconds (:data:`workshop.rules.STEP_FILE_COLUMNS`). A
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
        missing = [c for c in STEP_FILE_REQUIRED if c not in header]
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
                # cpu_wait_s may be empty (the system did not tell): NaN, not an error
                rows.append([math.nan if not x and c == "cpu_wait_s" else float(x)
                             for x, c in zip(fields, header, strict=True)])  # fmt: skip
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a number ({exc})") from exc
        frame = pd.DataFrame(rows, columns=header).reindex(columns=list(STEP_FILE_COLUMNS))
        frame.insert(0, "rank", int(rank))
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=STEP_TIME_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    out[["rank", "step"]] = out[["rank", "step"]].astype(int)
    return out


class Run:
    """One run directory, each of its files read on first use, once: the one door a lesson
    opens a run through (``import workshop as wk; run = wk.open_run(...)``). Analyses, plots
    and findings that take a run's frame also take the Run itself
    (:func:`workshop.frames.takes_run`).

    Attributes (read on first use):
        path: the run directory; ``name``: its folder name.
        record: run.json (:func:`read_run`); ``{}`` for a folder without one (a cluster job's
            timeline and logs).
        config: ``record["config"]`` (``{}`` when absent); ``np``: its number of ranks, else
            the number of rank logs.
        metrics: :func:`read_metrics` (empty, with its columns, when there is no
            metrics.jsonl); ``steps``: :func:`read_step_times` (empty for runs without step
            files).
        timeline: the run's ``timeline.json`` read (:func:`workshop.readers.timeline.
            read_timeline`), or None; ``profile``: its mpitrace profile (``mpi_profile.*``
            files, :func:`workshop.readers.mpitrace.read_mpitrace`), or None.
        summary: rank 0's summary.json, or None.
        logs: each rank's log text ``{rank: text}``; ``launcher_log``: the launcher's output.
        ends: how each rank ended (:func:`workshop.readers.exits.rank_ends_in`).

    Raises (on first use of the attribute that reads it): FileNotFoundError, ValueError,
    naming the file and what is wrong.
    """

    is_workshop_run = True  # what workshop.frames.takes_run looks for (no import needed)

    def __init__(self, path: Path | str, **known: Any) -> None:
        """``known``: parts the caller has read already (``timeline=tl``), kept instead of
        being read again."""
        path = Path(path)
        if not path.is_dir():
            raise FileNotFoundError(f"{path}: not a run directory (no such folder)")
        self.path = path
        self.__dict__.update(known)  # where cached_property keeps what it read

    def __repr__(self) -> str:
        record = self.record
        status = record.get("status", "no run.json")
        found = [name for name in ("timeline", "profile") if self._has(name)]
        return (
            f"Run({self.name!r}: {status}, np={self.np}, "
            f"{self.config.get('framework', '?')}, {', '.join(found) or 'no timeline'})"
        )

    def _has(self, what: str) -> bool:
        if what == "timeline":
            return (self.path / "timeline.json").is_file()
        return any(self.path.glob("mpi_profile.*"))

    @property
    def name(self) -> str:
        return self.path.name

    @cached_property
    def record(self) -> dict:
        return read_run(self.path) if (self.path / "run.json").exists() else {}

    @property
    def config(self) -> dict:
        return self.record.get("config") or {}

    @cached_property
    def np(self) -> int:
        return int(self.config.get("np") or len(list(self.path.glob("logs/rank.*.log"))))

    @cached_property
    def metrics(self) -> pd.DataFrame:
        if not (self.path / "metrics.jsonl").exists():
            return pd.DataFrame(columns=METRIC_COLUMNS)
        return read_metrics(self.path)

    @cached_property
    def steps(self) -> pd.DataFrame:
        return read_step_times(self.path)

    @cached_property
    def timeline(self) -> Any:
        from workshop.readers.timeline import read_timeline

        path = self.path / "timeline.json"
        return read_timeline(path) if path.is_file() else None

    @cached_property
    def profile(self) -> Any:
        from workshop.readers.mpitrace import read_mpitrace

        return read_mpitrace(self.path) if self._has("profile") else None

    @cached_property
    def summary(self) -> dict | None:
        return read_summary(self.path)

    @cached_property
    def logs(self) -> dict[int, str]:
        found = {}
        for path in self.path.glob("logs/rank.*.log"):
            rank = path.name.split(".")[1]
            if rank.isdigit():
                found[int(rank)] = path.read_text(errors="replace")
        return dict(sorted(found.items()))

    @cached_property
    def launcher_log(self) -> str:
        path = self.path / "logs" / "launcher.log"
        return path.read_text(errors="replace") if path.exists() else ""

    @cached_property
    def ends(self) -> dict[int, dict]:
        from workshop.readers.exits import rank_ends_in

        return rank_ends_in(self.path, self.np)


#: Where a recording's name is looked for under ``data/``, in this order.
RECORDING_FOLDERS = (
    "runs", "scripts", "timelines", "mpi", "sweeps", "capstone", "cluster", "benchmarks"
)  # fmt: skip


def _is_run_dir(path: Path) -> bool:
    return (
        path.is_dir()
        and any((path / name).exists() for name in ("run.json", "timeline.json", "logs"))
        or any(path.glob("mpi_profile.*"))
    )


def open_run(run: Run | Path | str) -> Run:
    """The Run of a run directory, or of a recording in ``data/`` by its name.

    Args:
        run: a run directory (any path to one), a recording's name
            (``"torch-mnist-gloo-np2"``, looked for in ``data/``'s :data:`RECORDING_FOLDERS`),
            a path under ``data/`` (``"sweeps/scaling-mnist/np2"``), or a Run (returned as
            it is).

    Raises:
        FileNotFoundError: neither a folder nor a recording of that name (names the closest
            recordings).
        ValueError: the name is a recording in more than one folder (names them).

    >>> open_run("torch-mnist-gloo-np2").config["np"]
    2
    """
    from workshop.paths import data_dir

    if isinstance(run, Run):
        return run
    path = Path(run).expanduser()
    root = data_dir()
    # a bare name of a folder here and in data/ ("runs": workshop run's folder, data/runs/)
    # means data's, unless the one here is a run directory; "./runs" means the one here
    explicit = path.is_absolute() or str(run).startswith((".", "~"))
    if path.is_dir() and (explicit or _is_run_dir(path) or not (root / path).is_dir()):
        return Run(path)
    if (root / path).is_dir():
        return Run(root / path)
    found = [root / top / path for top in RECORDING_FOLDERS if _is_run_dir(root / top / path)]
    if len(found) == 1:
        return Run(found[0])
    if found:
        names = ", ".join(str(p.relative_to(root)) for p in found)
        raise ValueError(f"{run!r} names several recordings in {root}: {names}; pass one")
    known = sorted(
        p.name for top in RECORDING_FOLDERS for p in (root / top).glob("*") if _is_run_dir(p)
    )
    close = difflib.get_close_matches(str(run), known, n=3)
    hint = f" (closest: {', '.join(close)})" if close else ""
    raise FileNotFoundError(
        f"{run!r}: no such run directory, and no recording of that name in {root}{hint}"
    )


def read_run_files(run_dir: Path | str) -> Run:
    """The Run of a run directory, with run.json, metrics, step times and the timeline read
    now (so a damaged file is named here): what ``workshop diagnose`` reads.

    Raises:
        FileNotFoundError, ValueError: as :func:`read_run`, :func:`read_metrics`,
            :func:`read_step_times` and :func:`workshop.readers.timeline.read_timeline`.
    """
    run = open_run(run_dir) if isinstance(run_dir, Run) else Run(run_dir)
    for name in ("record", "metrics", "steps", "timeline"):
        getattr(run, name)
    return run


#: The noise of ``workshop diagnose``'s estimators, under ``data/``
#: (written by tools/diagnose_calibration.py).
CALIBRATION = ("diagnose", "calibration.json")


def read_calibration(path: Path | str | None = None) -> tuple[pd.DataFrame, dict]:
    """The calibration of ``workshop diagnose``: each estimator's savings on the healthy
    recorded runs, as shares of their step (``data/diagnose/calibration.json``).

    Returns:
        ``(noise, record)``: one row per estimator (``problem``, ``estimator``, ``runs``,
        ``min``, ``median``, ``max``), and the whole file (its runs and those left out).

    Raises:
        FileNotFoundError: the file is missing (names it).
        ValueError: not JSON, or without its ``noise`` table.
    """
    from workshop.paths import data_path

    path = Path(path) if path else data_path(*CALIBRATION)
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    rows = record.get("noise")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path}: no 'noise' list")
    table = pd.DataFrame(rows)
    missing = [c for c in ("problem", "estimator", "min", "median", "max") if c not in table]
    if missing:
        raise ValueError(f"{path}: 'noise' lacks {', '.join(missing)}")
    table["estimator"] = table["estimator"].fillna("")
    return table.astype({"min": float, "median": float, "max": float}), record


def read_summary(run_dir: Path | str) -> dict | None:
    """summary.json (rank 0's end-of-run numbers), or None if the run did not finish."""
    path = _run_file(run_dir, "summary.json")
    return json.loads(path.read_text()) if path.exists() else None
