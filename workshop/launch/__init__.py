"""Building and running Horovod launches, run directories, job scripts, the MPI profiler.

Notebooks reach everything they launch through this one name (``from workshop import launch``):
``launch.launch(launch.RunConfig(...))``, ``launch.run_sweep(...)``, ``launch.jobscript``.
"""

from workshop.launch import jobscript
from workshop.launch.environment import diagnose
from workshop.launch.run import RunConfig, RunError, launch
from workshop.launch.sweep import run_sweep

__all__ = ["RunConfig", "RunError", "diagnose", "jobscript", "launch", "run_sweep"]
