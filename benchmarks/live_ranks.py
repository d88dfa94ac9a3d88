"""Start and stop times of live notebook ranks (``workshop.launch.live_ranks``), over repeated
rounds.

Each round starts ``--np`` ranks (IPython Parallel MPI engines with Horovod initialised), runs
one allreduce on them, and stops them; it checks that nothing is left running. Prints min /
median / max of the start and the stop seconds::

    python benchmarks/live_ranks.py --np 2 --repeats 5 [--out FOLDER]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None, help="folder for result.json")
    args = parser.parse_args()
    from workshop.launch import live_ranks

    rounds = []
    for _ in range(args.repeats):
        began = time.perf_counter()
        cluster = live_ranks.start(np=args.np)
        start_s = time.perf_counter() - began
        cluster.view.execute("import torch\nx = hvd.allreduce(torch.ones(1)).item()")
        assert cluster.view.pull("x") == [1.0] * args.np
        pids = [*cluster.pids["engines"], cluster.pids["controller"], cluster.watchdog.pid]
        stop_s = cluster.stop()
        time.sleep(1)
        left = [
            p
            for p in pids
            if Path(f"/proc/{p}").exists()
            and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        ]
        rounds.append({"start_s": start_s, "stop_s": stop_s, "left_running": left})
    summary = {}
    for key in ("start_s", "stop_s"):
        values = [r[key] for r in rounds]
        summary[key] = {"min": min(values), "median": statistics.median(values),
                        "max": max(values)}  # fmt: skip
        print(f"{key}: min {min(values):.1f} / median {statistics.median(values):.1f} / "
              f"max {max(values):.1f} s ({len(values)} rounds, np={args.np})")  # fmt: skip
    print(f"left running after stop: {sum(len(r['left_running']) for r in rounds)} processes")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "result.json").write_text(json.dumps({
            "command": [Path(sys.executable).name, *sys.argv], "np": args.np,
            "machine": platform.node(), "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "rounds": rounds, "summary": summary}, indent=2) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
