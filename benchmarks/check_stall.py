"""How soon ``workshop check`` names a stall, and what its observation costs lesson 02's check.

    python benchmarks/check_stall.py --before REV [--repeats 5] [--out DIR] [--lock FILE]

Each round runs, in rotating order:
- ``stall``: ``workshop check tests/check_scripts/torch_rank0_metric_allreduce.py
  --no-base-run --json`` (rank 0 alone allreduces the test accuracy: a stall). Measured: the
  time from the stall's start to the report (``stalled_for_s``: how long the oldest collective
  in flight had waited when the check stopped the ranks) and the whole check's wall time;
- ``lesson02-after``: ``workshop check`` of lesson 02's PyTorch solution as the lesson runs it
  (``--steps 10 --checkpoint DIR``, with the np=1 base run), with this tree's workshop;
- ``lesson02-before``: the same with the workshop of git revision ``--before`` (checked out
  into a temporary worktree and put first on ``PYTHONPATH``, for the ranks too).
Min / median / max over the rounds; ``after / before`` per round (same round, same load).
``--out DIR`` writes result.json with every run and the provenance; ``--lock FILE`` holds an
flock on FILE for each round, so that other work on a shared machine runs between rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _recording import flock_held, print_spreads, spread, started_now, write_result

from workshop.lessons.l02_first_program.edits import script_path

REPO = Path(__file__).resolve().parents[1]
STALL_SCRIPT = REPO / "tests" / "check_scripts" / "torch_rank0_metric_allreduce.py"
KINDS = ("stall", "lesson02-after", "lesson02-before")


def run_once(kind: str, before: Path, workdir: Path) -> dict:
    check = [sys.executable, "-m", "workshop.cli", "check"]
    env = dict(os.environ)
    if kind == "stall":
        command = [*check, str(STALL_SCRIPT), "--no-base-run", "--json"]
    else:
        ckpt = tempfile.mkdtemp(dir=workdir)
        solution = str(script_path("hvd_torch_solution.py"))
        command = [*check, solution, "--json", "--", "--steps", "10", "--checkpoint", ckpt]
        if kind == "lesson02-before":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(before), env.get("PYTHONPATH")]))
    start = time.monotonic()
    result = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    report = json.loads(result.stdout) if result.stdout.strip().startswith("{") else {}
    expected = 2 if kind == "stall" else 0
    ok = result.returncode == expected and (kind != "stall" or report.get("stalled") is True)
    if not ok:
        sys.stderr.write(f"{kind} exited {result.returncode}:\n{result.stdout[-2000:]}"
                         f"{result.stderr[-2000:]}\n")  # fmt: skip
    found = {"kind": kind, "seconds": round(seconds, 3), "ok": ok}
    if kind == "stall":
        found["stalled_for_s"] = report.get("stalled_for_s")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="git revision to compare with")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json")
    parser.add_argument("--lock", type=Path, default=None, help="flock this file for each round")
    args = parser.parse_args()
    runs = []
    started, load = started_now()
    with tempfile.TemporaryDirectory(prefix="check-stall-") as tmp:
        before = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(before),
                        args.before], check=True, capture_output=True)  # fmt: skip
        try:
            for repeat in range(args.repeats):
                shift = repeat % len(KINDS)
                with flock_held(args.lock):
                    for position, kind in enumerate(KINDS[shift:] + KINDS[:shift]):
                        found = run_once(kind, before, Path(tmp))
                        runs.append(found | {"round": repeat + 1, "position": position + 1})
                        print(f"round {repeat + 1}: {kind:<16} {found['seconds']:6.1f} s"
                              + (f", stall named after {found['stalled_for_s']} s"
                                 if kind == "stall" else ""), flush=True)  # fmt: skip
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force",
                            str(before)], capture_output=True)  # fmt: skip

    def seconds(kind: str, key: str = "seconds") -> list[float]:
        return [r[key] for r in runs if r["kind"] == kind and r.get(key) is not None]

    ratios = [
        after["seconds"] / before_run["seconds"]
        for after in runs
        if after["kind"] == "lesson02-after"
        for before_run in runs
        if before_run["kind"] == "lesson02-before" and before_run["round"] == after["round"]
    ]
    summary = {
        "stall: from its start to the report (s)": spread(seconds("stall", "stalled_for_s")),
        "stall: whole check (s)": spread(seconds("stall")),
        "lesson 02 check, this tree (s)": spread(seconds("lesson02-after")),
        f"lesson 02 check, {args.before} (s)": spread(seconds("lesson02-before")),
        "lesson 02 check, this tree / before (same round)": spread(ratios),
    }
    print(f"\nover {args.repeats} interleaved rounds:")
    print_spreads(summary)
    if args.out:
        record = {"before": args.before, "summary": summary, "runs": runs}
        write_result(args.out, record, started, load)
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
