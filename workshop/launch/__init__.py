"""Building and running Horovod launches, run directories, job scripts, the MPI profiler.

Notebooks reach everything they launch through this one name (``from workshop import launch``):
``launch.run_one(launch.RunConfig(...))``, ``launch.run_sweep(...)``, a job script
(``launch.jobscript.render(launch.jobplan.JobSpec(...))``), ``launch.live_ranks.start(np=2)``.
"""

# Each name is imported on first use: importing ``workshop.launch`` loads none of its modules, so
# a live rank (an IPython Parallel engine imports workshop.launch.live_ranks, where the functions
# it runs are defined) and the ranks' watchdog load no pandas, and lesson 01's real-process demos
# (launch.parallelism) load only when used.
from workshop.lazy import exports  # noqa: E402  (after the comment that says why)

__getattr__, __dir__, __all__ = exports(
    __name__,
    {
        "run": ["RunConfig", "RunError", "run_one"],
        "sweep": ["run_sweep"],
        "environment": ["diagnose_environment"],
    },
    ("jobplan", "jobscript", "live_ranks", "parallelism"),
)
