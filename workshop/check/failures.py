"""Plain words for the crashes learners' Horovod scripts commonly meet on a CPU machine.

:func:`explain_crash` reads a rank's error (type, message, traceback) and the run's output and
returns one paragraph that names the line and the fix, or None when no rule applies. Rules,
one function each, tried in order (:data:`_RULES`):

- an unguarded ``gpus[hvd.local_rank()]`` (TensorFlow's GPU list is empty on a CPU machine:
  ``IndexError``), or ``torch.cuda.set_device(hvd.local_rank())`` without a GPU;
- a data set download that failed because the machine is offline (or the address cannot be
  reached): which URL, and that Binder and clusters with internet can download;
- a data set read from a folder that does not exist here (a cluster path such as
  ``/soft/datascience/...``): which folder, and what to do.

Horovod's own errors that a script causes (mismatched root ranks, shapes, dtypes, ops;
``backward_passes_per_step``; a name submitted twice; no ``hvd.init()``) are explained first,
by :mod:`workshop.readers.horovod_errors`; tracebacks are read by
:mod:`workshop.readers.tracebacks` (which ``workshop run``'s crash summary shares).

The line named is the learner's own (the innermost frame of the script), not the library's.
:func:`explain_shutdown` explains Horovod's "has been shut down" by the rank that left first,
:func:`workshop.analysis.failure.attribute`'s answer (as :func:`crash_report` does).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from workshop.analysis.failure import attribute
from workshop.check.evidence import ranks_text
from workshop.check.steps import unequal_steps
from workshop.readers.exits import ends_from_observations
from workshop.readers.horovod_errors import explain_horovod_error
from workshop.readers.tracebacks import fold, last_frame, script_frame, where

_URL = re.compile(r"\b(?:https?|ftp)://[^\s'\"<>),]+")
# Words of a failed connection, from urllib, socket, requests and the libraries' own messages.
_NETWORK_WORDS = (
    "urlopen error",
    "URLError",
    "URL fetch failure",
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "Network is unreachable",
    "Connection refused",
    "Connection timed out",
    "Max retries exceeded",
    "getaddrinfo failed",
    "Error downloading",
    "Failed to establish a new connection",
)


def _gpu_by_local_rank(error: dict, output: str) -> str | None:
    frame = last_frame(error.get("traceback") or "")
    if error.get("type") == "IndexError" and frame and "local_rank()" in frame[2]:
        return (
            f"{where(frame)} picks a GPU by hvd.local_rank(), but this machine has no GPU: "
            "the GPU list is empty. Guard it, as Horovod's examples do: `gpus = "
            "tf.config.list_physical_devices('GPU')`, then `if gpus: "
            "tf.config.set_visible_devices(gpus[hvd.local_rank()], 'GPU')`; on a CPU the ranks "
            "then run on the CPU"
        )
    message = error.get("message") or ""
    cuda_words = ("Torch not compiled with CUDA enabled", "No CUDA GPUs are available",
                  "Found no NVIDIA driver")  # fmt: skip
    if any(words in message for words in cuda_words):
        frame = script_frame(error)
        place = f"{where(frame)}: " if frame else ""
        return (
            f"{place}the script asks for a CUDA GPU, and this machine has none. Guard it: "
            "`if torch.cuda.is_available(): torch.cuda.set_device(hvd.local_rank())`, and move "
            "the model and batches to the GPU only then (Horovod's examples use args.cuda)"
        )
    return None


def _offline_download(error: dict, output: str) -> str | None:
    text = "\n".join(str(error.get(key) or "") for key in ("type", "message", "traceback"))
    if not any(words in text for words in _NETWORK_WORDS):
        return None
    urls = _URL.findall(error.get("message") or "") or _URL.findall(text) or _URL.findall(output)
    if not urls:
        return None
    url = urls[-1].rstrip(".:;")
    reason = next(words for words in _NETWORK_WORDS if words in text)
    return (
        f"the script tried to download {url} and could not reach it ({reason}): this machine "
        "is offline, or that address cannot be reached from it. On Binder or on a cluster with "
        "internet access the download works (on a cluster, download once on a login node, "
        "since compute nodes are often offline); here, put the files where the script looks "
        "for them first (torchvision: ROOT/MNIST/raw/*-ubyte; Keras: ~/.keras/datasets/), "
        "or use data that is already on the machine"
    )


_QUOTED_PATH = re.compile(r"""['"](/[^'"]+)['"]""")
_MISSING_DATA_WORDS = ("Dataset not found", "No such file or directory", "does not exist")


def _missing_data(error: dict, output: str) -> str | None:
    """A data set read from a folder that is not on this machine (a cluster's path)."""
    message = error.get("message") or ""
    if not any(words in message for words in _MISSING_DATA_WORDS):
        return None
    frame = script_frame(error)
    paths = _QUOTED_PATH.findall(message) + (_QUOTED_PATH.findall(frame[2]) if frame else [])
    path = next((p for p in paths if not os.path.exists(p)), None)
    if path is None:
        return None
    place = f"{where(frame)} " if frame else "the script "
    return (
        f"{place}reads its data from {path}, which does not exist on this machine (a path of "
        "the cluster the script was written for?). Point it to a folder here, e.g. ./data, "
        "and pass download=True where the machine is online (Binder, a cluster's login "
        "node); offline, put the files in that folder first (torchvision: "
        "ROOT/MNIST/raw/*-ubyte)"
    )


_RULES: tuple[Callable[[dict, str], str | None], ...] = (
    _gpu_by_local_rank,
    _offline_download,
    _missing_data,
)


def _shut_down_by(cause: dict, also: list[dict], rank: int) -> str:
    """Rank ``rank``'s "has been shut down" as the consequence of ``cause``, the rank that
    :func:`workshop.analysis.failure.attribute` found had left first, with an exit status of
    its own or without reporting (and the ranks of ``also`` that left the same way)."""
    left = [cause, *(e for e in also if e["state"] == cause["state"])]
    names = ranks_text([e["rank"] for e in left])
    if cause["how"] == "exited":
        codes = ", ".join(f"rank {e['rank']} status {e['exit_code']}" for e in left)
        return (
            f"{names} left first (sys.exit: {codes}), and Horovod shut down: rank {rank}'s "
            "error is only the consequence. Fix: every rank must run to the same end; return "
            "or exit on one rank only after the last collective"
        )
    return (
        f"{names} ended without reporting (killed, out of memory, or a crash inside native "
        f"code) and Horovod shut down: rank {rank}'s error is only the consequence; look at "
        f"why {names} ended (the output above)"
    )


def explain_crash(
    error: dict, output: str = "", rank: int | None = None, style: str = "torch"
) -> str | None:
    """Plain words for a rank's crash, or None when no rule knows it.

    Args:
        error: the rank's ``error`` record (``type``, ``message``, ``traceback``), as the runner
            writes it (:mod:`workshop.check.observe`).
        output: the run's combined output (horovodrun's ``[rank]<stream>:`` lines): where a
            library printed the URL it was downloading.
        rank: the rank that crashed (to read only its lines of ``output``).
        style: the script's API (``torch``, ``tf``, ``keras``), for the fix of a Horovod error
            (:mod:`workshop.readers.horovod_errors`).

    >>> explain_crash({"type": "ValueError", "message": "bad batch", "traceback": ""}) is None
    True
    """
    if rank is not None:
        mine = [line for line in output.splitlines() if line.startswith(f"[{rank}]")]
        output = "\n".join(mine) or output
    found = explain_horovod_error(error, style)
    if style == "ddp":
        from workshop.check.ddp_failures import explain_ddp_error

        found = found or explain_ddp_error(error, output)
    for rule in _RULES:
        found = found or rule(error, output)
    return "What happened: " + found + "." if found else None


#: How a rank can leave before the others, so that Horovod shuts down under them (attribute's
#: ``how``).
_LEFT = ("exited", "killed", "vanished", "left first")


def explain_shutdown(
    observations: dict[int, dict], rank: int, np: int | None = None
) -> str | None:
    """Plain words for Horovod's "has been shut down" on ``rank``, from the rank that left
    first (:func:`workshop.analysis.failure.attribute` of the observations): a rank that
    finished shut Horovod down while ``rank`` still submitted a collective (from which line;
    with the unequal step counts that usually cause it); a rank that exited with a status of
    its own (sys.exit), or one of the ``np`` ranks that ended without reporting (killed), left
    first and ``rank``'s error is the consequence. None when no other rank left first (the
    cause is an error, or ``rank`` itself)."""
    error = (observations.get(rank) or {}).get("error") or {}
    if "shut down" not in (error.get("message") or ""):
        return None
    # which rank left first is attribute's answer: a rank's exit, its silence, or its finish
    size = np or max(observations, default=-1) + 1
    found = attribute(ends_from_observations(observations, size))
    cause = found["cause"] if found else {"rank": rank, "how": None}
    if cause["rank"] == rank or cause["how"] not in _LEFT:
        return None
    if cause["how"] != "left first":
        return _shut_down_by(cause, found["also"], rank)
    done = [cause["rank"]]
    frame = script_frame(error)
    at = f" at {where(frame)}" if frame else ""
    steps = {
        r: max(len(o.get("steps") or []), o.get("steps_started", 0))
        for r, o in observations.items()
    }
    finished = ", ".join(f"rank {r} after {steps[r]} steps" for r in done)
    text = (
        f"{ranks_text(done)} finished ({finished}) and shut Horovod down while rank {rank} "
        f"still submitted a collective{at}, in its step {max(1, steps[rank])}: every rank must "
        "make the same collectives"
    )
    ranked = [observations[r] for r in sorted(observations)]
    unequal = unequal_steps(ranked)
    if unequal:
        text += f"; {unequal}. Fix: give every rank the same number of batches per epoch"
    return text


#: How many lines of a crashed rank's folded traceback the report shows.
TRACEBACK_LINES = 15


def _then(found: dict) -> str:
    """The consequences in a few words: ``; then rank 0 failed (at LINE: TYPE: MESSAGE)``."""
    parts = []
    for end in found["consequences"]:
        error = end.get("error") or {}
        at = f" at {end['where']}" if end.get("where") else ""
        said = f"{error['type']}: {(error.get('message') or '').splitlines()[0]}" if error else ""
        parts.append(f"rank {end['rank']} failed{at}" + (f" ({said})" if said else ""))
    if not parts:
        return ""
    return f"; then {', '.join(parts)}: the consequence, not the cause"


def crash_report(
    observations: dict[int, dict], np: int, output: str = "", exit_code: int | None = None,
    style: str = "torch",
) -> tuple[str, str] | None:  # fmt: skip
    """The failed run as ``workshop check`` reports it, cause first
    (:func:`workshop.analysis.failure.attribute`): the rank whose own error, signal or early
    end started the failure, the learner's line, what happened (the cause and fix), then the
    ranks that failed as a consequence; the traceback (library and checker frames folded) of
    the rank that raised. None when every rank ended well.

    Returns:
        (the learner's view, the full traceback or "").
    """
    found = attribute(ends_from_observations(observations, np, output))
    if found is None:
        return None
    cause = found["cause"]
    rank, how = cause["rank"], cause["how"]
    at = f"\n  at {cause['where']}" if cause.get("where") else ""
    then = _then(found)
    error = cause.get("error")
    explained = None
    if error and how in ("raised", "collective", "failed"):
        others = [e["rank"] for e in (*found["also"], *found["consequences"])]
        also = f" (then {', '.join(f'rank {r}' for r in sorted(others))} failed too)"
        head = f"the script crashed on rank {rank}: {error['type']}: {error['message']}"
        head += (also if others else "") + at
        explained = explain_crash(error, output, rank, style)
        shutdown = explain_shutdown(observations, rank, np)
        if shutdown:
            explained = f"What happened: {shutdown}." + (f"\n{explained}" if explained else "")
    elif how == "killed":
        head = (
            f"rank {rank} was killed by {cause['signal']} from outside ({cause['launcher']}: "
            f'"{cause["line"]}"){then}'
        )
    elif how == "exited":
        where_ = f" at {cause['where']}" if cause.get("where") else ""
        head = f"the script exited with status {cause['exit_code']} on rank {rank} (sys.exit)"
        head += where_ + then
    elif how == "left first":
        where_ = f" at {cause['where']}" if cause.get("where") else ""
        head = (
            f"rank {rank} left first: its script ended{where_} after {cause['steps']} steps "
            f"while the other ranks still waited for it{then}"
        )
    else:  # vanished
        tail = output.rstrip().splitlines()[-TRACEBACK_LINES:]
        head = (
            f"rank {rank} ended without reporting (killed, out of memory, or crashed inside "
            f"native code); horovodrun exit code {exit_code}; its output ends with:\n"
            + "\n".join("    " + t for t in tail)
        )
    if how in ("exited", "left first", "killed") and found["consequences"]:
        first = found["consequences"][0]["rank"]
        shutdown = explain_shutdown(observations, first, np)
        explained = f"What happened: {shutdown}." if shutdown else None
    if style == "ddp":
        from workshop.check.ddp_failures import explain_ddp_consequence

        consequence = explain_ddp_consequence(observations, output)
        if consequence and how != "raised":
            explained = f"What happened: {consequence}." + (f"\n{explained}" if explained else "")
        elif consequence and "ChildFailedError" in consequence:
            explained = (explained + "\n" if explained else "") + (
                "torchrun's ChildFailedError only says that a rank failed: the cause is rank "
                f"{rank}'s own error above."
            )
    # the traceback of the rank that raised, else of the first rank that failed after it
    consequence_errors = [e["error"] for e in found["consequences"] if e.get("error")]
    error = error or next(iter(consequence_errors), None)
    if not error or not error.get("traceback"):
        return head + (f"\n{explained}" if explained else ""), ""
    folded = fold(error["traceback"], error.get("script")).rstrip().splitlines()
    tail = "\n".join("    " + t for t in folded[-TRACEBACK_LINES:])
    text = head + (f"\n{explained}" if explained else "") + "\n" + tail
    return text, error["traceback"]
