"""Helper package of the Horovod performance workshop.

One import line::

    import workshop as wk
    run = wk.open_run("torch-mnist-gloo-np2")   # a recording in data/, or any run directory
    wk.analysis.timeline_summary(run)           # analyses, plots and findings take a Run

Sub-packages load on first use (``wk.plot`` imports matplotlib only when a lesson draws), so
a training rank that needs ``workshop.train`` loads no plotting. Data flows one way: files ->
readers -> analysis -> findings / plot / widgets -> notebook; the README's map of the code
names each layer.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workshop.paths import data_path

if TYPE_CHECKING:
    from workshop.readers.runs import Run

__all__ = ["SUBPACKAGES", "data_path", "open_run"]
__version__ = "0.1.0"

#: What ``wk.<name>`` loads on first use.
SUBPACKAGES = (
    "analysis",
    "check",
    "cluster",
    "commands",
    "exercises",
    "findings",
    "launch",
    "lessons",
    "paths",
    "plot",
    "readers",
    "results",
    "room",
    "rules",
    "runspec",
    "train",
    "units",
    "widgets",
)


def open_run(run: Run | Path | str) -> Run:
    """The Run of a run directory or of a recording's name
    (:func:`workshop.readers.runs.open_run`)."""
    from workshop.readers.runs import open_run as _open_run

    return _open_run(run)


def __getattr__(name: str) -> Any:
    if name in SUBPACKAGES:
        return importlib.import_module(f"workshop.{name}")
    raise AttributeError(f"module 'workshop' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *SUBPACKAGES])
