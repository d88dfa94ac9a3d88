"""Whether anyone watches this Python session: in a kernel that nbclient started (papermill,
``jupyter nbconvert --execute``) no frontend is connected, so a widget, a slider or a widget
progress bar has no one to show itself to, and a widget cell can hang the run
(jupyter/nbclient#312). Ground floor, standard library only: the widgets, the sweeps' and the
timeline reader's progress bars all ask it.
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: What nbclient (and so papermill, ``jupyter nbconvert --execute``, jupyter-book's and
#: jupyter-cache's executors) puts on the command line of each IPython kernel it starts: its
#: ``NotebookClient.ipython_hist_file``, ``:memory:`` by default, "recommended in
#: non-interactive contexts". A Jupyter server (JupyterLab, Notebook, JupyterHub, Binder)
#: starts the kernel from its kernelspec alone and passes no such argument.
NBCLIENT_KERNEL_ARGUMENT = "--HistoryManager.hist_file=:memory:"


def unattended_kernel() -> bool:
    """True inside an IPython kernel started by nbclient, where no frontend is connected.

    Such a kernel talks to nbclient only, which renders no widget and, on a widget cell, can
    wait forever for a reply the kernel already sent (the race of jupyter/nbclient#312,
    papermill#723: issue 48 saw lesson 07 hang in 3 runs of 8). The sign is the argument
    :data:`NBCLIENT_KERNEL_ARGUMENT` on the kernel's own command line, with the history
    really in memory: a history kept in memory by a configuration file (as some sites do on
    shared file systems) does not put it on the command line, so a JupyterLab kernel stays
    interactive. Outside a kernel (a script, pytest, a terminal IPython) it is False.
    """
    if NBCLIENT_KERNEL_ARGUMENT not in sys.argv[1:]:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return False
    history = getattr(shell, "history_manager", None)
    return str(getattr(history, "hist_file", "")) == ":memory:"


def static_mode() -> bool:
    """True when the notebook runs unattended: no one can move a slider, so draw a picture.

    ``WORKSHOP_STATIC_WIDGETS=1`` says so (the workshop's test harness, the book build) and
    ``WORKSHOP_STATIC_WIDGETS=0`` says not (a JupyterLab whose kernelspec itself asks for
    ``:memory:`` history); otherwise the kernel tells (:func:`unattended_kernel`): plain
    papermill and ``jupyter nbconvert --execute`` need no variable.
    """
    forced = os.environ.get("WORKSHOP_STATIC_WIDGETS")
    if forced in ("0", "1"):
        return forced == "1"
    return unattended_kernel()


def progress_bar(**kwargs: Any):
    """A tqdm progress bar: a widget in a notebook someone watches, text otherwise (an
    unattended kernel, a terminal), so no widget is built where no frontend listens."""
    if static_mode():
        from tqdm.std import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(**kwargs)
