"""Nothing left running: the shared stop helpers (workshop.launch.stopping), and the lessons'
launcher stopped by its timeout or by a Jupyter interrupt (a KeyboardInterrupt in the kernel's
main thread) while the ranks it started are in an endless loop."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from workshop.launch import stopping

FOREVER = Path(__file__).parent / "check_scripts" / "torch_forever.py"


def test_sigint_started_ignored_stays_ignored_unless_asked():
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    old_term = signal.getsignal(signal.SIGTERM)
    old_hup = signal.getsignal(signal.SIGHUP)
    try:
        previous = stopping.stop_on_signals()
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # a shell's background job
        stopping.restore_handlers(previous)
        previous = stopping.stop_on_signals(sigint_when_ignored=True)  # workshop check
        assert signal.getsignal(signal.SIGINT) is stopping._raise_stopped
        with pytest.raises(KeyboardInterrupt) as stopped:
            signal.raise_signal(signal.SIGINT)
        assert stopping.signal_of(stopped.value) == signal.SIGINT
        stopping.restore_handlers(previous)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        for sig, handler in ((signal.SIGINT, old), (signal.SIGTERM, old_term),
                             (signal.SIGHUP, old_hup)):  # fmt: skip
            signal.signal(sig, handler)


def test_stop_tree_ends_a_process_and_the_session_it_started(tmp_path):
    # A parent whose child sits in a session of its own (as horovodrun's ranks do).
    marker = str(tmp_path / "marker")
    child = (
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        f"'import time; time.sleep(600)', {marker!r}], start_new_session=True); time.sleep(600)"
    )
    process = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
    deadline = time.monotonic() + 20
    while not _running(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _running(marker)
    start = time.monotonic()
    stopping.stop_tree(process, grace_s=2.0)
    assert time.monotonic() - start < 10
    assert process.poll() is not None and not _running(marker)


def _running(marker: str) -> list[int]:
    import psutil

    return [p.pid for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


def _ranks_of(script: Path) -> list[int]:
    import psutil

    return [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if str(script) in " ".join(p.info["cmdline"] or [])
    ]


@pytest.mark.live
def test_the_lessons_launcher_leaves_nothing_running_after_a_timeout_or_an_interrupt(
    tmp_path, cpu_lock, horovod_ready
):
    from workshop.lessons.l02_first_program import scripts

    # A copy of its own: its path marks this test's ranks apart from the check's timeout test
    # of the same fixture.
    forever = tmp_path / FOREVER.name
    forever.write_text(FOREVER.read_text())
    with pytest.raises(scripts.LaunchError, match="ran past 6 s"):
        scripts.horovodrun(forever, timeout_s=6, cwd=tmp_path)
    assert _ranks_of(forever) == []

    # A Jupyter interrupt: KeyboardInterrupt in the main thread while the launcher waits.
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.alarm(6)
    try:
        with pytest.raises(KeyboardInterrupt):
            scripts.horovodrun(forever, timeout_s=120, cwd=tmp_path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert _ranks_of(forever) == []
