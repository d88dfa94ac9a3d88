"""Lesson 10, From Horovod to DDP (``notebooks/10-from-horovod-to-ddp.ipynb``): its exercises
and findings in the registry (``exercises``), the prose it states (``findings``), its runs for
real (``record``) and its programs (``programs/``: lesson 02's DDP model with a profiler, and a
DDP script with a classic mistake).
"""

from workshop.lazy import exports

__getattr__, __dir__, __all__ = exports(__name__, {}, ("exercises", "findings", "record"))
