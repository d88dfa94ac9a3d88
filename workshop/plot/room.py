"""The room's progress per exercise (``workshop room``'s instructor view)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from workshop.plot._axes import _axes


def plot_room_progress(progress: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Learners per exercise, stacked: answered right, and still trying (checked without a
    right answer yet), exercises in lesson order.

    Args:
        progress: from :func:`workshop.analysis.room.room_progress` (``exercise``, ``right``,
            ``trying``).
        ax: Axes to draw on (a new figure if None).

    Raises:
        ValueError: ``progress`` lacks one of those columns.
    """
    missing = {"exercise", "right", "trying"} - set(progress.columns)
    if missing:
        raise ValueError(f"progress lacks the column(s) {sorted(missing)}: use room_progress")
    ax = _axes(ax, (max(4, 0.45 * len(progress) + 1.5), 3.5))
    x = np.arange(len(progress))
    ax.bar(x, progress["right"], color="C2", label="right")
    ax.bar(x, progress["trying"], bottom=progress["right"], color="C1", label="still trying")
    ax.set_xticks(x, progress["exercise"], rotation=90 if len(progress) > 12 else 0)
    ax.set_xlabel("exercise")
    ax.set_ylabel("learners")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.legend(frameon=False)
    return ax
