"""Markdown the lessons' findings show: a small frame as a table."""

from __future__ import annotations

import pandas as pd

__all__ = ["markdown_table"]


def markdown_table(frame: pd.DataFrame, digits: int = 2) -> str:
    """A small frame as a Markdown table, its index as the first column; floats with
    ``digits`` decimals and numbers with thousands commas, right-aligned.

    >>> frame = pd.DataFrame({"s": [1.5, 1234.0]}, index=pd.Index([1, 2], name="np"))
    >>> print(markdown_table(frame))
    | np | s |
    | --- | ---: |
    | 1 | 1.50 |
    | 2 | 1,234.00 |
    """

    def cell(value) -> str:
        if isinstance(value, float):
            return f"{value:,.{digits}f}"
        return f"{value:,}" if isinstance(value, int) else str(value)

    rows = [[frame.index.name or "", *map(str, frame.columns)]]
    rows.append(["---"] + ["---:"] * len(frame.columns))
    rows += [
        [cell(i), *map(cell, row)]
        for i, row in zip(frame.index, frame.itertuples(False), strict=True)
    ]
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)
