"""Plain words for the crashes learners' Horovod scripts commonly meet on a CPU machine.

:func:`explain_crash` reads a rank's error (type, message, traceback) and the run's output and
returns one paragraph that names the line and the fix, or None when no rule applies. Rules,
one function each, tried in order (:data:`_RULES`):

- an unguarded ``gpus[hvd.local_rank()]`` (TensorFlow's GPU list is empty on a CPU machine:
  ``IndexError``), or ``torch.cuda.set_device(hvd.local_rank())`` without a GPU;
- a data set download that failed because the machine is offline (or the address cannot be
  reached): which URL, and that Binder and clusters with internet can download.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# A traceback frame: File "PATH", line N, in NAME, then the source line (when Python has it).
_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in [^\n]*\n(?P<code>[^\n]*)')
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


def _last_frame(traceback_text: str) -> tuple[str, int, str] | None:
    """(file, line number, source) of the innermost frame of a traceback, or None."""
    frames = list(_FRAME.finditer(traceback_text))
    if not frames:
        return None
    last = frames[-1]
    return last["path"], int(last["line"]), last["code"].strip()


def _where(frame: tuple[str, int, str]) -> str:
    path, line, code = frame
    name = path.rsplit("/", 1)[-1]
    return f"line {line} of {name}" + (f" ({code})" if code else "")


def _gpu_by_local_rank(error: dict, output: str) -> str | None:
    frame = _last_frame(error.get("traceback") or "")
    if error.get("type") == "IndexError" and frame and "local_rank()" in frame[2]:
        return (
            f"{_where(frame)} picks a GPU by hvd.local_rank(), but this machine has no GPU: "
            "the GPU list is empty. Guard it, as Horovod's examples do: `gpus = "
            "tf.config.list_physical_devices('GPU')`, then `if gpus: "
            "tf.config.set_visible_devices(gpus[hvd.local_rank()], 'GPU')`; on a CPU the ranks "
            "then run on the CPU"
        )
    message = error.get("message") or ""
    cuda_words = ("Torch not compiled with CUDA enabled", "No CUDA GPUs are available",
                  "Found no NVIDIA driver")  # fmt: skip
    if any(words in message for words in cuda_words):
        where = f"{_where(frame)}: " if frame else ""
        return (
            f"{where}the script asks for a CUDA GPU, and this machine has none. Guard it: "
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


_RULES: tuple[Callable[[dict, str], str | None], ...] = (_gpu_by_local_rank, _offline_download)


def explain_crash(error: dict, output: str = "", rank: int | None = None) -> str | None:
    """Plain words for a rank's crash, or None when no rule knows it.

    Args:
        error: the rank's ``error`` record (``type``, ``message``, ``traceback``), as the runner
            writes it (:mod:`workshop.check.observe`).
        output: the run's combined output (horovodrun's ``[rank]<stream>:`` lines): where a
            library printed the URL it was downloading.
        rank: the rank that crashed (to read only its lines of ``output``).

    >>> explain_crash({"type": "ValueError", "message": "bad batch", "traceback": ""}) is None
    True
    """
    if rank is not None:
        mine = [line for line in output.splitlines() if line.startswith(f"[{rank}]")]
        output = "\n".join(mine) or output
    for rule in _RULES:
        found = rule(error, output)
        if found:
            return "What happened: " + found + "."
    return None
