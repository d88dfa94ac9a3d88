"""Stopping what a launcher started, whatever stops the launcher.

Every command that starts ranks (``workshop run``, ``workshop sweep``, ``workshop check``, the
lessons' launchers) ends them the same way:

- :func:`stop_on_signals` makes SIGTERM and SIGHUP (and, for a command that asks, SIGINT even
  when it was started ignoring it) raise :class:`Stopped`, a ``KeyboardInterrupt``, so one code
  path stops the ranks whichever signal came (Ctrl-C, ``kill``, a batch system at walltime, a
  closed terminal, a Jupyter interrupt);
- :func:`end_on_parent_death` makes a launcher's child (horovodrun) get SIGKILL when the
  launcher itself is killed (SIGKILL cannot be caught): horovodrun's own process watchers then
  end its ranks;
- :func:`stop_tree` ends a launcher, its process group and every descendant (ranks sit in
  sessions of their own), first asking, then forcing;
- :func:`kill_marked` ends what outlived its launcher, found by a marker in its command line.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time

#: What stops a launcher: Ctrl-C (SIGINT); a batch system at walltime, ``kill``, a Jupyter
#: kernel restart (SIGTERM); a closed terminal or SSH session (SIGHUP).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP (or a SIGINT this process was started ignoring), raised like Python
    raises KeyboardInterrupt for SIGINT."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, frame) -> None:
    raise Stopped(signum)


def signal_of(interrupt: KeyboardInterrupt) -> int:
    """The signal behind a ``KeyboardInterrupt``: a :class:`Stopped`'s, else SIGINT."""
    return getattr(interrupt, "signum", signal.SIGINT)


def stop_on_signals(sigint_when_ignored: bool = False) -> dict:
    """Make SIGTERM and SIGHUP raise :class:`Stopped`; returns the handlers to restore.

    Only the main thread may set handlers: elsewhere (a thread of a notebook) nothing changes
    and only Ctrl-C stops cleanly. A SIGTERM or SIGHUP this process was started ignoring stays
    ignored: ``nohup workshop run ... &`` must outlive the closed terminal's SIGHUP. A SIGINT it
    was started ignoring (a shell's background job) stays ignored unless
    ``sigint_when_ignored``: ``workshop check`` is stopped by ``kill -INT`` in any case.
    """
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if previous[sig] != signal.SIG_IGN:
            signal.signal(sig, _raise_stopped)
    if sigint_when_ignored and previous[signal.SIGINT] == signal.SIG_IGN:
        signal.signal(signal.SIGINT, _raise_stopped)
    return previous


def ignore_stop_signals(previous: dict) -> None:
    """While the ranks are being stopped and the outcome written (bounded, seconds): no second
    signal may cut that short."""
    for sig in previous:
        signal.signal(sig, signal.SIG_IGN)


def restore_handlers(previous: dict) -> None:
    for sig, handler in previous.items():
        if handler is not None:  # None: installed outside Python, cannot be put back
            signal.signal(sig, handler)


def end_on_parent_death() -> None:
    """In a child, before it execs: SIGKILL it when the thread that started it ends (Linux
    ``PR_SET_PDEATHSIG``; elsewhere nothing). For ``subprocess.Popen(preexec_fn=...)``."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def stop_tree(process: subprocess.Popen, grace_s: float = 3.0) -> int | None:
    """End ``process`` (started with ``start_new_session=True``), its process group and every
    descendant: SIGTERM first (ranks of ``workshop check`` write what they saw), SIGKILL to
    what is left after ``grace_s``. Returns the process's exit code."""
    import psutil

    try:
        family = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        family = []
    for sig in (signal.SIGTERM, signal.SIGKILL):
        deadline = time.monotonic() + grace_s
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for child in family:
            try:
                child.send_signal(sig)
            except psutil.Error:
                pass
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        _, family = psutil.wait_procs(family, timeout=max(0.1, deadline - time.monotonic()))
        if process.poll() is not None and not family:
            break
    return process.poll()


def kill_marked(marker: str, wait_s: float = 3.0) -> None:
    """SIGKILL every process (but this one) with ``marker`` as a word of its command line:
    ranks that outlived their launcher; wait up to ``wait_s`` for them to be gone, so that
    nothing is left when the caller returns."""
    import psutil

    killed = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.pid != os.getpid() and marker in (proc.info.get("cmdline") or []):
            try:
                proc.kill()
                killed.append(proc)
            except psutil.Error:
                pass
    psutil.wait_procs(killed, timeout=wait_s)


# How a stopped run's process group is asked to end, then made to: (signal, seconds to wait).
# After Ctrl-C the ranks get SIGINT first (horovodrun forwards it); after SIGTERM / SIGHUP time
# is short (a batch system kills everything a few seconds later), so TERM comes first.
STOP_SEQUENCE = {
    signal.SIGINT: ((signal.SIGINT, 10), (signal.SIGTERM, 5), (signal.SIGKILL, 5)),
    signal.SIGTERM: ((signal.SIGTERM, 5), (signal.SIGKILL, 5)),
    signal.SIGHUP: ((signal.SIGTERM, 5), (signal.SIGKILL, 5)),
}


def stop_process_group(process: subprocess.Popen, signum: int) -> int:
    """End horovodrun (or the cluster launcher) and what it started; returns its exit code."""
    for sig, grace_s in STOP_SEQUENCE[signum]:
        try:
            os.killpg(process.pid, sig)
            return process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            break
    return process.wait()
