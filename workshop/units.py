"""How the package writes values for people and for JSON (one home, one convention each).

Sizes: binary units throughout, named as such (KiB = 1024 bytes, MiB = 2**20, GiB = 2**30):
Horovod's own sizes are powers of two (its fusion buffer: ``128 * 1024 * 1024`` bytes by default
since 0.21, 64 MiB before; its docs and ``horovodrun --help`` call them MB), and GPU memory is
sold in GiB (:func:`format_bytes`).

Values for JSON: numpy and pandas scalars become the Python values they hold (:func:`plain`),
and :func:`json_safe` converts whole results (NaN and infinities become None: JSON has
neither). Standard library only, so every layer may import it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

_UNITS = ("KiB", "MiB", "GiB", "TiB")


def format_bytes(n: float | None) -> str:
    """``n`` bytes as a short string with binary units, three significant digits.

    >>> format_bytes(8), format_bytes(4096), format_bytes(1.5 * 2**20), format_bytes(100e6)
    ('8 B', '4 KiB', '1.5 MiB', '95.4 MiB')
    >>> format_bytes(float("nan"))
    'n/a'
    """
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return "n/a"
    n = float(n)
    if abs(n) < 999.5:  # what rounds to 1000 or more moves up a unit: no "1.02e+03 KiB"
        return f"{n:.0f} B"
    for unit in _UNITS:
        n /= 1024
        if abs(n) < 999.5:
            return f"{n:.3g} {unit}"
    return f"{n:,.0f} {_UNITS[-1]}"


def plain(value: Any) -> Any:
    """A numpy or pandas scalar as the Python number, bool or string it holds (its
    ``.item()``); anything else as it is.

    >>> import numpy as np
    >>> plain(np.int64(3)), plain(np.bool_(True)), plain("3"), plain((1, 2))
    (3, True, '3', (1, 2))
    """
    return value.item() if hasattr(value, "item") else value


def json_safe(value: Any) -> Any:
    """``value`` made fit for JSON (the one home for this conversion).

    numpy/pandas scalars become Python numbers (:func:`plain`); NaN and infinities become None
    (JSON has neither); dicts (keys made strings), lists and tuples are converted item by item.

    >>> import numpy as np
    >>> json_safe({1: np.float64("nan"), "n": [np.int64(3), (float("inf"), 0.5)]})
    {'1': None, 'n': [3, [None, 0.5]]}
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    value = plain(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json_atomic(
    path: str | os.PathLike,
    payload: Any,
    *,
    indent: int = 2,
    sort_keys: bool = False,
    default: Any = None,
    mode: int | None = None,
) -> None:
    """Write ``payload`` as JSON to ``path`` so that a reader never sees half a file: into a
    temporary file beside it (flushed to disk), then renamed over it (:func:`os.replace`); a
    crash leaves the old file whole and no temporary file behind. The one atomic JSON write
    of the workshop (run.json, a sweep's manifest, the room's records, a rank's settings, ...).

    Args:
        mode: the file's permissions (e.g. ``0o640``); None: the process's default.
    """
    path = Path(path)
    text = json.dumps(payload, indent=indent, sort_keys=sort_keys, default=default) + "\n"
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8") as out:
            if mode is not None:
                os.fchmod(out.fileno(), mode)
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
