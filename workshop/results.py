"""What a notebook found, saved as JSON so tests can check it (papermill passes the path)."""

from __future__ import annotations

import json
import math
from pathlib import Path


def _plain(value):
    """numpy/pandas scalars -> Python numbers; NaN -> None (JSON has no NaN)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def save(path: str | Path, values: dict) -> dict:
    """Write ``values`` (name -> number, string or bool) to ``path`` when a path is given.

    Returns the values as written, so the notebook can display them.
    """
    plain = {key: _plain(value) for key, value in values.items()}
    if path:
        Path(path).write_text(json.dumps(plain, indent=2, sort_keys=True) + "\n")
    return plain
