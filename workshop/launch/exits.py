"""Which rank died first, and how: a rank killed by a signal told from the ranks that failed
only because a peer vanished.

When one rank of a Horovod job is killed from outside (the out-of-memory killer's SIGKILL, a
scheduler's SIGTERM), its peers fail a moment later with "Connection reset by peer" (Gloo) or
an MPI error, and they are the ones with a traceback and a ``failed`` status. The launcher's
log says who went first: horovodrun (Gloo) prints ``Process 1 exit with status code 137.`` and
"The first process to do so was: Process name: 1 Exit code: 137"; Open MPI's mpirun "process
rank 1 with PID ... on node ... exited on signal 9 (Killed)" or a ``Process name: [[J,1],1]``
block; srun ``srun: error: node: task 1: Killed``.

:func:`first_death` reads those lines (and the ranks' logs for the peers' errors) and returns
the killed rank first; :func:`death_lines` says it in words, with what the signal usually means
(:data:`SIGNAL_MEANING`) and how to check it. Pure text in, dict and sentences out: ``workshop
run`` records the dict in run.json (``first_death``) and ``workshop diagnose`` prints it.

A rank that crashed on its own is said by :func:`crash_lines` as ``workshop check`` says it
(:mod:`workshop.readers.tracebacks`): the innermost line outside the libraries first, the
exception, and for a Horovod error a learner can cause its cause and fix
(:mod:`workshop.readers.horovod_errors`); the full traceback stays in the rank's log.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

from workshop.readers.horovod_errors import explain_horovod_error
from workshop.readers.tracebacks import log_error, script_frame, where

__all__ = [
    "NO_PMI",
    "PEER_GONE_WORDS",
    "SIGNAL_MEANING",
    "crash_lines",
    "death_lines",
    "first_death",
    "first_death_in",
    "launcher_problem",
    "oom_kill_count",
    "rank_exits",
    "signal_of_exit",
]

# What a rank's log says when the rank failed because a peer vanished (Gloo's TCP transport,
# Horovod's own errors, MPI's and NCCL's), not because of an error of its own.
PEER_GONE_WORDS = (
    "Connection reset by peer",
    "Connection closed by peer",
    "Broken pipe",
    "Connection refused",
    "Socket closed",
    "peer closed",
    "Gloo all-reduce failed",
    "Gloo allreduce failed",
    "Read error",
    "Horovod has been shut down",
    "MPI_ERR_",
    "unhandled system error",
    "HorovodInternalError",
)
# horovodrun 0.28 ends the other ranks (SIGTERM) once one has failed: their 143 is its doing.
_TEARDOWN = re.compile(r"^Terminating remaining workers after failure of Process (\d+)\.", re.M)

#: What each signal that ends a rank from outside usually means, and what to do about it.
SIGNAL_MEANING = {
    "SIGKILL": (
        "SIGKILL from outside usually means the out-of-memory killer: the machine (or the "
        "job's memory limit: a 2 GB Binder, a shared node, Slurm's --mem) ran out of memory. "
        "Check: the kernel log (`dmesg -T | grep -i -E 'out of memory|killed process'` or "
        "`journalctl -k`), the cgroup's memory.events (`cat /sys/fs/cgroup/memory.events`: "
        "oom_kill counts the kills), on Slurm `sacct -j JOBID -o State,MaxRSS` (OUT_OF_MEMORY). "
        "Use less memory: fewer ranks on the node (-np), a smaller batch (--batch-size), fewer "
        "data-loader workers and threads per rank, or ask for more memory"
    ),
    "SIGTERM": (
        "SIGTERM from outside: a scheduler ended the job (its walltime, scancel) or someone "
        "ran kill. Check the job's end reason (Slurm: `sacct -j JOBID -o State,Elapsed,"
        "Timelimit`); ask for more time or make the run shorter"
    ),
    "SIGSEGV": (
        "SIGSEGV: the rank crashed inside native code (a library built for another version, "
        "a corrupted install): run it again with PYTHONFAULTHANDLER=1 to see where"
    ),
    "SIGABRT": (
        "SIGABRT: a library aborted the rank (a failed internal check): its log's last lines "
        "name the check"
    ),
}
_FROM_OUTSIDE = ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP")
_BY_SHELL = 128  # a shell reports a process ended by signal N as exit status 128 + N

# (pattern, where): each match names a rank and an exit code or a signal. Order: the launchers'
# "first process" reports first, then their per-rank lines.
_EXIT_PATTERNS = (
    # horovodrun (Gloo): "...The first process to do so was:\nProcess name: 1\nExit code: 137"
    (re.compile(r"Process name: (?P<rank>\d+)\s*\n\s*Exit code:\s*(?P<code>-?\d+)"), "horovodrun"),
    # Open MPI: "Process name: [[11371,1],0]\n  Exit code:    1"
    (
        re.compile(
            r"Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]\s*\n\s*Exit code:\s*(?P<code>-?\d+)"
        ),
        "mpirun",
    ),
    # horovodrun (Gloo), every rank that failed: "Process 1 exit with status code 137."
    (
        re.compile(r"^Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)\.", re.M),
        "horovodrun",
    ),
    # Open MPI: "mpirun noticed that process rank 1 with PID 0 on node b exited on signal 9"
    (
        re.compile(
            r"process rank (?P<rank>\d+) with PID \d+ on node \S+ exited on signal (?P<signum>\d+)"
        ),
        "mpirun",
    ),
    # srun: "srun: error: nodeb: task 1: Killed" / "...: task 1: Terminated"
    (
        re.compile(r"srun: error: \S+: tasks? (?P<rank>\d+)[^:]*: (?P<word>Killed|Terminated)"),
        "srun",
    ),
)
_WORD_SIGNALS = {"Killed": signal.SIGKILL, "Terminated": signal.SIGTERM}
_OOM_WORDS = re.compile(r"oom[-_ ]kill|Out of memory|OUT_OF_MEMORY", re.IGNORECASE)


def signal_of_exit(code: int) -> str | None:
    """The name of the signal an exit code stands for (137 and -9: ``SIGKILL``; 143 and -15:
    ``SIGTERM``), or None for an ordinary exit status.

    >>> signal_of_exit(137), signal_of_exit(-15), signal_of_exit(1)
    ('SIGKILL', 'SIGTERM', None)
    """
    number = -code if code < 0 else code - _BY_SHELL if code > _BY_SHELL else None
    try:
        return signal.Signals(number).name if number else None
    except ValueError:
        return None


def rank_exits(launcher_log: str) -> list[dict]:
    """Every rank exit the launcher's log reports, in the order of the log.

    Returns:
        ``[{"rank", "exit_code", "signal", "launcher", "line"}]``: ``exit_code`` None where
        only a signal is given (mpirun's "exited on signal 9"), ``signal`` None for an ordinary
        exit status.
    """
    found = []
    for pattern, launcher in _EXIT_PATTERNS:
        for match in pattern.finditer(launcher_log):
            groups = match.groupdict()
            code = int(groups["code"]) if groups.get("code") else None
            if groups.get("signum"):
                name = signal.Signals(int(groups["signum"])).name
            elif groups.get("word"):
                name = _WORD_SIGNALS[groups["word"]].name
            else:
                name = signal_of_exit(code)
            line = " ".join(match.group(0).split())
            found.append((match.start(), int(groups["rank"]), code, name, launcher, line))
    return [
        {"rank": rank, "exit_code": code, "signal": name, "launcher": launcher, "line": line}
        for _, rank, code, name, launcher, line in sorted(found, key=lambda f: f[0])
    ]


def _peer_gone(log_text: str) -> str | None:
    """The words of a rank's log that say a peer vanished, or None."""
    return next((words for words in PEER_GONE_WORDS if words in log_text), None)


def first_death(
    launcher_log: str, rank_logs: dict[int, str], oom_kills: int | None = None
) -> dict | None:
    """The rank killed by a signal, when one was, and the ranks that failed only after it.

    Args:
        launcher_log: the launcher's output (``logs/launcher.log``).
        rank_logs: each rank's own log (``logs/rank.N.log``), where a peer's error shows.
        oom_kills: how many processes the out-of-memory killer ended in the run's cgroup while
            the run went on (:func:`oom_kill_count` after minus before), None when unreadable.

    Returns:
        None when no rank was ended by a signal (a rank that raised is the ordinary failure),
        else ``{"rank", "signal", "exit_code", "launcher", "line", "peers", "oom_kills",
        "oom_in_log"}``: ``peers`` maps each other rank whose log says a peer vanished to the
        words that say it.
    """
    exits = rank_exits(launcher_log)
    teardown = _TEARDOWN.search(launcher_log)
    if teardown:  # the launcher's own SIGTERMs after the first failure are no one's cause
        exits = [
            e
            for e in exits
            if not (e["signal"] == "SIGTERM" and launcher_log.find(e["line"]) > teardown.start())
        ]
    killed = [e for e in exits if e["signal"]]
    if not killed:
        return None
    # The first rank to end decides: a rank that raised an error of its own (not a lost peer)
    # before any kill is the ordinary failure, and the signals after it are consequences.
    first = killed[0]
    ended_first = exits[0]
    if not ended_first["signal"]:
        own_log = rank_logs.get(ended_first["rank"], "")
        if not _peer_gone(own_log):
            return None
    peers = {
        rank: words
        for rank, text in sorted(rank_logs.items())
        if rank != first["rank"] and (words := _peer_gone(text))
    }
    if teardown:
        stopped = {e["rank"] for e in rank_exits(launcher_log) if e["signal"] == "SIGTERM"}
        for rank in sorted(stopped - set(peers) - {first["rank"]}):
            peers[rank] = f"stopped by {first['launcher']} after rank {first['rank']}'s end"
    oom_line = _OOM_WORDS.search(launcher_log)
    return first | {
        "peers": {str(rank): words for rank, words in sorted(peers.items())},
        "oom_kills": oom_kills,
        "oom_in_log": oom_line.group(0) if oom_line else None,
    }


def first_death_in(run_dir: Path, np: int, oom_kills: int | None = None) -> dict | None:
    """:func:`first_death` of a run directory: its ``logs/launcher.log`` and
    ``logs/rank.N.log`` (those that exist)."""
    logs = Path(run_dir) / "logs"
    launcher = logs / "launcher.log"
    launcher_text = launcher.read_text(errors="replace") if launcher.exists() else ""
    rank_logs = {
        rank: path.read_text(errors="replace")
        for rank in range(np)
        if (path := logs / f"rank.{rank}.log").exists()
    }
    return first_death(launcher_text, rank_logs, oom_kills)


def death_lines(death: dict) -> list[str]:
    """``first_death``'s dict in words: the killed rank, the peers that failed after it, and
    what the signal usually means (with the out-of-memory evidence this run gave, if any)."""
    code = f"exit code {death['exit_code']}, " if death.get("exit_code") is not None else ""
    outside = " from outside" if death["signal"] in _FROM_OUTSIDE else ""
    lines = [
        f"rank {death['rank']} died first: killed by {death['signal']}{outside} "
        f'({code}{death["launcher"]}: "{death["line"]}")'
    ]
    consequence = f"a consequence of rank {death['rank']}'s end, not a cause"
    for rank, words in (death.get("peers") or {}).items():
        if words.startswith("stopped by"):
            lines.append(f"rank {rank} was {words}: {consequence}")
        else:
            lines.append(
                f'rank {rank} failed only because its peer vanished ("{words}" in its log): '
                f"{consequence}"
            )
    if death.get("oom_kills"):
        lines.append(
            f"the out-of-memory killer ended {death['oom_kills']} process(es) in this run's "
            "cgroup while it ran (memory.events oom_kill): rank "
            f"{death['rank']} ran out of memory"
        )
    elif death.get("oom_in_log"):
        lines.append(f'the launcher\'s log reports it: "{death["oom_in_log"]}"')
    meaning = SIGNAL_MEANING.get(death["signal"])
    if meaning:
        lines.append(meaning)
    return lines


# What Open MPI and MPICH print when srun started the ranks without a PMI they speak (a Slurm
# site whose MpiDefault is none, or srun --mpi=pmi2 for an Open MPI built for PMIx).
_NO_PMI_WORDS = (
    "not built with SLURM's PMI support",
    'direct launched using "srun"',
    "PMIx_Init failed",
    "PMI2_Init failed",
    "PMI_Init failed",
)
#: The cause and the fix of ranks started without PMI.
NO_PMI = (
    "srun started the ranks without a PMI their MPI library speaks (this Slurm's MpiDefault is "
    "none, or another plugin), so each rank started alone and stopped",
    "srun --mpi=pmix (srun --mpi=list shows the plugins this Slurm offers: use the PMIx one "
    'your Open MPI was built for), e.g. --launcher "srun --mpi=pmix ...", or export '
    "SLURM_MPI_TYPE=pmix; workshop jobscript --system slurm checks this before it launches",
)


def launcher_problem(launcher_log: str) -> str | None:
    """Why the launcher could not start the job, when its log says so in words we know:
    ``"CAUSE (the launcher's log: "LINE"). Fix: FIX"`` (ranks started without PMI:
    :data:`NO_PMI`), else None."""
    lines = launcher_log.splitlines()
    line = next((x.strip() for x in lines if any(w in x for w in _NO_PMI_WORDS)), None)
    if line is None:
        return None
    cause, fix = NO_PMI
    return f'{cause} (the launcher\'s log: "{line}"). Fix: {fix}'


def _cgroup_events() -> Path | None:
    """The memory.events file of this process's cgroup (v2), or the root's, when readable."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    unified = [line.split(":", 2)[2] for line in lines if line.startswith("0::")]
    candidates = [Path("/sys/fs/cgroup") / p.lstrip("/") / "memory.events" for p in unified]
    candidates.append(Path("/sys/fs/cgroup/memory.events"))
    return next((p for p in candidates if p.is_file()), None)


def oom_kill_count() -> int | None:
    """The ``oom_kill`` count of this process's cgroup (cgroup v2 memory.events), or None
    where it cannot be read (cgroup v1, another OS)."""
    path = _cgroup_events()
    if path is None:
        return None
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def crash_lines(rank: int, log: Path, framework: str = "torch") -> list[str]:
    """A crashed rank in words: where its traceback left the libraries' frames and the
    exception, then the cause and fix of a Horovod error a learner can cause; without a
    traceback, the log's last line.

    Args:
        rank: the rank that crashed.
        log: its log (``logs/rank.N.log``); a missing log gives an empty last line.
        framework: ``torch`` or ``tensorflow``: the API a Horovod error's fix is written in.
    """
    text = log.read_text(errors="replace") if log.exists() else ""
    error = log_error(text)
    if error is None:
        tail = text.strip().splitlines()[-1:]
        return [f"rank {rank} crashed: {' '.join(tail)}  (log: {log})"]
    frame = script_frame(error)
    at = f" at {where(frame)}" if frame else ""
    first = error["message"].splitlines()[0] if error["message"] else ""
    exception = f"{error['type']}: {first}" if first else error["type"]
    lines = [f"rank {rank} crashed{at}: {exception}  (log: {log})"]
    cause = explain_horovod_error(error, "torch" if framework == "torch" else "tf")
    if cause:
        lines.append(f"  cause: {cause}")
    return lines
