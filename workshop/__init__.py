"""Helper package of the Horovod performance workshop.

One import line::

    import workshop as wk
    run = wk.open_run("torch-mnist-gloo-np2")   # a recording in data/, or any run directory
    wk.analysis.timeline_summary(run)           # analyses, plots and findings take a Run
    wk.exercise("05.1", answer_05_1, run)       # a lesson's exercise, checked (the registry)

Sub-packages load on first use (``wk.plot`` imports matplotlib only when a lesson draws), so
a training rank that needs ``workshop.train`` loads no plotting. Data flows one way: files ->
readers -> analysis -> findings / plot / widgets -> notebook; the README's map of the code
names each layer. ``wk.open_run`` is :func:`workshop.readers.runs.open_run`; ``wk.exercise`` and
``wk.finding`` are the registry's (:mod:`workshop.lessons.registry`).
"""

from __future__ import annotations

from workshop.lazy import exports
from workshop.paths import data_path

__version__ = "0.1.0"

#: What ``wk.<name>`` loads on first use.
SUBPACKAGES = (
    "analysis",
    "check",
    "cluster",
    "commands",
    "findings",
    "launch",
    "lessons",
    "paths",
    "plot",
    "readers",
    "room",
    "rules",
    "runspec",
    "train",
    "units",
    "widgets",
)
#: Lesson machinery a notebook reaches from the top (``wk.exercises.solution_hidden``,
#: ``wk.results.save``), and the module each name is.
MODULES = {
    "exercises": "workshop.lessons.engine",
    "results": "workshop.lessons.results",
}
#: The facade's own names, by the module (under ``workshop``) each comes from.
NAMES = {"readers.runs": ["open_run", "Run"], "lessons.registry": ["exercise", "finding"]}
__getattr__, __dir__, _exported = exports(__name__, NAMES, SUBPACKAGES, MODULES)
__all__ = ["MODULES", "SUBPACKAGES", "data_path", *_exported]
