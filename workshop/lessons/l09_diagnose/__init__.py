"""Lesson 09, Capstone: diagnose a run (``notebooks/09-diagnose-a-run.ipynb``): its exercises
and findings in the registry (``exercises``), the prose it states (``findings``), and its own glue.

``capstone``: the cases and their grading; ``gains``: what each fix gained over the repeats;
``record``: the cases' recorder.
"""

from workshop.lazy import exports

__getattr__, __dir__, __all__ = exports(
    __name__, {}, ("capstone", "exercises", "findings", "gains", "record")
)
