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
[[J,1],1]`` block; srun ``srun: error: node: task 1: Killed``. When a node is lost (its link
down, the machine gone), ssh prints "Timeout, server nodeb not responding" and Open MPI
"Remote daemon: [[J,1],1] on node nodeb": every rank on that node went with it. These lines
are :data:`LAUNCHER_PATTERNS`, the one table of them.

A rank's end (:func:`rank_ends`) is a dict: ``rank``; ``state``, one of ``ok``, ``raised`` (a
Python exception, ``error`` holds it), ``killed`` (a signal from outside), ``stopped`` (the
launcher's own SIGTERM after another rank failed), ``exited`` (a status of its own,
``sys.exit(N)``), ``failed`` (a failure without a traceback; ``last_line`` holds the log's last
line), ``lost`` (the launcher reported its node lost) or ``vanished`` (it ended without a
trace); ``kind`` of an error: ``peer`` (it only lost a peer: :data:`PEER_GONE_WORDS`),
``collective`` (Horovod refused a collective the ranks submitted differently: "Mismatched
...") or ``own``; ``peer_words``; ``signal``, ``exit_code``, ``launcher`` and ``line`` (the
launcher's report); ``host`` (where it ran, when known); ``order`` (its place among the
launcher's reports, None when unreported); ``time`` (Unix seconds of its end, when known);
``where`` (the line it left at, when known) and ``steps``.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Mapping
from pathlib import Path

from workshop.readers.tracebacks import log_error, script_frame, where

__all__ = [
    "LAUNCHER_PATTERNS",
    "PEER_GONE_WORDS",
    "ends_from_observations",
    "launcher_reports",
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

#: What the launchers print when a rank ends or a node is lost: the one table of them (the
#: emulated cluster's reports too). ``(pattern, launcher, what)``: ``what`` is ``exit`` (a
#: rank's end: its exit code, signal number or signal word) or ``node`` (a node the launcher
#: lost: ssh gave up on it, or Open MPI lost its daemon there; every rank on it went with it).
#: The groups name what each line gives: ``rank``, ``host``, ``code``, ``signum``, ``word``.
#: Order: the launchers' "first process" reports first, then their per-rank lines.
LAUNCHER_PATTERNS = (
    # horovodrun (Gloo): "...The first process to do so was:\nProcess name: 1\nExit code: 137"
    (
        re.compile(r"Process name: (?P<rank>\d+)\s*\n\s*Exit code:\s*(?P<code>-?\d+)"),
        "horovodrun",
        "exit",
    ),
    # Open MPI: "Process name: [[11371,1],0]\n  Exit code:    1"
    (
        re.compile(
            r"Process name: \[\[\d+,\d+\],(?P<rank>\d+)\]\s*\n\s*Exit code:\s*(?P<code>-?\d+)"
        ),
        "mpirun",
        "exit",
    ),
    # horovodrun (Gloo), every rank that failed: "Process 1 exit with status code 137."
    (
        re.compile(r"^Process (?P<rank>\d+) exit with status code (?P<code>-?\d+)\.", re.M),
        "horovodrun",
        "exit",
    ),
    # Open MPI: "mpirun noticed that process rank 1 with PID 0 on node b exited on signal 9"
    (
        re.compile(
            r"process rank (?P<rank>\d+) with PID \d+ on node (?P<host>\S+) exited on signal "
            r"(?P<signum>\d+)"
        ),
        "mpirun",
        "exit",
    ),
    # srun: "srun: error: nodeb: task 1: Killed" / "...: task 1: Terminated"
    (
        re.compile(
            r"srun: error: (?P<host>\S+): tasks? (?P<rank>\d+)[^:]*: (?P<word>Killed|Terminated)"
        ),
        "srun",
        "exit",
    ),
    # Open MPI: the ssh to a node's daemon ended ("Remote daemon: [[...],1] on node nodeb")
    (re.compile(r"Remote daemon: \[\[[^\]]*\],\d+\] on node (?P<host>\S+)"), "mpirun", "node"),
    # ssh gave up on a node: Gloo's ranks run under ssh ("[1]<stderr>:Timeout, server nodeb not
    # responding."), Open MPI's daemons too (the same line, no rank: every rank of that host)
    (
        re.compile(
            r"^(?:\[(?P<rank>\d+)\]<stderr>:)?Timeout, server (?P<host>\S+) not responding",
            re.M,
        ),
        "ssh",
        "node",
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


def launcher_reports(launcher_log: str) -> list[dict]:
    """Every rank's end and every lost node the launcher's log reports
    (:data:`LAUNCHER_PATTERNS`), in the order of the log.

    Returns:
        ``[{"what", "rank", "host", "exit_code", "signal", "launcher", "line", "order"}]``:
        ``what`` is ``exit`` or ``node``; ``rank`` None where a line names only a host (a lost
        node: every rank on it), ``host`` None where it names only a rank; ``exit_code`` None
        where only a signal is given (mpirun's "exited on signal 9"), ``signal`` None for an
        ordinary exit status; ``order`` the report's place in the log (0, 1, ...): when the
        launcher noticed, as far as its log tells.
    """
    found = []
    for pattern, launcher, what in LAUNCHER_PATTERNS:
        for match in pattern.finditer(launcher_log):
            groups = match.groupdict()
            code = int(groups["code"]) if groups.get("code") else None
            if groups.get("signum"):
                name = signal.Signals(int(groups["signum"])).name
            elif groups.get("word"):
                name = _WORD_SIGNALS[groups["word"]].name
            else:
                name = signal_of_exit(code) if code is not None else None
            found.append((match.start(), {
                "what": what, "rank": int(groups["rank"]) if groups.get("rank") else None,
                "host": groups.get("host"), "exit_code": code, "signal": name,
                "launcher": launcher, "line": " ".join(match.group(0).split()),
            }))  # fmt: skip
    ordered = sorted(found, key=lambda f: f[0])
    return [report | {"order": order} for order, (_, report) in enumerate(ordered)]


def rank_exits(launcher_log: str) -> list[dict]:
    """Every rank exit the launcher's log reports, in the order of the log: the ``exit``
    reports of :func:`launcher_reports` (``rank``, ``exit_code``, ``signal``, ``launcher``,
    ``line``, ``host``, ``order``)."""
    return [r for r in launcher_reports(launcher_log) if r["what"] == "exit"]


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
         "host", "time", "where", "steps", "last_line")
    )  # fmt: skip
    return {"rank": rank, "state": state} | blank | fields


def _launcher_reports(
    launcher_log: str, rank_hosts: Mapping[int, str] | None = None
) -> tuple[dict[int, dict], set[int], dict[int, dict]]:
    """Each rank's first exit the launcher reported, the ranks the launcher itself stopped
    (horovodrun's SIGTERMs after the first failure), and each rank's first report of its node
    lost (a report that names only a host stands for every rank ``rank_hosts`` puts there)."""
    reports = launcher_reports(launcher_log)
    exits = [r for r in reports if r["what"] == "exit"]
    teardown = _TEARDOWN.search(launcher_log)
    stopped = {
        e["rank"]
        for e in exits
        if teardown
        and e["signal"] == "SIGTERM"
        and launcher_log.find(e["line"]) > teardown.start()
    }
    first: dict[int, dict] = {}
    for found in exits:
        first.setdefault(found["rank"], found)
    lost: dict[int, dict] = {}
    for found in (r for r in reports if r["what"] == "node"):
        on_host = [r for r, host in sorted((rank_hosts or {}).items()) if host == found["host"]]
        for rank in [found["rank"]] if found["rank"] is not None else on_host:
            lost.setdefault(rank, found)
    return first, stopped, lost


_REPORTED = ("signal", "exit_code", "launcher", "line", "order")


def rank_ends(
    launcher_log: str, rank_logs: dict[int, str], statuses: dict[int, str] | None = None,
    np: int | None = None, rank_hosts: Mapping[int, str] | None = None,
) -> dict[int, dict]:  # fmt: skip
    """How each rank ended, from a run's logs.

    Args:
        launcher_log: the launcher's output (``logs/launcher.log``).
        rank_logs: each rank's own log (``logs/rank.N.log``).
        statuses: each rank's status file (``logs/rank.N.status``: ``ok``, ``failed``), where
            the run wrote them; None: judged from the logs alone.
        np: how many ranks (default: the ranks any source names).
        rank_hosts: the host of each rank, where the run knew it (an emulated cluster's
            run.json ``cluster.rank_hosts``): a lost node's report stands for its ranks.

    Returns:
        ``{rank: end}`` (the module's docstring lists an end's keys). A rank whose node the
        launcher reported lost (ssh gave up on it, Open MPI lost its daemon there) is ``lost``,
        with that report's ``launcher``, ``line`` and ``order``, whatever else it left.
    """
    reports, stopped, lost = _launcher_reports(launcher_log, rank_hosts)
    statuses = statuses or {}
    ranks = range(np) if np else sorted({*reports, *lost, *rank_logs, *statuses})
    ends = {}
    for rank in ranks:
        text = rank_logs.get(rank, "")
        report = reports.get(rank) or {}
        launcher = {k: report.get(k) for k in _REPORTED}
        error = log_error(text)
        status = statuses.get(rank)
        frame = script_frame(error) if error else None
        peer_words = _peer_gone(text)
        if rank in lost:
            state = "lost"
            launcher |= {k: lost[rank][k] for k in ("launcher", "line", "order")}
        elif report.get("signal") and rank not in stopped:
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
        host = (rank_hosts or {}).get(rank) or (lost.get(rank) or report).get("host")
        ends[rank] = _end(
            rank, state, **launcher, error=error, kind=_kind(error) if error else None,
            peer_words=peer_words, where=where(frame) if frame else None,
            last_line=tail[0] if tail else None, host=host,
        )  # fmt: skip
        if state == "stopped" and not ends[rank]["peer_words"]:
            ends[rank]["peer_words"] = "stopped by the launcher"
    return ends


def rank_ends_in(run_dir: Path | str, np: int) -> dict[int, dict]:
    """:func:`rank_ends` of a run directory: its ``logs/launcher.log``, ``logs/rank.N.log``
    and ``logs/rank.N.status`` (those that exist), and the host of each rank that run.json's
    ``cluster.rank_hosts`` records (a run on the emulated cluster).

    Raises:
        ValueError: run.json is there but not JSON.
    """
    logs = Path(run_dir) / "logs"

    def text(name: str) -> str | None:
        path = logs / name
        return path.read_text(errors="replace") if path.exists() else None

    rank_logs = {r: t for r in range(np) if (t := text(f"rank.{r}.log")) is not None}
    statuses = {r: t.strip() for r in range(np) if (t := text(f"rank.{r}.status")) is not None}
    record_path = Path(run_dir) / "run.json"
    try:
        record = json.loads(record_path.read_text()) if record_path.exists() else {}
    except ValueError as exc:
        raise ValueError(f"{record_path}: not JSON ({exc})") from exc
    hosts = ((record or {}).get("cluster") or {}).get("rank_hosts") or {}
    rank_hosts = {int(rank): host for rank, host in hosts.items()}
    return rank_ends(text("launcher.log") or "", rank_logs, statuses, np, rank_hosts)


def ends_from_observations(
    observations: dict[int, dict], np: int, launcher_output: str = ""
) -> dict[int, dict]:
    """How each rank ended, from ``workshop check``'s observations (``rank.N.json``: status
    ``ok``, ``error`` or ``exit``, the error with its time, the exit's line and time) and the
    launcher's output (for a rank that ended without reporting: the signal that ended it)."""
    reports, stopped, _ = _launcher_reports(launcher_output)
    ends = {}
    for rank in range(np):
        obs = observations.get(rank)
        report = reports.get(rank) or {}
        launcher = {k: report.get(k) for k in _REPORTED}
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
        elif obs.get("status") == "error":  # an error the runner could not record: not an end
            ends[rank] = _end(rank, "failed", exit_code=obs.get("exit_code"), **common)
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
