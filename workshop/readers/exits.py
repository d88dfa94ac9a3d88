"""How each rank of a Horovod job ended, read from what the job left: the launcher's log, the
ranks' logs and status files (``workshop run``), or the observations ``workshop check``'s
runner writes. Pure text and dicts in, one record per rank out (:func:`rank_ends`,
:func:`ends_from_observations`); which rank started a failure is decided once, in
:func:`workshop.analysis.failure.attribute`, and said once, in :mod:`workshop.findings.failure`.

When one rank of a Horovod job is killed from outside (the out-of-memory killer's SIGKILL, a
scheduler's SIGTERM), its peers fail a moment later with "Connection reset by peer" (Gloo) or
an MPI error; when one raises, the others fail with Horovod's "has been shut down". The
launcher's log says who went first: horovodrun (Gloo) prints ``Process 1 exit with status code
137.`` and "The first process to do so was: Process name: 1 Exit code: 137"; Open MPI's mpirun
"process rank 1 with PID ... on node ... exited on signal 9 (Killed)" or a ``Process name:
[[J,1],1]`` block; srun ``srun: error: node: task 1: Killed``.

A rank's end (:func:`rank_ends`) is a dict: ``rank``; ``state``, one of ``ok``, ``raised`` (a
Python exception, ``error`` holds it), ``killed`` (a signal from outside), ``stopped`` (the
launcher's own SIGTERM after another rank failed), ``exited`` (a status of its own,
``sys.exit(N)``), ``failed`` (a failure without a traceback; ``last_line`` holds the log's last
line) or ``vanished`` (it ended without a trace); ``kind`` of an error: ``peer`` (it only lost a
peer: :data:`PEER_GONE_WORDS`), ``collective`` (Horovod refused a collective the ranks
submitted differently: "Mismatched ...") or ``own``; ``peer_words``; ``signal``, ``exit_code``,
``launcher`` and ``line`` (the launcher's report); ``order`` (its place among the launcher's
reports, None when unreported); ``time`` (Unix seconds of its end, when known); ``where``
(the line it left at, when known) and ``steps``.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

from workshop.readers.tracebacks import log_error, script_frame, where

__all__ = [
    "PEER_GONE_WORDS",
    "ends_from_observations",
    "launcher_says_no_pmi",
    "oom_kill_count",
    "oom_in_log",
    "rank_ends",
    "rank_ends_in",
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
    "Timed out waiting",
    "MPI_ERR_",
    "unhandled system error",
    "HorovodInternalError",
)
# horovodrun 0.28 ends the other ranks (SIGTERM) once one has failed: their 143 is its doing.
_TEARDOWN = re.compile(r"^Terminating remaining workers after failure of Process (\d+)\.", re.M)

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


def _peer_gone(text: str) -> str | None:
    """The words of a log or message that say a peer vanished, or None."""
    return next((words for words in PEER_GONE_WORDS if words in text), None)


def _kind(error: dict) -> str:
    """``peer``, ``collective`` or ``own``: what an error says of its cause."""
    message = error.get("message") or ""
    if _peer_gone(message):
        return "peer"
    if "Mismatched" in message or error.get("type", "").endswith("HorovodInternalError"):
        return "collective"
    return "own"


def _end(rank: int, state: str, **fields) -> dict:
    blank = dict.fromkeys(
        ("error", "kind", "peer_words", "signal", "exit_code", "launcher", "line", "order",
         "time", "where", "steps", "last_line")
    )  # fmt: skip
    return {"rank": rank, "state": state} | blank | fields


def _launcher_reports(launcher_log: str) -> tuple[dict[int, dict], set[int]]:
    """Each rank's first exit the launcher reported (with its place, ``order``), and the ranks
    the launcher itself stopped (horovodrun's SIGTERMs after the first failure)."""
    exits = rank_exits(launcher_log)
    teardown = _TEARDOWN.search(launcher_log)
    stopped = {
        e["rank"]
        for e in exits
        if teardown
        and e["signal"] == "SIGTERM"
        and launcher_log.find(e["line"]) > teardown.start()
    }
    first: dict[int, dict] = {}
    for order, found in enumerate(exits):
        first.setdefault(found["rank"], found | {"order": order})
    return first, stopped


def rank_ends(
    launcher_log: str, rank_logs: dict[int, str], statuses: dict[int, str] | None = None,
    np: int | None = None,
) -> dict[int, dict]:  # fmt: skip
    """How each rank ended, from a run's logs.

    Args:
        launcher_log: the launcher's output (``logs/launcher.log``).
        rank_logs: each rank's own log (``logs/rank.N.log``).
        statuses: each rank's status file (``logs/rank.N.status``: ``ok``, ``failed``), where
            the run wrote them; None: judged from the logs alone.
        np: how many ranks (default: the ranks any source names).

    Returns:
        ``{rank: end}`` (the module's docstring lists an end's keys).
    """
    reports, stopped = _launcher_reports(launcher_log)
    statuses = statuses or {}
    ranks = range(np) if np else sorted({*reports, *rank_logs, *statuses})
    ends = {}
    for rank in ranks:
        text = rank_logs.get(rank, "")
        report = reports.get(rank) or {}
        launcher = {k: report.get(k) for k in ("signal", "exit_code", "launcher", "line", "order")}
        error = log_error(text)
        status = statuses.get(rank)
        frame = script_frame(error) if error else None
        peer_words = _peer_gone(text)
        if report.get("signal") and rank not in stopped:
            state = "killed"
        elif error:
            state = "raised"
        elif rank in stopped or status == "interrupted":
            state = "stopped"
        elif status == "ok":
            state = "ok"
        elif report.get("exit_code") not in (None, 0):
            state = "exited"
        elif status == "failed" or report or peer_words:
            state = "failed"
        elif status is None and rank in rank_logs:
            state = "ok"  # logs only (a cluster job): a log without an error ended well
        else:
            state = "vanished"
        tail = text.strip().splitlines()[-1:]
        ends[rank] = _end(
            rank, state, **launcher, error=error, kind=_kind(error) if error else None,
            peer_words=peer_words, where=where(frame) if frame else None,
            last_line=tail[0] if tail else None,
        )  # fmt: skip
        if state == "stopped" and not ends[rank]["peer_words"]:
            ends[rank]["peer_words"] = "stopped by the launcher"
    return ends


def rank_ends_in(run_dir: Path | str, np: int) -> dict[int, dict]:
    """:func:`rank_ends` of a run directory: its ``logs/launcher.log``, ``logs/rank.N.log``
    and ``logs/rank.N.status`` (those that exist)."""
    logs = Path(run_dir) / "logs"

    def text(name: str) -> str | None:
        path = logs / name
        return path.read_text(errors="replace") if path.exists() else None

    rank_logs = {r: t for r in range(np) if (t := text(f"rank.{r}.log")) is not None}
    statuses = {r: t.strip() for r in range(np) if (t := text(f"rank.{r}.status")) is not None}
    return rank_ends(text("launcher.log") or "", rank_logs, statuses, np)


def ends_from_observations(
    observations: dict[int, dict], np: int, launcher_output: str = ""
) -> dict[int, dict]:
    """How each rank ended, from ``workshop check``'s observations (``rank.N.json``: status
    ``ok``, ``error`` or ``exit``, the error with its time, the exit's line and time) and the
    launcher's output (for a rank that ended without reporting: the signal that ended it)."""
    reports, stopped = _launcher_reports(launcher_output)
    ends = {}
    for rank in range(np):
        obs = observations.get(rank)
        report = reports.get(rank) or {}
        launcher = {k: report.get(k) for k in ("signal", "exit_code", "launcher", "line", "order")}
        if obs is None:
            state = "killed" if report.get("signal") and rank not in stopped else "vanished"
            ends[rank] = _end(rank, state, **launcher)
            continue
        steps = max(len(obs.get("steps") or []), obs.get("steps_started") or 0)
        left = obs.get("left") or {}
        frame = left.get("frame")
        common = {
            "steps": steps,
            "time": left.get("time"),
            "where": where(frame) if frame else None,
        }
        error = obs.get("error")
        if obs.get("status") == "error" and error:
            frame = script_frame(error)
            kind = _kind(error)
            common |= {"time": error.get("time"), "where": where(frame) if frame else None}
            ends[rank] = _end(
                rank, "raised", error=error, kind=kind, peer_words=_peer_gone(
                    error.get("message") or ""), **common,
            )  # fmt: skip
        elif obs.get("status") == "exit":
            ends[rank] = _end(rank, "exited", exit_code=obs.get("exit_code"), **common)
        else:
            ends[rank] = _end(rank, "ok", exit_code=obs.get("exit_code"), **common)
    return ends


def oom_in_log(launcher_log: str) -> str | None:
    """The words of the launcher's log that report an out-of-memory kill, or None."""
    found = _OOM_WORDS.search(launcher_log)
    return found.group(0) if found else None


# What Open MPI and MPICH print when srun started the ranks without a PMI they speak (a Slurm
# site whose MpiDefault is none, or srun --mpi=pmi2 for an Open MPI built for PMIx).
_NO_PMI_WORDS = (
    "not built with SLURM's PMI support",
    'direct launched using "srun"',
    "PMIx_Init failed",
    "PMI2_Init failed",
    "PMI_Init failed",
)


def launcher_says_no_pmi(launcher_log: str) -> str | None:
    """The launcher's line that says srun started the ranks without a PMI, or None."""
    lines = launcher_log.splitlines()
    return next((x.strip() for x in lines if any(w in x for w in _NO_PMI_WORDS)), None)


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
