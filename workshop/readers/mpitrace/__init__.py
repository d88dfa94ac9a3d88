"""Read MPI profiles in the text layout of IBM's mpitrace (``mpi_profile.<jobid>.<rank>``).

mpitrace (and the workshop's own profiler, ``workshop/launch/mpiprof``) writes one text file per
profiled rank: by default rank 0 and the ranks with the minimum, median and maximum
communication time; every rank with ``SAVE_ALL_TASKS=yes``. Rank 0's file also holds the
all-task summary. Two layouts are read:

* **current** (mpitrace today, and our profiler): ``Times from MPI_Init() to MPI_Finalize().``,
  memory in MiB, ``Summary for all tasks:`` in rank 0's file, and a per-task table with a
  ``cpu`` column;
* **alcf** (the older build on ALCF Theta/ThetaGPU that seed 001 prints): ``Times and
  statistics from MPI_Init() to MPI_Finalize().``, memory in MBytes, ``Rank N reported the
  largest memory utilization`` in the file itself, ``Communication summary for all tasks:``,
  and a per-task table without the ``cpu`` column.

The parser keys on section titles, not on exact wording or column positions. A file that stops
early (a run killed in MPI_Finalize, a copy cut short) gives what it holds plus a
:class:`MpiTraceWarning`; a line that fits no section raises :class:`MpiTraceError` naming the
file and line. Memory is reported in MiB in both layouts (mpitrace's "MBytes" is ru_maxrss
divided by 1024), in columns named ``mem_mb``.

Example:
    >>> from workshop.readers.mpitrace import read_mpitrace
    >>> from workshop.paths import data_path
    >>> prof = read_mpitrace(data_path("mpi", "seed001-thetagpu-cpu"))
    >>> prof.ntasks, prof.ranks
    (16, [0])
    >>> int(prof.routines.set_index("routine").loc["MPI_Allreduce", "calls"])
    8161
"""

from workshop.readers.mpitrace.jobs import (
    combine_files,
    find_profile_files,
    read_mpitrace,
    read_mpitrace_jobs,
)
from workshop.readers.mpitrace.parse import (
    FILE_NAME,
    parse_mpitrace,
    parse_mpitrace_bytes,
    read_mpitrace_file,
)
from workshop.readers.mpitrace.records import (
    ROLES,
    MpiProfile,
    MpiTraceError,
    MpiTraceWarning,
    ProfileFile,
)

__all__ = [
    "FILE_NAME",
    "ROLES",
    "MpiTraceError",
    "MpiTraceWarning",
    "ProfileFile",
    "MpiProfile",
    "parse_mpitrace",
    "parse_mpitrace_bytes",
    "read_mpitrace_file",
    "find_profile_files",
    "combine_files",
    "read_mpitrace",
    "read_mpitrace_jobs",
]
