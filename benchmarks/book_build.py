"""How long ``bash scripts/book.sh`` takes to build the workshop book from a fresh clone.

One fresh clone of the commit (``git clone`` of this checkout), set up once, untimed, with
``bash scripts/setup.sh --no-run``; then each round removes ``book/_build`` (Sphinx would
otherwise rebuild only what changed) and times ``bash scripts/book.sh``: the set-up check, the
replay of the ten lessons and the Sphinx build. The replay and Sphinx seconds come from the
command's last line. Rounds run one after another: run it under the CPU lock.

    flock /tmp/workshop-cpu.lock python benchmarks/book_build.py [--repeats 3] \
        [--commit HEAD] [--clone DIR] [--out data/benchmarks/book-build]

``--clone DIR``: an already set-up fresh clone to build in (no clone, no set-up).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _recording import print_spreads, spread, started_now, write_result

from workshop.paths import REPO_DIR

# workshop book's last line: "built 10 lessons in 75 s (replays 61 s, Sphinx 14 s): open ..."
BUILT = re.compile(r"built (\d+) lessons in \d+ s \(replays (\d+) s, Sphinx (\d+) s\)")


def one_build(clone: Path, log: Path) -> dict:
    shutil.rmtree(clone / "book" / "_build", ignore_errors=True)
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(
            ["bash", "scripts/book.sh"], cwd=clone, stdout=out, stderr=subprocess.STDOUT
        )
    wall = time.perf_counter() - start
    found = BUILT.search(log.read_text())
    pages = sorted((clone / "book" / "_build" / "html" / "notebooks").glob("*.html"))
    return {
        "exit_code": done.returncode,
        "wall_s": wall,
        "lessons": int(found[1]) if found else None,
        "replay_s": int(found[2]) if found else None,
        "sphinx_s": int(found[3]) if found else None,
        "lesson_pages": len(pages),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--commit", default="HEAD", help="commit of this checkout to clone")
    parser.add_argument("--clone", type=Path, help="an already set-up fresh clone to use")
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json")
    args = parser.parse_args()
    started, load = started_now()
    work = Path(tempfile.mkdtemp(prefix="workshop-book-build-"))
    if args.clone:
        clone = args.clone.resolve()
    else:
        clone = work / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO_DIR), str(clone)], check=True)
        subprocess.run(["git", "checkout", "-q", args.commit], cwd=clone, check=True)
        print(f"fresh clone in {clone}; setting up (untimed)...", flush=True)
        setup = subprocess.run(["bash", "scripts/setup.sh", "--no-run"], cwd=clone, check=False)
        if setup.returncode:
            raise SystemExit(f"setup failed (exit {setup.returncode}) in {clone}")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    rounds = []
    for index in range(args.repeats):
        row = {"round": index, **one_build(clone, work / f"book-{index}.log")}
        rounds.append(row)
        print(
            f"round {index + 1}/{args.repeats}: {row['wall_s']:.1f} s (replays "
            f"{row['replay_s']} s, Sphinx {row['sphinx_s']} s), {row['lesson_pages']} lesson "
            f"pages, exit {row['exit_code']}",
            flush=True,
        )
    failed = [r["round"] for r in rounds if r["exit_code"] or r["lesson_pages"] != 10]
    summary = {
        what: spread([r[what] for r in rounds])
        for what in ("wall_s", "replay_s", "sphinx_s")
        if all(r[what] is not None for r in rounds)
    }
    print_spreads(summary, "s")
    if args.out:
        record = {"what": __doc__.splitlines()[0], "commit": commit, "rounds": rounds}
        write_result(args.out, {**record, "summary": summary}, started, load)
    if failed:
        print(f"rounds {failed} failed: logs in {work}", file=sys.stderr)
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
