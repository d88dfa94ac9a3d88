"""Building and running Horovod launches, run directories, job scripts, the MPI profiler.

Notebooks reach everything they launch through this one name (``from workshop import launch``):
``launch.run_one(launch.RunConfig(...))``, ``launch.run_sweep(...)``, a job script
(``launch.jobscript.render(launch.jobplan.JobSpec(...))``), ``launch.live_ranks.start(np=2)``.
"""

__all__ = [
    "RunConfig",
    "RunError",
    "diagnose_environment",
    "jobplan",
    "jobscript",
    "live_ranks",
    "parallelism",
    "run_one",
    "run_sweep",
]

# Each name is imported on first use: importing ``workshop.launch`` loads none of its modules, so
# a live rank (an IPython Parallel engine imports workshop.launch.live_ranks, where the functions
# it runs are defined) and the ranks' watchdog load no pandas, and lesson 01's real-process demos
# (launch.parallelism) load only when used.
NAMES = {
    "RunConfig": "workshop.launch.run",
    "RunError": "workshop.launch.run",
    "run_one": "workshop.launch.run",
    "run_sweep": "workshop.launch.sweep",
    "diagnose_environment": "workshop.launch.environment",
}
MODULES = ("jobplan", "jobscript", "live_ranks", "parallelism")


def __getattr__(name: str):
    import importlib

    if name in NAMES:
        return getattr(importlib.import_module(NAMES[name]), name)
    if name in MODULES:
        return importlib.import_module(f"workshop.launch.{name}")
    raise AttributeError(f"module 'workshop.launch' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
