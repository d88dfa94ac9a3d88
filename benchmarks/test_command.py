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

Where the time goes: each round's pytest also writes a JUnit XML file (``PYTEST_ADDOPTS``
adds ``--junitxml``), whose per-test times (setup + call + teardown, so a shared fixture's
start counts in the first test that asks for it) the round keeps as ``durations``: the slowest
tests (and those that took the most CPU: tests/conftest.py keeps each test's CPU seconds, its
own and those of the processes it waited for, as the JUnit property ``cpu_s``), and the totals
per test file and per marker (live, notebook, browser; "other" for a test with none of
them), with each test's markers read from one collection of the clone, untimed, after the
first round (which installs the test tools).
The two xdist workers run side by side: the per-test seconds add up to more than the wall time.

    flock /tmp/workshop-cpu.lock python benchmarks/test_command.py [--repeats 5] \
        [--commit HEAD] [--out data/benchmarks/test-command] [--top 40]

``--summarize JUNIT.xml`` only summarises a JUnit file of a run in this checkout (e.g.
``python -m pytest ... --junitxml=/tmp/j.xml``) the same way, and prints it; nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

from _recording import print_spreads, spread, started_now, write_result

from workshop.paths import REPO_DIR

PROBE = "import torch"
# The markers a test's time is counted under (pyproject.toml's markers); "other": none of them.
MARKERS = ("live", "notebook", "browser")
TOP = 40
# A pytest plugin, loaded into one collection of the clone: each test id and its markers.
_MARKERS_PLUGIN = """\
import json, os


def pytest_collection_finish(session):
    found = {item.nodeid: sorted({m.name for m in item.iter_markers()}) for item in session.items}
    with open(os.environ["WORKSHOP_MARKERS_OUT"], "w") as out:
        json.dump(found, out)
"""


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


def timed(argv: list[str], cwd: Path, log: Path, env: dict | None = None) -> dict:
    """Run ``argv`` (CI=true, and ``env``) with its output in ``log``: wall and CPU seconds,
    exit code, and the last line of its output."""
    env = {**os.environ, "CI": "true", **(env or {})}
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


def test_markers(python: Path, checkout: Path, work: Path) -> dict[str, list[str]]:
    """Each test id of ``checkout`` and its markers, from one collection (``--collect-only``)
    by ``python`` there."""
    (work / "workshop_markers_plugin.py").write_text(_MARKERS_PLUGIN)
    out = work / "markers.json"
    path = os.pathsep.join(filter(None, [str(work), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "WORKSHOP_MARKERS_OUT": str(out)}
    command = [str(python), "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               "-p", "workshop_markers_plugin"]  # fmt: skip
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode or not out.exists():
        raise SystemExit(f"collecting the tests failed:\n{done.stdout[-2000:]}{done.stderr}")
    return json.loads(out.read_text())


def junit_key(nodeid: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit XML gives the test ``nodeid`` (its
    ``mangle_test_address``: the file's path dotted, without ``.py``)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def durations(junit: Path, markers: dict[str, list[str]], top: int = TOP) -> dict:
    """Where a round's time went, from its JUnit XML: the number of tests and their seconds in
    all (``tests``, ``sum_s``), the ``top`` slowest tests (test id, seconds, markers), and the
    totals per test file (slowest first) and per marker (a test counts under each of its
    markers, or under "other")."""
    by_key = {junit_key(nodeid): nodeid for nodeid in markers}

    def kinds_of(nodeid: str) -> list[str]:
        return [m for m in MARKERS if m in markers.get(nodeid, ())] or ["other"]

    tests = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        nodeid = by_key.get(key) or "::".join(
            [key[0].replace(".", "/") + ".py", key[1]]
        )  # not collected now: its file as JUnit names it
        ends = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        outcome = ends[0] if ends else "passed"
        cpu = [p.get("value") for p in case.iter("property") if p.get("name") == "cpu_s"]
        cpu_s = float(cpu[0]) if cpu else 0.0  # tests/conftest.py's cpu_s; 0 in older runs
        tests.append((nodeid, float(case.get("time") or 0.0), outcome, cpu_s))
    files: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    kinds: dict[str, list[float]] = {kind: [0, 0.0, 0.0] for kind in (*MARKERS, "other")}
    for nodeid, seconds, _, cpu_s in tests:
        for total in (files[nodeid.split("::")[0]], *(kinds[k] for k in kinds_of(nodeid))):
            total[0] += 1
            total[1] += seconds
            total[2] += cpu_s

    def row(nodeid: str, seconds: float, cpu_s: float) -> dict:
        return {"test": nodeid, "s": round(seconds, 2), "cpu_s": cpu_s,
                "markers": kinds_of(nodeid)}  # fmt: skip

    return {
        "tests": len(tests),
        "sum_s": round(sum(test[1] for test in tests), 2),
        "sum_cpu_s": round(sum(test[3] for test in tests), 2),
        "not_passed": sorted(test[0] for test in tests if test[2] != "passed"),
        "top": [row(n, s, c) for n, s, _, c in sorted(tests, key=lambda t: -t[1])[:top]],
        "top_cpu": [row(n, s, c) for n, s, _, c in sorted(tests, key=lambda t: -t[3])[:top]],
        "per_file": [
            {"file": name, "tests": count, "s": round(seconds, 2), "cpu_s": round(cpu_s, 2)}
            for name, (count, seconds, cpu_s) in sorted(files.items(), key=lambda f: -f[1][1])
        ],
        "per_marker": {
            kind: {"tests": count, "s": round(seconds, 2), "cpu_s": round(cpu_s, 2)}
            for kind, (count, seconds, cpu_s) in kinds.items()
        },
    }


def print_durations(found: dict, top: int = 25, files: int = 25) -> None:
    """The slowest tests and files, and the totals per marker, one line each."""
    print(
        f"{found['tests']} tests, {found['sum_s']:.0f} s in all (both workers' seconds), "
        f"{found.get('sum_cpu_s', 0):.0f} CPU-s"
    )
    for kind, total in found["per_marker"].items():
        cpu_s = total.get("cpu_s", 0)
        print(f"  {kind}: {total['tests']} tests, {total['s']:.0f} s, {cpu_s:.0f} CPU-s")
    for key, what in (("top", "slowest"), ("top_cpu", "most CPU")):
        print(f"{what}: {top} tests (wall s, CPU-s):")
        for row in found.get(key, [])[:top]:
            print(
                f"  {row['s']:7.1f} {row.get('cpu_s', 0):7.1f}  {row['test']}  "
                f"{','.join(row['markers'])}"
            )
    print(f"slowest {files} files (wall s, CPU-s):")
    for row in found["per_file"][:files]:
        cpu_s = row.get("cpu_s", 0)
        print(f"  {row['s']:7.1f} {cpu_s:7.1f}  {row['tests']:4d} tests  {row['file']}")
    if found["not_passed"]:
        print(f"not passed: {', '.join(found['not_passed'])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--commit", default="HEAD", help="commit of this checkout to clone")
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json")
    parser.add_argument("--top", type=int, default=TOP, help="slowest tests kept per round")
    parser.add_argument(
        "--summarize",
        type=Path,
        default=None,
        metavar="JUNIT",
        help="only summarise this JUnit XML of a run in this checkout",
    )
    args = parser.parse_args()
    if args.summarize:
        with tempfile.TemporaryDirectory() as work:
            markers = test_markers(Path(sys.executable), REPO_DIR, Path(work))
        print_durations(durations(args.summarize, markers, args.top))
        return 0
    started, load = started_now()
    commit = subprocess.run(
        ["git", "rev-parse", args.commit], cwd=REPO_DIR, capture_output=True, text=True, check=True
    ).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="workshop-test-command-"))
    # readable by every account, as a clone is: the room's tests import the clone's package as
    # a second user (mkdtemp makes the folder the owner's alone)
    work.chmod(0o755)
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO_DIR), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", commit], cwd=clone, check=True)
    print(f"fresh clone of {commit[:10]} in {clone}; setting up (untimed)...", flush=True)
    setup = timed(["bash", "scripts/setup.sh"], clone, work / "setup.log")
    if setup["exit_code"]:
        raise SystemExit(f"setup failed ({setup['last_line']}): see {work / 'setup.log'}")
    python = clone / ".venv" / "bin" / "python"
    # the test command installs the test tools on its first run (scripts/test.sh: setup.sh
    # --test), so the tests' markers are collected once that round has run, untimed
    markers = None
    rounds = []
    for index in range(args.repeats):
        junit = work / f"junit-{index}.xml"
        addopts = f"{os.environ.get('PYTEST_ADDOPTS', '')} --junitxml={junit}".strip()
        before = probe_s(python)
        row = timed(["bash", ".ci/run"], clone, work / f"test-{index}.log",
                    env={"PYTEST_ADDOPTS": addopts})  # fmt: skip
        after = probe_s(python)
        row = {"round": index, **row, "probe_s_before": before, "probe_s_after": after}
        row["wall_in_probes"] = row["wall_s"] / ((before + after) / 2)
        if junit.exists():  # not when ruff failed before pytest started
            markers = markers or test_markers(python, clone, work)
            row["durations"] = durations(junit, markers, args.top)
        rounds.append(row)
        print(
            f"round {index + 1}/{args.repeats}: {row['wall_s'] / 60:.2f} min "
            f"({row['cpu_s']:.0f} CPU-s), probe {before:.2f} -> {after:.2f} s; "
            f"exit {row['exit_code']}: {row['last_line']}",
            flush=True,
        )
    if rounds and "durations" in rounds[0]:
        print("round 1 (the first run in the fresh clone), where the time went:")
        print_durations(rounds[0]["durations"])
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
