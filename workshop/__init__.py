"""Helper package of the Horovod performance workshop.

Notebooks import it one way: ``from workshop import readers, analysis, plot`` (each sub-package
is imported on first use, so a training rank that needs ``workshop.train`` loads no plotting).
The readers are ``workshop.readers``, not ``workshop.io``: a notebook's ``io`` would shadow the
standard library's.
Data flows one way: files -> readers -> analysis -> plot/widgets -> notebook.
"""

from workshop.paths import data_path

__all__ = ["data_path"]
__version__ = "0.1.0"
