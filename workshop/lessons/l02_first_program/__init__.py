"""Lesson 02, Your first Horovod program
(``notebooks/02-your-first-horovod-program.ipynb``): its exercises
and findings in the registry (``exercises``), the prose it states (``findings``), and its own glue.

``programs/`` holds the learner's scripts (ordinary files that do not import
``workshop``: a learner copies them anywhere).
"""

from workshop.lazy import exports

__getattr__, __dir__, __all__ = exports(
    __name__,
    {},
    ("ddp", "edits", "exercises", "findings", "keras_probe", "recording", "replay", "scripts"),
)
