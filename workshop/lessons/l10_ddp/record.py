"""Lesson 10's runs for real: the DDP program of lesson 02's model with a torch.profiler trace
per rank (``programs/ddp_profiled.py``), at DDP's default bucket size or another one; and
``workshop check`` on the lesson's DDP script with a mistake and on its fix.

What the lesson replays was made with these functions through the recording path (a quiet
machine, the other work measured): ``python scripts/record_lesson10.py`` writes
``data/ddp-lesson/``. With ``LIVE = True`` the notebook calls :func:`record_traces` itself.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent / "programs"
PROFILED = PROGRAMS / "ddp_profiled.py"
MISTAKE = PROGRAMS / "ddp_torch_mistake.py"
NP = 2
#: The bucket sizes the lesson compares: DDP's default (``bucket_cap_mb`` left out: 25 MiB)
#: and 0 (every gradient tensor a bucket of its own: no two are reduced together).
BUCKETS = {"default": None, "cap0": 0.0}
BRANCH = PROGRAMS / "ddp_rank_branch.py"
#: ``workshop check``'s arguments for the lesson's scripts: 10 steps of each epoch, and a
#: temporary checkpoint folder (``{ckpt}``), so that the saves are judged.
CHECK_ARGS = ("--steps", "10", "--checkpoint", "{ckpt}")


def _from_top(path: Path) -> str:
    """``path`` from the repository's top when it lies inside it."""
    top = PROGRAMS.parents[3]
    return str(path.relative_to(top)) if path.is_relative_to(top) else str(path)


def torchrun_command(out: Path, bucket_cap_mb: float | None) -> list[str]:
    """The command that records ``out/rank<R>.json`` on :data:`NP` ranks."""
    launch = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(NP)]
    cap = [] if bucket_cap_mb is None else ["--bucket-cap-mb", f"{bucket_cap_mb:g}"]
    return [sys.executable, *launch, str(PROFILED), str(out), *cap]


def record_traces(target: Path, bucket_cap_mb: float | None = None) -> dict:
    """Run the profiled DDP program once and keep its traces in ``target/traces/`` (gzipped:
    ``rank<R>.json.gz``, which the reader and https://ui.perfetto.dev open as they are).

    Returns:
        ``command`` (as run, from the repository's top), ``started_utc``, ``seconds``.

    Raises:
        RuntimeError: torchrun failed (its output in the message).
    """
    staging = Path(tempfile.mkdtemp(prefix="ddp-lesson-"))
    try:
        command = torchrun_command(staging, bucket_cap_mb)
        started = datetime.now(UTC)
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
        seconds = (datetime.now(UTC) - started).total_seconds()
        if done.returncode != 0:
            raise RuntimeError(
                f"torchrun failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        traces = target / "traces"
        traces.mkdir(parents=True, exist_ok=True)
        for trace in sorted(staging.glob("rank*.json")):
            with trace.open("rb") as raw, gzip.open(traces / f"{trace.name}.gz", "wb") as packed:
                shutil.copyfileobj(raw, packed)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    shown = ["python", *command[1:]]
    shown[shown.index(str(PROFILED))] = _from_top(PROFILED)
    shown[shown.index(str(staging))] = _from_top(target.resolve() / "traces")
    return {
        "command": " ".join(shown),
        "bucket_cap_mb": bucket_cap_mb,
        "started_utc": started.isoformat(timespec="seconds"),
        "seconds": round(seconds, 2),
    }


def record_check(script: Path, args: tuple[str, ...] = CHECK_ARGS) -> dict:
    """``workshop check`` on ``script`` with ``args`` (2 ranks; ``"{ckpt}"`` in ``args``: a
    temporary folder, written ``CHECKPOINT_DIR``): its report as ``workshop check --json``
    writes it, its text, and the command."""
    from workshop import check

    with tempfile.TemporaryDirectory() as folder:
        given = tuple(a.replace("{ckpt}", folder) for a in args)
        report = check.check_script(script, np=NP, args=given, cwd=folder, quiet=True)
        found = report.to_dict()

        def here(text):
            # the machine's own paths mean nothing elsewhere: the script from the repository's
            # top, the temporary folder by its placeholder
            text = text.replace(folder, "CHECKPOINT_DIR")
            return text.replace(str(script.parent) + "/", _from_top(script.parent) + "/")

        checks = {
            name: {**value, "evidence": here(value["evidence"])}
            for name, value in found["checks"].items()
        }
        text = here(report.text())
        found |= {"checks": checks, "script": here(str(script))}
        for key in ("error", "traceback"):
            found[key] = here(found[key]) if found[key] else found[key]
    shown = [a.replace("{ckpt}", "CHECKPOINT_DIR") for a in args]
    command = ["workshop", "check", _from_top(script), "-np", str(NP), "--", *shown]
    return {"command": command, "report": found, "text": text}
