"""ipywidgets explorers built on analysis + plot (:mod:`workshop.widgets.explorers`).

In JupyterLab each explorer is a small control panel that redraws its plot. Where no one can
move a slider (papermill, CI, a static HTML export) they degrade to one static plot of the
default view: :func:`static_mode` decides, and ``WORKSHOP_STATIC_WIDGETS=1`` forces it.
"""

from workshop.widgets.explorers import (
    SPEEDUP_METRICS,
    lr_explorer,
    scaling_explorer,
    static_mode,
    timeline_explorer,
)

__all__ = [
    "SPEEDUP_METRICS",
    "lr_explorer",
    "scaling_explorer",
    "static_mode",
    "timeline_explorer",
]
