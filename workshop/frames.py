"""Checks on the DataFrames the package's functions take (one home for every column check),
and :func:`takes_run`, which lets a function that takes a run's frame take the Run too.

Pandas only, so every layer (readers, analysis, plot, launch) may import it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd


class MissingColumnsError(ValueError):
    """A DataFrame passed to a workshop function lacks columns that function reads."""


def require_columns(
    df: pd.DataFrame, columns: Iterable[str], what: str, *, frame: str = "input", hint: str = ""
) -> None:
    """Raise :class:`MissingColumnsError` when ``df`` lacks any of ``columns``.

    Args:
        df: the DataFrame to check.
        columns: the columns the caller reads.
        what: who is asking (a function name), the message's first words.
        frame: which input ``df`` is (``"spans"``, ``"runs"``...), named in the message.
        hint: what to pass instead, appended in parentheses.

    Raises:
        TypeError: ``df`` is not a DataFrame.
        MissingColumnsError: (a ``ValueError``) naming ``what``, the input and the missing
            columns, e.g. ``speedup_table: the input DataFrame has no column(s) ['np']``.
    """
    if not isinstance(df, pd.DataFrame):
        where = f" ({hint})" if hint else ""
        raise TypeError(f"{what}: the {frame} must be a DataFrame{where}, got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        message = f"{what}: the {frame} DataFrame has no column(s) {missing}"
        raise MissingColumnsError(f"{message} ({hint})" if hint else message)


#: What a function's first argument means, by its name, and where a Run keeps it
#: (:class:`workshop.readers.runs.Run`'s attributes; "timeline.spans": its timeline's spans).
#: Frames of several runs ("runs", "epochs" with an np column) are no one Run's.
RUN_PARTS = {
    "tl": "timeline",
    "timeline": "timeline",
    "spans": "timeline.spans",
    "ticks": "timeline.ticks",
    "profile": "profile",
    "metrics": "metrics",
    "steps": "steps",
}


def run_part(run: Any, part: str, what: str) -> Any:
    """``run``'s ``part`` (a dotted attribute path), raising a ValueError that names the run
    and what is missing when the run has no such file (no timeline, no profile)."""
    value = run
    for attribute in part.split("."):
        if value is None:
            break
        value = getattr(value, attribute)
    if value is None:
        raise ValueError(f"{what}: the run {run.path} has no {part.split('.')[0]}")
    return value


def takes_run(function: Callable) -> Callable:
    """Let ``function``, whose first argument is a run's frame (named as in
    :data:`RUN_PARTS`: ``tl``, ``spans``, ``profile``, ``metrics``...), also take the Run
    itself (``wk.open_run(...)``): the Run's part is passed instead. Anything else is passed
    unchanged. A Run is told by its ``is_workshop_run`` mark, so this module imports no
    reader."""
    import inspect

    first = next(iter(inspect.signature(function).parameters))
    part = RUN_PARTS[first]

    @functools.wraps(function)
    def wrapper(data: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(data, "is_workshop_run", False):
            data = run_part(data, part, function.__name__)
        return function(data, *args, **kwargs)

    return wrapper
