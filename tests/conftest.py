"""Shared fixtures. Live tests start real Horovod processes; they are serialised with the other
heavy jobs on this machine through a file lock (the machine has 2 cores)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from workshop.launch.environment import find_program

REPO = Path(__file__).resolve().parents[1]
LOCK_PATH = Path(os.environ.get("WORKSHOP_CPU_LOCK", "/tmp/workshop-cpu.lock"))


@pytest.fixture
def cpu_lock():
    """Hold the machine-wide lock while a live run executes."""
    with LOCK_PATH.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
        fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def horovod_ready():
    """Skip nothing silently: live tests fail loudly when Horovod is missing."""
    if not find_program("horovodrun"):
        pytest.fail("horovodrun not found: run `bash scripts/setup.sh --no-run` first")
