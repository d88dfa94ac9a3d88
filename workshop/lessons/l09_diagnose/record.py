"""Record the capstone's cases (lesson 09) again: real ``workshop run`` runs, each case's broken
and fixed diagnosis runs and its rounds of repeats, through the recording harness
(``workshop.launch.harness``), into ``data/capstone/<case>/`` with provenance and a README.

Re-record a case (about 6 minutes on 2 cores, 12 runs)::

    python -m workshop.lessons.l09_diagnose.record CASE [--replace]

The cases themselves (what each one injects) and the grading: :mod:`.capstone`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

from workshop.launch.harness import (
    HOGS,
    RUN_SHAPE,
    record_run,
    stop_on_sigterm,
    under_cpu_lock,
)
from workshop.lessons.l09_diagnose.capstone import CASES, FOLDER, PROBLEMS, REPEATS, CaseSpec
from workshop.paths import data_dir

#: What every run of every case shares: the harness's job (2 ranks, PyTorch, MNIST's offline
#: subset, 3 short epochs, Gloo). The response cache is off in every run (broken and fixed
#: alike) so that the timeline has every rank's readiness tick at every step, not only at the
#: first one.
COMMON = (*RUN_SHAPE, "--cache-capacity", "0")
#: The diagnosis runs also mark the background cycles in their timeline.
TIMELINE = ("--mark-cycles",)
#: Where the straggler case puts its ranks and the competing busy processes.
RANK_CORES = {0: 0, 1: 1}
HOG_CORE = 1
#: Every run goes through the recording path of data/ (``workshop.launch.quiet``, via
#: ``workshop.launch.harness.record_run``): a run during which other work took more than
#: 0.05 cores is recorded again, 5 attempts at most, 8 for the straggler case: the scheduler
#: moves other work off the busy core onto the other rank's, which hides the straggler.


def run_command(spec: CaseSpec, variant: str, out: Path, name: str, seed: int, timeline: bool):
    """The ``workshop run`` command line of one run of a case."""
    options = spec.broken if variant == "broken" else spec.fixed
    command = ["workshop", "run", *COMMON, *options, "--seed", str(seed)]
    command += list(TIMELINE) if timeline else ["--no-timeline"]
    return command + ["--out", str(out), "--name", name]


def _record_run(spec: CaseSpec, variant: str, out: Path, name: str, seed: int, timeline: bool):
    """One run through the recording harness (``workshop.launch.harness``): for the straggler
    case the ranks bound to :data:`RANK_CORES` and, in broken runs, the busy processes."""
    command = run_command(spec, variant, out, name, seed, timeline)
    straggler = {}
    if spec.straggler:
        hog = HOG_CORE if variant == "broken" else None
        straggler = {"rank_cores": RANK_CORES, "hog_core": hog, "hogs": HOGS}
    attempts = 8 if spec.straggler else 5
    record = record_run(command, out / name, quiet=True, attempts=attempts, **straggler)
    return {"name": name, "variant": variant, "seed": seed, "timeline": timeline, **record}


def plan(repeats: int) -> list[tuple[str, str, int, bool]]:
    """(variant, name, seed, timeline) of a case's runs: the two diagnosis runs, then
    ``repeats`` rounds of one broken and one fixed run, the order alternating per round
    (broken-1, fixed-1, fixed-2, broken-2, broken-3, ...), seed 42 + round."""
    runs = [("broken", "broken", 42, True), ("fixed", "fixed", 42, True)]
    for i in range(1, repeats + 1):
        pair = [("broken", f"repeats/broken-{i}"), ("fixed", f"repeats/fixed-{i}")]
        for variant, name in pair if i % 2 else pair[::-1]:
            runs.append((variant, name, 42 + i, False))
    return runs


def record_case(case: str, root: Path, *, repeats: int = REPEATS, replace: bool = False) -> Path:
    """Record the case ``case`` of :data:`CASES` into ``root/case`` (real runs).

    Raises:
        FileExistsError: the folder exists and ``replace`` is False.
    """
    from workshop.launch.record import provenance

    spec = CASES[case]
    folder = root / case
    if folder.exists():
        if not replace:
            raise FileExistsError(f"{folder} exists: pass --replace to record it again")
        shutil.rmtree(folder)
    (folder / "repeats").mkdir(parents=True)
    # commands name the folder as seen from here (data/capstone/... from the repository)
    inside = folder.resolve().is_relative_to(Path.cwd())
    where = Path(os.path.relpath(folder)) if inside else folder
    recorded_at = datetime.now(UTC).isoformat(timespec="seconds")
    runs = [
        _record_run(spec, variant, where, name, seed, timeline)
        for variant, name, seed, timeline in plan(repeats)
    ]
    injected = {
        "problem": spec.problem,
        "title": PROBLEMS[spec.problem].title,
        "fix": PROBLEMS[spec.problem].fix,
        "broken_options": list(spec.broken),
        "fixed_options": list(spec.fixed),
        "measure": spec.measure,
    }
    if spec.straggler:
        injected["how"] = (
            f"both runs: every thread of rank r bound to core RANK_CORES[r] {RANK_CORES} "
            f"(os.sched_setaffinity, every 0.1 s); broken runs only: {HOGS} busy Python loops "
            f"bound to core {HOG_CORE} for the whole run"
        )
    payload = {
        "case": case,
        "injected": injected,
        "recorded_at": recorded_at,
        "under_cpu_lock": under_cpu_lock(),
        "runs": runs,
        "recorder": f"python -m workshop.lessons.l09_diagnose.record {case}",
        **provenance(),
    }
    (folder / "provenance.json").write_text(json.dumps(payload, indent=2) + "\n")
    (folder / "README.md").write_text(_readme(case, payload))
    return folder


def _readme(case: str, payload: dict) -> str:
    host, versions = payload["host"], payload["versions"]
    lines = [
        f"# Capstone {case}: recorded runs to diagnose (lesson 09)",
        "",
        f"Real runs of `workshop run`, recorded by `{payload['recorder']}` on "
        f"{payload['recorded_at']}: {host['cpu']}, {host['cores']} cores, "
        f"{host['memory_gb']} GB; Python {versions['python']}, torch {versions['torch']}, "
        f"Horovod {versions['horovod']}, {versions['mpi']}. Nothing here was edited after the "
        "run; `provenance.json` has every command, the load average before and after each "
        "run, and the fault that was injected.",
        "",
        "- `broken/`: the run to diagnose (timeline with cycle marks, metrics, logs, run.json);",
        "- `fixed/`: the same run with the fix (timeline too);",
        "- `repeats/`: one broken and one fixed run per round without a timeline, the order "
        "alternating per round, seed 42 + round, for the gain and its spread.",
        "",
        "**Spoiler**: below, the fault and the commands name the problem. Diagnose from the "
        "files first.",
        "",
        f"Fault: {payload['injected']['title']}.",
    ]
    if "how" in payload["injected"]:
        lines.append(f"Injected: {payload['injected']['how']}.")
    lines += ["", *[f"    {' '.join(run['command'])}" for run in payload["runs"][:2]]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help=f"some of {', '.join(CASES)} (default: all)")
    parser.add_argument("--out", type=Path, default=data_dir() / FOLDER)
    parser.add_argument("--repeats", type=int, default=REPEATS)
    parser.add_argument("--replace", action="store_true", help="record existing cases again")
    args = parser.parse_args(argv)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; there are {', '.join(CASES)}")
    stop_on_sigterm()
    for case in args.cases or list(CASES):
        record_case(case, args.out, repeats=args.repeats, replace=args.replace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
