"""Lesson 07, Batch size and learning rate
(``notebooks/07-batch-size-and-learning-rate.ipynb``): its exercises
and findings in the registry (``exercises``), the prose it states (``findings``).
"""

from workshop.lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {}, ("exercises", "findings"))
