"""Record data/'s older samples again through the recording path (issue 37).

The folders on ``data/quiet-pending.json`` were recorded before the quiet-machine gate
(``workshop.launch.quiet``). This script records each one again with the command its own
provenance names (``run.json``'s ``command``, ``sweep.json``'s ``command`` and ``history``,
a benchmark's ``command``), every run through the recording path: ``workshop run --record``
(or ``WORKSHOP_RECORD=1`` for recorders that start ``workshop run`` themselves),
``workshop sweep --record``, the capstone harness. A folder is recorded into a staging folder
and swapped into ``data/`` only when every run of it finished quietly; the old folder is kept
under ``~/.cache/horovod-workshop/replaced/<time>/`` (and in git), never lost. Files that are
not the recorder's output (README.md, PROVENANCE.md) are carried over for the recorder to
bring up to date.

    python scripts/record_samples.py --list               # what it would record, in order
    python scripts/record_samples.py sweeps/scaling-mnist runs/torch-mnist-gloo-np2 ...
    python scripts/record_samples.py                       # every pending folder (cluster: root)

Stop everything else first (tests, builds, notebooks): each run waits for a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
PENDING = DATA / "quiet-pending.json"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "horovod-workshop"
STAGING = CACHE / "recording"
#: The recorder's own output is replaced; these hand-written files are carried over.
CARRIED = ("README.md", "PROVENANCE.md")
#: Folders recorded by a program of their own rather than from run.json / sweep.json.
SPECIAL = {
    "sweeps/controllers-mnist",
    "benchmarks/cycle-time",
    "benchmarks/straggler-signal",
    "cluster/mnist-placement",
    "cluster/mpi-profiles",
}
ORDER = ("sweeps/", "runs/", "timelines/", "mpi/", "benchmarks/cycle-time", "capstone/",
         "cluster/", "benchmarks/")  # fmt: skip


def workshop(*args: str) -> list[str]:
    return [sys.executable, "-m", "workshop.cli", *args]


def replace_out(command: list[str], out: Path) -> list[str]:
    """``command`` with its ``--out`` value replaced by ``out`` (added when absent)."""
    command = list(command)
    if "--out" in command:
        command[command.index("--out") + 1] = str(out)
    else:
        command += ["--out", str(out)]
    return command


def run(argv: list[str], env: dict | None = None) -> None:
    print("+", " ".join(argv), flush=True)
    subprocess.run(argv, check=True, cwd=REPO, env={**os.environ, **(env or {})})


def record_run_folder(folder: str, stage: Path) -> None:
    """A single ``workshop run`` directory, from its run.json."""
    recorded = json.loads((DATA / folder / "run.json").read_text())
    command = replace_out(recorded["command"], stage.parent)
    if "--name" not in command:
        command += ["--name", stage.name]
    command[command.index("--name") + 1] = stage.name
    # settings given by environment rather than option (the response cache of one timeline)
    env = {k: v for k, v in recorded.get("env", {}).items() if k.startswith("HOROVOD_")}
    run(workshop(*command[1:]), env | {"WORKSHOP_RECORD": "1"})


def record_sweep_folder(folder: str, stage: Path) -> None:
    """A ``workshop sweep`` folder: the commands of its history, in order, then its last."""
    manifest = json.loads((DATA / folder / "sweep.json").read_text())
    commands = [*manifest.get("history", []), manifest["command"]]
    for command in commands:
        command = replace_out(command, stage)
        run(workshop(*command[1:], *([] if "--record" in command else ["--record"])))


def record_controllers(stage: Path) -> None:
    """Gloo vs MPI, three rounds, the order alternating (its README's loop)."""
    stage.mkdir(parents=True)
    for round_, order in ((1, ("gloo", "mpi")), (2, ("mpi", "gloo")), (3, ("gloo", "mpi"))):
        for controller in order:
            name = f"r{round_}-{controller}"
            run(workshop("run", "--out", str(stage), "--name", name, "--controller", controller,
                         "--data", "subset", "--threads-per-rank", "1", "--no-timeline",
                         "--epochs", "3", "--quiet", "--record"))  # fmt: skip


def record_benchmark(folder: str, stage: Path, result: str) -> None:
    """A benchmark script's folder, with its recorded command (``workshop run`` inside it
    records through the recording path: WORKSHOP_RECORD=1)."""
    command = json.loads((DATA / folder / result).read_text())["command"]
    run([sys.executable, *replace_out(command, stage)[1:]], {"WORKSHOP_RECORD": "1"})


def record_straggler(stage: Path) -> None:
    """The straggler benchmark, then its two confirmations on fresh runs (afterwards,
    ``python -m tools.diagnose_calibration --write`` recalibrates workshop diagnose)."""
    script = str(REPO / "benchmarks" / "straggler_signal.py")
    run([sys.executable, script, "--repeats", "5", "--out", str(stage)])
    for sub in ("confirmation", "confirmation-2"):
        run([sys.executable, script, "--repeats", "3", "--out", str(stage / sub)])


def record_capstone(folder: str, stage: Path) -> None:
    case = folder.split("/")[1]
    recorder = "workshop.lessons.l09_diagnose.record"
    run([sys.executable, "-m", recorder, case, "--out", str(stage.parent)])


def record_mpi_profiles(stage: Path) -> None:
    """MNIST over MPI with the profiler at 1, 1+1 and 2+2 ranks on 2 emulated nodes (1 Gbit/s)."""
    stage.mkdir(parents=True)
    run(workshop("cluster", "up", "--nodes", "2", "--link", "1gbit"))
    try:
        for np in (1, 2, 4):
            more = ["--oversubscribe"] if np == 4 else []
            run(workshop("cluster", "run", "--", "workshop", "run", "-np", str(np),
                         "--controller", "mpi", "--mpi-profile", "--timeline", "--epochs", "2",
                         "--steps-per-epoch", "30", "--out", str(stage), "--name", f"np{np}",
                         "--quiet", "--record", *more))  # fmt: skip
    finally:
        run(workshop("cluster", "down"))


def record(folder: str, stage: Path) -> None:
    if folder == "sweeps/controllers-mnist":
        record_controllers(stage)
    elif folder == "benchmarks/cycle-time":
        record_benchmark(folder, stage, "result.json")
    elif folder == "cluster/mnist-placement":
        record_benchmark(folder, stage, "benchmark.json")
    elif folder == "benchmarks/straggler-signal":
        record_straggler(stage)
    elif folder == "cluster/mpi-profiles":
        record_mpi_profiles(stage)
    elif folder.startswith("capstone/"):
        record_capstone(folder, stage)
    elif (DATA / folder / "sweep.json").exists():
        record_sweep_folder(folder, stage)
    elif (DATA / folder / "run.json").exists():
        record_run_folder(folder, stage)
    else:
        raise SystemExit(f"record_samples: no recipe for data/{folder}")


def swap_in(folder: str, stage: Path, stamp: str) -> None:
    """Move ``stage`` to data/<folder>; the old folder goes to the replaced/ cache."""
    for name in CARRIED:
        for old in (DATA / folder).rglob(name):
            new = stage / old.relative_to(DATA / folder)
            if new.parent.is_dir() and not new.exists():
                shutil.copy2(old, new)
    kept = CACHE / "replaced" / stamp / folder
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(DATA / folder, kept)
    shutil.move(stage, DATA / folder)
    pending = json.loads(PENDING.read_text())
    pending["folders"] = [f for f in pending["folders"] if f != folder]
    PENDING.write_text(json.dumps(pending, indent=2) + "\n")
    print(f"data/{folder}: recorded again (the old one: {kept})", flush=True)


def ordered(folders: list[str]) -> list[str]:
    def rank(folder: str) -> int:
        return next((i for i, p in enumerate(ORDER) if folder.startswith(p)), len(ORDER))

    return sorted(folders, key=lambda f: (rank(f), f))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", help="folders under data/ (default: the pending)")
    parser.add_argument("--list", action="store_true", help="print the folders and stop")
    args = parser.parse_args()
    pending = json.loads(PENDING.read_text())["folders"]
    folders = ordered(args.folders or pending)
    unknown = [f for f in folders if f not in pending]
    if unknown:
        parser.error(f"not on {PENDING.relative_to(REPO)}: {', '.join(unknown)}")
    if args.list:
        print("\n".join(folders))
        return 0
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for n, folder in enumerate(folders, start=1):
        stage = STAGING / stamp / folder
        if stage.exists():
            shutil.rmtree(stage)
        stage.parent.mkdir(parents=True, exist_ok=True)
        started = time.time()
        print(f"\n== [{n}/{len(folders)}] data/{folder}", flush=True)
        record(folder, stage)
        swap_in(folder, stage, stamp)
        print(f"== data/{folder}: {time.time() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
