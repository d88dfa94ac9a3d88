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


#: The list of data/ folders whose timings were recorded before the quiet-machine gate.
PENDING_FILE = "quiet-pending.json"


def quiet_problems(root: Path | str | None = None) -> list[str]:
    """What breaks the quiet-machine rule among the performance recordings under ``root``
    (default: the data folder): every run directory that finished (``status: ok``) must hold
    the ``recording`` record of :func:`workshop.launch.quiet.recorded` with ``quiet`` true and
    ``foreign_cores`` within the threshold, and every compute-baseline entry likewise, unless
    its folder is listed in ``quiet-pending.json`` (recorded before the gate existed; each
    listed folder must still hold such a run, so the list only shrinks).

    Returns:
        One line per problem, naming the file and what is wrong (empty: all good).
    """
    import json

    from workshop.rules import MAX_FOREIGN_CORES

    root = Path(root) if root else data_dir()
    pending_path = root / PENDING_FILE
    pending = []
    if pending_path.exists():
        pending = [f.rstrip("/") for f in json.loads(pending_path.read_text())["folders"]]
    still_pending: set[str] = set()
    problems = []

    def judge(where: str, record: dict | None) -> None:
        if record is None:
            listed = next((p for p in pending if where == p or where.startswith(p + "/")), None)
            if listed:
                still_pending.add(listed)
            else:
                problems.append(f"{where}: no 'recording' record (not recorded through "
                                "workshop.launch.quiet: `workshop sweep --record`)")  # fmt: skip
            return
        limit = record.get("max_foreign_cores")
        foreign = record.get("foreign_cores")
        if limit is None or foreign is None or limit > MAX_FOREIGN_CORES:
            problems.append(f"{where}: 'recording' lacks foreign_cores or has a threshold above "
                            f"{MAX_FOREIGN_CORES} ({record})")  # fmt: skip
        elif foreign > limit or not record.get("quiet"):
            problems.append(f"{where}: disturbed: other work took {foreign} cores (threshold "
                            f"{limit})")  # fmt: skip

    for run_json in sorted(root.rglob("run.json")):
        where = str(run_json.parent.relative_to(root))
        try:
            record = json.loads(run_json.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{where}/run.json: unreadable ({exc})")
            continue
        if record.get("status") == "ok":
            judge(where, record.get("recording"))
    for baseline in sorted(root.rglob("compute-baseline.jsonl")):
        where = str(baseline.relative_to(root))
        for number, line in enumerate(baseline.read_text().splitlines(), start=1):
            if line.strip():
                judge(f"{where}:{number}", json.loads(line).get("recording"))
    for folder in pending:
        if folder not in still_pending:
            problems.append(f"{PENDING_FILE}: {folder} holds no run without the record any more "
                            "(or does not exist): take it off the list")  # fmt: skip
    return problems
