"""Readers: files -> pandas DataFrames (run directories, timelines, MPI profiles, logs).

Every name is also reachable through its module, e.g. ``io.runs``.
"""

from workshop.io import logs, mpitrace, recordings, runs, sweep, timeline  # noqa: F401
from workshop.io.logs import (  # noqa: F401
    find_logs,
    merge_tables,
    normalise_column,
    read_autotune_log,
    read_epoch_log,
    read_epoch_logs,
    read_table,
    read_tables,
)
from workshop.io.mpitrace import (  # noqa: F401
    MpiProfile,
    MpiTraceError,
    MpiTraceWarning,
    ProfileFile,
    combine_files,
    find_profile_files,
    parse_mpitrace,
    parse_mpitrace_bytes,
    read_mpitrace,
    read_mpitrace_file,
    read_mpitrace_jobs,
)
from workshop.io.recordings import (  # noqa: F401
    list_recordings,
)
from workshop.io.runs import (  # noqa: F401
    list_runs,
    read_metrics,
    read_run,
    read_summary,
)
from workshop.io.sweep import (  # noqa: F401
    read_manifest,
    read_sweep,
    run_dirs,
)
from workshop.io.timeline import (  # noqa: F401
    Timeline,
    TimelineFormatError,
    TimelineWarning,
    parse_timeline,
    read_timeline,
    write_timeline,
)
