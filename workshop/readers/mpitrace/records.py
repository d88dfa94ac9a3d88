"""What a profile is once read: the errors and warnings of the reader, one rank's file
(:class:`ProfileFile`) and one job's files combined (:class:`MpiProfile`).

The file format and what the reader keeps: see :mod:`workshop.readers.mpitrace`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

__all__ = ["MpiProfile", "MpiTraceError", "MpiTraceWarning", "ProfileFile", "ROLES"]


ROLES = ("minimum", "median", "maximum")


class MpiTraceError(ValueError):
    """A file that is not an mpitrace profile, or a line in it that fits no section.

    The message names the file and the line number (or byte offset).
    """


class MpiTraceWarning(UserWarning):
    """A profile that stops early or holds sections the reader skipped."""


@dataclass
class ProfileFile:
    """What one ``mpi_profile.<jobid>.<rank>`` file holds.

    Attributes:
        path: the file (or the ``source`` name given to :func:`parse_mpitrace`).
        jobid: job id from the file name (the whole name if it does not follow the pattern).
        rank: the MPI rank the file is for.
        ntasks: number of MPI tasks of the job.
        layout: ``"current"`` or ``"alcf"`` (``"unknown"`` if the file stops before the line
            that tells).
        roles: which extremes this rank is: a subset of ``minimum``, ``median``, ``maximum``.
        totals: ``comm_s``, ``elapsed_s``, ``user_s``, ``system_s`` (seconds) and ``mem_mb``
            (MiB); only those present.
        routines: rows ``(routine, calls, avg_bytes, time_s)`` of the routine table.
        message_sizes: rows ``(routine, calls, avg_bytes, time_s)``, one per size bin.
        summary: from the all-task summary: ``{role}_comm_s`` and ``{role}_task`` for each role,
            ``largest_mem_rank``, ``largest_mem_mb``, ``largest_elapsed_rank``,
            ``largest_elapsed_s``; only those present.
        tasks: rows of the per-task table (dicts with the columns of
            :attr:`MpiProfile.tasks`).
        extra: other ``name = value`` lines, by name.
        complete: True when every section the file should have is there in full.
        warnings: what is missing or was skipped, in words.
    """

    path: str
    jobid: str
    rank: int
    ntasks: int
    layout: str = "unknown"
    roles: list[str] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=dict)
    routines: list[tuple[str, int, float, float]] = field(default_factory=list)
    message_sizes: list[tuple[str, int, float, float]] = field(default_factory=list)
    summary: dict[str, float | int] = field(default_factory=dict)
    tasks: list[dict[str, object]] = field(default_factory=list)
    extra: dict[str, float] = field(default_factory=dict)
    complete: bool = True
    warnings: list[str] = field(default_factory=list)


@dataclass
class MpiProfile:
    """The profile files of one job, as DataFrames.

    Attributes:
        jobid: the job id.
        files: one row per file: ``jobid``, ``rank``, ``ntasks``, ``path``, ``layout``,
            ``roles`` (comma-separated extremes), ``comm_s``, ``elapsed_s``, ``user_s``,
            ``system_s`` (seconds), ``mem_mb`` (MiB), ``complete`` (bool), ``warnings``
            (count). Sorted by rank.
        routines: ``jobid``, ``rank``, ``routine``, ``calls``, ``avg_bytes`` (bytes per call),
            ``time_s`` (total seconds in the routine).
        message_sizes: ``jobid``, ``rank``, ``routine``, ``calls``, ``avg_bytes``, ``time_s``;
            one row per non-empty power-of-two size bin.
        tasks: the all-task table of rank 0's file: ``jobid``, ``taskid``, ``host``, ``cpu``
            (core id; <NA> in the alcf layout), ``comm_s``, ``elapsed_s``, ``user_s``,
            ``system_s`` (seconds), ``mem_mb`` (MiB), ``switches`` (context switches).
            Empty when no file holds it.
        extremes: ``jobid``, ``role`` (minimum/median/maximum), ``taskid``, ``comm_s``: from
            the all-task summary, else from the ``MPI task T had the ... time`` lines.
        summary: the all-task facts of :attr:`ProfileFile.summary` (first file that has them).
        warnings: every file's warnings, each prefixed with the file name.
    """

    jobid: str
    files: pd.DataFrame
    routines: pd.DataFrame
    message_sizes: pd.DataFrame
    tasks: pd.DataFrame
    extremes: pd.DataFrame
    summary: dict[str, float | int]
    warnings: list[str]

    @property
    def ntasks(self) -> int:
        """Number of MPI tasks of the job."""
        return int(self.files["ntasks"].iloc[0])

    @property
    def ranks(self) -> list[int]:
        """Ranks that have a file, ascending."""
        return [int(r) for r in self.files["rank"]]

    @property
    def layout(self) -> str:
        """Layout of the files (``current``, ``alcf``; ``mixed`` if they differ)."""
        layouts = set(self.files["layout"]) - {"unknown"}
        if len(layouts) > 1:
            return "mixed"
        return layouts.pop() if layouts else "unknown"


# A handler of the line a pattern matched: (line number, line, the match).
_Handler = Callable[[int, str, re.Match[str]], None]
