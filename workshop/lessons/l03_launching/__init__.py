"""Lesson 03, Launching Horovod runs (``notebooks/03-launching-runs.ipynb``): its exercises
and findings in the registry (``exercises``), the prose it states (``findings``), and its own glue.
"""

from workshop.lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {}, ("exercises", "findings", "slurm_job"))
