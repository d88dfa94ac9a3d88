"""A crashed rank's traceback as a learner reads it: their own line first, the frames of the
libraries (``site-packages``, Python's own) and of the checker (``workshop/check/``) folded
away. The full traceback stays in ``workshop check --verbose`` and ``--json``, and in the rank's
log for ``workshop run``.

Pure text in, text out: ``workshop check`` (:mod:`workshop.check`) reads the error records its
ranks send; ``workshop run`` (:mod:`workshop.launch.run`) reads them out of each crashed rank's
log with :func:`log_error`."""

from __future__ import annotations

import re

__all__ = ["fold", "last_frame", "log_error", "script_frame", "where"]

# A traceback frame: File "PATH", line N, in NAME, then the source line (when Python has it).
_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+), in [^\n]*\n(?P<code>[^\n]*)')
_FRAME_START = re.compile(r'^\s*File "(?P<path>[^"]+)", line \d+')
# Where library and checker frames live: folded away in the learner's view.
_FOLDED_PARTS = ("-packages/", "/lib/python", "/workshop/check/", "<frozen ")
_TRACEBACK_START = "Traceback (most recent call last):"


def last_frame(traceback_text: str) -> tuple[str, int, str] | None:
    """(file, line number, source) of the innermost frame of a traceback, or None."""
    frames = list(_FRAME.finditer(traceback_text))
    if not frames:
        return None
    last = frames[-1]
    return last["path"], int(last["line"]), last["code"].strip()


def _folded(path: str, script: str | None) -> bool:
    return path != script and any(part in path for part in _FOLDED_PARTS)


def script_frame(error: dict) -> tuple[str, int, str] | None:
    """The innermost frame of the learner's script (the runner records its path), else the
    innermost frame outside Python's, the libraries' and the checker's folders, else the
    innermost one."""
    frames = [
        (f["path"], int(f["line"]), f["code"].strip())
        for f in _FRAME.finditer(error.get("traceback") or "")
    ]
    if not frames:
        return None
    script = error.get("script")
    own = [f for f in frames if script and f[0] == script]
    if own:
        return own[-1]
    outside = [f for f in frames if not _folded(f[0], None)]
    return (outside or frames)[-1]


def where(frame: tuple[str, int, str]) -> str:
    """``line N of NAME (code)``."""
    path, line, code = frame
    name = path.rsplit("/", 1)[-1]
    return f"line {line} of {name}" + (f" ({code})" if code else "")


# The lines that join chained tracebacks (an exception raised while handling another).
_CHAIN = re.compile(
    r"\n\n(?:During handling of the above exception, another exception occurred|The above "
    r"exception was the direct cause of the following exception):\n\n"
)


def fold(traceback_text: str, script: str | None = None) -> str:
    """The traceback with each run of library and checker frames replaced by one line that
    counts them; the learner's frames and the exception lines stay. Of chained tracebacks,
    those without a frame of the learner's are left out (a library re-raising its own error),
    the last one always kept.

    >>> tb = ('Traceback (most recent call last):\\n'
    ...       '  File "/w/train.py", line 9, in <module>\\n    step()\\n'
    ...       '  File "/v/site-packages/horovod/torch/mpi_ops.py", line 3, in f\\n    x\\n'
    ...       '    ^^^\\n'
    ...       '  File "/r/workshop/check/hooks_torch.py", line 5, in g\\n    y\\n'
    ...       'ValueError: no')
    >>> print(fold(tb, "/w/train.py"))
    Traceback (most recent call last):
      File "/w/train.py", line 9, in <module>
        step()
      [2 frames of libraries and the checker folded: --verbose shows them]
    ValueError: no
    """
    sections = _CHAIN.split(traceback_text)
    kept = [
        section
        for section in sections[:-1]
        if any(not _folded(m["path"], script) for m in _FRAME.finditer(section))
    ]
    traceback_text = "\n\n".join([*kept, sections[-1]])
    out: list[str] = []
    hidden = 0
    in_hidden_frame = False

    def flush() -> None:
        nonlocal hidden
        if hidden:
            plural = "frame" if hidden == 1 else "frames"
            out.append(f"  [{hidden} {plural} of libraries and the checker folded: --verbose "
                       "shows them]")  # fmt: skip
            hidden = 0

    for line in traceback_text.splitlines():
        start = _FRAME_START.match(line)
        if start:
            in_hidden_frame = _folded(start["path"], script)
            if in_hidden_frame:
                hidden += 1
                continue
            flush()
            out.append(line)
        elif in_hidden_frame and line.startswith("    "):
            continue  # the folded frame's source line and its ^^^ marks
        else:
            in_hidden_frame = False
            flush()
            out.append(line)
    flush()
    return "\n".join(out)


def log_error(log_text: str) -> dict | None:
    """The last Python traceback in a rank's log, as the error record ``workshop check`` keeps
    (``type``, ``message``, ``traceback``, ``script``: None, the script is not known), or None
    when the log has no traceback. Of chained tracebacks, the last (the one that ended the rank).

    >>> log = ('Epoch 1: loss 2.1\\nTraceback (most recent call last):\\n'
    ...        '  File "/w/train.py", line 9, in <module>\\n    step()\\n'
    ...        'ValueError: bad batch\\n')
    >>> error = log_error(log)
    >>> error["type"], error["message"], where(script_frame(error))
    ('ValueError', 'bad batch', 'line 9 of train.py (step())')
    >>> log_error("Epoch 1: loss 2.1\\nKilled") is None
    True
    """
    start = log_text.rfind(_TRACEBACK_START)
    if start < 0:
        return None
    lines = log_text[start:].splitlines()
    # the frames are indented; the exception is the first line that is not
    at = next((i for i, line in enumerate(lines[1:], 1) if line and not line[0].isspace()), None)
    if at is None:
        return None
    exception = []
    for line in lines[at:]:
        if not line.strip():
            break
        exception.append(line)
    kind, _, first = exception[0].partition(": ")
    return {
        "type": kind.strip(),
        "message": "\n".join([first, *exception[1:]]).strip(),
        "traceback": "\n".join(lines[: at + len(exception)]),
        "script": None,
    }
