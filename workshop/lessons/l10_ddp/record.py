"""Lesson 10's runs for real: lesson 02's DDP model under ``workshop run --script`` with a
torch.profiler trace per rank (``programs/ddp_buckets.py``, ``--profile-steps``), at DDP's
default bucket size or another one; and ``workshop check`` on the lesson's DDP script with a
mistake and on its fix.

What the lesson replays was made with these through the recording path (a quiet machine, the
other work measured): ``python scripts/record_lesson10.py`` writes ``data/ddp-lesson/``. With
``LIVE = True`` the notebook calls :func:`record_traces` itself.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parent / "programs"
BUCKETS_PROGRAM = PROGRAMS / "ddp_buckets.py"
MISTAKE = PROGRAMS / "ddp_torch_mistake.py"
NP = 2
#: Steps per run, and the profiled ones among them (after one skipped and one warm-up step:
#: workshop.check.profiled), as ``workshop run --script ... --profile-steps`` records them.
STEPS, PROFILE_STEPS = 40, 5
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


def script_args(bucket_cap_mb: float | None) -> list[str]:
    """The program's arguments: :data:`STEPS` steps, and the bucket size unless DDP's own."""
    cap = [] if bucket_cap_mb is None else ["--bucket-cap-mb", f"{bucket_cap_mb:g}"]
    return ["--steps", str(STEPS), *cap]


def run_command(target: Path, bucket_cap_mb: float | None) -> list[str]:
    """The ``workshop run`` command that writes the run directory ``target``."""
    return [
        "workshop", "run", "-np", str(NP), "--script", _from_top(BUCKETS_PROGRAM),
        "--profile-steps", str(PROFILE_STEPS), "--quiet", "--out", _from_top(target.parent),
        "--name", target.name, "--", *script_args(bucket_cap_mb),
    ]  # fmt: skip


def record_traces(target: Path, bucket_cap_mb: float | None = None) -> Path:
    """Run the DDP program once into a new run directory named like ``target`` (``-2`` and so
    on when it exists: nothing is overwritten), its traces in ``traces/``; returns it.

    Raises:
        workshop.launch.run.RunError: the run failed (the message names its logs).
    """
    from workshop.launch.run import RunConfig, run_one

    config = RunConfig(np=NP, script=str(BUCKETS_PROGRAM), profile_steps=PROFILE_STEPS,
                       script_args=" ".join(script_args(bucket_cap_mb)))  # fmt: skip
    command = run_command(target, bucket_cap_mb)
    return run_one(config, out_dir=target.parent, name=target.name, quiet=True, command=command)


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
