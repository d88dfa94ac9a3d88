"""Building and running Horovod launches, run directories, job scripts, the MPI profiler."""

from workshop.launch.environment import diagnose
from workshop.launch.run import RunConfig, RunError, launch

__all__ = ["RunConfig", "RunError", "diagnose", "launch"]
