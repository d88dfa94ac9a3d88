"""Helper package of the Horovod performance workshop.

Notebooks import it one way: ``from workshop import io, analysis, plot``.
Data flows one way: files -> io -> analysis -> plot/widgets -> notebook.
"""

from workshop import analysis, io, launch, plot, results
from workshop.paths import data_path

__all__ = ["analysis", "io", "launch", "plot", "results", "data_path"]
__version__ = "0.1.0"
