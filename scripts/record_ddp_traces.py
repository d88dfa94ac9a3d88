"""Record data/ddp-traces/: torch.profiler traces of a small DDP run, one per rank (issue 58).

Each folder is one torchrun run of tests/check_scripts/ddp_profiled.py (2 CPU ranks, Gloo,
3 profiled steps after 1 skipped and 1 warm-up step), made through the recording path
(``workshop.launch.quiet.quietly``: it waits for a quiet machine, measures the CPU other work
took during the run, and records again when that was over the threshold). Beside the traces,
``recording.json``: the exact command, np, versions, host, start time, the load average
(``os.getloadavg``, what ``uptime`` shows) before and after, and the quiet record.

    python scripts/record_ddp_traces.py                     # every folder of FOLDERS
    python scripts/record_ddp_traces.py ddp-mlp-gloo-np2    # one

Stop everything else first (tests, builds, notebooks). A folder that exists is kept.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from workshop.launch.quiet import quietly  # noqa: E402

OUT = REPO / "data" / "ddp-traces"
SCRIPT = Path("tests/check_scripts/ddp_profiled.py")
NP = 2
#: folder -> the script's options
FOLDERS = {
    "ddp-mlp-gloo-np2": [],
    "ddp-mlp-gloo-np2-slow-rank1": ["--slow-rank", "1", "--slow-ms", "40"],
}


def _machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")),
               platform.machine())  # fmt: skip
    memory = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal"))  # fmt: skip
    return f"{os.cpu_count()} cores ({cpu}), {memory / 2**20:.1f} GiB, {platform.platform()}"


def _versions() -> dict:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__}


def _record(name: str, options: list[str], out: Path = OUT) -> Path:
    target = out / name
    if target.exists():
        print(f"{target} exists, kept (remove it to record it again)")
        return target
    staging = Path(tempfile.mkdtemp(prefix=f"{name}-"))

    def make() -> dict:
        traces = staging / "traces"
        shutil.rmtree(traces, ignore_errors=True)
        launch = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(NP)]
        command = [sys.executable, *launch, str(SCRIPT), str(traces), *options]
        started = datetime.now(UTC).isoformat(timespec="seconds")
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise SystemExit(f"{name}: torchrun failed:\n{result.stdout}\n{result.stderr}")
        shown = ["python", *launch, str(SCRIPT), f"data/ddp-traces/{name}", *options]
        return {"command": " ".join(shown), "started_utc": started}

    run, quiet = quietly(make, label=lambda _: name, report=print)
    record = {
        **run,
        "np": NP,
        "backend": "gloo",
        "host": platform.node(),
        "machine": _machine(),
        "versions": _versions(),
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "recording": quiet,
    }
    target.mkdir(parents=True)
    for trace in sorted((staging / "traces").glob("rank*.json")):
        shutil.move(str(trace), target / trace.name)
    (target / "recording.json").write_text(json.dumps(record, indent=2) + "\n")
    shutil.rmtree(staging)
    print(f"recorded {target}: quiet {quiet['quiet']}, other work {quiet['foreign_cores']} cores")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"folders to record: {', '.join(FOLDERS)}")
    args = parser.parse_args()
    unknown = [n for n in args.names if n not in FOLDERS]
    if unknown:
        parser.error(f"unknown folder(s) {unknown}; known: {', '.join(FOLDERS)}")
    for name in args.names or FOLDERS:
        _record(name, FOLDERS[name])
    return 0


if __name__ == "__main__":
    sys.exit(main())
