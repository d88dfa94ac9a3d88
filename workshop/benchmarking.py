"""What every benchmark script in ``benchmarks/`` records beside its numbers: the command, when
it started and ended, the machine's load before and after (a shared machine's load is part of
the result), and the commit it ran. Versions and host come from
:func:`workshop.launch.run.provenance` where a script adds them.

    started, load = started_now()
    ...  # the measurements
    result = {**run_record(started, load), "runs": runs}
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

__all__ = ["git_commit", "run_record", "spread", "started_now"]


def started_now() -> tuple[str, list[float]]:
    """The start time (UTC, ISO 8601, seconds) and the 1/5/15-minute load averages now."""
    return datetime.now(UTC).isoformat(timespec="seconds"), list(os.getloadavg())


def git_commit() -> str | None:
    """The checked-out commit (None outside a git checkout)."""
    found = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return found or None


def run_record(started: str, load_before: list[float] | tuple[float, ...]) -> dict:
    """``command`` (the interpreter's name and this script's argv), ``started_at``,
    ``finished_at`` (now), ``loadavg_before``, ``loadavg_after`` (now) and ``git_commit``."""
    return {
        "command": [Path(sys.executable).name, *sys.argv],
        "started_at": started,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "loadavg_before": list(load_before),
        "loadavg_after": list(os.getloadavg()),
        "git_commit": git_commit(),
    }


def spread(values: list[float]) -> dict:
    """``min``, ``median`` and ``max`` of repeated measurements, and the ``values`` themselves.

    >>> spread([3.0, 1.0, 2.0])
    {'min': 1.0, 'median': 2.0, 'max': 3.0, 'values': [3.0, 1.0, 2.0]}
    """
    return {
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "values": values,
    }
