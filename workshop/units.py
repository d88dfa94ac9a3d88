"""How the package writes sizes for people (one home, one convention).

Binary units throughout, named as such (KiB = 1024 bytes, MiB = 2**20, GiB = 2**30): Horovod's
own sizes are powers of two (its fusion buffer: ``128 * 1024 * 1024`` bytes by default since
0.21, 64 MiB before; its docs and ``horovodrun --help`` call them MB), and GPU memory is sold in
GiB. Standard library only, so every layer may import it.
"""

from __future__ import annotations

import math

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
