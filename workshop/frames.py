"""Checks on the DataFrames the package's functions take (one home for every column check).

Pandas only, so every layer (readers, analysis, plot, launch) may import it.
"""

from __future__ import annotations

from collections.abc import Iterable

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
