"""The room in a notebook: ``workshop room DIR`` as a live table and the progress chart.

The table is :func:`workshop.analysis.room.room_table`, the one ``workshop room`` prints; the
chart is :func:`workshop.plot.room.plot_room_progress`. A background thread re-reads the folder
every few seconds while the panel's "live" button is down; untick it to stop.
"""

from __future__ import annotations

import html
import io
import threading
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from workshop.analysis.room import room_progress, room_table
from workshop.findings.room import room_notes, room_text
from workshop.kernel import static_mode
from workshop.plot.room import plot_room_progress
from workshop.readers.room import read_room

#: The table's columns as the panel shows them (room_table column -> heading).
SHOWN = {
    "learner": "learner",
    "right": "right",
    "furthest": "furthest",
    "current": "current",
    "stuck_on": "stuck on",
    "current_wrong": "wrong answers",
    "last_check": "last check",
    "last_check_missing": "missing practices",
    "last_check_verdict": "check verdict",
    "last_run": "last run",
    "last_run_status": "run status",
    "bad_files": "unreadable files",
    "problems": "why unreadable",
    "refused_files": "files not theirs",
}


def room_html(table: pd.DataFrame) -> str:
    """The room table as an HTML table, the rows of stuck learners and of learners whose last
    check missed a practice or stalled/crashed highlighted.

    Args:
        table: :func:`workshop.analysis.room.room_table`.
    """
    shown = table[list(SHOWN)].rename(columns=SHOWN).astype(str)
    alert = (table["stuck_on"] != "") | (table["last_check_missing"] != "")
    alert |= table["last_check_verdict"] != ""
    rows = []
    for flagged, (_, row) in zip(alert, shown.iterrows(), strict=True):
        style = ' style="background:#fde2d2"' if flagged else ""
        cells = "".join(f"<td>{html.escape(value)}</td>" for value in row)
        rows.append(f"<tr{style}>{cells}</tr>")
    heading = "".join(f"<th>{html.escape(name)}</th>" for name in shown.columns)
    return f"<table><thead><tr>{heading}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def notes_html(room) -> str:
    """:func:`workshop.findings.room.room_notes` as HTML paragraphs (shown under the table)."""
    return "".join(f"<p>{html.escape(note)}</p>" for note in room_notes(room))


def _png(progress: pd.DataFrame) -> bytes:
    if progress.empty:
        return b""
    # A Figure of its own, not pyplot's: the refreshing thread must not touch the figures of
    # the cells the instructor runs meanwhile.
    figure = Figure(figsize=(max(4, 0.45 * len(progress) + 1.5), 3.5))
    plot_room_progress(progress, ax=figure.add_subplot())
    picture = io.BytesIO()
    figure.savefig(picture, format="png", dpi=90, bbox_inches="tight")
    return picture.getvalue()


def _every(seconds: float, stop: threading.Event, refresh) -> None:
    while not stop.wait(seconds):
        refresh()


def room_view(folder: str | Path, *, every_s: float = 5.0, live: bool = True, static=None):
    """The room of ``folder`` (the learners' ``WORKSHOP_ROOM``) as a panel that refreshes itself.

    Args:
        folder: the room folder.
        every_s: seconds between refreshes while "live" is down.
        live: start refreshing at once (else press "live", or call ``panel.refresh()``).
        static: True prints ``workshop room``'s text table and draws the chart once, with no
            widget (default: :func:`workshop.kernel.static_mode`, as under papermill).

    Returns:
        An ``ipywidgets.VBox`` (a "live" toggle and the time of the last refresh, the table
        with the room's notes under it, the chart) with ``refresh()`` (re-read the folder
        now) and ``stop()`` (end the refreshing thread); None in static mode.

    Raises:
        FileNotFoundError: ``folder`` is not a folder.
        PermissionError: it cannot be listed by this user.
        ValueError: ``every_s`` is not positive.
    """
    if every_s <= 0:
        raise ValueError(f"every_s must be > 0 seconds, not {every_s}")
    folder = Path(folder)
    room = read_room(folder)  # a wrong folder is said here, not on each refresh
    if static if static is not None else static_mode():
        print(room_text(room_table(room), folder=str(folder), room=room))
        plot_room_progress(room_progress(room))
        plt.show()
        return None
    import ipywidgets as widgets

    # The chart is a picture set from a PNG: a thread can update it, which an Output widget's
    # captured display cannot do reliably.
    table, chart = widgets.HTML(), widgets.Image(format="png")
    toggle = widgets.ToggleButton(value=False, description="live", icon="refresh")
    seen = widgets.HTML()
    lock = threading.Lock()

    def refresh() -> None:
        with lock:
            try:
                room = read_room(folder)
            except (FileNotFoundError, PermissionError) as exc:  # removed or locked meanwhile
                seen.value = f"<b>{html.escape(str(exc))}</b>"
                return
            table.value = room_html(room_table(room)) + notes_html(room)
            chart.value = _png(room_progress(room))
            seen.value = f"{folder}: read at {time.strftime('%H:%M:%S')}, every {every_s:g} s"

    stops: list[threading.Event] = []

    def stop() -> None:
        while stops:
            stops.pop().set()

    def switch(change) -> None:
        stop()
        if change["new"]:
            stops.append(threading.Event())
            thread = threading.Thread(
                target=_every, args=(every_s, stops[-1], refresh), daemon=True, name="room-view"
            )
            thread.start()

    toggle.observe(switch, "value")
    panel = widgets.VBox([widgets.HBox([toggle, seen]), table, chart])
    panel.refresh, panel.stop = refresh, stop
    refresh()
    toggle.value = live
    return panel
