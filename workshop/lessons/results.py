"""What a notebook found, saved as JSON so tests can check it (papermill passes the path)."""

from __future__ import annotations

import json
from pathlib import Path

from workshop.units import json_safe


def save(path: str | Path, values: dict) -> dict:
    """Write ``values`` (name -> number, string or bool) to ``path`` when a path is given.

    Returns the values as written, so the notebook can display them.
    """
    plain = {key: json_safe(value) for key, value in values.items()}
    if path:
        Path(path).write_text(json.dumps(plain, indent=2, sort_keys=True) + "\n")
    return plain
