"""Finding profile files, grouping them by job, and combining one job's files into an
:class:`MpiProfile` (the readers' entry points).

The file format and what the reader keeps: see :mod:`workshop.readers.mpitrace`.
"""

from __future__ import annotations

import glob
import math
from pathlib import Path

import pandas as pd

from workshop.readers.mpitrace.parse import FILE_NAME, read_mpitrace_file
from workshop.readers.mpitrace.records import ROLES, MpiProfile, MpiTraceError, ProfileFile

__all__ = ["combine_files", "find_profile_files", "read_mpitrace", "read_mpitrace_jobs"]


def find_profile_files(path: str | Path) -> list[Path]:
    """The profile files a path names.

    Args:
        path: a file; a directory (its ``mpi_profile.<jobid>.<rank>`` files, not recursive);
            or a glob pattern such as ``runs/*/mpi_profile.*``.

    Returns:
        Paths sorted by name.

    Raises:
        FileNotFoundError: nothing matches (the message names the path).
    """
    text = str(path)
    path = Path(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and FILE_NAME.match(p.name))
        if not found:
            raise FileNotFoundError(
                f"no mpi_profile.<jobid>.<rank> files in directory {path} (make some with "
                "`workshop run --controller mpi --mpi-profile`, or mpitrace's LD_PRELOAD)"
            )
        return found
    if any(ch in text for ch in "*?["):
        found = sorted(Path(p) for p in glob.glob(text) if Path(p).is_file())
        if not found:
            raise FileNotFoundError(f"no files match {text!r}")
        return found
    raise FileNotFoundError(f"no such file or directory: {path}")


def combine_files(files: list[ProfileFile], jobid: str) -> MpiProfile:
    """Make the :class:`MpiProfile` of one job from its parsed files.

    Args:
        files: parsed files of one job (any order).
        jobid: the job id.

    Returns:
        The :class:`MpiProfile`.

    Raises:
        MpiTraceError: two files for one rank, or files that disagree on the number of tasks.
    """
    files = sorted(files, key=lambda f: f.rank)
    _check_one_job(files, jobid)
    summary = _job_summary(files)
    return MpiProfile(
        jobid=jobid,
        files=_files_table(files, jobid),
        routines=_routine_rows(files, jobid, "routines"),
        message_sizes=_routine_rows(files, jobid, "message_sizes"),
        tasks=_tasks_table(files, jobid),
        extremes=_extremes_table(files, jobid, summary),
        summary=summary,
        warnings=[f"{Path(f.path).name}: {w}" for f in files for w in f.warnings],
    )


# Columns of MpiProfile's tables that come from each file's totals, its routine rows, and the
# all-task table (in this order; a profile's extra task columns follow).
_FILE_TOTAL_COLUMNS = ["comm_s", "elapsed_s", "user_s", "system_s", "mem_mb"]
_ROUTINE_ROW_COLUMNS = ["routine", "calls", "avg_bytes", "time_s"]
_TASK_TABLE_COLUMNS = [
    "taskid",
    "host",
    "cpu",
    "comm_s",
    "elapsed_s",
    "user_s",
    "system_s",
    "mem_mb",
    "switches",
]


def _check_one_job(files: list[ProfileFile], jobid: str) -> None:
    """Raise :class:`MpiTraceError` unless the files are one file a rank of one job."""
    ranks = [f.rank for f in files]
    for rank in set(ranks):
        if ranks.count(rank) > 1:
            paths = ", ".join(f.path for f in files if f.rank == rank)
            raise MpiTraceError(f"job {jobid}: rank {rank} has more than one file: {paths}")
    ntasks = {f.ntasks for f in files}
    if len(ntasks) > 1:
        detail = ", ".join(f"{f.path}: {f.ntasks}" for f in files)
        raise MpiTraceError(f"job {jobid}: files disagree on the number of tasks ({detail})")


def _files_table(files: list[ProfileFile], jobid: str) -> pd.DataFrame:
    """:attr:`MpiProfile.files`: one row per file."""
    return pd.DataFrame(
        [
            {
                "jobid": jobid,
                "rank": f.rank,
                "ntasks": f.ntasks,
                "path": f.path,
                "layout": f.layout,
                "roles": ",".join(f.roles),
                **{c: f.totals.get(c, float("nan")) for c in _FILE_TOTAL_COLUMNS},
                "complete": f.complete,
                "warnings": len(f.warnings),
            }
            for f in files
        ]
    )


def _routine_rows(files: list[ProfileFile], jobid: str, attr: str) -> pd.DataFrame:
    """:attr:`MpiProfile.routines` or :attr:`MpiProfile.message_sizes` (``attr``), every
    file's rows together."""
    records = [
        {"jobid": jobid, "rank": f.rank, **dict(zip(_ROUTINE_ROW_COLUMNS, row, strict=True))}
        for f in files
        for row in getattr(f, attr)
    ]
    frame = pd.DataFrame(records, columns=["jobid", "rank", *_ROUTINE_ROW_COLUMNS])
    return frame.astype(
        {"rank": "int64", "calls": "int64", "avg_bytes": "float64", "time_s": "float64"}
    )


def _tasks_table(files: list[ProfileFile], jobid: str) -> pd.DataFrame:
    """:attr:`MpiProfile.tasks`: the all-task table of the first file that holds one."""
    holder = next((f for f in files if f.tasks), None)
    tasks = pd.DataFrame(holder.tasks if holder else [])
    numbers = {col: "float64" for col in _TASK_TABLE_COLUMNS if col.endswith(("_s", "_mb"))}
    for col in _TASK_TABLE_COLUMNS:
        if col not in tasks:  # a column the file lacks: NaN in a float column, else NA
            tasks[col] = math.nan if col in numbers else pd.NA
    extra_cols = [c for c in tasks.columns if c not in _TASK_TABLE_COLUMNS]
    tasks = tasks[_TASK_TABLE_COLUMNS + extra_cols].drop_duplicates("taskid").sort_values("taskid")
    tasks.insert(0, "jobid", jobid)
    tasks = tasks.astype({"taskid": "int64", "cpu": "Int64", "switches": "Int64"} | numbers)
    return tasks.reset_index(drop=True)


def _job_summary(files: list[ProfileFile]) -> dict[str, float | int]:
    """:attr:`MpiProfile.summary`: each all-task fact from the first file that has it."""
    summary: dict[str, float | int] = {}
    for f in files:
        for key, value in f.summary.items():
            summary.setdefault(key, value)
    return summary


def _extremes_table(
    files: list[ProfileFile], jobid: str, summary: dict[str, float | int]
) -> pd.DataFrame:
    """:attr:`MpiProfile.extremes`: each role's task from the all-task summary, else from the
    file that names its rank the role's holder."""
    extremes = []
    for role in ROLES:
        if f"{role}_task" in summary:
            taskid = int(summary[f"{role}_task"])
            comm_s = float(summary[f"{role}_comm_s"])
        else:
            holder = next((f for f in files if role in f.roles), None)
            if holder is None:
                continue
            taskid, comm_s = holder.rank, holder.totals.get("comm_s", float("nan"))
        extremes.append({"jobid": jobid, "role": role, "taskid": taskid, "comm_s": comm_s})
    return pd.DataFrame(extremes, columns=["jobid", "role", "taskid", "comm_s"])


def read_mpitrace_jobs(path: str | Path) -> dict[str, MpiProfile]:
    """Read every profile a path names, grouped by job id.

    Args:
        path: a file, a directory or a glob (see :func:`find_profile_files`).

    Returns:
        ``{jobid: MpiProfile}`` in job-id order.

    Raises:
        FileNotFoundError: nothing to read.
        MpiTraceError: a file that is not a profile; two files for one rank of a job; files
            of one job that disagree on the number of tasks.
    """
    by_job: dict[str, list[ProfileFile]] = {}
    for file in find_profile_files(path):
        prof = read_mpitrace_file(file)
        by_job.setdefault(prof.jobid, []).append(prof)
    return {jobid: combine_files(by_job[jobid], jobid) for jobid in sorted(by_job)}


def read_mpitrace(path: str | Path, *, job: str | None = None) -> MpiProfile:
    """Read the profile of one job.

    Args:
        path: a file, a directory or a glob (see :func:`find_profile_files`).
        job: the job id to read when the path holds files of several jobs.

    Returns:
        The :class:`MpiProfile`.

    Raises:
        FileNotFoundError: nothing to read.
        MpiTraceError: the path holds several jobs and ``job`` is not given, ``job`` is not
            among them, or as :func:`read_mpitrace_jobs`.
    """
    jobs = read_mpitrace_jobs(path)
    if job is not None:
        if job not in jobs:
            raise MpiTraceError(f"{path}: no files of job {job!r} (jobs found: {', '.join(jobs)})")
        return jobs[job]
    if len(jobs) > 1:
        raise MpiTraceError(
            f"{path} holds profiles of {len(jobs)} jobs ({', '.join(jobs)}); choose one with "
            "job=... (or --job)"
        )
    return next(iter(jobs.values()))
