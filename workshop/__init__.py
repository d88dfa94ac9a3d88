"""Helper package of the Horovod performance workshop.

Notebooks import it one way: ``from workshop import io, analysis, plot`` (each sub-package is
imported on first use, so a training rank that needs ``workshop.train`` loads no plotting).
Data flows one way: files -> io -> analysis -> plot/widgets -> notebook.
"""

from workshop.paths import data_path

__all__ = ["data_path"]
__version__ = "0.1.0"
