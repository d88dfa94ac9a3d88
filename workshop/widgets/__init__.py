"""ipywidgets explorers built on analysis + plot (:mod:`workshop.widgets.explorers`), and the
instructor's live view of the room (:func:`workshop.widgets.room.room_view`).

In JupyterLab each explorer is a small control panel that redraws its plot. Where no one can
move a slider (papermill, nbconvert --execute, CI, a static HTML export) they degrade to one
static plot of the default view: :func:`static_mode` decides, from the kernel itself (a kernel
that nbclient started has no frontend), with no variable to set; ``WORKSHOP_STATIC_WIDGETS=1``
forces it and ``=0`` forbids it.
"""

from workshop.kernel import static_mode
from workshop.widgets.explorers import (
    SPEEDUP_METRICS,
    lr_explorer,
    scaling_explorer,
    timeline_explorer,
)
from workshop.widgets.room import room_html, room_view

__all__ = [
    "SPEEDUP_METRICS",
    "lr_explorer",
    "room_html",
    "room_view",
    "scaling_explorer",
    "static_mode",
    "timeline_explorer",
]
