"""What a command left running: the tests that stop processes look for them by a marker (a run
directory, the emulated cluster's state folder) on their command lines."""

from __future__ import annotations

import os
from pathlib import Path


def processes_with(marker: str) -> list[str]:
    """Command lines of the processes (this one aside) that mention ``marker``."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(cmdline)
    return found
