"""Readers: files -> pandas DataFrames (run directories, timelines, MPI profiles, logs), and a
crashed rank's traceback read as a learner needs it (``tracebacks``, ``horovod_errors``).

Every name is also reachable through its module, e.g. ``io.runs``. Modules are imported on
first use (PEP 562), so ``workshop timeline summary``, which needs only ``io.timeline``'s
numpy path, does not load pandas through the other readers.
"""

from __future__ import annotations

from workshop.lazy import exports

MODULES = (
    "benchmarks",
    "cluster",
    "exits",
    "horovod_errors",
    "logs",
    "mpitrace",
    "recordings",
    "runs",
    "sweep",
    "timeline",
    "torch_trace",
    "tracebacks",
)
NAMES = {
    "benchmarks": ["read_benchmark", "read_benchmark_runs"],
    "cluster": ["read_allreduce_sweep", "read_placement_runs"],
    "exits": ["ends_from_observations", "rank_ends", "rank_ends_in", "rank_exits"],
    "horovod_errors": ["explain_horovod_error"],
    "logs": [
        "find_logs",
        "merge_tables",
        "normalise_column",
        "read_autotune_log",
        "read_epoch_log",
        "read_epoch_logs",
        "read_table",
        "read_tables",
    ],
    "mpitrace": [
        "MpiProfile",
        "MpiTraceError",
        "MpiTraceWarning",
        "ProfileFile",
        "combine_files",
        "find_profile_files",
        "parse_mpitrace",
        "parse_mpitrace_bytes",
        "read_mpitrace",
        "read_mpitrace_file",
        "read_mpitrace_jobs",
    ],
    "recordings": ["list_recordings", "quiet_problems"],
    "runs": [
        "Run",
        "list_runs",
        "open_run",
        "read_calibration",
        "read_metrics",
        "read_run",
        "read_run_files",
        "read_step_times",
        "read_summary",
    ],
    "sweep": ["read_compute_baseline", "read_manifest", "read_sweep", "run_dirs"],
    "timeline": [
        "Timeline",
        "TimelineFormatError",
        "TimelineWarning",
        "parse_timeline",
        "read_timeline",
        "write_timeline",
    ],
    "torch_trace": [
        "TorchTrace",
        "TorchTraceError",
        "parse_torch_trace",
        "read_torch_trace",
        "read_torch_traces",
    ],
    "tracebacks": ["fold", "last_frame", "log_error", "script_frame", "where"],
}
__getattr__, __dir__, __all__ = exports(__name__, NAMES, MODULES)
