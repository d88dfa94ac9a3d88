"""What every benchmark script in ``benchmarks/`` records beside its numbers: the command, when
it started and ended, the machine's load before and after (a shared machine's load is part of
the result), and the commit it ran. Versions and host come from
:func:`workshop.launch.record.provenance` where a script adds them.

    from _recording import run_record, started_now  # python benchmarks/NAME.py: this folder
                                                     # is on the path
    started, load = started_now()
    ...  # the measurements
    result = {**run_record(started, load), "runs": runs}
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

__all__ = [
    "flock_held",
    "git_commit",
    "print_spreads",
    "run_record",
    "spread",
    "started_now",
    "write_result",
]


@contextlib.contextmanager
def flock_held(path: Path | None) -> Iterator[None]:
    """An exclusive flock on ``path`` while the block runs (a benchmark round on a shared
    machine; the tests take the same machine-wide lock); nothing when ``path`` is None."""
    if path is None:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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


def print_spreads(summary: dict[str, dict], unit: str = "") -> None:
    """One line a measurement: ``name: min M / median M / max M unit``, two decimals."""
    for name, value in summary.items():
        line = f"min {value['min']:.2f} / median {value['median']:.2f} / max {value['max']:.2f}"
        print(f"{name}: {line}{' ' + unit if unit else ''}")


def write_result(
    out: Path, record: dict, started: str, load_before: list[float] | tuple[float, ...]
) -> Path:
    """Write ``out/result.json``: ``record`` with the run (:func:`run_record`) and the versions
    and host (:func:`workshop.launch.record.provenance`) beside it; return its path."""
    from workshop.launch.record import provenance

    out.mkdir(parents=True, exist_ok=True)
    path = out / "result.json"
    full = {**record, "run": run_record(started, load_before), "provenance": provenance()}
    path.write_text(json.dumps(full, indent=2) + "\n")
    print(f"wrote {path}")
    return path
