"""What a notebook found, saved as JSON so tests can check it (papermill passes the path)."""

from __future__ import annotations

import json
import math
from pathlib import Path


def json_safe(value):
    """``value`` made fit for JSON (the one home for this conversion).

    numpy/pandas scalars become Python numbers; NaN and infinities become None (JSON has
    neither); dicts (keys made strings), lists and tuples are converted item by item.

    >>> import numpy as np
    >>> json_safe({1: np.float64("nan"), "n": [np.int64(3), (float("inf"), 0.5)]})
    {'1': None, 'n': [3, [None, 0.5]]}
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def save(path: str | Path, values: dict) -> dict:
    """Write ``values`` (name -> number, string or bool) to ``path`` when a path is given.

    Returns the values as written, so the notebook can display them.
    """
    plain = {key: json_safe(value) for key, value in values.items()}
    if path:
        Path(path).write_text(json.dumps(plain, indent=2, sort_keys=True) + "\n")
    return plain
