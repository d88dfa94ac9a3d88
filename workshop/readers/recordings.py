"""What recorded samples ship in data/, and where each came from."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from workshop.paths import data_dir
from workshop.readers.runs import read_run


def _describe(folder: Path) -> str:
    if (folder / "run.json").exists():
        run = read_run(folder)
        config = run.get("config", {})
        return (
            f"{config.get('framework')} {config.get('dataset')} np={config.get('np')} "
            f"{config.get('controller')} on {run.get('host', {}).get('hostname')}, "
            f"{run.get('started_at', '')[:10]}, status {run.get('status')}"
        )
    for name in ("README.md", "PROVENANCE.md"):
        readme = folder / name
        if readme.exists():
            lines = [line.strip("# ").strip() for line in readme.read_text().splitlines()]
            return next((line for line in lines if line), "")
    return ""


def list_recordings(root: Path | str | None = None) -> pd.DataFrame:
    """One row per recorded scenario under ``root`` (default: the workshop's data folder).

    A scenario is a folder two levels down (``data/<kind>/<scenario>/``).

    Columns: kind (e.g. runs, timelines, mpi, sweeps, seeds), scenario, description (from
    run.json or the folder's README/PROVENANCE), files (count), size_kb, path.
    """
    root = Path(root) if root else data_dir()
    rows = []
    for kind in sorted(p for p in root.iterdir() if p.is_dir()):
        for folder in sorted(p for p in kind.iterdir() if p.is_dir()):
            files = [p for p in folder.rglob("*") if p.is_file()]
            rows.append(
                {
                    "kind": kind.name,
                    "scenario": folder.name,
                    "description": _describe(folder),
                    "files": len(files),
                    "size_kb": round(sum(p.stat().st_size for p in files) / 1024, 1),
                    "path": str(folder),
                }
            )
    return pd.DataFrame(
        rows, columns=["kind", "scenario", "description", "files", "size_kb", "path"]
    )
