"""The test command's wall time from a fresh clone, beside this machine's speed in the same run.

This machine is shared: the same work took up to 40 % more CPU time in one hour than in
another (``import torch``: 1.45 CPU-s user + system, three hours later 2.0). So each round
measures the machine's speed just before and just after the test command, with a probe of the
suite's own main cost (a rank's start-up: ``import torch``, median of 3), and the result gives
the test command's time both as measured and in probes (wall seconds / probe seconds),
which compares rounds taken at different speeds.

One fresh clone of the commit (``git clone`` of this checkout), set up once untimed with the
README's first command (``CI=true bash scripts/setup.sh``); then each round times the README's
test command as CI runs it (``CI=true bash .ci/run``) and keeps its last line ("N passed in
...") and its CPU time (user + system of the processes it waits for: not the ranks the
emulated cluster's sshd starts). Rounds run one after
another (nothing else of ours runs beside them: run it under the CPU lock).

    flock /tmp/workshop-cpu.lock python benchmarks/test_command.py [--repeats 5] \
        [--commit HEAD] [--out data/benchmarks/test-command]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _recording import print_spreads, spread, started_now, write_result

from workshop.paths import REPO_DIR

PROBE = "import torch"


def children_cpu_s() -> float:
    """User + system CPU seconds of this process's ended children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def probe_s(python: Path) -> float:
    """CPU seconds of ``python -c PROBE`` (median of 3): the machine's speed now."""
    times = []
    for _ in range(3):
        before = children_cpu_s()
        subprocess.run([str(python), "-c", PROBE], check=True)
        times.append(children_cpu_s() - before)
    return statistics.median(times)


def timed(argv: list[str], cwd: Path, log: Path) -> dict:
    """Run ``argv`` (CI=true) with its output in ``log``: wall and CPU seconds, exit code, and
    the last line of its output."""
    env = {**os.environ, "CI": "true"}
    before, start = children_cpu_s(), time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    code = done.returncode
    wall = time.perf_counter() - start
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    return {
        "exit_code": code,
        "wall_s": wall,
        "cpu_s": children_cpu_s() - before,
        "last_line": lines[-1].strip("= ") if lines else "",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--commit", default="HEAD", help="commit of this checkout to clone")
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json")
    args = parser.parse_args()
    started, load = started_now()
    commit = subprocess.run(
        ["git", "rev-parse", args.commit], cwd=REPO_DIR, capture_output=True, text=True, check=True
    ).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="workshop-test-command-"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO_DIR), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
    print(f"fresh clone of {commit[:10]} in {clone}; setting up (untimed)...", flush=True)
    setup = timed(["bash", "scripts/setup.sh"], clone, work / "setup.log")
    if setup["exit_code"]:
        raise SystemExit(f"setup failed ({setup['last_line']}): see {work / 'setup.log'}")
    python = clone / ".venv" / "bin" / "python"
    rounds = []
    for index in range(args.repeats):
        before = probe_s(python)
        row = timed(["bash", ".ci/run"], clone, work / f"test-{index}.log")
        after = probe_s(python)
        row = {"round": index, **row, "probe_s_before": before, "probe_s_after": after}
        row["wall_in_probes"] = row["wall_s"] / ((before + after) / 2)
        rounds.append(row)
        print(
            f"round {index + 1}/{args.repeats}: {row['wall_s'] / 60:.2f} min "
            f"({row['cpu_s']:.0f} CPU-s), probe {before:.2f} -> {after:.2f} s; "
            f"exit {row['exit_code']}: {row['last_line']}",
            flush=True,
        )
    failed = [r["round"] for r in rounds if r["exit_code"]]
    summary = {
        what: spread([r[what] for r in rounds])
        for what in ("wall_s", "cpu_s", "probe_s_before", "wall_in_probes")
    }
    print_spreads(summary)
    if args.out:
        record = {
            "what": __doc__.splitlines()[0],
            "commit": commit,
            "probe": f"python -c {PROBE!r}, CPU seconds, median of 3",
            "setup": setup,
            "rounds": rounds,
            "summary": summary,
        }
        write_result(args.out, record, started, load)
    if failed:
        print(f"rounds {failed} failed: logs in {work}", file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
