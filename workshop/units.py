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

import math
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
