"""A failed Horovod job in words, cause first: the rank whose own error or signal started the
failure (with its line and, for an error a learner can cause, the cause and fix), the other
ranks that failed on their own, then the ranks that failed only as a consequence.

Built from :func:`workshop.analysis.failure.attribute`; ``workshop run``'s message, ``workshop
check``'s report and ``workshop diagnose``'s finding all say a failure with :func:`failure_lines`.
"""

from __future__ import annotations

import re
from pathlib import Path

from workshop.readers.exits import launcher_says_no_pmi
from workshop.readers.horovod_errors import explain_horovod_error

__all__ = [
    "LEFT_FIRST_FIX",
    "NODE_LOST_FIX",
    "NO_PMI",
    "SIGNAL_MEANING",
    "failure_fix",
    "failure_lines",
    "launcher_problem",
    "lost_line",
]

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
#: The fix when one rank left the job before the others (an early stop only it decided).
LEFT_FIRST_FIX = (
    "every rank must run to the same end: decide an early stop on one rank and broadcast it "
    "(hvd.broadcast_object), and return or exit on a rank only after the last collective"
)
#: The fix when the launcher lost a node of the job (ssh gave up on it, or Open MPI its daemon).
NODE_LOST_FIX = (
    "a node of the job, or its network link, went down while it ran: bring it back (the "
    "emulated cluster: `workshop cluster status`, `workshop cluster link NODE up`; a real "
    "cluster: the scheduler's word on the node, e.g. Slurm's `sinfo -R`) and run again on "
    "nodes that are up"
)
#: The fix of a crash whose cause is not one Horovod or the workshop can name.
READ_THE_LOG = "read the failed rank's log (logs/rank.N.log) for its error"


def _exception(error: dict) -> str:
    first = (error.get("message") or "").splitlines()[:1]
    return f"{error['type']}: {first[0]}" if first and first[0] else error["type"]


def _log(end: dict, logs: Path | None) -> str:
    return f"  (log: {logs / 'rank.{}.log'.format(end['rank'])})" if logs else ""


def _said(end: dict, logs: Path | None, style: str) -> list[str]:
    """One rank's own end in words (the cause, or another rank that failed on its own)."""
    rank, how = end["rank"], end.get("how", end["state"])
    at = f" at {end['where']}" if end.get("where") else ""
    if how == "lost":
        node = f" {end['host']}" if end.get("host") else ""
        return [f'rank {rank} was lost with its node{node} ({end["launcher"]}: "{end["line"]}")']
    if how == "killed":
        code = f"exit code {end['exit_code']}, " if end.get("exit_code") is not None else ""
        outside = " from outside" if end["signal"] in _FROM_OUTSIDE else ""
        return [
            f"rank {rank} died first: killed by {end['signal']}{outside} "
            f'({code}{end["launcher"]}: "{end["line"]}")'
        ]
    if how in ("raised", "collective") or end["state"] == "raised":
        lines = [f"rank {rank} crashed{at}: {_exception(end['error'])}{_log(end, logs)}"]
        cause = explain_horovod_error(end["error"], style)
        return lines + ([f"  cause: {cause}"] if cause else [])
    if how == "exited":
        said = f' ({end["launcher"]}: "{end["line"]}")' if end.get("line") else ""
        return [f"rank {rank} left first: it exited with status {end['exit_code']}{at}{said}"]
    if how == "left first":
        steps = f" after {end['steps']} steps" if end.get("steps") is not None else ""
        return [
            f"rank {rank} left first: its script ended{at}{steps} while the other ranks "
            "still waited for it in a collective"
        ]
    if how == "vanished":
        return [
            f"rank {rank} ended without reporting (killed, out of memory, or a crash inside "
            f"native code){_log(end, logs)}"
        ]
    return [f"rank {rank} crashed: {end.get('last_line') or ''}{_log(end, logs)}"]


def _consequence(end: dict, cause: int) -> str:
    rank, why = end["rank"], f"a consequence of rank {cause}'s end, not a cause"
    if end["state"] == "stopped":
        by = end.get("launcher") or "the launcher"
        return f"rank {rank} was stopped by {by} after rank {cause}'s end: {why}"
    if end["state"] == "vanished":
        return f"rank {rank} ended without reporting after rank {cause}'s end: {why}"
    if end["state"] == "killed":  # a consequence only behind a lost node (attribute's first tier)
        by = f"{end['signal']} ({end['launcher']})"
        return f"rank {rank} was ended by {by} after rank {cause}'s end: {why}"
    words = end.get("peer_words")
    if words and words not in ("Horovod has been shut down", "HorovodInternalError"):
        return f'rank {rank} failed only because its peer vanished ("{words}" in its log): {why}'
    said = _exception(end["error"]) if end.get("error") else end.get("last_line") or "failed"
    return f"rank {rank} then failed ({said}): {why}"


def failure_lines(
    found: dict,
    *,
    logs: Path | None = None,
    style: str = "torch",
    oom_kills: int | None = None,
    oom_in_log: str | None = None,
) -> list[str]:
    """The failure in words, the cause's line first.

    Args:
        found: :func:`workshop.analysis.failure.attribute`'s result.
        logs: the run's ``logs`` folder, to name each rank's log (None: not named).
        style: the script's API (``torch``, ``tf``, ``keras``): the API a Horovod error's fix
            is written in.
        oom_kills: processes the out-of-memory killer ended in the run's cgroup meanwhile.
        oom_in_log: the launcher's words that report an out-of-memory kill.

    For a rank killed by a signal, the last line says what that signal usually means
    (:data:`SIGNAL_MEANING`, also :func:`failure_fix`).
    """
    cause = found["cause"]
    lines = _said(cause, logs, style)
    for end in found["also"]:
        lines += _said(end, logs, style)
    lines += [_consequence(end, cause["rank"]) for end in found["consequences"]]
    if cause["how"] == "killed":
        if oom_kills:
            lines.append(
                f"the out-of-memory killer ended {oom_kills} process(es) in this run's "
                f"cgroup while it ran (memory.events oom_kill): rank {cause['rank']} ran out "
                "of memory"
            )
        elif oom_in_log:
            lines.append(f'the launcher\'s log reports it: "{oom_in_log}"')
        if cause["signal"] in SIGNAL_MEANING:
            lines.append(SIGNAL_MEANING[cause["signal"]])
    return lines


def failure_fix(found: dict, style: str = "torch") -> str:
    """What to do about the cause: :data:`NODE_LOST_FIX` for a lost node, what its signal
    usually means, the fix of a Horovod error, :data:`LEFT_FIRST_FIX` for a rank that left
    first, else :data:`READ_THE_LOG`."""
    cause = found["cause"]
    if cause["how"] == "lost":
        return NODE_LOST_FIX
    if cause["how"] == "killed":
        return SIGNAL_MEANING.get(cause["signal"], READ_THE_LOG)
    if cause["how"] in ("left first", "exited"):
        return LEFT_FIRST_FIX
    if cause.get("error"):
        explained = explain_horovod_error(cause["error"], style)
        if explained and "Fix: " in explained:
            return explained.split("Fix: ", 1)[1]
    return READ_THE_LOG.replace("rank.N", f"rank.{cause['rank']}")


_SSH_TAG = re.compile(r"^\[\d+\]<stderr>:")


def _lost_reason(end: dict) -> str:
    """How the launcher saw a rank on a cluster end, in a few words."""
    if end.get("how") == "lost" and end["launcher"] == "mpirun":
        return "lost contact with the node's Open MPI daemon (its ssh ended: node or link down)"
    if end.get("how") == "lost":
        return _SSH_TAG.sub("", end["line"]).rstrip(".")  # ssh's "Timeout, server ..."
    if end.get("signal"):
        return f"killed by {end['signal']}"
    code = end.get("exit_code")
    if code == 255:  # ssh's own status: the session to the rank's node ended
        return (
            "its process ended with exit status 255 (255: its ssh session ended: the process "
            "was killed, or the node or its link went down)"
        )
    if code is not None:
        return f"its process ended with exit status {code}"
    return _said(end, None, "torch")[0].removeprefix(f"rank {end['rank']} ")


def lost_line(record: dict) -> str | None:
    """``first lost: rank N on host H: REASON``: where a failed run on a cluster started to
    fail, from run.json's ``failure`` (:func:`workshop.analysis.failure.attribute`'s answer:
    its cause's ``host``, which the reader takes from run.json's ``cluster.rank_hosts``, and
    the ranks of ``also`` on that host). None for a run off a cluster or without a cause.

    A run.json written before the host was folded into ``failure`` holds this answer in a key
    of its own, ``first_failure`` (``{"host", "ranks", "reason", "line"}``); it is read as it
    stands, so an old record still says its line.

    >>> lost_line({"first_failure": {"host": "nodeb", "ranks": [1], "reason": "Timeout"}})
    'first lost: rank 1 on host nodeb: Timeout'
    """
    if record.get("first_failure"):
        old = record["first_failure"]
        ranks, host, reason = old["ranks"], old["host"], old["reason"]
    else:
        found = record.get("failure")
        host = found["cause"].get("host") if found else None
        if not record.get("cluster") or not host:
            return None
        also = [e["rank"] for e in found["also"] if e.get("host") == host]
        ranks, reason = [found["cause"]["rank"], *also], _lost_reason(found["cause"])
    return f"first lost: rank {', '.join(map(str, ranks))} on host {host}: {reason}"


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
    line = launcher_says_no_pmi(launcher_log)
    if line is None:
        return None
    cause, fix = NO_PMI
    return f'{cause} (the launcher\'s log: "{line}"). Fix: {fix}'
