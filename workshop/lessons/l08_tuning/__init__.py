"""Lesson 08, Tuning Horovod (``notebooks/08-tuning-horovod.ipynb``): its exercises
and findings in the registry (``exercises``), the prose it states (``findings``).
"""

from workshop.lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {}, ("exercises", "findings"))
