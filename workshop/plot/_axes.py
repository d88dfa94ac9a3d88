"""The one "make an axes" helper of the plot modules."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.axes import Axes


def _axes(ax: Axes | None, figsize: tuple[float, float], *, constrained: bool = False) -> Axes:
    """``ax`` when given, else the Axes of a new figure of ``figsize`` inches.

    ``constrained``: the new figure uses constrained layout (room for a legend outside).
    """
    if ax is not None:
        return ax
    return plt.subplots(figsize=figsize, layout="constrained" if constrained else None)[1]
