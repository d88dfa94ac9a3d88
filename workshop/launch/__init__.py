"""Building and running Horovod launches, run directories, job scripts, the MPI profiler.

Notebooks reach everything they launch through this one name (``from workshop import launch``):
``launch.run_one(launch.RunConfig(...))``, ``launch.run_sweep(...)``, ``launch.jobscript``.
"""

from workshop.launch import jobscript
from workshop.launch.environment import diagnose_environment
from workshop.launch.run import RunConfig, RunError, run_one
from workshop.launch.sweep import run_sweep

__all__ = [
    "RunConfig",
    "RunError",
    "diagnose_environment",
    "jobscript",
    "parallelism",
    "run_one",
    "run_sweep",
]


def __getattr__(name: str):
    # launch.parallelism (lesson 01's real-process demos) is imported on first use only:
    # importing ``workshop.launch`` (every run, sweep and job script) does not load it.
    if name == "parallelism":
        import importlib

        return importlib.import_module("workshop.launch.parallelism")
    raise AttributeError(f"module 'workshop.launch' has no attribute {name!r}")
